"""Every pin has a manager, digests get pinned, and pins that must move together do.

Renovate itself says what it would manage: ``scripts/renovate extract`` runs its extraction
offline (the local platform, a dry run that only extracts, no look-ups) and applies
``renovate.json``'s package rules to each dependency with Renovate's own code. These tests
compare that with the pins the repository declares (:func:`ci.pins.declared_pins`).
"""

from __future__ import annotations

import fcntl
import fnmatch
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import pytest

from components import image_builds, versions
from components.platform import validated_config
from synth.chart_pods import CHART_CHOSEN_IMAGES
from synth.scan import WAIVERS, load_waivers
from synth.stackfile import REPOSITORY_ROOT, load_stack
from synth.yamlio import load_yaml
from tests import pins
from tests.conftest import STACKS
from tests.pins import MOVES_TOGETHER, WITHOUT_A_MANAGER, Pin, declared_pins

NOT_PINS: Final = {"unspecified-version", "contains-variable"}
"""Renovate's skip reasons for what is not a pin: an apt package without a version, a FROM
that names a build argument (the workflow passes the base)."""


def _extract(out: Path) -> None:
    done = subprocess.run(
        [str(REPOSITORY_ROOT / "scripts" / "renovate"), "extract", str(out)],
        cwd=REPOSITORY_ROOT, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (
        "scripts/renovate extract failed (it installs Node.js and Renovate with npm on first "
        f"use):\n{done.stdout}\n{done.stderr}"
    )


@pytest.fixture(scope="session")
def renovate_extraction(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The directory ``scripts/renovate extract`` wrote (extract.json, groups.json).

    Extracted once per run: the pytest-xdist workers share the run's directory and a lock.
    """
    base = tmp_path_factory.getbasetemp()
    out = (base.parent if hasattr(request.config, "workerinput") else base) / "renovate"
    out.mkdir(exist_ok=True)
    with (out / "extract.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "groups.json").exists():
            _extract(out)
    return out


@pytest.fixture(scope="session")
def renovate_records(renovate_extraction: Path) -> list[dict[str, Any]]:
    """Each dependency Renovate extracts, with the group and settings its package rules give."""
    records: list[dict[str, Any]] = json.loads((renovate_extraction / "groups.json").read_text())
    return [record for record in records if record["skipReason"] not in NOT_PINS]


def _renovate_config() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(pins.RENOVATE_CONFIG.read_text())
    return config


def _addon_minor(record: dict[str, Any]) -> str | None:
    if record["datasource"] != "aws-eks-addon":
        return None
    minor: str = json.loads(record["packageName"])["kubernetesVersion"]
    return minor


def _record_names(record: dict[str, Any]) -> set[str]:
    """The names a declared pin may carry for this dependency."""
    names = {record["depName"], record["packageName"]}
    minor = _addon_minor(record)
    if minor:
        names = {f"{record['depName']}@{minor}"}
    return {name for name in names if name}


def _value(value: str | None) -> str:
    return (value or "").removeprefix("==")


def _is_extracted(pin: Pin, records: Iterable[dict[str, Any]]) -> bool:
    return any(
        record["packageFile"] == pin.file
        and _value(record["currentValue"]) == pin.value
        and (
            pin.name.lower() in {name.lower() for name in _record_names(record)}
            # a recipe's vendor version: the manager's match names the ARG
            or f"ARG {pin.name}=" in (record["replaceString"] or "")
        )
        for record in records
    )


@pytest.mark.slow
def test_every_pin_has_a_manager(renovate_records: list[dict[str, Any]]) -> None:
    pins = declared_pins()
    assert len(pins) > 150, "the inventory of pins lost a whole source"
    unmanaged = [pin for pin in pins if not _is_extracted(pin, renovate_records)]
    unexplained = [pin for pin in unmanaged if pin.name not in WITHOUT_A_MANAGER]
    assert unexplained == [], (
        "pins no Renovate manager extracts (add a manager in renovate.json, or say in "
        "tests/pins.py WITHOUT_A_MANAGER why none can; Renovate's local platform reads "
        "only files git tracks):\n  " + "\n  ".join(map(str, unexplained))
    )
    # and every exemption is still needed: a pin it names exists and still has no manager
    stale = sorted(set(WITHOUT_A_MANAGER) - {pin.name for pin in unmanaged})
    assert stale == [], f"WITHOUT_A_MANAGER names pins that are gone or managed now: {stale}"


@pytest.mark.slow
def test_every_extracted_dependency_is_a_declared_pin(
    renovate_records: list[dict[str, Any]],
) -> None:
    # A manager that matches something that is not a pin would open pull requests against it.
    pins = declared_pins()
    strays = [
        f"{r['packageFile']}: {r['depName']} {r['currentValue']} ({r['manager']})"
        for r in renovate_records
        if r["enabled"] and not any(_is_extracted(pin, [r]) for pin in pins)
    ]
    assert strays == []


@pytest.mark.slow
def test_images_are_pinned_by_digest_and_charts_are_not(
    renovate_records: list[dict[str, Any]],
) -> None:
    images = [r for r in renovate_records if r["datasource"] == "docker" and r["enabled"]]
    charts = [r for r in images if r["depType"] == "helm-chart"]
    containers = [r for r in images if r["depType"] != "helm-chart"]
    assert len(charts) >= 10 and len(containers) >= 12
    assert [r["depName"] for r in containers if not r["pinDigests"]] == []
    # Helm takes a chart version; a digest there would break every release.
    assert [r["depName"] for r in charts if r["pinDigests"]] == []
    # The actions are pinned to commits as well (the release stays in a comment).
    actions = [r for r in renovate_records if r["depType"] == "action"]
    assert actions and all(r["pinDigests"] for r in actions)


@pytest.mark.slow
def test_an_image_without_a_digest_gets_one_written_in_place(
    renovate_records: list[dict[str, Any]],
) -> None:
    # The regex managers of versions.py and the stacks replace the whole reference with a
    # template that appends @<digest>, so pinning a tag-only image writes the digest in place.
    config = _renovate_config()
    for manager in config["customManagers"]:
        if manager.get("datasourceTemplate") != "docker" or "helm-chart" in str(manager):
            continue
        template = manager.get("autoReplaceStringTemplate", "")
        assert "{{#if newDigest}}@{{{newDigest}}}{{/if}}" in template, manager["description"]
    # Every image literal of versions.py is one a manager extracts, with or without a digest.
    images = {
        f"{r['depName']}:{r['currentValue']}"
        for r in renovate_records
        if r["packageFile"] == "components/versions.py" and r["depType"] == "image"
    }
    assert versions.MARIADB_IMAGE.split("@")[0] in images
    assert versions.DEFAULT_TORCH_IMAGE.split("@")[0] in images


@pytest.mark.slow
@pytest.mark.parametrize("together", MOVES_TOGETHER, ids=lambda t: t.name)
def test_pins_that_must_move_together_share_one_group(
    renovate_records: list[dict[str, Any]], together: pins.MovesTogether
) -> None:
    assert together.group in pins.renovate_groups()
    for package in together.packages:
        found = [r for r in renovate_records if package in {r["depName"], r["packageName"]}]
        assert found, f"{together.name}: Renovate extracts no {package}"
        groups = {r["groupName"] for r in found}
        assert groups == {together.group}, f"{together.name}: {package} is in {groups}"
        # Moved by hand on the group's branch, or by the bot: one or the other, never both.
        assert all(r["enabled"] != (package in together.by_hand) for r in found), package
        # One pull request even when one side's update is a major (an AMI release always is:
        # its version is its date), which Renovate would otherwise open apart.
        assert not any(r["separateMajorMinor"] for r in found), f"{package}: majors apart"


def test_the_compatibility_pairs_the_docs_promise_are_held() -> None:
    named = {together.name for together in MOVES_TOGETHER}
    for pair in (
        "the AMI release and the drivers it carries",
        "the Neuron driver (AMI) and the Neuron runtime (the recipes' Neuron SDK)",
        "CUDA (the default framework images) and the NVIDIA driver (AMI)",
        "Kubeflow Trainer and its runtime images",
        "JobSet and Kubeflow Trainer",
    ):
        assert pair in named
    page = (REPOSITORY_ROOT / "docs" / "how-to" / "dependency-updates.md").read_text()
    for together in MOVES_TOGETHER:
        assert together.name in page and together.group in page, together.name


def test_waivers_that_wait_for_digests_name_the_group_that_pins_them() -> None:
    entries = load_yaml(WAIVERS.read_text())
    # None may be left once the bot has pinned everything (its pull request drops them).
    by_digest = [entry for entry in entries if entry["check"] == "CKV_K8S_43"]
    groups = pins.renovate_groups()

    def chart_chosen(resources: Iterable[str]) -> bool:
        # The observability charts' pods run the charts' own images, which no file of ours
        # names: no group can pin them (synth/chart_pods.py), and their waiver says so.
        return all(any(fnmatch.fnmatchcase(r, p) for p in CHART_CHOSEN_IMAGES) for r in resources)

    for entry in by_digest:
        closing = entry.get("closedBy")
        if not closing and chart_chosen(entry["resources"]):
            continue
        assert closing, f"CKV_K8S_43 waiver {entry['resources']} names no closedBy group"
        assert set(closing) <= groups, f"{closing}: no such group in renovate.json"
    assert all(
        waiver.closed_by or chart_chosen(waiver.resources)
        for waiver in load_waivers()
        if waiver.check == "CKV_K8S_43"
    )


def test_the_bot_runs_on_a_schedule_with_labels_and_the_best_practices() -> None:
    config = _renovate_config()
    assert "config:best-practices" in config["extends"]  # docker:pinDigests among them
    assert any(preset.startswith("schedule:") for preset in config["extends"]) or config.get(
        "schedule"
    )
    assert config["labels"]


@pytest.mark.slow
def test_the_first_run_pins_every_image_in_place_and_the_images_workflow_then_builds(
    renovate_extraction: Path, renovate_records: list[dict[str, Any]], tmp_path: Path
) -> None:
    # What the bot's first "pin digests" pull request writes, by Renovate's own replace code
    # (ci/renovate/pin.mjs, made-up digests): every image still by tag gets @sha256:... after
    # its tag, and the files stay valid for everything that reads them.
    project = tmp_path / "project"
    for part in ("components", "images", "stacks"):
        shutil.copytree(REPOSITORY_ROOT / part, project / part)
    for file in ("pyproject.toml", "Pulumi.yaml"):
        shutil.copy2(REPOSITORY_ROOT / file, project / file)
    python = str(REPOSITORY_ROOT / ".venv" / "bin" / "python")
    environment = {**os.environ, "PYTHONPATH": str(project), "PYTHONDONTWRITEBYTECODE": "1"}
    plan = [python, "-m", "components.image_builds", "matrix"]
    # Until then the images workflow refuses the bases still named by tag alone...
    before = subprocess.run(
        plan, cwd=project, env=environment, capture_output=True, text=True, check=False
    )
    floating = [base for build in image_builds.builds() for base in build.floating_bases]
    assert before.returncode == (1 if floating else 0), before.stderr
    by_tag = {
        r["packageFile"]
        for r in renovate_records
        if r["currentValue"] and not r["currentDigest"] and (
            (r["datasource"] == "docker" and r["depType"] != "helm-chart" and not r["skipReason"])
            or r["depType"] == "action"
        )
    }  # fmt: skip

    pinned = tmp_path / "pinned"
    node = REPOSITORY_ROOT / "ci" / "renovate" / "node_modules" / ".bin" / "node"
    done = subprocess.run(
        [str(node), str(REPOSITORY_ROOT / "ci" / "renovate" / "pin.mjs"),
         str(renovate_extraction / "extract.json"), str(pinned)],
        cwd=REPOSITORY_ROOT, capture_output=True, text=True, env={**os.environ, "LOG_LEVEL": "error"},
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = sorted(p.relative_to(pinned).as_posix() for p in pinned.rglob("*") if p.is_file())
    assert set(written) == by_tag
    for file in written:
        (project / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(pinned / file, project / file)
    # Every action at its release's commit, the release in a comment, which is what the
    # inventory and the CI test read back.
    for workflow in sorted((project / ".github" / "workflows").glob("*.yml")):
        before_pins = {p for p in declared_pins() if p.file.endswith(workflow.name)}
        uses = pins._USES.findall(workflow.read_text())
        assert uses and all(re.fullmatch(r"[0-9a-f]{40}", ref) for _, ref, _ in uses)
        actions = {(action, release) for action, _, release in uses}
        assert actions == {(p.name, p.value) for p in before_pins if "/" in p.name}

    # ...and after the first run it plans every build.
    after = subprocess.run(
        plan, cwd=project, env=environment, capture_output=True, text=True, check=False
    )
    assert after.returncode == 0, after.stderr
    # Every image the bill of materials and the recipes name now carries a digest, same tag.
    check = subprocess.run(
        [python, "-c", _EVERY_IMAGE_BY_DIGEST], cwd=project, env=environment,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    # The rewritten bill of materials passes the linter and the formatter as it is.
    ruff = str(REPOSITORY_ROOT / ".venv" / "bin" / "ruff")
    for command in ([ruff, "check", "components/versions.py"],
                    [ruff, "format", "--check", "components/versions.py"]):  # fmt: skip
        linted = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
        assert linted.returncode == 0, linted.stdout + linted.stderr
    # The stacks still validate, each image at its tag and now a digest (in a deployer's
    # repository; this one's example accounts are left alone by the bot).
    for stack in STACKS:
        loaded = load_stack(stack, project)
        validated_config(loaded.platform, stack=stack, aws_region=loaded.config.get("aws:region"))
        text = (project / "stacks" / f"Pulumi.{stack}.yaml").read_text()
        for pin in (p for p in declared_pins() if p.file == f"stacks/Pulumi.{stack}.yaml"):
            by_digest = rf"{re.escape(pin.name)}:{re.escape(pin.value)}@sha256:[0-9a-f]{{64}}\s"
            assert re.search(by_digest, text), pin


_EVERY_IMAGE_BY_DIGEST = """
import re, sys
from components import software, versions
from components.image_builds import DIGEST
images = [v for k, v in vars(versions).items() if k.endswith("_IMAGE") and isinstance(v, str)]
images += [i for k, t in vars(versions).items() if k.endswith("_IMAGES") for i in t.values()]
for recipe in ("slurmd", "training-cuda", "training-neuron"):
    images += [v for k, v in software.recipe_pins(recipe).items() if k.endswith("_IMAGE")]
loose = [i for i in images if not DIGEST.search(i)]
print(loose)
sys.exit(1 if loose or len(images) < 14 else 0)
"""


@pytest.mark.slow
def test_first_digest_pins_land_in_one_pull_request(renovate_records: list[dict[str, Any]]) -> None:
    # The images workflow refuses to build while any base is by tag, so pins spread over the
    # projects' groups would each fail it (and one waits on the AMI's records): every pin of
    # a digest goes to one group instead.
    # Whether or not each is pinned yet (the rule must hold on the bot's own pull request too).
    pinnable = [r for r in renovate_records if r["enabled"] and r["pinDigests"]]
    assert len(pinnable) >= 20
    assert {r["pinGroupName"] for r in pinnable} == {"Pin digests"}


@pytest.mark.slow
def test_the_pinned_node_is_one_renovate_runs_on(renovate_extraction: Path) -> None:
    # Renovate refuses to start on a Node.js its engines do not accept; the Renovate group keeps
    # Node.js within them (allowedVersions), and the pin must satisfy them today.
    node_modules = REPOSITORY_ROOT / "ci" / "renovate" / "node_modules"
    engines = json.loads((node_modules / "renovate" / "package.json").read_text())["engines"]
    pinned = json.loads(pins.RENOVATE_PACKAGE.read_text())["dependencies"]["node"]
    rule = next(
        r for r in _renovate_config()["packageRules"]
        if r.get("matchPackageNames") == ["node"] and "allowedVersions" in r
    )  # fmt: skip
    script = (
        "const semver = require('semver');"
        f"const ok = semver.satisfies({pinned!r}, {engines['node']!r})"
        f" && semver.intersects({rule['allowedVersions']!r}, {engines['node']!r});"
        "process.exit(ok ? 0 : 1);"
    )
    checked = subprocess.run(
        [str(node_modules / ".bin" / "node"), "-e", script],
        cwd=node_modules.parent, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, (pinned, engines["node"], rule["allowedVersions"])


def test_no_update_waits_for_approval_inside_a_group() -> None:
    # Renovate gates a whole branch on approval when any of its updates needs it (Renovate 44
    # workers/repository/updates/generate.js), so an approval rule on one pin of a group would
    # hold every pin of that group back: a pin that must not move alone is moved by hand.
    rules = _renovate_config()["packageRules"]
    assert not [rule["description"] for rule in rules if rule.get("dependencyDashboardApproval")]
