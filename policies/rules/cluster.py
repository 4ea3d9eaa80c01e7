"""EKS control plane: endpoint exposure, secrets encryption, audit logs, authentication, version.

Each rule reads both ``eks:index:Cluster`` (the pulumi-eks component, whose inputs are what this
program writes) and ``aws:eks/cluster:Cluster`` (what the component creates, and what any other
program would use), because a policy that only knew one could be bypassed with the other.
"""

from __future__ import annotations

import ipaddress
from datetime import date
from typing import Any

from components import versions

from .common import (
    ADVISORY,
    ReportViolation,
    ResourceValidationArgs,
    as_list,
    aws_managed_key,
    resource_policy,
)

COMPONENT = "eks:index:Cluster"
CLUSTER = "aws:eks/cluster:Cluster"
REQUIRED_LOG_TYPES = ["api", "audit", "authenticator"]


def _endpoint(args: ResourceValidationArgs) -> tuple[bool, list[str]]:
    """Whether the public endpoint is on, and the CIDRs it admits.

    Both resources default to a PUBLIC endpoint open to 0.0.0.0/0 when the inputs are silent.
    """
    props = args.props
    if args.resource_type == COMPONENT:
        public = props.get("endpointPublicAccess")
        cidrs = props.get("publicAccessCidrs")
    else:
        vpc_config = props.get("vpcConfig") or {}
        public = vpc_config.get("endpointPublicAccess")
        cidrs = vpc_config.get("publicAccessCidrs")
    is_public = public is not False
    return is_public, as_list(cidrs) or (["0.0.0.0/0"] if is_public else [])


def _check_endpoint(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in (COMPONENT, CLUSTER):
        return
    public, cidrs = _endpoint(args)
    if not public:
        return
    config = args.get_config()
    if not config.get("allowPublicEndpoint", False):
        report("the EKS API endpoint is public; set endpoint public access to false", None)
        return
    allowed = [ipaddress.IPv4Network(c) for c in config.get("allowedPublicCidrs", [])]
    for cidr in cidrs:
        network = ipaddress.IPv4Network(cidr, strict=False)
        if not any(network.subnet_of(permitted) for permitted in allowed):
            report(
                f"the EKS API endpoint admits {cidr}, outside the allowed "
                f"{[str(a) for a in allowed]}",
                None,
            )


def _check_secrets_encryption(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = args.props
    if args.resource_type == COMPONENT:
        key_arn = props.get("encryptionConfigKeyArn")
    elif args.resource_type == CLUSTER:
        config = props.get("encryptionConfig") or {}
        if "secrets" not in as_list(config.get("resources")):
            report("Kubernetes secrets are not envelope-encrypted (encryptionConfig)", None)
            return
        key_arn = (config.get("provider") or {}).get("keyArn")
    else:
        return
    if not key_arn:
        report("Kubernetes secrets are not encrypted with a customer KMS key", None)
    elif aws_managed_key(key_arn):
        report(f"secrets key {key_arn} is AWS managed; use a customer managed key", None)


def _check_logs(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in (COMPONENT, CLUSTER):
        return
    enabled = set(as_list(args.props.get("enabledClusterLogTypes")))
    missing = [t for t in args.get_config().get("requiredLogTypes", REQUIRED_LOG_TYPES)
               if t not in enabled]  # fmt: skip
    if missing:
        report(f"control-plane log types not enabled: {', '.join(missing)}", None)


def _check_authentication_mode(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = args.props
    if args.resource_type == COMPONENT:
        mode = props.get("authenticationMode")
    elif args.resource_type == CLUSTER:
        mode = (props.get("accessConfig") or {}).get("authenticationMode")
    else:
        return
    if mode != "API":
        report(f"authentication mode is {mode or 'CONFIG_MAP (default)'}; use API", None)


def _check_version(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in (COMPONENT, CLUSTER):
        return
    version: Any = args.props.get("version")
    supported = args.get_config().get(
        "supportedVersions", list(versions.SUPPORTED_KUBERNETES_VERSIONS)
    )
    if version is None:
        report("no Kubernetes version is pinned; EKS would pick one for you", None)
    elif str(version) not in supported:
        report(f"Kubernetes {version} is not supported here; use one of {supported}", None)


SUPPORT_ENDING_DAYS = 90
"""How long before the end of standard support the platform starts saying so."""


def evaluation_day(args: ResourceValidationArgs) -> date:
    """The day a calendar policy judges by: its ``today`` setting (tests pin it), else today."""
    configured = str(args.get_config().get("today") or "")
    return date.fromisoformat(configured) if configured else date.today()


def _support_window(
    args: ResourceValidationArgs, report: ReportViolation
) -> tuple[str, versions.EksSupportWindow] | None:
    if args.resource_type not in (COMPONENT, CLUSTER):
        return None
    version = args.props.get("version")
    if version is None:
        return None
    window = versions.EKS_SUPPORT_CALENDAR.get(str(version))
    if window is None:
        report(
            f"Kubernetes {version} has no entry in EKS's support calendar "
            "(components/versions.py): add it before using the version",
            None,
        )
        return None
    return str(version), window


def _check_standard_support(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _support_window(args, report)
    if found is None:
        return
    version, window = found
    if evaluation_day(args) > window.standard_support_ends:
        report(
            f"Kubernetes {version} left EKS standard support on {window.standard_support_ends} "
            f"(extended support is billed per cluster-hour and ends "
            f"{window.extended_support_ends}): upgrade one minor version at a time "
            "(docs/upgrades/index.md)",
            None,
        )


def _check_support_ending(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _support_window(args, report)
    if found is None:
        return
    version, window = found
    left = (window.standard_support_ends - evaluation_day(args)).days
    if 0 <= left <= int(args.get_config().get("warningDays", SUPPORT_ENDING_DAYS)):
        report(
            f"Kubernetes {version} leaves EKS standard support on "
            f"{window.standard_support_ends}, in {left} days: plan the upgrade",
            None,
        )


TODAY_SETTING = {"type": "string", "default": "", "description": "YYYY-MM-DD; empty: today"}

POLICIES = [
    resource_policy(
        "eks-endpoint-not-public",
        "The Kubernetes API must not be reachable from the internet, or only from the networks "
        "the environment's policy config allows: a leaked credential is then not enough.",
        _check_endpoint,
        config={
            "allowPublicEndpoint": {"type": "boolean", "default": False},
            "allowedPublicCidrs": {"type": "array", "items": {"type": "string"}, "default": []},
        },
    ),
    resource_policy(
        "eks-secrets-encrypted",
        "Kubernetes secrets (tokens, keys, passwords) must be envelope-encrypted with a customer "
        "managed KMS key, so access to them can be audited and revoked.",
        _check_secrets_encryption,
    ),
    resource_policy(
        "eks-control-plane-logs",
        "The api, audit and authenticator control-plane logs must be on: without them nobody can "
        "tell who did what to the cluster.",
        _check_logs,
        config={
            "requiredLogTypes": {
                "type": "array",
                "items": {"type": "string"},
                "default": REQUIRED_LOG_TYPES,
            }
        },
    ),
    resource_policy(
        "eks-authentication-mode-api",
        "Cluster access must be granted through EKS access entries (authentication mode API), "
        "which IAM and CloudTrail see, not the aws-auth ConfigMap.",
        _check_authentication_mode,
    ),
    resource_policy(
        "eks-supported-version",
        "The Kubernetes version must be pinned to one the platform's add-ons and charts are "
        "validated for.",
        _check_version,
        config={
            "supportedVersions": {
                "type": "array",
                "items": {"type": "string"},
                "default": list(versions.SUPPORTED_KUBERNETES_VERSIONS),
            }
        },
    ),
    resource_policy(
        "eks-version-in-standard-support",
        "The cluster runs a Kubernetes version in EKS standard support (EKS's calendar, "
        "components/versions.py): past it, extended support is billed and then EKS upgrades "
        "the control plane on its own schedule.",
        _check_standard_support,
        config={"today": TODAY_SETTING},
    ),
    resource_policy(
        "eks-version-standard-support-ending",
        f"Within {SUPPORT_ENDING_DAYS} days of the end of its standard support, the cluster's "
        "Kubernetes version is due for an upgrade (advice; after the end, "
        "eks-version-in-standard-support blocks).",
        _check_support_ending,
        enforcement_level=ADVISORY,
        config={
            "today": TODAY_SETTING,
            "warningDays": {"type": "integer", "default": SUPPORT_ENDING_DAYS},
        },
    ),
]
