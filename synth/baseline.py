"""``python -m synth baseline <stack> --pool P --output FILE --check C``: a run, into the stack.

Reads a fabric test's (or a one-node acceptance run's) output with the acceptance package's
parser (:func:`acceptance.baseline.measure`: the floor is the bus bandwidth at the largest
size less the margin) and writes the entry into the pool's ``acceptance.baselines`` of
``stacks/Pulumi.<stack>.yaml`` with ``--write``, or prints it. The acceptance package runs in
the acceptance image without Pulumi or the stack files (the ``acceptance`` import contract in
pyproject.toml), so the stack-file edit lives here, in synth, which may import it.

The edit is a text edit, as synth/environment.py edits stack files: the pool's block gains (or
has replaced) one line, a flow mapping, and every other line, comment and blank stays. The
result is read back and must equal the file before with only that entry changed, and must
validate (:func:`components.config.parse_platform_config`), or nothing is written.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from acceptance.baseline import (
    Measurement,
    add_measure_arguments,
    default_source,
    flow_entry,
    measure,
    report,
)
from acceptance.parsers import UnusableEvidence
from components.config import CONFIG_KEY, ConfigError, parse_platform_config
from synth.stackfile import REPOSITORY_ROOT, StackFileError, load_stack, project_settings
from synth.yamlio import load_yaml

INDENT_STEP: Final = 2


class BaselineError(Exception):
    """The entry cannot be written; the message says why, in one line."""


@dataclass(frozen=True)
class _Block:
    """Lines ``start`` (the key's or item's own) to ``end`` (exclusive) of one YAML node."""

    start: int
    end: int
    indent: int


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _significant(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """The line after the last content line more indented than ``indent`` after ``start``.

    Trailing blanks and comments stay outside the block, so what is inserted at its end lands
    before them.
    """
    last = start
    for number in range(start + 1, len(lines)):
        if _significant(lines[number]):
            if _indent(lines[number]) <= indent:
                break
            last = number
    return last + 1


def _key(lines: list[str], within: _Block, key: str, indent: int) -> _Block | None:
    pattern = re.compile(rf"^ {{{indent}}}{re.escape(key)}:(\s|$)")
    for number in range(within.start, within.end):
        if pattern.match(lines[number]):
            return _Block(number, _block_end(lines, number, indent), indent)
    return None


def _items(lines: list[str], within: _Block) -> list[_Block]:
    """The ``- `` items directly inside a sequence block (after its key line)."""
    items: list[_Block] = []
    dash_indent: int | None = None
    for number in range(within.start + 1, within.end):
        line = lines[number]
        if not _significant(line) or not line.lstrip().startswith("- "):
            continue
        if dash_indent is None:
            dash_indent = _indent(line)
        if _indent(line) == dash_indent:
            items.append(_Block(number, _block_end(lines, number, dash_indent), dash_indent))
    return items


def with_baseline(text: str, project: str, pool: str, entry: dict[str, object]) -> str:
    """The stack file's text with ``entry`` in the pool's ``acceptance.baselines``.

    An entry of the same instance type, check and node count is replaced where it stands;
    otherwise the entry is appended (creating ``acceptance:`` and ``baselines:`` as needed).

    Args:
        text: the stack file.
        project: the project name (the ``<project>:platform`` key).
        pool: the node pool's name.
        entry: the entry in the stack file's spelling (:meth:`Measurement.entry`).

    Raises:
        BaselineError: no such pool, or a layout this edit does not know (a flow-style pool
            list), or a result that reads back as anything but the one change.
    """
    lines = text.splitlines(keepends=True)
    whole = _Block(0, len(lines), -1)
    config = _key(lines, whole, "config", 0)
    platform = config and _key(lines, config, f"{project}:{CONFIG_KEY}", INDENT_STEP)
    pools = platform and _key(lines, platform, "nodePools", 2 * INDENT_STEP)
    if pools is None:
        raise BaselineError(f"no config.{project}:{CONFIG_KEY}.nodePools block in the stack file")
    item = next(
        (
            block
            for block in _items(lines, pools)
            if re.match(
                rf"^\s*- name:\s*[\"']?{re.escape(pool)}[\"']?\s*(#.*)?$", lines[block.start]
            )
        ),
        None,
    )
    if item is None:
        raise BaselineError(
            f"nodePools has no '- name: {pool}' item (block style, name first) to add it to"
        )
    keys = item.indent + INDENT_STEP
    line = flow_entry(entry)
    acceptance = _key(lines, item, "acceptance", keys)
    if acceptance is None:
        new = [
            f"{' ' * keys}acceptance:\n",
            f"{' ' * (keys + INDENT_STEP)}baselines:\n",
            f"{' ' * (keys + 2 * INDENT_STEP)}- {line}\n",
        ]
        lines[item.end : item.end] = new
    else:
        baselines = _key(lines, acceptance, "baselines", keys + INDENT_STEP)
        if baselines is None:
            lines[acceptance.end : acceptance.end] = [
                f"{' ' * (keys + INDENT_STEP)}baselines:\n",
                f"{' ' * (keys + 2 * INDENT_STEP)}- {line}\n",
            ]
        else:
            existing = _items(lines, baselines)
            same = (entry["instanceType"], entry["check"], entry["nodes"])
            parsed = load_yaml("".join(lines[baselines.start : baselines.end]))["baselines"] or []
            if len(parsed) != len(existing):
                raise BaselineError("acceptance.baselines is not a block list this edit reads")
            match = next(
                (
                    block
                    for block, value in zip(existing, parsed, strict=True)
                    if (value.get("instanceType"), value.get("check"), value.get("nodes")) == same
                ),
                None,
            )
            dash = existing[0].indent if existing else keys + 2 * INDENT_STEP
            new_line = f"{' ' * dash}- {line}\n"
            if match is not None:
                lines[match.start : match.end] = [new_line]
            else:
                lines[baselines.end : baselines.end] = [new_line]
    return "".join(lines)


def _pool_baselines(document: Any, project: str, pool: str) -> list[Any]:
    platform = document["config"][f"{project}:{CONFIG_KEY}"]
    (found,) = [p for p in platform["nodePools"] if p.get("name") == pool]
    baselines: list[Any] = (found.get("acceptance") or {}).get("baselines") or []
    return baselines


def checked_edit(text: str, project: str, stack: str, pool: str, entry: dict[str, object]) -> str:
    """:func:`with_baseline`, then proof: only the entry changed and the stack validates.

    Args:
        text: the stack file.
        project: the project name.
        stack: the stack's name (config checks ``environment`` against it).
        pool: the node pool.
        entry: the baselines entry.

    Raises:
        BaselineError: the edit, read back, differs elsewhere, or the stack does not validate.
    """
    edited = with_baseline(text, project, pool, entry)
    before, after = load_yaml(text), load_yaml(edited)
    expected = copy.deepcopy(before)
    wanted = _pool_baselines(expected, project, pool)
    same = (entry["instanceType"], entry["check"], entry["nodes"])
    kept = [b for b in wanted if (b.get("instanceType"), b.get("check"), b.get("nodes")) != same]
    position = next(
        (i for i, b in enumerate(wanted)
         if (b.get("instanceType"), b.get("check"), b.get("nodes")) == same),
        len(kept),
    )  # fmt: skip
    kept.insert(position, entry)
    platform = expected["config"][f"{project}:{CONFIG_KEY}"]
    (found,) = [p for p in platform["nodePools"] if p.get("name") == pool]
    found.setdefault("acceptance", {})
    found["acceptance"] = {**(found["acceptance"] or {}), "baselines": kept}
    if after != expected:
        raise BaselineError("the edit changed more than the one entry; the file is left as is")
    try:
        parse_platform_config(after["config"][f"{project}:{CONFIG_KEY}"], stack=stack)
    except ConfigError as error:
        raise BaselineError(f"the stack would not validate: {error}") from None
    return edited


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/synth baseline",
        description="Turn a fabric test's (or one-node acceptance run's) output into the "
        "pool's measured baseline in stacks/Pulumi.<stack>.yaml.",
    )
    parser.add_argument("stack", help="stack name (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument("--pool", required=True, help="the node pool the run was on")
    add_measure_arguments(parser)
    parser.add_argument(
        "--instance-type", default=None,
        help="the nodes' instance type (default: the pool's, when it has one)",
    )  # fmt: skip
    parser.add_argument("--write", action="store_true", help="edit the stack file")
    parser.add_argument("--project-dir", type=Path, default=REPOSITORY_ROOT)
    return parser


def main(argv: list[str]) -> int:
    """``python -m synth baseline``; exit 0, or 2 with one line saying why not.

    Args:
        argv: the arguments after ``baseline``.
    """
    args = _parser().parse_args(argv)
    try:
        stack = load_stack(args.stack, args.project_dir)
        project, stacks_dir = project_settings(args.project_dir)
        config = parse_platform_config(stack.platform, stack=args.stack)
        pool = next((p for p in config.node_pools if p.name == args.pool), None)
        if pool is None:
            names = ", ".join(p.name for p in config.node_pools) or "none"
            raise BaselineError(f"stack {args.stack} has no node pool {args.pool}; pools: {names}")
        instance_type = args.instance_type or (
            pool.instance_types[0] if len(pool.instance_types) == 1 else None
        )
        if instance_type not in pool.instance_types:
            raise BaselineError(
                f"--instance-type {instance_type}: one of the pool's types is wanted: "
                f"{', '.join(pool.instance_types)}"
            )
        measurement: Measurement = measure(
            args.output.read_text(errors="replace"), check=args.check,
            instance_type=instance_type, nodes=args.nodes, margin=args.margin,
        )  # fmt: skip
        entry = measurement.entry(default_source(args.run, args.nodes))
        path = stacks_dir / f"Pulumi.{args.stack}.yaml"
        edited = checked_edit(path.read_text(), project, args.stack, args.pool, entry)
    except (StackFileError, BaselineError, UnusableEvidence, ConfigError, OSError) as error:
        print(f"baseline: {error}", file=sys.stderr)
        return 2
    report(measurement, None, None, sys.stdout)
    if args.write:
        path.write_text(edited)
        print(f"wrote {path}: nodePools[{args.pool}].acceptance.baselines: {flow_entry(entry)}")
    else:
        print(f"- {flow_entry(entry)}  # (--write puts it in {path})")
    return 0
