"""Shared storage policies: buckets, and the Lustre file system's key, zone and ports.

Buckets must not leak or lose data; the file system must be encrypted, next to the training
nodes, and open only on the Lustre ports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import PolicyResource, StackValidationArgs, StackValidationPolicy

from .common import MANDATORY, ReportViolation, as_list, decoded, is_true, statements

BUCKET = "aws:s3/bucket:Bucket"
FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SUBNET = "aws:ec2/subnet:Subnet"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
LUSTRE_PORTS = frozenset({988, *range(1018, 1024)})


def _attached(
    resources: list[PolicyResource], owner: PolicyResource, kind: str
) -> list[PolicyResource]:
    """Resources of ``kind`` whose ``bucket`` input comes from ``owner``."""
    return [
        r
        for r in resources
        if r.resource_type == kind and owner in r.property_dependencies.get("bucket", [])
    ]


def _bucket_problems(resources: list[PolicyResource], bucket: PolicyResource) -> list[str]:
    def one(kind: str) -> Mapping[str, Any] | None:
        found = _attached(resources, bucket, f"aws:s3/{kind}")
        return found[0].props if found else None

    problems = []
    versioning = one("bucketVersioning:BucketVersioning")
    if (
        versioning is None
        or (versioning.get("versioningConfiguration") or {}).get("status") != "Enabled"
    ):
        problems.append("versioning is not enabled")
    encryption = one(
        "bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    )
    defaults = [
        (rule.get("applyServerSideEncryptionByDefault") or {})
        for rule in (encryption or {}).get("rules") or []
    ]
    if not any(d.get("sseAlgorithm") == "aws:kms" and d.get("kmsMasterKeyId") for d in defaults):
        problems.append("objects are not encrypted with a customer KMS key")
    block = one("bucketPublicAccessBlock:BucketPublicAccessBlock")
    flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    if block is None or not all(is_true(block.get(flag)) for flag in flags):
        problems.append("public access is not fully blocked")
    policy = one("bucketPolicy:BucketPolicy")
    document = decoded((policy or {}).get("policy")) or {}
    tls_denied = any(
        statement.get("Effect") == "Deny"
        and str((statement.get("Condition") or {}).get("Bool", {}).get("aws:SecureTransport"))
        .lower() == "false"
        for statement in (statements(document) if isinstance(document, Mapping) else [])
    )  # fmt: skip
    if not tls_denied:
        problems.append("the bucket policy does not deny requests without TLS")
    lifecycle = one("bucketLifecycleConfiguration:BucketLifecycleConfiguration")
    aborts = any(
        rule.get("status") == "Enabled" and rule.get("abortIncompleteMultipartUpload")
        for rule in (lifecycle or {}).get("rules") or []
    )
    if not aborts:
        problems.append("no lifecycle rule aborts incomplete multipart uploads")
    return problems


def _check_buckets(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    for bucket in resources:
        if bucket.resource_type == BUCKET:
            for problem in _bucket_problems(resources, bucket):
                report(f"bucket {bucket.name}: {problem}", bucket.urn)


def _check_fsx_encryption(args: StackValidationArgs, report: ReportViolation) -> None:
    for file_system in args.resources:
        if file_system.resource_type != FILE_SYSTEM:
            continue
        key = file_system.props.get("kmsKeyId")
        if not key or ":alias/aws/" in str(key):
            report(
                "the file system is not encrypted with a customer managed KMS key", file_system.urn
            )


def _training_zones(resources: list[PolicyResource]) -> set[str]:
    """Zones the EFA pools are pinned to (one each, per the efa-pool-fabric policy)."""
    efa_classes = {
        str((r.props.get("metadata") or {}).get("name"))
        for r in resources
        if r.resource_type == NODE_CLASS
        and any(i.get("interfaceType") == "efa-only"
                for i in (r.props.get("spec") or {}).get("networkInterfaces") or [])
    }  # fmt: skip
    zones: set[str] = set()
    for pool in resources:
        if pool.resource_type != NODE_POOL:
            continue
        template_spec = ((pool.props.get("spec") or {}).get("template") or {}).get("spec") or {}
        if str((template_spec.get("nodeClassRef") or {}).get("name")) not in efa_classes:
            continue
        for requirement in template_spec.get("requirements") or []:
            if requirement.get("key") == "topology.kubernetes.io/zone":
                zones.update(str(v) for v in as_list(requirement.get("values")))
    return zones


def _check_fsx_zone(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    zones = _training_zones(resources)
    for file_system in resources:
        if file_system.resource_type != FILE_SYSTEM or not zones:
            continue
        subnets = [s for s in file_system.property_dependencies.get("subnetIds", [])
                   if s.resource_type == SUBNET]  # fmt: skip
        fs_zones = {str(s.props.get("availabilityZone")) for s in subnets}
        if not subnets:
            continue  # an existing subnet: its zone is not in the plan
        if fs_zones != zones:
            report(
                f"the file system is in {sorted(fs_zones)} but the EFA pools train in "
                f"{sorted(zones)}: every read would cross zones",
                file_system.urn,
            )


def _admitted_ports(rule: Mapping[str, Any]) -> set[int] | None:
    """Ports an ingress rule admits (None for every port: protocol -1)."""
    if str(rule.get("protocol")) in ("-1", "all"):
        return None
    return set(range(int(rule.get("fromPort", 0)), int(rule.get("toPort", 0)) + 1))


def _check_fsx_ports(args: StackValidationArgs, report: ReportViolation) -> None:
    for file_system in args.resources:
        if file_system.resource_type != FILE_SYSTEM:
            continue
        groups = [g for g in file_system.property_dependencies.get("securityGroupIds", [])
                  if g.resource_type == SECURITY_GROUP]  # fmt: skip
        efa = is_true(file_system.props.get("efaEnabled"))
        for group in groups:
            admitted: set[int] = set()
            for rule in group.props.get("ingress") or []:
                if as_list(rule.get("cidrBlocks")) or as_list(rule.get("ipv6CidrBlocks")):
                    report(f"group {group.name} admits address ranges, not node groups", group.urn)
                ports = _admitted_ports(rule)
                if ports is None and efa:
                    continue  # EFA needs all traffic, from groups (checked above)
                if ports is None or rule.get("protocol") != "tcp":
                    report(f"group {group.name} admits protocol {rule.get('protocol')}", group.urn)
                    continue
                admitted |= ports
            extra = sorted(admitted - LUSTRE_PORTS)
            missing = sorted(LUSTRE_PORTS - admitted)
            if extra:
                report(f"group {group.name} opens ports {extra} beyond Lustre's", group.urn)
            if missing:
                report(f"group {group.name} does not open Lustre ports {missing}", group.urn)


POLICIES = [
    StackValidationPolicy(
        name="buckets-hardened",
        description="Data buckets are versioned, KMS-encrypted, closed to the public, TLS-only "
        "and clean up abandoned multipart uploads: datasets and checkpoints are the asset.",
        validate=_check_buckets,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="fsx-encrypted-customer-key",
        description="The Lustre file system is encrypted with a customer managed KMS key.",
        validate=_check_fsx_encryption,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="fsx-in-training-zone",
        description="The Lustre file system sits in the zone of the EFA pools, so training reads "
        "never cross zones (slower, and billed).",
        validate=_check_fsx_zone,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="fsx-lustre-ports-only",
        description="The file system's security groups open exactly TCP 988 and 1018-1023, to "
        "node security groups, and nothing else inbound (an EFA-enabled file system also takes "
        "all traffic, from groups only).",
        validate=_check_fsx_ports,
        enforcement_level=MANDATORY,
    ),
]
