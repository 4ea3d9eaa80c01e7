"""Kubeflow Trainer v2, its runtimes generated from the node pools, and the legacy operator.

Every runtime is wired to one accelerator pool: its node selector and tolerations, every
accelerator and EFA interface of the pool's instance type (from the catalog), huge pages for
libfabric, ``/dev/shm`` in memory, the shared file system, and gang scheduling through Volcano
(``podGroupPolicy.volcano`` plus ``schedulerName: volcano``, which Trainer does not set itself).

Trainium runtimes are gang-scheduled by Volcano too, not by the Neuron scheduler extension
(``my-scheduler``): they request every Neuron device of a node, so contiguous allocation inside
a node is given, while only Volcano starts all workers of a job together. A job that wants part
of a node's Neuron devices should use ``schedulerName: my-scheduler`` through ``runtimePatches``.
"""

from __future__ import annotations

import copy
import typing
from typing import Any, Final, Literal

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.catalog import EFA_RESOURCE, GPU_RESOURCE
from components.cluster import SYSTEM_NODE_SELECTOR, SYSTEM_TOLERATION
from components.config import NodePoolConfig, TrainerConfig
from components.helm import release
from components.node_pools import POOL_LABEL, pool_workload_placement
from components.scheduling import QUEUE_ANNOTATION, SCHEDULER_NAME, STANDARD_PRIORITY_CLASS
from components.storage import CLAIM_NAME
from components.teams import JOB_SERVICE_ACCOUNT

NAMESPACE: Final = "kubeflow-system"
RUNTIME_API: Final = "trainer.kubeflow.org/v1alpha1"
FRAMEWORK_LABEL: Final = "trainer.kubeflow.org/framework"
ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
DEFAULT_QUEUE: Final = "default"
"""Queue of jobs that name none: Volcano's own, with no guaranteed share (jobs there only use
what teams leave idle). Teams name theirs per job (README: runtimePatches)."""
SHARED_MOUNT: Final = "/fsx"
MPI_SSH_PATH: Final = "/home/mpiuser/.ssh"
MPI_SSH_PORT: Final = 2222
"""sshd of Trainer's MPI runtime image listens here (its non-root sshd_config)."""
Framework = Literal["torch", "mpi", "jax"]

# libfabric over EFA: RDMA reads where the hardware has them, fork-safe for data loaders.
EFA_ENVIRONMENT: Final = {
    "FI_PROVIDER": "efa",
    "FI_EFA_USE_DEVICE_RDMA": "1",
    "FI_EFA_FORK_SAFE": "1",
}
NCCL_ENVIRONMENT: Final = {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "^lo,docker"}
NEURON_ENVIRONMENT: Final = {"NEURON_RT_LOG_LEVEL": "WARN", "CCOM_SOCKET_IFNAME": "eth0"}


def runtime_name(framework: str, pool: NodePoolConfig) -> str:
    """Name of the runtime of a framework on a pool, e.g. ``torch-p5``."""
    return f"{framework}-{pool.name}"


def node_resources(pool: NodePoolConfig, hugepages_gib: int) -> dict[str, Any]:
    """Requests (= limits) of one training pod: the whole node's accelerators and EFA."""
    instance = pool.instance
    amounts: dict[str, str] = {
        instance.accelerator_resource: str(instance.accelerators),
        # Huge pages need a memory request beside them; a quarter of the node leaves room.
        "memory": f"{instance.memory_gib // 4}Gi",
    }
    if pool.uses_efa:
        amounts[EFA_RESOURCE] = str(instance.efa_interfaces)
        if hugepages_gib:
            amounts["hugepages-2Mi"] = f"{hugepages_gib}Gi"
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _environment(pool: NodePoolConfig) -> list[dict[str, str]]:
    gpu = pool.instance.accelerator_resource == GPU_RESOURCE
    variables = {**(NCCL_ENVIRONMENT if gpu else NEURON_ENVIRONMENT)}
    if pool.uses_efa:
        variables.update(EFA_ENVIRONMENT)
    return [{"name": key, "value": value} for key, value in variables.items()]


def pod_spec(
    pool: NodePoolConfig,
    *,
    image: str,
    trainer: TrainerConfig,
    shared_file_system: bool,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """The pod of one training node: pinned to the pool, the whole node, Volcano-scheduled."""
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    if shared_file_system:
        mounts.append({"name": "shared", "mountPath": SHARED_MOUNT})
        volumes.append({"name": "shared", "persistentVolumeClaim": {"claimName": CLAIM_NAME}})
    container: dict[str, Any] = {
        "name": "node",
        "image": image,
        "env": _environment(pool),
        "resources": node_resources(pool, trainer.hugepages_gib),
        "volumeMounts": mounts,
    }
    if command:
        container["command"] = command
    return {
        "schedulerName": SCHEDULER_NAME,
        "priorityClassName": STANDARD_PRIORITY_CLASS,
        "serviceAccountName": JOB_SERVICE_ACCOUNT,
        **pool_workload_placement(pool),
        "containers": [container],
        "volumes": volumes,
    }


def _replicated_job(name: str, pod: dict[str, Any], *, trainer_step: bool) -> dict[str, Any]:
    metadata = {"labels": {ANCESTOR_LABEL: "trainer"}} if trainer_step else {}
    template: dict[str, Any] = {"spec": {"template": {"spec": pod}}}
    if metadata:
        template["metadata"] = metadata
    return {"name": name, "template": template}


def runtime_spec(
    framework: Framework,
    pool: NodePoolConfig,
    *,
    trainer: TrainerConfig,
    region: str,
    shared_file_system: bool,
) -> dict[str, Any]:
    """The ClusterTrainingRuntime spec of ``framework`` on ``pool``, gang-scheduled by Volcano."""
    images = trainer.images
    gpu = pool.instance.accelerator_resource == GPU_RESOURCE
    image = {"torch": images.torch, "mpi": images.mpi, "jax": images.jax}[framework]
    if not gpu:
        image = images.neuron.replace("{region}", region)
    pod = pod_spec(pool, image=image, trainer=trainer, shared_file_system=shared_file_system)
    ml_policy: dict[str, Any] = {"numNodes": 1}
    jobset: dict[str, Any]
    if framework == "mpi":
        ml_policy["mpi"] = {
            "numProcPerNode": pool.instance.accelerators,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": MPI_SSH_PATH,
            "runLauncherAsNode": True,
        }
        # Workers serve SSH until the launcher (itself node 0) has run mpirun over them; the
        # job succeeds when the launcher does.
        worker = copy.deepcopy(pod)
        worker["containers"][0].update(
            command=["/usr/sbin/sshd"],
            args=["-De", "-f", "/home/mpiuser/.sshd_config"],
            readinessProbe={"tcpSocket": {"port": MPI_SSH_PORT}, "initialDelaySeconds": 5},
        )
        launcher = _replicated_job("launcher", pod, trainer_step=True)
        launcher["dependsOn"] = [{"name": "node", "status": "Ready"}]
        jobset = {
            "network": {"publishNotReadyAddresses": True},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
            "replicatedJobs": [_replicated_job("node", worker, trainer_step=False), launcher],
        }
    else:
        ml_policy[framework] = {}
        jobset = {"replicatedJobs": [_replicated_job("node", pod, trainer_step=True)]}
    return {
        "mlPolicy": ml_policy,
        "podGroupPolicy": {"volcano": {}},
        "template": {
            "metadata": {"annotations": {QUEUE_ANNOTATION: DEFAULT_QUEUE}},
            "spec": jobset,
        },
    }


def runtime_frameworks(pool: NodePoolConfig) -> list[Framework]:
    """Runtimes a pool gets: PyTorch everywhere; MPI and JAX on GPU pools."""
    if pool.instance.accelerator_resource == GPU_RESOURCE:
        return ["torch", "mpi", "jax"]
    return ["torch"]


def trainer_values() -> dict[str, Any]:
    """Values of the kubeflow-trainer chart: CRDs and JobSet in, built-in runtimes out.

    The built-in runtimes are installed by a hook job that downloads kubectl at install time;
    the platform creates its own runtimes instead. The controller runs on the system nodes.
    """
    system = {"nodeSelector": SYSTEM_NODE_SELECTOR, "tolerations": [SYSTEM_TOLERATION]}
    return {
        "crds": {"enabled": True},
        "jobset": {"install": True},
        "runtimes": {"defaultEnabled": False},
        "manager": system,
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
    """Kubeflow Trainer and one runtime per framework and accelerator pool."""

    def __init__(
        self,
        name: str,
        *,
        trainer: TrainerConfig,
        pools: list[NodePoolConfig],
        region: str,
        shared_file_system: bool,
        protect: bool,
        volcano_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Install Trainer after Volcano and create the runtimes.

        Args:
            name: prefix of child resource names.
            trainer: validated trainer settings (images, huge pages).
            pools: accelerator pools; each gets its runtimes.
            region: AWS region (the Neuron image registry).
            shared_file_system: whether the stack has the Lustre file system (runtimes mount
                the namespace's ``shared-lustre`` claim).
            protect: protect the release. It always survives ``pulumi destroy`` of the stack
                (retain on delete): its CRDs carry every TrainJob and runtime.
            volcano_ready: Volcano must run before Trainer starts (it registers its PodGroup
                watch at start-up).
            kubernetes_provider: provider of the release and runtimes.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:Trainer", name, None, opts)
        self.runtimes: dict[str, k8s.apiextensions.CustomResource] = {}
        if not trainer.enabled:
            self.register_outputs({})
            return
        controller = release(
            "kubeflow-trainer",
            versions.TRAINER_CHART,
            namespace=NAMESPACE,
            values=trainer_values(),
            create_namespace=True,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=kubernetes_provider,
                depends_on=volcano_ready,
                protect=protect,
                retain_on_delete=True,
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
        after_trainer = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=[controller]
        )
        for pool in pools:
            for framework in runtime_frameworks(pool):
                runtime = runtime_name(framework, pool)
                spec = runtime_spec(
                    framework, pool, trainer=trainer, region=region,
                    shared_file_system=shared_file_system,
                )  # fmt: skip
                self.runtimes[runtime] = k8s.apiextensions.CustomResource(
                    f"{name}-{runtime}",
                    api_version=RUNTIME_API,
                    kind="ClusterTrainingRuntime",
                    metadata={
                        "name": runtime,
                        "labels": {FRAMEWORK_LABEL: framework, POOL_LABEL: pool.name},
                    },
                    spec=typing.cast(Any, spec),
                    opts=after_trainer,
                )
        self.register_outputs({})
