"""Volcano: gang scheduling, the scheduler configuration, priority classes and team queues.

Scheduler choice: the ``capacity`` plugin, not ``proportion``. Teams state their shares as
absolute amounts of accelerators (``deserved`` and ``guarantee`` in config), which ``capacity``
honours as written, lending idle capacity and reclaiming it (the ``reclaim`` action) when the
owner needs it back; ``proportion`` ignores ``deserved`` and derives shares from weights alone.

The capacity plugin runs with ``enableHierarchy`` although the queues are flat (each team's
queue under ``root``). Without it a queue may use ``total - every queue's guarantee + its own
guarantee``, where ``total`` is what the nodes that exist now hold (volcano v1.15.1
pkg/scheduler/plugins/capacity/capacity.go, buildQueueAttrs): on a Karpenter pool that starts
at zero, a queue without a guarantee, or next to others' guarantees, can never admit the job
whose pods would make Karpenter add the nodes. With hierarchy, ``root`` with no capability is
unbounded for every resource some node offers (buildHierarchicalQueueAttrs), so once the first
node with the accelerator registers (Volcano marks the gang's pods Unschedulable, so Karpenter
adds nodes for them whatever the queue says) a queue is bounded by its own capability; the
pools' NodePool limits bound the whole. The cost: a guarantee no longer holds idle nodes back
from other queues; it protects what the team runs from reclaim, and reclaim gives it back.
"""

from __future__ import annotations

import typing
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components import versions
from components.admission import enforced_policy
from components.config import AcceleratorAmounts, TeamConfig
from components.helm import release, with_system_placement
from components.tenant_api import LEAF_QUEUE_POLICY, leaf_queue_policy, non_leaf_queues

NAMESPACE: Final = "volcano-system"
QUEUE_API: Final = "scheduling.volcano.sh/v1beta1"
SCHEDULER_NAME: Final = "volcano"
QUEUE_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
RAY_QUEUE_LABEL: Final = "volcano.sh/queue-name"
"""The label of a RayCluster or RayJob whose value KubeRay gives the PodGroup it builds as its
queue (kuberay v1.7.0 ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go,
QueueNameLabelKey)."""
# Priorities order pending jobs (Volcano's priority plugin); they never evict running pods:
# preempting one worker of a gang kills the whole job, so the scheduler runs no preempt action
# and the classes say preemptionPolicy: Never. Queues take back what they lent (reclaim).
STANDARD_PRIORITY_CLASS: Final = "training-standard"
LOW_PRIORITY_CLASS: Final = "training-low"
PRIORITY_CLASSES: Final[dict[str, tuple[int, str]]] = {
    "training-critical": (100000, "Deadline-bound training; scheduled before other jobs."),
    STANDARD_PRIORITY_CLASS: (10000, "Ordinary training jobs."),
    LOW_PRIORITY_CLASS: (1000, "Experiments and sweeps; scheduled when nothing else waits."),
}


def scheduler_config() -> dict[str, Any]:
    """volcano-scheduler.conf: gang scheduling with capacity-based queues and reclaim."""
    return {
        "actions": "enqueue, allocate, backfill, reclaim",
        "tiers": [
            {
                "plugins": [
                    {"name": "priority"},
                    {"name": "gang", "enablePreemptable": False},
                    {"name": "conformance"},
                ]
            },
            {
                "plugins": [
                    {"name": "drf", "enablePreemptable": False},
                    {"name": "predicates"},
                    {"name": "capacity", "enableHierarchy": True},
                    {"name": "nodeorder"},
                    {"name": "binpack"},
                ]
            },
        ],
    }


def volcano_values() -> dict[str, Any]:
    """Values of the volcano chart: our scheduler config, controllers on the system nodes."""
    return with_system_placement(
        versions.VOLCANO_CHART,
        {
            "custom": {
                "scheduler_config_override": yaml.safe_dump(scheduler_config(), sort_keys=False),
                # The scheduler's and controllers' metrics Services (ports 8080, 8081), which
                # the metrics stack scrapes (components/observability/sources.py); on by default,
                # stated so a chart bump cannot turn them off. metrics_enable would install a
                # Prometheus, kube-state-metrics and Grafana of Volcano's own (volcano v1.15.1
                # installer/helm/chart/volcano/templates/prometheus.yaml): off.
                "scheduler_metrics_enable": True,
                "controller_metrics_enable": True,
                "metrics_enable": False,
            }
        },
    )


def _amounts(amounts: AcceleratorAmounts) -> dict[str, str]:
    return {name: str(count) for name, count in amounts.resources().items()}


ROOT_QUEUE: Final = "root"


def queue_spec(team: TeamConfig) -> dict[str, Any]:
    """A team's Queue: weight, reclaimable and parent explicit.

    Volcano's webhook fills in weight and reclaimable and its queue controller sets
    ``parent: root`` on a queue without one (volcano v1.15.1
    pkg/controllers/queue/queue_controller_action.go), so stating them keeps the object as the
    cluster holds it.
    """
    queue = team.queue
    return {
        "parent": ROOT_QUEUE,
        "weight": queue.weight,
        "reclaimable": queue.reclaimable,
        "capability": _amounts(team.capability),
        "deserved": _amounts(queue.deserved),
        "guarantee": {"resource": _amounts(queue.guarantee)},
    }


PLATFORM_QUEUE: Final = "platform"
"""The platform's own queue (the fabric test, components/fabric_test.py); no team's."""


def platform_queue_spec(capability: dict[str, int]) -> dict[str, Any]:
    """The platform's Queue: it deserves and guarantees nothing, and is capped at ``capability``.

    With nothing deserved, whatever it holds is borrowed: Volcano's capacity plugin lets a queue
    below its deserved share reclaim it (volcano-sh/volcano v1.15.1
    pkg/scheduler/plugins/capacity/capacity.go, AddReclaimableFn), so a team that needs its
    nodes back gets them, and with no guarantee it keeps no node from anyone while idle. Team
    pods cannot name it: in a team's namespace every gang goes to the team's queue
    (:func:`components.tenancy.queue_ownership_policy`).

    Args:
        capability: resource -> most it may hold (two nodes of the largest fabric pool).
    """
    return {
        "parent": ROOT_QUEUE,
        "weight": 1,
        "reclaimable": True,
        "capability": {name: str(count) for name, count in capability.items()},
        "deserved": {},
        "guarantee": {"resource": {}},
    }


class Scheduling(pulumi.ComponentResource):
    """Volcano, the platform's priority classes, and one queue per team.

    Output: ``ready`` (the Volcano release): Trainer and gang-scheduled objects wait for it.
    """

    def __init__(
        self,
        name: str,
        *,
        teams: list[TeamConfig],
        cluster_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        platform_capability: dict[str, int] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Install Volcano and create the queues.

        Args:
            name: prefix of child resource names.
            teams: validated teams (one queue each).
            platform_capability: the platform queue's capability
                (:func:`platform_queue_spec`); None or empty: no platform queue. Default None.
            cluster_ready: what Volcano waits for (system nodes, core add-ons).
            kubernetes_provider: provider of the release and objects.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:Scheduling", name, None, opts)
        in_cluster = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=cluster_ready
        )
        volcano = release(
            "volcano",
            versions.VOLCANO_CHART,
            namespace=NAMESPACE,
            values=volcano_values(),
            create_namespace=True,
            opts=in_cluster,
        )
        self.ready: list[pulumi.Resource] = [volcano]
        self.priority_classes: list[pulumi.Resource] = []
        """The priority classes: pods that name one are refused until it exists."""
        for class_name, (value, description) in PRIORITY_CLASSES.items():
            priority_class = k8s.scheduling.v1.PriorityClass(
                f"{name}-{class_name}",
                metadata={"name": class_name},
                value=value,
                global_default=False,
                preemption_policy="Never",
                description=description,
                opts=in_cluster,
            )
            self.priority_classes.append(priority_class)
        after_volcano = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=[volcano]
        )
        # After Volcano: the policy matches its kinds, which its chart installs.
        enforced_policy(
            f"{name}-leaf-queues",
            LEAF_QUEUE_POLICY,
            leaf_queue_policy(
                non_leaf_queues(
                    {
                        **{team.name: queue_spec(team)["parent"] for team in teams},
                        **({PLATFORM_QUEUE: ROOT_QUEUE} if platform_capability else {}),
                    },
                    root=ROOT_QUEUE,
                )
            ),
            opts=after_volcano,
        )
        for team in teams:
            k8s.apiextensions.CustomResource(
                f"{name}-queue-{team.name}",
                api_version=QUEUE_API,
                kind="Queue",
                metadata={"name": team.name},
                spec=typing.cast(Any, queue_spec(team)),
                opts=after_volcano,
            )
        if platform_capability:
            k8s.apiextensions.CustomResource(
                f"{name}-queue-{PLATFORM_QUEUE}",
                api_version=QUEUE_API,
                kind="Queue",
                metadata={"name": PLATFORM_QUEUE},
                spec=typing.cast(Any, platform_queue_spec(platform_capability)),
                opts=after_volcano,
            )
        self.register_outputs({})
