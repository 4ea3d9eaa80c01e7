"""``python -m acceptance check``: run the tools on this node, decide, report in the pod's way.

Runs in the check pod the agent creates (it holds every accelerator and EFA interface). Each
tool's output goes into ``--out`` under the file name :mod:`acceptance.decide` reads; then the
pure decision runs on that directory, joined by what running could find out and deciding
cannot: a tool that is missing or timed out, and each shared file system mounted at its path
with its type (from /proc/self/mounts). Findings are printed; the failed ones go to the
termination log, which the kubelet hands to the agent as the pod's termination message (cut to
its 4096-byte limit, saying so). Exit 0 accept, 1 reject, 2 unusable evidence, as ``decide``.

The bus bandwidth it measured leaves the node with the verdict, since the agent deletes the pod
and its evidence once the verdict is recorded: the log gets the bandwidth at every message size,
and the termination message a first line ``measured: <check> bus bandwidth: X GB/s at <size>``,
which the agent writes to the node's ``trainingplatform.io/acceptance-busbw`` annotation and its
Event (a pool's one-node floor is measured from it, passed or failed).

Every tool runs through one :data:`Runner`, so tests substitute recorded output.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from acceptance.baseline import bandwidth_by_size, human_size
from acceptance.cli import read_evidence
from acceptance.decide import (
    ALL_REDUCE,
    DCGM_DIAG,
    FI_INFO,
    NCCOM_TEST,
    NEURON_LS,
    NVIDIA_SMI,
    UNUSABLE,
    Decision,
    Finding,
    decide,
)
from acceptance.floors import BASELINES, Check, load_floors, parse_floors
from acceptance.parsers import UnusableEvidence, parse_all_reduce_perf, parse_nccom_test
from components.catalog import CATALOG, InstanceType

TERMINATION_MESSAGE_LIMIT: Final = 4096
"""Bytes of a termination message the kubelet keeps: the API's Container
``terminationMessagePath`` says a message "will be truncated by the node if greater than 4096
bytes" (kubernetes 35.0.0 client, ``V1Container.termination_message_path``)."""
MOUNTS: Final = Path("/proc/self/mounts")
MEASURED_PREFIX: Final = "measured: "
"""First line(s) of the termination message that carry a measurement, not a failed finding
(acceptance/agent.py reads them by this prefix)."""
BENCHMARKS: Final[tuple[tuple[str, Check, str], ...]] = (
    (ALL_REDUCE, "nccl-all-reduce", "nccl all-reduce"),
    (NCCOM_TEST, "nccom-all-reduce", "nccom all-reduce"),
)
"""Evidence file, baselines check and the words findings use, of each bandwidth benchmark."""


@dataclass(frozen=True)
class ToolRun:
    """What running one tool gave: its output, or why there is none."""

    output: str = ""
    """stdout (what the evidence file gets)."""
    exit_code: int | None = None
    problem: str | None = None
    """``not installed`` or ``timed out after N s``: the tool gave no output to judge."""


Runner = Callable[[Sequence[str], float], ToolRun]
"""Runs one command with a timeout in seconds."""


def run_tool(command: Sequence[str], timeout_s: float) -> ToolRun:
    """Run a command; a missing program or a timeout is a :class:`ToolRun` problem, not an error.

    Args:
        command: the program and its arguments.
        timeout_s: seconds before it is killed.
    """
    try:
        done = subprocess.run(  # fixed commands, no shell
            list(command),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            errors="replace",
        )
    except FileNotFoundError:
        return ToolRun(problem="not installed")
    except PermissionError:
        return ToolRun(problem="not executable")
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout
        text = out.decode(errors="replace") if isinstance(out, bytes) else out or ""
        return ToolRun(output=text, problem=f"timed out after {timeout_s:g} s")
    return ToolRun(done.stdout, done.returncode)


@dataclass(frozen=True)
class Tool:
    """One evidence file and the command that writes it."""

    file: str
    command: tuple[str, ...]
    timeout_s: float


DCGM_TIMEOUT_S: Final = {1: 300.0, 2: 900.0, 3: 2700.0, 4: 7200.0}
"""Seconds a ``dcgmi diag -r N`` may take. NVIDIA's DCGM diagnostics documentation describes
level 1 as seconds, 2 as about two minutes, 3 as about half an hour and 4 as an hour or more;
these leave room above that. A level above 2 does not fit the default 45-minute deadline."""


def all_reduce_max_bytes(instance: InstanceType) -> str:
    """The largest all-reduce message, as ``-e``: at most 16G and a quarter of a GPU's memory.

    all_reduce_perf holds a send and a receive buffer of that size on every GPU; a power of
    two keeps the sizes of every type's run comparable.
    """
    gib = 16
    while gib > 1 and gib * 4 > instance.accelerator_memory_gib:
        gib //= 2
    return f"{gib}G"


def tools(instance: InstanceType, efa: bool, dcgm_level: int) -> list[Tool]:
    """The tools a node of this type runs, in order.

    Args:
        instance: the node's catalog entry.
        efa: whether EFA is checked (``fi_info``).
        dcgm_level: ``dcgmi diag -r`` level; 0 runs no diagnostic.
    """
    if instance.accelerator == "nvidia":
        found = [
            Tool(
                NVIDIA_SMI,
                ("nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader"),
                60.0,
            ),
            # One process over every local GPU (-g), 8 B to the largest size, doubling: NVLink
            # and NVSwitch only, no MPI (NVIDIA/nccl-tests v2.19.6 README.md "Arguments").
            Tool(
                ALL_REDUCE,
                (
                    "all_reduce_perf",
                    "-b",
                    "8",
                    "-e",
                    all_reduce_max_bytes(instance),
                    "-f",
                    "2",
                    "-g",
                    str(instance.accelerators),
                ),
                900.0,
            ),
        ]
        if dcgm_level > 0:
            found.append(
                Tool(
                    DCGM_DIAG,
                    ("dcgmi", "diag", "-r", str(dcgm_level), "-j"),
                    DCGM_TIMEOUT_S.get(dcgm_level, 7200.0),
                )
            )
    else:
        found = [
            Tool(NEURON_LS, ("neuron-ls", "--json-output"), 60.0),
            # An all-reduce over every NeuronCore of the node (-r ranks), the Neuron guide's
            # form: https://awsdocs-neuron.readthedocs-hosted.com/en/v2.29.0/tools/neuron-sys-tools/nccom-test.html
            Tool(NCCOM_TEST, ("nccom-test", "-r", str(instance.neuron_cores), "allr"), 900.0),
        ]
    if efa and instance.supports_efa:
        found.insert(1, Tool(FI_INFO, ("fi_info", "-p", "efa", "-t", "FI_EP_RDM"), 60.0))
    return found


HOST_ENGINE: Final = (
    "nv-hostengine", "--pid", "/tmp/nv-hostengine.pid", "-f", "/tmp/nv-hostengine.log",
    "--home-dir", "/tmp",
)  # fmt: skip
"""The host engine as the check's non-root user starts it: its PID file, log and diagnostic
home default to /var/run and /var/log, which that user cannot write (NVIDIA/DCGM v4.6.0
hostengine/src/HostEngineCommandLine.cpp: ``--pid``, ``-f``/``--log-filename``,
``--home-dir``)."""


def start_host_engine(runner: Runner) -> Finding | None:
    """Start DCGM's ``nv-hostengine`` unless one answers; a finding where it cannot start.

    ``dcgmi`` talks to a host engine; the check pod has none unless it starts one (it exits
    when the pod does).

    Args:
        runner: runs commands.
    """
    if runner(("dcgmi", "discovery", "-l"), 30.0).exit_code == 0:
        return None
    started = runner(HOST_ENGINE, 60.0)
    if started.problem or started.exit_code != 0:
        seen = started.problem or f"exit {started.exit_code}"
        return Finding("tool nv-hostengine", seen, "running", False)
    return None


def run_tools(tool_list: Sequence[Tool], out: Path, runner: Runner) -> list[Finding]:
    """Run each tool into its evidence file; a finding for each that gave nothing to judge.

    A tool that exits non-zero still has its output written: ``dcgmi diag`` exits non-zero when
    a test fails, and the decision reads why.

    Args:
        tool_list: from :func:`tools`.
        out: the evidence directory.
        runner: runs commands.
    """
    findings = []
    for tool in tool_list:
        if tool.file == DCGM_DIAG and (problem := start_host_engine(runner)) is not None:
            findings.append(problem)
            continue
        ran = runner(tool.command, tool.timeout_s)
        if ran.problem is not None:
            findings.append(Finding(f"tool {tool.command[0]}", ran.problem, "finished", False))
            continue
        (out / tool.file).write_text(ran.output)
    return findings


def _unescape(field: str) -> str:
    # /proc/self/mounts writes space, tab, newline and backslash as octal escapes (\040 ...).
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mounted_types(mounts: str) -> dict[str, str]:
    """Mount point to file system type, from /proc/self/mounts text (the last mount wins).

    Args:
        mounts: the file's text: ``device mountpoint fstype options dump pass`` per line.
    """
    types: dict[str, str] = {}
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            types[_unescape(fields[1]).rstrip("/") or "/"] = fields[2]
    return types


@dataclass(frozen=True)
class FileSystemWanted:
    """``--file-system NAME:PATH:FSTYPE``."""

    name: str
    path: str
    fs_type: str


def parse_file_system(text: str) -> FileSystemWanted:
    """``NAME:PATH:FSTYPE`` as a :class:`FileSystemWanted` (argparse type)."""
    parts = text.split(":")
    if len(parts) != 3 or not all(parts) or not parts[1].startswith("/"):
        raise argparse.ArgumentTypeError(
            f"--file-system {text!r}: want NAME:PATH:FSTYPE, e.g. lustre:/mnt/lustre:lustre"
        )
    return FileSystemWanted(*parts)


def file_system_findings(wanted: Sequence[FileSystemWanted], mounts: str) -> list[Finding]:
    """One finding per file system: mounted at its path with its type.

    Args:
        wanted: the pool's file systems.
        mounts: /proc/self/mounts text.
    """
    types = mounted_types(mounts)
    findings = []
    for fs in wanted:
        seen = types.get(fs.path.rstrip("/") or "/")
        findings.append(
            Finding(
                f"file system {fs.name}",
                f"not mounted at {fs.path}" if seen is None else f"{seen} at {fs.path}",
                fs.fs_type,
                seen == fs.fs_type,
            )
        )
    return findings


def measured(out: Path) -> tuple[list[str], list[str]]:
    """What the benchmark in the evidence measured: the termination-message lines and the log's.

    The first list has one ``measured: <check> bus bandwidth: X GB/s at <size>`` line per
    benchmark output found (its largest size, as the decision reads it); the second the bus
    bandwidth at every size, as ``acceptance baseline`` prints it. Output that is no benchmark
    table gives neither (the decision reports it).

    Args:
        out: the evidence directory.
    """
    message: list[str] = []
    log: list[str] = []
    for file_name, check_name, words in BENCHMARKS:
        path = out / file_name
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        parse = parse_all_reduce_perf if check_name == "nccl-all-reduce" else parse_nccom_test
        try:
            largest = parse(text)
            sizes = bandwidth_by_size(text, check_name)
        except UnusableEvidence:
            continue
        message.append(
            f"{MEASURED_PREFIX}{words} bus bandwidth: {largest.busbw_gbps:g} GB/s at "
            f"{human_size(largest.size_bytes)}"
        )
        log.append(f"{words} bus bandwidth per size ({file_name}):")
        log += [f"{human_size(r.size_bytes):>10}  {r.busbw_gbps:>10.2f} GB/s" for r in sizes]
    return message, log


def termination_message(
    decision: Decision, limit: int = TERMINATION_MESSAGE_LIMIT, first: Sequence[str] = ()
) -> str:
    """The failed findings and unusable files, one a line, within ``limit`` bytes (UTF-8).

    Lines that do not fit are dropped whole and a last line says how many were cut.

    Args:
        decision: the decision with every finding.
        limit: bytes the kubelet keeps (4096).
        first: lines that go before the findings (the ``measured:`` lines of :func:`measured`);
            default none.
    """
    lines = [*first, *(str(f) for f in decision.findings if not f.ok)]
    lines += [f"unusable: {reason}" for reason in decision.unusable]
    text = "\n".join(lines)
    if len(text.encode()) <= limit:
        return text

    def note(cut: int) -> str:
        return f"... {cut} more cut (termination message limit {limit} bytes)"

    kept: list[str] = []
    for line in lines:
        rest = len(lines) - len(kept) - 1
        if len("\n".join([*kept, line, note(rest)]).encode()) > limit:
            break
        kept.append(line)
    return "\n".join([*kept, note(len(lines) - len(kept))])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m acceptance check")
    parser.add_argument("--instance-type", required=True, help="the node's EC2 instance type")
    parser.add_argument("--out", required=True, type=Path, help="evidence directory to write")
    parser.add_argument(
        "--dcgm-level",
        type=int,
        default=0,
        choices=range(5),
        help="dcgmi diag -r level; 0 runs none (default)",
    )
    parser.add_argument(
        "--efa",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="check EFA (default: whether the type has EFA)",
    )
    parser.add_argument(
        "--file-system",
        action="append",
        default=[],
        type=parse_file_system,
        metavar="NAME:PATH:FSTYPE",
        help="a file system that must be mounted",
    )
    parser.add_argument(
        "--baselines",
        type=Path,
        default=BASELINES,
        help="floors file (default: the shipped baselines.json)",
    )
    parser.add_argument(
        "--baselines-json",
        default=None,
        help='floors inline, {"floors": [...]} (the pool\'s, from the agent)',
    )
    parser.add_argument(
        "--termination-log",
        type=Path,
        default=Path("/dev/termination-log"),
        help="where the failed findings go (default /dev/termination-log)",
    )
    return parser


def _finish(message: str, status: int, termination_log: Path, out: TextIO) -> int:
    print(message, file=out)
    termination_log.write_text(message[:TERMINATION_MESSAGE_LIMIT])
    return status


def main(
    argv: Sequence[str], out: TextIO = sys.stdout, runner: Runner = run_tool, mounts: Path = MOUNTS
) -> int:
    """Run the check; returns the exit status (0 accept, 1 reject, 2 unusable).

    Args:
        argv: the arguments after ``check``.
        out: where the findings are printed.
        runner: runs the tools (tests pass recorded output).
        mounts: the mount table read for ``--file-system``.
    """
    args = _parser().parse_args(argv)
    instance = CATALOG.get(args.instance_type)
    if instance is None:
        return _finish(
            f"unusable: instance type {args.instance_type!r} is not in the catalog",
            UNUSABLE,
            args.termination_log,
            out,
        )
    try:
        floors = (
            parse_floors(json.loads(args.baselines_json).get("floors", []), "--baselines-json")
            if args.baselines_json is not None
            else load_floors(args.baselines)
        )
    except (OSError, ValueError) as error:
        return _finish(f"unusable: baselines: {error}", UNUSABLE, args.termination_log, out)
    args.out.mkdir(parents=True, exist_ok=True)
    efa = instance.supports_efa if args.efa is None else args.efa
    found = run_tools(tools(instance, efa, args.dcgm_level), args.out, runner)
    if args.file_system:
        try:
            table = mounts.read_text()
        except OSError as error:
            table = ""
            found.append(Finding("mount table", f"unreadable ({error})", "readable", False))
        found += file_system_findings(args.file_system, table)
    decision = decide(instance, read_evidence(args.out), floors, efa=efa)
    decision.findings[:0] = found
    for finding in decision.findings:
        print(f"{'pass' if finding.ok else 'fail'}: {finding}", file=out)
    for reason in decision.unusable:
        print(f"unusable: {reason}", file=out)
    message_lines, per_size = measured(args.out)
    for line in per_size:
        print(line, file=out)
    verdict = {0: "accept", 1: "reject", 2: "unusable evidence"}[decision.status]
    print(f"{verdict}: {args.instance_type}", file=out)
    args.termination_log.write_text(termination_message(decision, first=message_lines))
    return decision.status
