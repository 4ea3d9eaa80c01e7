"""The EFS model store: encrypted, reachable only over NFS from the nodes, areas owned by teams.

The EFS API model (boto/botocore 1.44.8 botocore/data/efs/2015-02-01/service-2.json) names the
fields checked here: CreateFileSystem ``Encrypted``/``KmsKeyId``, CreateMountTarget
``SecurityGroups``, CreateAccessPoint ``PosixUser`` and ``RootDirectory.CreationInfo``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pulumi_policy import PolicyResource, StackValidationArgs, StackValidationPolicy

from components.config.model_store import SHARED_AREA
from components.config.teams import MIN_TEAM_GID
from components.storage.model_store import (
    CLIENT_ACTIONS,
    NFS_PORT,
    SHARED_DIRECTORY_MODE,
    TEAM_DIRECTORY_MODE,
)
from components.teams import TEAM_LABEL

from .common import MANDATORY, ReportViolation, as_list, aws_managed_key, security_group_rules

EFS_FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"
FILE_SYSTEM_POLICY = "aws:efs/fileSystemPolicy:FileSystemPolicy"
MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"
ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
NAMESPACE = "kubernetes:core/v1:Namespace"


def _check_encryption(args: StackValidationArgs, report: ReportViolation) -> None:
    for file_system in args.resources:
        if file_system.resource_type != EFS_FILE_SYSTEM:
            continue
        if file_system.props.get("encrypted") is not True:
            report("the EFS file system is not encrypted at rest", file_system.urn)
        elif aws_managed_key(file_system.props.get("kmsKeyId")):
            report(
                "the EFS file system is not encrypted with a customer managed KMS key",
                file_system.urn,
            )


SOURCE_FIELDS = ("ingress", "referencedSecurityGroupId", "sourceSecurityGroupId")


def _stack_sources(
    resources: Sequence[PolicyResource], group: PolicyResource
) -> list[PolicyResource]:
    """Security groups of this stack that feed ``group``'s inbound rules, in any shape."""
    shapes = [group] + [
        r for r in resources if group in r.property_dependencies.get("securityGroupId", [])
    ]
    return [
        source
        for shape in shapes
        for field in SOURCE_FIELDS
        for source in shape.property_dependencies.get(field, [])
        if source.resource_type == SECURITY_GROUP and source is not group
    ]


def _check_mount_targets(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    # Every zone's mount target shares the group: each group is judged once.
    checked: dict[str, PolicyResource] = {}
    for target in resources:
        if target.resource_type != MOUNT_TARGET:
            continue
        groups = [
            g
            for g in target.property_dependencies.get("securityGroups", [])
            if g.resource_type == SECURITY_GROUP
        ]
        if not groups or len(as_list(target.props.get("securityGroups"))) > len(groups):
            report(
                "the mount target uses a security group this stack does not create (or the "
                "VPC's default group), so its rules cannot be checked",
                target.urn,
            )
        checked.update((group.urn, group) for group in groups)
    for group in checked.values():
        # The nodes' group is the one EKS creates, not one of this stack's: a rule fed by
        # a stack group (the Lustre servers', the API's) admits something else.
        for source in _stack_sources(resources, group):
            report(
                f"{group.name} admits {source.name}, a group of this stack rather than the nodes'",
                group.urn,
            )
        # Inline rules and separate rule resources alike: the same fact, several shapes.
        for rule in security_group_rules(resources, group):
            if rule.direction == "egress":
                report(f"{rule.where} lets the mount targets open connections", group.urn)
                continue
            if rule.addresses:
                report(
                    f"{rule.where} admits address ranges {rule.addresses}, not the nodes' "
                    "security group",
                    group.urn,
                )
            if "self" in rule.groups:
                report(f"{rule.where} admits the mount targets' own group", group.urn)
            if (rule.protocol, rule.from_port, rule.to_port) != ("tcp", NFS_PORT, NFS_PORT):
                report(
                    f"{rule.where} admits {rule.protocol} {rule.from_port}-{rule.to_port}, "
                    f"not only NFS (tcp {NFS_PORT})",
                    group.urn,
                )


def _team_namespaces(resources: Sequence[PolicyResource]) -> set[str]:
    names: set[str] = set()
    for resource in resources:
        if resource.resource_type != NAMESPACE:
            continue
        metadata = resource.props.get("metadata") or {}
        if TEAM_LABEL in (metadata.get("labels") or {}):
            names.add(str(metadata.get("name")))
    return names


def _gid(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _check_access_points(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    teams = _team_namespaces(resources)
    owners: dict[int, str] = {}
    for point in resources:
        if point.resource_type != ACCESS_POINT:
            continue
        posix = point.props.get("posixUser") or {}
        gid = _gid(posix.get("gid"))
        if not posix or gid is None:
            report(
                "the access point has no POSIX user: clients would write as whoever they "
                "claim to be",
                point.urn,
            )
            continue
        root = point.props.get("rootDirectory") or {}
        path = str(root.get("path") or "/")
        area = path.strip("/")
        creation = root.get("creationInfo") or {}
        owner = _gid(creation.get("ownerGid"))
        if area != SHARED_AREA and area not in teams:
            report(
                f"the access point's root {path} is neither a team's directory (/<team>) nor "
                f"/{SHARED_AREA}",
                point.urn,
            )
        mode = TEAM_DIRECTORY_MODE if area != SHARED_AREA else SHARED_DIRECTORY_MODE
        if area == SHARED_AREA and gid != owner:
            # The readers' access point: its user must be neither /shared's owner nor in its
            # group, so that EFS refuses its writes.
            uid = _gid(posix.get("uid"))
            groups = {gid, *(_gid(g) for g in as_list(posix.get("secondaryGids")))}
            if uid is None or uid == _gid(creation.get("ownerUid")) or owner in groups:
                report(
                    f"the access point's root {path} is owned by {creation.get('ownerUid')}:"
                    f"{owner}, and its POSIX user ({uid}, gids {sorted(map(str, groups))}) is "
                    "that owner or in that group without being the writers' access point: "
                    "readers could change the released models",
                    point.urn,
                )
        elif owner is None or owner != gid or owner < MIN_TEAM_GID:
            report(
                f"the access point's root {path} is owned by gid {owner}, not its own team "
                f"gid {gid} (at least {MIN_TEAM_GID})",
                point.urn,
            )
        if owner is not None and str(creation.get("permissions")) != mode:
            report(
                f"the access point's root {path} has mode {creation.get('permissions')}, "
                f"not {mode}",
                point.urn,
            )
        if owner is None or owner < MIN_TEAM_GID:
            continue
        if owner in owners and owners[owner] != path:
            report(
                f"the access point's root {path} shares gid {owner} with {owners[owner]}",
                point.urn,
            )
        owners.setdefault(owner, path)


def _statements(policy: Any) -> list[dict[str, Any]] | None:
    """A policy document's statements, or None where its text is not known or not JSON."""
    if isinstance(policy, str):
        try:
            policy = json.loads(policy)
        except ValueError:
            return None
    if not isinstance(policy, dict):
        return None
    return [s for s in as_list(policy.get("Statement")) if isinstance(s, dict)]


def _anyone(principal: Any) -> bool:
    """Whether a statement's principal is every principal (``*``, or ``{"AWS": "*"}``)."""
    if principal == "*":
        return True
    return isinstance(principal, dict) and "*" in as_list(principal.get("AWS"))


def _actions(statement: dict[str, Any]) -> set[str]:
    return {str(a).lower() for a in as_list(statement.get("Action"))}


def _denies_plain_nfs(statement: dict[str, Any]) -> bool:
    """A Deny for every principal of every client action when ``aws:SecureTransport`` is false."""
    condition = (statement.get("Condition") or {}).get("Bool") or {}
    insecure = str(condition.get("aws:SecureTransport")).lower() == "false"
    actions = _actions(statement)
    every = (
        bool(actions & {"*", "elasticfilesystem:*"})
        or {a.lower() for a in CLIENT_ACTIONS} <= actions
    )
    return (
        statement.get("Effect") == "Deny"
        and _anyone(statement.get("Principal"))
        and (insecure and every)
    )


def _check_file_system_policy(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    for file_system in resources:
        if file_system.resource_type != EFS_FILE_SYSTEM:
            continue
        policies = [
            r
            for r in resources
            if r.resource_type == FILE_SYSTEM_POLICY
            and file_system in r.property_dependencies.get("fileSystemId", [])
        ]
        if not policies:
            report(
                "the EFS file system has no file system policy: EFS's default lets any client "
                "that reaches a mount target mount it, as root, without TLS or IAM",
                file_system.urn,
            )
        for policy in policies:
            statements = _statements(policy.props.get("policy"))
            if statements is None:
                continue  # not known before the up (an unknown ARN)
            if not any(_denies_plain_nfs(s) for s in statements):
                report(
                    "the EFS file system policy does not deny connections without TLS "
                    "(Deny, every principal, aws:SecureTransport false)",
                    policy.urn,
                )
            for statement in statements:
                if statement.get("Effect") != "Allow":
                    continue
                if _anyone(statement.get("Principal")):
                    report(
                        "the EFS file system policy allows every principal: a client that "
                        "mounts without IAM (anonymous) gets in",
                        policy.urn,
                    )
                granted = _actions(statement)
                if granted & {"*", "elasticfilesystem:*", "elasticfilesystem:clientrootaccess"}:
                    report(
                        "the EFS file system policy grants ClientRootAccess: root is not squashed",
                        policy.urn,
                    )


POLICIES = [
    StackValidationPolicy(
        name="efs-encrypted-customer-key",
        description="The EFS model store is encrypted at rest with a customer managed KMS key.",
        validate=_check_encryption,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="efs-mount-targets-nfs-from-nodes",
        description="Every EFS mount target sits behind security groups of this stack that "
        f"admit only NFS (tcp {NFS_PORT}) from the nodes' group: no address ranges, no other "
        "group of the stack, no egress.",
        validate=_check_mount_targets,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="efs-access-points-team-owned",
        description="Every EFS access point imposes a POSIX user, and its root is a team's "
        f"directory (mode {TEAM_DIRECTORY_MODE}) or /{SHARED_AREA} "
        f"({SHARED_DIRECTORY_MODE}) owned by that user's own non-system gid, no two roots "
        f"sharing one: a team's claim reaches only its team's files. A /{SHARED_AREA} access "
        "point of another gid is the readers': its user is neither the root's owner nor in "
        "its group, so EFS refuses its writes.",
        validate=_check_access_points,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="efs-file-system-policy",
        description="Every EFS file system has a file system policy that denies connections "
        "without TLS (aws:SecureTransport false) to every principal, allows no principal "
        "'*' (no anonymous, non-IAM mount) and grants no ClientRootAccess (root squashed).",
        validate=_check_file_system_policy,
        enforcement_level=MANDATORY,
    ),
]
