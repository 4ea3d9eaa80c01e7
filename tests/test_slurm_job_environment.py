"""Issue 21 point 6: the job environment has what the examples use.

A Slurm job takes the PATH of the shell that submitted it (the login pod's), which has none of
the slurmd image's tools. The TaskProlog (components/slurm/conf.py) puts them first in every task,
before slurmstepd looks the program up (SchedMD/slurm slurm-26-05-3-1
src/slurmd/slurmstepd/task.c, exec_task: TaskProlog, then _build_path over the task's PATH).
This test runs it and checks, statically against images/slurmd/Dockerfile, that each program
the docs' Slurm examples start is on that PATH and installed by the recipe.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from components.checkpoints import CheckpointLocation, checkpoint_location
from components.slurm import (
    TASK_PROLOG,
    TASK_PROLOG_CONFIG_MAP,
    TASK_PROLOG_DIR,
    job_tools_path,
    task_prolog,
)
from synth.run import StackResult
from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml
from tests import docs_pages
from tests.conftest import STACKS

DOCKERFILE = REPOSITORY_ROOT / "images" / "slurmd" / "Dockerfile"
LOGIN_SHELL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The PATH a login shell on Slinky's Ubuntu login image has (Ubuntu's /etc/environment)."""

PROGRAMS: dict[str, tuple[str, str]] = {
    # program: (where the recipe's installer puts it, what in the recipe installs it)
    "neuron-ls": ("/opt/aws/neuron/bin", "aws-neuronx-tools"),
    "neuron-top": ("/opt/aws/neuron/bin", "aws-neuronx-tools"),
    "mpirun": ("/opt/amazon/openmpi/bin", "efa_installer.sh"),
    "fi_info": ("/opt/amazon/efa/bin", "efa_installer.sh"),
}
"""Tools of the slurmd image that examples call: aws-neuronx-tools installs under
/opt/aws/neuron/bin, the EFA installer Open MPI under /opt/amazon/openmpi and libfabric under
/opt/amazon/efa (AWS Neuron and EFA user guides)."""

SRUN_VALUE_OPTIONS = frozenset({"-p", "-N", "-n", "-c", "-t", "-w", "-J", "-o", "-e", "-G"})
"""srun's short options that take the next word as their value."""


def _job_path(login_path: str) -> str:
    """Run the TaskProlog as slurmstepd does and apply its ``export`` lines."""
    script = task_prolog(job_tools_path())
    done = subprocess.run(["/bin/sh", "-c", script], env={"PATH": login_path}, capture_output=True, text=True,
                          check=False, timeout=30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    exports = dict(
        line.removeprefix("export ").split("=", 1)
        for line in done.stdout.splitlines()
        if line.startswith("export ")
    )
    return exports["PATH"]


def test_the_task_prolog_puts_the_images_tools_first() -> None:
    tools = job_tools_path()
    assert _job_path(LOGIN_SHELL_PATH) == f"{tools}:{LOGIN_SHELL_PATH}"
    assert _job_path("") == tools  # an empty PATH gains no stray ':' (the current directory)


def _exports(env: dict[str, str], efa_device: Path) -> dict[str, str]:
    script = task_prolog(job_tools_path(), efa_device=str(efa_device))
    done = subprocess.run(["/bin/sh", "-c", script], env={"PATH": LOGIN_SHELL_PATH, **env},
                          capture_output=True, text=True, check=True, timeout=30)  # fmt: skip
    return dict(
        line.removeprefix("export ").split("=", 1)
        for line in done.stdout.splitlines()
        if line.startswith("export ")
    )


def test_tasks_on_efa_nodes_use_the_fabric_unless_the_job_chose(tmp_path: Path) -> None:
    device = tmp_path / "uverbs0"
    assert "NCCL_NET_PLUGIN" not in _exports({}, device)  # no EFA: NCCL's own transports
    device.touch()
    exports = _exports({}, device)
    assert (exports["FI_PROVIDER"], exports["NCCL_NET_PLUGIN"]) == ("efa", "ofi")
    assert "NCCL_NET_PLUGIN" not in _exports({"NCCL_NET_PLUGIN": "none"}, device)
    # ofi: NCCL loads libnccl-net-ofi.so, which the GPU slurmd recipe requires and puts on the
    # loader's path.
    text = DOCKERFILE.read_text()
    assert "libnccl-net-ofi.so" in text and "/etc/ld.so.conf.d/" in text


def test_a_teams_job_gets_a_checkpoint_directory_that_survives_a_requeue(tmp_path: Path) -> None:
    """As a TrainJob gets one from its runtime: under the team's directory, named after the
    job's id, which a requeue keeps; only for an account with a team directory."""
    checkpoints = CheckpointLocation("/checkpoints", "s3://data/checkpoints/")
    script = task_prolog(job_tools_path(), checkpoints=checkpoints)
    assert "/fsx/checkpoints/" in script
    fsx = tmp_path / "fsx"
    (fsx / "checkpoints" / "ml-research").mkdir(parents=True)

    def exports(env: dict[str, str]) -> dict[str, str]:
        done = subprocess.run(
            ["/bin/sh", "-c", script.replace("/fsx/", f"{fsx}/")],
            env={"PATH": LOGIN_SHELL_PATH, "SLURM_JOB_ID": "4242", **env},
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        return dict(
            line.removeprefix("export ").split("=", 1)
            for line in done.stdout.splitlines()
            if line.startswith("export ")
        )

    found = exports({"SLURM_JOB_ACCOUNT": "ml-research"})
    assert found["CHECKPOINT_DIR"] == f"{fsx}/checkpoints/ml-research/4242"
    assert found["CHECKPOINT_S3_URI"] == "s3://data/checkpoints/ml-research/4242"
    # a job that chose its own keeps it
    chosen = exports({"SLURM_JOB_ACCOUNT": "ml-research", "CHECKPOINT_DIR": "/fsx/x"})
    assert "CHECKPOINT_DIR" not in chosen
    # root's jobs (no directory) and accounts without a team directory get none
    assert "CHECKPOINT_DIR" not in exports({"SLURM_JOB_ACCOUNT": "root"})
    assert "CHECKPOINT_DIR" not in exports({})
    # without a file system, nothing at all
    assert "CHECKPOINT" not in task_prolog(job_tools_path())


def test_the_prologs_tools_are_the_images_own_path() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^ENV PATH=\$\{JOB_TOOLS_PATH\}:\$\{PATH\}$", text, re.MULTILINE)
    assert job_tools_path().split(":") == [
        "/opt/amazon/openmpi/bin", "/opt/amazon/efa/bin", "/opt/aws/neuron/bin"
    ]  # fmt: skip


def _srun_programs(readme: str) -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.DOTALL)
    programs: list[str] = []
    for block in blocks:
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            if not line.lstrip().startswith("srun "):
                continue  # other commands' quoting may span lines
            words = shlex.split(line, comments=True)
            if not words or words[0] != "srun":
                continue
            rest = iter(words[1:])
            for word in rest:
                if word in SRUN_VALUE_OPTIONS:
                    next(rest)
                elif not word.startswith("-"):
                    programs.append(word)
                    break
    return programs


def test_every_program_a_docs_srun_starts_is_on_the_jobs_path() -> None:
    programs = _srun_programs(docs_pages.all_pages())
    assert "neuron-ls" in programs  # the examples the issue names are found
    recipe = DOCKERFILE.read_text()
    job_path = _job_path(LOGIN_SHELL_PATH).split(":")
    for program in programs:
        if program.startswith("/"):
            # the job's own environment, on the shared file system every node mounts
            assert program.startswith("/fsx/"), program
            continue
        assert program in PROGRAMS, f"{program}: which package of the recipe provides it?"
        directory, installer = PROGRAMS[program]
        assert directory in job_path, program
        assert installer in recipe, f"{program}: images/slurmd does not install {installer}"


def test_the_srun_parser_finds_the_program_after_options() -> None:
    readme = "```bash\nsrun -p trn1 --gres=neuron:16 -N 2 \\\n  --exclusive neuron-ls -a\n```\n"
    assert _srun_programs(readme) == ["neuron-ls"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_node_set_runs_the_task_prolog(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    directory = synthesized[stack].written.directory
    release = load_yaml((directory / "helm" / "slurm.yaml").read_text())
    assert release["values"]["controller"]["extraConfMap"]["TaskProlog"] == TASK_PROLOG
    config_map = load_yaml(
        (directory / "manifests" / f"ConfigMap.slurm.{TASK_PROLOG_CONFIG_MAP}.yaml").read_text()
    )
    checkpoints = checkpoint_location(synthesized[stack].config)
    assert checkpoints is not None and checkpoints.s3_uri is not None
    assert config_map["data"][Path(TASK_PROLOG).name] == task_prolog(
        job_tools_path(), checkpoints=checkpoints
    )
    # a batch job whose node fails is requeued under its id, and finds its checkpoints again
    assert release["values"]["controller"]["extraConfMap"]["JobRequeue"] == 1
    node_sets = list((directory / "manifests").glob("NodeSet.slurm.*.yaml"))
    assert node_sets
    for path in node_sets:
        spec = load_yaml(path.read_text())["spec"]
        mount = next(m for m in spec["slurmd"]["volumeMounts"] if m["mountPath"] == TASK_PROLOG_DIR)
        volume = next(v for v in spec["template"]["spec"]["volumes"] if v["name"] == mount["name"])
        assert volume["configMap"] == {"name": TASK_PROLOG_CONFIG_MAP, "defaultMode": 0o555}
