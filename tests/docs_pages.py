"""The README and the documentation's pages, read by the tests that keep what they show true.

Examples are found by their markers wherever they sit: a job manifest under ``<!-- runs-on:
STACK -->``, a Slurm script under ``<!-- slurm-example: STACK -->``, a command's output under
``<!-- jobs-output:STACK -->``. So a page can be split or moved without a test losing its example.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml

README: Final = REPOSITORY_ROOT / "README.md"
DOCS: Final = REPOSITORY_ROOT / "docs"


def page(name: str) -> str:
    """The Markdown of ``docs/<name>``.

    Args:
        name: the page's path under ``docs/`` (``how-to/deploy.md``).
    """
    return (DOCS / name).read_text()


def pages() -> list[Path]:
    """Every page of the site, in path order."""
    return sorted(DOCS.rglob("*.md"))


def all_pages() -> str:
    """Every page's Markdown, one after the other (each starts with its own ``# `` title)."""
    return "\n".join(path.read_text() for path in pages())


def section(text: str, heading: str) -> str:
    """The body under ``heading`` (a whole line, e.g. ``## Tearing down``) up to the next
    heading of the same or a higher level; lines inside code fences are not headings.

    Args:
        text: the Markdown to look in.
        heading: the heading line, ``#`` marks included.
    """
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    start = lines.index(heading) + 1
    for end in range(start, len(lines)):
        match = re.match(r"(#+) ", lines[end])
        if match and len(match.group(1)) <= level and not in_fence(lines, end):
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def in_fence(lines: list[str], index: int) -> bool:
    """Whether ``lines[index]`` sits inside a code fence.

    Args:
        lines: the Markdown's lines.
        index: the line asked about.
    """
    return sum(1 for line in lines[:index] if line.strip().startswith("```")) % 2 == 1


def fenced(text: str, language: str) -> list[str]:
    """The body of every code block of ``language`` in ``text``.

    Args:
        text: the Markdown to look in.
        language: the fence's info string (``yaml``, ``bash``).
    """
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


def marked_examples(marker: str) -> list[tuple[str, dict[str, Any]]]:
    """(stack, document) of every YAML example a page marks with ``marker``.

    Args:
        marker: the comment before the example, ``STACK`` standing for the stack's name
            (``<!-- runs-on: STACK -->``).
    """
    pattern = re.escape(marker).replace("STACK", r"(\w+)") + r"\n```yaml\n(.*?)```"
    return [(stack, load_yaml(body)) for stack, body in re.findall(pattern, all_pages(), re.DOTALL)]
