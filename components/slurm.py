"""Slurm on Kubernetes with Slinky: node sets on the same accelerator pools as Kubernetes jobs.

Install order (REFERENCE §8): cert-manager (the operator webhook's certificate), the Slinky CRDs,
the operator, the accounting database (mariadb-operator and one ``MariaDB``), then the ``slurm``
chart with the controller, REST API, accounting and login set.

The node sets are ``NodeSet`` resources created here rather than through the chart's
``nodesets`` values: each is built from the pool's catalog entry (every accelerator and EFA
interface, GRES), so it can be validated against the CRD schema and checked by policy before
anything reaches a cluster. The chart's partition ``all`` (``Nodes=ALL``) still spans them.

The Slurm auth keys are random values kept as Pulumi secrets: the chart would generate them with
a cluster ``lookup`` and regenerate them whenever that lookup sees nothing.
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
import yaml

from components import slurm_directory, software, versions
from components.autoscaling import MONITORING_NAMESPACE, Autoscaling, scaled_object
from components.catalog import GPU_RESOURCE, NEURON_RESOURCE
from components.checkpoints import (
    CHECKPOINT_S3_VARIABLE,
    CHECKPOINT_VARIABLE,
    CheckpointLocation,
    checkpoint_directory,
    checkpoint_location,
)
from components.cluster import encrypted_gp3_class, state_reclaim_policy, storage_class
from components.config import NodePoolConfig, PlatformConfig, SlurmNodeSetConfig
from components.config.pools import GENERAL_LUSTRE_POOL, GENERAL_POOL
from components.config.slurm import SlurmDirectoryConfig
from components.config.storage import SHARED_MOUNT
from components.helm import release, with_system_placement
from components.node_pools import POOL_LABEL, SLURM_TOPOLOGY
from components.scheduling import STANDARD_PRIORITY_CLASS
from components.storage import CLAIM_NAME
from components.tenancy import (
    DEFAULT_DENY_POLICY,
    RUNTIME_DEFAULT_SECCOMP,
    from_namespace,
    hardened_container_context,
    network_policy,
    tcp,
)
from components.workloads import (
    node_resources,
    pool_workload_placement,
    shared_memory_volume,
)

NAMESPACE: Final = "slurm"
OPERATOR_NAMESPACE: Final = "slinky"
CERT_MANAGER_NAMESPACE: Final = "cert-manager"
MARIADB_OPERATOR_NAMESPACE: Final = "mariadb-operator"
RELEASE: Final = "slurm"
CONTROLLER_NAME: Final = RELEASE
"""The chart's Controller (``fullnameOverride``), which every NodeSet names as its controller."""
SLINKY_API: Final = "slinky.slurm.net/v1beta1"
MARIADB_API: Final = "k8s.mariadb.com/v1alpha1"

SLURM_KEY: Final = {"name": "slurm-auth-slurm", "key": "slurm.key"}
JWT_KEY: Final = {"name": "slurm-auth-jwt", "key": "jwt.key"}
AUTH_KEY_LENGTH: Final = 1024
"""Characters of each auth key, as many as the chart would generate (``randAscii 1024``)."""

DATABASE_HOST: Final = "slurm-accounting-db"
"""The MariaDB resource, its Service, and the Secret with its passwords."""
DATABASE_NAME: Final = "slurm_acct_db"
DATABASE_USER: Final = "slurm"
DATABASE_PORT: Final = 3306
DATABASE_PASSWORD_KEY: Final = "password"
MYSQL_UID: Final = 999
"""The ``mysql`` user (and group) of the MariaDB image, as which the server runs: the user
mariadb-operator v26.6.0 runs it as when the resource names none (statefulset_builder.go)."""
DATABASE_ROOT_PASSWORD_KEY: Final = "root-password"
STATE_STORAGE_CLASS: Final = "slurm-retained"
"""Encrypted gp3 of slurmctld's state and the accounting database. It keeps its volumes when
their claim goes only where ``protectStatefulResources`` is true; elsewhere they go with it
(:func:`components.cluster.state_reclaim_policy`). The name stays either way: slurmctld's
StatefulSet names it in a volume claim template, which Kubernetes never lets change."""

DO_NOT_DISRUPT: Final = {"karpenter.sh/do-not-disrupt": "true"}
"""Keeps Karpenter from consolidating away the node under slurmctld or the database."""
SERVICE_PLACEMENT: Final = {"nodeSelector": {POOL_LABEL: GENERAL_POOL}}
"""Slurm's own services (controller, REST API, accounting) run on the general pool."""
LOGIN_PLACEMENT: Final = {"nodeSelector": {POOL_LABEL: GENERAL_LUSTRE_POOL}}
"""Login pods mount the file system, so they run on the CPU pool in its zone."""
INTERNAL_LOAD_BALANCER: Final = {
    "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
    "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
    "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
    "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes": (
        "preserve_client_ip.enabled=true"
    ),
}
"""An internal NLB in the private subnets, whichever controller (EKS's built-in service
controller or the AWS Load Balancer Controller) handles the Service. Either keeps the client's
address for the login NetworkPolicy: the built-in one's instance targets always do (with
``externalTrafficPolicy: Local``), the AWS Load Balancer Controller's IP targets only with
``preserve_client_ip`` on."""
LOGIN_SET: Final = "login"
PRIVILEGED_NAMESPACE: Final = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/warn": "privileged",
}
"""slurmd runs privileged (it manages cgroups and devices for the jobs it starts)."""
GRES_NAMES: Final = {GPU_RESOURCE: "gpu", NEURON_RESOURCE: "neuron"}
"""Slurm GRES name of each accelerator resource."""
NEURON_DEVICE_FILES: Final = "/dev/neuron"


LOG_SIDECAR_RESOURCES: Final = {
    "requests": {"cpu": "10m", "memory": "32Mi"},
    "limits": {"memory": "64Mi"},
}
"""The operator's log sidecar (and the login set's initconf): one shell loop over one file."""
SLURMCTLD_RESOURCES: Final = {
    "requests": {"cpu": "500m", "memory": "2Gi"},
    "limits": {"memory": "2Gi"},
}
"""slurmctld keeps every node, partition and queued job in memory; a few GiB hold tens of
thousands of jobs. No CPU limit: a throttled slurmctld answers every client late (its RPCs time
out), and it has the general pool's node to share with services that request what they use."""
SLURMRESTD_RESOURCES: Final = {
    "requests": {"cpu": "100m", "memory": "256Mi"},
    "limits": {"memory": "512Mi"},
}
"""slurmrestd turns slurmctld's and slurmdbd's answers into JSON, one request at a time per
connection; the operator's controllers are its main clients."""
SLURMDBD_RESOURCES: Final = {
    "requests": {"cpu": "250m", "memory": "512Mi"},
    "limits": {"memory": "1Gi"},
}
"""slurmdbd holds little itself (the database does the work); its rollups and large ``sacct``
answers pass through it."""
SERVICE_POD_SECURITY: Final = {"seccompProfile": RUNTIME_DEFAULT_SECCOMP}
"""Pod-level security of Slurm's daemons, merged over the operator's non-root user and group
(slurm-operator v1.2.1 internal/builder/common/pod_template.go, BuildPodTemplate)."""
SCRATCH_VOLUME: Final = {"name": "tmp", "emptyDir": {}}
SCRATCH_MOUNT: Final = {"name": "tmp", "mountPath": "/tmp"}
"""A writable ``/tmp`` beside a read-only root: slurmctld's image keeps supervisord's pid file
and the socket slurmctld notifies readiness on there (SlinkyProject/containers
schedmd/slurm/26.05 files/etc/supervisor/supervisord.conf and conf.d/slurmctld.conf), and the
MariaDB server its temporary files."""


def read_only_context() -> dict[str, Any]:
    """A daemon's container security context: :func:`hardened_container_context`, read-only root.

    Slurm's daemons write only to the operator's volumes (``/run``, the state, the log pipe)
    and slurmctld also to :data:`SCRATCH_MOUNT`; each runs as its image's unprivileged user
    (``slurm``, ``nobody``), which needs no capability. Slinky v1.2.1 drops the ``false`` of
    ``allowPrivilegeEscalation`` from the containers it builds (it prunes every false value of
    a resource's container before merging: internal/utils/structutils/kube.go, removeEmpty),
    so only mariadb-operator's pod and the containers a pod spec adds get it; it stays here
    for the day the operator keeps it.
    """
    return {**hardened_container_context(), "readOnlyRootFilesystem": True}


def slinky_image_reference(component: str) -> str:
    """A Slinky Slurm image (``slurmctld``, ``login``...) at the bill of materials' tag."""
    return f"{versions.SLINKY_IMAGE_REPOSITORY}/{component}:{versions.SLURM_IMAGE_TAG}"


def slinky_image(component: str) -> dict[str, str]:
    """:func:`slinky_image_reference` as the slurm chart's image map (:func:`chart_image`)."""
    return chart_image(slinky_image_reference(component))


def chart_image(reference: str) -> dict[str, str]:
    """``repository[:tag][@digest]`` as the slurm chart's image map.

    With a digest the chart renders ``repository@digest`` and ignores the tag
    (``slurm.format-image``, slurm-operator v1.2.1 helm/slurm/templates/_helpers.tpl), which
    stays in the values for people.
    """
    name, _, digest = reference.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    repository, tag = (name[:colon], name[colon + 1 :]) if colon > slash else (name, "")
    image = {"repository": repository}
    if tag:
        image["tag"] = tag
    if digest:
        image["digest"] = digest
    return image


def chart_rendered(image: str | Mapping[str, Any]) -> str:
    """An image value as the slurm chart writes it into a container (``slurm.format-image``).

    A string as it is; a map as ``repository@digest`` when it has a digest (the tag is then
    dropped), else ``repository:tag``.
    """
    if isinstance(image, str):
        return image
    if image.get("digest"):
        return f"{image['repository']}@{image['digest']}"
    return f"{image['repository']}:{image['tag']}"


def chart_reference(reference: str) -> str:
    """``reference`` as the chart writes it into a container, given as :func:`chart_image`."""
    return chart_rendered(chart_image(reference))


def sidecar_image() -> dict[str, str]:
    """The pinned image of the chart's log and init sidecars (alpine:latest by default)."""
    return chart_image(versions.SIDECAR_IMAGE)


def login_image(config: PlatformConfig) -> str:
    """The login pods' image: the stack's login build, else Slinky's login image.

    Args:
        config: the validated platform; ``slurm.images.login`` names the stack's build of
            ``images/slurmd`` with ``ROLE=login``. Default: the chart's Slurm release's image.
    """
    return config.slurm.images.login or slinky_image_reference("login")


def gres_name(pool: NodePoolConfig) -> str:
    """The GRES a pool's nodes offer: ``gpu`` or ``neuron``."""
    return GRES_NAMES[pool.instance.accelerator_resource]


def node_names(pool: NodePoolConfig) -> str:
    """Slurm hostlist of every node a pool's node set can ever have (one per pool node)."""
    if pool.max_nodes == 1:
        return f"{pool.name}-0"
    return f"{pool.name}-[0-{pool.max_nodes - 1}]"


def gres_conf(pools: Sequence[NodePoolConfig]) -> str:
    """``gres.conf``: NVIDIA devices found through NVML, Neuron devices by their files.

    Lines are per node set, so a Trainium node never looks for NVIDIA devices and a GPU node
    never lists Neuron files.
    """
    lines = ["# Generated by the training platform from the node pools (components/slurm.py)."]
    for pool in pools:
        if gres_name(pool) == "gpu":
            lines.append(f"NodeName={node_names(pool)} AutoDetect=nvidia")
        else:
            last = pool.instance.accelerators - 1
            lines.append(
                f"NodeName={node_names(pool)} AutoDetect=off Name=neuron "
                f"File={NEURON_DEVICE_FILES}[0-{last}]"
            )
    return "\n".join(lines) + "\n"


TASK_PROLOG_DIR: Final = "/usr/local/libexec/trainingplatform"
TASK_PROLOG: Final = f"{TASK_PROLOG_DIR}/task-prolog"
TASK_PROLOG_CONFIG_MAP: Final = "slurm-task-prolog"
"""The ConfigMap every slurmd pod mounts at :data:`TASK_PROLOG_DIR` (not baked into the image,
so a slurmd image built before it still runs jobs: a missing TaskProlog fails every task)."""


def job_tools_path() -> str:
    """Where the slurmd image keeps the tools jobs call (``JOB_TOOLS_PATH`` of images/slurmd)."""
    return software.recipe_pins("slurmd")["JOB_TOOLS_PATH"]


EFA_DEVICE: Final = "/dev/infiniband/uverbs0"
"""A node's first EFA device (a privileged slurmd pod sees the host's devices)."""


def task_prolog(
    tools_path: str,
    *,
    checkpoints: CheckpointLocation | None = None,
    efa_device: str = EFA_DEVICE,
) -> str:
    """Slurm's TaskProlog: tools first on PATH, the fabric in use, the checkpoint directory.

    slurmstepd runs it as the job's user with the task's environment, sets each ``export
    NAME=value`` line it prints, and only then looks the task's program up in PATH; a failing
    TaskProlog fails the task (SchedMD/slurm slurm-26-05-3-1 src/slurmd/slurmstepd/task.c,
    exec_task and _run_script_and_set_env). A job inherits the submitting shell's PATH, so
    without it ``srun neuron-ls`` finds nothing on a Trainium node. On a node with EFA it also
    sets, unless the job did, ``FI_PROVIDER=efa`` (libfabric) and ``NCCL_NET_PLUGIN=ofi`` (NCCL
    loads ``libnccl-net-ofi.so``, the aws-ofi-nccl plugin the slurmd image carries), as the
    Trainer images do: without them NCCL may run over TCP sockets without saying so.

    A job whose account is a team's (``slurm.directory`` makes one per team) gets, unless it
    set them, ``CHECKPOINT_DIR=/fsx/checkpoints/<account>/<job id>`` and the S3 copy's
    ``CHECKPOINT_S3_URI``, as Trainer runtimes give a TrainJob: a batch job requeued after a
    node failure (``JobRequeue=1``) keeps its id, so it finds its checkpoints again.

    Args:
        tools_path: the directories to put first (:func:`job_tools_path`).
        checkpoints: where the stack's jobs checkpoint; None without a file system. Default
            None.
        efa_device: the device whose presence says the node has EFA (:data:`EFA_DEVICE`; tests
            point it elsewhere).
    """
    lines = [
        "#!/bin/sh",
        "# Generated by the training platform (components/slurm.py, task_prolog).",
        f'echo "export PATH={tools_path}${{PATH:+:$PATH}}"',
        f'if [ -e "{efa_device}" ]; then',
        '  [ -n "${FI_PROVIDER:-}" ] || echo "export FI_PROVIDER=efa"',
        '  [ -n "${NCCL_NET_PLUGIN:-}" ] || echo "export NCCL_NET_PLUGIN=ofi"',
        "fi",
    ]
    if checkpoints is not None:
        team_directory = checkpoint_directory(checkpoints.path, "${SLURM_JOB_ACCOUNT}")
        job = "${SLURM_JOB_ACCOUNT}/${SLURM_JOB_ID}"
        lines += [
            # Only an account with a team directory: root's jobs (no directory) write nowhere.
            f'if [ -n "${{SLURM_JOB_ACCOUNT:-}}" ] && [ -d "{team_directory}" ]; then',
            f'  [ -n "${{{CHECKPOINT_VARIABLE}:-}}" ] || '
            f'echo "export {CHECKPOINT_VARIABLE}={team_directory}/${{SLURM_JOB_ID}}"',
        ]
        if checkpoints.s3_uri is not None:
            lines.append(
                f'  [ -n "${{{CHECKPOINT_S3_VARIABLE}:-}}" ] || '
                f'echo "export {CHECKPOINT_S3_VARIABLE}={checkpoints.s3_uri}{job}"'
            )
        lines.append("fi")
    return "\n".join([*lines, "exit 0", ""])


CONFINEMENT_CONF: Final = {
    "ProctrackType": "proctrack/cgroup",
    "TaskPlugin": ["task/cgroup", "task/affinity"],
    "JobAcctGatherType": "jobacct_gather/cgroup",
    "SelectTypeParameters": "CR_Core_Memory",
    "MpiDefault": "pmix",
    "JobSubmitPlugins": "lua",
    "PropagateResourceLimitsExcept": "MEMLOCK",
    "TaskProlog": TASK_PROLOG,
    "JobRequeue": 1,
}
"""``slurm.conf`` settings the operator leaves at Slurm's defaults (slurm-operator v1.2.1
internal/builder/controllerbuilder/controller_config.go, buildSlurmConf, sets none of them):

- jobs tracked and confined by cgroups and bound to their cores (task/cgroup with
  :func:`cgroup_conf`, task/affinity), cores and memory consumable, so ``--mem`` is a limit;
- ``MpiDefault=pmix``: ``srun`` starts MPI ranks through PMIx without ``--mpi=pmix``;
- ``JobSubmitPlugins=lua`` with :func:`job_submit_lua`: a job no partition can hold (more
  nodes than its node set may grow to) is refused at submission with a message saying so.
  ``EnforcePartLimits`` stays at its default ``NO``: set, slurmctld compares a job's nodes
  with the nodes its partition has *now* and refuses any job larger (SchedMD/slurm
  slurm-26-05-3-1 src/slurmctld/job_mgr.c, _part_access_check and _valid_job_part), which on
  a node set scaled to zero is every job; the operator's nodes are dynamic (``slurmd -Z``,
  slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go), so they do not exist
  before the autoscaler starts them;
- ``PropagateResourceLimitsExcept=MEMLOCK``: a job keeps slurmd's locked-memory limit (the EFA
  pools raise it for every container, components/user_data.py) instead of the login
  shell's, which would leave libfabric unable to register its buffers;
- ``TaskProlog`` (:func:`task_prolog`): every task finds the node's tools (``mpirun``,
  ``neuron-ls``) first on its PATH, which it otherwise takes from the submitting shell, and a
  team's job its checkpoint directory;
- ``JobRequeue=1``, Slurm's default, stated: a batch job whose node fails is requeued under
  its id (SchedMD/slurm src/common/read_config.c), and so resumes from its checkpoint
  directory (``sbatch --no-requeue`` opts out)."""


def controller_conf(
    pools: Sequence[NodePoolConfig], *, accounting: bool, directory: bool = False
) -> dict[str, Any]:
    """``slurm.conf`` additions: GRES types, their accounting, and :data:`CONFINEMENT_CONF`.

    The GRES types in use are tracked by accounting when it runs. With a directory, jobs are
    ordered by fair share and submitted only under a team account
    (:data:`components.slurm_directory.PRIORITY_CONF`).
    """
    gres_types = sorted({gres_name(pool) for pool in pools})
    conf: dict[str, Any] = {"GresTypes": gres_types, **CONFINEMENT_CONF}
    if accounting:
        conf["AccountingStorageTRES"] = [f"gres/{gres}" for gres in gres_types]
    if directory:
        conf.update(slurm_directory.PRIORITY_CONF)
    return conf


def job_submit_lua(limits: Mapping[str, int], default_partition: str | None) -> str:
    """``job_submit.lua``: refuse a job that asks for more nodes than its partitions can have.

    A job naming several partitions is refused only when none of those the platform knows can
    hold it (Slurm runs it in any that can). ``slurm_job_modify`` applies the same rule to
    ``scontrol update``. A job that states no node count (``--gpus=16`` alone) keeps Slurm's
    default of 1 here and in the autoscaler's demand: the README asks for ``--nodes``.

    Args:
        limits: partition -> the most nodes its node set grows to (``maxNodes``).
        default_partition: where a job that names none goes.
    """
    table = ", ".join(f'["{name}"] = {nodes}' for name, nodes in sorted(limits.items()))
    default = f'"{default_partition}"' if default_partition else "nil"
    return "\n".join(
        [
            "-- Generated by the training platform (components/slurm.py, job_submit_lua).",
            "-- Partitions grow from zero nodes, so Slurm's own check (EnforcePartLimits) would",
            "-- refuse every job; this refuses only what no node set can ever hold.",
            f"local max_nodes = {{ {table} }}",
            f"local default_partition = {default}",
            "",
            "local function too_large(partitions, wanted)",
            "  if partitions == nil or wanted == nil or wanted == slurm.NO_VAL then",
            "    return nil",
            "  end",
            "  local refusal = nil",
            '  for name in string.gmatch(partitions, "[^,]+") do',
            "    local most = max_nodes[name]",
            "    if most == nil or wanted <= most then",
            "      return nil",
            "    end",
            "    refusal = refusal or string.format(",
            '      "partition %s grows to at most %d nodes; the job asks for %d",',
            "      name, most, wanted)",
            "  end",
            "  return refusal",
            "end",
            "",
            "local function verdict(partitions, wanted)",
            "  local refusal = too_large(partitions, wanted)",
            "  if refusal then",
            '    slurm.log_user("%s", refusal)',
            "    return slurm.ERROR",
            "  end",
            "  return slurm.SUCCESS",
            "end",
            "",
            "function slurm_job_submit(job_desc, part_list, submit_uid)",
            "  return verdict(job_desc.partition or default_partition, job_desc.min_nodes)",
            "end",
            "",
            "function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)",
            "  return verdict(job_desc.partition or job_rec.partition, job_desc.min_nodes)",
            "end",
            "",
        ]
    )


def cgroup_conf() -> str:
    """``cgroup.conf``: cores, devices and memory constrained (Slurm defaults constrain none).

    Given, it replaces the operator's own, whose two lines it keeps (cgroup v2, no systemd in
    the container: controller_config.go, buildCgroupConf). A job then sees only the cores,
    the GPUs or Neuron devices and the memory it asked for, and one over its ``--mem`` is
    killed alone instead of taking the pod, and every job on the node, over its limit.
    """
    settings = {
        "CgroupPlugin": "cgroup/v2",
        "IgnoreSystemd": "yes",
        "ConstrainCores": "yes",
        "ConstrainDevices": "yes",
        "ConstrainRAMSpace": "yes",
        "ConstrainSwapSpace": "yes",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def topology_yaml(pools: Sequence[NodePoolConfig]) -> str:
    """``topology.yaml``: a tree whose switches, one per node set, share no parent.

    Each pool is one EC2 cluster placement group (its own EFA fabric), and Slurm's tree
    topology allocates a job only below one switch, so a job never spans two pools' nodes.
    Slurm nodes are placed under their switch by the node annotation
    (:data:`components.node_pools.SLURM_TOPOLOGY_ANNOTATION`) as well as by name.
    """
    switches = [{"switch": pool.name, "nodes": node_names(pool)} for pool in pools]
    document = [
        {"topology": SLURM_TOPOLOGY, "cluster_default": True, "tree": {"switches": switches}}
    ]
    return yaml.safe_dump(document, sort_keys=False)


def slurmd_resources(pool: NodePoolConfig) -> dict[str, Any]:
    """Slurmd's requests and limits: the node's accelerators, EFA, huge pages and memory.

    A training pod's (:func:`components.workloads.node_resources`), memory limit equal to its
    request: the pod never uses more than it asked for, so the kubelet does not evict it for
    memory pressure first, and jobs share that limit under Slurm's cgroups, each held to its
    ``--mem`` (:func:`cgroup_conf`); Slurm gives jobs exactly the limit (:func:`node_conf`).
    """
    resources = node_resources(pool)
    # The CPU request of a Trainium training pod sizes Trainer's process count; slurmd has none.
    requests = {key: value for key, value in resources["requests"].items() if key != "cpu"}
    limits = {key: value for key, value in resources["limits"].items() if key != "cpu"}
    return {"requests": requests, "limits": limits}


def node_conf(pool: NodePoolConfig) -> str:
    """Slurmd's ``--conf``: the node's GRES (every device) and features to constrain jobs by.

    No ``RealMemory``: slurmd reports the host's, and the image's entrypoint keeps the rest
    for the host (``MemSpecLimit`` = host memory less the pod's limit, which the operator
    passes as ``POD_MEMORY``: SlinkyProject/containers schedmd/slurm/26.05/*/files/usr/local/
    bin/slurmd-entrypoint.sh, calculateMemSpecLimit; slurm-operator v1.2.1
    internal/builder/workerbuilder/worker_app.go), so jobs get exactly the pod's limit.
    """
    features = [pool.name, pool.instance.accelerator]
    if pool.uses_efa:
        features.append("efa")
    return f"Gres={gres_name(pool)}:{pool.instance.accelerators} Features={','.join(features)}"


def shared_volume() -> dict[str, Any]:
    """The namespace's ``shared-lustre`` claim as a pod volume."""
    return {"name": "shared", "persistentVolumeClaim": {"claimName": CLAIM_NAME}}


def shared_mount() -> dict[str, str]:
    """Where every Slurm node and login pod sees the shared file system (as Trainer jobs do)."""
    return {"name": "shared", "mountPath": SHARED_MOUNT}


def nodeset_spec(
    node_set: SlurmNodeSetConfig,
    pool: NodePoolConfig,
    *,
    image: str,
    shared_file_system: bool,
    default_partition: bool = False,
    directory: SlurmDirectoryConfig | None = None,
    billing: str | None = None,
) -> dict[str, Any]:
    """The NodeSet of one pool: slurmd pods that each take a whole node of the pool.

    Args:
        node_set: the node set's config (pool, replicas).
        pool: the pool it runs on (catalog entry, taints).
        image: the pinned slurmd image (with the EFA libraries).
        shared_file_system: mount the namespace's Lustre claim at the shared path.
        default_partition: its partition is the cluster's default. Default False.
        directory: the users' directory: slurmd pods get the login pods' ``sssd.conf``
            through the NodeSet's SSH settings (the operator mounts it only there), and users
            may SSH to a node while a job of theirs runs on it (pam_slurm_adopt in the slurmd
            image). Default: none.
        billing: the partition's ``TRESBillingWeights`` (fair-share usage). Default: none.
    """
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "task-prolog", "mountPath": TASK_PROLOG_DIR, "readOnly": True},
    ]
    volumes: list[dict[str, Any]] = [
        shared_memory_volume(pool),
        {"name": "task-prolog",
         "configMap": {"name": TASK_PROLOG_CONFIG_MAP, "defaultMode": 0o555}},
    ]  # fmt: skip
    if shared_file_system:
        mounts.append(shared_mount())
        volumes.append(shared_volume())
    if directory is not None and directory.ca_certificates is not None:
        mounts.append(slurm_directory.ca_mount())
        volumes.append(slurm_directory.ca_volume())
    partition = "State=UP MaxTime=UNLIMITED" + (" Default=YES" if default_partition else "")
    if billing is not None:
        partition += f" TRESBillingWeights={billing}"
    ssh: dict[str, Any] = {}
    if directory is not None:
        ssh = {"ssh": {
            "enabled": True,
            "extraSshdConfig": slurm_directory.SSH_KEYS_COMMAND,
            "sssdConfRef": dict(slurm_directory.SSSD_SECRET),
        }}  # fmt: skip
    return {
        **ssh,
        "controllerRef": {"name": CONTROLLER_NAME},
        "scalingMode": "StatefulSet",
        # Where KEDA starts it from; from then on KEDA owns the count (the NodeSet ignores
        # later changes to it: Slurm.node_sets).
        "replicas": node_set.warm_nodes,
        "extraConf": node_conf(pool),
        "partition": {"enabled": True, "config": partition},
        "slurmd": {
            "image": image,
            "resources": slurmd_resources(pool),
            "volumeMounts": mounts,
        },
        # The operator's sidecar that tails slurmd's log (merged as a container: slurm-operator
        # v1.2.1 internal/builder/common/common.go, LogfileContainer): it reads one file.
        "logfile": {
            "image": versions.SIDECAR_IMAGE,
            "resources": copy.deepcopy(LOG_SIDECAR_RESOURCES),
            "securityContext": read_only_context(),
        },
        "template": {
            "metadata": {
                "labels": {POOL_LABEL: pool.name},
                **(
                    {"annotations": slurm_directory.config_hash(directory)}
                    if directory is not None
                    else {}
                ),
            },
            "spec": {
                # For the sidecar: a privileged container (slurmd) always runs unconfined
                # (Kubernetes, "Restrict a Container's Syscalls with seccomp").
                "securityContext": {"seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)},
                # The operator appends each pod's ordinal: Slurm nodes are <pool>-0, <pool>-1...
                "hostname": f"{pool.name}-",
                "priorityClassName": STANDARD_PRIORITY_CLASS,
                # The pool's nodes held for Slurm (its -slurm NodePool), never a node that
                # Volcano could give to a gang.
                **pool_workload_placement(pool, slurm=True),
                "volumes": volumes,
            },
        },
        # A node running a Slurm job is kept by a PodDisruptionBudget until the job ends.
        "workloadDisruptionProtection": True,
    }


def node_set_image(config: PlatformConfig, node_set: SlurmNodeSetConfig) -> str:
    """The slurmd image of a node set: its own, or the stack's for its pool's accelerator."""
    pool = config.pool(node_set.pool)
    assert pool is not None  # config validation guarantees it
    chosen = node_set.image or config.slurm.images.for_accelerator(pool.instance.accelerator)[1]
    assert chosen is not None  # config validation guarantees it
    return chosen


def login_sources(config: PlatformConfig, vpc_cidr: str) -> list[str]:
    """Who may reach the login service: ``slurm.login.allowedCidrs``, else the VPC.

    Args:
        config: the validated platform config (Slurm on).
        vpc_cidr: the VPC's block, the default.
    """
    login = config.slurm.login
    assert login is not None  # config validation guarantees it when Slurm is enabled
    return list(login.allowed_cidrs or [vpc_cidr])


def login_set_values(config: PlatformConfig, *, vpc_cidr: str) -> dict[str, Any]:
    """The chart's ``loginsets`` entry: login pods behind an internal NLB.

    With a directory, users log in with their directory keys (sshd asks SSSD), and a
    container beside the login container keeps the teams' Slurm accounts
    (:func:`components.slurm_directory.accounts_script`).

    Args:
        config: the validated platform.
        vpc_cidr: who may reach the login load balancer when the config names nobody.
    """
    slurm = config.slurm
    login = slurm.login
    assert login is not None  # config validation guarantees it when Slurm is enabled
    directory = slurm.directory
    dropped = {"capabilities": {"drop": list(slurm_directory.LOGIN_DROPPED_CAPABILITIES)}}
    mounts = [shared_mount()]
    volumes = [shared_volume()]
    containers: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    if directory is not None:
        with_ca = directory.ca_certificates is not None
        if with_ca:
            mounts.append(slurm_directory.ca_mount())
            volumes.append(slurm_directory.ca_volume())
        volumes.append(slurm_directory.accounts_sssd_volume())
        extra["metadata"] = {"annotations": slurm_directory.config_hash(directory)}
        shares = slurm_directory.fair_shares(config.teams)
        teams = {
            team.name: (team.gid, shares[team.name])
            for team in config.teams
            if team.gid is not None  # config validation requires it with a directory
        }
        script = slurm_directory.accounts_script(
            teams,
            cluster=config.slurm_cluster_name,
            interval=slurm_directory.ACCOUNTS_INTERVAL_SECONDS,
        )
        containers.append(
            # The reference the chart renders for the login container, so both pull one image.
            slurm_directory.accounts_container(
                chart_reference(login_image(config)), script, ca_certificates=with_ca
            )
        )
        extra["extraSshdConfig"] = slurm_directory.SSH_KEYS_COMMAND
    return {
        # Explicit, though loginsetDefaults says the same: an entry renders only when on.
        "enabled": True,
        "replicas": login.replicas,
        "login": {
            "image": chart_image(login_image(config)),
            "volumeMounts": mounts,
            "resources": {
                "requests": {"cpu": str(login.cpu), "memory": f"{login.memory_gib}Gi"},
                "limits": {"memory": f"{login.memory_gib}Gi"},
            },
            # supervisord restarts sshd inside the pod; this catches a pod where nothing
            # listens on 22 any more (the operator sets only a readiness probe on sackd's
            # socket, loginbuilder/login_app.go).
            "livenessProbe": {
                "tcpSocket": {"port": LOGIN_SSH_PORT},
                "periodSeconds": 30,
                "failureThreshold": 4,
            },
            # sshd, sssd and sackd need root's usual capabilities (setuid to the user, chroot
            # for privilege separation) and file capabilities of sssd's helpers, so no
            # allowPrivilegeEscalation: false; raw sockets and device nodes they never need.
            "securityContext": dropped,
        },
        # Copies and chowns a few config files (the operator's initconf.sh).
        "initconf": {
            "image": sidecar_image(),
            "resources": copy.deepcopy(LOG_SIDECAR_RESOURCES),
            "securityContext": dropped,
        },
        "rootSshAuthorizedKeys": "\n".join(login.ssh_authorized_keys) + "\n",
        **extra,
        "podSpec": {
            **LOGIN_PLACEMENT,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": volumes,
            **({"containers": containers} if containers else {}),
        },
        "service": {
            "metadata": {"annotations": dict(INTERNAL_LOAD_BALANCER)},
            "spec": {
                "type": "LoadBalancer",
                "loadBalancerSourceRanges": login_sources(config, vpc_cidr),
                # Keeps the client's address, which the login NetworkPolicy filters (with
                # Cluster, kube-proxy would SNAT it to a node's).
                "externalTrafficPolicy": "Local",
            },
        },
    }


def _service_pod_spec() -> dict[str, Any]:
    """The chart's ``podSpec`` of Slurm's daemons: the general pool, RuntimeDefault seccomp."""
    return {**SERVICE_PLACEMENT, "securityContext": copy.deepcopy(SERVICE_POD_SECURITY)}


def slurm_values(config: PlatformConfig, *, vpc_cidr: str) -> dict[str, Any]:
    """Values of the ``slurm`` chart: controller, REST API, accounting, login set, partition.

    Args:
        config: the validated platform (its ``slurm`` section, pools, cluster name).
        vpc_cidr: who may reach the login load balancer when the config names nobody.
    """
    slurm = config.slurm
    login = slurm.login
    assert login is not None  # config validation guarantees it when Slurm is enabled
    pools = [pool for node_set in slurm.node_sets if (pool := config.pool(node_set.pool))]
    accounting = slurm.accounting.enabled
    # The stack's own Secret holds sssd.conf (it carries the bind password); without a
    # directory the chart's default (local files only: root) stays.
    directory_values: dict[str, Any] = (
        {
            "sssd": {"secretRef": dict(slurm_directory.SSSD_SECRET)},
            "prologScripts": {slurm_directory.HOME_PROLOG: slurm_directory.home_prolog()},
        }
        if slurm.directory
        else {}
    )
    return {
        "fullnameOverride": RELEASE,
        "clusterName": config.slurm_cluster_name,
        "slurmKey": {"create": False, "secretRef": dict(SLURM_KEY)},
        "jwtKey": {"create": False, "secretRef": dict(JWT_KEY)},
        "configFiles": {
            "gres.conf": gres_conf(pools),
            "cgroup.conf": cgroup_conf(),
            "topology.yaml": topology_yaml(pools),
            "job_submit.lua": job_submit_lua(
                {ns.pool: ns.max_nodes for ns in slurm.node_sets}, slurm.default_partition_pool
            ),
        },
        # Each daemon hardened and sized (the chart sets no resources), its pod under the
        # RuntimeDefault seccomp profile; the operator runs them as non-root users and mounts
        # no service account token (slurm-operator v1.2.1 internal/builder/controllerbuilder/
        # controller_app.go, restapibuilder/restapi_app.go, accountingbuilder/
        # accounting_app.go).
        "controller": {
            "slurmctld": {
                "image": slinky_image("slurmctld"),
                "resources": copy.deepcopy(SLURMCTLD_RESOURCES),
                "securityContext": read_only_context(),
                "volumeMounts": [dict(SCRATCH_MOUNT)],
            },
            # The operator adds this sidecar only with inplaceReconfigure, which stays off
            # (the chart's default): a new config restarts slurmctld's pod instead.
            "reconfigure": {"image": slinky_image("slurmctld")},
            "logfile": {
                "image": sidecar_image(),
                "resources": copy.deepcopy(LOG_SIDECAR_RESOURCES),
                "securityContext": read_only_context(),
            },
            "persistence": {
                "enabled": True,
                "storageClassName": STATE_STORAGE_CLASS,
                "resources": {"requests": {"storage": f"{slurm.controller_storage_gib}Gi"}},
            },
            "extraConfMap": controller_conf(
                pools, accounting=accounting, directory=slurm.directory is not None
            ),
            # slurmctld's OpenMetrics, and the ServiceMonitor the operator makes for them: the
            # autoscaler's demand (components/autoscaling.py).
            "metrics": {"enabled": True, "serviceMonitor": {"enabled": True}},
            "metadata": {"annotations": dict(DO_NOT_DISRUPT)},
            "podSpec": {**_service_pod_spec(), "volumes": [dict(SCRATCH_VOLUME)]},
        },
        "restapi": {
            "replicas": slurm.rest_api_replicas,
            "slurmrestd": {
                "image": slinky_image("slurmrestd"),
                "resources": copy.deepcopy(SLURMRESTD_RESOURCES),
                "securityContext": read_only_context(),
            },
            "podSpec": _service_pod_spec(),
        },
        "accounting": {
            "enabled": accounting,
            # No liveness probe: slurmdbd converts its tables after a Slurm upgrade before it
            # listens, for as long as that takes; a kubelet restart midway starts it over.
            "slurmdbd": {
                "image": slinky_image("slurmdbd"),
                "resources": copy.deepcopy(SLURMDBD_RESOURCES),
                "securityContext": read_only_context(),
            },
            "storageConfig": {
                "host": DATABASE_HOST,
                "port": DATABASE_PORT,
                "database": DATABASE_NAME,
                "username": DATABASE_USER,
                "passwordKeyRef": {"name": DATABASE_HOST, "key": DATABASE_PASSWORD_KEY},
            },
            "podSpec": _service_pod_spec(),
        },
        "loginsets": {LOGIN_SET: login_set_values(config, vpc_cidr=vpc_cidr)},
        **directory_values,
        # Only the node sets' own partitions (nodeset_spec): one spanning node sets would
        # put one job on two placement groups.
        "partitions": {},
    }


def cert_manager_values() -> dict[str, Any]:
    """cert-manager with its CRDs (kept when the release goes), every part on the system nodes."""
    return with_system_placement(
        versions.CERT_MANAGER_CHART, {"crds": {"enabled": True, "keep": True}}
    )


def slurm_operator_values() -> dict[str, Any]:
    """The Slinky operator and webhook on the system nodes, webhook certificate by cert-manager.

    Its CRDs come from their own chart (``crds.enabled: false``), so uninstalling the operator
    never deletes the Slurm resources.
    """
    return with_system_placement(
        versions.SLURM_OPERATOR_CHART,
        {"crds": {"enabled": False}, "certManager": {"enabled": True}},
    )


def mariadb_operator_values() -> dict[str, Any]:
    """mariadb-operator on the system nodes, its CRDs from their own chart.

    Uninstalling a chart that owns the CRDs would delete every database.
    """
    return with_system_placement(versions.MARIADB_OPERATOR_CHART, {"crds": {"enabled": False}})


def database_claim_retention(protect: bool) -> dict[str, str]:
    """``spec.storage.pvcRetentionPolicy`` of the accounting database.

    mariadb-operator v26.6.0 hands it to its StatefulSet unchanged on Kubernetes >= 1.32
    (pkg/builder/statefulset_builder.go, mariadbPVCRetentionPolicy; every supported minor is):
    ``Delete`` lets Kubernetes delete the claim with the StatefulSet (``whenDeleted``) or with
    a removed replica (``whenScaled``), ``Retain`` keeps it. Kept only where protected, so an
    unprotected stack's ``destroy`` takes the volume too (its class reclaims with ``Delete``).

    Args:
        protect: the stack's ``protectStatefulResources``.
    """
    policy = "Retain" if protect else "Delete"
    return {"whenDeleted": policy, "whenScaled": policy}


def mariadb_spec(storage_gib: int, *, protect: bool) -> dict[str, Any]:
    """The accounting database: one MariaDB on an encrypted volume, retained where protected.

    Passwords come from the Secret :data:`DATABASE_HOST` (random values Pulumi keeps as secrets).
    InnoDB settings follow Slurm's accounting guide (buffer pool, lock wait timeout).

    Args:
        storage_gib: size of its volume, GiB.
        protect: keep its claim when the database goes (:func:`database_claim_retention`).
    """
    secret = DATABASE_HOST
    return {
        "image": versions.MARIADB_IMAGE,
        "replicas": 1,
        "port": DATABASE_PORT,
        "rootPasswordSecretKeyRef": {"name": secret, "key": DATABASE_ROOT_PASSWORD_KEY},
        "username": DATABASE_USER,
        "passwordSecretKeyRef": {"name": secret, "key": DATABASE_PASSWORD_KEY},
        "database": DATABASE_NAME,
        "storage": {
            "size": f"{storage_gib}Gi",
            "storageClassName": STATE_STORAGE_CLASS,
            "resizeInUseVolumes": True,
            "pvcRetentionPolicy": database_claim_retention(protect),
        },
        "myCnf": (
            "[mariadb]\n"
            "innodb_buffer_pool_size=1024M\n"
            "innodb_log_file_size=64M\n"
            "innodb_lock_wait_timeout=900\n"
            "max_allowed_packet=16M\n"
        ),
        "resources": {
            "requests": {"cpu": "500m", "memory": "2Gi"},
            "limits": {"memory": "2Gi"},
        },
        # The server as the image's mysql user, as mariadb-operator runs it by default (a
        # podSecurityContext replaces the operator's whole: v26.6.0 pkg/builder/
        # securitycontext_builder.go, buildPodSecurityContextWithUserGroup), under
        # RuntimeDefault seccomp, with no capability and a read-only root: it writes its data
        # volume, its socket and lock under /run/mysqld and temporary files under /tmp
        # (MariaDB/mariadb-docker 11.8 Dockerfile and docker-entrypoint.sh).
        "podSecurityContext": {
            "runAsNonRoot": True,
            "runAsUser": MYSQL_UID,
            "runAsGroup": MYSQL_UID,
            "fsGroup": MYSQL_UID,
            "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
        },
        "securityContext": read_only_context(),
        "volumes": [dict(SCRATCH_VOLUME), {"name": "run", "emptyDir": {}}],
        "volumeMounts": [dict(SCRATCH_MOUNT), {"name": "run", "mountPath": "/run/mysqld"}],
        "podMetadata": {"annotations": dict(DO_NOT_DISRUPT)},
        **SERVICE_PLACEMENT,
    }


SLURM_APP_LABEL: Final = "app.kubernetes.io/name"
"""The label Slinky v1.2.1 gives each component's pods (internal/builder/labels/labels.go:
``slurmctld``, ``slurmd``, ``slurmrestd``, ``slurmdbd``, ``login``)."""
SLURMCTLD_PORT: Final = 6817
SLURMD_PORT: Final = 6818
SLURMDBD_PORT: Final = 6819
SLURMRESTD_PORT: Final = 6820
LOGIN_SSH_PORT: Final = 22
DATABASE_POD_LABELS: Final = {"app.kubernetes.io/name": "mariadb",
                              "app.kubernetes.io/instance": DATABASE_HOST}  # fmt: skip
"""mariadb-operator's labels on the MariaDB resource's pods."""


def _slurm_app(app: str) -> dict[str, Any]:
    return {"matchLabels": {SLURM_APP_LABEL: app}}


def _peers(*apps: str) -> list[dict[str, Any]]:
    return [{"podSelector": _slurm_app(app)} for app in apps]


def slurm_network_policies(login_sources: list[str]) -> list[dict[str, Any]]:
    """The ``slurm`` namespace's ingress: each daemon from the daemons that talk to it.

    Every pod is isolated by a default deny; then, by Slurm's protocol (slurm.conf ports):

    * slurmctld (6817) from slurmd (registration, step completion), login (``sbatch``,
      ``srun``, ``squeue``), slurmrestd, slurmdbd, and Prometheus in the monitoring namespace
      (slurmctld serves its metrics on this port);
    * slurmd (6818) from login (``srun`` steps) and 22 (users' SSH to a node where a job of
      theirs runs, with a directory); from slurmctld and other slurmd on every
      port: slurmctld launches on 6818 and calls back to an ``srun`` inside a batch job on the
      port that srun listens on (job complete, time limit, node failure), and a job's ranks
      (NCCL's TCP bootstrap, MPI's out-of-band, step fan-out) use ports nobody fixes;
    * login on 22 only from ``login_sources`` (the load balancer keeps the client's address:
      ``externalTrafficPolicy: Local``), and on every port from slurmctld and slurmd, which
      call back to ``srun``/``salloc`` on their own listening ports;
    * slurmrestd (6820) from the Slinky operator's namespace, whose controllers drive Slurm
      through it;
    * slurmdbd (6819) from slurmctld, slurmrestd and login (``sacct``, ``sacctmgr``);
    * the accounting MariaDB (3306) only from slurmdbd and mariadb-operator, which creates its
      users and grants.

    EFA traffic between slurmd pods bypasses the kernel, so no NetworkPolicy sees it.

    Args:
        login_sources: CIDRs that may reach the login service's SSH port.
    """

    def allow(name: str, pods: dict[str, Any], ingress: list[dict[str, Any]]) -> dict[str, Any]:
        return network_policy(f"allow-{name}", NAMESPACE, pods=pods, ingress=ingress)

    every_tcp_port = [{"protocol": "TCP"}]
    return [
        network_policy(DEFAULT_DENY_POLICY, NAMESPACE, pods={}, ingress=[]),
        allow("slurmctld", _slurm_app("slurmctld"), [
            {"from": _peers("slurmd", "login", "slurmrestd", "slurmdbd"),
             "ports": tcp(SLURMCTLD_PORT)},
            # Prometheus scrapes slurmctld's metrics on its own port (the autoscaler's demand).
            {"from": [from_namespace(MONITORING_NAMESPACE)], "ports": tcp(SLURMCTLD_PORT)},
        ]),
        allow("slurmd", _slurm_app("slurmd"), [
            # srun steps; SSH into a node running one's job (with a directory, pam_slurm_adopt)
            {"from": _peers("login"), "ports": tcp(SLURMD_PORT, LOGIN_SSH_PORT)},
            {"from": _peers("slurmctld", "slurmd"), "ports": every_tcp_port},
        ]),
        allow("login", _slurm_app("login"), [
            {"from": [{"ipBlock": {"cidr": cidr}} for cidr in login_sources],
             "ports": tcp(LOGIN_SSH_PORT)},
            {"from": _peers("slurmctld", "slurmd"), "ports": every_tcp_port},
        ]),
        allow("slurmrestd", _slurm_app("slurmrestd"), [
            {"from": [from_namespace(OPERATOR_NAMESPACE)], "ports": tcp(SLURMRESTD_PORT)},
        ]),
        allow("slurmdbd", _slurm_app("slurmdbd"), [
            {"from": _peers("slurmctld", "slurmrestd", "login"), "ports": tcp(SLURMDBD_PORT)},
        ]),
        allow("accounting-db", {"matchLabels": dict(DATABASE_POD_LABELS)}, [
            {"from": [*_peers("slurmdbd"), from_namespace(MARIADB_OPERATOR_NAMESPACE)],
             "ports": tcp(DATABASE_PORT)},
        ]),
    ]  # fmt: skip


def create_namespace(
    *,
    cluster_ready: list[pulumi.Resource],
    kubernetes_provider: pulumi.ProviderResource,
    parent: pulumi.Resource,
) -> k8s.core.v1.Namespace:
    """The ``slurm`` namespace, made before the storage claims that mount Lustre in it."""
    return k8s.core.v1.Namespace(
        "slurm-namespace",
        metadata={"name": NAMESPACE, "labels": dict(PRIVILEGED_NAMESPACE)},
        opts=pulumi.ResourceOptions(
            parent=parent, provider=kubernetes_provider, depends_on=cluster_ready
        ),
    )


class Slurm(pulumi.ComponentResource):
    """cert-manager, Slinky, the accounting database, the Slurm cluster and its node sets."""

    def __init__(
        self,
        name: str,
        *,
        config: PlatformConfig,
        namespace: k8s.core.v1.Namespace,
        vpc_cidr: str,
        volume_tags: Mapping[str, str],
        cluster_ready: list[pulumi.Resource],
        workloads_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        bind_password: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Install Slurm (the platform builds this only when ``slurm.enabled``).

        Args:
            name: prefix of child resource names.
            config: the validated platform; its ``slurm`` section says what to build.
            namespace: the ``slurm`` namespace (:func:`create_namespace`).
            vpc_cidr: default source range of the login load balancer.
            volume_tags: tags of the state volumes (slurmctld, the database) the EBS CSI driver
                creates: the stack's default tags, which never reach them otherwise.
            cluster_ready: what the operators wait for (nodes, add-ons, storage class).
            workloads_ready: what slurmd and login pods need first: the namespace's Lustre
                claim, the priority classes.
            kubernetes_provider: provider of every release and object.
            bind_password: the directory's bind password (a secret; the config key
                ``slurmDirectoryBindPassword``), with ``slurm.directory.bindDn``. Default: none.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:Slurm", name, None, opts)
        self.node_sets: dict[str, k8s.apiextensions.CustomResource] = {}
        self.scaled_objects: dict[str, k8s.apiextensions.CustomResource] = {}
        slurm = config.slurm
        protect = config.protect_stateful_resources

        def opts_after(
            *depends_on: pulumi.Resource, stateful: bool = False
        ) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self,
                provider=kubernetes_provider,
                depends_on=[*cluster_ready, *depends_on],
                protect=protect and stateful,
            )

        # Before anything runs in the namespace. The agent's default (standard) mode still
        # lets a new pod accept traffic for the moment before its policies attach.
        for manifest in slurm_network_policies(login_sources(config, vpc_cidr)):
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{manifest['metadata']['name']}",
                metadata=typing.cast(Any, manifest["metadata"]),
                spec=typing.cast(Any, manifest["spec"]),
                opts=opts_after(namespace),
            )
        cert_manager = release(
            "cert-manager",
            versions.CERT_MANAGER_CHART,
            namespace=CERT_MANAGER_NAMESPACE,
            values=cert_manager_values(),
            create_namespace=True,
            opts=opts_after(),
        )
        crds = release(
            "slurm-operator-crds",
            versions.SLURM_OPERATOR_CRDS_CHART,
            namespace=OPERATOR_NAMESPACE,
            values={},
            create_namespace=True,
            opts=opts_after(cert_manager, stateful=True),
        )
        operator = release(
            "slurm-operator",
            versions.SLURM_OPERATOR_CHART,
            namespace=OPERATOR_NAMESPACE,
            values=slurm_operator_values(),
            opts=opts_after(cert_manager, crds),
        )
        keys: list[pulumi.Resource] = [
            self._secret(f"{name}-{ref['name']}", ref["name"], {ref["key"]: AUTH_KEY_LENGTH},
                         namespace=namespace, opts=opts_after(namespace, stateful=True))
            for ref in (SLURM_KEY, JWT_KEY)
        ]  # fmt: skip
        keys.append(
            k8s.core.v1.ConfigMap(
                f"{name}-task-prolog",
                metadata={"name": TASK_PROLOG_CONFIG_MAP, "namespace": NAMESPACE},
                data={
                    "task-prolog": task_prolog(
                        job_tools_path(), checkpoints=checkpoint_location(config)
                    )
                },
                opts=opts_after(namespace),
            )
        )
        if slurm.directory is not None:
            keys += self._directory(
                name, slurm.directory, bind_password, opts=opts_after(namespace)
            )
        # Where protected, deleting a claim must not delete Slurm's state or its job history.
        # slurmctld's claim has no retention policy (Slinky v1.2.1 internal/builder/
        # controllerbuilder/controller_app.go sets none, so Kubernetes keeps it): it goes with
        # the namespace, and its volume then by this class's reclaim policy.
        state_class = storage_class(
            f"{name}-{STATE_STORAGE_CLASS}",
            encrypted_gp3_class(
                STATE_STORAGE_CLASS,
                reclaim_policy=state_reclaim_policy(protect),
                default=False,
                tags=volume_tags,
            ),
            opts_after(),
        )
        # The operator makes slurmctld's ServiceMonitor, whose CRD comes with the monitoring
        # release; the ScaledObjects need KEDA's.
        autoscaling = Autoscaling(
            f"{name}-autoscaling",
            cluster_ready=cluster_ready,
            kubernetes_provider=kubernetes_provider,
            opts=pulumi.ResourceOptions(parent=self),
        )
        chart_needs: list[pulumi.Resource] = [
            operator, state_class, *keys, *workloads_ready, *autoscaling.ready,
        ]  # fmt: skip
        if slurm.accounting.enabled:
            chart_needs.append(
                self._database(name, slurm.accounting.storage_gib, namespace, state_class,
                               opts_after=opts_after)
            )  # fmt: skip
        cluster = release(
            RELEASE,
            versions.SLURM_CHART,
            namespace=NAMESPACE,
            values=slurm_values(config, vpc_cidr=vpc_cidr),
            opts=opts_after(namespace, *chart_needs, stateful=True),
        )
        for node_set in slurm.node_sets:
            pool = config.pool(node_set.pool)
            assert pool is not None  # config validation guarantees it
            spec = nodeset_spec(
                node_set,
                pool,
                image=node_set_image(config, node_set),
                shared_file_system=config.storage.lustre is not None,
                default_partition=pool.name == slurm.default_partition_pool,
                directory=slurm.directory,
                billing=slurm_directory.billing_weights(pool, gres_name(pool), config.teams)
                if slurm.directory is not None
                else None,
            )
            self.node_sets[pool.name] = k8s.apiextensions.CustomResource(
                f"{name}-nodeset-{pool.name}",
                api_version=SLINKY_API,
                kind="NodeSet",
                metadata={
                    "name": pool.name,
                    "namespace": NAMESPACE,
                    "labels": {POOL_LABEL: pool.name},
                },
                spec=typing.cast(Any, spec),
                opts=pulumi.ResourceOptions.merge(
                    opts_after(cluster, *workloads_ready),
                    # KEDA sets the replicas through the scale subresource; an up must not
                    # take them back (pulumi-kubernetes leaves an ignored field another field
                    # manager owns out of its server-side apply, since 4.9.0).
                    pulumi.ResourceOptions(ignore_changes=["spec.replicas"]),
                ),
            )
            self.scaled_objects[pool.name] = scaled_object(
                f"{name}-scaledobject-{pool.name}",
                node_set,
                pool,
                namespace=NAMESPACE,
                opts=opts_after(self.node_sets[pool.name], *autoscaling.ready),
            )
        self.register_outputs({})

    def _directory(
        self,
        name: str,
        directory: SlurmDirectoryConfig,
        bind_password: pulumi.Input[str] | None,
        *,
        opts: pulumi.ResourceOptions,
    ) -> list[pulumi.Resource]:
        """The Secret with ``sssd.conf`` (it holds the bind password) and the CA ConfigMap."""

        def confs(password: str | None) -> dict[str, str]:
            return {
                slurm_directory.SSSD_SECRET["key"]: slurm_directory.sssd_conf(
                    directory, bind_password=password
                ),
                slurm_directory.ACCOUNTS_SSSD_KEY: slurm_directory.sssd_conf(
                    directory, bind_password=password, accounts=True
                ),
            }

        data: pulumi.Input[dict[str, str]]
        if directory.bind_dn is None:
            data = confs(None)
        else:
            data = pulumi.Output.secret(pulumi.Output.from_input(bind_password).apply(confs))
        made: list[pulumi.Resource] = [
            k8s.core.v1.Secret(
                f"{name}-sssd-conf",
                metadata={"name": slurm_directory.SSSD_SECRET["name"], "namespace": NAMESPACE},
                type="Opaque",
                string_data=data,
                opts=opts,
            )
        ]
        if directory.ca_certificates is not None:
            made.append(
                k8s.core.v1.ConfigMap(
                    f"{name}-directory-ca",
                    metadata={"name": slurm_directory.CA_CONFIG_MAP, "namespace": NAMESPACE},
                    data={"ca.pem": directory.ca_certificates},
                    opts=opts,
                )
            )
        return made

    def _secret(
        self,
        resource_name: str,
        secret_name: str,
        lengths: dict[str, int],
        *,
        namespace: k8s.core.v1.Namespace,
        opts: pulumi.ResourceOptions,
    ) -> k8s.core.v1.Secret:
        """A Secret of random values (alphanumeric, ``lengths`` characters per key)."""
        values = {
            key: random.RandomPassword(
                f"{resource_name}-{key}",
                length=length,
                special=False,
                opts=pulumi.ResourceOptions(parent=self, protect=opts.protect),
            ).result
            for key, length in lengths.items()
        }
        return k8s.core.v1.Secret(
            resource_name,
            metadata={"name": secret_name, "namespace": NAMESPACE},
            type="Opaque",
            string_data=values,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace])),
        )

    def _database(
        self,
        name: str,
        storage_gib: int,
        namespace: k8s.core.v1.Namespace,
        state_class: k8s.storage.v1.StorageClass,
        *,
        opts_after: typing.Callable[..., pulumi.ResourceOptions],
    ) -> k8s.apiextensions.CustomResource:
        """mariadb-operator and the accounting database, with its passwords in a Secret."""
        crds = release(
            "mariadb-operator-crds",
            versions.MARIADB_OPERATOR_CRDS_CHART,
            namespace=MARIADB_OPERATOR_NAMESPACE,
            values={},
            create_namespace=True,
            opts=opts_after(stateful=True),
        )
        operator = release(
            "mariadb-operator",
            versions.MARIADB_OPERATOR_CHART,
            namespace=MARIADB_OPERATOR_NAMESPACE,
            values=mariadb_operator_values(),
            opts=opts_after(crds),
        )
        passwords = self._secret(
            f"{name}-{DATABASE_HOST}",
            DATABASE_HOST,
            {DATABASE_PASSWORD_KEY: 32, DATABASE_ROOT_PASSWORD_KEY: 32},
            namespace=namespace,
            opts=opts_after(namespace, stateful=True),
        )
        database_opts = opts_after(operator, passwords, state_class, stateful=True)
        return k8s.apiextensions.CustomResource(
            f"{name}-{DATABASE_HOST}",
            api_version=MARIADB_API,
            kind="MariaDB",
            metadata={"name": DATABASE_HOST, "namespace": NAMESPACE},
            spec=typing.cast(Any, mariadb_spec(storage_gib, protect=bool(database_opts.protect))),
            opts=pulumi.ResourceOptions.merge(
                database_opts, pulumi.ResourceOptions(retain_on_delete=database_opts.protect)
            ),
        )
