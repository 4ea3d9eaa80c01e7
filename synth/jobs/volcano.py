"""Volcano's decisions for a gang: which queue it lands in and how much that queue admits.

Modelled on volcano v1.15.1:
- a PodGroup's queue is the runtime template's ``scheduling.volcano.sh/queue-name`` (Trainer's
  volcano plugin), else ``default`` (the PodGroup CRD's default; pkg/scheduler/cache/
  event_handlers.go); the scheduler creates ``default`` and ``root`` itself, with no
  capability, deserved or guarantee (pkg/scheduler/cache/cache.go);
- the capacity plugin admits a job (enqueue) and allocates its tasks only within the queue's
  ``realCapability`` (pkg/scheduler/plugins/capacity/capacity.go, jobEnqueueable,
  queueAllocatableWithReserved):
  flat: ``min(max(total - sum of every queue's guarantee, 0) + own guarantee, capability)``
  where ``total`` is the allocatable of the nodes that exist now (buildQueueAttrs);
  ``enableHierarchy``: ``root`` without capability is unbounded for every resource some node
  offers, so a queue under it gets its own capability there; for a resource no node offers yet
  it gets only its own guarantee (buildHierarchicalQueueAttrs; a missing key reads as 0);
- Volcano marks every pending pod of every PodGroup Unschedulable, admitted or not
  (pkg/scheduler/cache/cache.go, RecordJobStatusEvent), so Karpenter launches nodes even for
  gangs the queue will never admit;
- ``deserved`` plays no part in admission; beyond it a queue's jobs can be reclaimed;
- the check covers every resource of the PodGroup's ``minResources`` with a quantity above 0
  (``LessEqualWithDimensionAndResourcesName`` in pkg/scheduler/api/resource_info.go: cpu and
  memory, then ``for name, quant := range req.ScalarResources``, where a name the queue's real
  capability lacks reads as 0): EFA interfaces, huge pages and ephemeral storage as much as
  accelerators. Only ``pods`` (``ignoredScalarResources``), ``count/*`` quota names
  (``IsCountQuota`` in ``NewResource``) and devices a sharing plugin registers
  (``IgnoredDevicesList``, none here) are skipped. A dimension absent from the queue's
  ``capability`` is not skipped: ``MinDimensionResource(attr.capability, api.Infinity)`` leaves
  it at what the cluster gives (flat) or the parent's (hierarchy);
- with ``enableHierarchy`` the job must also fit every ancestor
  (``checkJobEnqueueableHierarchically``), ``root`` included, whose real capability is
  ``math.MaxInt64`` only for the scalar resources some node reports (``for k := range
  cp.totalResource.ScalarResources { infinityResource.SetScalar(k, math.MaxInt64) }`` in
  buildHierarchicalQueueAttrs): on a cold pool ``root`` refuses any amount of a resource only
  that pool's nodes offer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from synth.jobs.view import StackView, name_of, quantity
from synth.yamlio import load_yaml

QUEUE_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
DEFAULT_QUEUE: Final = "default"
SYSTEM_QUEUES: Final = ("default", "root")
IGNORED_RESOURCES: Final = ("pods",)
"""What the capacity plugin never compares (resource_info.go ``ignoredScalarResources``)."""
ALWAYS_KNOWN: Final = ("cpu", "memory", "ephemeral-storage")
"""What ``root`` always knows under hierarchy: cpu and memory (``api.InfiniteResource()``), and
what every node reports, 0 or not (the system nodes always exist)."""
VOLCANO_RELEASE: Final = "volcano"
SCHEDULER_NAME: Final = "volcano"


@dataclass(frozen=True)
class QueueShape:
    """A queue's shares per resource (base units); absent keys mean none."""

    name: str
    capability: dict[str, Decimal] = field(default_factory=dict)
    deserved: dict[str, Decimal] = field(default_factory=dict)
    guarantee: dict[str, Decimal] = field(default_factory=dict)


def _amounts(values: Mapping[str, Any] | None) -> dict[str, Decimal]:
    return {str(k): quantity(v) for k, v in (values or {}).items()}


def queues(view: StackView) -> dict[str, QueueShape]:
    """Every queue a PodGroup can name: the stack's, and the two the scheduler creates."""
    found = {name: QueueShape(name) for name in SYSTEM_QUEUES}
    for queue in view.of_kind("Queue"):
        spec = queue.get("spec") or {}
        found[name_of(queue)] = QueueShape(
            name_of(queue),
            capability=_amounts(spec.get("capability")),
            deserved=_amounts(spec.get("deserved")),
            guarantee=_amounts((spec.get("guarantee") or {}).get("resource")),
        )
    return found


def scheduler_config(view: StackView) -> dict[str, Any] | None:
    """The scheduler configuration the chart values give (None: Volcano is not installed)."""
    values = view.values(VOLCANO_RELEASE)
    if values is None:
        return None
    text = (values.get("custom") or {}).get("scheduler_config_override")
    return dict(load_yaml(text)) if text else {}


def _plugin(config: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    for tier in config.get("tiers") or []:
        for plugin in tier.get("plugins") or []:
            if plugin.get("name") == name:
                return dict(plugin)
    return None


def capacity_hierarchy(config: Mapping[str, Any]) -> bool | None:
    """Whether the capacity plugin runs with ``enableHierarchy`` (None: no capacity plugin)."""
    plugin = _plugin(config, "capacity")
    return None if plugin is None else bool(plugin.get("enableHierarchy"))


def real_capability(
    queue: QueueShape,
    resource: str,
    *,
    total: Decimal,
    all_guarantees: Decimal,
    hierarchy: bool,
) -> Decimal | None:
    """What the capacity plugin lets ``queue`` hold of ``resource`` (None: no bound).

    Args:
        queue: the queue.
        resource: an extended resource the job requests (its accelerator).
        total: what the nodes that exist hold of it (0 while the pool is empty).
        all_guarantees: the sum of every queue's guarantee of it.
        hierarchy: ``enableHierarchy`` on the capacity plugin.
    """
    capability = queue.capability.get(resource)
    own = queue.guarantee.get(resource, Decimal(0))
    if hierarchy:
        if total <= 0:
            # No node offers it yet: root has no such key, so only the queue's own guarantee.
            return own if capability is None else min(own, capability)
        return capability
    real = max(total - all_guarantees, Decimal(0)) + own
    return real if capability is None else min(real, capability)


def compared_resources(min_resources: Mapping[str, Decimal]) -> list[str]:
    """The resources of a PodGroup's ``minResources`` the capacity plugin compares.

    Every one with a quantity above 0 but ``pods`` and ``count/*`` (resource_info.go
    ``LessEqualWithDimensionAndResourcesName``, ``NewResource``).

    Args:
        min_resources: the PodGroup's minResources (base units: cores, bytes, counts).
    """
    return sorted(
        name
        for name, amount in min_resources.items()
        if amount > 0 and name not in IGNORED_RESOURCES and not name.startswith("count/")
    )


def root_admits(resource: str, *, total: Decimal, hierarchy: bool) -> bool:
    """Whether ``root`` lets any amount of ``resource`` in (only asked under hierarchy).

    ``root`` knows cpu and memory always, a scalar resource only while some node reports it
    (capacity.go buildHierarchicalQueueAttrs), even as 0: the kubelet lists every huge page
    size in a Linux node's allocatable, 0 where none are reserved, and ``NewResource`` keeps
    the key. Flat queues have no ancestors to check.

    Args:
        resource: the resource name.
        total: what the nodes that exist report of it (0: none reports it).
        hierarchy: ``enableHierarchy`` on the capacity plugin.
    """
    known = resource in ALWAYS_KNOWN or resource.startswith("hugepages-")
    return not hierarchy or known or total > 0
