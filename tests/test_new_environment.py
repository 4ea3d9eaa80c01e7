"""Adding an environment: the how-to's steps give a stack that synthesizes and passes the suite.

The end-to-end test copies the repository, runs the commands of the first bash block of
docs/how-to/add-an-environment.md in the copy, and runs there the synthesis of the new stack and
the tests that follow the set of stacks (config, CI), the way a newcomer would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from synth import COMMANDS as SUB_COMMANDS
from synth.environment import (
    NewEnvironmentError,
    plan_environment,
    renamed_stack,
    with_matrix_stack,
)
from synth.stackfile import REPOSITORY_ROOT, load_stack, stack_names
from tests.conftest import REFERENCE_ENV, reference_root

SECTION = "docs/how-to/add-an-environment.md"
"""The page whose first bash block holds the steps."""
NOT_CLONED = {".git", ".venv", "build"}
CACHES = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


def _readme_steps() -> str:
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
    extended = yaml.safe_load(with_matrix_stack(workflow, "sandbox"))
    before = yaml.safe_load(workflow)["jobs"]["preview"]["strategy"]["matrix"]["stack"]
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


@pytest.mark.timeout(600)
def test_a_copy_of_dev_made_by_the_readme_steps_synthesizes_and_passes(tmp_path: Path) -> None:
    steps = _readme_steps()
    copy = _copy_repository(tmp_path / "repo")
    if not (copy / ".venv").resolve().is_dir():
        pytest.fail("no .venv in this checkout: run scripts/setup first")
    # The copy is elsewhere, so its ../shared is not this checkout's: point it at ours.
    environment = {
        **os.environ,
        REFERENCE_ENV: str(reference_root()),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", steps],
        cwd=copy, capture_output=True, text=True, env=environment, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    created = re.findall(r"scripts/new-environment (\S+)", steps)
    assert created, "the README steps create no environment"
    name = created[0]
    stack = load_stack(name, copy)
    assert stack.platform["environment"] == name
    python = str(copy / ".venv" / "bin" / "python")
    synthesis = subprocess.run(
        [python, "-m", "synth", name, "--out", str(tmp_path / "out")],
        cwd=copy, capture_output=True, text=True, env=environment, check=False,
    )  # fmt: skip
    assert synthesis.returncode == 0, synthesis.stdout + synthesis.stderr
    # The tests that follow the set of stacks, and every test run for the new stack by name.
    suite = subprocess.run(
        [python, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         "tests/test_ci.py", "tests/test_config.py", "tests/test_reference_lock.py",
         "tests/test_new_environment.py", "tests/test_deploying_docs.py", "-k", "not copy_of_dev"],
        cwd=copy, capture_output=True, text=True, env=environment, check=False,
    )  # fmt: skip
    assert suite.returncode == 0, suite.stdout[-4000:] + suite.stderr[-2000:]
    by_name = subprocess.run(
        [python, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests", "-k", name],
        cwd=copy, capture_output=True, text=True, env=environment, check=False,
    )  # fmt: skip
    assert by_name.returncode == 0, by_name.stdout[-4000:] + by_name.stderr[-2000:]
    assert " passed" in by_name.stdout.splitlines()[-1], by_name.stdout[-500:]
    assert not (REPOSITORY_ROOT / "stacks" / f"Pulumi.{name}.yaml").exists()
