"""Command line: ``python -m acceptance decide --instance-type T --evidence DIR``.

``python -m acceptance agent`` (:mod:`acceptance.agent`), ``python -m acceptance sweep``
(:mod:`acceptance.sweep`) and ``python -m acceptance check`` (:mod:`acceptance.check`) are
dispatched from here too.

Prints one line per finding, ``pass: `` or ``fail: `` then "check: seen, want wanted", then one
``unusable: `` line per file that is not its tool's output, and a last line with the verdict.
Exit 0 accept, 1 reject, 2 unusable input (an unparseable file, an unknown instance type).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from acceptance import baseline
from acceptance.decide import EVIDENCE_FILES, UNUSABLE, decide
from acceptance.floors import BASELINES, load_floors
from components.catalog import CATALOG


def read_evidence(directory: Path) -> dict[str, str | None]:
    """The evidence files in a directory, by name (``None`` for each one that is absent).

    Args:
        directory: where the checking tools wrote their output.
    """
    return {
        name: (directory / name).read_text(errors="replace")
        if (directory / name).is_file()
        else None
        for name in EVIDENCE_FILES
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m acceptance")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("decide", help="judge a node from its tools' raw output")
    run.add_argument("--instance-type", required=True, help="the node's EC2 instance type")
    run.add_argument("--evidence", required=True, type=Path, help="directory of tool output")
    run.add_argument(
        "--baselines", type=Path, default=BASELINES,
        help="bus-bandwidth floors (default: the baselines.json shipped with the program)",
    )  # fmt: skip
    run.add_argument(
        "--efa", action=argparse.BooleanOptionalAction, default=None,
        help="whether the node's pool attaches EFA (default: whether the type has EFA)",
    )  # fmt: skip
    baseline.add_parser(commands)
    commands.add_parser("mirror", add_help=False, help="keep Slurm and Kubernetes health as one")
    commands.add_parser("sweep", add_help=False, help="mark expired nodes whose agent did not")
    return parser


def main(argv: Sequence[str], out: TextIO = sys.stdout) -> int:
    """Run the command line; returns the exit status.

    Args:
        argv: the arguments after the program name.
        out: where the findings go (stdout).
    """
    if argv and argv[0] == "mirror":
        from acceptance import mirror  # noqa: PLC0415

        return mirror.main(argv[1:])
    if argv and argv[0] == "agent":
        from acceptance import agent  # noqa: PLC0415 (each command loads only what it runs)

        return agent.main(argv[1:], out)
    if argv and argv[0] == "sweep":
        from acceptance import sweep  # noqa: PLC0415

        return sweep.main(argv[1:], out)
    if argv and argv[0] == "check":
        from acceptance import check  # noqa: PLC0415

        return check.main(argv[1:], out)
    args = _parser().parse_args(argv)
    if args.command == "baseline":
        return baseline.run(args, out)
    instance = CATALOG.get(args.instance_type)
    if instance is None:
        print(
            f"unusable: instance type {args.instance_type!r} is not in the catalog; known: "
            f"{', '.join(sorted(CATALOG))}",
            file=out,
        )
        return UNUSABLE
    if not args.evidence.is_dir():
        print(f"unusable: evidence directory {args.evidence} does not exist", file=out)
        return UNUSABLE
    try:
        floors = load_floors(args.baselines)
    except (OSError, ValueError) as error:
        print(f"unusable: baselines {args.baselines}: {error}", file=out)
        return UNUSABLE
    decision = decide(instance, read_evidence(args.evidence), floors, efa=args.efa)
    for finding in decision.findings:
        print(f"{'pass' if finding.ok else 'fail'}: {finding}", file=out)
    for reason in decision.unusable:
        print(f"unusable: {reason}", file=out)
    verdict = {0: "accept", 1: "reject", 2: "unusable evidence"}[decision.status]
    print(f"{verdict}: {args.instance_type}", file=out)
    return decision.status
