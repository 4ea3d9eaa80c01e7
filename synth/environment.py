"""Add an environment: ``scripts/new-environment <name> [--from STACK]``.

Writes the three files an environment needs in this repository, copied from an existing stack:

- ``stacks/Pulumi.<name>.yaml``: the source stack's file, comments kept, ``environment`` set to
  the new name (config refuses an environment that is not the stack's name);
- ``policies/config/<name>.json``: the source stack's policy config (what ``pulumi preview
  --policy-pack-config`` and the offline gate read);
- the CI preview matrix in ``.github/workflows/ci.yml`` gains the stack (tests/test_ci.py keeps the
  matrix equal to the stack files).

The account, principals, networks and images stay the source's example values:
docs/how-to/add-an-environment.md lists what to replace next. Nothing is written when any step
cannot be done. Exit status: 0 on success, 2 with one line per problem.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import TypeAdapter, ValidationError

from components.config import EnvironmentName
from synth import COMMANDS as SUB_COMMANDS
from synth.examples import example_values
from synth.stackfile import (
    REPOSITORY_ROOT,
    StackFileError,
    load_stack,
    project_settings,
    stack_names,
)

WORKFLOW: Final = Path(".github") / "workflows" / "ci.yml"
POLICY_CONFIG_DIR: Final = Path("policies") / "config"
MATRIX_LINE: Final = re.compile(r"^(?P<indent>\s*)stack: \[(?P<stacks>[^\]]*)\]\s*$", re.MULTILINE)
"""The preview job's matrix line, ``stack: [dev, staging, prod]``."""


class NewEnvironmentError(Exception):
    """A step that cannot be done; ``lines`` say which and why."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class NewEnvironment:
    """The files a new environment adds or changes: path (relative to the root) -> contents."""

    files: dict[Path, str]


def renamed_stack(text: str, source: str, name: str) -> str:
    """The source stack file's text with its ``environment`` set to ``name``; comments kept.

    Args:
        text: the source stack file.
        source: the source stack's name, which its ``environment`` must be.
        name: the new environment (and stack) name.

    Raises:
        NewEnvironmentError: the file does not say ``environment: <source>`` exactly once.

    """
    pattern = re.compile(rf"^(?P<lead>\s+environment:\s*)[\"']?{re.escape(source)}[\"']?\s*$", re.M)
    found = pattern.findall(text)
    if len(found) != 1:
        raise NewEnvironmentError(
            [
                f"stacks/Pulumi.{source}.yaml: found {len(found)} lines 'environment: {source}'; "
                "allowed: exactly one (the platform key's environment)"
            ]
        )
    return pattern.sub(lambda match: f"{match['lead']}{name}", text)


def with_matrix_stack(workflow: str, name: str) -> str:
    """The workflow text with ``name`` added to the preview matrix's stack list.

    Raises:
        NewEnvironmentError: there is not exactly one ``stack: [...]`` line to extend.

    """
    lines = MATRIX_LINE.findall(workflow)
    if len(lines) != 1:
        raise NewEnvironmentError(
            [
                f"{WORKFLOW}: found {len(lines)} matrix lines 'stack: [...]'; allowed: exactly "
                f"one; add {name} to jobs.preview.strategy.matrix.stack by hand"
            ]
        )

    def extend(match: re.Match[str]) -> str:
        stacks = [s.strip() for s in match["stacks"].split(",") if s.strip()]
        return f"{match['indent']}stack: [{', '.join([*stacks, name])}]"

    return MATRIX_LINE.sub(extend, workflow)


def plan_environment(root: Path, name: str, source: str) -> NewEnvironment:
    """What adding environment ``name``, copied from stack ``source``, writes under ``root``.

    Args:
        root: the repository (Pulumi.yaml, stacks/, policies/config/, .github/workflows/).
        name: the new environment's name; it is also the stack's name.
        source: the existing stack to copy (default on the command line: dev).

    Raises:
        NewEnvironmentError: with every reason it cannot be done; nothing is written.

    """
    problems: list[str] = []
    try:
        TypeAdapter(EnvironmentName).validate_python(name)
    except ValidationError as exc:
        problems.append(f"environment: got {name!r}; allowed: {exc.errors()[0]['msg']}")
    try:
        _, stacks_dir = project_settings(root)
        known = stack_names(root)
    except StackFileError as exc:
        raise NewEnvironmentError([str(exc)]) from None
    if name in SUB_COMMANDS:
        problems.append(
            f"environment: got {name!r}; allowed: a name other than the synth sub-commands "
            f"({', '.join(SUB_COMMANDS)}), which `scripts/synth {name}` would run instead"
        )
    if name in known:
        problems.append(
            f"environment: got {name!r}; allowed: a new name (stacks: {', '.join(known)})"
        )
    if source not in known:
        problems.append(f"--from: got {source!r}; allowed: one of {', '.join(known) or 'none'}")
    policy_source = root / POLICY_CONFIG_DIR / f"{source}.json"
    if source in known and not policy_source.is_file():
        problems.append(
            f"--from: {policy_source} is missing; allowed: a stack with a policy config"
        )
    if problems:
        raise NewEnvironmentError(problems)
    stack_text = (stacks_dir / f"Pulumi.{source}.yaml").read_text()
    workflow = root / WORKFLOW
    files = {
        stacks_dir.relative_to(root) / f"Pulumi.{name}.yaml": renamed_stack(
            stack_text, source, name
        ),
        POLICY_CONFIG_DIR / f"{name}.json": policy_source.read_text(),
    }
    if workflow.is_file():
        files[WORKFLOW] = with_matrix_stack(workflow.read_text(), name)
    return NewEnvironment(files)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; returns the exit status."""
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="scripts/new-environment",
        description="Add an environment: its stack file, policy config and CI preview entry, "
        "copied from an existing stack (docs/how-to/add-an-environment.md).",
    )
    parser.add_argument("name", help="the new environment's name, also its stack's name")
    parser.add_argument("--from", dest="source", default="dev", help="stack to copy (default dev)")
    parser.add_argument(
        "--root", type=Path, default=REPOSITORY_ROOT, help="repository root (default: this one)"
    )
    options = parser.parse_args(argv)
    try:
        plan = plan_environment(options.root, options.name, options.source)
    except NewEnvironmentError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return 2
    for path, text in plan.files.items():
        (options.root / path).write_text(text)
        print(f"wrote {path}")
    stack = load_stack(options.name, options.root)
    found = example_values(stack.platform)
    print(
        f"next: replace the {len(found)} example value(s) in stacks/Pulumi.{options.name}.yaml "
        f"(docs/how-to/add-an-environment.md); scripts/synth {options.name} lists those left"
    )
    for example in found:
        print(f"  {example}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
