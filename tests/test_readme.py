"""The README and the documentation stay true: the README's size, links and commands, and the
job examples, stack snippets, waiver, policy table and command output the pages show."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Final

from components.config import PlatformConfig, parse_platform_config
from policies.rules import ALL_POLICIES
from synth.jobs.report import table
from synth.run import StackResult
from synth.scan import load_waivers
from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml
from tests import docs_pages
from tests.conftest import stack_data
from tests.docs_pages import README

README_LINES = 300
"""The README is a front door: what, status, quick start, how to deploy, links; the rest is in
docs/."""


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_LINES, "move the detail into a page under docs/"
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings == [
        "Status",
        "Architecture",
        "Quick start (no AWS account needed)",
        "Deploy for real",
        "Everyday commands",
        "Documentation",
        "Reference data",
    ]


def test_every_link_of_the_readme_reaches_a_file() -> None:
    targets = re.findall(r"\]\(([^)]+)\)", README.read_text())
    local = [target.split("#", 1)[0] for target in targets if "://" not in target]
    assert local
    for target in local:
        assert (REPOSITORY_ROOT / target).is_file(), target


def test_every_docs_page_is_linked_from_the_readme() -> None:
    """A reader of the README reaches each page (a release's upgrade notes through the index)."""
    text = README.read_text()
    skipped = {"index.md", "changelog.md"}
    for path in docs_pages.pages():
        name = path.relative_to(docs_pages.DOCS).as_posix()
        if name not in skipped and not (
            name.startswith("upgrades/") and name != "upgrades/index.md"
        ):
            assert f"(docs/{name})" in text or f"(docs/{name}#" in text, name


def test_the_everyday_commands_are_one_line_each() -> None:
    body = docs_pages.section(README.read_text(), "## Everyday commands")
    rows = [line for line in body.splitlines() if line.startswith("| `scripts/")]
    commands = [re.match(r"\| `(scripts/[\w-]+(?: \w+)?)", row) for row in rows]
    named = [match.group(1).split(" <")[0] for match in commands if match]
    assert named == [
        "scripts/synth",
        "scripts/synth jobs",
        "scripts/synth diff",
        "scripts/synth scan",
        "scripts/synth check",
        "scripts/new-environment",
    ], named


def test_readme_commands_exist_and_ci_runs_the_same_test_command() -> None:
    text = README.read_text()
    commands = re.findall(r"^\s*(scripts/[\w-]+)", text, flags=re.MULTILINE)
    assert {"scripts/synth", "scripts/test"} <= set(commands)
    for command in set(re.findall(r"(scripts/[\w-]+)", text)):
        assert (REPOSITORY_ROOT / command).is_file(), command
    assert "scripts/test" in (REPOSITORY_ROOT / ".ci" / "run").read_text()


def test_the_docs_list_every_policy() -> None:
    text = docs_pages.page("concepts/policy-gates.md")
    for policy in ALL_POLICIES:
        assert f"| `{policy.name}` |" in text, policy.name


def _marked_examples(marker: str) -> list[tuple[str, dict[str, object]]]:
    """(stack, document) of every YAML example the docs mark ``<!-- runs-on: STACK -->``."""
    return docs_pages.marked_examples(marker)


def test_every_job_example_runs_on_the_stack_it_names(synthesized: dict[str, StackResult]) -> None:
    """A TrainJob's numNodes (a PyTorchJob's workers) fit what `synth jobs` gives its team."""
    examples = _marked_examples("<!-- runs-on: STACK -->")
    kinds = sorted(str(document["kind"]) for _, document in examples)
    assert kinds == ["PyTorchJob", "TrainJob"], kinds
    for stack, document in examples:
        metadata: Any = document["metadata"]
        spec: Any = document["spec"]
        if document["kind"] == "TrainJob":
            assert spec["runtimeRef"]["kind"] == "TrainingRuntime", "name the team's runtime"
            runtime, nodes = spec["runtimeRef"]["name"], spec["trainer"]["numNodes"]
        else:
            runtime = "torch-p5"  # a whole p5 node per worker: 8 GPUs, 32 EFA interfaces
            nodes = spec["pytorchReplicaSpecs"]["Worker"]["replicas"]
        (report,) = [r for r in synthesized[stack].jobs if r.kind == "trainjob"
                     and r.namespace == metadata["namespace"] and r.runtime == runtime]  # fmt: skip
        assert report.runnable, report
        assert nodes <= report.max_nodes, (stack, runtime, nodes, report.max_nodes)


def test_the_docs_show_the_jobs_report_of_prod(synthesized: dict[str, StackResult]) -> None:
    text = docs_pages.page("concepts/jobs-model.md")
    marker = "<!-- jobs-output:prod -->\n```\n"
    start = text.index(marker) + len(marker)
    shown = text[start : text.index("```\n", start)]
    assert shown == table("prod", synthesized["prod"].jobs) + "\n", (
        "docs/concepts/jobs-model.md's `synth jobs prod` output is stale: paste the command's "
        "output"
    )


def test_readme_spells_every_command_one_way() -> None:
    # scripts/... set up and run; a second spelling of the same command only confuses.
    text = README.read_text()
    for path in [README, *docs_pages.pages()]:
        for other in ("python -m synth", ".venv/bin/python", ".venv/bin/ruff", ".venv/bin/mypy"):
            assert other not in path.read_text(), f"{path.name} spells {other!r}; use scripts/"
    assert set(re.findall(r"(scripts/[\w-]+)", text)) >= {
        "scripts/synth",
        "scripts/test",
        "scripts/lint",
        "scripts/new-environment",
    }


def _stack_snippets() -> list[tuple[str, dict[str, Any]]]:
    """(page, snippet) of every YAML block on the pages whose keys are all stack config keys."""
    keys = {field.alias or name for name, field in PlatformConfig.model_fields.items()}
    found = []
    for path in docs_pages.pages():
        for body in docs_pages.fenced(path.read_text(), "yaml"):
            document = load_yaml(body)
            if isinstance(document, dict) and set(document) <= keys:
                found.append((path.name, document))
    return found


def test_every_stack_snippet_of_the_docs_is_accepted_in_prod() -> None:
    """A snippet merged into prod's stack file (lists appended, sections merged) parses."""
    snippets = _stack_snippets()
    assert {name for name, _ in snippets} >= {"capacity-reservations.md", "slurm.md"}
    for name, snippet in snippets:
        data = stack_data("prod")
        for key, value in snippet.items():
            if isinstance(value, list):
                data[key] = [*data.get(key, []), *value]
            else:
                data[key] = {**data.get(key, {}), **value}
        parse_platform_config(data)  # raises, naming the key, when the snippet is refused
        assert all(data[key] for key in snippet), name


def test_the_waiver_example_is_a_waiver_the_scan_reads(tmp_path: Path) -> None:
    text = docs_pages.page("concepts/policy-gates.md")
    (body,) = [b for b in docs_pages.fenced(text, "yaml") if b.startswith("- check: ")]
    path = tmp_path / "scan-waivers.yaml"
    path.write_text(body)
    (waiver,) = load_waivers(path)
    assert waiver.check == "CKV_K8S_16" and waiver.stacks == ("prod",) and waiver.reason


def test_the_changelog_has_this_release_with_its_upgrade_notes() -> None:
    """Keep a Changelog: an Unreleased section, then one per release, newest first; the
    project's version is the newest, and each release has its page of upgrade notes."""
    text = (REPOSITORY_ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([^\]]+)\]", text, flags=re.MULTILINE)
    assert releases[0] == "Unreleased"
    version = tomllib.loads((REPOSITORY_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert releases[1] == version
    for release in releases[1:]:
        assert (docs_pages.DOCS / "upgrades" / f"{release}.md").is_file(), release
        assert f"[{release}]({release}.md)" in docs_pages.page("upgrades/index.md"), release
        # A release's heading carries its date (ISO 8601); only Unreleased has none.
        assert re.search(rf"^## \[{re.escape(release)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M)
    # Every bracketed version is a link: a reference definition at the end of the file.
    for release in releases:
        assert re.search(rf"^\[{re.escape(release)}\]: \S+$", text, re.M), release


REPOSITORY_PATH: Final = re.compile(
    r"(?<![\w./-])((?:components|synth|policies|tests|scripts|images|ci|stacks|docs|\.github)"
    r"/[\w./-]*\w)"
)
"""A path into the repository as the pages write it (``components/storage/``, ``scripts/test``),
not one inside another path (``build/synth/dev``)."""

TEMPLATE_REST: Final = re.compile(r"[\w./-]*(?:<|&lt;|\{|\*)")
"""What follows a path cut short by a placeholder: ``.<env>.yaml``, ``/{name}``."""


def test_every_repository_path_the_pages_name_exists() -> None:
    """A module that moved (components/storage.py became a package) leaves no page behind."""
    missing = []
    for path in [README, *docs_pages.pages()]:
        text = path.read_text()
        for match in REPOSITORY_PATH.finditer(text):
            named = match.group(1)
            if TEMPLATE_REST.match(text, match.end()) or "sandbox" in named:
                continue  # a template (Pulumi.<env>.yaml), or the how-to's example environment
            if not (REPOSITORY_ROOT / named).exists():
                missing.append(f"{path.relative_to(REPOSITORY_ROOT)}: {named}")
    assert missing == []
    assert REPOSITORY_PATH.findall("see `components/storage.py` and build/synth/dev/") == [
        "components/storage.py"
    ]
