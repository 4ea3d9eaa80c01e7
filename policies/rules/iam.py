"""IAM: keys that rotate, and identity policies that grant only what they name."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from typing import Any

from .common import (
    ReportViolation,
    ResourceValidationArgs,
    as_list,
    policy_documents,
    resource_policy,
    statements,
)

# Actions AWS does not let a policy scope to resources, so "Resource": "*" is the only form.
UNSCOPABLE_ACTIONS = [
    "ec2:Describe*",
    "autoscaling:Describe*",
    "elasticloadbalancing:Describe*",
    "eks:DescribeAddonVersions",
    "fsx:Describe*",
    "pricing:GetProducts",
    "ssm:DescribeParameters",
    "sts:GetCallerIdentity",
    "logs:DescribeLogGroups",
    "ecr:GetAuthorizationToken",
    "cloudwatch:PutMetricData",
    # Reads of metrics take no resource either (Service Authorization Reference, Amazon
    # CloudWatch): Grafana's CloudWatch datasource (components/observability/metrics_stack.py).
    "cloudwatch:GetMetricData",
    "cloudwatch:GetMetricStatistics",
    "cloudwatch:ListMetrics",
    "cloudwatch:DescribeAlarmsForMetric",
    "tag:GetResources",
    "kms:ListAliases",
    "s3:ListAllMyBuckets",
    "iam:ListInstanceProfiles",
    "arc-zonal-shift:GetManagedResource",
]
# AWS managed policies that allow every action of a service or of all of them: the
# administrator and power-user families, and every ``*FullAccess`` (e.g. AmazonS3FullAccess
# holds ``s3:*``), and the job-function administrators.
BROAD_MANAGED_POLICY = re.compile(
    r"::aws:policy/(?:(?:.*/)?(?:AdministratorAccess[\w-]*|PowerUserAccess|\w*FullAccess(?:V\d+)?)"
    r"|job-function/\w*Administrator)$"
)
# Every shape that attaches a managed policy by ARN: (resource type, input, list or one).
POLICY_ATTACHMENTS = {
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "policyArn",
    "aws:iam/userPolicyAttachment:UserPolicyAttachment": "policyArn",
    "aws:iam/groupPolicyAttachment:GroupPolicyAttachment": "policyArn",
    "aws:iam/policyAttachment:PolicyAttachment": "policyArn",
    "aws:iam/rolePolicyAttachmentsExclusive:RolePolicyAttachmentsExclusive": "policyArns",
    "aws:iam/userPolicyAttachmentsExclusive:UserPolicyAttachmentsExclusive": "policyArns",
    "aws:iam/groupPolicyAttachmentsExclusive:GroupPolicyAttachmentsExclusive": "policyArns",
    "aws:iam/role:Role": "managedPolicyArns",
}


def _is_wildcard_action(action: str) -> bool:
    return action == "*" or action.endswith(":*")


def attached_policy_arns(args: ResourceValidationArgs) -> Iterator[str]:
    """Managed policy ARNs a resource attaches, whichever attachment shape it is."""
    key = POLICY_ATTACHMENTS.get(args.resource_type)
    if key is not None:
        yield from (str(arn) for arn in as_list(args.props.get(key)))


def _check_wildcard_actions(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for where, document in policy_documents(args):
        for index, statement in enumerate(statements(document)):
            if statement.get("Effect") != "Allow":
                continue
            if "NotAction" in statement:
                report(f"{where} statement {index} allows everything but NotAction", None)
            for action in as_list(statement.get("Action")):
                if _is_wildcard_action(str(action)):
                    report(f"{where} statement {index} allows wildcard action {action!r}", None)
    for arn in attached_policy_arns(args):
        if BROAD_MANAGED_POLICY.search(arn):
            report(f"attaches {arn}, which allows every action of a service or more", None)


def _unscoped(action: str, allowed: list[str]) -> bool:
    return not any(fnmatch.fnmatchcase(action.lower(), pattern.lower()) for pattern in allowed)


def _every_resource(resource: Any) -> bool:
    """``*``, or an ARN whose resource part is ``*`` (``arn:aws:s3:::*``: every bucket)."""
    text = str(resource)
    return text == "*" or (text.startswith("arn:") and text.split(":", 5)[5:] == ["*"])


def _check_wildcard_resources(args: ResourceValidationArgs, report: ReportViolation) -> None:
    allowed: list[str] = args.get_config().get("unscopableActions", UNSCOPABLE_ACTIONS)
    for where, document in policy_documents(args):
        for index, statement in enumerate(statements(document)):
            if statement.get("Effect") != "Allow":
                continue
            if "NotResource" in statement:
                # Allow + NotResource grants on every resource but the ones it names.
                report(f"{where} statement {index} allows every resource but NotResource", None)
                continue
            if not any(_every_resource(r) for r in as_list(statement.get("Resource"))):
                continue
            scopable = [a for a in as_list(statement.get("Action")) if _unscoped(str(a), allowed)]
            if scopable:
                report(
                    f"{where} statement {index} grants {scopable} on every resource ('*'); "
                    "name the resources (or tag-scope them with a Condition)",
                    None,
                )


def _check_key_rotation(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != "aws:kms/key:Key":
        return
    spec: Any = args.props.get("customerMasterKeySpec") or args.props.get("keySpec")
    if spec not in (None, "SYMMETRIC_DEFAULT"):
        args.not_applicable(f"{spec} keys cannot rotate automatically")
    if args.props.get("enableKeyRotation") is not True:
        report("automatic key rotation is off", None)


POLICIES = [
    resource_policy(
        "iam-no-wildcard-actions",
        "IAM policies must name their actions: 'service:*' or '*' grants whatever the service "
        "adds next, and broad managed policies do the same.",
        _check_wildcard_actions,
    ),
    resource_policy(
        "iam-no-wildcard-resources",
        "Actions that can be scoped to resources must be: 'Resource': '*' is allowed only for "
        "actions AWS cannot scope (configurable list).",
        _check_wildcard_resources,
        config={
            "unscopableActions": {
                "type": "array",
                "items": {"type": "string"},
                "default": UNSCOPABLE_ACTIONS,
            }
        },
    ),
    resource_policy(
        "kms-key-rotation",
        "Customer managed KMS keys must rotate yearly, limiting what one leaked key version can "
        "decrypt.",
        _check_key_rotation,
    ),
]
