"""Governance: tags, protection of stateful resources, pinned charts, VPC flow logs."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from pulumi_policy import (
    PolicyConfigSchema,
    PolicyResource,
    StackValidationArgs,
    StackValidationPolicy,
)

from .common import (
    HELM_TYPES,
    MANDATORY,
    ReportViolation,
    ResourceValidationArgs,
    as_list,
    aws_managed_key,
    is_true,
    provider_default_tags,
    resource_policy,
)

REQUIRED_TAGS = ["owner", "cost-center", "environment"]
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AUTOSCALING_GROUP = "aws:autoscaling/group:Group"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
EKS_CLUSTERS = ("eks:index:Cluster", "aws:eks/cluster:Cluster")
FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"
VPC_TYPES = ("aws:ec2/vpc:Vpc", "aws:ec2/defaultVpc:DefaultVpc")
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
KUSTOMIZE_TYPES = ("kubernetes:kustomize/v2:Directory",)
MANIFEST_TYPES = ("kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml/v2:ConfigGroup")
ADDON = "aws:eks/addon:Addon"
PINNED_REF = re.compile(r"[?&]ref=v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
EXACT_VERSION = re.compile(r"v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?")


@cache
def accepts_tags(resource_type: str) -> bool:
    """Whether a pulumi-aws resource type has a ``tags`` input (read from the SDK itself)."""
    try:
        _, module_path, class_name = resource_type.split(":")
        module_name = module_path.split("/", 1)[0]
        if module_name == "index":
            module = importlib.import_module("pulumi_aws")
        else:
            try:
                module = importlib.import_module(f"pulumi_aws.{module_name}")
            except ImportError:  # Python keywords get a trailing underscore (lambda_)
                module = importlib.import_module(f"pulumi_aws.{module_name}_")
        resource_class = getattr(module, class_name)
        return "tags" in inspect.signature(resource_class._internal_init).parameters
    except (ValueError, ImportError, AttributeError):
        return False


def _as_tag_map(tags: Any) -> dict[str, Any]:
    """Tags as a map: most resources take one, an Auto Scaling group a list of {key, value}."""
    if isinstance(tags, Mapping):
        return dict(tags)
    return {str(t.get("key")): t.get("value") for t in as_list(tags) if isinstance(t, Mapping)}


def _launched_tags(args: ResourceValidationArgs) -> Iterator[tuple[str, dict[str, Any]]]:
    """(what, tags) that reach the instances and volumes a resource launches.

    Provider default tags reach the resource itself, never what it launches: Karpenter tags
    instances, volumes and interfaces with the EC2NodeClass's spec.tags, a launch template
    with its tagSpecifications, an Auto Scaling group with the tags it propagates.
    """
    props = args.props
    if args.resource_type == NODE_CLASS:
        yield "instances Karpenter launches", _as_tag_map((props.get("spec") or {}).get("tags"))
    elif args.resource_type == LAUNCH_TEMPLATE:
        specifications = {
            str(s.get("resourceType")): _as_tag_map(s.get("tags"))
            for s in as_list(props.get("tagSpecifications"))
        }
        for resource in ("instance", "volume"):
            yield f"launched {resource}s", specifications.get(resource, {})
    elif args.resource_type == AUTOSCALING_GROUP:
        propagated = [t for t in as_list(props.get("tags")) if is_true(t.get("propagateAtLaunch"))]
        yield "instances the group launches", _as_tag_map(propagated)


def _check_tags(args: ResourceValidationArgs, report: ReportViolation) -> None:
    required: list[str] = args.get_config().get("requiredTags", REQUIRED_TAGS)
    for what, launched in _launched_tags(args):
        missing = [key for key in required if not launched.get(key)]
        if missing:
            report(f"{what} miss required tags {missing}", None)
    if not args.resource_type.startswith("aws:") or not accepts_tags(args.resource_type):
        return
    tags = {**provider_default_tags(args), **_as_tag_map(args.props.get("tags"))}
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


def _remote_unpinned(location: str) -> bool:
    """A manifest URL that can change under the same input (no exact version in its path)."""
    if "://" not in location or location.startswith("file://"):
        return False
    segments = re.split(r"[/?&=@]", location)
    floating = {"latest", "main", "master", "HEAD", "stable"}
    return bool(floating.intersection(segments)) or not any(
        EXACT_VERSION.fullmatch(segment) for segment in segments
    )


def _check_helm_version(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type in MANIFEST_TYPES:
        # yaml/v2 ConfigFile's file and ConfigGroup's files: URLs as well as paths.
        for location in [*as_list(args.props.get("file")), *as_list(args.props.get("files"))]:
            if _remote_unpinned(str(location)):
                report(f"manifest {location!r} is not pinned to a release", None)
        return
    if args.resource_type == ADDON and not args.props.get("addonVersion"):
        report(
            f"EKS add-on {args.props.get('addonName')!r} has no addonVersion: EKS installs its "
            "default, which changes",
            None,
        )
        return
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


def _from_stack_log_group(resource: PolicyResource, *inputs: str) -> bool:
    """Whether one of ``inputs`` of ``resource`` comes from a log group this stack creates."""
    return any(
        dependency.resource_type == LOG_GROUP
        for name in inputs
        for dependency in resource.property_dependencies.get(name, [])
    )


def _check_log_groups(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    group_names = {str(r.props.get("name")) for r in resources if r.resource_type == LOG_GROUP}
    for resource in resources:
        props = resource.props
        if resource.resource_type == LOG_GROUP and aws_managed_key(props.get("kmsKeyId")):
            report(
                f"log group {props.get('name')} is not encrypted with a customer managed KMS "
                "key (CloudWatch's own encryption cannot be audited or revoked)",
                resource.urn,
            )
        # Services that write logs create their group themselves, under no customer key,
        # when the stack does not hand them one.
        elif resource.resource_type in EKS_CLUSTERS:
            name = props.get("name")
            logs = as_list(props.get("enabledClusterLogTypes"))
            if logs and f"/aws/eks/{name}/cluster" not in group_names:
                report(
                    f"cluster {name} logs to /aws/eks/{name}/cluster, which this stack does "
                    "not create: EKS creates it without a customer key or retention",
                    resource.urn,
                )
        elif resource.resource_type == FILE_SYSTEM:
            logging = props.get("logConfiguration") or {}
            if logging.get("level") not in (None, "DISABLED") and not _from_stack_log_group(
                resource, "logConfiguration"
            ):
                report(
                    "the file system logs to a group this stack does not create (without a "
                    "destination FSx writes to /aws/fsx/lustre under no customer key)",
                    resource.urn,
                )
        elif resource.resource_type == FLOW_LOG and props.get("logDestinationType") in (
            None, "cloud-watch-logs"
        ) and not _from_stack_log_group(resource, "logDestination", "logGroupName"):  # fmt: skip
            report(
                f"flow log {resource.name} writes to a log group this stack does not create, "
                "so its key cannot be checked",
                resource.urn,
            )


def _check_flow_logs(args: StackValidationArgs, report: ReportViolation) -> None:
    allowed: list[str] = args.get_config().get("trafficTypes", ["ALL"])
    flow_logs = [r for r in args.resources if r.resource_type == FLOW_LOG]
    covered_urns = set()
    for flow_log in flow_logs:
        traffic = flow_log.props.get("trafficType")
        for vpc in flow_log.property_dependencies.get("vpcId", []):
            if traffic in allowed:
                covered_urns.add(vpc.urn)
            else:
                report(
                    f"flow log {flow_log.name} records only {traffic} traffic of VPC {vpc.name}; "
                    f"this environment needs {' or '.join(allowed)}",
                    flow_log.urn,
                )
    for vpc in args.resources:
        if vpc.resource_type in VPC_TYPES and vpc.urn not in covered_urns:
            report(f"VPC {vpc.name} has no flow log of the traffic it must record", vpc.urn)


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
        "Helm charts are pinned to an exact version (never latest, a branch or a range), "
        "remote kustomizations to a release tag, manifest URLs to a release and EKS add-ons "
        "to a build, so the software a preview shows is the software that gets installed.",
        _check_helm_version,
    ),
    StackValidationPolicy(
        name="log-groups-encrypted-customer-key",
        description="Log groups (control plane, flow logs, file system) are encrypted with a "
        "customer managed KMS key: they record who did what, and their key policy says who may "
        "read them. So every service that logs writes to a group this stack creates, never "
        "one the service creates itself.",
        validate=_check_log_groups,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="vpc-flow-logs",
        description="Every VPC the stack creates (or manages as the default VPC) has flow logs "
        "of all its traffic "
        "(an environment may accept less in its policy config), the record needed to "
        "investigate traffic after an incident.",
        validate=_check_flow_logs,
        enforcement_level=MANDATORY,
        config_schema=PolicyConfigSchema(
            properties={
                "trafficTypes": {
                    "type": "array",
                    "items": {"enum": ["ALL", "ACCEPT", "REJECT"]},
                    "default": ["ALL"],
                }
            }
        ),
    ),
]
