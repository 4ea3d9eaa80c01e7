"""A small model of IAM policy evaluation, enough for the stack's own policy documents.

One policy at a time, as IAM evaluates it (IAM user guide, "Policy evaluation logic"): an
explicit Deny that matches wins; otherwise a matching Allow allows; otherwise the request is
implicitly denied. A statement matches when its Principal (resource policies), Action,
Resource and every Condition match. Actions and ARNs match with ``*`` and ``?`` across ``/``
and ``:`` (fnmatch, case-sensitive; IAM matches action names case-insensitively, so actions
are lowered on both sides). Conditions: a key the request lacks fails every operator but the
negated ones (``StringNotEquals``, ``ArnNotLike``, ...), which it satisfies; a list of values
matches when any does; an account's root as the principal of a resource policy matches the
root only (it hands the decision to the account's IAM policies, which are another policy); the
operators the documents use are modelled and any other fails the
test (KeyError), so a new operator cannot pass unnoticed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _like(value: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(value, pattern)


OPERATORS: Final[dict[str, tuple[Callable[[str, str], bool], bool]]] = {
    # operator -> (does one request value match one policy value, is it negated)
    "StringEquals": (lambda value, wanted: value == wanted, False),
    "StringNotEquals": (lambda value, wanted: value == wanted, True),
    "StringLike": (_like, False),
    "StringNotLike": (_like, True),
    "ArnEquals": (lambda value, wanted: value == wanted, False),
    "ArnLike": (_like, False),
    "ArnNotLike": (_like, True),
    "Bool": (lambda value, wanted: value.lower() == str(wanted).lower(), False),
}


@dataclass(frozen=True)
class Request:
    """One request as IAM sees it.

    Attributes:
        action: e.g. ``sts:AssumeRole``.
        resource: the ARN acted on; ``*`` for a key policy or a trust policy.
        principal: for a resource policy, ``("Service", name)`` or ``("AWS", arn)``.
        context: condition keys and their values (a list for a multivalued key).
    """

    action: str
    resource: str = "*"
    principal: tuple[str, str] | None = None
    context: Mapping[str, str | list[str]] = field(default_factory=dict)


def _principal_matches(statement: dict[str, Any], principal: tuple[str, str] | None) -> bool:
    if "Principal" not in statement:
        return True  # an identity policy: the principal is whoever holds it
    if principal is None:
        return False
    wanted = statement["Principal"]
    if wanted == "*":
        return True
    kind, name = principal
    # An account's root matches only itself: it delegates to the account's IAM policies
    # (a role then needs its own grant of the key), which are not this policy.
    return any(p == "*" or _like(name, p) for p in _listed(wanted.get(kind, [])))


def _condition_matches(condition: dict[str, dict[str, Any]], context: Mapping[str, Any]) -> bool:
    for operator, keys in condition.items():
        test, negated = OPERATORS[operator]
        for key, wanted in keys.items():
            if key not in context:
                if not negated:
                    return False
                continue
            values = _listed(context[key])
            hit = any(test(v, w) for v in values for w in _listed(wanted))
            if hit == negated:
                return False
    return True


def _statement_matches(statement: dict[str, Any], request: Request) -> bool:
    action = request.action.lower()
    return (
        _principal_matches(statement, request.principal)
        and any(_like(action, a.lower()) for a in _listed(statement["Action"]))
        and any(_like(request.resource, r) for r in _listed(statement.get("Resource", "*")))
        and _condition_matches(statement.get("Condition", {}), request.context)
    )


def allows(policy: dict[str, Any], request: Request) -> bool:
    """Whether ``policy`` alone allows ``request``: a matching Allow and no matching Deny."""
    matching = [s for s in policy["Statement"] if _statement_matches(s, request)]
    return any(s["Effect"] == "Allow" for s in matching) and not any(
        s["Effect"] == "Deny" for s in matching
    )
