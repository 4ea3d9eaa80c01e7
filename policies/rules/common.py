"""Helpers shared by the rule modules: reading inputs the way the engine hands them to policies."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)
from pulumi_policy.policy import ResourceValidation

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY
HELM_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
"""The Helm resources whose inputs (chart, version, values) policies can read."""
_PACKAGED_CHART = re.compile(r"-v?\d+\.\d+\.\d+[^/]*$")


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


def chart_name(props: Mapping[str, Any]) -> str:
    """A Helm resource's chart by name, however it is given.

    ``slurm``, ``repo/slurm``, ``oci://ghcr.io/slinkyproject/charts/slurm`` and
    ``./charts/slurm-1.2.1.tgz`` are all ``slurm``.
    """
    chart = str(props.get("chart", "")).rstrip("/").rsplit("/", 1)[-1]
    chart = chart.removesuffix(".tgz").removesuffix(".tar.gz")
    return _PACKAGED_CHART.sub("", chart)


def aws_managed_key(key: Any) -> bool:
    """Whether a KMS key input is missing or names an AWS managed key.

    ``alias/aws/...`` bare or in an ARN: a "customer managed key" rule fails on both.
    """
    text = str(key or "")
    return not text or text.startswith("alias/aws/") or ":alias/aws/" in text


@dataclass(frozen=True)
class SecurityGroupRule:
    """One rule of a security group, whichever resource shape declared it."""

    direction: str
    """``ingress`` or ``egress``."""
    protocol: str
    """``tcp``, ``udp``, ``icmp`` or ``-1`` (every protocol)."""
    from_port: int
    to_port: int
    addresses: list[str]
    """CIDRs and prefix lists the rule admits or sends to."""
    groups: list[Any]
    """Security groups (ids or resources) it admits or sends to; ``self`` included."""
    where: str
    """What declared it, for messages."""


def _protocol(value: Any) -> str:
    text = str(value if value is not None else "-1").lower()
    return {"all": "-1", "6": "tcp", "17": "udp", "1": "icmp"}.get(text, text)


def security_group_rules(
    resources: Sequence[PolicyResource], group: PolicyResource
) -> list[SecurityGroupRule]:
    """Every rule of ``group``, whichever of four shapes declared it.

    Inline ``ingress``/``egress``, and the separate ``aws.ec2.SecurityGroupRule``,
    ``aws.vpc.SecurityGroupIngressRule`` and ``aws.vpc.SecurityGroupEgressRule`` resources.
    """
    found = []
    for direction in ("ingress", "egress"):
        for rule in group.props.get(direction) or []:
            found.append(
                SecurityGroupRule(
                    direction, _protocol(rule.get("protocol")), int(rule.get("fromPort") or 0),
                    int(rule.get("toPort") or 0),
                    [*as_list(rule.get("cidrBlocks")), *as_list(rule.get("ipv6CidrBlocks")),
                     *as_list(rule.get("prefixListIds"))],
                    [*as_list(rule.get("securityGroups")), *(["self"] if rule.get("self") else [])],
                    f"{group.name} inline {direction}",
                )
            )  # fmt: skip
    for other in resources:
        if group not in other.property_dependencies.get("securityGroupId", []):
            continue
        props = other.props
        if other.resource_type == "aws:ec2/securityGroupRule:SecurityGroupRule":
            found.append(
                SecurityGroupRule(
                    str(props.get("type")), _protocol(props.get("protocol")),
                    int(props.get("fromPort") or 0), int(props.get("toPort") or 0),
                    [*as_list(props.get("cidrBlocks")), *as_list(props.get("ipv6CidrBlocks")),
                     *as_list(props.get("prefixListIds"))],
                    [*as_list(props.get("sourceSecurityGroupId")),
                     *(["self"] if props.get("self") else [])],
                    other.name,
                )
            )  # fmt: skip
        elif other.resource_type in (
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
        ):
            direction = "ingress" if "Ingress" in other.resource_type else "egress"
            protocol = _protocol(props.get("ipProtocol"))
            found.append(
                SecurityGroupRule(
                    direction, protocol, int(props.get("fromPort") or 0),
                    int(props.get("toPort") or 0),
                    [*as_list(props.get("cidrIpv4")), *as_list(props.get("cidrIpv6")),
                     *as_list(props.get("prefixListId"))],
                    as_list(props.get("referencedSecurityGroupId")),
                    other.name,
                )
            )  # fmt: skip
    return found


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
    "HELM_TYPES",
    "MANDATORY",
    "ReportViolation",
    "ResourceValidationArgs",
    "SecurityGroupRule",
    "as_list",
    "aws_managed_key",
    "chart_name",
    "decoded",
    "is_true",
    "policy_documents",
    "provider_default_tags",
    "resource_policy",
    "security_group_rules",
    "statements",
]
