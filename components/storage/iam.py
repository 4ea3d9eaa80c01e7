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
from components.iam import account_administers_key, pod_identity_trust_policy, role_with_policies
from components.teams import JOB_SERVICE_ACCOUNT


def data_key_policy(account_id: str, region: str) -> dict[str, Any]:
    """Key policy of the data key: account administers it; S3 and FSx use it in this account.

    FSx reaches SSE-KMS buckets through a service-linked role created per file system, so use is
    granted through the services (``kms:ViaService``) rather than to named roles.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            account_administers_key(account_id),
            {
                "Sid": "UseThroughS3AndFSx",
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
                        "kms:ViaService": [
                            f"s3.{region}.amazonaws.com",
                            f"fsx.{region}.amazonaws.com",
                        ],
                    }
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
    the association's bucket: writable where the path imports from S3 (what lands there appears
    on the file system), read-only where it only exports, since the file system owns that copy
    and a direct write would never reach it. In a bucket with ``teamAccess`` the team owns
    ``<team>/``. Never the whole bucket: one team's role cannot read or delete another's data.

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
                TeamPrefix(s3_name, f"{association.s3_prefix}{team}/", bool(association.imports))
            )
    prefixes += [
        TeamPrefix(bucket_name(config, bucket), f"{team}/", writable=True)
        for bucket in storage.buckets
        if bucket.team_access
    ]
    return prefixes


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


def team_data_policy(prefixes: list[TeamPrefix]) -> dict[str, Any]:
    """The job role's policy: list, read (and write where allowed) only the team's prefixes.

    Listing is allowed on the bucket only for keys under the team's prefixes
    (``s3:prefix`` condition), so the role cannot even see other teams' object names. No KMS
    statement: the data key's policy lets any principal of the account use it through S3
    (:func:`data_key_policy`), and this policy bounds what that principal reaches in S3.

    Args:
        prefixes: what the team reaches (:func:`team_prefixes`), at least one.
    """
    statements: list[dict[str, Any]] = []
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
        f"{name}-{team}-jobs", trust_policy=pod_identity_trust_policy(), managed_policies=[],
        opts=child, role_name=team_role_name(config.name, team),
    )  # fmt: skip
    data = aws.iam.RolePolicy(
        f"{name}-{team}-jobs",
        role=role.role.id,
        policy=json.dumps(team_data_policy(prefixes)),
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
