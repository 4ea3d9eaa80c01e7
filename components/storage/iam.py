"""Who reaches the stack's data: the data key's policy, and each team's job role.

A team's role reaches only its own prefixes of the data buckets; EKS Pod Identity gives it to
the team's job service account.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Final

import pulumi
import pulumi_aws as aws

from components.config import PlatformConfig, association_bucket_name, bucket_name
from components.iam import (
    account_administers_key,
    eks_cluster_arn,
    pod_identity_trust_policy,
    role_with_policies,
)
from components.teams import JOB_SERVICE_ACCOUNT

FSX_SERVICE_LINKED_ROLES: Final = (
    "aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*",
    "aws-service-role/fsx.amazonaws.com/AWSServiceRoleForAmazonFSx",
)
"""Roles FSx acts as: one per file system for its data repository associations (the path the
managed policy FSxDeleteServiceLinkedRoleAccess names), and FSx's own."""
EFS_SERVICE_LINKED_ROLE: Final = (
    "aws-service-role/elasticfilesystem.amazonaws.com/AWSServiceRoleForAmazonElasticFileSystem"
)
"""The role EFS acts as on an encrypted file system (EFS user guide, "Using service-linked
roles for Amazon EFS")."""


def data_key_principals(config: PlatformConfig) -> list[str]:
    """Every principal (ARN or ARN pattern) that may use the data key through S3 or FSx.

    This stack's roles only: each team's job role, FSx's service-linked roles (the file system
    and its associations), the deployer (it creates the file system, and FSx makes its key
    grant on the deployer's behalf) and the cluster's admins (who put datasets under the
    import-only prefixes, which team roles may not write). Sorted, so the policy is stable.

    Args:
        config: the validated platform (account, cluster principals, teams, storage).
    """
    account = config.account_id
    teams = [
        f"arn:aws:iam::{account}:role/{team_role_name(config.name, team.name)}"
        for team in config.teams
        if team_prefixes(config, team.name)
    ]
    services = [f"arn:aws:iam::{account}:role/{role}" for role in FSX_SERVICE_LINKED_ROLES]
    if config.model_store.enabled:
        services.append(f"arn:aws:iam::{account}:role/{EFS_SERVICE_LINKED_ROLE}")
    cluster = config.cluster
    operators = [cluster.deployer_principal_arn, *cluster.admin_principal_arns]
    return sorted({*teams, *services, *operators})


def data_key_policy(
    account_id: str, region: str, principals: list[str], *, efs: bool = False
) -> dict[str, Any]:
    """Key policy of the data key: account administers it; this stack's roles use it via S3/FSx.

    FSx reaches SSE-KMS buckets through a service-linked role created per file system, so use
    is granted through the services (``kms:ViaService``) and to the principals by ARN pattern
    (``aws:PrincipalArn``, the role's ARN for a role session), not to every principal of the
    account: a role of the account that S3 lets read a bucket still cannot decrypt its objects.
    A principal the account's IAM policies grant this key explicitly (the first statement)
    still may: that is the account administering its key.

    Args:
        account_id: the stack's account.
        region: the stack's region (the services' endpoints).
        principals: ARNs or ARN patterns of the principals that use the key
            (:func:`data_key_principals`).
        efs: the key also encrypts the EFS model store: EFS uses it through its service
            (the deployer's grant when it creates the file system, then EFS's service-linked
            role). Default False.
    """
    services = [f"s3.{region}.amazonaws.com", f"fsx.{region}.amazonaws.com"]
    if efs:
        services.append(f"elasticfilesystem.{region}.amazonaws.com")
    return {
        "Version": "2012-10-17",
        "Statement": [
            account_administers_key(account_id),
            {
                "Sid": "UseThroughS3AndFSxByThisStacksRoles",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": [
                    "kms:Encrypt",
                    "kms:Decrypt",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:DescribeKey",
                    "kms:CreateGrant",
                ],
                "Resource": "*",
                "Condition": {
                    "StringEquals": {
                        "kms:CallerAccount": account_id,
                        "kms:ViaService": services,
                    },
                    "ArnLike": {"aws:PrincipalArn": principals},
                },
            },
        ],
    }


@dataclasses.dataclass(frozen=True)
class TeamPrefix:
    """A part of a data bucket that one team's job role reaches.

    Attributes:
        bucket: the bucket's S3 name.
        prefix: the key prefix, ending in ``/`` (the team's own, e.g. ``checkpoints/ml-a/``).
        writable: whether the role may write and delete objects there, not only read them.
    """

    bucket: str
    prefix: str
    writable: bool


def team_prefixes(config: PlatformConfig, team: str) -> list[TeamPrefix]:
    """Every part of the data buckets a team's jobs reach with their own identity.

    Under each association, the team's directory ``<path>/<team>`` is ``<prefix><team>/`` in
    the association's bucket: writable only where the path both imports and exports. Read-only
    where it only exports, since the file system owns that copy and a direct write would never
    reach it, and where it only imports (:func:`import_only_prefixes`): an object written there
    becomes a file or directory with the owner and mode its POSIX metadata names, so a team
    could give its directory other modes, or itself a file another uid owns. In a bucket with
    ``teamAccess`` the team owns ``<team>/``. Never the whole bucket: one team's role cannot
    read or delete another's data.

    Args:
        config: the validated platform (buckets, associations).
        team: the team's name (its namespace and directory name).
    """
    storage = config.storage
    prefixes: list[TeamPrefix] = []
    for association in storage.lustre.associations if storage.lustre else []:
        s3_name = association_bucket_name(config, association)
        if s3_name is not None:
            prefixes.append(
                TeamPrefix(
                    s3_name,
                    f"{association.s3_prefix}{team}/",
                    writable=bool(association.imports) and bool(association.export_events),
                )
            )
    prefixes += [
        TeamPrefix(bucket_name(config, bucket), f"{team}/", writable=True)
        for bucket in storage.buckets
        if bucket.team_access
    ]
    return prefixes


def import_only_prefixes(config: PlatformConfig) -> list[TeamPrefix]:
    """Every association prefix that only imports into the file system (nothing exported).

    What lands there, a directory object (a key ending in ``/``) included, FSx imports with
    the owner, group and mode its ``x-amz-meta-file-*`` metadata names (FSx for Lustre user
    guide, "POSIX metadata support for data repositories"), over the layout the admin client
    made (mode 2750, :data:`components.storage.layout.IMPORT_ONLY_DIRECTORY_MODE`). Team
    roles are refused every write under the whole prefix (:func:`team_data_policy`), whatever
    else allows it; the cluster's admins put datasets there.

    Args:
        config: the validated platform (associations and their buckets).
    """
    lustre = config.storage.lustre
    prefixes: list[TeamPrefix] = []
    for association in lustre.associations if lustre else []:
        s3_name = association_bucket_name(config, association)
        if s3_name is not None and association.imports and not association.export_events:
            prefixes.append(TeamPrefix(s3_name, association.s3_prefix, writable=False))
    return prefixes


S3_DENIED_UNDER_IMPORTS: Final = ("s3:PutObject*", "s3:DeleteObject*", "s3:RestoreObject")
"""Everything a team role is refused under an import-only prefix: writes, deletes (of an
object or a version: a team could otherwise make FSx drop a file on import), tags, ACLs."""
S3_READ_ACTIONS: Final = ("s3:GetObject", "s3:GetObjectVersion")
S3_WRITE_ACTIONS: Final = (
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)


IAM_ROLE_NAME_LIMIT: Final = 64


def fitted_name(stem: str, suffix: str, limit: int) -> str:
    """``<stem>-<suffix>`` within ``limit`` characters, still distinct when it had to be cut.

    A name that says what it is in CloudTrail and the console; when it is too long, the stem is
    cut and a hash of the whole stem keeps names distinct.

    Args:
        stem: the identifying part (cluster and team, cluster and path).
        suffix: what kind of thing it is (``jobs``, ``release``); kept whole.
        limit: the AWS limit on the name.
    """
    name = f"{stem}-{suffix}"
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(stem.encode()).hexdigest()[:8]
    return f"{stem[: limit - len(suffix) - 10]}-{digest}-{suffix}"


def team_role_name(cluster: str, team: str) -> str:
    """IAM name of a team's job role: ``<cluster>-<team>-jobs``, fitted to IAM's 64."""
    return fitted_name(f"{cluster}-{team}", "jobs", IAM_ROLE_NAME_LIMIT)


def team_data_policy(
    prefixes: list[TeamPrefix], import_only: list[TeamPrefix] | None = None
) -> dict[str, Any]:
    """The job role's policy: list, read (and write where allowed) only the team's prefixes.

    Listing is allowed on the bucket only for keys under the team's prefixes
    (``s3:prefix`` condition), so the role cannot even see other teams' object names. No KMS
    statement: the data key's policy lets any principal of the account use it through S3
    (:func:`data_key_policy`), and this policy bounds what that principal reaches in S3.

    Args:
        prefixes: what the team reaches (:func:`team_prefixes`), at least one.
        import_only: prefixes under which every write is refused explicitly
            (:func:`import_only_prefixes`), even where another prefix allows it (a
            ``teamAccess`` bucket that an association imports). Default: none.
    """
    statements: list[dict[str, Any]] = []
    if import_only:
        statements.append(
            {
                "Sid": "NoWritesUnderImportOnlyPrefixes",
                "Effect": "Deny",
                "Action": list(S3_DENIED_UNDER_IMPORTS),
                "Resource": sorted(
                    {f"arn:aws:s3:::{part.bucket}/{part.prefix}*" for part in import_only}
                ),
            }
        )
    for index, part in enumerate(prefixes):
        bucket_arn = f"arn:aws:s3:::{part.bucket}"
        actions = [*S3_READ_ACTIONS, *(S3_WRITE_ACTIONS if part.writable else ())]
        statements += [
            {
                "Sid": f"List{index}",
                "Effect": "Allow",
                # Versions too: a team finds and reads (restores) its own overwritten or
                # deleted objects while noncurrentVersionRetentionDays keeps them.
                "Action": ["s3:ListBucket", "s3:ListBucketVersions"],
                "Resource": bucket_arn,
                "Condition": {"StringLike": {"s3:prefix": [part.prefix, f"{part.prefix}*"]}},
            },
            {
                "Sid": f"Objects{index}",
                "Effect": "Allow",
                "Action": actions,
                "Resource": f"{bucket_arn}/{part.prefix}*",
            },
        ]
    return {"Version": "2012-10-17", "Statement": statements}


def team_role(
    name: str,
    config: PlatformConfig,
    team: str,
    cluster_ready: list[pulumi.Resource],
    *,
    parent: pulumi.Resource,
) -> aws.iam.Role | None:
    """The team's job role, reaching only its prefixes, given to its job service account.

    EKS Pod Identity gives the role to every pod of the team's job service account; its
    webhook mounts its own projected token (audience ``pods.eks.amazonaws.com``), so the
    account's ``automountServiceAccountToken: false`` still holds for the API server's
    token (aws/amazon-eks-pod-identity-webhook main.go, container-credentials flags). Nodes
    answer IMDS with hop limit 1, so the node role never reaches a pod.

    Args:
        name: the storage component's name, prefix of the role's.
        config: the validated platform (buckets, associations, cluster name).
        team: the team's name.
        cluster_ready: what the Pod Identity association waits for.
        parent: the storage component.

    Returns:
        The role, or None for a team that reaches no prefix.
    """
    prefixes = team_prefixes(config, team)
    if not prefixes:
        return None
    child = pulumi.ResourceOptions(parent=parent)
    role = role_with_policies(
        f"{name}-{team}-jobs",
        trust_policy=pod_identity_trust_policy(
            eks_cluster_arn(config.region, config.account_id, config.name),
            team,
            JOB_SERVICE_ACCOUNT,
        ),
        managed_policies=[], opts=child, role_name=team_role_name(config.name, team),
    )  # fmt: skip
    data = aws.iam.RolePolicy(
        f"{name}-{team}-jobs",
        role=role.role.id,
        policy=json.dumps(team_data_policy(prefixes, import_only_prefixes(config))),
        opts=child,
    )
    aws.eks.PodIdentityAssociation(
        f"{name}-{team}-jobs",
        cluster_name=config.name,
        namespace=team,
        service_account=JOB_SERVICE_ACCOUNT,
        role_arn=role.role.arn,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*cluster_ready, data]),
    )
    return role.role
