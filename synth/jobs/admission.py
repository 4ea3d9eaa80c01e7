"""The stack's ValidatingAdmissionPolicies, evaluated on one object as the API server runs them.

Match conditions first, then variables (each may use the ones before it), then each validation
in order: false refuses with its message (kubernetes staging/src/k8s.io/apiserver/pkg/admission/
plugin/policy/validating/validator.go). Only policies bound with the ``Deny`` action refuse.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import celpy
import celpy.adapter

from synth.jobs.view import StackView


@functools.cache
def _program(expression: str) -> Any:
    """``expression`` compiled once per process (parsing is most of an evaluation's cost)."""
    environment = celpy.Environment()
    return environment.program(environment.compile(expression))


def enforced(view: StackView, policy: str) -> Mapping[str, Any] | None:
    """The spec of ``policy`` where a binding enforces it (``Deny``), else None."""
    manifest = view.named("ValidatingAdmissionPolicy", policy)
    bound = any(
        (b.get("spec") or {}).get("policyName") == policy
        and "Deny" in ((b.get("spec") or {}).get("validationActions") or [])
        for b in view.of_kind("ValidatingAdmissionPolicyBinding")
    )
    return (manifest.get("spec") or {}) if manifest is not None and bound else None


def refusal(
    policy: Mapping[str, Any], obj: Mapping[str, Any], namespace: Mapping[str, Any] | None
) -> str | None:
    """The message ``policy`` refuses ``obj``'s CREATE with, or None where it admits it.

    Args:
        policy: the policy's spec.
        obj: the object created.
        namespace: its Namespace (``namespaceObject``); None for a cluster-scoped object.
    """
    activation: dict[str, Any] = {
        "object": celpy.adapter.json_to_cel(dict(obj)),
        "oldObject": celpy.adapter.json_to_cel(None),
        "request": celpy.adapter.json_to_cel(
            {"operation": "CREATE", "userInfo": {"username": "member"}}
        ),
    }
    if namespace is not None:
        activation["namespaceObject"] = celpy.adapter.json_to_cel(dict(namespace))
    for condition in policy.get("matchConditions") or []:
        if not _program(condition["expression"]).evaluate(activation):
            return None
    variables: dict[Any, Any] = {}
    for variable in policy.get("variables") or []:
        activation["variables"] = celpy.celtypes.MapType(variables)
        variables[celpy.celtypes.StringType(variable["name"])] = _program(
            variable["expression"]
        ).evaluate(activation)
    activation["variables"] = celpy.celtypes.MapType(variables)
    for validation in policy.get("validations") or []:
        if not _program(validation["expression"]).evaluate(activation):
            if "messageExpression" in validation:
                return str(_program(validation["messageExpression"]).evaluate(activation))
            return str(validation.get("message") or validation["expression"])
    return None


def refusals(
    view: StackView, policies: list[str], obj: Mapping[str, Any], namespace: str
) -> list[str]:
    """Why the enforced ``policies`` refuse creating ``obj`` in ``namespace`` (one per policy).

    Args:
        view: the stack.
        policies: the policies' names; one the stack does not enforce admits everything.
        obj: the object.
        namespace: its namespace (read from the view).
    """
    found = []
    namespace_object = view.named("Namespace", namespace)
    for name in policies:
        spec = enforced(view, name)
        if spec is None:
            continue
        message = refusal(spec, obj, namespace_object)
        if message is not None:
            found.append(f"admission policy {name}: {message}")
    return found
