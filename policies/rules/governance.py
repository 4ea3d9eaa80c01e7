"""Governance: tags, protection of stateful resources, pinned charts, VPC flow logs."""

from __future__ import annotations

import importlib
import inspect
import re
from functools import cache

from pulumi_policy import StackValidationArgs, StackValidationPolicy

from .common import (
    MANDATORY,
    ReportViolation,
    ResourceValidationArgs,
    provider_default_tags,
    resource_policy,
)

REQUIRED_TAGS = ["owner", "cost-center", "environment"]
STATEFUL_TYPES = [
    "eks:index:Cluster",
    "aws:eks/cluster:Cluster",
    "aws:kms/key:Key",
    "aws:fsx/lustreFileSystem:LustreFileSystem",
    "aws:s3/bucket:Bucket",
    "aws:s3/bucketV2:BucketV2",
    "aws:ebs/volume:Volume",
    "aws:efs/fileSystem:FileSystem",
    "aws:rds/instance:Instance",
    # Slurm's job history (mariadb-operator): deleting the resource deletes the database.
    "kubernetes:k8s.mariadb.com/v1alpha1:MariaDB",
]
HELM_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
KUSTOMIZE_TYPES = ("kubernetes:kustomize/v2:Directory",)
PINNED_REF = re.compile(r"[?&]ref=v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
EXACT_VERSION = re.compile(r"v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?")


@cache
def accepts_tags(resource_type: str) -> bool:
    """Whether a pulumi-aws resource type has a ``tags`` input (read from the SDK itself)."""
    try:
        _, module_path, class_name = resource_type.split(":")
        module_name = module_path.split("/", 1)[0]
        module = importlib.import_module(
            "pulumi_aws" if module_name == "index" else f"pulumi_aws.{module_name}"
        )
        resource_class = getattr(module, class_name)
        return "tags" in inspect.signature(resource_class._internal_init).parameters
    except (ValueError, ImportError, AttributeError):
        return False


def _check_tags(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if not args.resource_type.startswith("aws:") or not accepts_tags(args.resource_type):
        return
    tags = {**provider_default_tags(args), **(args.props.get("tags") or {})}
    required: list[str] = args.get_config().get("requiredTags", REQUIRED_TAGS)
    missing = [key for key in required if not tags.get(key)]
    if missing:
        report(
            f"missing required tags {missing} (on the resource or the provider's defaults)", None
        )


def _check_protected(args: ResourceValidationArgs, report: ReportViolation) -> None:
    config = args.get_config()
    if args.resource_type not in config.get("statefulTypes", STATEFUL_TYPES):
        return
    if not config.get("requireProtection", False):
        args.not_applicable("this environment does not require protection")
    if not args.opts.protect:
        report(f"{args.resource_type} holds state and must be protected from deletion", None)


def _check_helm_version(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type in KUSTOMIZE_TYPES:
        directory = str(args.props.get("directory", ""))
        remote = "://" in directory or directory.startswith("github.com")
        if remote and not PINNED_REF.search(directory):
            report(
                f"kustomization {directory!r} is not pinned to a release tag (?ref=vX.Y.Z)", None
            )
        return
    if args.resource_type not in HELM_TYPES:
        return
    version = args.props.get("version")
    if not version:
        report(
            f"chart {args.props.get('chart')!r} has no version: every update may change it", None
        )
    elif not EXACT_VERSION.fullmatch(str(version)):
        report(
            f"chart version {version!r} is not an exact version (no latest, ranges or branches)",
            None,
        )


def _check_flow_logs(args: StackValidationArgs, report: ReportViolation) -> None:
    flow_logs = [r for r in args.resources if r.resource_type == "aws:ec2/flowLog:FlowLog"]
    covered_urns = {
        dependency.urn
        for flow_log in flow_logs
        for dependency in flow_log.property_dependencies.get("vpcId", [])
    }
    for vpc in args.resources:
        if vpc.resource_type == "aws:ec2/vpc:Vpc" and vpc.urn not in covered_urns:
            report(f"VPC {vpc.name} has no flow log", vpc.urn)


POLICIES = [
    resource_policy(
        "required-tags",
        "Every taggable AWS resource carries the owner, cost-center and environment tags "
        "(directly or through the provider's default tags), so cost and ownership are known.",
        _check_tags,
        config={
            "requiredTags": {"type": "array", "items": {"type": "string"}, "default": REQUIRED_TAGS}
        },
    ),
    resource_policy(
        "stateful-resources-protected",
        "Where the environment requires it, resources that hold state (cluster, keys, file "
        "systems, buckets) are protected, so a bad change cannot delete them.",
        _check_protected,
        config={
            "requireProtection": {"type": "boolean", "default": False},
            "statefulTypes": {
                "type": "array",
                "items": {"type": "string"},
                "default": STATEFUL_TYPES,
            },
        },
    ),
    resource_policy(
        "helm-chart-pinned",
        "Helm charts are pinned to an exact version (never latest, a branch or a range), and "
        "remote kustomizations to a release tag, so the software a preview shows is the "
        "software that gets installed.",
        _check_helm_version,
    ),
    StackValidationPolicy(
        name="vpc-flow-logs",
        description="Every VPC the stack creates has flow logs, the record needed to investigate "
        "traffic after an incident.",
        validate=_check_flow_logs,
        enforcement_level=MANDATORY,
    ),
]
