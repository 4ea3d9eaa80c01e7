"""Gang scheduling: team queues whose promises the node pools can keep."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import StackValidationArgs, StackValidationPolicy

from components.catalog import GPU_RESOURCE, NEURON_RESOURCE

from .capacity import accelerated_types
from .common import MANDATORY, ReportViolation, ResourceValidationArgs, resource_policy
from .slurm import NODE_SET, chart_node_sets

SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
"""KEDA's ScaledObject: how far the autoscaler may grow a NodeSet."""

QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
ACCELERATORS = (GPU_RESOURCE, NEURON_RESOURCE)


def _amount(amounts: Mapping[str, Any] | None, resource: str) -> int:
    return int(str((amounts or {}).get(resource, 0)))


def _shares(spec: Mapping[str, Any]) -> dict[str, Mapping[str, Any] | None]:
    return {
        "guarantee": (spec.get("guarantee") or {}).get("resource"),
        "deserved": spec.get("deserved"),
        "capability": spec.get("capability"),
    }


def _check_queue(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != QUEUE:
        return
    spec = args.props.get("spec") or {}
    for field in ("weight", "reclaimable"):
        if field not in spec:
            report(f"{field} is not set: Volcano's webhook fills it and every update diffs", None)
    shares = _shares(spec)
    for resource in ACCELERATORS:
        guarantee = _amount(shares["guarantee"], resource)
        deserved = _amount(shares["deserved"], resource)
        capability = shares["capability"]
        if guarantee > deserved:
            report(f"{resource}: guarantee {guarantee} exceeds deserved {deserved}", None)
        capped = capability is not None and resource in capability
        if capped and deserved > _amount(capability, resource):
            report(f"{resource}: deserved {deserved} exceeds capability", None)


RESERVED_FOR_LABEL = "trainingplatform.io/reserved-for"
"""Nodes of NodePools with this label are kept for Slurm; Volcano's pods never land there."""


def _reserved(labels: Mapping[str, Any] | None) -> bool:
    return RESERVED_FOR_LABEL in (labels or {})


def _kept_for_slurm(template: Mapping[str, Any]) -> bool:
    """Whether a NodePool's nodes are Slurm's: labelled, or tainted so only Slurm lands there."""
    labels = (template.get("metadata") or {}).get("labels")
    taints = (template.get("spec") or {}).get("taints") or []
    return _reserved(labels) or any(
        t.get("key") == RESERVED_FOR_LABEL and t.get("effect") in ("NoSchedule", "NoExecute")
        for t in taints
    )


def _pool_capacity(spec: Mapping[str, Any], resource: str) -> int:
    """Accelerators a NodePool may launch: its limit, capped by its node limit."""
    limits = spec.get("limits") or {}
    capacity = _amount(limits, resource)
    per_node = [
        e.accelerators for e in accelerated_types(spec) if e.accelerator_resource == resource
    ]
    if "nodes" in limits and per_node:
        capacity = min(capacity, int(str(limits["nodes"])) * max(per_node))
    return capacity


def _pool_limits(args: StackValidationArgs) -> dict[str, int]:
    """Accelerators the NodePools Volcano's pods can use may launch (Slurm's kept aside)."""
    totals = dict.fromkeys(ACCELERATORS, 0)
    for pool in args.resources:
        if pool.resource_type == NODE_POOL:
            spec = pool.props.get("spec") or {}
            if _kept_for_slurm(spec.get("template") or {}):
                continue
            for resource in ACCELERATORS:
                totals[resource] += _pool_capacity(spec, resource)
    return totals


def _slurm_held(args: StackValidationArgs) -> dict[str, int]:
    """Accelerators Slurm node sets hold on NodePools they share with Volcano's pods.

    The most replicas x what each slurmd pod requests, for NodeSet resources (as many as a KEDA
    ScaledObject may scale one to, when one does) and the node sets the slurm chart's values
    declare; node sets on nodes kept for Slurm take nothing.
    """
    resources = list(args.resources)
    scaled_to: dict[str, Any] = {}
    for scaler in resources:
        if scaler.resource_type == SCALED_OBJECT:
            spec = scaler.props.get("spec") or {}
            target = spec.get("scaleTargetRef") or {}
            if target.get("kind") == "NodeSet" and target.get("name"):
                scaled_to[target["name"]] = spec.get("maxReplicaCount", 100)
    node_sets = [  # (replicas, pod spec, slurmd container)
        (max(int(str(spec.get("replicas", 1))), int(str(scaled_to.get(str(name), 0)))),
         (spec.get("template") or {}).get("spec") or {}, spec.get("slurmd") or {})
        for name, spec in (
            ((r.props.get("metadata") or {}).get("name"), r.props.get("spec") or {})
            for r in resources if r.resource_type == NODE_SET
        )
    ] + [
        (values.get("replicas", 1), values.get("podSpec") or {}, values.get("slurmd") or {})
        for _, values in chart_node_sets(resources)
    ]  # fmt: skip
    totals = dict.fromkeys(ACCELERATORS, 0)
    for replicas, pod, slurmd in node_sets:
        if _reserved(pod.get("nodeSelector")):
            continue
        requests = (slurmd.get("resources") or {}).get("requests")
        for resource in ACCELERATORS:
            totals[resource] += int(str(replicas)) * _amount(requests, resource)
    return totals


def _check_queues_fit(args: StackValidationArgs, report: ReportViolation) -> None:
    limits = _pool_limits(args)
    held = _slurm_held(args)
    available = {resource: limits[resource] - held[resource] for resource in ACCELERATORS}
    queues = [r for r in args.resources if r.resource_type == QUEUE]
    for share in ("guarantee", "deserved"):
        for resource in ACCELERATORS:
            promised = sum(
                _amount(_shares(q.props.get("spec") or {})[share], resource) for q in queues
            )
            if promised > available[resource]:
                report(
                    f"queues promise {promised} {resource} as {share} but the NodePools "
                    f"Volcano's pods can use are limited to {limits[resource]}, of which "
                    f"Slurm node sets on them hold {held[resource]}",
                    None,
                )


POLICIES = [
    resource_policy(
        "queue-shares-ordered",
        "A team queue states weight and reclaimable, and its shares nest: guarantee <= "
        "deserved <= capability, as Volcano's admission webhook requires.",
        _check_queue,
    ),
    StackValidationPolicy(
        name="queues-fit-pools",
        description="The accelerators the team queues guarantee (and deserve) fit in what the "
        "NodePools Volcano's pods can use may launch (not the ones kept for Slurm, less what "
        "Slurm node sets hold on shared ones): a promise the pools cannot keep leaves gangs "
        "pending forever.",
        validate=_check_queues_fit,
        enforcement_level=MANDATORY,
    ),
]
