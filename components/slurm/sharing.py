"""Slurm as a service many teams share: time limits, backfill, node sharing, privacy, scratch.

Pure builders of the settings that let a partition-sized gang start behind other teams' small
jobs, let jobs share a node by what they ask for, give each job its own ``/tmp`` and
``/dev/shm``, and keep teams from seeing each other's jobs. Each cites the Slurm source or
manual it relies on; docs/concepts/slurm.md, "One Slurm, many teams", shows the arithmetic.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import yaml

from components.config import NodePoolConfig, SlurmNodeSetConfig
from components.workloads import whole_node_memory_mib

MINUTES_PER_HOUR: Final = 60
UNLIMITED: Final = "UNLIMITED"

DEFAULT_BACKFILL_SLOTS: Final = 1440
"""Slots of backfill's plan at Slurm's defaults (``bf_window=1440`` minutes at
``bf_resolution=60`` seconds: slurm.conf(5), SchedulerParameters). A longer window keeps this
many by coarsening the resolution, as the manual advises."""
MIN_BACKFILL_RESOLUTION: Final = 60
MAX_BACKFILL_RESOLUTION: Final = 3600
BACKFILL_WINDOW_MAX_TIMES: Final = 2
"""``bf_window`` in MaxTimes of the longest partition (:func:`backfill_window_minutes`)."""
BACKFILL_JOBS_PER_ASSOCIATION: Final = 50
"""``bf_max_job_assoc``: a tenth of backfill's default depth (``bf_max_job_test=500``), as
slurm.conf(5) asks ("Set bf_max_job_test to a value much higher than bf_max_job_assoc")."""
DEFAULT_BACKFILL_WINDOW_MINUTES: Final = 1440
MAX_BACKFILL_WINDOW_MINUTES: Final = 43200
"""``bf_window``'s bounds and ``bf_resolution``'s (slurm.conf(5); SchedMD/slurm
slurm-26-05-3-1 src/plugins/sched/backfill/backfill.c refuses a window beyond 30 days)."""

PRIVATE_DATA: Final = ("accounts", "jobs", "reservations", "usage", "users")
"""What ``PrivateData`` hides from regular users, in slurm.conf and slurmdbd.conf alike:
other users' jobs and steps (``squeue``, ``scontrol show job`` with its command line and
working directory; ``sacct`` through slurmdbd), their usage (``sshare``, ``sreport``), and
accounts, users and reservations they are not part of. SlurmUser, root and Slurm
administrators see all (slurm.conf(5) and slurmdbd.conf(5), PrivateData)."""
METRICS_PARAMETERS: Final = "ignore_private_data"
"""With ``PrivateData`` set, slurmctld's metrics endpoints want a JWT of SlurmUser or root
unless this is set (SchedMD/slurm slurm-26-05-3-1 src/common/read_config.c: metrics_auth);
the autoscaler's Prometheus scrapes without one."""

NAMESPACE_PLUGIN: Final = "namespace/linux"
"""Slurm's job namespaces with per-directory tmpfs sizes and PID namespaces (added in 25.11;
slurm.conf(5) NamespaceType, namespace.yaml(5)). ``namespace/tmpfs`` (the former
``job_container/tmpfs``) makes the same private ``/tmp`` and ``/dev/shm`` but takes no sizes
and no PID namespace."""
NAMESPACE_BASE_PATH: Final = "/var/spool/slurmd/namespace"
"""Where the plugin keeps each job's namespace and its disk-backed ``/tmp`` (in the slurmd
pod's own storage: the node's instance storage where the type has it). Unique per node, as
namespace.yaml(5) requires, because every slurmd pod is one node."""
JOB_TMP: Final = "/tmp"
JOB_SHM: Final = "/dev/shm"


def slurm_time(hours: int) -> str:
    """A Slurm time limit of ``hours``: ``D-HH:MM:SS`` (or ``HH:MM:SS`` under a day).

    The form ``scontrol show partition`` prints (SchedMD/slurm slurm-26-05-3-1
    src/common/parse_time.c, mins2time_str).
    """
    days, rest = divmod(hours, 24)
    return f"{days}-{rest:02d}:00:00" if days else f"{rest:02d}:00:00"


_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def slurm_minutes(text: str) -> int | None:
    """Minutes of a Slurm time limit; None for ``UNLIMITED``/``INFINITE``/``-1``.

    The forms Slurm reads (SchedMD/slurm slurm-26-05-3-1 src/common/parse_time.c,
    time_str2secs and time_str2mins, which rounds seconds up): ``minutes``,
    ``minutes:seconds``, ``hours:minutes:seconds``, ``days-hours``, ``days-hours:minutes``,
    ``days-hours:minutes:seconds``.

    Raises:
        ValueError: not a Slurm time.
    """
    value = text.strip()
    if value.upper() in ("UNLIMITED", "INFINITE", "-1"):
        return None
    match = _TIME.fullmatch(value)
    if match is None:
        raise ValueError(f"not a Slurm time limit: {text!r}")
    days, first, second, third = (int(part) if part else 0 for part in match.groups())
    if match.group(1) is not None:
        seconds = days * 86400 + first * 3600 + second * 60 + third
    elif match.group(4) is not None:
        seconds = first * 3600 + second * 60 + third
    else:
        seconds = first * 60 + second
    return math.ceil(seconds / 60)


def backfill_window_minutes(node_sets: Sequence[SlurmNodeSetConfig]) -> int:
    """``bf_window``: twice the longest partition's MaxTime, in minutes (Slurm caps it at 30 days).

    Backfill plans a pending job only if it can start within the window: beyond it, "Starts
    too far in the future to worry about", no reservation (SchedMD/slurm slurm-26-05-3-1
    src/plugins/sched/backfill/backfill.c, _attempt_backfill), and lower-priority jobs take its
    nodes freely. A gang the size of its partition waits for the jobs running there, which end
    within one MaxTime, and for the reservations backfill made first for pending jobs of higher
    priority, each again at most one MaxTime long: two MaxTimes hold its start through one
    such round (slurm.conf(5): "A value at least as long as the highest allowed time limit is
    generally advisable to prevent job starvation").
    """
    longest = max((node_set.max_time_hours for node_set in node_sets), default=24)
    return min(BACKFILL_WINDOW_MAX_TIMES * longest * MINUTES_PER_HOUR, MAX_BACKFILL_WINDOW_MINUTES)


def backfill_resolution_seconds(window_minutes: int) -> int:
    """``bf_resolution``: coarse enough that the plan keeps Slurm's default number of slots."""
    wanted = math.ceil(window_minutes * 60 / DEFAULT_BACKFILL_SLOTS)
    return min(max(wanted, MIN_BACKFILL_RESOLUTION), MAX_BACKFILL_RESOLUTION)


def conf_settings(section: Mapping[str, Any]) -> dict[str, str]:
    """A daemon's extra settings from the chart: ``extraConf`` text, else ``extraConfMap``.

    Keys are as Slurm reads them (case-insensitive: lower-cased here); list values are
    joined with commas, as the chart renders them (helm/slurm/templates/_helpers.tpl).
    """
    text = section.get("extraConf")
    if isinstance(text, str) and text.strip():
        settings: dict[str, str] = {}
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].strip()
            if "=" in line:
                key, _, value = line.partition("=")
                settings[key.strip().lower()] = value.strip()
        return settings
    found = section.get("extraConfMap") or {}
    return {
        str(key).lower(): ",".join(map(str, value))
        if isinstance(value, Sequence) and not isinstance(value, str)
        else str(value)
        for key, value in found.items()
    }


def backfill_window(scheduler_parameters: str) -> int:
    """``bf_window`` of a SchedulerParameters value, minutes (Slurm's default without it)."""
    for word in scheduler_parameters.split(","):
        key, _, value = word.strip().partition("=")
        if key == "bf_window" and value.isdigit():
            return int(value)
    return DEFAULT_BACKFILL_WINDOW_MINUTES


def scheduler_parameters(node_sets: Sequence[SlurmNodeSetConfig]) -> list[str]:
    """``SchedulerParameters``: how far backfill looks ahead, and how it shares its attention.

    ``bf_continue``: a backfill pass that releases its locks goes on down the queue instead of
    starting over. ``bf_max_job_assoc``: backfill tries at most this many jobs of one user in
    one account per pass, so one user's flood of small jobs (a job array) cannot use up the
    pass's depth (``bf_max_job_test``, 500 by default) before a gang further down is reached
    (slurm.conf(5), SchedulerParameters).
    """
    window = backfill_window_minutes(node_sets)
    return [
        "bf_continue",
        f"bf_window={window}",
        f"bf_resolution={backfill_resolution_seconds(window)}",
        f"bf_max_job_assoc={BACKFILL_JOBS_PER_ASSOCIATION}",
    ]


def job_memory_mib(pool: NodePoolConfig) -> int:
    """Memory Slurm gives jobs on one of the pool's nodes, MiB: the slurmd pod's limit.

    The operator passes the limit in MiB (``POD_MEMORY``: slurm-operator v1.2.1
    internal/builder/workerbuilder/worker_app.go, getResourceLimits) and the image's
    entrypoint keeps the rest of the host from jobs (``MemSpecLimit``: SlinkyProject/containers
    schedmd/slurm/26.05/ubuntu24.04 slurmd-entrypoint.sh, calculateMemSpecLimit).
    """
    return whole_node_memory_mib(pool)


MEMORY_DEFAULTS: Final = ("DefMemPerGPU", "DefMemPerCPU", "DefMemPerNode")
"""Slurm's default-memory settings: any one keeps a job without ``--mem`` from taking the
node's whole memory (slurm.conf(5))."""
DAEMON_HEADROOM_MIB: Final = 1024
"""Memory the defaults leave to slurmd, slurmstepd, sshd and SSSD, which share the slurmd
container's memory limit with the jobs (Slurm hands the whole limit to jobs): eight default
1-GPU jobs then fill a node without the container going over its limit."""


def sharing_defaults(pool: NodePoolConfig) -> dict[str, int]:
    """A partition's defaults for a job that gives no ``--mem`` (or no ``--cpus-per-task``).

    Without them a job without ``--mem`` is given all of the node's memory and, with memory a
    consumable resource (``CR_Core_Memory``), holds the whole node and every GPU on it
    (slurm.conf(5): DefMemPerCPU "The default value is 0 (unlimited)"). On GPU partitions a
    job gets its GPUs' share of the node's memory (``DefMemPerGPU``) and cores
    (``DefCpuPerGPU``), so ``srun --gres=gpu:1`` takes one eighth of a p5; a job without GPUs
    gets memory by its CPUs (``DefMemPerCPU``). Where a job asks for GPUs, cons_tres clears the
    per-CPU default and relies on the per-GPU one alone (SchedMD/slurm slurm-26-05-3-1
    src/plugins/select/cons_tres/job_test.c, _set_gpu_defaults and the memory check in
    _verify_node_state). Neuron devices have no per-device default in Slurm: Trainium jobs
    get memory by their CPUs, and whole-node jobs (``--exclusive``) all of it.
    """
    instance = pool.instance
    memory = job_memory_mib(pool) - DAEMON_HEADROOM_MIB
    defaults = {"DefMemPerCPU": memory // instance.vcpu}
    if instance.accelerator == "nvidia":
        defaults["DefMemPerGPU"] = memory // instance.accelerators
        defaults["DefCpuPerGPU"] = instance.vcpu // instance.accelerators
    return defaults


def neuron_device_memory_mib(pool: NodePoolConfig) -> int:
    """One Neuron device's share of the memory for jobs on a Trainium node, MiB.

    What ``job_submit.lua`` gives per device to a Trainium job that states no memory (Slurm
    has a per-device default for GPUs only: :func:`sharing_defaults`).
    """
    return (job_memory_mib(pool) - DAEMON_HEADROOM_MIB) // pool.instance.accelerators


def partition_settings(
    node_set: SlurmNodeSetConfig,
    pool: NodePoolConfig,
    *,
    default_partition: bool = False,
    billing: str | None = None,
) -> dict[str, str]:
    """The settings of a node set's partition, in the order ``scontrol`` shows them.

    Args:
        node_set: the node set (its time limits and ``exclusiveUser``).
        pool: its pool (the node's memory, CPUs and GPUs).
        default_partition: the cluster's default partition. Default False.
        billing: ``TRESBillingWeights`` (fair-share usage). Default: none.
    """
    settings = {
        "State": "UP",
        "MaxTime": slurm_time(node_set.max_time_hours),
        "DefaultTime": slurm_time(node_set.default_time),
        **{key: str(value) for key, value in sharing_defaults(pool).items()},
    }
    if node_set.exclusive_user:
        settings["ExclusiveUser"] = "YES"
    if default_partition:
        settings["Default"] = "YES"
    if billing is not None:
        settings["TRESBillingWeights"] = billing
    return settings


def partition_line(settings: Mapping[str, str]) -> str:
    """A partition's settings as the NodeSet's ``partition.config`` (``Key=Value`` words)."""
    return " ".join(f"{key}={value}" for key, value in settings.items())


def parse_partition_line(line: str) -> dict[str, str]:
    """The ``Key=Value`` words of a partition line (a word without ``=`` is kept as a key)."""
    settings: dict[str, str] = {}
    for word in line.split():
        key, _, value = word.partition("=")
        settings[key] = value
    return settings


def job_shm_gib(node_set: SlurmNodeSetConfig, pool: NodePoolConfig) -> int:
    """Size of each job's ``/dev/shm`` on the node set, GiB (config, else half the job memory)."""
    if node_set.job_shm_gib is not None:
        return node_set.job_shm_gib
    return max(1, job_memory_mib(pool) // 1024 // 2)


def namespace_yaml(node_sets: Sequence[tuple[SlurmNodeSetConfig, NodePoolConfig, str]]) -> str:
    """``namespace.yaml``: every job in its own mount and PID namespace (namespace.yaml(5)).

    Each job gets a fresh tmpfs at ``/dev/shm`` of the node set's size and a private ``/tmp``:
    a tmpfs of ``jobTmpGiB`` or, by default, a directory of its own on the node's disk; both
    go when the job ends, and tmpfs pages count against the job's memory cgroup. A PID
    namespace (``CLONE_NEWPID``, with its own ``/proc``) keeps jobs of other users on the node
    out of ``ps``, with their command lines. SSH sessions that pam_slurm_adopt adopts join the
    job's namespace (its ``join_container`` defaults to true: SchedMD/slurm slurm-26-05-3-1
    contribs/pam_slurm_adopt/pam_slurm_adopt.c). slurmd fetches the file from slurmctld like
    slurm.conf (src/common/fetch_config.c lists ``namespace.yaml``). Mount options with sizes
    are passed to the kernel's tmpfs as they are (src/plugins/namespace/linux/
    namespace_linux.c, _mount_dir).

    Args:
        node_sets: (node set, its pool, its Slurm node names as a hostlist), each.
    """
    node_confs = []
    for node_set, pool, hosts in node_sets:
        tmp: dict[str, Any] = {"path": JOB_TMP}
        if node_set.job_tmp_gib is not None:
            tmp.update(tmpfs=True, options=f"size={node_set.job_tmp_gib}g")
        shm = {"path": JOB_SHM, "tmpfs": True, "options": f"size={job_shm_gib(node_set, pool)}g"}
        node_confs.append({"nodes": [hosts], "options": {"dir_confs": [tmp, shm]}})
    document = {
        "defaults": {
            "auto_base_path": True,
            "base_path": NAMESPACE_BASE_PATH,
            "clone_ns_flags": ["CLONE_NEWPID"],
        },
        "node_confs": node_confs,
    }
    return yaml.safe_dump(document, sort_keys=False)


JOB_NAMESPACE_ANNOTATION: Final = "trainingplatform.io/job-namespaces"


def job_namespace_hash(
    node_set: SlurmNodeSetConfig, pool: NodePoolConfig, hosts: str
) -> dict[str, str]:
    """A pod template annotation that changes with the node set's part of ``namespace.yaml``."""
    text = namespace_yaml([(node_set, pool, hosts)])
    return {JOB_NAMESPACE_ANNOTATION: hashlib.sha256(text.encode()).hexdigest()[:16]}


SHARING_CONF: Final = {
    "NamespaceType": NAMESPACE_PLUGIN,
    # The namespace plugins need each job's extern step (slurm.conf(5), NamespaceType);
    # Contain implies Alloc: the Prolog runs when a job is allocated.
    "PrologFlags": "Contain",
    "PrivateData": list(PRIVATE_DATA),
    "MetricsParameters": METRICS_PARAMETERS,
}
"""``slurm.conf`` settings that keep jobs of different teams apart on a node and in the
clients' answers (:data:`PRIVATE_DATA`, :func:`namespace_yaml`)."""
SLURMDBD_SHARING_CONF: Final = {"PrivateData": list(PRIVATE_DATA)}
"""``slurmdbd.conf``'s own PrivateData: ``sacct`` and ``sreport`` ask slurmdbd, not
slurmctld (slurmdbd.conf(5))."""
