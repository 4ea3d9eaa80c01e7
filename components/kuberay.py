"""KubeRay: its operator on the system nodes, Volcano as its batch scheduler.

With ``batchScheduler.name: volcano`` the chart starts the operator with
``--batch-scheduler=volcano`` (ray-project/kuberay v1.7.0
helm-chart/kuberay-operator/templates/deployment.yaml) and grants it PodGroups
(templates/_helpers.tpl). The operator then builds one Volcano PodGroup ``ray-<name>-pg`` per
RayCluster or RayJob, in the queue of the object's ``volcano.sh/queue-name`` label, and gives its
pods ``schedulerName: volcano`` (ray-operator/controllers/ray/batchscheduler/volcano/
volcano_scheduler.go); the tenant admission holds that label to the team's queue
(:func:`components.tenancy.queue_ownership_policy`). ``batchScheduler.enabled`` stays false: it is
the deprecated flag, and the operator refuses to start with both (ray-operator/apis/config/
v1alpha1/config_utils.go, ValidateBatchSchedulerConfig).

The CRDs are the stack's own resources, applied from the chart's ``crds/`` at its tag, as JobSet's
are (:data:`components.versions.KUBERAY_CRDS_URLS`): Helm installs a chart's ``crds/`` once and
never upgrades it, so with the chart's copy a version bump would run a new operator on old CRDs.
The RayCluster CRD is too large for client-side apply's last-applied annotation; the Kubernetes
provider applies server-side.
"""

from __future__ import annotations

from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.catalog import NEURON_RESOURCE
from components.checkpoints import CHECKPOINT_VARIABLE, CheckpointLocation, checkpoint_directory
from components.config import NodePoolConfig
from components.config.pools import GENERAL_LUSTRE_POOL, GENERAL_POOL
from components.helm import release, with_system_placement
from components.node_pools import POOL_LABEL
from components.scheduling import RAY_QUEUE_LABEL, SCHEDULER_NAME
from components.storage.layout import TeamDirectory
from components.storage.model_store import model_store_environment
from components.tenancy import hardened_pod
from components.trainer import (
    fabric_variables,
    team_pod_spec,
    team_volumes,
)
from components.workloads import (
    node_resources,
    pool_workload_placement,
    shared_memory_volume,
)

NAMESPACE: Final = "kuberay-system"
RELEASE: Final = "kuberay-operator"
RAY_API: Final = "ray.io/v1"
QUEUE_LABEL: Final = RAY_QUEUE_LABEL
NEURON_CORES_RESOURCE: Final = "neuron_cores"
"""Ray's resource of NeuronCores. KubeRay declares it by itself only for pods that request
``aws.amazon.com/neuroncore`` (kuberay v1.7.0 ray-operator/controllers/ray/common/pod.go,
customAcceleratorToRayResourceMap); the platform's pods request whole devices
(``aws.amazon.com/neuron``, the resource the team quotas count), so worker groups declare it in
``rayStartParams``."""
HEAD_RESOURCES: Final = {"cpu": "4", "memory": "16Gi"}
"""The head's requests and limits: the GCS, the dashboard and the job's driver, no training."""
SUBMITTER_RESOURCES: Final = {"cpu": "500m", "memory": "1Gi"}
"""A RayJob submitter's requests and limits (``ray job submit`` and its log tail)."""


def operator_values() -> dict[str, Any]:
    """Values of the kuberay-operator chart: Volcano as batch scheduler, on the system nodes.

    Only ``batchScheduler.name`` is set (see the module's docstring for why not ``enabled``).
    The chart's defaults leave the operator without node selector or tolerations
    (helm-chart/kuberay-operator/values.yaml at v1.7.0), so it would wait for a Karpenter node
    while the atomic install times out.
    """
    return with_system_placement(
        versions.KUBERAY_OPERATOR_CHART,
        {"batchScheduler": {"enabled": False, "name": SCHEDULER_NAME}},
    )


class KubeRay(pulumi.ComponentResource):
    """The KubeRay operator and its CRDs."""

    def __init__(
        self,
        name: str,
        *,
        protect: bool,
        volcano_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Apply the CRDs, then install the operator after Volcano.

        Args:
            name: prefix of child resource names.
            protect: protect the CRDs and the release, and retain them on delete: the CRDs carry
                every RayCluster and RayJob. Unprotected (dev), switching Ray off uninstalls them.
            volcano_ready: Volcano must run first: the operator registers its PodGroup watch at
                start-up (volcano_scheduler.go, ConfigureReconciler).
            kubernetes_provider: provider of the CRDs and the release.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:KubeRay", name, None, opts)
        stateful = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, protect=protect, retain_on_delete=protect
        )
        self.crds = [
            k8s.yaml.v2.ConfigFile(
                f"{name}-crds-{kind}",
                file=url,
                opts=pulumi.ResourceOptions.merge(
                    stateful, pulumi.ResourceOptions(depends_on=volcano_ready)
                ),
            )
            for kind, url in zip(
                versions.KUBERAY_CRD_KINDS, versions.KUBERAY_CRDS_URLS, strict=True
            )
        ]
        self.operator = release(
            RELEASE,
            versions.KUBERAY_OPERATOR_CHART,
            namespace=NAMESPACE,
            values=operator_values(),
            create_namespace=True,
            skip_crds=True,
            opts=pulumi.ResourceOptions.merge(
                stateful, pulumi.ResourceOptions(depends_on=[*volcano_ready, *self.crds])
            ),
        )
        self.register_outputs({})


def ray_environment(
    pool: NodePoolConfig | None,
    *,
    team: str,
    job: str,
    checkpoints: CheckpointLocation | None,
) -> list[dict[str, Any]]:
    """Environment of a Ray pod: the fabric's variables and the job's checkpoint directory.

    ``CHECKPOINT_DIR`` is ``/fsx/<checkpoint path>/<team>/<job>``, as a TrainJob's is
    (:func:`components.checkpoints.checkpoint_environment`), but named after the RayJob: the
    cluster a RayJob makes has a generated name, new on every retry, and a retry must find the
    checkpoints of the last one. Ray Train takes it as ``RunConfig(storage_path=...)``.

    Args:
        pool: the worker group's pool; None for the head and the submitter.
        team: the team (its directories hold the checkpoints and the Neuron compile cache).
        job: the RayJob's name.
        checkpoints: where jobs checkpoint; None without the shared file system.
    """
    variables: dict[str, str] = {}
    if pool is not None:
        variables.update(fabric_variables(pool, team=team, checkpoints=checkpoints))
    if checkpoints is not None:
        variables[CHECKPOINT_VARIABLE] = f"{checkpoint_directory(checkpoints.path, team)}/{job}"
    return [{"name": name, "value": value} for name, value in variables.items()]


def _ray_pod(
    container: dict[str, Any],
    *,
    placement: dict[str, Any],
    volumes: list[dict[str, Any]],
    group_id: int | None,
) -> dict[str, Any]:
    """A hardened pod template of a Ray node in the team's namespace, Volcano-scheduled.

    The Trainer runtimes' team pod (:func:`components.trainer.team_pod_spec`); its
    ``schedulerName`` KubeRay sets too (volcano_scheduler.go, addSchedulerName), said here so
    the template is judged as the pod will be.
    """
    return {
        "spec": hardened_pod(
            team_pod_spec(container, placement=placement, volumes=volumes, group_id=group_id)
        )
    }


def worker_group_spec(
    pool: NodePoolConfig,
    *,
    team: str,
    job: str,
    image: str,
    replicas: int,
    checkpoints: CheckpointLocation | None,
    directories: list[TeamDirectory] | None = None,
    group_id: int | None = None,
    models: bool = False,
) -> dict[str, Any]:
    """A RayCluster worker group on ``pool``: one whole node per worker.

    Each worker is the pod a Trainer runtime runs on that pool (components/trainer.py,
    ``pod_spec``): every GPU or Neuron device, EFA interface and huge page of the node and the
    memory the node can give (components/workloads.py, ``node_resources``), ``/dev/shm`` in
    memory, the pool's selector and tolerations, the team's claim at ``/fsx`` and its gid as a
    supplemental group. ``minReplicas`` equals ``replicas``: the whole group is in the gang
    (docs/concepts/ray.md). A Trainium group declares its NeuronCores as Ray's ``neuron_cores``
    (:data:`NEURON_CORES_RESOURCE`).

    Args:
        pool: the accelerator pool.
        team: the team (namespace and queue).
        job: the RayJob's name (its checkpoint directory).
        image: the Ray image; its Ray release must be the cluster's ``rayVersion``.
        replicas: workers, one node each.
        checkpoints: where jobs checkpoint; None without the shared file system (or where the
            pool does not mount it).
        directories: the team's directories on the shared file system. Default none.
        group_id: the team's gid. Default None.
        models: mount the team's model store claims at ``/models`` and ``/models/shared``
            (:func:`components.trainer.team_volumes`). Default False.
    """
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [shared_memory_volume(pool)]
    lustre_directories = directories if checkpoints is not None and directories else []
    shared_volumes, shared_mounts = team_volumes(lustre_directories, models=models)
    volumes += shared_volumes
    mounts += shared_mounts
    environment = ray_environment(pool, team=team, job=job, checkpoints=checkpoints)
    if models:
        environment += model_store_environment()
    container = {
        "name": "ray-worker",
        "image": image,
        "env": environment,
        "resources": node_resources(pool),
        "volumeMounts": mounts,
    }
    start: dict[str, str] = {}
    if pool.instance.accelerator_resource == NEURON_RESOURCE:
        # KubeRay writes a resources map in single quotes (pod.go, addWellKnownAcceleratorResources)
        start["resources"] = f"'{{\"{NEURON_CORES_RESOURCE}\": {pool.instance.neuron_cores}}}'"
    return {
        "groupName": pool.name,
        "replicas": replicas,
        "minReplicas": replicas,
        "maxReplicas": replicas,
        "rayStartParams": start,
        "template": _ray_pod(
            container,
            placement=pool_workload_placement(pool),
            volumes=volumes,
            group_id=group_id,
        ),
    }


def _general_placement(mounted: bool) -> dict[str, Any]:
    """The head's and submitter's pool: general-lustre where they mount the team's claim."""
    return {"nodeSelector": {POOL_LABEL: GENERAL_LUSTRE_POOL if mounted else GENERAL_POOL}}


def head_group_spec(
    *,
    team: str,
    job: str,
    image: str,
    checkpoints: CheckpointLocation | None,
    directories: list[TeamDirectory] | None = None,
    group_id: int | None = None,
    models: bool = False,
) -> dict[str, Any]:
    """The head on a general pool: no accelerator, no Ray tasks (``num-cpus: 0``).

    The job's driver runs there and writes Ray Train's run state to ``storage_path``, so the
    head mounts the team's claim too and then runs on ``general-lustre``, the CPU pool of the
    file system's clients.

    Args:
        team: the team.
        job: the RayJob's name.
        image: the Ray image.
        checkpoints: where jobs checkpoint; None without the shared file system.
        directories: the team's directories on the shared file system. Default none.
        group_id: the team's gid. Default None.
        models: mount the team's model store claims at ``/models`` and ``/models/shared``
            (:func:`components.trainer.team_volumes`). Default False.
    """
    mounted = checkpoints is not None and bool(directories)
    volumes, mounts = team_volumes((directories or []) if mounted else [], models=models)
    environment = ray_environment(None, team=team, job=job, checkpoints=checkpoints)
    if models:
        environment += model_store_environment()
    container = {
        "name": "ray-head",
        "image": image,
        "env": environment,
        "resources": {"requests": dict(HEAD_RESOURCES), "limits": dict(HEAD_RESOURCES)},
        "volumeMounts": mounts,
    }
    return {
        "rayStartParams": {"num-cpus": "0"},
        "template": _ray_pod(
            container, placement=_general_placement(mounted), volumes=volumes, group_id=group_id
        ),
    }


def submitter_template(*, image: str, group_id: int | None) -> dict[str, Any]:
    """A RayJob's submitter pod (``K8sJobMode``): ``ray job submit`` on the general pool.

    KubeRay fills in the command (ray-operator/controllers/ray/common/job.go); its resources
    join the PodGroup's minResources but not its minMember (volcano_scheduler.go, handleRayJob).
    """
    container = {
        "name": "ray-job-submitter",
        "image": image,
        "resources": {"requests": dict(SUBMITTER_RESOURCES), "limits": dict(SUBMITTER_RESOURCES)},
    }
    template = _ray_pod(
        container, placement=_general_placement(False), volumes=[], group_id=group_id
    )
    template["spec"]["restartPolicy"] = "Never"
    return template


def ray_job(
    name: str,
    pool: NodePoolConfig,
    *,
    team: str,
    image: str,
    workers: int,
    entrypoint: str,
    checkpoints: CheckpointLocation | None,
    directories: list[TeamDirectory] | None = None,
    group_id: int | None = None,
    models: bool = False,
) -> dict[str, Any]:
    """A RayJob of ``team`` on ``pool``: its own RayCluster, gang-scheduled in the team queue.

    Args:
        name: the RayJob's name (and its checkpoint directory's).
        pool: the workers' pool.
        team: the team (namespace, queue).
        image: the Ray image (of release :data:`components.versions.RAY_VERSION`).
        workers: worker nodes.
        entrypoint: the driver's command.
        checkpoints: where jobs checkpoint; None without the shared file system.
        directories: the team's directories on the shared file system. Default none.
        group_id: the team's gid. Default None.
        models: mount the team's model store claims at ``/models`` and ``/models/shared``
            (:func:`components.trainer.team_volumes`). Default False.
    """
    return {
        "apiVersion": RAY_API,
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": team, "labels": {QUEUE_LABEL: team}},
        "spec": {
            "entrypoint": entrypoint,
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": 3600,
            "submitterPodTemplate": submitter_template(image=image, group_id=group_id),
            "rayClusterSpec": {
                "rayVersion": versions.RAY_VERSION,
                "headGroupSpec": head_group_spec(
                    team=team,
                    job=name,
                    image=image,
                    checkpoints=checkpoints,
                    directories=directories,
                    group_id=group_id,
                    models=models,
                ),
                "workerGroupSpecs": [
                    worker_group_spec(
                        pool,
                        team=team,
                        job=name,
                        image=image,
                        replicas=workers,
                        checkpoints=checkpoints,
                        directories=directories,
                        group_id=group_id,
                        models=models,
                    )
                ],
            },
        },
    }
