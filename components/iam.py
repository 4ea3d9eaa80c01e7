"""IAM policy documents (pure builders) and the one helper that makes roles from them."""

from __future__ import annotations

import json
from typing import Any, Final, NamedTuple

import pulumi
import pulumi_aws as aws

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
"""Service principal that EKS Pod Identity assumes roles as."""

EKS_NODE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)
"""Managed policies of every node role (system node group and Karpenter nodes).

Not ``AmazonEKS_CNI_Policy``: the VPC CNI has its own Pod Identity role
(:data:`VPC_CNI_POLICY`), so node credentials cannot assign or move private addresses
(``ec2:AssignPrivateIpAddresses``), e.g. the admin client's no-squash address onto another
interface."""
VPC_CNI_POLICY: Final = "AmazonEKS_CNI_Policy"
"""Managed policy of the VPC CNI's own role (service account ``kube-system/aws-node``)."""


IMDSV2_ONE_HOP: Final = {
    "http_endpoint": "enabled",
    "http_tokens": "required",
    "http_put_response_hop_limit": 1,
}
"""Instance metadata options of every instance the stack launches (launch template arguments):
IMDSv2 only, and one hop, so a pod cannot reach its node's credentials."""


def service_trust_policy(service: str, *, tag_session: bool = False) -> dict[str, Any]:
    """Trust policy letting one AWS service principal assume a role.

    Args:
        service: service principal, e.g. ``eks.amazonaws.com``.
        tag_session: also allow ``sts:TagSession`` (EKS and Pod Identity pass session tags).
            Default false.

    """
    actions = ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"]
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}],
    }


def account_administers_key(account_id: str) -> dict[str, Any]:
    """The statement of KMS's default key policy: the account's IAM policies decide.

    Who may use and administer the key is then up to IAM (AWS KMS developer guide, "Default key
    policy").

    Args:
        account_id: the account that owns the key.
    """
    return {
        "Sid": "AccountAdministersTheKey",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:aws:iam::{account_id}:root"},
        "Action": "kms:*",
        "Resource": "*",
    }


def account_key_policy(account_id: str) -> dict[str, Any]:
    """A key policy that says what KMS's default one says, written out.

    A reviewer (and a scanner) sees it, and a later statement has a place to go.

    Args:
        account_id: the account that owns the key.
    """
    return {"Version": "2012-10-17", "Statement": [account_administers_key(account_id)]}


def logs_key_policy(account_id: str, region: str) -> dict[str, Any]:
    """Key policy of the key that encrypts the stack's CloudWatch log groups.

    The account administers the key through IAM (the default policy's statement), and
    CloudWatch Logs of the region may use it for this account's log groups only, as the
    CloudWatch Logs guide ("Encrypt log data in CloudWatch Logs using AWS KMS") requires.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            account_administers_key(account_id),
            {
                "Sid": "CloudWatchLogsEncryptsThisAccountsLogGroups",
                "Effect": "Allow",
                "Principal": {"Service": f"logs.{region}.amazonaws.com"},
                "Action": [
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                "Resource": "*",
                "Condition": {
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": (
                            f"arn:aws:logs:{region}:{account_id}:log-group:*"
                        )
                    }
                },
            },
        ],
    }


def deny_insecure_transport(sid: str, service: str, resources: str | list[str]) -> dict[str, Any]:
    """Resource-policy statement refusing every request to ``resources`` made without TLS.

    Args:
        sid: statement id.
        service: the service prefix whose actions are denied, e.g. ``s3`` or ``sqs``.
        resources: the ARN (or ARNs) the policy protects.
    """
    return {
        "Sid": sid,
        "Effect": "Deny",
        "Principal": "*",
        "Action": f"{service}:*",
        "Resource": resources,
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }


def eks_cluster_arn(region: str, account_id: str, cluster_name: str) -> str:
    """ARN of an EKS cluster: what EKS Pod Identity's ``eks-cluster-arn`` session tag carries.

    Args:
        region: the cluster's region.
        account_id: the cluster's account.
        cluster_name: the cluster's name.
    """
    return f"arn:aws:eks:{region}:{account_id}:cluster/{cluster_name}"


def pod_identity_trust_policy(
    cluster_arn: str, namespace: str, service_account: str
) -> dict[str, Any]:
    """Trust policy for a role that one service account's pods receive through EKS Pod Identity.

    Without conditions, any Pod Identity association in the account, on any cluster and in any
    namespace, could be given the role. EKS Pod Identity tags the role session with the
    cluster's ARN, the namespace and the service account (Amazon EKS User Guide, "Create IAM
    role with trust policy required by EKS Pod Identity" and "Enable or disable session tags":
    https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html,
    https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html), so the trust requires
    all three on both ``sts:AssumeRole`` and ``sts:TagSession``. An association made with
    session tags disabled carries none, and is refused.

    Args:
        cluster_arn: the one cluster whose associations may use the role
            (:func:`eks_cluster_arn`).
        namespace: the namespace of the service account.
        service_account: the service account's name.
    """
    policy = service_trust_policy(POD_IDENTITY_PRINCIPAL, tag_session=True)
    policy["Statement"][0]["Condition"] = {
        "StringEquals": {
            "aws:RequestTag/eks-cluster-arn": cluster_arn,
            "aws:RequestTag/kubernetes-namespace": namespace,
            "aws:RequestTag/kubernetes-service-account": service_account,
        }
    }
    return policy


def managed_policy_arn(name: str) -> str:
    """ARN of an AWS managed policy, e.g. ``AmazonEKSClusterPolicy``."""
    return f"arn:aws:iam::aws:policy/{name}"


class ManagedRole(NamedTuple):
    """A role and its policy attachments (depend on both before using the role)."""

    role: aws.iam.Role
    attachments: list[aws.iam.RolePolicyAttachment]

    @property
    def ready(self) -> list[pulumi.Resource]:
        """Resources to depend on so that the role exists with all of its policies."""
        return [self.role, *self.attachments]


def role_with_policies(
    name: str,
    *,
    trust_policy: dict[str, Any],
    managed_policies: list[str],
    opts: pulumi.ResourceOptions,
    role_name: str | None = None,
) -> ManagedRole:
    """An IAM role with AWS managed policies attached as separate attachment resources.

    Args:
        name: logical name of the role; attachments are named ``<name>-<policy>``.
        trust_policy: who may assume the role (see :func:`service_trust_policy`).
        managed_policies: AWS managed policy names (path included, e.g.
            ``service-role/AmazonEBSCSIDriverPolicy``).
        opts: options for the role and its attachments (parent, provider).
        role_name: the role's IAM name, at most 64 characters. Default: Pulumi's auto-name
            from ``name``.

    """
    role = aws.iam.Role(
        name, name=role_name, assume_role_policy=json.dumps(trust_policy), opts=opts
    )
    attachments = [
        aws.iam.RolePolicyAttachment(
            f"{name}-{policy.rsplit('/', 1)[-1]}",
            role=role.name,
            policy_arn=managed_policy_arn(policy),
            opts=opts,
        )
        for policy in managed_policies
    ]
    return ManagedRole(role, attachments)


def customer_key(
    name: str,
    *,
    alias: str,
    description: str,
    protect: bool,
    parent: pulumi.Resource,
    policy: dict[str, Any],
    provider: pulumi.ProviderResource | None = None,
) -> aws.kms.Key:
    """A customer managed KMS key that rotates yearly, with an alias.

    Args:
        name: logical name of the key and its alias.
        alias: alias name without the ``alias/`` prefix.
        description: what the key encrypts (shown in the KMS console).
        protect: protect the key from deletion (stateful environments).
        parent: component the key belongs to.
        policy: the key policy, always explicit (:func:`account_key_policy` for KMS's default):
            a key without one gets KMS's default, which no reviewer or scanner sees.
        provider: AWS provider, where the parent does not pass one down. Default: inherited.
    """
    key = aws.kms.Key(
        name,
        description=description,
        enable_key_rotation=True,
        deletion_window_in_days=30,
        policy=json.dumps(policy),
        opts=pulumi.ResourceOptions(parent=parent, protect=protect, provider=provider),
    )
    aws.kms.Alias(
        name,
        name=f"alias/{alias}",
        target_key_id=key.key_id,
        opts=pulumi.ResourceOptions(parent=parent, provider=provider),
    )
    return key
