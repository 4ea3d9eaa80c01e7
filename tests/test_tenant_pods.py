"""What a team member's pods may not do: system priorities, nodes held without use, schedulers.

Each rule is proven on the synthesized stack: the quota through a model of the API server's
quota admission, the admission policy through its own CEL (``admit`` of
tests/test_admission_policies.py), each against the attack and the legitimate request.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Final

import pytest

from components.scheduling import PRIORITY_CLASSES, STANDARD_PRIORITY_CLASS
from synth.run import StackResult
from tests.conftest import STACKS
from tests.kubernetes_semantics import quantity

QUOTA: Final = "kubernetes:core/v1:ResourceQuota"
NAMESPACE: Final = "kubernetes:core/v1:Namespace"
TEAM_LABEL: Final = "trainingplatform.io/team"


def _team_namespaces(result: StackResult) -> list[str]:
    return [
        r.inputs["metadata"]["name"]
        for r in result.records
        if r.type == NAMESPACE and TEAM_LABEL in r.inputs["metadata"].get("labels", {})
    ]


def _quotas(result: StackResult, namespace: str) -> list[dict[str, Any]]:
    return [
        r.inputs["spec"]
        for r in result.records
        if r.type == QUOTA and r.inputs["metadata"]["namespace"] == namespace
    ]


# --------------------------------------------------------------------------- quota admission


def _scope_matches(expression: dict[str, Any], pod: dict[str, Any]) -> bool:
    """One scopeSelector expression against a pod, as the pod quota evaluator reads it.

    Only the PriorityClass scope is modelled (the others are not used here); it compares the
    pod's ``spec.priorityClassName``, and Exists/DoesNotExist ask whether one is set.
    """
    assert expression["scopeName"] == "PriorityClass", expression
    name = pod["spec"].get("priorityClassName", "")
    operator = expression["operator"]
    if operator == "In":
        return bool(name) and name in expression["values"]
    if operator == "NotIn":
        return not name or name not in expression["values"]
    if operator == "Exists":
        return bool(name)
    assert operator == "DoesNotExist", expression
    return not name


def _pod_usage(pod: dict[str, Any]) -> dict[str, Decimal]:
    """What a pod adds to a namespace's quota usage: one pod and its containers' requests.

    Init containers count as their largest request where that exceeds the sum of the others
    (the effective request); requests the pod states without a limit range's defaults.
    """
    usage: dict[str, Decimal] = {"pods": Decimal(1)}
    spec = pod["spec"]
    for container in spec.get("containers", []):
        for name, value in container.get("resources", {}).get("requests", {}).items():
            usage[f"requests.{name}"] = usage.get(f"requests.{name}", Decimal(0)) + quantity(value)
    for container in spec.get("initContainers", []):
        for name, value in container.get("resources", {}).get("requests", {}).items():
            key = f"requests.{name}"
            usage[key] = max(usage.get(key, Decimal(0)), quantity(value))
    return usage


def quota_admits(quotas: list[dict[str, Any]], pod: dict[str, Any]) -> tuple[bool, str | None]:
    """(admitted, why not) of creating ``pod`` in an empty namespace with ``quotas``.

    Quota admission charges a pod to every quota whose scopes all match it, and refuses it when
    its usage of any resource a matching quota lists would exceed that quota's ``hard``.
    """
    usage = _pod_usage(pod)
    for quota in quotas:
        expressions = quota.get("scopeSelector", {}).get("matchExpressions", [])
        if not all(_scope_matches(e, pod) for e in expressions):
            continue
        for resource, hard in quota["hard"].items():
            if usage.get(resource, Decimal(0)) > quantity(hard):
                return False, f"exceeded quota: {resource} {usage[resource]} > {hard}"
    return True, None


def _priority_pod(priority_class: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("priority_class", ["system-node-critical", "system-cluster-critical"])
def test_system_priority_pods_are_refused_in_every_team_namespace(
    stack: str, priority_class: str, synthesized: dict[str, StackResult]
) -> None:
    namespaces = _team_namespaces(synthesized[stack])
    assert namespaces
    for namespace in namespaces:
        ok, why = quota_admits(
            _quotas(synthesized[stack], namespace), _priority_pod(priority_class)
        )
        assert not ok, (namespace, priority_class)
        assert why is not None and "pods" in why


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("priority_class", [*PRIORITY_CLASSES, None])
def test_training_priority_pods_are_not_counted_by_the_system_priority_quota(
    stack: str, priority_class: str | None, synthesized: dict[str, StackResult]
) -> None:
    for namespace in _team_namespaces(synthesized[stack]):
        quotas = _quotas(synthesized[stack], namespace)
        assert any("pods" in q["hard"] for q in quotas)
        assert quota_admits(quotas, _priority_pod(priority_class)) == (True, None)


def test_the_quota_model_can_refuse_what_matches_no_scope() -> None:
    # the model is not an always-yes: a scope-less pods:0 quota refuses the training classes too
    assert not quota_admits([{"hard": {"pods": "0"}}], _priority_pod(STANDARD_PRIORITY_CLASS))[0]
