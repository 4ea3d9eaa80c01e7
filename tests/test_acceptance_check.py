"""`python -m acceptance check`: the tools run through a fake runner that returns recorded output.

The tool output is that of tests/test_acceptance_decide.py's builders (each cited there, and
what is synthetic said there). The mount table below is SYNTHETIC, in /proc/self/mounts' format
(proc(5): device, mount point, type, options, dump, pass), an FSx for Lustre mount written as
the FSx CSI driver mounts it (``<dns>@tcp:/<mountname>``).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from acceptance import check
from acceptance.check import ToolRun
from acceptance.cli import main
from acceptance.decide import DCGM_DIAG, FI_INFO, Decision, Finding
from components.catalog import CATALOG
from tests.test_acceptance_decide import good_evidence

MOUNTS = """\
overlay / overlay rw,relatime,lowerdir=/var/lib/containerd/l1,upperdir=/u,workdir=/w 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh /mnt/lustre lustre rw,relatime,flock 0 0
/dev/nvme0n1p1 /mnt/scratch\\040space xfs rw,relatime 0 0
"""

TOOL_FILES = {
    "nvidia-smi": "nvidia-smi.csv", "fi_info": FI_INFO, "all_reduce_perf": "all_reduce_perf.txt",
    "dcgmi": DCGM_DIAG, "neuron-ls": "neuron-ls.json", "nccom-test": "nccom-test.txt",
}  # fmt: skip


class Recorded:
    """A runner answering each tool with recorded output, logging what it was asked to run."""

    def __init__(self, evidence: Mapping[str, str | None],
                 problems: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self.evidence = evidence
        self.problems = dict(problems or {})
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, command: Sequence[str], timeout_s: float) -> ToolRun:
        self.calls.append(tuple(command))
        program = command[0]
        if program in self.problems:
            return ToolRun(problem=self.problems[program])
        if command[:2] == ("dcgmi", "discovery"):
            return ToolRun("", 255)  # no host engine yet
        if program == "nv-hostengine":
            return ToolRun("Started host engine version 4.2.3 using port number: 5555\n", 0)
        text = self.evidence.get(TOOL_FILES[program])
        assert text is not None, f"no recorded output for {program}"
        return ToolRun(text, 0)


def run_check(tmp_path: Path, instance_type: str, runner: Recorded, *extra: str
              ) -> tuple[int, str, str]:  # fmt: skip
    out, log = io.StringIO(), tmp_path / "termination-log"
    mounts = tmp_path / "mounts"
    mounts.write_text(MOUNTS)
    status = check.main(
        ["--instance-type", instance_type, "--out", str(tmp_path / "evidence"),
         "--termination-log", str(log), *extra],
        out, runner, mounts,
    )  # fmt: skip
    return status, out.getvalue(), log.read_text()


def test_a_healthy_gpu_node_passes_with_every_file_written(tmp_path: Path) -> None:
    instance = CATALOG["p5.48xlarge"]
    runner = Recorded(good_evidence(instance))
    status, out, log = run_check(tmp_path, instance.name, runner, "--dcgm-level", "2",
                                 "--file-system", "lustre:/mnt/lustre:lustre")  # fmt: skip
    assert status == 0, out
    # The measured figure leaves the node with the verdict (the agent deletes the pod and its
    # evidence): first line of the termination message, and every size in the log.
    assert log == "measured: nccl all-reduce bus bandwidth: 487.09 GB/s at 16 GiB"
    assert "nccl all-reduce bus bandwidth per size (all_reduce_perf.txt):" in out
    assert "    16 GiB      487.09 GB/s" in out.splitlines()
    assert "pass: file system lustre: lustre at /mnt/lustre, want lustre" in out
    assert out.splitlines()[-1] == "accept: p5.48xlarge"
    written = sorted(p.name for p in (tmp_path / "evidence").iterdir())
    assert written == sorted(["nvidia-smi.csv", FI_INFO, "all_reduce_perf.txt", DCGM_DIAG])
    assert runner.calls == [
        ("nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader"),
        ("fi_info", "-p", "efa", "-t", "FI_EP_RDM"),
        ("all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-g", "8"),
        ("dcgmi", "discovery", "-l"),
        check.HOST_ENGINE,
        ("dcgmi", "diag", "-r", "2", "-j"),
    ]


def test_a_trainium_node_runs_the_neuron_tools(tmp_path: Path) -> None:
    instance = CATALOG["trn2.48xlarge"]
    runner = Recorded(good_evidence(instance))
    status, out, _ = run_check(tmp_path, instance.name, runner)
    assert status == 0, out
    assert runner.calls == [
        ("neuron-ls", "--json-output"),
        ("fi_info", "-p", "efa", "-t", "FI_EP_RDM"),
        ("nccom-test", "-r", "64", "allr"),
    ]


def test_missing_tools_timeouts_and_file_systems_are_findings(tmp_path: Path) -> None:
    instance = CATALOG["g5.48xlarge"]
    runner = Recorded(good_evidence(instance),
                      {"dcgmi": "not installed", "nv-hostengine": "not installed",
                       "all_reduce_perf": "timed out after 900 s"})  # fmt: skip
    status, out, log = run_check(
        tmp_path, instance.name, runner, "--dcgm-level", "1", "--no-efa",
        "--file-system", "lustre:/mnt/lustre:lustre", "--file-system", "home:/home:nfs4",
        "--file-system", "scratch:/mnt/scratch space:lustre",
    )  # fmt: skip
    assert status == 1, out
    assert log.splitlines() == [
        "tool all_reduce_perf: timed out after 900 s, want finished",
        "tool nv-hostengine: not installed, want running",
        "file system home: not mounted at /home, want nfs4",
        "file system scratch: xfs at /mnt/scratch space, want lustre",
        "evidence all_reduce_perf.txt: missing, want present",
    ]
    assert ("fi_info", "-p", "efa", "-t", "FI_EP_RDM") not in runner.calls
    assert "pass: file system lustre: lustre at /mnt/lustre, want lustre" in out


def test_output_that_is_not_the_tools_is_unusable(tmp_path: Path) -> None:
    instance = CATALOG["g6.xlarge"]
    evidence = {**good_evidence(instance), "nvidia-smi.csv": "NVIDIA-SMI has failed, driver\n"}
    status, _, log = run_check(tmp_path, instance.name, Recorded(evidence))
    assert status == 2
    assert log.splitlines()[0].startswith("measured: nccl all-reduce bus bandwidth: ")
    assert log.splitlines()[1].startswith("unusable: nvidia-smi.csv line 1")


def test_the_termination_message_fits_the_kubelet_limit_and_says_it_was_cut() -> None:
    decision = Decision([Finding(f"check {i}", "x" * 100, "y", False) for i in range(60)])
    message = check.termination_message(decision)
    assert len(message.encode()) <= 4096
    lines = message.splitlines()
    assert lines[0] == f"check 0: {'x' * 100}, want y"
    assert lines[-1] == (
        f"... {60 - len(lines) + 1} more cut (termination message limit 4096 bytes)"
    )
    short = Decision([Finding("gpu count", "7", "8", False), Finding("gpu model", "H100", "H100",
                                                                     True)])  # fmt: skip
    assert check.termination_message(short) == "gpu count: 7, want 8"


def test_the_real_runner_reports_a_missing_program_and_a_timeout() -> None:
    assert check.run_tool(["no-such-tool-here"], 5).problem == "not installed"
    slow = check.run_tool([sys.executable, "-c", "import time; time.sleep(5)"], 0.2)
    assert slow.problem == "timed out after 0.2 s"
    done = check.run_tool([sys.executable, "-c", "print('ok'); raise SystemExit(3)"], 10)
    assert (done.output, done.exit_code, done.problem) == ("ok\n", 3, None)


def test_the_command_line_dispatches_check(tmp_path: Path) -> None:
    out = io.StringIO()
    log = tmp_path / "log"
    status = main(["check", "--instance-type", "x1.nope", "--out", str(tmp_path),
                   "--termination-log", str(log)], out)  # fmt: skip
    assert status == 2
    assert log.read_text() == "unusable: instance type 'x1.nope' is not in the catalog"
