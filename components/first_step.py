"""The first-step exporter: how a training pod says when its first step finished.

Every training pod (Trainer runtimes, Ray heads and workers, slurmd pods) carries a native
sidecar (:func:`first_step_sidecar`) that serves :data:`FIRST_STEP_METRIC` on
:data:`FIRST_STEP_PORT` from a file the training program writes (:data:`FIRST_STEP_FILE_VARIABLE`
names it); the namespaces admit only Prometheus to that port (:data:`PROMETHEUS_INGRESS`), and
the observability component's PodMonitor (components/observability/ledger.py) scrapes it. Nothing
is pushed from a team pod. It is the cold-start ledger's last stage (docs: concepts,
observability, "The cold-start ledger").

Here, beside the pod-on-pool builder's other pieces, because the runtimes, Ray and Slurm build
their pods with it; it imports only facts and tenancy, so every one of them may.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from components import catalog, versions
from components.metric_names import (
    FIRST_STEP_METRIC,
    FIRST_STEP_POD_LABEL,
    FIRST_STEP_PORT,
    MONITORING_NAMESPACE,
    MONITORING_RELEASE,
    SLURM_JOB_START_METRIC,
    SLURM_JOB_SUBMIT_METRIC,
)
from components.tenancy import RUNTIME_DEFAULT_SECCOMP, ControllerIngress, from_namespace, tcp

# --- the first step -----------------------------------------------------------------------

FIRST_STEP_DIRECTORY: Final = "/run/trainingplatform/first-step"
"""Where a training pod's first-step files live: an emptyDir its containers and the exporter
share (on slurmd pods, every job's file)."""
FIRST_STEP_VOLUME: Final = "first-step"
FIRST_STEP_FILE: Final = f"{FIRST_STEP_DIRECTORY}/first-step.prom"
"""A Kubernetes training pod's file (a Slurm job's is per job: :func:`slurm_first_step_file`)."""
FIRST_STEP_FILE_VARIABLE: Final = "TRAININGPLATFORM_FIRST_STEP_FILE"
"""Environment variable naming the file the training program writes its first step to."""
FIRST_STEP_LABELS_VARIABLE: Final = "TRAININGPLATFORM_FIRST_STEP_LABELS"
"""Environment variable with the labels the file's sample carries (``slurm_job_id="42"`` in a
Slurm job; absent in a pod, which Prometheus labels by namespace and pod)."""
FIRST_STEP_COMMAND: Final = "trainingplatform-first-step"
"""The helper the training images carry: writes the file once, atomically (images/*/)."""
FIRST_STEP_CONTAINER: Final = "first-step-exporter"
FIRST_STEP_PORT_NAME: Final = "first-step"
FIRST_STEP_EXPORTER_CPU_MILLIS: Final = 10
FIRST_STEP_EXPORTER_MEMORY_MIB: Final = 32
"""The exporter's requests (and memory limit): node_exporter with one collector reading one
small file. A native sidecar's requests add to its pod's (Kubernetes, "Sidecar Containers",
resource sharing), so a whole-node pod leaves them room
(:func:`components.workloads.whole_node_memory_mib`)."""
NOBODY: Final = 65534
"""The node_exporter image's user (prometheus/node_exporter v1.12.1 Dockerfile, ``USER
nobody``)."""


def first_step_exporter_resources() -> dict[str, Any]:
    """Requests and limits of the exporter (:data:`FIRST_STEP_EXPORTER_MEMORY_MIB`)."""
    memory = f"{FIRST_STEP_EXPORTER_MEMORY_MIB}Mi"
    return {
        "requests": {"cpu": f"{FIRST_STEP_EXPORTER_CPU_MILLIS}m", "memory": memory},
        "limits": {"memory": memory},
    }


def first_step_sidecar() -> dict[str, Any]:
    """The exporter: node_exporter with only its textfile collector, as a native sidecar.

    node_exporter v1.12.1 (the image kube-prometheus-stack 88.5.3's node-exporter subchart
    4.56.1 runs, appVersion 1.12.1) with ``--collector.disable-defaults`` and
    ``--collector.textfile`` reads every ``*.prom`` file of :data:`FIRST_STEP_DIRECTORY` and
    nothing else (prometheus/node_exporter v1.12.1 node_exporter.go, collector/textfile.go:
    names not ending ``.prom`` are skipped, which is what makes a rename atomic), without its
    own Go metrics (``--web.disable-exporter-metrics``). An init container with
    ``restartPolicy: Always`` starts before the training container and stops when it ends, so
    a Job's pod still completes (Kubernetes, "Sidecar Containers", GA in 1.33); Prometheus
    discovers init containers' ports too (prometheus/prometheus v3.14.0
    discovery/kubernetes/pod.go). The pinned runtimes take it as it is: Trainer v2.3.0's
    runtimes embed the core PodSpec (init containers' ``restartPolicy`` is in the CRDs'
    schema, which the synthesis validates against), KubeRay appends its own init container
    after it (synth/pods.py), the Slinky operator merges the NodeSet template's init
    containers with its log sidecar, and Volcano v1.15.1 counts a sidecar's requests with the
    pod's (pkg/scheduler/api/pod_info.go). It mounts the directory read-only and runs as
    nobody.
    """
    return {
        "name": FIRST_STEP_CONTAINER,
        "image": versions.FIRST_STEP_EXPORTER_IMAGE,
        "restartPolicy": "Always",
        "args": [
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={FIRST_STEP_DIRECTORY}",
            "--web.disable-exporter-metrics",
            f"--web.listen-address=:{FIRST_STEP_PORT}",
        ],
        "ports": [{"name": FIRST_STEP_PORT_NAME, "containerPort": FIRST_STEP_PORT}],
        "resources": first_step_exporter_resources(),
        "securityContext": {
            "runAsUser": NOBODY,
            "runAsGroup": NOBODY,
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            # its own, so it is confined whatever the pod says (a slurmd pod's is privileged)
            "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
        },
        "volumeMounts": [
            {"name": FIRST_STEP_VOLUME, "mountPath": FIRST_STEP_DIRECTORY, "readOnly": True}
        ],
    }


def first_step_volume(size_limit: str = "1Mi") -> dict[str, Any]:
    """The pod's first-step directory: a small emptyDir.

    Args:
        size_limit: the emptyDir's ``sizeLimit``. Default ``1Mi``: a training pod's one or
            few one-line files; a slurmd pod's holds every job of its node
            (:func:`slurm_first_step_volume`).
    """
    return {"name": FIRST_STEP_VOLUME, "emptyDir": {"sizeLimit": size_limit}}


def first_step_mount() -> dict[str, Any]:
    """The training container's mount of :data:`FIRST_STEP_DIRECTORY`, writable."""
    return {"name": FIRST_STEP_VOLUME, "mountPath": FIRST_STEP_DIRECTORY}


def first_step_labels() -> dict[str, str]:
    """Pod labels of a pod with the exporter: the PodMonitor and the policies select them."""
    return {FIRST_STEP_POD_LABEL: "true"}


def with_first_step_exporter(pod: Mapping[str, Any], *, container: str) -> dict[str, Any]:
    """A copy of pod spec ``pod`` with the exporter, its volume, and the file's variable.

    The exporter comes first among the init containers, so it serves before any other init
    container runs; ``container`` (the training container) mounts the directory and gets
    :data:`FIRST_STEP_FILE_VARIABLE`. The pod's labels are the caller's
    (:func:`first_step_labels`), on the template's metadata.

    Args:
        pod: the pod spec.
        container: name of the training container.
    """
    result = copy.deepcopy(dict(pod))
    result["initContainers"] = [first_step_sidecar(), *result.get("initContainers", [])]
    result["volumes"] = [*result.get("volumes", []), first_step_volume()]
    found = False
    for spec in result["containers"]:
        if spec["name"] != container:
            continue
        found = True
        spec["volumeMounts"] = [*spec.get("volumeMounts", []), first_step_mount()]
        spec["env"] = [
            *spec.get("env", []),
            {"name": FIRST_STEP_FILE_VARIABLE, "value": FIRST_STEP_FILE},
        ]
    if not found:
        raise ValueError(f"pod has no container {container!r}")
    return result


PROMETHEUS_NAME: Final = f"{MONITORING_RELEASE}-prometheus"
"""The chart's Prometheus resource: ``<fullname>-prometheus`` (kube-prometheus-stack 88.5.3
templates/_helpers.tpl, ``kube-prometheus-stack.prometheus.crname``)."""
PROMETHEUS_POD_SELECTOR: Final = {
    "matchLabels": {
        "app.kubernetes.io/name": "prometheus",
        "operator.prometheus.io/name": PROMETHEUS_NAME,
    }
}
"""Labels the operator puts on its Prometheus's pods (prometheus-operator release-0.93
pkg/prometheus/server/operator.go, makeSelectorLabels; v0.93.1 is not in the mirror): Grafana,
kube-state-metrics and the operator in the same namespace carry other names."""


def prometheus_peer() -> dict[str, Any]:
    """A NetworkPolicy peer: the monitoring namespace's Prometheus pods, namespace AND pods."""
    return from_namespace(MONITORING_NAMESPACE, copy.deepcopy(PROMETHEUS_POD_SELECTOR))


def prometheus_ingress_rule() -> dict[str, Any]:
    """An ingress rule: Prometheus to the exporter's port, and nothing else."""
    return {"from": [prometheus_peer()], "ports": tcp(FIRST_STEP_PORT)}


PROMETHEUS_INGRESS: Final = ControllerIngress(
    name="allow-prometheus-first-step",
    pods={"matchLabels": first_step_labels()},
    namespace=MONITORING_NAMESPACE,
    controller=PROMETHEUS_POD_SELECTOR,
    ports=(FIRST_STEP_PORT,),
    why="Prometheus scrapes each training pod's first step (the cold-start ledger) on "
    f"{FIRST_STEP_PORT} (components/observability/ledger.py, first_step_pod_monitor; the "
    "slurmd pods': slurm_first_step_pod_monitor)",
)
"""Prometheus's way into team namespaces: to the pods with the exporter, on its port only."""


# --- Slurm --------------------------------------------------------------------------------


def slurm_jobs_per_node() -> int:
    """The most Slurm jobs one node runs at once: one per vCPU of the catalog's largest type.

    Cores and memory are Slurm's consumable resources (``CR_Core_Memory``,
    components/slurm/conf.py) and nothing oversubscribes, so a node runs at most one job per
    CPU; the catalog's vCPUs bound that whatever Slurm counts as a CPU (a core or a thread).
    Every pool's instance types are in the catalog (config validation), so no Slurm node set
    can run more. The one bound of the slurmd pods' first-step files: the exporter's scrape
    (components/observability/ledger.py, slurm_first_step_sample_limit) and the directory's
    size (:func:`slurm_first_step_size_limit`).
    """
    return max(entry.vcpu for entry in catalog.CATALOG.values())


SLURM_ENTRIES_PER_JOB: Final = 3
"""What each Slurm job keeps in a slurmd pod's first-step directory: its first-step file, its
submit file and its lookup lock (a directory): :func:`slurm_first_step_file`,
:func:`slurm_submit_file`, :func:`slurm_lookup_lock`."""
FIRST_STEP_BLOCK_KIB: Final = 4
"""What the kubelet counts for each of them: one-line files and an empty directory each take
one 4 KiB block of the node's file system. Without a project quota the kubelet walks the
emptyDir and adds every file's and directory's allocated blocks, not its length
(kubernetes/kubernetes pkg/volume/util/fs/fs_unix.go, DiskUsage: ``s.Blocks * 512``)."""
SLURM_FIRST_STEP_HEADROOM: Final = 2
"""Room above the jobs' own entries: the temporary names the TaskProlog and the helper write
before their renames (one per writing task at once), and the directory's own blocks, which
grow with its entries."""


def slurm_first_step_size_limit() -> str:
    """The ``sizeLimit`` of a slurmd pod's first-step directory: every job its node can run.

    :data:`SLURM_ENTRIES_PER_JOB` entries of :data:`FIRST_STEP_BLOCK_KIB` for each of
    :func:`slurm_jobs_per_node` jobs, times :data:`SLURM_FIRST_STEP_HEADROOM` (4608Ki on a
    192-vCPU catalog). An emptyDir past its ``sizeLimit`` has its pod evicted by the kubelet
    (Kubernetes, "Local ephemeral storage"), which for a slurmd pod kills every job of the node,
    so the limit is the node's bound, not a training pod's 1Mi (which about 85 jobs pass).
    """
    kib = (
        SLURM_ENTRIES_PER_JOB
        * FIRST_STEP_BLOCK_KIB
        * slurm_jobs_per_node()
        * SLURM_FIRST_STEP_HEADROOM
    )
    return f"{kib}Ki"


def slurm_first_step_volume() -> dict[str, Any]:
    """A slurmd pod's first-step directory (:func:`slurm_first_step_size_limit`)."""
    return first_step_volume(slurm_first_step_size_limit())


def slurm_first_step_file(job_id: str = "${SLURM_JOB_ID}") -> str:
    """A Slurm job's first-step file on its node (one per job: a node runs job after job)."""
    return f"{FIRST_STEP_DIRECTORY}/job-{job_id}.prom"


def slurm_submit_file(job_id: str = "${SLURM_JOB_ID}") -> str:
    """A Slurm job's submit-time file on its node (:data:`SLURM_JOB_SUBMIT_METRIC`)."""
    return f"{FIRST_STEP_DIRECTORY}/job-{job_id}-submit.prom"


def slurm_lookup_lock(job_id: str = "${SLURM_JOB_ID}") -> str:
    """The lock directory of a job's one ``squeue`` on a node: whoever creates it asks.

    Not a ``.prom`` name, so the exporter skips it (prometheus/node_exporter v1.12.1
    collector/textfile.go).
    """
    return f"{FIRST_STEP_DIRECTORY}/job-{job_id}.lock"


SQUEUE_TIME_FORMAT: Final = "standard"
"""``SLURM_TIME_FORMAT`` for the TaskProlog's ``squeue``: ``%FT%T``, whatever the user's
(SchedMD/slurm slurm-26-05-3-1 src/common/parse_time.c, _make_time_str_internal: the variable
may be ``relative`` or any strftime format, and sbatch passes the user's environment on)."""


SQUEUE_TIMEOUT_SECONDS: Final = 10
"""How long the TaskProlog waits for slurmctld's answer to its ``squeue``. slurmstepd runs the
TaskProlog with no time limit (SchedMD/slurm slurm-26-05-3-1 src/slurmd/slurmstepd/task.c,
_run_script_and_set_env: ``max_wait = -1``) and starts the task only after it, so without one a
slow slurmctld would hold the step's launch. Ten seconds is slurm.conf's default
``MessageTimeout``, a round trip's allowance (doc/man/man5/slurm.conf.5)."""


def slurm_task_prolog_lines(squeue_timeout_s: int = SQUEUE_TIMEOUT_SECONDS) -> list[str]:
    """TaskProlog lines (as the job's user): the job's first-step file, submit and start times.

    Where the node has the exporter's directory: ``export`` of :data:`FIRST_STEP_FILE_VARIABLE`
    (the job's own file) and :data:`FIRST_STEP_LABELS_VARIABLE` (``slurm_job_id``), and, once
    per job and node, the job's submit and start times as :data:`SLURM_JOB_SUBMIT_METRIC` and
    :data:`SLURM_JOB_START_METRIC`, written to a temporary name first and renamed so the
    exporter never reads half a file. A failure here never fails the task.

    - **The start** is ``SLURM_JOB_START_TIME``, Unix seconds, which slurmstepd puts in the
      environment it runs the TaskProlog with (SchedMD/slurm slurm-26-05-3-1
      src/slurmd/slurmstepd/task.c, exec_task: ``job_start_time`` from the job's credential,
      src/interfaces/cred.c setup_cred_arg, then setup_env, src/common/env.c, before
      _run_script_and_set_env). The TaskProlog runs once the job has started, so it is the
      real start, not slurmctld's estimate; ``squeue``'s ``%S`` stands in only where the
      variable is missing.
    - **The submission** is in no variable of the job's environment, so it comes from
      slurmctld (``squeue -o "%V %S"``, printed by slurm_make_time_str in the local time of
      ``TZ=UTC`` and, with ``SLURM_TIME_FORMAT`` = :data:`SQUEUE_TIME_FORMAT`, as
      ``%FT%T``: src/squeue/print.c ``_print_job_time_submit``, src/common/parse_time.c; the
      slurmd image carries Slurm's clients: SlinkyProject/containers schedmd/slurm/26.05/
      ubuntu24.04/Dockerfile, slurm-smd-client). The user's ``SQUEUE_*`` filters and
      ``SLURM_CLUSTERS``, which squeue reads from the environment (src/squeue/opts.c), are
      unset for the call, so none of them hides the job.
    - **One lookup per job and node.** Slurm says these scripts should not call Slurm
      commands (doc/html/prolog_epilog.shtml), and every task of a step runs the TaskProlog
      at the same moment: a 128-node job of 8 tasks a node would otherwise send about a
      thousand ``squeue`` calls to slurmctld at once, each task waiting for its answer. The
      first task to create :func:`slurm_lookup_lock` (``mkdir`` is atomic) asks; the others
      go on at once. A lock, not ``SLURM_LOCALID=0``: local task 0 exists once per step, and
      a job may start several steps on a node at once (``srun ... &``). A failed lookup
      removes the lock, so a later step tries again; the Epilog removes it.
    - **A bounded wait.** ``squeue`` runs under coreutils' ``timeout`` (the slurmd image is
      Ubuntu 24.04's, whose essential coreutils carries it: SlinkyProject/containers
      schedmd/slurm/26.05/ubuntu24.04/Dockerfile, ``PARENT_IMAGE=ubuntu:24.04``): past
      ``squeue_timeout_s`` it is stopped (killed 2 s later if it ignores that), the lookup
      counts as failed and the lock is freed, so the next step asks again.

    Args:
        squeue_timeout_s: seconds the one ``squeue`` may take. Default
            :data:`SQUEUE_TIMEOUT_SECONDS`.
    """
    submit = slurm_submit_file()
    lock = slurm_lookup_lock()
    sample = '{slurm_job_id="%s"} %s\\n'
    samples = f"'{SLURM_JOB_SUBMIT_METRIC}{sample}{SLURM_JOB_START_METRIC}{sample}'"
    return [
        f'if [ -d "{FIRST_STEP_DIRECTORY}" ] && [ -n "${{SLURM_JOB_ID:-}}" ]; then',
        f'  echo "export {FIRST_STEP_FILE_VARIABLE}={slurm_first_step_file()}"',
        # slurmstepd takes everything after '=' as the value, quotes and all (task.c,
        # _run_script_and_set_env), so the label's own quotes are the only ones.
        f'  echo "export {FIRST_STEP_LABELS_VARIABLE}=slurm_job_id=\\"${{SLURM_JOB_ID}}\\""',
        f'  if [ ! -e "{submit}" ] && mkdir "{lock}" 2>/dev/null; then',
        # The task's own environment: a user's TZ would shift squeue's local time and a umask
        # like 077 would hide the file from the exporter (nobody).
        "    umask 022",
        "    for name in SLURM_CLUSTERS "
        "$(env | sed -n 's/^\\(SQUEUE_[A-Za-z0-9_]*\\)=.*/\\1/p'); do",
        '      unset "$name"',
        "    done",
        f"    times=$(TZ=UTC SLURM_TIME_FORMAT={SQUEUE_TIME_FORMAT} "
        f"timeout -k 2 {squeue_timeout_s} "
        'squeue -h -j "$SLURM_JOB_ID" -o "%V %S" 2>/dev/null | head -n 1)',
        "    submitted=${times%% *} started=${times#* }",
        '    [ -n "$times" ] && submit_s=$(TZ=UTC date -d "$submitted" +%s 2>/dev/null) && '
        'start_s=${SLURM_JOB_START_TIME:-$(TZ=UTC date -d "$started" +%s 2>/dev/null)} && '
        '[ -n "$start_s" ] && '
        f'printf {samples} "$SLURM_JOB_ID" "$submit_s" "$SLURM_JOB_ID" "$start_s" '
        f'> "{submit}.$$" && mv -f "{submit}.$$" "{submit}" || '
        f'{{ rm -f "{submit}.$$"; rmdir "{lock}" 2>/dev/null; }}',
        "  fi",
        "fi",
    ]


FIRST_STEP_EPILOG: Final = "90-first-step.sh"
"""The Epilog's name in the chart's ``epilogScripts``."""
FIRST_STEP_PROLOG: Final = "10-first-step.sh"
"""The Prolog's name in the chart's ``prologScripts``, beside the home Prolog's: slurmd runs
several in reverse alphabetical order (SchedMD/slurm slurm-26-05-3-1 doc/man/man5/slurm.conf.5,
Prolog), and these two do not depend on each other."""


def _slurm_job_files_removal() -> list[str]:
    """Shell lines (as root) that remove this job's entries of the directory, and no other's.

    Its files, the temporary names a killed writer left (``job-<id>.prom.<pid>``,
    ``job-<id>-submit.prom.<pid>``) and its lock: ``job-<id>.*`` and ``job-<id>-*``, which
    ``job-<id>0...`` never matches. Only a numeric id, so the globs stay in the directory;
    ``rm -f`` unlinks a symbolic link a user put there, never its target, and the lock goes
    with ``rmdir`` (no recursion as root into what a job made).
    """
    job = f"{FIRST_STEP_DIRECTORY}/job-${{SLURM_JOB_ID}}"
    return [
        'case "${SLURM_JOB_ID:-}" in "" | *[!0-9]*) exit 0 ;; esac',
        f'rm -f -- "{job}."* "{job}-"* 2>/dev/null',
        f'rmdir "{slurm_lookup_lock()}" 2>/dev/null',
        "exit 0",
        "",
    ]


def slurm_first_step_epilog() -> str:
    """Slurm Epilog (as root, on each node of a job, at its end): remove the job's files.

    A job's samples leave with it (the series ends; the recording rules have taken it by then,
    at the 30 s scrape interval). A failing Epilog drains the node, so it never fails.
    """
    return "\n".join(
        [
            "#!/bin/sh",
            "# Generated by the training platform (components/first_step.py).",
            *_slurm_job_files_removal(),
        ]
    )


def slurm_first_step_prolog() -> str:
    """Slurm Prolog (as root, on each node of a job, before its tasks): the job's files, gone.

    A job killed with its slurmd (a container restart, a node reboot) gets no Epilog, and
    ``JobRequeue=1`` (components/slurm/conf.py) runs a requeued batch job again under the same
    ``SLURM_JOB_ID`` with a new submit time (SchedMD/slurm slurm-26-05-3-1
    src/slurmctld/job_mgr.c, ``details->submit_time = now`` at requeue). Its old submit file
    would make the TaskProlog skip the lookup and its old first-step file the helper keep the
    old first step, and the rules take the earliest of the job's pods: the stale times would
    win. So every run of a job starts without them.

    It runs before any task of the job on the node: ``PrologFlags=Contain``
    (components/slurm/sharing.py) implies ``Alloc`` (SchedMD/slurm slurm-26-05-3-1
    doc/man/man5/slurm.conf.5, PrologFlags), so slurmd runs it at allocation and steps wait
    for it; slurmd runs it as ``SlurmdUser``, root (doc/html/prolog_epilog.shtml;
    slurm-operator v1.2.1 internal/builder/common/const.go, ``SlurmdUser``), in the slurmd
    container, which mounts :data:`FIRST_STEP_DIRECTORY` (components/slurm/node_sets.py). The
    operator names it in slurm.conf without a path (slurm-operator v1.2.1
    internal/builder/controllerbuilder/controller_config.go, buildPrologEpilogConf), so
    configless slurmd fetches it (doc/html/configless_slurm.shtml). A failing Prolog drains
    the node, so it never fails.
    """
    return "\n".join(
        [
            "#!/bin/sh",
            "# Generated by the training platform (components/first_step.py).",
            *_slurm_job_files_removal(),
        ]
    )


FIRST_STEP_CLEAR_CONTAINER: Final = "first-step-clear"
FIRST_STEP_CLEAR_COMMAND: Final = (
    f'rm -rf -- "{FIRST_STEP_DIRECTORY}/"* "{FIRST_STEP_DIRECTORY}/".[!.]* '
    f'"{FIRST_STEP_DIRECTORY}/"..?* 2>/dev/null; exit 0'
)
"""What the clearing init container runs: every entry of the directory, hidden ones too (an
entry it cannot remove is left, and the pod still starts)."""


def slurm_first_step_clear_container() -> dict[str, Any]:
    """A slurmd pod's init container that empties the first-step directory before slurmd runs.

    When a slurmd pod starts no job runs on its node, so every file there is a dead job's. The
    emptyDir outlives a node reboot (it is on the node's disk, and the pod is the same), and a
    pod's init containers run again when its sandbox is recreated (Kubernetes, "Init
    Containers"); a dead job requeued to another node, or not requeued at all, would otherwise
    serve its stale times from this node until the pod is replaced. The Prolog
    (:func:`slurm_first_step_prolog`) cannot do this: at a job's start other jobs' files are
    live. A restart of the slurmd container alone runs no init container; its killed jobs'
    files stay until their next run on this node (the Prolog) or the pod's next start.

    The exporter's image (node_exporter v1.12.1 is built on Prometheus's busybox image:
    prometheus/node_exporter v1.12.1 Dockerfile, so ``sh`` and ``rm`` are there, and the node
    has it already), as ``nobody``: the emptyDir is mode 0777 (kubernetes/kubernetes
    pkg/volume/emptydir/empty_dir.go, ``perm``), so nobody may unlink the jobs' entries. It
    comes before the exporter, which therefore never serves a dead job's file.
    """
    return {
        "name": FIRST_STEP_CLEAR_CONTAINER,
        "image": versions.FIRST_STEP_EXPORTER_IMAGE,
        "command": ["/bin/sh", "-c", FIRST_STEP_CLEAR_COMMAND],
        "resources": first_step_exporter_resources(),
        "securityContext": copy.deepcopy(first_step_sidecar()["securityContext"]),
        "volumeMounts": [first_step_mount()],
    }


def helper_script() -> str:
    """The helper command the training images carry (:data:`FIRST_STEP_COMMAND`).

    Writes ``<metric>{<labels>} <now>`` to the file :data:`FIRST_STEP_FILE_VARIABLE` names,
    once (a file already there is kept: the first step is the first), through a temporary name
    the exporter skips and a rename. Without the variable (a pod of another runtime, a laptop)
    it does nothing, so a program may call it unconditionally.
    """
    return "\n".join(
        [
            "#!/bin/sh",
            f"# {FIRST_STEP_COMMAND}: mark this job's first training step for the cold-start",
            "# ledger (generated by components/first_step.py, helper_script).",
            f'file="${{{FIRST_STEP_FILE_VARIABLE}:-}}"',
            '[ -n "$file" ] || exit 0',
            '[ -e "$file" ] && exit 0',
            "# The exporter (user nobody) must read the file whatever the job's umask.",
            "umask 022",
            f"printf '{FIRST_STEP_METRIC}{{%s}} %s\\n' \"${{{FIRST_STEP_LABELS_VARIABLE}:-}}\" "
            '"$(date +%s)" > "$file.$$" && mv -f "$file.$$" "$file"',
            "",
        ]
    )


def pods_with_exporter(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pod specs of ``pods`` that run the exporter (tests and ``synth jobs`` read it)."""
    return [
        pod
        for pod in pods
        if any(c.get("name") == FIRST_STEP_CONTAINER for c in pod.get("initContainers", []))
    ]
