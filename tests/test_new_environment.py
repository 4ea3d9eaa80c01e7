"""Adding an environment: the how-to's steps give a stack that synthesizes and passes the suite.

The end-to-end test copies the repository and runs the commands of the first bash block of
docs/how-to/add-an-environment.md in the copy, the way a newcomer would; then the synthesis of the
new stack there, and the tests that follow the set of stacks (config, CI, docs). It shows the rest
of the suite would pass without running it: the new stack synthesizes to its source's synthesis
under another name, and every test parametrized over the stacks gets it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from policies import offline
from synth import COMMANDS as SUB_COMMANDS
from synth.__main__ import main as synth_main
from synth.environment import (
    NewEnvironmentError,
    plan_environment,
    renamed_stack,
    with_matrix_stack,
)
from synth.run import StackResult
from synth.stackfile import REPOSITORY_ROOT, load_stack, stack_names
from synth.yamlio import load_yaml
from tests.conftest import REFERENCE_ENV, STACKS, reference_root

SECTION = "docs/how-to/add-an-environment.md"
"""The page whose first bash block holds the steps."""
NOT_CLONED = {".git", ".venv", ".venv-scan", ".venv-docs", "build"}
CACHES = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules"}
"""Made by tools wherever they run (node_modules: ``scripts/renovate setup``, half a gigabyte
in ci/renovate/ that the copy's run never uses), never in a clone."""
SYNTHESIS_FILES = ("resources.json", "policy-report.json", "jobs.json")
"""What a stack's synthesis says: every resource, the policy findings, the jobs model."""
MOCK_VALUES = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9A-Fa-f]{7,}")
"""Ids, generated names and key ids: hashes of resource names (synth.engine.PlatformMocks)."""
NOT_INHERITED = ("PYTEST_XDIST_", "PYTEST_CURRENT_TEST")
"""What this run's pytest tells its own processes, which the copy's run is not one of."""
FOLLOW_THE_SET_OF_STACKS = (
    "tests/test_ci.py",
    "tests/test_config.py",
    "tests/test_new_environment.py",
    "tests/test_deploying_docs.py",
)
"""Tests that hold the set of stacks to other files (CI matrix, policy configs, docs)."""
FOLLOW_THE_DOCUMENTED_STACKS = ("tests/test_deploying_docs.py",)
"""Parametrized by the stacks docs/how-to/deploy.md describes, which a new one is not until its
owner writes its section."""


def _how_to_steps() -> str:
    """The first bash block of the how-to page on adding an environment."""
    page = REPOSITORY_ROOT / SECTION
    assert page.is_file(), f"no page {SECTION}"
    blocks = re.findall(r"```bash\n(.*?)```", page.read_text(), re.S)
    assert blocks, f"{SECTION} has no bash block of steps"
    return str(blocks[0])


def _copy_repository(target: Path) -> Path:
    """The checkout as a newcomer's clone has it: no build output, caches or virtualenv."""
    shutil.copytree(REPOSITORY_ROOT, target, symlinks=True, ignore=_not_in_a_clone)
    # The copy shares this checkout's virtualenv: scripts/setup finds it up to date.
    (target / ".venv").symlink_to(REPOSITORY_ROOT / ".venv")
    return target


def _not_in_a_clone(directory: str, names: list[str]) -> set[str]:
    top = Path(directory) == REPOSITORY_ROOT
    generated = {n for n in names if n in CACHES or n.endswith(".pyc")}
    return generated | ({n for n in names if n in NOT_CLONED} if top else set())


def test_renamed_stack_changes_only_the_environment() -> None:
    text = (REPOSITORY_ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    renamed = renamed_stack(text, "dev", "sandbox")
    changed = [
        (old, new)
        for old, new in zip(text.splitlines(), renamed.splitlines(), strict=True)
        if old != new
    ]
    assert changed == [("    environment: dev", "    environment: sandbox")]


def test_renamed_stack_refuses_a_file_without_its_environment() -> None:
    with pytest.raises(NewEnvironmentError, match="found 0 lines 'environment: dev'"):
        renamed_stack("config:\n  x:platform:\n    environment: prod\n", "dev", "sandbox")


def test_matrix_gains_the_stack_and_stays_one_line() -> None:
    workflow = (REPOSITORY_ROOT / ".github" / "workflows" / "ci.yml").read_text()
    extended = load_yaml(with_matrix_stack(workflow, "sandbox"))
    before = load_yaml(workflow)["jobs"]["preview"]["strategy"]["matrix"]["stack"]
    assert extended["jobs"]["preview"]["strategy"]["matrix"]["stack"] == [*before, "sandbox"]
    with pytest.raises(NewEnvironmentError, match="by hand"):
        with_matrix_stack("jobs: {}\n", "sandbox")


def test_plan_refuses_bad_names_existing_stacks_and_unknown_sources() -> None:
    with pytest.raises(NewEnvironmentError) as caught:
        plan_environment(REPOSITORY_ROOT, "Dev_2", "nosuch")
    assert caught.value.lines == [
        "environment: got 'Dev_2'; allowed: lower-case letters, digits and '-', starting with a "
        "letter, at most 20 characters",
        f"--from: got 'nosuch'; allowed: one of {', '.join(stack_names())}",
    ]
    with pytest.raises(NewEnvironmentError, match="allowed: a new name"):
        plan_environment(REPOSITORY_ROOT, "prod", "dev")
    for command in SUB_COMMANDS:
        with pytest.raises(NewEnvironmentError, match="other than the synth sub-commands"):
            plan_environment(REPOSITORY_ROOT, command, "dev")


def test_plan_copies_the_policy_config_of_its_source() -> None:
    plan = plan_environment(REPOSITORY_ROOT, "perf", "staging")
    policy = Path("policies") / "config" / "perf.json"
    expected = (REPOSITORY_ROOT / "policies" / "config" / "staging.json").read_text()
    assert plan.files[policy] == expected
    assert set(plan.files) == {
        Path("stacks") / "Pulumi.perf.yaml",
        policy,
        Path(".github/workflows/ci.yml"),
    }


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_environment_made_by_the_how_to_steps_passes_the_suite_as_it_is(
    synthesized: dict[str, StackResult],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The how-to's steps, run in a copy of the repository, give a stack that passes the suite.

    Without running the suite again: the new stack synthesizes to its source's synthesis with
    another name (so the tests of its synthesis pass as its source's do), with its policies
    passing and every job path runnable; every test parametrized over the stacks has as many
    instances for it as for its source; and the tests that compare the set of stacks with other
    files (the CI matrix, policy configs, docs) pass in the copy.
    """
    steps = _how_to_steps()
    copy = _copy_repository(tmp_path / "repo")
    if not (copy / ".venv").resolve().is_dir():
        pytest.fail("no .venv in this checkout: run scripts/setup first")
    # The copy is elsewhere, so its ../shared is not this checkout's: point it at ours.
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(NOT_INHERITED)},
        REFERENCE_ENV: str(reference_root()),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", steps],
        cwd=copy, capture_output=True, text=True, env=environment, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    created = re.findall(r"scripts/new-environment (\S+)(?: --from (\S+))?", steps)
    assert created, "the how-to's steps create no environment"
    name, source = created[0][0], created[0][1] or "dev"
    stack = load_stack(name, copy)
    assert stack.platform["environment"] == name
    assert not (REPOSITORY_ROOT / "stacks" / f"Pulumi.{name}.yaml").exists()
    # `scripts/synth NAME` in the copy, in this process: the copy's code is this checkout's, so
    # only the project it reads differs (its stack files, and its policy configs, which synth
    # reads beside its own code). A second interpreter would import the program again.
    monkeypatch.setattr(offline, "CONFIG_DIR", copy / "policies" / "config")
    status = synth_main([name, "--out", str(tmp_path / "out"), "--project-dir", str(copy)])
    # Exit 0: no mandatory policy violation, every job path the stack promises runs.
    assert status == 0, capsys.readouterr()
    for file in SYNTHESIS_FILES:
        written = (tmp_path / "out" / name / file).read_text()
        expected = (synthesized[source].written.directory / file).read_text()
        assert _masked(written.replace(name, source)) == _masked(expected), file

    # The copy's run leaves out the tests that read syntheses: the other stacks' are this
    # checkout's, which this run checks, and the new one's was compared above.
    ids = tmp_path / "collected.json"
    python = str(copy / ".venv" / "bin" / "python")
    others = sorted(
        f"tests/{path.name}"
        for path in (copy / "tests").glob("test_*.py")
        if f"tests/{path.name}" not in FOLLOW_THE_SET_OF_STACKS
    )
    suite = subprocess.run(
        [python, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "--assert=plain",
         "-p", "tests.collected_ids", "--collected-ids", str(ids), "--without-fixture",
         "synthesized", "tests",
         *(option for path in [*others, request.node.nodeid] for option in ("--deselect", path))],
        cwd=copy, capture_output=True, text=True, env=environment, check=False,
    )  # fmt: skip
    assert suite.returncode == 0, suite.stdout[-4000:] + suite.stderr[-2000:]
    assert " passed" in suite.stdout.splitlines()[-1], suite.stdout[-500:]

    collected = json.loads(ids.read_text())
    stacks = stack_names(copy)
    assert set(stacks) == {*STACKS, name}
    counts = {s: _instances(collected, s, stacks) for s in stacks}
    # Parametrized over the stack files: an instance for each stack of this checkout.
    per_stack = {
        function
        for function in set.intersection(*(set(counts[s]) for s in STACKS))
        if not function.startswith(FOLLOW_THE_DOCUMENTED_STACKS)
    }
    assert per_stack, "no test is parametrized over the stacks"
    missing = {f: counts[source][f] for f in per_stack if counts[name][f] != counts[source][f]}
    assert missing == {}, f"tests without the new stack (instances for {source} shown)"


def _masked(text: str) -> str:
    """``text`` with the values the mock engine derives from resource names masked."""
    return MOCK_VALUES.sub("#", text)


def _instances(ids: list[str], stack: str, stacks: list[str]) -> Counter[str]:
    """Per test function, how many of its instances are ``stack``'s.

    An instance is the stack's whose parameters name it first among the stacks (a team of a
    copied stack keeps its name, ``ml-dev``, under the new stack).
    """
    counts: Counter[str] = Counter()
    for test_id in ids:
        function, _, parameters = test_id.partition("[")
        named = [t for t in re.split(r"[^A-Za-z0-9_]+", parameters) if t in stacks]
        if named[:1] == [stack]:
            counts[function] += 1
    return counts
