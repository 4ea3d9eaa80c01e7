"""The jobs model's answer in words: a table for people, JSON for programs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from synth.jobs.model import PathReport

_WIDTH = 100
LABELS = {
    "trainjob": "",
    "legacy-job": "v1:",
    "katib-trial": "katib:",
    "rayjob": "rayjob:",
    "raycluster": "raycluster:",
    "notebook": "notebook:",
    "fabric-test": "fabric:",
}
"""How a path's kind prefixes its runtime in the table (Slurm partitions: ``slurm:``)."""


def as_json(reports: list[PathReport]) -> str:
    """The ``--json`` output: one ``{team, runtime, pool, maxNodes, runnable, ...}`` per path."""
    return json.dumps([report.to_json() for report in reports], indent=2) + "\n"


def write(reports: list[PathReport], path: Path) -> None:
    """Write the JSON answer to ``path`` (``jobs.json`` beside a synthesis)."""
    path.write_text(as_json(reports))


def table(stack: str, reports: list[PathReport]) -> str:
    """One row per path, its reasons indented below it."""
    headers = ("TEAM", "RUNTIME / PARTITION", "POOL", "MAX NODES", "RUNNABLE")
    rows = [
        (
            r.team,
            LABELS.get(r.kind, "slurm:") + r.runtime,
            r.pool or "-",
            str(r.max_nodes),
            "yes" if r.runnable else ("NO" if r.offered else "no (not offered)"),
        )
        for r in reports
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = [f"{stack}: what each team's jobs and each Slurm partition can get"]
    lines.append(_row(headers, widths))
    for report, row in zip(reports, rows, strict=True):
        lines.append(_row(row, widths))
        for reason in report.reasons:
            wrapped = textwrap.wrap(reason, _WIDTH - 8)
            lines.append("      - " + wrapped[0])
            lines += ["        " + more for more in wrapped[1:]]
    blocked = sum(1 for r in reports if not r.runnable and r.offered)
    left_out = sum(1 for r in reports if not r.offered)
    tail = f", {left_out} not offered (each says why)"
    lines.append(f"  {len(reports)} path(s), {blocked} not runnable" + (tail if left_out else ""))
    return "\n".join(lines)


def _row(cells: tuple[str, ...], widths: list[int]) -> str:
    return ("  " + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))).rstrip()


def summary(reports: list[PathReport]) -> str:
    """One line for the synthesis summary, then each path that cannot run."""
    blocked = [r for r in reports if not r.runnable and r.offered]
    left_out = sum(1 for r in reports if not r.offered)
    lines = [f"  jobs: {len(reports)} path(s), {len(blocked)} not runnable"]
    if left_out:
        lines[0] += f", {left_out} not offered"
    lines += [
        f"  NOT RUNNABLE {r.team}/{r.runtime}: {r.reasons[0] if r.reasons else 'no nodes'}"
        for r in blocked
    ]
    return "\n".join(lines)
