"""KubeRay's decisions about a RayCluster or RayJob: the operator's flags and the Volcano PodGroup.

Modelled on ray-project/kuberay v1.7.0; each function cites the file it mirrors.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from synth.jobs.view import StackView, labels_of, name_of, quantity

RELEASE: Final = "kuberay-operator"
QUEUE_LABEL: Final = "volcano.sh/queue-name"
PRIORITY_LABEL: Final = "ray.io/priority-class-name"
ORIGIN_KIND_LABEL: Final = "ray.io/originated-from-crd"
ORIGIN_NAME_LABEL: Final = "ray.io/originated-from-cr-name"
DEFAULT_SUBMITTER_REQUESTS: Final = {"cpu": Decimal("0.5"), "memory": Decimal(200 * 1024 * 1024)}
"""The requests of KubeRay's default submitter container (ray-operator/controllers/ray/common/
job.go, GetDefaultSubmitterContainer: requests 500m and 200Mi, limits 1 and 1Gi)."""


@dataclass(frozen=True)
class PodGroupShape:
    """The Volcano PodGroup KubeRay builds for a RayCluster or RayJob."""

    name: str
    queue: str | None
    """``spec.queue``: the object's ``volcano.sh/queue-name`` label (None: Volcano's default)."""
    min_member: int
    min_resources: dict[str, Decimal]
    """Base units: cores, bytes, counts."""
    priority_class: str | None


def operator_problems(view: StackView) -> list[str]:
    """Why the operator in the view does not gang-schedule Ray objects through Volcano.

    The chart passes ``--batch-scheduler=<batchScheduler.name>`` and, with
    ``batchScheduler.enabled``, ``--enable-batch-scheduler`` (ray-project/kuberay v1.7.0
    helm-chart/kuberay-operator/templates/deployment.yaml); the operator refuses to start with
    both (ray-operator/apis/config/v1alpha1/config_utils.go, ValidateBatchSchedulerConfig).

    Args:
        view: the stack.
    """
    values = view.values(RELEASE)
    if values is None:
        return ["KubeRay is not installed: nothing reconciles RayClusters or RayJobs"]
    batch = values.get("batchScheduler") or {}
    name = batch.get("name")
    if name != "volcano":
        return [
            f"the KubeRay operator runs without --batch-scheduler=volcano (batchScheduler.name "
            f"{name!r}): it builds no PodGroup, so the head and workers are scheduled one by one "
            "outside the team's queue, with no gang"
        ]
    if batch.get("enabled"):
        return [
            "the KubeRay chart sets both batchScheduler.enabled and batchScheduler.name: the "
            "operator refuses to start (config_utils.go, ValidateBatchSchedulerConfig)"
        ]
    return []


def pod_resource(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """A pod template's resources as KubeRay sums them.

    Each container's requests, its limits where it requests nothing of a resource; init
    containers ignored (ray-operator/controllers/ray/utils/util.go, CalculatePodResource).
    """
    total: dict[str, Decimal] = {}
    for container in pod.get("containers") or []:
        resources = container.get("resources") or {}
        amounts = {
            **{str(k): quantity(v) for k, v in (resources.get("limits") or {}).items()},
            **{str(k): quantity(v) for k, v in (resources.get("requests") or {}).items()},
        }
        for name, amount in amounts.items():
            total[name] = total.get(name, Decimal(0)) + amount
    return total


def _pod_spec(template: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (template or {}).get("spec") or {}


def _desired(group: Mapping[str, Any]) -> int:
    """Pods of a worker group (util.go, GetWorkerGroupDesiredReplicas).

    ``replicas`` held to ``[minReplicas, maxReplicas]`` (missing replicas: minReplicas), times
    ``numOfHosts``; 0 for a suspended group.
    """
    if group.get("suspend"):
        return 0
    low = int(group.get("minReplicas", 0))
    high = int(group.get("maxReplicas", 2**31 - 1))
    replicas = group.get("replicas")
    count = low if replicas is None or int(replicas) < low else min(int(replicas), high)
    return count * int(group.get("numOfHosts", 1))


def cluster_params(cluster: Mapping[str, Any]) -> tuple[int, dict[str, Decimal]]:
    """(minMember, minResources) of a RayCluster spec (volcano_scheduler.go).

    calculatePodGroupParams: without ``enableInTreeAutoscaling``, the head plus every worker
    group's desired pods, and the head's resources plus each group's pods times its unclamped
    ``replicas`` times ``numOfHosts`` (util.go, CalculateDesiredReplicas and
    CalculateDesiredResources); with it, the head plus ``minReplicas`` x ``numOfHosts`` per
    group (CalculateMinReplicas, CalculateMinResources). Suspended groups count nothing.

    Args:
        cluster: a RayCluster's ``spec`` (or a RayJob's ``rayClusterSpec``).
    """
    autoscaling = bool(cluster.get("enableInTreeAutoscaling"))
    head = (cluster.get("headGroupSpec") or {}).get("template")
    resources = pod_resource(_pod_spec(head))
    members = 1
    for group in cluster.get("workerGroupSpecs") or []:
        if group.get("suspend"):
            continue
        hosts = int(group.get("numOfHosts", 1))
        if autoscaling:
            pods = int(group.get("minReplicas", 0)) * hosts
            members += pods
        else:
            members += _desired(group)
            pods = int(group.get("replicas", 0)) * hosts
        for name, amount in pod_resource(_pod_spec(group.get("template"))).items():
            resources[name] = resources.get(name, Decimal(0)) + amount * pods
    return members, resources


def submitter_resource(job_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """What a RayJob's submitter adds to minResources (volcano_scheduler.go).

    getSubmitterResource: its pod template's (or KubeRay's default container's) in
    ``K8sJobMode``, the default container's in ``SidecarMode``, nothing in ``HTTPMode``.

    Args:
        job_spec: the RayJob's ``spec``; ``submissionMode`` defaults to ``K8sJobMode`` (the CRD's
            default).
    """
    mode = job_spec.get("submissionMode", "K8sJobMode")
    if mode == "K8sJobMode" and job_spec.get("submitterPodTemplate"):
        return pod_resource(_pod_spec(job_spec["submitterPodTemplate"]))
    if mode in ("K8sJobMode", "SidecarMode"):
        return dict(DEFAULT_SUBMITTER_REQUESTS)
    return {}


def pod_group(obj: Mapping[str, Any]) -> PodGroupShape | None:
    """The PodGroup KubeRay builds for a RayCluster or RayJob, or None where it builds none.

    ray-project/kuberay v1.7.0 ray-operator/controllers/ray/batchscheduler/volcano/
    volcano_scheduler.go: ``ray-<name>-pg``; a RayCluster's from its spec (handleRayCluster),
    none for the cluster a RayJob made (label ``ray.io/originated-from-crd: RayJob``: the
    RayJob's PodGroup holds it); a RayJob's from its ``rayClusterSpec`` with the submitter's
    resources added to minResources but not counted in minMember (handleRayJob), none for a
    RayJob without ``rayClusterSpec`` (one on an existing cluster: an error on every
    reconcile). The queue and priority class come from the object's labels (createPodGroup).

    Args:
        obj: the RayCluster or RayJob.
    """
    labels = labels_of(obj)
    spec = obj.get("spec") or {}
    if obj.get("kind") == "RayCluster":
        if labels.get(ORIGIN_KIND_LABEL) == "RayJob":
            return None
        members, resources = cluster_params(spec)
    elif obj.get("kind") == "RayJob":
        if not spec.get("rayClusterSpec"):
            return None
        members, resources = cluster_params(spec["rayClusterSpec"])
        for name, amount in submitter_resource(spec).items():
            resources[name] = resources.get(name, Decimal(0)) + amount
    else:
        return None
    return PodGroupShape(
        name=f"ray-{name_of(obj)}-pg",
        queue=labels.get(QUEUE_LABEL),
        min_member=members,
        min_resources=resources,
        priority_class=labels.get(PRIORITY_LABEL),
    )


def cluster_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """A RayCluster's ``spec`` or a RayJob's ``rayClusterSpec`` ({} where none)."""
    spec = obj.get("spec") or {}
    return (spec.get("rayClusterSpec") or {}) if obj.get("kind") == "RayJob" else spec


def with_workers(obj: Mapping[str, Any], group: int, workers: int) -> dict[str, Any]:
    """A copy of ``obj`` whose worker group ``group`` has ``workers`` replicas, min and max.

    Args:
        obj: a RayCluster or RayJob.
        group: the worker group's index.
        workers: its replicas.
    """
    scaled = copy.deepcopy(dict(obj))
    target = cluster_spec(scaled)["workerGroupSpecs"][group]
    target.update({"replicas": workers, "minReplicas": workers, "maxReplicas": workers})
    return scaled


def pods(obj: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], int]]:
    """(role, pod spec, count) of every pod a RayCluster or RayJob makes at its desired size.

    The head, each worker group's desired pods (:func:`_desired`) and, for a RayJob in
    ``K8sJobMode``, its submitter (its template's, or KubeRay's default container).
    """
    cluster = cluster_spec(obj)
    found: list[tuple[str, Mapping[str, Any], int]] = [
        ("head", _pod_spec((cluster.get("headGroupSpec") or {}).get("template")), 1)
    ]
    for group in cluster.get("workerGroupSpecs") or []:
        found.append(
            (
                f"worker group {group.get('groupName')}",
                _pod_spec(group.get("template")),
                _desired(group),
            )
        )
    spec = obj.get("spec") or {}
    if obj.get("kind") == "RayJob" and spec.get("submissionMode", "K8sJobMode") == "K8sJobMode":
        template = spec.get("submitterPodTemplate")
        submitter = (
            _pod_spec(template)
            if template
            else {
                "containers": [
                    {
                        "name": "ray-job-submitter",
                        "resources": {
                            "requests": {"cpu": "500m", "memory": "200Mi"},
                            "limits": {"cpu": "1", "memory": "1Gi"},
                        },
                    }
                ]
            }
        )
        found.append(("submitter", submitter, 1))
    return found
