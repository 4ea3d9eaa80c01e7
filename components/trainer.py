"""Kubeflow Trainer v2, each team's runtimes generated from the node pools, the legacy operator.

Runtimes are namespaced ``TrainingRuntime`` objects, one set per team in the team's namespace:
the team context a job needs (its Volcano queue, its claim on the shared file system) differs per
team, and a runtime is where Trainer reads it. Trainer resolves ``runtimeRef.kind:
TrainingRuntime`` in the TrainJob's namespace and copies the runtime template's
``scheduling.volcano.sh/queue-name`` into the job's PodGroup (kubeflow/trainer v2.3.0
pkg/runtime/core/trainingruntime.go, pkg/runtime/framework/plugins/volcano/volcano.go); the
Kubeflow SDK 0.5.0 lists namespaced runtimes before cluster ones and submits with their kind
(kubeflow/trainer/backends/kubernetes/backend.py). A team gets runtimes only for the pools whose
accelerator its quota allows, so every runtime a team sees can run its jobs.

Every runtime is wired to one accelerator pool: its node selector and tolerations, every
accelerator and EFA interface and huge page of the pool's nodes (components/workloads.py),
``/dev/shm`` in memory, the team's claim on the shared file system, and gang scheduling through
Volcano (``podGroupPolicy.volcano`` plus ``schedulerName: volcano``, which Trainer does not set).

Trainium runtimes are gang-scheduled by Volcano too, not by the Neuron scheduler extension
(``my-scheduler``): they request every Neuron device of a node, so contiguous allocation inside
a node is given, while only Volcano starts all workers of a job together.
"""

from __future__ import annotations

import copy
import typing
from typing import Any, Final, Literal

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.admission import enforced_policy
from components.catalog import GPU_RESOURCE, NEURON_RESOURCE
from components.checkpoints import CheckpointLocation, checkpoint_environment
from components.config import (
    RUNTIME_IMAGE_KEYS,
    LustreConfig,
    NodePoolConfig,
    TeamConfig,
    TrainerConfig,
)
from components.config.teams import WORKLOAD_GID
from components.first_step import (
    first_step_labels,
    pods_with_exporter,
    with_first_step_exporter,
)
from components.helm import release, with_system_placement
from components.node_pools import POOL_LABEL
from components.scheduling import QUEUE_ANNOTATION, SCHEDULER_NAME, STANDARD_PRIORITY_CLASS
from components.storage.layout import TeamDirectory, team_directories
from components.storage.model_store import model_store_environment, model_store_volumes
from components.teams import JOB_SERVICE_ACCOUNT, TEAM_LABEL, cluster_role_ref
from components.tenancy import hardened_pod
from components.workloads import (
    NEURON_COMPILE_CACHE_VARIABLE,
    neuron_compile_cache,
    node_resources,
    non_root_security_context,
    pool_workload_placement,
    processes_per_node,
    shared_memory_volume,
)

NAMESPACE: Final = "kubeflow-system"
RELEASE: Final = "kubeflow-trainer"
JOBSET_RELEASE: Final = "jobset"
JOBSET_NAMESPACE: Final = "jobset-system"
"""JobSet's own release, in the namespace of its upstream install (the chart's fullname is the
release name, charts/jobset/templates/_helpers.tpl at v0.12.0)."""
MANAGER_SERVICE_ACCOUNT: Final = f"{RELEASE}-controller-manager"
"""The manager's ServiceAccount: ``<fullname>-controller-manager``, and the fullname of release
``kubeflow-trainer`` of chart ``kubeflow-trainer`` is the release name (chart 2.3.0
templates/manager/_helpers.tpl, templates/rbac/service_account.yaml)."""
RUNTIME_API: Final = "trainer.kubeflow.org/v1alpha1"
RUNTIME_KIND: Final = "TrainingRuntime"
FRAMEWORK_LABEL: Final = "trainer.kubeflow.org/framework"
ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
MPI_USER_ID: Final = WORKLOAD_GID
"""The user (and group) of every runtime pod: ``mpiuser`` of Trainer's MPI runtime images,
where OpenMPI refuses to run as root and the SSH keys are mounted for this user (upstream
deepspeed_distributed.yaml: runAsUser and fsGroup 1000); the other images run as it too, since
root cannot write the team's directories (:func:`workload_security_context`)."""
UNLISTED_USER_ENVIRONMENT: Final = [
    {"name": "HOME", "value": "/tmp"},
    {"name": "USER", "value": "trainer"},
]
"""The framework images other than the MPI ones have no user 1000 in ``/etc/passwd``: the
container's HOME would be ``/``, which it cannot write (Triton's and pip's caches), and
Python's ``getpass.getuser()`` (which names TorchInductor's cache directory) falls back to
USER before the password database."""
MPI_SSH_PATH: Final = "/home/mpiuser/.ssh"
MPI_SSH_PORT: Final = 2222
MPI_NO_SINGLE_COPY: Final = {"name": "OMPI_MCA_btl_vader_single_copy_mechanism", "value": "none"}
"""Open MPI 4's shared-memory transport copies between ranks of a node with
``process_vm_readv``, which containerd's RuntimeDefault seccomp profile allows only with
CAP_SYS_PTRACE (contrib/seccomp/seccomp_default.go), and the hardened pods hold no capability:
it would fail with "Read -1, expected ..., errno = 1". Without
single copy it goes through shared memory; MPI here only bootstraps, NCCL carries the data."""
"""sshd of Trainer's MPI runtime image listens here (its non-root sshd_config)."""
MPI_HOSTFILE_VOLUME: Final = "mpi-hostfile"
"""The launcher volume Trainer's MPI plugin adds, with the hostfile (pkg/constants/constants.go)."""
MPI_HOSTFILE_DIR: Final = "/etc/mpi"
MPI_WORKER_WAIT_SECONDS: Final = 900
"""How long the launcher waits for every worker's sshd before it fails the job."""
Framework = Literal["torch", "mpi", "jax"]

# libfabric over EFA: RDMA reads where the hardware has them, fork-safe for data loaders.
EFA_ENVIRONMENT: Final = {
    "FI_PROVIDER": "efa",
    "FI_EFA_USE_DEVICE_RDMA": "1",
    "FI_EFA_FORK_SAFE": "1",
}
NCCL_ENVIRONMENT: Final = {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "^lo,docker"}
RESTART_STRATEGY: Final = "BlockingRecreate"
"""JobSet recreates a failed job's pods only once every pod of the last attempt is gone
(jobset_controller.go, constructJobsFromTemplate): the gang of whole-node pods then forms on
the nodes the last attempt frees, instead of pending beside it and making Karpenter add
nodes for a moment's overlap."""
NEURON_ENVIRONMENT: Final = {"NEURON_RT_LOG_LEVEL": "WARN", "CCOM_SOCKET_IFNAME": "eth0"}


def runtime_name(framework: str, pool: NodePoolConfig) -> str:
    """Name of the runtime of a framework on a pool, e.g. ``torch-p5``."""
    return f"{framework}-{pool.name}"


def fabric_variables(
    pool: NodePoolConfig, *, team: str | None, checkpoints: CheckpointLocation | None
) -> dict[str, str]:
    """The accelerator's and fabric's variables of a training pod, Trainer's and Ray's alike.

    NCCL's or Neuron's, EFA's on EFA pools, and on Trainium the team's shared compile cache
    when the team has the file system.

    Args:
        pool: the pod's pool.
        team: the team; None for cluster-wide runtimes (no compile cache of its own).
        checkpoints: where jobs checkpoint; None without the shared file system.
    """
    gpu = pool.instance.accelerator_resource == GPU_RESOURCE
    variables = {**(NCCL_ENVIRONMENT if gpu else NEURON_ENVIRONMENT)}
    if pool.uses_efa:
        variables.update(EFA_ENVIRONMENT)
    if not gpu and checkpoints is not None and team:
        # A TrainJob's trainer.env replaces it by name (kubeflow/trainer v2.3.0
        # pkg/runtime/framework/plugins/jobset/builder.go, apply.UpsertEnvVars).
        variables[NEURON_COMPILE_CACHE_VARIABLE] = neuron_compile_cache(team)
    return variables


def _environment(
    pool: NodePoolConfig, *, team: str | None, checkpoints: CheckpointLocation | None
) -> list[dict[str, Any]]:
    variables = fabric_variables(pool, team=team, checkpoints=checkpoints)
    environment: list[dict[str, Any]] = [
        {"name": key, "value": value} for key, value in variables.items()
    ]
    if checkpoints is not None and team:
        environment += checkpoint_environment(checkpoints.path, team, checkpoints.s3_uri)
    return environment


def workload_security_context(group_id: int | None) -> dict[str, Any]:
    """Every runtime pod runs as :data:`MPI_USER_ID`, with its team's group as a supplement.

    Root squash makes root on a node ``nobody`` on the file system, without the team's group
    (docs/concepts/data-and-checkpoints.md, "Team isolation"), so a job writes its team's
    directories only as a user whose groups include the team's. Kubernetes adds
    ``supplementalGroups`` to the container's processes, and the Lustre client sends the group
    that owns the file it checks (components/storage/layout.py).

    Args:
        group_id: the team's gid; None for a team without the shared file system.
    """
    context = non_root_security_context(MPI_USER_ID)
    if group_id is not None:
        context["supplementalGroups"] = [group_id]
    return context


def team_volumes(
    directories: list[TeamDirectory], *, models: bool = False, publishes_models: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts) of a team's storage: each Lustre claim at its path in ``/fsx``.

    All read-write, even where the team only reads: a read-only mount records no access times,
    which release goes by; the directory's mode keeps jobs from writing there
    (:data:`components.storage.layout.IMPORT_ONLY_DIRECTORY_MODE`).

    Args:
        directories: the team's Lustre directories (none where the pod's pool mounts no
            Lustre).
        models: also the model store, the team's area at ``/models`` and the shared one at
            ``/models/shared`` (:func:`components.storage.model_store.model_store_volumes`);
            any node reaches it, whatever the pool. Default False.
        publishes_models: the team publishes (``modelStore.publishers``): ``/models/shared``
            read-write; otherwise read-only. Default False.
    """
    volumes = [
        {"name": directory.claim_name, "persistentVolumeClaim": {"claimName": directory.claim_name}}
        for directory in directories
    ]
    mounts = [
        {"name": directory.claim_name, "mountPath": directory.mount_path}
        for directory in directories
    ]
    if models:
        model_volumes, model_mounts = model_store_volumes(publishes=publishes_models)
        volumes += model_volumes
        mounts += model_mounts
    return volumes, mounts


def pod_spec(
    pool: NodePoolConfig,
    *,
    image: str,
    checkpoints: CheckpointLocation | None,
    team: str | None = None,
    directories: list[TeamDirectory] | None = None,
    group_id: int | None = None,
    command: list[str] | None = None,
    models: bool = False,
    publishes_models: bool = False,
) -> dict[str, Any]:
    """The pod of one training node: pinned to the pool, the whole node, Volcano-scheduled.

    Args:
        pool: the pool its node comes from.
        image: the training image.
        checkpoints: with the shared file system, where jobs checkpoint: the job gets its
            checkpoint directory in the team's. None: no shared file system.
        team: the team whose runtime it is (its Neuron compile cache and checkpoints live in
            its directories); None for cluster-wide runtimes. Default None.
        directories: the team's directories on the shared file system, each mounted from its
            claim (:func:`team_volumes`). Default none.
        group_id: the team's gid, the pods' supplemental group. Default None.
        command: the container's command, if not the image's. Default None.
        models: mount the team's model store claims and say where (``MODELS_DIR``,
            ``SHARED_MODELS_DIR``); needs ``group_id``. Default False.
        publishes_models: the team publishes models: ``/models/shared`` read-write
            (:func:`team_volumes`). Default False.
    """
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [shared_memory_volume(pool)]
    lustre_directories = directories if checkpoints is not None and directories else []
    shared_volumes, shared_mounts = team_volumes(
        lustre_directories, models=models, publishes_models=publishes_models
    )
    volumes += shared_volumes
    mounts += shared_mounts
    environment = _environment(pool, team=team, checkpoints=checkpoints)
    if models:
        environment += model_store_environment()
    container: dict[str, Any] = {
        "name": "node",
        "image": image,
        "env": environment,
        "resources": node_resources(pool),
        "volumeMounts": mounts,
    }
    if command:
        container["command"] = command
    return team_pod_spec(
        container, placement=pool_workload_placement(pool), volumes=volumes, group_id=group_id
    )


def team_pod_spec(
    container: dict[str, Any],
    *,
    placement: dict[str, Any],
    volumes: list[dict[str, Any]],
    group_id: int | None,
) -> dict[str, Any]:
    """The pod of a team's workload, for Trainer runtimes and Ray nodes alike.

    Its user and gid, Volcano, the training priority, the job service account without a token.

    Args:
        container: the pod's one container.
        placement: ``nodeSelector``, ``tolerations`` (and affinity) of where it runs.
        volumes: its volumes.
        group_id: the team's gid, its supplemental group; None without the shared file system.
    """
    return {
        "securityContext": workload_security_context(group_id),
        "schedulerName": SCHEDULER_NAME,
        "priorityClassName": STANDARD_PRIORITY_CLASS,
        "serviceAccountName": JOB_SERVICE_ACCOUNT,
        # The account mounts none either; said on the pod too, where a reader (or a scanner)
        # looking at the pod alone sees it. A TrainJob's runtimePatches may turn it on.
        "automountServiceAccountToken": False,
        **placement,
        "containers": [container],
        "volumes": volumes,
    }


DISRUPTED_POD_RULE: Final = {
    "action": "FailJob",
    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
}
"""A pod the cluster took away fails its Job with reason ``PodFailurePolicy``, which the
JobSet's failure policy restarts without counting (:data:`DISRUPTION_RESTART_RULE`). Karpenter's
drains and evictions set the pod's DisruptionTarget condition, and so does Volcano when it
reclaims a queue's share: its evictor sets it before deleting the pod (volcano v1.15.1
pkg/scheduler/cache/cache.go, defaultEvictor.Evict)."""
DISRUPTION_RESTART_RULE: Final = {
    "name": "disruptionsDoNotCount",
    "action": "RestartJobSetAndIgnoreMaxRestarts",
    "onJobFailureReasons": ["PodFailurePolicy"],
}
"""JobSet's rule for a Job failed by :data:`DISRUPTED_POD_RULE`: restart the gang, and keep
``maxRestarts`` for the job's own failures (kubernetes-sigs/jobset v0.12.0
api/jobset/v1alpha2/jobset_types.go, FailurePolicyRule)."""


def _replicated_job(name: str, pod: dict[str, Any], *, trainer_step: bool) -> dict[str, Any]:
    """One replicated job of a runtime's JobSet, its pod hardened (components/tenancy.py).

    ``backoffLimit: 0`` and ``restartPolicy: Never``: the first failed pod fails its Job (no
    container restart in place first, which JobSet's defaulting of ``OnFailure`` would give),
    and JobSet's failure policy then restarts the whole gang. With Kubernetes' default of 6 the
    Job would replace the one pod while its peers hang in their collectives. A pod failure
    policy requires ``Never`` (batch/v1 validation).
    """
    metadata = {"labels": {ANCESTOR_LABEL: "trainer"}} if trainer_step else {}
    pod_template: dict[str, Any] = {"spec": hardened_pod({**pod, "restartPolicy": "Never"})}
    if pods_with_exporter([pod]):
        # the PodMonitor and the namespace's policy find the first-step exporter by it
        pod_template = {"metadata": {"labels": first_step_labels()}, **pod_template}
    template: dict[str, Any] = {
        "spec": {
            "backoffLimit": 0,
            "podFailurePolicy": {"rules": [DISRUPTED_POD_RULE]},
            "template": pod_template,
        }
    }
    if metadata:
        template["metadata"] = metadata
    return {"name": name, "template": template}


def wait_for_workers_script() -> str:
    """Shell of the launcher's init container: wait until every worker's sshd accepts.

    Under a Volcano gang every pod is created and bound together, so the launcher can start
    before the workers' sshd listens; mpirun gives each host only ``ConnectionAttempts=10``
    (Trainer's reserved ``OMPI_MCA_plm_rsh_args``). JobSet's ``dependsOn`` cannot order them:
    it creates the launcher's Job only once the workers are Ready, which the gang (minMember =
    every pod) never lets happen (kubernetes-sigs/jobset v0.12.0
    pkg/controllers/jobset_controller.go, reconcileReplicatedJobs).
    """
    return "\n".join(
        [
            f"deadline=$((SECONDS + {MPI_WORKER_WAIT_SECONDS}))",
            "self=$(hostname)",
            f"for host in $(awk '{{print $1}}' {MPI_HOSTFILE_DIR}/hostfile); do",
            '  [ "${host%%.*}" = "$self" ] && continue',
            f'  until (exec 3<>"/dev/tcp/${{host}}/{MPI_SSH_PORT}") 2>/dev/null; do',
            '    if [ "$SECONDS" -ge "$deadline" ]; then',
            f'      echo "sshd on $host did not answer within {MPI_WORKER_WAIT_SECONDS} s" >&2',
            "      exit 1",
            "    fi",
            "    sleep 2",
            "  done",
            '  echo "sshd on $host answers"',
            "done",
        ]
    )


def mpi_replicated_jobs(pod: dict[str, Any], image: str) -> list[dict[str, Any]]:
    """Workers serving SSH and the launcher (itself node 0) that runs mpirun over them."""
    pod = copy.deepcopy(pod)
    pod["containers"][0]["env"] = [*pod["containers"][0].get("env", []), MPI_NO_SINGLE_COPY]
    worker = copy.deepcopy(pod)
    worker["containers"][0].update(
        command=["/usr/sbin/sshd"],
        args=["-De", "-f", "/home/mpiuser/.sshd_config"],
        readinessProbe={"tcpSocket": {"port": MPI_SSH_PORT}, "initialDelaySeconds": 5},
    )
    launcher = copy.deepcopy(pod)
    launcher["initContainers"] = [
        *launcher.get("initContainers", []),
        {
            "name": "wait-for-workers",
            "image": image,
            "command": ["/bin/bash", "-c", wait_for_workers_script()],
            "volumeMounts": [{"name": MPI_HOSTFILE_VOLUME, "mountPath": MPI_HOSTFILE_DIR}],
            # a shell loop: capped, so a runaway one cannot take the launcher's node memory
            "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"},
                "limits": {"memory": "64Mi"},
            },
        },
    ]
    return [
        _replicated_job("node", worker, trainer_step=False),
        _replicated_job("launcher", launcher, trainer_step=True),
    ]


RUNTIME_NUM_NODES: Final = 1
"""A platform runtime's ``mlPolicy.numNodes``: what a TrainJob that names none gets."""


def runtime_spec(
    framework: Framework,
    pool: NodePoolConfig,
    *,
    trainer: TrainerConfig,
    queue: str,
    checkpoints: CheckpointLocation | None,
    directories: list[TeamDirectory] | None = None,
    group_id: int | None = None,
    models: bool = False,
    publishes_models: bool = False,
) -> dict[str, Any]:
    """The TrainingRuntime spec of ``framework`` on ``pool``, gang-scheduled in ``queue``.

    ``queue`` is the team's queue and name: its Neuron compile cache and checkpoints sit in its
    directories. ``checkpoints``, ``directories``, ``group_id``, ``models`` and
    ``publishes_models``: see
    :func:`pod_spec`. A
    failed pod restarts the whole job up to ``trainer.maxRestarts`` times
    (:data:`RESTART_STRATEGY`).
    """
    image = trainer.images.for_runtime(pool.instance.accelerator, framework)
    # Config refuses a stack with Trainium pools and no Neuron image.
    assert image is not None
    pod = pod_spec(
        pool, image=image, checkpoints=checkpoints, team=queue, directories=directories,
        group_id=group_id, models=models, publishes_models=publishes_models,
    )  # fmt: skip
    if framework != "mpi":
        pod["containers"][0]["env"].extend(UNLISTED_USER_ENVIRONMENT)
    # Every node serves its first step to the cold-start ledger (a native sidecar: the Job's
    # pod still completes when the training container does).
    pod = with_first_step_exporter(pod, container="node")
    ml_policy: dict[str, Any] = {"numNodes": RUNTIME_NUM_NODES}
    jobset: dict[str, Any]
    if framework == "mpi":
        # numNodes stays 1: the launcher's Job is sized from the runtime, the workers from the
        # TrainJob (pkg/runtime/framework/plugins/mpi/mpi.go, EnforceMLPolicy).
        ml_policy["mpi"] = {
            "numProcPerNode": processes_per_node(pool),
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": MPI_SSH_PATH,
            "runLauncherAsNode": True,
        }
        jobset = {
            # Workers' DNS names resolve before they are Ready, so the launcher can wait on them.
            "network": {"publishNotReadyAddresses": True},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
            "replicatedJobs": mpi_replicated_jobs(pod, image),
        }
    else:
        ml_policy[framework] = {}
        jobset = {"replicatedJobs": [_replicated_job("node", pod, trainer_step=True)]}
    jobset["failurePolicy"] = {
        "maxRestarts": trainer.max_restarts,
        "restartStrategy": RESTART_STRATEGY,
        "rules": [DISRUPTION_RESTART_RULE],
    }
    return {
        "mlPolicy": ml_policy,
        "podGroupPolicy": {"volcano": {}},
        "template": {
            "metadata": {"annotations": {QUEUE_ANNOTATION: queue}},
            "spec": jobset,
        },
    }


def runtime_frameworks(pool: NodePoolConfig) -> list[Framework]:
    """Runtimes a pool gets: PyTorch everywhere; MPI and JAX on GPU pools."""
    return [
        typing.cast(Framework, framework)
        for framework in RUNTIME_IMAGE_KEYS[pool.instance.accelerator]
    ]


def team_devices(team: TeamConfig, pool: NodePoolConfig) -> int:
    """Accelerator devices of ``pool``'s kind a team's quota and queue capability both allow."""
    resource = pool.instance.accelerator_resource
    return min(team.quota.resources()[resource], team.capability.resources()[resource])


def team_nodes(team: TeamConfig, pool: NodePoolConfig) -> int:
    """Whole nodes of ``pool`` a team's quota and queue capability both allow."""
    return team_devices(team, pool) // pool.instance.accelerators


def team_runtimes(
    team: TeamConfig, pools: list[NodePoolConfig]
) -> list[tuple[NodePoolConfig, Framework]]:
    """(pool, framework) of every runtime a team gets.

    On the pools it can hold a node of, and MPI only where it can hold two (the launcher is node
    0 and needs at least one worker, pkg/runtime/framework/plugins/mpi/mpi.go).
    """
    return [
        (pool, framework)
        for pool in pools
        if team_nodes(team, pool) >= 1
        for framework in runtime_frameworks(pool)
        if framework != "mpi" or team_nodes(team, pool) >= 2
    ]


def trainer_values() -> dict[str, Any]:
    """Values of the kubeflow-trainer chart: its CRDs in, JobSet and built-in runtimes out.

    JobSet is its own release (:func:`jobset_values`): as Trainer's subchart its CRD would come
    from the subchart's ``crds/`` directory, which Helm never upgrades, and its controller would
    have no placement. The chart's README (kubeflow/trainer v2.3.0 charts/kubeflow-trainer)
    says ``jobset.install`` must be false where JobSet is installed already. The built-in
    runtimes are installed by a hook job that downloads kubectl at install time; the platform
    creates its own runtimes instead. The controller runs on the system nodes.
    """
    return with_system_placement(
        versions.TRAINER_CHART,
        {
            "crds": {"enabled": True},
            "jobset": {"install": False},
            "runtimes": {"defaultEnabled": False},
        },
    )


def jobset_values() -> dict[str, Any]:
    """Values of the jobset chart: the controller (and its webhooks) on the system nodes.

    Its defaults leave the controller without tolerations or node selector
    (kubernetes-sigs/jobset v0.12.0 charts/jobset/values.yaml), so it would wait for a
    Karpenter node while the atomic install times out.
    """
    return with_system_placement(versions.JOBSET_CHART, {})


NEURON_PROCESS_POLICY: Final = "trainingplatform-neuron-processes"
PRIORITY_CLASS_READER: Final = "trainingplatform:trainer-priorityclass-reader"
PRIORITY_CLASS_RULES: Final = [
    {
        "apiGroups": ["scheduling.k8s.io"],
        "resources": ["priorityclasses"],
        "verbs": ["get", "list", "watch"],
    }
]
"""What Trainer's manager lacks: with ``podGroupPolicy.volcano`` its TrainJob webhook reads the
pod template's PriorityClass through the manager's cached client, which needs list and watch
to fill (pkg/runtime/framework/plugins/volcano/volcano.go, Validate); the chart's ClusterRole
grants none (kubeflow/trainer#3918), so without this every such TrainJob is refused."""


def neuron_process_policy(neuron_runtimes: dict[str, int]) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: Trainium TrainJobs that size their node say their processes.

    Trainium runtimes ask for one CPU per NeuronCore, which Trainer's torch plugin turns into
    one process per NeuronCore (it counts only GPUs otherwise, torch.go). A TrainJob's
    ``trainer.resourcesPerNode`` replaces the runtime's resources in that count, so such a job
    must state ``trainer.numProcPerNode`` or it would start one process per CPU it names.

    Args:
        neuron_runtimes: runtime name -> NeuronCores per node, for every Trainium runtime.
    """
    cores = ", ".join(f"'{name}': {count}" for name, count in sorted(neuron_runtimes.items()))
    return {
        **_runtime_table_policy("trainium-runtime", "cores", cores),
        "validations": [
            {
                "expression": "!has(object.spec.trainer) || "
                "!has(object.spec.trainer.resourcesPerNode) || "
                "has(object.spec.trainer.numProcPerNode)",
                "messageExpression": "'runtime ' + object.spec.runtimeRef.name + ' takes a whole "
                "Trainium node: leave spec.trainer.resourcesPerNode unset, or also set "
                "spec.trainer.numProcPerNode (' + "
                "string(variables.cores[object.spec.runtimeRef.name]) + ' NeuronCores per node)'",
                "reason": "Invalid",
            }
        ],
    }


def _runtime_table_policy(condition: str, variable: str, entries: str) -> dict[str, Any]:
    """The part of a TrainJob policy that judges only jobs on some runtimes, with a table of them.

    Args:
        condition: the match condition's name.
        variable: the name of the variable that holds the table (``variables.<variable>``).
        entries: the table's CEL map entries, ``'<runtime>': <value>, ...``.
    """
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": ["trainer.kubeflow.org"],
                    "apiVersions": ["v1alpha1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["trainjobs"],
                }
            ]
        },
        # Match conditions cannot read variables, so the map is spelled in both places.
        "matchConditions": [
            {"name": condition, "expression": "object.spec.runtimeRef.name in {" + entries + "}"}
        ],
        "variables": [{"name": variable, "expression": "{" + entries + "}"}],
    }


MPI_IMAGE_POLICY: Final = "trainingplatform-mpi-job-image"


def mpi_image_policy(mpi_runtimes: dict[str, str]) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: an MPI TrainJob runs one image, the runtime's.

    Trainer v2.3.0 gives ``spec.trainer.image``, ``command`` and ``args`` only to the container
    ``node`` of replicated jobs labelled ``trainer.kubeflow.org/trainjob-ancestor-step:
    trainer`` (pkg/runtime/framework/plugins/jobset/builder.go, ``Trainer``, lines 113-141):
    on an MPI runtime that is the launcher, so the workers, whose sshd runs the ranks mpirun
    starts, would keep the runtime's image. Labelling the workers as well is no way out: they
    would take the job's ``command`` in place of sshd, and Trainer would size them as the
    trainer step (pkg/runtime/core/trainingruntime.go, lines 186-196). Nor is
    ``runtimePatches``: a ``ContainerPatch`` carries only env, volume mounts and a security
    context (pkg/apis/trainer/v1alpha1/trainjob_types.go, ``ContainerPatch``). So a job on an
    MPI runtime names no image or the runtime's own; another image is a runtime of its own
    (``trainer.images`` in the stack), which launcher and workers both run.

    Args:
        mpi_runtimes: runtime name -> its image, for every MPI runtime of the stack.
    """
    images = ", ".join(f"'{name}': '{image}'" for name, image in sorted(mpi_runtimes.items()))
    return {
        **_runtime_table_policy("mpi-runtime", "images", images),
        "validations": [
            {
                "expression": "!has(object.spec.trainer) || !has(object.spec.trainer.image) || "
                "object.spec.trainer.image == variables.images[object.spec.runtimeRef.name]",
                "messageExpression": "'runtime ' + object.spec.runtimeRef.name + ' is MPI: "
                "Trainer gives spec.trainer.image to the launcher only and its workers would "
                "run ' + variables.images[object.spec.runtimeRef.name] + '. Leave "
                "spec.trainer.image unset (or that image), or have the stack build your image "
                "into the runtime (trainer.images)'",
                "reason": "Invalid",
            }
        ],
    }


LEGACY_OPERATOR_DEPLOYMENT: Final = "training-operator"
GANG_SCHEDULER_FLAG: Final = f"--gang-scheduler-name={SCHEDULER_NAME}"


def with_gang_scheduler(resource_type: str, props: dict[str, Any]) -> dict[str, Any] | None:
    """The legacy operator's Deployment with Volcano as gang scheduler, or None to leave as is.

    Only the operator's own Deployment changes: its manager container gets
    ``--gang-scheduler-name=volcano`` (once), so v1 jobs get Volcano PodGroups.
    """
    if resource_type != "kubernetes:apps/v1:Deployment":
        return None
    if (props.get("metadata") or {}).get("name") != LEGACY_OPERATOR_DEPLOYMENT:
        return None
    changed = copy.deepcopy(props)
    for container in changed["spec"]["template"]["spec"]["containers"]:
        arguments = [a for a in container.get("args") or [] if not a.startswith("--gang-scheduler")]
        container["args"] = [*arguments, GANG_SCHEDULER_FLAG]
    return changed


def _gang_scheduler_transform(
    args: pulumi.ResourceTransformArgs,
) -> pulumi.ResourceTransformResult | None:
    props = with_gang_scheduler(args.type_, dict(args.props))
    return None if props is None else pulumi.ResourceTransformResult(props, args.opts)


class Trainer(pulumi.ComponentResource):
    """Kubeflow Trainer, its admission needs, and each team's runtimes on its pools."""

    def __init__(
        self,
        name: str,
        *,
        trainer: TrainerConfig,
        pools: list[NodePoolConfig],
        lustre_pools: set[str],
        teams: list[TeamConfig],
        team_namespaces: dict[str, pulumi.Resource],
        checkpoints: CheckpointLocation | None,
        lustre: LustreConfig | None,
        protect: bool,
        volcano_ready: list[pulumi.Resource],
        model_store: bool = False,
        model_publishers: frozenset[str] = frozenset(),
        kubernetes_provider: pulumi.ProviderResource,
        adopting_kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Install Trainer after Volcano and create the runtimes.

        Args:
            name: prefix of child resource names.
            trainer: validated trainer settings (images).
            pools: accelerator pools; each team gets runtimes on those its quota allows.
            lustre_pools: names of the pools whose nodes mount the file system (those in its
                zone); runtimes on other pools mount no claim.
            teams: the teams; each gets its runtimes in its namespace, queued in its queue.
            team_namespaces: team name -> its Namespace (runtimes wait for it).
            checkpoints: where jobs checkpoint, where the stack has the Lustre file system,
                else None: runtimes of teams with ``sharedFileSystem``
                mount the team's directories and give each job its checkpoint directory.
            lustre: the shared file system's config (its team roots), None without one.
            protect: protect the release and the JobSet CRD, and retain both on delete: their
                CRDs carry every TrainJob, runtime and JobSet. Unprotected (dev), switching
                Trainer off uninstalls them, so switching it on again installs afresh instead of
                finding a release Pulumi no longer knows.
            volcano_ready: Volcano must run before Trainer starts (it registers its PodGroup
                watch at start-up).
            model_store: the stack has the EFS model store: every team runtime mounts the
                team's claims at ``/models`` and ``/models/shared``. Default False.
            model_publishers: the teams whose runtimes mount ``/models/shared`` read-write
                (``modelStore.publishers``). Default none.
            kubernetes_provider: provider of the release and runtimes.
            adopting_kubernetes_provider: provider of JobSet's CRD, which takes over the CRD a
                stack whose Trainer bundled JobSet already has (a plain create would fail
                with AlreadyExists on that stack's next ``up``).
            opts: resource options.
        """
        super().__init__("trainingplatform:index:Trainer", name, None, opts)
        self.runtimes: dict[tuple[str, str], k8s.apiextensions.CustomResource] = {}
        if not trainer.enabled:
            self.register_outputs({})
            return
        stateful = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, protect=protect, retain_on_delete=protect
        )
        # Applied by the stack, so a JobSet bump upgrades the CRD (the chart's crds/ would not).
        jobset_crds = k8s.yaml.v2.ConfigFile(
            f"{name}-jobset-crds",
            file=versions.JOBSET_CRDS_URL,
            opts=pulumi.ResourceOptions.merge(
                stateful,
                pulumi.ResourceOptions(
                    provider=adopting_kubernetes_provider, depends_on=volcano_ready
                ),
            ),
        )
        controller = release(
            RELEASE,
            versions.TRAINER_CHART,
            namespace=NAMESPACE,
            values=trainer_values(),
            create_namespace=True,
            opts=pulumi.ResourceOptions.merge(
                stateful, pulumi.ResourceOptions(depends_on=[*volcano_ready, jobset_crds])
            ),
        )
        # After Trainer: on a stack whose Trainer still bundles JobSet, its upgrade
        # (jobset.install false) must first remove the subchart's webhook configurations, whose
        # names are fixed whatever the release (jobset v0.12.0 templates/webhook/_helpers.tpl).
        jobset = release(
            JOBSET_RELEASE,
            versions.JOBSET_CHART,
            namespace=JOBSET_NAMESPACE,
            values=jobset_values(),
            create_namespace=True,
            skip_crds=True,
            opts=pulumi.ResourceOptions(
                parent=self, provider=kubernetes_provider, depends_on=[jobset_crds, controller]
            ),
        )
        in_cluster = pulumi.ResourceOptions(parent=self, provider=kubernetes_provider)
        reader = k8s.rbac.v1.ClusterRole(
            f"{name}-priorityclass-reader",
            metadata={"name": PRIORITY_CLASS_READER},
            rules=typing.cast(Any, PRIORITY_CLASS_RULES),
            opts=in_cluster,
        )
        reader_binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-priorityclass-reader",
            metadata={"name": PRIORITY_CLASS_READER},
            role_ref=cluster_role_ref(PRIORITY_CLASS_READER),
            subjects=[
                {"kind": "ServiceAccount", "name": MANAGER_SERVICE_ACCOUNT, "namespace": NAMESPACE}
            ],
            opts=pulumi.ResourceOptions.merge(
                in_cluster, pulumi.ResourceOptions(depends_on=[reader])
            ),
        )
        if trainer.legacy_training_operator:
            k8s.kustomize.v2.Directory(
                "training-operator",
                directory=versions.TRAINING_OPERATOR_KUSTOMIZATION,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=kubernetes_provider,
                    depends_on=volcano_ready,
                    transforms=[_gang_scheduler_transform],
                ),
            )
        neuron_runtimes = {
            runtime_name(framework, pool): pool.instance.neuron_cores
            for pool in pools
            if pool.instance.accelerator_resource == NEURON_RESOURCE
            for framework in runtime_frameworks(pool)
        }
        if neuron_runtimes:
            enforced_policy(
                f"{name}-neuron-processes",
                NEURON_PROCESS_POLICY,
                neuron_process_policy(neuron_runtimes),
                opts=in_cluster,
            )
        mpi_runtimes = {
            runtime_name("mpi", pool): image
            for team in teams
            for pool, framework in team_runtimes(team, pools)
            if framework == "mpi"
            and (image := trainer.images.for_runtime(pool.instance.accelerator, "mpi"))
        }
        if mpi_runtimes:
            enforced_policy(
                f"{name}-mpi-job-image",
                MPI_IMAGE_POLICY,
                mpi_image_policy(mpi_runtimes),
                opts=in_cluster,
            )
        for team in teams:
            after_trainer = pulumi.ResourceOptions(
                parent=self,
                provider=kubernetes_provider,
                depends_on=[controller, jobset, reader_binding, team_namespaces[team.name]],
            )
            for pool, framework in team_runtimes(team, pools):
                runtime = runtime_name(framework, pool)
                mounted = (
                    lustre is not None and team.shared_file_system and pool.name in lustre_pools
                )
                spec = runtime_spec(
                    framework, pool, trainer=trainer, queue=team.name,
                    checkpoints=checkpoints if mounted else None,
                    directories=team_directories(lustre, team) if lustre and mounted else None,
                    group_id=team.gid if lustre is not None or model_store else None,
                    models=model_store, publishes_models=team.name in model_publishers,
                )  # fmt: skip
                self.runtimes[(team.name, runtime)] = k8s.apiextensions.CustomResource(
                    f"{name}-{team.name}-{runtime}",
                    api_version=RUNTIME_API,
                    kind=RUNTIME_KIND,
                    metadata={
                        "name": runtime,
                        "namespace": team.name,
                        "labels": {
                            FRAMEWORK_LABEL: framework,
                            POOL_LABEL: pool.name,
                            TEAM_LABEL: team.name,
                        },
                    },
                    spec=typing.cast(Any, spec),
                    opts=after_trainer,
                )
        self.register_outputs({})
