"""The README stays true: its configuration reference and its commands."""

from __future__ import annotations

import re
from typing import Any

import yaml

from components.config_reference import BEGIN_MARKER, END_MARKER, render_reference, update_readme
from policies.rules import ALL_POLICIES
from synth.jobs.report import table
from synth.run import StackResult
from synth.stackfile import REPOSITORY_ROOT

README = REPOSITORY_ROOT / "README.md"


def test_configuration_reference_matches_the_model() -> None:
    text = README.read_text()
    start, end = text.index(BEGIN_MARKER), text.index(END_MARKER) + len(END_MARKER)
    assert text[start:end] + "\n" == render_reference(), (
        "README configuration reference is stale: run `scripts/synth reference --write`"
    )


def test_reference_lists_every_documented_key() -> None:
    rendered = render_reference()
    for key in (
        "platform.network.trainingZone",
        "platform.cluster.endpoint.publicAccessCidrs",
        "platform.tags.costCenter",
        "platform.cluster.systemNodeGroup.rootVolumeSizeGiB",
    ):
        assert f"`{key}`" in rendered
    assert all(row.count("|") >= 4 for row in rendered.splitlines() if row.startswith("| `"))
    assert not any(row.endswith("|  |") for row in rendered.splitlines()), "undocumented field"


def test_readme_commands_exist_and_ci_runs_the_same_test_command() -> None:
    text = README.read_text()
    commands = re.findall(r"^\s*(scripts/[\w-]+)", text, flags=re.MULTILINE)
    assert {"scripts/synth", "scripts/test"} <= set(commands)
    for command in commands:
        assert (REPOSITORY_ROOT / command).is_file(), command
    assert "scripts/test" in (REPOSITORY_ROOT / ".ci" / "run").read_text()


def test_update_readme_replaces_only_the_generated_part() -> None:
    stale = f"intro\n{BEGIN_MARKER}\nold rows\n{END_MARKER}\noutro\n"
    updated = update_readme(stale)
    assert updated.startswith("intro\n") and updated.endswith("\noutro\n")
    assert "old rows" not in updated and "`platform.region`" in updated


def test_readme_lists_every_policy() -> None:
    text = README.read_text()
    for policy in ALL_POLICIES:
        assert f"| `{policy.name}` |" in text, policy.name


def _marked_examples(marker: str) -> list[tuple[str, dict[str, object]]]:
    """(stack, document) of every YAML example the README marks ``<!-- runs-on: STACK -->``."""
    text = README.read_text()
    pattern = re.escape(marker).replace("STACK", r"(\w+)") + r"\n```yaml\n(.*?)```"
    return [(stack, yaml.safe_load(body)) for stack, body in re.findall(pattern, text, re.DOTALL)]


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
        (report,) = [r for r in synthesized[stack].jobs
                     if r.namespace == metadata["namespace"] and r.runtime == runtime]  # fmt: skip
        assert report.runnable, report
        assert nodes <= report.max_nodes, (stack, runtime, nodes, report.max_nodes)


def test_the_readme_shows_the_jobs_report_of_prod(synthesized: dict[str, StackResult]) -> None:
    text = README.read_text()
    marker = "<!-- jobs-output:prod -->\n```\n"
    start = text.index(marker) + len(marker)
    shown = text[start : text.index("```\n", start)]
    assert shown == table("prod", synthesized["prod"].jobs) + "\n", (
        "README's `synth jobs prod` output is stale: paste the command's output"
    )


def test_readme_spells_every_command_one_way() -> None:
    # scripts/... set up and run; a second spelling of the same command only confuses.
    text = README.read_text()
    for other in ("python -m synth", ".venv/bin/python", ".venv/bin/ruff", ".venv/bin/mypy"):
        assert other not in text, f"README spells a command {other!r}; use scripts/..."
    assert set(re.findall(r"(scripts/[\w-]+)", text)) >= {
        "scripts/synth",
        "scripts/test",
        "scripts/lint",
        "scripts/new-environment",
    }
