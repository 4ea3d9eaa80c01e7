"""Shared storage policies: buckets, and the Lustre file system's key, zone and ports.

Buckets must not leak or lose data; the file system must be encrypted, next to the training
nodes, and open only on the Lustre ports.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import PolicyResource, StackValidationArgs, StackValidationPolicy

from components.config.storage import NO_ACCESS_TIME_OPTIONS
from components.node_pools import LUSTRE_CLIENT_LABEL
from components.storage import CSI_DRIVER
from components.storage.layout import IMPORT_ONLY_DIRECTORY_MODE
from components.teams import TEAM_LABEL

from . import tenancy
from .common import (
    MANDATORY,
    ReportViolation,
    as_list,
    aws_managed_key,
    decoded,
    is_true,
    security_group_rules,
    statements,
)

BUCKET = "aws:s3/bucket:Bucket"
FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SUBNET = "aws:ec2/subnet:Subnet"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
ZONE = "topology.kubernetes.io/zone"
ZONE_ID = "topology.k8s.aws/zone-id"
LUSTRE_PORTS = frozenset({988, *range(1018, 1024)})


BUCKET_TYPES = frozenset({BUCKET, "aws:s3/bucketV2:BucketV2"})
SEPARATE_RULE_TYPES = frozenset({
    "aws:ec2/securityGroupRule:SecurityGroupRule",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
})  # fmt: skip
# Each setting a hardened bucket needs: the separate resources that can declare it (the
# V2 tokens are still registrable classes in pulumi-aws 7.x) and the deprecated inline
# argument of Bucket (singular) and BucketV2 (plural) that declares the same fact.
BUCKET_SETTINGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "versioning": (
        ("aws:s3/bucketVersioning:BucketVersioning",
         "aws:s3/bucketVersioningV2:BucketVersioningV2"),
        ("versioning", "versionings"),
    ),
    "encryption": (
        ("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
         "aws:s3/bucketServerSideEncryptionConfigurationV2:"
         "BucketServerSideEncryptionConfigurationV2"),
        ("serverSideEncryptionConfiguration", "serverSideEncryptionConfigurations"),
    ),
    "public access block": (("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",), ()),
    "policy": (("aws:s3/bucketPolicy:BucketPolicy",), ("policy",)),
    "lifecycle": (
        ("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
         "aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2"),
        ("lifecycleRules",),
    ),
    "access logging": (
        ("aws:s3/bucketLogging:BucketLogging", "aws:s3/bucketLoggingV2:BucketLoggingV2"),
        ("logging", "loggings"),
    ),
}  # fmt: skip
LOGGING_TYPES = frozenset(BUCKET_SETTINGS["access logging"][0])


def _found(value: Any, key: str) -> Iterator[Any]:
    """Every value under ``key`` at any depth.

    The inline and separate shapes nest the same fields under singular objects or lists.
    """
    value = decoded(value)
    if isinstance(value, Mapping):
        for name, inner in value.items():
            if name == key:
                yield inner
            yield from _found(inner, key)
    elif isinstance(value, Sequence) and not isinstance(value, str):  # also policy proxies
        for inner in value:
            yield from _found(inner, key)


def _setting_sources(
    resources: list[PolicyResource], bucket: PolicyResource
) -> dict[str, list[tuple[str, Any]]]:
    """For each setting, every (where, value) that declares it for ``bucket``."""
    sources: dict[str, list[tuple[str, Any]]] = {}
    for setting, (kinds, inline_keys) in BUCKET_SETTINGS.items():
        found = [
            (r.name, r.props)
            for r in resources
            if r.resource_type in kinds and bucket in r.property_dependencies.get("bucket", [])
        ]
        found += [
            (f"{bucket.name}.{key}", bucket.props[key])
            for key in inline_keys
            if bucket.props.get(key) not in (None, [], {}, "")
        ]
        sources[setting] = found
    return sources


def _versioned(value: Any) -> bool:
    return any(status == "Enabled" for status in _found(value, "status")) or any(
        is_true(enabled) for enabled in _found(value, "enabled")
    )


def _customer_key_encrypted(value: Any) -> bool:
    for default in [
        *_found(value, "applyServerSideEncryptionByDefault"),
        *_found(value, "applyServerSideEncryptionByDefaults"),
    ]:
        for one in as_list(default):
            if one.get("sseAlgorithm") in ("aws:kms", "aws:kms:dsse") and not aws_managed_key(
                one.get("kmsMasterKeyId")
            ):
                return True
    return False


def _s3_key_encrypted(value: Any) -> bool:
    """SSE-S3 by default: what S3 server access log delivery requires of its destination."""
    return any(
        one.get("sseAlgorithm") == "AES256"
        for key in ("applyServerSideEncryptionByDefault", "applyServerSideEncryptionByDefaults")
        for default in _found(value, key)
        for one in as_list(default)
    )


def _logs_elsewhere(value: Any) -> bool:
    return any(target not in (None, "") for target in _found(value, "targetBucket"))


def _public_blocked(value: Any) -> bool:
    flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    return isinstance(value, Mapping) and all(is_true(value.get(flag)) for flag in flags)


def _tls_denied(value: Any) -> bool:
    if isinstance(value, Mapping) and "policy" in value:  # the BucketPolicy resource
        value = value["policy"]
    document = decoded(value) or {}
    return any(
        statement.get("Effect") == "Deny"
        and str((statement.get("Condition") or {}).get("Bool", {}).get("aws:SecureTransport"))
        .lower() == "false"
        for statement in (statements(document) if isinstance(document, Mapping) else [])
    )  # fmt: skip


def _aborts_uploads(value: Any) -> bool:
    rules = value.get("rules") if isinstance(value, Mapping) and "rules" in value else value
    return any(
        (rule.get("status") == "Enabled" or is_true(rule.get("enabled")))
        and (rule.get("abortIncompleteMultipartUpload") or rule.get(
            "abortIncompleteMultipartUploadDays"))
        for rule in as_list(decoded(rules))
        if isinstance(rule, Mapping)
    )  # fmt: skip


BUCKET_REQUIREMENTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "versioning": (_versioned, "versioning is not enabled"),
    "encryption": (_customer_key_encrypted, "objects are not encrypted with a customer KMS key"),
    "public access block": (_public_blocked, "public access is not fully blocked"),
    "policy": (_tls_denied, "the bucket policy does not deny requests without TLS"),
    "lifecycle": (_aborts_uploads, "no lifecycle rule aborts incomplete multipart uploads"),
    "access logging": (_logs_elsewhere, "its server access logs go nowhere"),
}


LOG_TARGET_REQUIREMENTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    **BUCKET_REQUIREMENTS,
    "encryption": (
        _s3_key_encrypted,
        "it receives server access logs, which S3 delivers only to SSE-S3 (AES256) buckets",
    ),
}


def _is_log_target(resources: list[PolicyResource], bucket: PolicyResource) -> bool:
    """Some bucket's server access logs go to ``bucket``."""
    return any(
        r.resource_type in LOGGING_TYPES
        and bucket in r.property_dependencies.get("targetBucket", [])
        for r in resources
    )


def _bucket_problems(resources: list[PolicyResource], bucket: PolicyResource) -> list[str]:
    """What ``bucket`` lacks.

    A data bucket logs its requests into another bucket. The bucket that receives the logs is
    SSE-S3 encrypted and logs nothing itself (S3 user guide, "Enabling Amazon S3 server access
    logging": logging the log bucket would loop, and KMS destinations get no logs).
    """
    problems = []
    log_target = _is_log_target(resources, bucket)
    requirements = LOG_TARGET_REQUIREMENTS if log_target else BUCKET_REQUIREMENTS
    for setting, declared in _setting_sources(resources, bucket).items():
        if setting == "access logging" and log_target:
            if declared:
                problems.append("it receives server access logs and must not log itself")
            continue
        holds, problem = requirements[setting]
        if len(declared) > 1:
            # AWS keeps one configuration per bucket; which one wins depends on apply order.
            problems.append(
                f"its {setting} is declared {len(declared)} times "
                f"({', '.join(where for where, _ in declared)}); AWS keeps only one"
            )
        elif not declared or not holds(declared[0][1]):
            problems.append(problem)
    return problems


def _check_buckets(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    for bucket in resources:
        if bucket.resource_type in BUCKET_TYPES:
            for problem in _bucket_problems(resources, bucket):
                report(f"bucket {bucket.name}: {problem}", bucket.urn)


def _check_fsx_encryption(args: StackValidationArgs, report: ReportViolation) -> None:
    for file_system in args.resources:
        if file_system.resource_type != FILE_SYSTEM:
            continue
        key = file_system.props.get("kmsKeyId")
        if aws_managed_key(key):
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
        if pool.resource_type == NODE_POOL and _node_class_name(pool) in efa_classes:
            zones |= _pool_zones(pool) or set()
    return zones


def _client_groups(resources: list[PolicyResource], file_system: PolicyResource) -> set[str]:
    """URNs of the groups the file system's groups admit: its Lustre clients.

    Inline rules and separate rule resources alike (the same fact, two shapes).
    """
    own = [g for g in file_system.property_dependencies.get("securityGroupIds", [])
           if g.resource_type == SECURITY_GROUP]  # fmt: skip
    clients: set[str] = set()
    for group in own:
        for key in ("ingress", "egress"):
            clients |= {d.urn for d in group.property_dependencies.get(key, [])
                        if d.resource_type == SECURITY_GROUP}  # fmt: skip
        for rule in resources:
            dependencies = rule.property_dependencies
            if rule.resource_type in SEPARATE_RULE_TYPES and group.urn in {
                d.urn for d in dependencies.get("securityGroupId", [])
            }:
                for key in ("referencedSecurityGroupId", "sourceSecurityGroupId"):
                    clients |= {d.urn for d in dependencies.get(key, [])
                                if d.resource_type == SECURITY_GROUP}  # fmt: skip
    return clients - {g.urn for g in own}


def _template_spec(pool: PolicyResource) -> Any:
    """A NodePool's ``spec.template.spec`` (empty when absent)."""
    return ((pool.props.get("spec") or {}).get("template") or {}).get("spec") or {}


def _node_class_name(pool: PolicyResource) -> str:
    return str((_template_spec(pool).get("nodeClassRef") or {}).get("name"))


def _pool_zones(pool: PolicyResource) -> set[str] | None:
    """The zones a NodePool's zone requirement allows; None without one (any zone)."""
    for requirement in _template_spec(pool).get("requirements") or []:
        if requirement.get("key") == ZONE:
            return {str(v) for v in as_list(requirement.get("values"))}
    return None


def _check_fsx_zone(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    zones = _training_zones(resources)
    for file_system in resources:
        if file_system.resource_type != FILE_SYSTEM:
            continue
        subnets = [s for s in file_system.property_dependencies.get("subnetIds", [])
                   if s.resource_type == SUBNET]  # fmt: skip
        fs_zones = {str(s.props.get("availabilityZone")) for s in subnets}
        if not subnets:
            continue  # an existing subnet: its zone is not in the plan
        if zones and fs_zones != zones:
            report(
                f"the file system is in {sorted(fs_zones)} but the EFA pools train in "
                f"{sorted(zones)}: every read would cross zones",
                file_system.urn,
            )
        client_classes = _client_node_classes(resources, file_system)
        subnets_in_plan = [r for r in resources if r.resource_type == SUBNET]
        for name, node_class in client_classes.items():
            class_zones = {str(d.props.get("availabilityZone"))
                           for d in _selected_subnets(node_class, subnets_in_plan)}  # fmt: skip
            if class_zones - fs_zones:
                report(f"EC2NodeClass {name} carries the Lustre client group but has subnets in "
                       f"{sorted(class_zones - fs_zones)}, outside the file system's zone "
                       f"{sorted(fs_zones)}", node_class.urn)  # fmt: skip
        for pool in resources:
            if pool.resource_type != NODE_POOL or _node_class_name(pool) not in client_classes:
                continue
            pool_name = (pool.props.get("metadata") or {}).get("name")
            requirements = _template_spec(pool).get("requirements") or []
            if any(r.get("key") == ZONE_ID for r in requirements):
                report(f"NodePool {pool_name} mounts the file system but names zones by id "
                       f"({ZONE_ID}), which the plan cannot hold to the file system's zone "
                       f"{sorted(fs_zones)}: require {ZONE} instead", pool.urn)  # fmt: skip
                continue
            pool_zones = _pool_zones(pool)
            if pool_zones is None or pool_zones - fs_zones:
                report(f"NodePool {pool_name} mounts the "
                       f"file system (its class carries the Lustre client group) but may launch "
                       f"in zones {sorted(pool_zones) if pool_zones else 'any'}, not only its "
                       f"zone {sorted(fs_zones)}: reads would cross zones", pool.urn)  # fmt: skip


def _client_node_classes(
    resources: list[PolicyResource], file_system: PolicyResource
) -> dict[str, PolicyResource]:
    """The EC2NodeClasses (by name) whose nodes carry one of the file system's client groups."""
    clients = _client_groups(resources, file_system)
    client_groups = [r for r in resources if r.urn in clients]
    return {
        str((node_class.props.get("metadata") or {}).get("name")): node_class
        for node_class in resources
        if node_class.resource_type == NODE_CLASS and _selects_any(node_class, client_groups)
    }


def _requires_client_label(term: Any) -> bool:
    return any(
        e.get("key") == LUSTRE_CLIENT_LABEL
        and e.get("operator") == "In"
        and as_list(e.get("values")) == ["true"]
        for e in as_list((term or {}).get("matchExpressions"))
    )


def _check_lustre_placement(args: StackValidationArgs, report: ReportViolation) -> None:
    """Lustre volumes mount only on Lustre clients, and every client pool says it is one."""
    resources = list(args.resources)
    client_classes: dict[str, PolicyResource] = {}
    for file_system in resources:
        if file_system.resource_type == FILE_SYSTEM:
            client_classes |= _client_node_classes(resources, file_system)
    for pool in resources:
        if pool.resource_type != NODE_POOL:
            continue
        template = (pool.props.get("spec") or {}).get("template") or {}
        labelled = ((template.get("metadata") or {}).get("labels") or {}).get(
            LUSTRE_CLIENT_LABEL
        ) == "true"
        mounts = _node_class_name(pool) in client_classes
        pool_name = (pool.props.get("metadata") or {}).get("name")
        if labelled and not mounts:
            report(f"NodePool {pool_name} is labelled {LUSTRE_CLIENT_LABEL}=true but its "
                   "EC2NodeClass carries no Lustre client group: pods with Lustre claims would "
                   "land on nodes that cannot reach the file system", pool.urn)  # fmt: skip
        elif mounts and not labelled:
            report(f"NodePool {pool_name} carries the Lustre client group but not the label "
                   f"{LUSTRE_CLIENT_LABEL}=true the Lustre volumes require: no pod with a Lustre "
                   "claim ever lands on its nodes", pool.urn)  # fmt: skip
    for volume, spec in _lustre_volumes(resources):
        required = ((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
        terms = as_list(required)
        if not terms or not all(_requires_client_label(term) for term in terms):
            report(f"Lustre volume {volume.name} may mount on any node: require "
                   f"{LUSTRE_CLIENT_LABEL} In [true] in every term of spec.nodeAffinity, or a pod "
                   "lands on a node without the client group and waits in ContainerCreating",
                   volume.urn)  # fmt: skip


def _check_lustre_access_times(args: StackValidationArgs, report: ReportViolation) -> None:
    """Every Lustre volume is mounted read-write with access times (release goes by them)."""
    for volume, spec in _lustre_volumes(list(args.resources)):
        if spec["csi"].get("readOnly"):
            report(f"Lustre volume {volume.name} is read-only: Linux records no access time "
                   "through a read-only mount, so the release task frees files jobs read every "
                   "day; mount it read-write and let the directory's mode "
                   f"({IMPORT_ONLY_DIRECTORY_MODE}) keep jobs from writing",
                   volume.urn)  # fmt: skip
        options = NO_ACCESS_TIME_OPTIONS & {str(o) for o in as_list(spec.get("mountOptions"))}
        if options:
            report(f"Lustre volume {volume.name} mounts with {sorted(options)}: no access "
                   "times reach the file system, so release frees files in daily use",
                   volume.urn)  # fmt: skip


def _tags_match(wanted: Any, resource: PolicyResource) -> bool:
    """Karpenter's tag selector: every tag asked for is on the resource ("*": any value)."""
    tags = resource.props.get("tags") or {}
    return bool(wanted) and all(
        key in tags and (value == "*" or tags[key] == value) for key, value in wanted.items()
    )


def _selects_any(node_class: PolicyResource, groups: list[PolicyResource]) -> bool:
    """Whether an EC2NodeClass's security group terms select one of ``groups``.

    By id (the program's shape: a dependency on the group), by tags, or by name, as
    Karpenter's ``securityGroupSelectorTerms`` allow (karpenter-provider-aws v1
    EC2NodeClass: id, tags, name).
    """
    depends = {d.urn for d in node_class.property_dependencies.get("spec", [])}
    if depends & {g.urn for g in groups}:
        return True
    terms = (node_class.props.get("spec") or {}).get("securityGroupSelectorTerms") or []
    for term in terms:
        for group in groups:
            if term.get("tags") and _tags_match(term["tags"], group):
                return True
            if term.get("name") and term["name"] == group.props.get("name"):
                return True
    return False


def _selected_subnets(
    node_class: PolicyResource, subnets: list[PolicyResource]
) -> list[PolicyResource]:
    """The plan's subnets an EC2NodeClass launches into: by id (dependency) or by tags."""
    selected = [d for d in node_class.property_dependencies.get("spec", [])
                if d.resource_type == SUBNET]  # fmt: skip
    terms = (node_class.props.get("spec") or {}).get("subnetSelectorTerms") or []
    selected += [s for s in subnets for term in terms
                 if term.get("tags") and _tags_match(term["tags"], s)]  # fmt: skip
    return selected


def _check_fsx_ports(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    for file_system in resources:
        if file_system.resource_type != FILE_SYSTEM:
            continue
        groups = [g for g in file_system.property_dependencies.get("securityGroupIds", [])
                  if g.resource_type == SECURITY_GROUP]  # fmt: skip
        if len(as_list(file_system.props.get("securityGroupIds"))) > len(groups):
            report("the file system uses a security group this stack does not create, so its "
                   "rules cannot be checked", file_system.urn)  # fmt: skip
        efa = is_true(file_system.props.get("efaEnabled"))
        for group in groups:
            opened: dict[str, set[int]] = {"ingress": set(), "egress": set()}
            # Inline rules and separate rule resources alike: the same fact, several shapes.
            for rule in security_group_rules(resources, group):
                verb = "admits" if rule.direction == "ingress" else "sends to"
                if rule.addresses:
                    report(f"{rule.where} {verb} address ranges {rule.addresses}, not node "
                           "groups", group.urn)  # fmt: skip
                if rule.protocol == "-1" and efa:
                    continue  # EFA needs all traffic, to and from groups (checked above)
                if rule.protocol != "tcp":
                    report(f"{rule.where} {verb} protocol {rule.protocol}", group.urn)
                    continue
                opened[rule.direction] |= set(range(rule.from_port, rule.to_port + 1))
            for direction, ports in opened.items():
                extra = sorted(ports - LUSTRE_PORTS)
                missing = sorted(LUSTRE_PORTS - ports)
                if extra:
                    report(f"group {group.name} {direction} opens ports {extra} beyond Lustre's",
                           group.urn)  # fmt: skip
                if missing:
                    report(f"group {group.name} {direction} lacks Lustre ports {missing}",
                           group.urn)  # fmt: skip


PERSISTENT_VOLUME = "kubernetes:core/v1:PersistentVolume"
NID = re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}@tcp")
"""One client's NID: no range (``[2-10]``) and no wildcard."""


def _check_root_squash(args: StackValidationArgs, report: ReportViolation) -> None:
    for file_system in args.resources:
        if file_system.resource_type != FILE_SYSTEM:
            continue
        squash = file_system.props.get("rootSquashConfiguration") or {}
        ids = str(squash.get("rootSquash") or "0:0").split(":")
        if len(ids) != 2 or "0" in [part.lstrip("0") or "0" for part in ids]:
            report(
                f"rootSquash is {squash.get('rootSquash')!r}: root on any client owns every "
                "team's files; set a non-zero UID:GID",
                file_system.urn,
            )
        for nid in as_list(squash.get("noSquashNids")):
            if isinstance(nid, str) and not NID.fullmatch(nid):
                report(
                    f"noSquashNids holds {nid!r}: a range or wildcard gives root to every "
                    "client in it; name the admin client's single address",
                    file_system.urn,
                )


def _team_namespaces(resources: Sequence[PolicyResource]) -> set[str]:
    names: set[str] = set()
    for resource in resources:
        if resource.resource_type == tenancy.NAMESPACE:
            metadata = resource.props.get("metadata") or {}
            if TEAM_LABEL in (metadata.get("labels") or {}) and metadata.get("name"):
                names.add(metadata["name"])
    return names


def _lustre_volumes(resources: Sequence[PolicyResource]) -> Iterator[tuple[PolicyResource, Any]]:
    for volume in resources:
        if volume.resource_type != PERSISTENT_VOLUME:
            continue
        spec = volume.props.get("spec") or {}
        csi = spec.get("csi") or {}
        if csi.get("driver") == CSI_DRIVER:
            yield volume, spec


def _check_team_volumes(args: StackValidationArgs, report: ReportViolation) -> None:
    """A team's Lustre volume mounts a directory named after the team, apart from others'."""
    resources = list(args.resources)
    teams = _team_namespaces(resources)
    directories: dict[str, tuple[str, PolicyResource]] = {}
    handles: dict[str, PolicyResource] = {}
    for volume, spec in _lustre_volumes(resources):
        csi = spec["csi"]
        handle = csi.get("volumeHandle")
        if isinstance(handle, str):
            if handle in handles and (spec.get("claimRef") or {}).get("namespace") in teams:
                report(
                    f"volumeHandle {handle!r} is also {handles[handle].name}'s: kubelet mounts "
                    "one volume per handle in a pod",
                    volume.urn,
                )
            handles.setdefault(handle, volume)
        namespace = (spec.get("claimRef") or {}).get("namespace")
        if namespace not in teams:
            continue
        mount_name = (csi.get("volumeAttributes") or {}).get("mountname")
        if not isinstance(mount_name, str):
            continue  # unknown until the file system exists
        parts = mount_name.strip("/").split("/")
        if len(parts) < 3 or parts[-1] != namespace:
            report(
                f"team {namespace}'s volume mounts {mount_name!r}: a team mounts only "
                f"<mountname>/<path>/{namespace}, its own directory",
                volume.urn,
            )
            continue
        directory = "/".join(parts[1:])
        for other, (other_namespace, other_volume) in directories.items():
            if other_namespace != namespace and (
                directory == other
                or directory.startswith(other + "/")
                or other.startswith(directory + "/")
            ):
                report(
                    f"team {namespace}'s volume {directory!r} overlaps team "
                    f"{other_namespace}'s {other!r} ({other_volume.name})",
                    volume.urn,
                )  # fmt: skip
        directories[directory] = (namespace, volume)


POLICIES = [
    StackValidationPolicy(
        name="buckets-hardened",
        description="Data buckets are versioned, KMS-encrypted, closed to the public, TLS-only, "
        "log every request into the stack's access log bucket (SSE-S3, as log delivery needs) "
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
        name="fsx-root-squashed",
        description="The Lustre file system squashes root to a non-zero UID:GID, and only "
        "single addresses (the admin client) are exempt: root on a node would otherwise own "
        "every team's files.",
        validate=_check_root_squash,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="lustre-team-volumes-isolated",
        description="Each Lustre PersistentVolume bound to a team namespace mounts only a "
        "directory named after that team, no other team's volume overlaps it, and no two "
        "volumes share a handle: one team's claim cannot reach another's files.",
        validate=_check_team_volumes,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="fsx-in-training-zone",
        description="The Lustre file system sits in the zone of the EFA pools, and every pool "
        "whose nodes carry its client security group (EC2NodeClass subnets and NodePool zone "
        "requirement) launches only in that zone, so reads never cross zones (slower, and "
        "billed).",
        validate=_check_fsx_zone,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="lustre-volumes-on-clients",
        description="Every Lustre PersistentVolume requires the node label "
        f"{LUSTRE_CLIENT_LABEL}=true, which exactly the NodePools whose nodes carry the "
        "file system's client group have: a pod with a Lustre claim lands only where the mount "
        "can succeed.",
        validate=_check_lustre_placement,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="lustre-volumes-record-access",
        description="Lustre PersistentVolumes are mounted read-write without noatime: release "
        "of unread data goes by access times, which a read-only mount never records.",
        validate=_check_lustre_access_times,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="fsx-lustre-ports-only",
        description="The file system's security groups open exactly TCP 988 and 1018-1023, "
        "inbound and outbound, to security groups only and nothing else, whether the rules "
        "are inline or their own resources (an EFA-enabled file system: all traffic, between "
        "groups only).",
        validate=_check_fsx_ports,
        enforcement_level=MANDATORY,
    ),
]
