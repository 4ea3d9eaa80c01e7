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


def admit(
    policy: Mapping[str, Any],
    obj: Mapping[str, Any] | None,
    namespace: Mapping[str, Any] | None = None,
    *,
    old: Mapping[str, Any] | None = None,
    user_groups: list[str] | None = None,
    operation: str | None = None,
    username: str = "kubernetes-admin",
) -> tuple[bool, str | None]:
    """(admitted, message) of a request for ``obj`` under ``policy``'s spec.

    Args:
        policy: the policy's spec.
        obj: the object of the request.
        namespace: its Namespace, which the API server gives namespaced requests as
            ``namespaceObject``; None for a cluster-scoped object. Default None.
        old: the object an UPDATE replaces (``oldObject``; null on CREATE). Default None.
        user_groups: the requesting user's groups (``request.userInfo.groups``); None: a user
            with no groups field. Default None.
        operation: ``CREATE``, ``UPDATE`` or ``DELETE`` (which passes ``obj`` as the deleted
            object, ``oldObject``, with ``object`` null). Default UPDATE with ``old``, else
            CREATE.
        username: ``request.userInfo.username``. Default ``kubernetes-admin``.
    """
    operation = operation or ("UPDATE" if old else "CREATE")
    current, previous = (None, obj) if operation == "DELETE" else (obj, old)
    user: dict[str, Any] = {"username": username}
    if user_groups is not None:
        user["groups"] = user_groups
    activation: dict[str, Any] = {
        "object": celpy.adapter.json_to_cel(None if current is None else dict(current)),
        "oldObject": celpy.adapter.json_to_cel(None if previous is None else dict(previous)),
        "request": celpy.adapter.json_to_cel({"operation": operation, "userInfo": user}),
    }
    if namespace is not None:
        activation["namespaceObject"] = celpy.adapter.json_to_cel(dict(namespace))
    for condition in policy.get("matchConditions") or []:
        if not _program(condition["expression"]).evaluate(activation):
            return True, None
    # Each variable may use the ones declared before it (variables.<name>).
    variables: dict[Any, Any] = {}
    for variable in policy.get("variables") or []:
        activation["variables"] = celpy.celtypes.MapType(variables)
        variables[celpy.celtypes.StringType(variable["name"])] = _program(
            variable["expression"]
        ).evaluate(activation)
    activation["variables"] = celpy.celtypes.MapType(variables)
    for validation in policy.get("validations") or []:
        if not _program(validation["expression"]).evaluate(activation):
            message = validation.get("message")
            if "messageExpression" in validation:
                message = str(_program(validation["messageExpression"]).evaluate(activation))
            return False, message
    return True, None


def refusal(
    policy: Mapping[str, Any], obj: Mapping[str, Any], namespace: Mapping[str, Any] | None
) -> str | None:
    """The message ``policy`` refuses a member's CREATE of ``obj`` with, None where it admits.

    Args:
        policy: the policy's spec.
        obj: the object created.
        namespace: its Namespace (``namespaceObject``); None for a cluster-scoped object.
    """
    admitted, message = admit(policy, obj, namespace, username="member")
    if admitted:
        return None
    return message or "refused (the validation gives no message)"


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
