"""Where a pod may run: taints and tolerations, node selectors and required node affinity.

Node labels are known as sets of possible values (a NodePool's node gets one zone of several),
so an expression holds for a NodePool when some node it can launch satisfies it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from components.requirements import Labels, expression_holds


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether ``toleration`` tolerates ``taint``.

    As kubernetes pkg/apis/core/v1/helper ToleratesTaint: an empty effect matches every effect,
    an empty key with Exists matches every key.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if (toleration.get("operator") or "Equal") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(
    tolerations: Iterable[Mapping[str, Any]], taints: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The NoSchedule and NoExecute taints none of ``tolerations`` tolerates.

    PreferNoSchedule never keeps a pod off a node; Karpenter tolerates it for DaemonSets too
    (kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/scheduler.go).
    """
    held = list(tolerations)
    return [
        taint
        for taint in taints
        if taint.get("effect") != "PreferNoSchedule" and not any(tolerates(t, taint) for t in held)
    ]


def selector_holds(selector: Mapping[str, Any], labels: Labels) -> bool:
    """Whether every ``key: value`` of a nodeSelector can hold on a node with ``labels``."""
    return all(str(value) in labels.get(str(key), set()) for key, value in selector.items())


def required_affinity_holds(affinity: Mapping[str, Any] | None, labels: Labels) -> bool:
    """Whether the required node affinity of a pod holds.

    One term (OR) whose expressions (AND) all hold; no required affinity always holds.
    """
    node_affinity = (affinity or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(
        all(expression_holds(e, labels) for e in term.get("matchExpressions") or [])
        for term in terms
    )


def describe_taint(taint: Mapping[str, Any]) -> str:
    """``key=value:Effect`` as kubectl prints a taint."""
    value = taint.get("value")
    return f"{taint.get('key')}{'=' + str(value) if value else ''}:{taint.get('effect')}"
