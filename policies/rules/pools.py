"""What the synthesized Karpenter pools offer, for policies that size pods to their nodes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import PolicyResource

from components.catalog import CATALOG, EFA_RESOURCE

from .common import as_list

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
POOL_LABEL = "trainingplatform.io/pool"


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
        types = [
            str(value)
            for requirement in template.get("requirements") or []
            if requirement.get("key") == "node.kubernetes.io/instance-type"
            for value in as_list(requirement.get("values"))
        ]
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
    pool_name = (pod.get("nodeSelector") or {}).get(POOL_LABEL)
    if pool_name is None or str(pool_name) not in pools:
        return
    types, efa_attached, taints = pools[str(pool_name)]
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
