"""What a Slurm partition promises a job: time limits, backfill's horizon, a share of a node.

Read from the synthesized NodeSets (each partition's line), the slurm chart's values
(``SchedulerParameters``) and the teams' QOS (the ``slurm-teams`` ConfigMap the accounts loop
reads), and decided as slurmctld decides (each rule cites its source).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from components.catalog import InstanceType
from components.slurm.directory import TEAMS_CONFIG_MAP, TeamRow, parse_teams_table
from components.slurm.sharing import (
    MEMORY_DEFAULTS,
    backfill_window,
    conf_settings,
    parse_partition_line,
    slurm_minutes,
)
from synth.jobs.view import StackView, quantity

MIB: Final = Decimal(1024 * 1024)
THREADS_PER_CORE: Final = 2
"""Every accelerated instance type of the catalog runs two threads per core: Slurm allocates
whole cores (``CR_Core_Memory``), so a job's CPUs are a multiple of two."""


@dataclass(frozen=True)
class SlurmNode:
    """What Slurm hands out on one node of a partition."""

    cpus: int
    """CPUs (threads): the host's, since slurmd's pod has no CPU limit (no CoreSpecCount)."""
    memory_mib: int
    """Memory for jobs: the slurmd pod's limit (``MemSpecLimit`` keeps the rest)."""
    gpus: int
    """GPUs (``gres/gpu``); 0 on Trainium."""


@dataclass(frozen=True)
class SlurmJob:
    """A job's request per node, as ``sbatch``/``srun`` options give it."""

    gpus: int = 0
    """``--gres=gpu:N``."""
    cpus: int | None = None
    """CPUs per node (``--ntasks-per-node`` x ``--cpus-per-task``); None: not given."""
    memory_mib: int | None = None
    """``--mem``; None: not given."""


def node_of(pod: Mapping[str, Any], instance: InstanceType) -> SlurmNode:
    """A slurmd pod's node: the instance's CPUs and GPUs, the pod's memory limit in MiB.

    The operator turns the limit into MiB by integer division (slurm-operator v1.2.1
    internal/builder/workerbuilder/worker_app.go, getResourceLimits).
    """
    container = (pod.get("containers") or [{}])[0]
    limits = (container.get("resources") or {}).get("limits") or {}
    memory = int(quantity(limits.get("memory", "0")) / MIB)
    gpus = instance.accelerators if instance.accelerator == "nvidia" else 0
    return SlurmNode(cpus=instance.vcpu, memory_mib=memory, gpus=gpus)


def allocation(settings: Mapping[str, str], node: SlurmNode, job: SlurmJob) -> tuple[int, int]:
    """(CPUs, memory MiB) a job gets on each node of a partition with ``settings``.

    CPUs: as asked, else ``DefCpuPerGPU`` per GPU, else one core; whole cores either way.
    Memory: ``--mem``; else, for a job with GPUs, ``DefMemPerGPU`` per GPU alone (cons_tres
    clears the per-node default then: SchedMD/slurm slurm-26-05-3-1
    src/plugins/select/cons_tres/job_test.c, _set_gpu_defaults and _verify_node_state); else
    ``DefMemPerCPU`` per CPU or ``DefMemPerNode``; else the node's whole memory (slurm.conf(5):
    "The default value is 0 (unlimited)").
    """
    per_gpu_cpus = int(settings.get("DefCpuPerGPU", 0) or 0)
    if job.cpus is not None:
        cpus = job.cpus
    elif job.gpus and per_gpu_cpus:
        cpus = job.gpus * per_gpu_cpus
    else:
        cpus = 1
    cpus = min(node.cpus, math.ceil(cpus / THREADS_PER_CORE) * THREADS_PER_CORE)
    if job.memory_mib is not None:
        memory = job.memory_mib
    elif job.gpus and settings.get("DefMemPerGPU"):
        memory = job.gpus * int(settings["DefMemPerGPU"])
    elif settings.get("DefMemPerCPU"):
        memory = cpus * int(settings["DefMemPerCPU"])
    elif settings.get("DefMemPerNode"):
        memory = int(settings["DefMemPerNode"])
    else:
        memory = node.memory_mib
    return cpus, memory


def busy_nodes(settings: Mapping[str, str], node: SlurmNode, jobs: Sequence[SlurmJob]) -> int:
    """Nodes a set of one-node jobs keeps busy, placed first-fit as they arrive.

    What the autoscaler's demand counts (allocated and mixed nodes:
    components/slurm/autoscaling.py, demand_query) once they all run.

    Raises:
        ValueError: a job no node of the partition can hold.
    """
    free: list[list[int]] = []
    for job in jobs:
        cpus, memory = allocation(settings, node, job)
        if cpus > node.cpus or memory > node.memory_mib or job.gpus > node.gpus:
            raise ValueError(f"no node of the partition holds {job}")
        for left in free:
            if left[0] >= cpus and left[1] >= memory and left[2] >= job.gpus:
                left[0] -= cpus
                left[1] -= memory
                left[2] -= job.gpus
                break
        else:
            free.append([node.cpus - cpus, node.memory_mib - memory, node.gpus - job.gpus])
    return len(free)


def partition_settings(node_set: Mapping[str, Any]) -> dict[str, str]:
    """A NodeSet's partition line as settings (empty when its partition is off)."""
    partition = (node_set.get("spec") or {}).get("partition") or {}
    if partition.get("enabled", True) is False:
        return {}
    return parse_partition_line(str(partition.get("config") or ""))


def window_minutes(view: StackView) -> int:
    """``bf_window`` of the slurm chart's slurm.conf, minutes."""
    values = view.values("slurm") or {}
    controller = conf_settings(values.get("controller") or {})
    return backfill_window(controller.get("schedulerparameters", ""))


def team_qos(view: StackView) -> list[TeamRow]:
    """The teams' QOS as the accounts loop makes them (none without a directory)."""
    for config_map in view.of_kind("ConfigMap"):
        if (config_map.get("metadata") or {}).get("name") == TEAMS_CONFIG_MAP["name"]:
            data = config_map.get("data") or {}
            return parse_teams_table(data.get(TEAMS_CONFIG_MAP["key"], ""))
    return []


def _hours(minutes: int) -> str:
    return f"{minutes // 60} h" if minutes % 60 == 0 else f"{minutes} min"


def limits_reasons(
    settings: Mapping[str, str],
    *,
    nodes: int,
    window: int,
    node: SlurmNode | None,
    teams: Sequence[TeamRow],
    job_hours: int | None = None,
) -> tuple[list[str], list[str]]:
    """(blocking reasons, notes) of one partition's limits.

    Args:
        settings: the partition's line.
        nodes: the most nodes a job there can get (its node set's share).
        window: ``bf_window``, minutes.
        node: one of its nodes (None when no NodePool fits its slurmd pods).
        teams: the teams' QOS.
        job_hours: a job's time limit to check, hours (``synth jobs --hours``). Default none.
    """
    blocking: list[str] = []
    notes: list[str] = []
    try:
        longest = slurm_minutes(settings.get("MaxTime", "UNLIMITED"))
        default = slurm_minutes(settings["DefaultTime"]) if "DefaultTime" in settings else None
    except ValueError as error:
        return [f"partition line unreadable: {error}"], notes
    if longest is None:
        blocking.append(
            "no finite MaxTime: backfill takes a job without a limit to end a year away "
            "(SchedMD/slurm slurm-26-05-3-1 src/plugins/sched/backfill/backfill.c, "
            f"_set_backfill_timelimits), so a gang of {nodes} node(s) is never reserved and "
            "other jobs keep taking the nodes it waits for"
        )
    else:
        given = f", {_hours(default)} without --time (DefaultTime)" if default else ""
        notes.append(
            f"jobs run for at most {_hours(longest)} (MaxTime; a longer --time is refused at "
            f"sbatch){given}"
        )
        if longest > window:
            blocking.append(
                f"MaxTime ({_hours(longest)}) is beyond backfill's horizon (bf_window "
                f"{_hours(window)}): a gang of {nodes} node(s) can wait for ever behind other "
                "jobs, since its start is planned after the window and nothing is reserved"
            )
        elif window < 2 * longest:
            notes.append(
                f"backfill plans {_hours(window)} ahead (bf_window): a gang of up to {nodes} "
                "node(s) is reserved behind the running jobs, but a round of higher-priority "
                "reservations can push its start past the window, where it has none"
            )
        else:
            notes.append(
                f"backfill plans {_hours(window)} ahead (bf_window, twice MaxTime): a gang of up "
                f"to {nodes} node(s) keeps its reservation behind the running jobs and a round "
                "of higher-priority ones"
            )
        if job_hours is not None and job_hours * 60 > longest:
            blocking.append(f"a job of {job_hours} h is refused here: MaxTime is {_hours(longest)}")
    for team in teams:
        limit = (
            "no accelerator limit"
            if all(part.endswith("=-1") for part in team.grp_tres.split(","))
            else f"at most {team.grp_tres} at once (GrpTRES)"
        )
        notes.append(
            f"team {team.name}: jobs of at most {_hours(team.max_wall_minutes)} (QOS MaxWall), "
            f"{limit}"
        )
        if job_hours is not None and job_hours * 60 > team.max_wall_minutes:
            notes.append(
                f"team {team.name}'s job of {job_hours} h is refused: its QOS allows "
                f"{_hours(team.max_wall_minutes)}"
            )
    if node is not None and node.gpus:
        shared = busy_nodes(settings, node, [SlurmJob(gpus=1)] * node.gpus)
        cpus, memory = allocation(settings, node, SlurmJob(gpus=1))
        if shared == 1:
            notes.append(
                f"a job of 1 GPU without --mem gets {cpus} CPUs and {memory // 1024} GiB: "
                f"{node.gpus} such jobs share one node"
            )
        else:
            blocking.append(
                f"a job of 1 GPU without --mem gets {cpus} CPUs and {memory // 1024} GiB, so "
                f"{node.gpus} such jobs take {shared} nodes: set DefMemPerGPU (one GPU's share "
                "of the node)"
            )
    elif node is not None and not any(settings.get(key) for key in MEMORY_DEFAULTS):
        blocking.append(
            "a job without --mem takes the node's whole memory (no DefMemPerCPU): one small job "
            "holds the node"
        )
    return blocking, notes
