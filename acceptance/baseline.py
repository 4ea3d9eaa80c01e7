"""A measured run turned into a pool's baseline: bus bandwidth per size, the floor it sets.

``python -m acceptance baseline --output FILE --check C --instance-type T --nodes N`` reads an
``all_reduce_perf`` or ``nccom-test`` output (the fabric test's launcher log, or a one-node
acceptance run's evidence file), prints the bus bandwidth at every message size, and the
``nodePools[].acceptance.baselines`` entry it makes: the floor is the bus bandwidth at the
largest size times ``1 - margin``. With ``--floor-gbps`` it also holds the run to a floor (the
fabric test passes the pool's) and exits 1 below it. The stack-file edit is not here (this
package runs without Pulumi or the stack files): ``python -m synth baseline`` calls
:func:`measure` and writes the entry (synth/baseline.py).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TextIO

from acceptance.floors import CHECKS, Check
from acceptance.parsers import (
    BusBandwidth,
    UnusableEvidence,
    _number,
    _strip_rank,
    parse_all_reduce_perf,
    parse_nccom_test,
)
from components.catalog import CATALOG

DEFAULT_MARGIN: Final = 0.10
"""The floor is the measured figure less 10%. Bus bandwidth of one pair of nodes varies by a few
percent from run to run (the same repository's published p5 runs differ by size and scheduler,
437.8 and 487.09 GB/s), so a healthy node must not fall below a floor set on a good run; while
the faults acceptance exists for cost more than that: one of p4d's four EFA interfaces is 25%
of its fabric, a GPU's NVLink running degraded halves its links."""
GB: Final = 1e9


@dataclass(frozen=True)
class SizeBandwidth:
    """Bus bandwidth at one message size (the lower of out-of-place and in-place)."""

    size_bytes: int
    busbw_gbps: float


@dataclass(frozen=True)
class Measurement:
    """One run's result: every size, the largest, and the floor it sets."""

    check: Check
    instance_type: str
    nodes: int
    sizes: list[SizeBandwidth]
    largest: BusBandwidth
    margin: float

    @property
    def floor_gbps(self) -> float:
        """The floor: bus bandwidth at the largest size times ``1 - margin``, GB/s, 0.1 down."""
        return int(self.largest.busbw_gbps * (1 - self.margin) * 10) / 10

    def of(self) -> str:
        """What the floor measures, in the words of acceptance/baselines.json's ``of``."""
        tool = "all_reduce_perf" if self.check == "nccl-all-reduce" else "nccom-test all-reduce"
        where = "one node, every accelerator" if self.nodes == 1 else f"{self.nodes} nodes over EFA"
        return (
            f"{tool} bus bandwidth at {human_size(self.largest.size_bytes)}, {where}, less "
            f"{self.margin:.0%}"
        )

    def entry(self, source: str) -> dict[str, object]:
        """The ``nodePools[].acceptance.baselines`` entry (the stack file's spelling)."""
        return {
            "instanceType": self.instance_type,
            "check": self.check,
            "nodes": self.nodes,
            "floorGbps": self.floor_gbps,
            "of": self.of(),
            "source": source,
            "sizeBytes": self.largest.size_bytes,
        }


def human_size(size: int) -> str:
    """A message size as the published figures write it: ``16 GiB``, ``512 MiB``, ``8 B``."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def bandwidth_by_size(text: str, check: Check) -> list[SizeBandwidth]:
    """Bus bandwidth at each message size of an all_reduce_perf or nccom-test output.

    The tables are read by their headers' column names, as :mod:`acceptance.parsers` reads
    them (nccl-tests: ``size ... busbw`` twice, out-of-place then in-place; nccom-test:
    ``size(B) ... busbw(GB/s)``).

    Args:
        text: the whole output (rank prefixes allowed).
        check: ``nccl-all-reduce`` or ``nccom-all-reduce``.

    Raises:
        UnusableEvidence: no table of that tool.
    """
    nccl = check == "nccl-all-reduce"
    columns: list[str] = []
    found: list[SizeBandwidth] = []
    for raw in text.splitlines():
        line = _strip_rank(raw)
        tokens = line.lstrip("#").split() if nccl and line.startswith("#") else line.split()
        if (nccl and "busbw" in tokens and "size" in tokens) or (
            not nccl and "size(B)" in tokens and "busbw(GB/s)" in tokens
        ):
            columns = tokens
            continue
        if not columns or line.startswith("#") or not tokens or not tokens[0].isdigit():
            continue
        if len(tokens) < len(columns):
            continue
        name = "busbw" if nccl else "busbw(GB/s)"
        values = [_number(tokens[i]) for i, column in enumerate(columns) if column == name]
        numbers = [v for v in values if v is not None]
        if numbers:
            found.append(SizeBandwidth(int(tokens[0]), min(numbers)))
    if not found:
        tool = "all_reduce_perf" if nccl else "nccom-test"
        raise UnusableEvidence(f"no {tool} table (a header with busbw and rows under it)")
    return found


def measure(
    text: str, *, check: Check, instance_type: str, nodes: int, margin: float = DEFAULT_MARGIN
) -> Measurement:
    """Read a run's output into a :class:`Measurement`.

    Args:
        text: the tool's whole output.
        check: which benchmark it is.
        instance_type: the nodes' instance type.
        nodes: nodes the run spanned (1 or 2).
        margin: share taken off the measured figure for the floor, 0 to < 1. Default
            :data:`DEFAULT_MARGIN`.

    Raises:
        UnusableEvidence: not that tool's output, a run that did not finish or found wrong
            values (a floor is never set from a broken run), or a margin out of range.
    """
    if not 0 <= margin < 1:
        raise UnusableEvidence(f"margin {margin} is not in [0, 1)")
    largest = (parse_all_reduce_perf if check == "nccl-all-reduce" else parse_nccom_test)(text)
    if not largest.finished:
        raise UnusableEvidence("the run did not finish (no 'Avg bus bandwidth' line)")
    if largest.wrong:
        raise UnusableEvidence(f"the run found {largest.wrong} wrong value(s)")
    sizes = bandwidth_by_size(text, check)
    return Measurement(check, instance_type, nodes, sizes, largest, margin)


def default_source(run: str | None, nodes: int, now: datetime | None = None) -> str:
    """``measured: <run> on <date>``: the run that set the floor, and when.

    Args:
        run: the run's name (the fabric test's TrainJob, the node checked); None: unnamed.
        nodes: nodes of the run.
        now: the date to record. Default: today, UTC.
    """
    day = (now or datetime.now(UTC)).date().isoformat()
    what = run or ("fabric test" if nodes > 1 else "acceptance run")
    return f"measured: {what} on {day}"


def report(
    measurement: Measurement,
    floor_gbps: float | None,
    floor_source: str | None,
    out: TextIO,
    floor_size_bytes: int | None = None,
) -> int:
    """Print bus bandwidth per size and the verdict against a floor; the exit status.

    Exit 0 (at or above the floor, or none), 1 (below it) or 2 (the run has no row at the
    floor's size: not comparable).

    Args:
        measurement: the run.
        floor_gbps: the floor, GB/s; None: none (exit 0).
        floor_source: where that floor comes from, for the line that names it.
        out: where to print.
        floor_size_bytes: the message size the floor was taken at; the run is compared at that
            size, as bus bandwidth grows with the size. Default None: the run's largest size.
    """
    print(f"{'size':>10}  {'busbw GB/s':>10}", file=out)
    for row in measurement.sizes:
        print(f"{human_size(row.size_bytes):>10}  {row.busbw_gbps:>10.2f}", file=out)
    if floor_gbps is None:
        return 0
    if floor_size_bytes is None:
        seen = measurement.largest.busbw_gbps
        size = human_size(measurement.largest.size_bytes)
    else:
        size = human_size(floor_size_bytes)
        rows = [r for r in measurement.sizes if r.size_bytes == floor_size_bytes]
        if not rows:
            print(
                f"unusable: the run has no row at {size}, the size the floor was taken at",
                file=out,
            )
            return 2
        seen = rows[0].busbw_gbps
    ok = seen >= floor_gbps
    print(
        f"{'pass' if ok else 'fail'}: {measurement.nodes}-node bus bandwidth: {seen:g} GB/s at "
        f"{size}, want >= {floor_gbps:g} GB/s ({floor_source or 'floor given'})",
        file=out,
    )
    return 0 if ok else 1


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``baseline`` sub-command to ``python -m acceptance``.

    Args:
        commands: the command line's sub-parsers.
    """
    command = commands.add_parser(
        "baseline", help="bus bandwidth per size of a run, and the baseline entry it makes"
    )
    add_measure_arguments(command)
    command.add_argument("--instance-type", required=True, help="the nodes' EC2 instance type")
    command.add_argument(
        "--floor-gbps", type=float, default=None,
        help="hold the run to this floor, GB/s; exit 1 below it (default: no floor)",
    )  # fmt: skip
    command.add_argument("--floor-source", default=None, help="where --floor-gbps comes from")
    command.add_argument(
        "--floor-size-bytes", type=int, default=None,
        help="the message size the floor was taken at, bytes: compare there (default: the "
        "run's largest size)",
    )  # fmt: skip


def add_measure_arguments(command: argparse.ArgumentParser) -> None:
    """The arguments that name a run: output, check, type, nodes, margin, run name.

    Shared with ``python -m synth baseline``.

    Args:
        command: the sub-command's parser.
    """
    command.add_argument("--output", required=True, type=Path, help="the tool's output")
    command.add_argument("--check", required=True, choices=CHECKS, help="which benchmark")
    command.add_argument("--nodes", type=int, choices=(1, 2), default=2, help="default: 2")
    command.add_argument(
        "--margin", type=float, default=DEFAULT_MARGIN,
        help=f"share off the measured figure for the floor (default: {DEFAULT_MARGIN})",
    )  # fmt: skip
    command.add_argument(
        "--run", default=None, help="the run's name for the source (e.g. the TrainJob's)"
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    """``python -m acceptance baseline``: print per size, the floor verdict, the entry.

    Exit 0, 1 (below ``--floor-gbps``) or 2 (unusable output, unknown type).

    Args:
        args: parsed arguments.
        out: where to print.
    """
    if args.instance_type not in CATALOG:
        print(
            f"unusable: instance type {args.instance_type!r} is not in the catalog; known: "
            f"{', '.join(sorted(CATALOG))}",
            file=out,
        )
        return 2
    try:
        text = args.output.read_text(errors="replace")
        measurement = measure(
            text, check=args.check, instance_type=args.instance_type, nodes=args.nodes,
            margin=args.margin,
        )  # fmt: skip
    except (OSError, UnusableEvidence) as error:
        print(f"unusable: {args.output}: {error}", file=out)
        return 2
    status = report(measurement, args.floor_gbps, args.floor_source, out, args.floor_size_bytes)
    entry = measurement.entry(default_source(args.run, args.nodes))
    print("baseline: " + _flow(entry), file=out)
    return status


def _flow(entry: dict[str, object]) -> str:
    """A YAML flow mapping of an entry (strings JSON-quoted, which YAML reads as they are)."""
    return "{" + ", ".join(f"{key}: {json.dumps(value)}" for key, value in entry.items()) + "}"


def flow_entry(entry: dict[str, object]) -> str:
    """A baselines entry as one YAML flow mapping, the line the stack file gets.

    Args:
        entry: from :meth:`Measurement.entry`.
    """
    return _flow(entry)
