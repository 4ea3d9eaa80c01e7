"""Helpers shared by the rule modules: reading inputs the way the engine hands them to policies."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)
from pulumi_policy.policy import ResourceValidation

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY


def resource_policy(
    name: str,
    description: str,
    validate: ResourceValidation,
    *,
    enforcement_level: EnforcementLevel = MANDATORY,
    config: dict[str, Any] | None = None,
) -> ResourceValidationPolicy:
    """A resource policy, mandatory unless the stack's policy config says otherwise.

    Args:
        name: policy id, kebab-case; the key in ``policies/config/<stack>.json``.
        description: what it enforces and why, shown with every violation.
        validate: ``(args, report_violation) -> None``.
        enforcement_level: default level when the config is silent. Default mandatory.
        config: JSON schema ``properties`` of the policy's settings (with ``default`` values).

    """
    return ResourceValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=enforcement_level,
        config_schema=PolicyConfigSchema(properties=config) if config else None,
    )


def decoded(value: Any) -> Any:
    """A provider input as a value: the engine passes a provider's object inputs as JSON text."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def is_true(value: Any) -> bool:
    """True for ``true`` and ``"true"`` (some AWS inputs are strings, e.g. EBS ``encrypted``)."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def provider_default_tags(args: ResourceValidationArgs) -> dict[str, str]:
    """Tags the resource's AWS provider adds to everything it creates."""
    if args.provider is None:
        return {}
    default_tags = decoded(args.provider.props.get("defaultTags")) or {}
    return dict(default_tags.get("tags") or {}) if isinstance(default_tags, Mapping) else {}


def policy_documents(args: ResourceValidationArgs) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every IAM policy document a resource carries, with where it sits."""
    props = args.props
    if args.resource_type in {
        "aws:iam/policy:Policy",
        "aws:iam/rolePolicy:RolePolicy",
        "aws:iam/userPolicy:UserPolicy",
        "aws:iam/groupPolicy:GroupPolicy",
    }:
        document = decoded(props.get("policy"))
        if isinstance(document, Mapping):
            yield "policy", dict(document)
    if args.resource_type == "aws:iam/role:Role":
        for index, inline in enumerate(props.get("inlinePolicies") or []):
            document = decoded(inline.get("policy"))
            if isinstance(document, Mapping):
                yield f"inlinePolicies[{index}]", dict(document)


def statements(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A policy document's statements as a list (a single statement may be an object)."""
    found = document.get("Statement") or []
    return [found] if isinstance(found, Mapping) else list(found)


def as_list(value: Any) -> list[Any]:
    """A scalar or list field of a policy statement, as a list."""
    if value is None:
        return []
    # Inputs arrive wrapped in pulumi-policy's proxies, which are Sequences but not lists.
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return [value]


__all__ = [
    "ADVISORY",
    "MANDATORY",
    "ReportViolation",
    "ResourceValidationArgs",
    "as_list",
    "decoded",
    "is_true",
    "policy_documents",
    "provider_default_tags",
    "resource_policy",
    "statements",
]
