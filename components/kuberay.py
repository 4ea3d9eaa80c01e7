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

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.catalog import NEURON_RESOURCE
from components.checkpoints import CheckpointLocation, checkpoint_environment
from components.config import CONFIG_KEY, ConfigProblem, NodePoolConfig, PlatformConfig
from components.config.pools import GENERAL_LUSTRE_POOL, GENERAL_POOL
from components.config.ray import RayImagesConfig
from components.first_step import (
    FIRST_STEP_EXPORTER_MEMORY_MIB,
    first_step_labels,
    with_first_step_exporter,
)
from components.helm import release, with_system_placement
from components.node_pools import POOL_LABEL
from components.scheduling import RAY_QUEUE_LABEL, SCHEDULER_NAME, STANDARD_PRIORITY_CLASS
from components.storage.layout import TeamDirectory
from components.storage.model_store import model_store_environment
from components.tenancy import ControllerIngress, hardened_pod
from components.tenant_api import RAY_PRIORITY_LABEL
from components.trainer import (
    fabric_variables,
    team_pod_spec,
    team_volumes,
)
from components.workloads import (
    node_resources,
    pool_workload_placement,
    shared_memory_volume,
    whole_node_memory_mib,
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
DO_NOT_DISRUPT: Final = {"karpenter.sh/do-not-disrupt": "true"}
"""The head's and submitter's annotation: Karpenter neither consolidates nor drift-replaces the
node under them and its drain does not evict them (kubernetes-sigs/karpenter v1.14.1
pkg/utils/pod/scheduling.go, IsEvictable and IsDisruptable; docs/concepts/ray.md says what
``expireAfter`` still does). The general pools consolidate WhenEmptyOrUnderutilized, and a head
moved elsewhere takes the job's driver and the cluster's state with it."""
TTL_AFTER_FINISHED: Final = 0
"""Seconds KubeRay keeps a finished RayJob's cluster (``ttlSecondsAfterFinished``): none. The
cluster holds its nodes, quota and queue share until it is deleted (kuberay v1.7.0
ray-operator/controllers/ray/rayjob_controller.go, handleShutdownAfterJobFinishes); the
submitter Job and its finished pod stay (deleteClusterResources deletes the cluster only), its
log as long as its node (docs/how-to/run-raytrain.md, "Logs and the dashboard")."""
HEAD_CPUS: Final = 4
HEAD_MEMORY_GIB: Final = 16
HEAD_RESOURCES: Final = {"cpu": str(HEAD_CPUS), "memory": f"{HEAD_MEMORY_GIB}Gi"}
"""The head's requests and limits: the GCS, the dashboard and the job's driver, no training."""
SUBMITTER_RESOURCES: Final = {"cpu": "500m", "memory": "1Gi"}
"""A RayJob submitter's requests and limits (``ray job submit`` and its log tail)."""


DASHBOARD_PORT: Final = 8265
"""The Ray head's dashboard port, KubeRay's default (kuberay v1.7.0
ray-operator/controllers/ray/utils/constant.go, DefaultDashboardPort)."""
HEAD_POD_LABELS: Final = {"ray.io/node-type": "head"}
"""The label KubeRay gives every head pod (constant.go, RayNodeTypeLabelKey; common/pod.go,
labelPod), which a member cannot override (labelPod keeps KubeRay's own keys)."""
OPERATOR_POD_LABELS: Final = {
    "app.kubernetes.io/name": "kuberay-operator",
    "app.kubernetes.io/instance": RELEASE,
}
"""The operator pod's labels: the chart's ``nameOverride`` and the release's name (kuberay v1.7.0
helm-chart/kuberay-operator/templates/deployment.yaml, spec.template.metadata.labels;
values.yaml, nameOverride: kuberay-operator)."""
OPERATOR_INGRESS: Final = ControllerIngress(
    name="allow-kuberay-operator",
    pods={"matchLabels": dict(HEAD_POD_LABELS)},
    namespace=NAMESPACE,
    controller={"matchLabels": dict(OPERATOR_POD_LABELS)},
    ports=(DASHBOARD_PORT,),
    why="the KubeRay operator submits, follows and stops a RayJob's job and reads a "
    "RayService's applications through the head's dashboard HTTP API, at the head Service's "
    "port named dashboard (kuberay v1.7.0 ray-operator/controllers/ray/rayjob_controller.go and "
    "rayservice_controller.go, FetchHeadServiceURL with DashboardPortName; "
    "utils/dashboardclient/dashboard_httpclient.go)",
)
"""The operator's way into team namespaces (:func:`components.tenancy.team_network_policies`)."""
RAY_POD_KINDS: Final = ("RayCluster", "RayJob", "RayService")
"""KubeRay's kinds that carry pod templates (ray.io/v1)."""
CLUSTER_SPEC_FIELDS: Final = {
    "RayCluster": None,
    "RayJob": "rayClusterSpec",
    "RayService": "rayClusterConfig",
}
"""Where each kind holds its RayClusterSpec: a RayCluster's spec is one; a RayJob's is
``spec.rayClusterSpec`` and a RayService's ``spec.rayClusterConfig`` (kuberay v1.7.0
ray-operator/apis/ray/v1/rayjob_types.go, rayservice_types.go)."""


def ray_cluster_spec(kind: str, spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The RayClusterSpec of a RayCluster, RayJob or RayService (``{}`` where it has none).

    Args:
        kind: the object's kind.
        spec: its ``spec``.
    """
    if kind not in CLUSTER_SPEC_FIELDS:
        return {}
    field = CLUSTER_SPEC_FIELDS[kind]
    found = spec if field is None else spec.get(field)
    return found if isinstance(found, Mapping) else {}


def ray_pod_templates(
    kind: str, spec: Mapping[str, Any]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(where, pod template) of every pod template of a Ray object: the ones pods come from.

    The head's (``headGroupSpec.template``), each worker group's
    (``workerGroupSpecs[].template``) of the object's RayClusterSpec (:func:`ray_cluster_spec`),
    and a RayJob's ``submitterPodTemplate``. KubeRay makes each head and worker pod from its
    template (ray-operator/controllers/ray/common/pod.go, DefaultHeadPodTemplate and
    DefaultWorkerPodTemplate) and the submitter Job's pod from the submitter's (common/job.go).
    One walk for the policies, the admission rules' tests and the scanner's pods.

    Args:
        kind: the object's kind (any other than :data:`RAY_POD_KINDS` has none).
        spec: its ``spec``.
    """
    cluster = ray_cluster_spec(kind, spec)
    prefix = "" if CLUSTER_SPEC_FIELDS.get(kind) is None else f"{CLUSTER_SPEC_FIELDS[kind]}."
    head = (cluster.get("headGroupSpec") or {}).get("template")
    if isinstance(head, Mapping):
        yield f"{prefix}headGroupSpec", head
    for index, group in enumerate(cluster.get("workerGroupSpecs") or []):
        template = (group or {}).get("template")
        if isinstance(template, Mapping):
            yield f"{prefix}workerGroupSpecs[{group.get('groupName', index)}]", template
    submitter = spec.get("submitterPodTemplate") if kind == "RayJob" else None
    if isinstance(submitter, Mapping):
        yield "submitterPodTemplate", submitter


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


@dataclass(frozen=True)
class StandingCluster:
    """A team's standing RayCluster and what it waits for in the team's namespace."""

    body: dict[str, Any]
    """The RayCluster (:func:`ray_cluster`)."""
    after: list[pulumi.Resource]
    """The team's namespace and the claims its pods mount."""


class KubeRay(pulumi.ComponentResource):
    """The KubeRay operator and its CRDs."""

    def __init__(
        self,
        name: str,
        *,
        protect: bool,
        volcano_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        clusters: list[StandingCluster] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Apply the CRDs, then install the operator after Volcano, then the teams' clusters.

        Args:
            name: prefix of child resource names.
            protect: protect the CRDs and the release, and retain them on delete: the CRDs carry
                every RayCluster and RayJob. Unprotected (dev), switching Ray off uninstalls them.
            volcano_ready: Volcano must run first: the operator registers its PodGroup watch at
                start-up (volcano_scheduler.go, ConfigureReconciler).
            kubernetes_provider: provider of the CRDs and the release.
            clusters: the teams' standing RayClusters (``teams[].ray.clusters``), each made after
                the CRDs, the operator and what it needs in its team's namespace. Default none.
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
        self.clusters: dict[tuple[str, str], k8s.apiextensions.CustomResource] = {}
        for standing in clusters or []:
            body = standing.body
            team, cluster = body["metadata"]["namespace"], body["metadata"]["name"]
            self.clusters[(team, cluster)] = k8s.apiextensions.CustomResource(
                f"{name}-{team}-{cluster}",
                api_version=body["apiVersion"],
                kind=body["kind"],
                metadata=body["metadata"],
                spec=body["spec"],
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=kubernetes_provider,
                    depends_on=[*self.crds, self.operator, *standing.after],
                ),
            )
        self.register_outputs({})


def ray_image(images: RayImagesConfig, pool: NodePoolConfig) -> str:
    """The image of a cluster whose workers run on ``pool``: its head and submitter's too.

    The pool's accelerator picks it (``ray.images.gpu`` or ``.neuron``); the head runs the
    workers' image so the driver has the workers' Ray and libraries. Config has checked it
    against the pool's drivers and its tag against ``rayVersion`` (components/config/ray.py).

    Args:
        images: the stack's ``ray.images``.
        pool: the workers' pool.

    Raises:
        ValueError: a Trainium pool without ``ray.images.neuron`` (config refuses that stack).
    """
    image = images.for_accelerator(pool.instance.accelerator)
    if image is None:
        raise ValueError(f"ray.images has no image for pool {pool.name} (config requires one)")
    return image


def ray_environment(
    pool: NodePoolConfig | None,
    *,
    team: str,
    job: str,
    checkpoints: CheckpointLocation | None,
) -> list[dict[str, Any]]:
    """Environment of a Ray pod: the fabric's variables and the job's checkpoint variables.

    ``CHECKPOINT_DIR`` (``/fsx/<checkpoint path>/<team>/<job>``) and ``CHECKPOINT_S3_URI``
    (where the export copies it, which ``fsx-checkpoint commit`` checks) are a TrainJob's
    (:func:`components.checkpoints.checkpoint_environment`, one builder for both), but named
    after the RayJob: the cluster a RayJob makes has a generated name, new on every retry, and a
    retry must find the checkpoints of the last one. Ray Train takes the directory as
    ``RunConfig(storage_path=..., name=...)``.

    Args:
        pool: the worker group's pool; None for the head and the submitter.
        team: the team (its directories hold the checkpoints and the Neuron compile cache).
        job: the RayJob's name.
        checkpoints: where jobs checkpoint; None without the shared file system.
    """
    variables = fabric_variables(pool, team=team, checkpoints=checkpoints) if pool else {}
    environment: list[dict[str, Any]] = [
        {"name": name, "value": value} for name, value in variables.items()
    ]
    if checkpoints is not None:
        environment += checkpoint_environment(checkpoints.path, team, checkpoints.s3_uri, job=job)
    return environment


def _ray_pod(
    container: dict[str, Any],
    *,
    placement: dict[str, Any],
    volumes: list[dict[str, Any]],
    group_id: int | None,
    pinned: bool = False,
    first_step: bool = False,
) -> dict[str, Any]:
    """A hardened pod template of a Ray node in the team's namespace, Volcano-scheduled.

    The Trainer runtimes' team pod (:func:`components.trainer.team_pod_spec`); its
    ``schedulerName`` KubeRay sets too (volcano_scheduler.go, addSchedulerName), said here so
    the template is judged as the pod will be. ``pinned`` (the head and the submitter) adds
    :data:`DO_NOT_DISRUPT`; ``first_step`` (the head and the workers, where the job's
    processes run) the first-step exporter and its label
    (:func:`components.first_step.with_first_step_exporter`).
    """
    spec = team_pod_spec(container, placement=placement, volumes=volumes, group_id=group_id)
    metadata: dict[str, Any] = {}
    if first_step:
        spec = with_first_step_exporter(spec, container=container["name"])
        metadata["labels"] = first_step_labels()
    if pinned:
        metadata["annotations"] = dict(DO_NOT_DISRUPT)
    template: dict[str, Any] = {"spec": hardened_pod(spec)}
    if metadata:
        template = {"metadata": metadata, **template}
    return template


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
    publishes_models: bool = False,
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
        publishes_models: the team publishes models: ``/models/shared`` read-write.
            Default False.
    """
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [shared_memory_volume(pool)]
    lustre_directories = directories if checkpoints is not None and directories else []
    shared_volumes, shared_mounts = team_volumes(
        lustre_directories, models=models, publishes_models=publishes_models
    )
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
            first_step=True,
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
    publishes_models: bool = False,
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
        publishes_models: the team publishes models: ``/models/shared`` read-write.
            Default False.
    """
    mounted = checkpoints is not None and bool(directories)
    volumes, mounts = team_volumes(
        (directories or []) if mounted else [], models=models, publishes_models=publishes_models
    )
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
            container,
            placement=_general_placement(mounted),
            volumes=volumes,
            group_id=group_id,
            pinned=True,
            first_step=True,
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
        container, placement=_general_placement(False), volumes=[], group_id=group_id, pinned=True
    )
    template["spec"]["restartPolicy"] = "Never"
    return template


def gang_labels(team: str) -> dict[str, str]:
    """Labels of a RayJob or RayCluster: the team's queue and the pods' priority class.

    KubeRay reads both into the PodGroup (``spec.queue``, ``spec.priorityClassName``: kuberay
    v1.7.0 ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go,
    createPodGroup) and copies them onto the pods (AddMetadataToChildResource). Without the
    priority label the gang has Volcano priority 0 whatever its pods say. The priority is
    :data:`components.scheduling.STANDARD_PRIORITY_CLASS`, the class
    :func:`components.trainer.team_pod_spec` gives the pods.

    Args:
        team: the team (its queue's name).
    """
    return {QUEUE_LABEL: team, RAY_PRIORITY_LABEL: STANDARD_PRIORITY_CLASS}


def _cluster_spec(
    name: str,
    pool: NodePoolConfig,
    *,
    team: str,
    image: str,
    workers: int,
    checkpoints: CheckpointLocation | None,
    directories: list[TeamDirectory] | None,
    group_id: int | None,
    models: bool,
    publishes_models: bool = False,
) -> dict[str, Any]:
    """A RayClusterSpec: the head and one whole-node worker group on ``pool``.

    The head (:func:`head_group_spec`) and the workers (:func:`worker_group_spec`) of a
    RayJob's cluster or a standing cluster; the arguments are :func:`ray_cluster`'s.
    """
    return {
        "rayVersion": versions.RAY_VERSION,
        "headGroupSpec": head_group_spec(
            team=team, job=name, image=image, checkpoints=checkpoints,
            directories=directories, group_id=group_id, models=models,
            publishes_models=publishes_models,
        ),
        "workerGroupSpecs": [
            worker_group_spec(
                pool, team=team, job=name, image=image, replicas=workers,
                checkpoints=checkpoints, directories=directories, group_id=group_id,
                models=models, publishes_models=publishes_models,
            )
        ],
    }  # fmt: skip


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
    publishes_models: bool = False,
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
        publishes_models: the team publishes models: ``/models/shared`` read-write.
            Default False.
    """
    return {
        "apiVersion": RAY_API,
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": team, "labels": gang_labels(team)},
        "spec": {
            "entrypoint": entrypoint,
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED,
            "submitterPodTemplate": submitter_template(image=image, group_id=group_id),
            "rayClusterSpec": _cluster_spec(
                name,
                pool,
                team=team,
                image=image,
                workers=workers,
                checkpoints=checkpoints,
                directories=directories,
                group_id=group_id,
                models=models,
                publishes_models=publishes_models,
            ),
        },
    }


def ray_cluster(
    name: str,
    pool: NodePoolConfig,
    *,
    team: str,
    image: str,
    workers: int,
    checkpoints: CheckpointLocation | None,
    directories: list[TeamDirectory] | None = None,
    group_id: int | None = None,
    models: bool = False,
    publishes_models: bool = False,
) -> dict[str, Any]:
    """A standing RayCluster of ``team`` on ``pool``, gang-scheduled in the team queue.

    The cluster a RayJob makes, without the job: the head on a general pool and one worker
    group of whole nodes, ``minReplicas`` = ``replicas`` = ``maxReplicas`` and no autoscaler,
    so KubeRay's PodGroup ``ray-<name>-pg`` asks for the head and every worker at once
    (volcano_scheduler.go, handleRayCluster). ``CHECKPOINT_DIR`` is named after the cluster.

    Args:
        name: the RayCluster's name (and its checkpoint directory's).
        pool: the workers' pool.
        team: the team (namespace, queue).
        image: the Ray image of the pool (:func:`ray_image`), the head's too.
        workers: worker nodes.
        checkpoints: where jobs checkpoint; None without the shared file system (or where the
            pool does not mount it).
        directories: the team's directories on the shared file system. Default none.
        group_id: the team's gid. Default None.
        models: mount the team's model store claims at ``/models`` and ``/models/shared``
            (:mod:`components.storage.model_store`). Default false.
        publishes_models: the team publishes models: ``/models/shared`` read-write.
            Default False.
    """
    return {
        "apiVersion": RAY_API,
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": team, "labels": gang_labels(team)},
        "spec": {
            # KubeRay recreates every pod when the spec changes only with Recreate (kuberay
            # v1.7.0 ray-operator/controllers/ray/raycluster_controller.go,
            # shouldRecreatePodsForUpgrade); a RayJob's cluster may not set it
            # (utils/validation.go, ValidateRayClusterUpgradeOptions).
            "upgradeStrategy": {"type": "Recreate"},
            **_cluster_spec(
                name,
                pool,
                team=team,
                image=image,
                workers=workers,
                checkpoints=checkpoints,
                directories=directories,
                group_id=group_id,
                models=models,
                publishes_models=publishes_models,
            ),
        },
    }


def standing_quota_problems(config: PlatformConfig) -> list[ConfigProblem]:
    """A team's standing Ray clusters must fit the CPU and memory quota it states.

    Where ``quota.cpu`` or ``quota.memoryGiB`` is set, the team's standing clusters together
    ask for at least their heads' (:data:`HEAD_CPUS`, :data:`HEAD_MEMORY_GIB`) and their
    workers' requests (each a whole node's memory, and on Trainium a CPU per NeuronCore; a GPU
    worker's CPU request is the namespace's LimitRange default, left out here, so this refuses
    only what can never fit). Past the quota, the API server refuses the pods past it and the
    gang never forms. Accelerators and EFA are config's own check
    (:func:`components.config.ray.ray_cluster_problems`).

    Args:
        config: the parsed platform.
    """
    pools = {pool.name: pool for pool in config.node_pools}
    problems: list[ConfigProblem] = []
    for index, team in enumerate(config.teams):
        clusters = [c for c in team.ray.clusters if c.pool in pools] if config.ray.enabled else []
        if not clusters:
            continue
        cpus = sum(
            HEAD_CPUS
            + c.workers
            * (
                pools[c.pool].instance.neuron_cores
                if pools[c.pool].instance.accelerator_resource == NEURON_RESOURCE
                else 0
            )
            for c in clusters
        )
        # each head and worker also runs the first-step exporter, whose requests count
        memory_mib = sum(
            HEAD_MEMORY_GIB * 1024
            + c.workers * whole_node_memory_mib(pools[c.pool])
            + (1 + c.workers) * FIRST_STEP_EXPORTER_MEMORY_MIB
            for c in clusters
        )
        where = f"{CONFIG_KEY}.teams[{index}].quota"
        names = ", ".join(c.name for c in clusters)
        if team.quota.cpu is not None and cpus > team.quota.cpu:
            problems.append(
                ConfigProblem(
                    f"{where}.cpu",
                    team.quota.cpu,
                    f"at least {cpus}: the standing Ray clusters {names} request that much "
                    f"(each head {HEAD_CPUS}, each Trainium worker a CPU per NeuronCore)",
                )
            )
        if team.quota.memory_gib is not None and memory_mib > team.quota.memory_gib * 1024:
            problems.append(
                ConfigProblem(
                    f"{where}.memoryGiB",
                    team.quota.memory_gib,
                    f"at least {-(-memory_mib // 1024)}: the standing Ray clusters {names} "
                    f"request that much (each head {HEAD_MEMORY_GIB} GiB, each worker its "
                    "node's memory)",
                )
            )
    return problems
