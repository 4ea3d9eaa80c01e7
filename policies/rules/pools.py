"""What the synthesized Karpenter pools offer, for policies that size pods to their nodes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import PolicyResource

from components.catalog import CATALOG, EFA_RESOURCE
from components.requirements import catalog_types_admitted

from .common import as_list

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
POOL_LABEL = "trainingplatform.io/pool"
NODE_POOL_LABEL = "karpenter.sh/nodepool"
"""Karpenter labels every node with its NodePool's name: pods pin to a pool by either label."""


def pool_facts(resources: list[PolicyResource]) -> PoolFacts:
    """NodePool name -> (instance types, EFA interfaces attached, taints)."""
    efa_by_class: dict[str, int] = {}
    for node_class in resources:
        if node_class.resource_type == NODE_CLASS:
            interfaces = (node_class.props.get("spec") or {}).get("networkInterfaces") or []
            name = str((node_class.props.get("metadata") or {}).get("name"))
            efa_by_class[name] = sum(1 for i in interfaces if i.get("interfaceType") == "efa-only")
    facts = {}
    for pool in resources:
        if pool.resource_type != NODE_POOL:
            continue
        template = ((pool.props.get("spec") or {}).get("template") or {}).get("spec") or {}
        types = [e.name for e in catalog_types_admitted(template.get("requirements") or [])]
        class_name = str((template.get("nodeClassRef") or {}).get("name"))
        name = str((pool.props.get("metadata") or {}).get("name"))
        facts[name] = (types, efa_by_class.get(class_name, 0), list(template.get("taints") or []))
    return facts


PoolFacts = dict[str, tuple[list[str], int, list[Any]]]


def tolerated(tolerations: list[Any], taint: Mapping[str, Any]) -> bool:
    """Whether one of ``tolerations`` tolerates ``taint``."""
    return any(
        t.get("key") == taint.get("key")
        and t.get("effect") in (None, taint.get("effect"))
        and (t.get("operator") == "Exists" or t.get("value") == taint.get("value"))
        for t in tolerations
    )


def pinned_pool(pod: Mapping[str, Any]) -> str | None:
    """The NodePool a pod spec is pinned to, by node selector or required node affinity.

    Either the platform's pool label or Karpenter's ``karpenter.sh/nodepool``; an affinity pins
    when every one of its terms names the same single pool.
    """
    selector = pod.get("nodeSelector") or {}
    for key in (POOL_LABEL, NODE_POOL_LABEL):
        if key in selector:
            return str(selector[key])
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    named = set()
    for term in required.get("nodeSelectorTerms") or []:
        values = [
            [str(v) for v in as_list(e.get("values"))]
            for e in term.get("matchExpressions") or []
            if e.get("key") in (POOL_LABEL, NODE_POOL_LABEL) and e.get("operator") == "In"
        ]
        if len(values) != 1 or len(values[0]) != 1:
            return None
        named.add(values[0][0])
    return named.pop() if len(named) == 1 else None


def size_problems(
    name: str, pod: Mapping[str, Any], containers: list[Any], pools: PoolFacts
) -> Iterator[str]:
    """How a pod pinned to a pool fails to take its whole node, or to tolerate the pool.

    Args:
        name: what to call the pod in the messages.
        pod: the pod spec (its ``nodeSelector`` and ``tolerations``).
        containers: the containers whose requests must hold every accelerator and EFA interface.
        pools: :func:`pool_facts` of the stack.
    """
    pool_name = pinned_pool(pod)
    if pool_name is None or pool_name not in pools:
        return
    types, efa_attached, taints = pools[pool_name]
    for taint in taints:
        if not tolerated(list(pod.get("tolerations") or []), taint):
            yield f"{name} does not tolerate the pool's taint {taint.get('key')}"
    for container in containers:
        requests = (container.get("resources") or {}).get("requests") or {}
        for entry in (CATALOG[t] for t in types if t in CATALOG):
            wanted = int(str(requests.get(entry.accelerator_resource, 0)))
            if wanted != entry.accelerators:
                yield (
                    f"{name} requests {wanted} {entry.accelerator_resource} on {entry.name}, "
                    f"which has {entry.accelerators}"
                )
            efa = int(str(requests.get(EFA_RESOURCE, 0)))
            if efa != efa_attached:
                yield f"{name} requests {efa} EFA interfaces; the pool's nodes have {efa_attached}"
