"""The acceptance gate: every accelerator pool is gated, and its vendor's agent can free it.

A node that starts with the acceptance taint and no agent to remove it never takes work, and
Karpenter keeps counting it as capacity (docs: concepts, node acceptance): a pool left out of
the gate, or an agent that cannot land on a pool's nodes (a taint it does not tolerate, an
affinity that leaves the pool out), is a deadlock or a hole that only shows on a real node.
The gate is on when the stack runs an acceptance agent; its DaemonSets are
``acceptance-agent-<vendor>`` in ``node-acceptance``, one per accelerator vendor.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from pulumi_policy import (
    PolicyResource,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)

from components.health_marks import ACCEPTANCE_TAINT, ACCEPTANCE_TAINT_KEY, SOURCES, unhealthy_taint

from .capacity import accelerated_types
from .common import MANDATORY, as_list

NODE_POOL: Final = "kubernetes:karpenter.sh/v1:NodePool"
NODE_POOL_PATCH: Final = NODE_POOL + "Patch"
DAEMON_SET: Final = "kubernetes:apps/v1:DaemonSet"
AGENT_NAMESPACE: Final = "node-acceptance"
AGENT_PREFIX: Final = "acceptance-agent-"
POOL_LABEL: Final = "trainingplatform.io/pool"


def _name(resource: PolicyResource) -> str:
    return str((resource.props.get("metadata") or {}).get("name") or "")


def _template(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((props.get("spec") or {}).get("template") or {}).get("spec") or {}


def agents(resources: list[PolicyResource]) -> dict[str, PolicyResource]:
    """Vendor (``nvidia``, ``neuron``) -> its acceptance agent DaemonSet."""
    return {
        _name(r).removeprefix(AGENT_PREFIX): r
        for r in resources
        if r.resource_type == DAEMON_SET
        and _name(r).startswith(AGENT_PREFIX)
        and (r.props.get("metadata") or {}).get("namespace") == AGENT_NAMESPACE
    }


def accelerator_pools(resources: list[PolicyResource]) -> Iterator[tuple[PolicyResource, set[str]]]:
    """Every NodePool that may launch an accelerated type, with the vendors it may launch."""
    for pool in resources:
        if pool.resource_type == NODE_POOL:
            vendors: set[str] = {
                entry.accelerator for entry in accelerated_types(pool.props.get("spec") or {})
            }
            if vendors:
                yield pool, vendors


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' toleration match (k8s.io/api core/v1 toleration.go, ToleratesTaint)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if toleration.get("operator", "Equal") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def _gated(taints: Any) -> bool:
    return any(
        t.get("key") == ACCEPTANCE_TAINT_KEY and t.get("effect") == ACCEPTANCE_TAINT["effect"]
        for t in as_list(taints)
        if isinstance(t, Mapping)
    )


def _check_pools_gated(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    if not agents(resources):
        return  # the gate is off: no pool waits for an agent
    for pool, _ in accelerator_pools(resources):
        if not _gated(_template(pool.props).get("startupTaints")):
            report(
                f"accelerator NodePool {_name(pool)!r} has no startup taint "
                f"{ACCEPTANCE_TAINT_KEY}:NoSchedule: its nodes take work unchecked",
                pool.urn,
            )
    for patch in resources:
        startup = (
            _template(patch.props).get("startupTaints")
            if patch.resource_type == NODE_POOL_PATCH
            else None
        )
        if startup is not None and not _gated(startup):
            report(
                f"NodePool patch of {_name(patch)!r} replaces its startup taints without "
                f"{ACCEPTANCE_TAINT_KEY}:NoSchedule",
                patch.urn,
            )  # fmt: skip


def _agent_pools(pod: Mapping[str, Any]) -> set[str] | None:
    """The pools an agent's pod may land on by the pool label; None: no pool restriction."""
    selector = pod.get("nodeSelector") or {}
    if POOL_LABEL in selector:
        return {str(selector[POOL_LABEL])}
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return None
    pools: set[str] = set()
    for term in terms:
        named = [
            {str(v) for v in as_list(e.get("values"))}
            for e in term.get("matchExpressions") or []
            if e.get("key") == POOL_LABEL and e.get("operator") == "In"
        ]
        if not named:
            return None  # a term without the pool label admits every pool
        pools |= set.intersection(*named)
    return pools


def _check_agents_tolerate(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    by_vendor = agents(resources)
    marks = [ACCEPTANCE_TAINT, *(unhealthy_taint(source) for source in SOURCES)]
    for pool, vendors in accelerator_pools(resources):
        template = _template(pool.props)
        # Other startup taints (the FSx driver's) go when their own agents are ready; the
        # acceptance agent may wait for them, and checks mounts only after they are gone.
        taints = list(as_list(template.get("taints")))
        for vendor in sorted(vendors):
            agent = by_vendor.get(vendor)
            if agent is None:
                if _gated(template.get("startupTaints")):
                    report(
                        f"NodePool {_name(pool)!r} starts {vendor} nodes with the acceptance "
                        f"taint but no {AGENT_PREFIX}{vendor} DaemonSet runs to remove it",
                        pool.urn,
                    )
                continue
            pod = _template(agent.props)
            allowed = _agent_pools(pod)
            # The nodes carry the pool label of their template (a pool's Slurm share, NodePool
            # <pool>-slurm, labels its nodes as the pool itself), not the NodePool's name.
            template_metadata = ((pool.props.get("spec") or {}).get("template") or {}).get(
                "metadata"
            )
            labels = (template_metadata or {}).get("labels") or {}
            label = str(labels.get(POOL_LABEL, _name(pool)))
            if allowed is not None and label not in allowed:
                report(
                    f"{_name(agent)} does not select NodePool {_name(pool)!r} "
                    f"({POOL_LABEL}={label} affinity): its nodes are never checked",
                    agent.urn,
                )
            tolerations = [t for t in as_list(pod.get("tolerations")) if isinstance(t, Mapping)]
            for taint in [*taints, *marks]:
                if not any(tolerates(t, taint) for t in tolerations):
                    report(
                        f"{_name(agent)} does not tolerate {taint.get('key')}="
                        f"{taint.get('value', '')}:{taint.get('effect')} of NodePool "
                        f"{_name(pool)!r}",
                        agent.urn,
                    )


POLICIES = [
    StackValidationPolicy(
        name="accelerator-pools-gated",
        description="Where the acceptance gate runs, every accelerator NodePool starts its "
        "nodes with the acceptance startup taint, so no work lands on a node before it is "
        "checked (docs: concepts, node acceptance).",
        validate=_check_pools_gated,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="acceptance-agent-tolerates-pools",
        description="Each vendor's acceptance agent DaemonSet selects every NodePool of that "
        "vendor and tolerates all its taints and the gate's own (acceptance, unhealthy), and no "
        "pool starts gated without its vendor's agent: otherwise a new node waits forever.",
        validate=_check_agents_tolerate,
        enforcement_level=MANDATORY,
    ),
]
