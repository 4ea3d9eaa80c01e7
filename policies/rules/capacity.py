"""Accelerated capacity: what a Karpenter pool must be for jobs to get what they paid for.

Pools are recognised by the instance types their requirements admit (the platform's catalog,
labelled as Karpenter labels nodes), so a pool written by hand or by another program, selecting
by type, family or GPU count, is held to the same rules as the generated ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    PolicyConfigSchema,
    PolicyResource,
    StackValidationArgs,
    StackValidationPolicy,
)

from components.catalog import InstanceType
from components.requirements import catalog_types_admitted

from .common import (
    ADVISORY,
    HELM_TYPES,
    MANDATORY,
    ReportViolation,
    ResourceValidationArgs,
    as_list,
    chart_name,
    resource_policy,
)

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"


def _spec(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return props.get("spec") or {}


def _requirement(pool_spec: Mapping[str, Any], key: str) -> list[str] | None:
    template_spec = (pool_spec.get("template") or {}).get("spec") or {}
    for requirement in template_spec.get("requirements") or []:
        if requirement.get("key") == key and requirement.get("operator") == "In":
            return [str(value) for value in as_list(requirement.get("values"))]
    return None


def accelerated_types(pool_spec: Mapping[str, Any]) -> list[InstanceType]:
    """Catalog entries of the accelerated instance types a NodePool allows.

    Whatever requirements select them: by type, family, category, GPU or accelerator count
    or name; a pool with no instance requirement can buy any of them.
    """
    template_spec = (pool_spec.get("template") or {}).get("spec") or {}
    return catalog_types_admitted(template_spec.get("requirements") or [])


def _patched(args: ResourceValidationArgs, report: ReportViolation, *paths: str) -> None:
    """Report a NodePoolPatch that sets any of ``paths`` (dotted, under ``spec``).

    A patch changes a NodePool this pack cannot see whole (it may lift the limits of a pool
    declared elsewhere), so the guarded fields belong in the NodePool itself.
    """
    if args.resource_type != NODE_POOL + "Patch":
        return
    name = (args.props.get("metadata") or {}).get("name")
    for path in paths:
        node: Any = _spec(args.props)
        for key in path.split("."):
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not None:
            report(
                f"a NodePoolPatch sets spec.{path} of NodePool {name}; set it in the NodePool, "
                "where this policy can check it",
                None,
            )


def _check_limits(args: ResourceValidationArgs, report: ReportViolation) -> None:
    _patched(args, report, "limits")
    if args.resource_type != NODE_POOL:
        return
    spec = _spec(args.props)
    limits = spec.get("limits") or {}
    if not any(key in limits for key in ("nodes", "cpu")):
        report("the NodePool has no nodes or cpu limit: a runaway job can buy without bound", None)
    for resource in sorted({entry.accelerator_resource for entry in accelerated_types(spec)}):
        if resource not in limits:
            report(f"the NodePool has no {resource} limit", None)


def _check_taints(args: ResourceValidationArgs, report: ReportViolation) -> None:
    _patched(args, report, "template.spec.taints", "template.spec.requirements")
    if args.resource_type != NODE_POOL:
        return
    spec = _spec(args.props)
    template_spec = (spec.get("template") or {}).get("spec") or {}
    taints = {
        (taint.get("key"), taint.get("effect")) for taint in template_spec.get("taints") or []
    }
    for resource in sorted({entry.accelerator_resource for entry in accelerated_types(spec)}):
        if (resource, "NoSchedule") not in taints:
            report(
                f"accelerator nodes are not tainted {resource}:NoSchedule; any pod could land "
                "on them",
                None,
            )


def _check_disruption(args: ResourceValidationArgs, report: ReportViolation) -> None:
    _patched(args, report, "disruption", "template.spec.expireAfter")
    if args.resource_type != NODE_POOL:
        return
    spec = _spec(args.props)
    if not accelerated_types(spec):
        return
    disruption = spec.get("disruption") or {}
    template_spec = (spec.get("template") or {}).get("spec") or {}
    if disruption.get("consolidationPolicy") != "WhenEmpty":
        report(
            f"consolidationPolicy is {disruption.get('consolidationPolicy')!r}; training nodes "
            "may only be consolidated when empty",
            None,
        )
    if template_spec.get("expireAfter") != "Never":
        report(
            f"expireAfter is {template_spec.get('expireAfter')!r} (default 720h); training "
            "nodes must never expire under a running job",
            None,
        )
    drift_frozen = any(
        str(budget.get("nodes")) == "0"
        and (not budget.get("reasons") or "Drifted" in as_list(budget.get("reasons")))
        and not budget.get("schedule")
        for budget in disruption.get("budgets") or []
    )
    if not drift_frozen:
        report("no disruption budget stops drift from replacing busy training nodes", None)


def _floating_ami(term: Mapping[str, Any]) -> str | None:
    """Why an ``amiSelectorTerms`` entry picks a different AMI over time, or None if pinned.

    Karpenter resolves every term to the newest matching image
    (karpenter-provider-aws v1.14.1 pkg/providers/amifamily/ami.go), so only an ``id``, an
    alias at a version, an exact name or a versioned SSM parameter stays put.
    """
    alias = term.get("alias")
    if alias and str(alias).endswith("@latest"):
        return f"AMI alias {alias} drifts with every AMI release; pin @vYYYYMMDD"
    name = term.get("name")
    if name and any(wild in str(name) for wild in "*?"):
        return f"AMI name {name!r} matches every future release; name one image or use an id"
    parameter = str(term.get("ssmParameter") or "")
    if parameter and any(part in ("recommended", "latest") for part in parameter.split("/")):
        return f"SSM parameter {parameter} follows each release; use a versioned parameter"
    if term.get("tags") and not (term.get("id") or name or alias or parameter):
        return "an AMI selected by tags alone moves to whichever tagged image is newest"
    return None


def _check_ami_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in (NODE_CLASS, NODE_CLASS + "Patch"):
        return
    for term in _spec(args.props).get("amiSelectorTerms") or []:
        problem = _floating_ami(term)
        if problem:
            report(problem, None)


def _check_interruption_queue(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in HELM_TYPES or chart_name(args.props) != "karpenter":
        return
    settings = (args.props.get("values") or {}).get("settings") or {}
    if not settings.get("interruptionQueue"):
        report(
            "Karpenter has no interruption queue: spot interruptions, rebalances and health "
            "events reach no one",
            None,
        )


def _efa_only_count(node_class: PolicyResource) -> int:
    interfaces = _spec(node_class.props).get("networkInterfaces") or []
    return sum(1 for interface in interfaces if interface.get("interfaceType") == "efa-only")


def _pools_by_class(resources: list[PolicyResource]) -> dict[str, list[PolicyResource]]:
    pools: dict[str, list[PolicyResource]] = {}
    for resource in resources:
        if resource.resource_type == NODE_POOL:
            template_spec = (_spec(resource.props).get("template") or {}).get("spec") or {}
            class_name = (template_spec.get("nodeClassRef") or {}).get("name")
            pools.setdefault(str(class_name), []).append(resource)
    return pools


def _object_name(resource: PolicyResource) -> str:
    return str((resource.props.get("metadata") or {}).get("name", resource.name))


def _check_efa_fabric(args: StackValidationArgs, report: ReportViolation) -> None:
    pools_by_class = _pools_by_class(list(args.resources))
    groups = {
        str(r.props.get("name")): r for r in args.resources if r.resource_type == PLACEMENT_GROUP
    }
    for node_class in args.resources:
        if node_class.resource_type != NODE_CLASS or _efa_only_count(node_class) == 0:
            continue
        attached = _efa_only_count(node_class)
        selector = _spec(node_class.props).get("placementGroupSelector") or {}
        group = groups.get(str(selector.get("name")))
        exempt = _object_name(node_class) in args.get_config().get("poolsWithoutPlacementGroup", [])
        if not selector:
            if not exempt:
                report("EFA node class has no placementGroupSelector", node_class.urn)
        elif group is None or group.props.get("strategy") != "cluster":
            report(
                f"placement group {selector.get('name')!r} is not a cluster placement group "
                "this stack creates",
                node_class.urn,
            )
        for pool in pools_by_class.get(_object_name(node_class), []):
            zones = _requirement(_spec(pool.props), ZONE)
            if zones is None or len(zones) != 1:
                report(f"EFA NodePool may launch in zones {zones}; pin exactly one", pool.urn)
            for entry in accelerated_types(_spec(pool.props)):
                if entry.efa_interfaces != attached:
                    report(
                        f"{entry.name} has {entry.efa_interfaces} EFA interfaces but its node "
                        f"class attaches {attached}",
                        pool.urn,
                    )


def _check_efa_used(args: StackValidationArgs, report: ReportViolation) -> None:
    classes = {_object_name(r): r for r in args.resources if r.resource_type == NODE_CLASS}
    for class_name, pools in _pools_by_class(list(args.resources)).items():
        node_class = classes.get(class_name)
        for pool in pools:
            capable = [e.name for e in accelerated_types(_spec(pool.props)) if e.supports_efa]
            if capable and node_class is not None and _efa_only_count(node_class) == 0:
                report(f"{', '.join(capable)} can use EFA but the pool attaches none", pool.urn)


POLICIES = [
    resource_policy(
        "nodepool-limits",
        "Every NodePool caps what it can buy (nodes or cpu, and its accelerators), so a "
        "mistake or a runaway job cannot launch unbounded capacity.",
        _check_limits,
    ),
    resource_policy(
        "accelerator-pools-tainted",
        "Accelerator NodePools taint their nodes (nvidia.com/gpu or aws.amazon.com/neuron, "
        "NoSchedule), so only pods that ask for accelerators land on them.",
        _check_taints,
    ),
    resource_policy(
        "training-pools-not-disrupted-while-busy",
        "Accelerator NodePools consolidate only empty nodes, never expire nodes, and let no "
        "drift replace a busy node: one lost worker stops a whole distributed job.",
        _check_disruption,
    ),
    resource_policy(
        "ami-alias-pinned",
        "Node AMIs are pinned (al2023@vYYYYMMDD, an id, an exact name or a versioned SSM "
        "parameter): @latest, name wildcards, 'recommended' parameters and tag selectors change "
        "every node at the next AMI release, under running jobs.",
        _check_ami_pinned,
    ),
    resource_policy(
        "karpenter-interruption-queue",
        "Karpenter is given its interruption queue, so it drains nodes before spot "
        "reclamation, rebalancing, maintenance or reservation ends.",
        _check_interruption_queue,
    ),
    StackValidationPolicy(
        name="efa-pool-fabric",
        description="An EFA pool lives in one zone, in a cluster placement group this stack "
        "creates, and attaches every EFA interface of its instance types.",
        validate=_check_efa_fabric,
        enforcement_level=MANDATORY,
        config_schema=PolicyConfigSchema(
            properties={
                # Pools whose capacity reservation was bought outside any placement group.
                "poolsWithoutPlacementGroup": {
                    "type": "array",
                    "items": {"type": "string"},
                    "default": [],
                }
            }
        ),
    ),
    StackValidationPolicy(
        name="efa-capable-pools-attach-efa",
        description="A pool of EFA-capable instances attaches EFA: the fabric is part of what "
        "those instances cost.",
        validate=_check_efa_used,
        enforcement_level=ADVISORY,
    ),
]
