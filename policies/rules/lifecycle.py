"""Lifecycle: what a delete or a replacement leaves behind, and whether a replacement can succeed.

Two resource options decide it: ``retainOnDelete`` (the engine drops the resource from the stack
but never deletes it in the cloud) and ``deleteBeforeReplace`` (Pulumi's default replacement
creates the new resource first and deletes the old one after: pulumi/pulumi
``pkg/resource/deploy/step_generator.go``, the replacement steps, delete-first only where the
provider's diff or the option asks for it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .common import MANDATORY, ReportViolation, ResourceValidationArgs, resource_policy

DATA_REPOSITORY_ASSOCIATION: Final = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"


def retain_on_delete(args: ResourceValidationArgs) -> bool | None:
    """The resource's ``retainOnDelete``, or ``None`` where the caller does not pass it.

    The offline gate passes it (``policies.offline.RecordedResourceOptions``); pulumi-policy
    1.21.0's analyzer does not (its ``PolicyResourceOptions`` has no such field).

    Args:
        args: the policy's arguments for one resource.

    """
    value = getattr(args.opts, "retain_on_delete", None)
    return None if value is None else bool(value)


def _check_retained(args: ResourceValidationArgs, report: ReportViolation) -> None:
    retained = retain_on_delete(args)
    if retained is None:
        args.not_applicable("the analyzer does not pass retainOnDelete; the offline gate does")
    if retained and not args.opts.protect:
        report(
            f"{args.resource_type} is retained on delete but not protected: a destroy (or "
            "switching its component off) drops it from the stack and leaves it running, "
            "unmanaged. Retain only what protectStatefulResources protects.",
            None,
        )


@dataclass(frozen=True)
class FixedIdentity:
    """An input that names the cloud resource, unique where it lives."""

    key: str
    """The input (engine name) that holds the physical name or path."""
    provider_orders_replacement: bool
    """True where the provider itself replaces delete-first when the input is given."""
    why: str
    """Where the rule comes from, for the violation message."""


# pulumi-terraform-bridge v3 pkg/tfbridge/provider.go (Diff) answers delete-before-replace when
# an autonamed input was given by the program rather than filled by the autonamer
# (pkg/tfbridge/schema.go, nameRequiresDeleteBeforeReplace); pulumi-aws autonames "bucket" of
# aws_s3_bucket (provider/resources.go, AutoNameTransform) and the "name" of every resource
# (provider/resources.go, SetAutonaming). A path is no name: nothing orders that replacement.
FIXED_IDENTITIES: Final[dict[str, FixedIdentity]] = {
    DATA_REPOSITORY_ASSOCIATION: FixedIdentity(
        "fileSystemPath",
        False,
        "FSx holds one association per file system path, so a replacement created first "
        "fails while the old association still holds the path",
    ),
    "aws:s3/bucket:Bucket": FixedIdentity("bucket", True, "bucket names are global"),
    "aws:s3/bucketV2:BucketV2": FixedIdentity("bucket", True, "bucket names are global"),
    "aws:kms/alias:Alias": FixedIdentity("name", True, "an alias name is unique per region"),
    "aws:eks/cluster:Cluster": FixedIdentity("name", True, "a cluster name is unique per region"),
    "aws:iam/role:Role": FixedIdentity("name", True, "a role name is unique per account"),
    "aws:ec2/subnetCidrReservation:SubnetCidrReservation": FixedIdentity(
        "cidrBlock",
        False,
        "EC2 holds one reservation of a block in a subnet, and every argument of one is "
        "ForceNew (terraform-provider-aws internal/service/ec2/vpc_subnet_cidr_reservation.go)",
    ),
    "aws:ec2/instance:Instance": FixedIdentity(
        "privateIp",
        False,
        "two instances cannot hold one private address, so the replacement created first "
        "fails while the old instance still has it",
    ),
}
"""Stateful resources whose replacement collides with itself when the identity is fixed."""


def needs_delete_before_replace(resource_type: str, inputs: Any, delete_before_replace: Any) -> str:
    """Why a replacement of this resource would fail as Pulumi would order it ("" if it would not).

    Args:
        resource_type: the resource's type token.
        inputs: its inputs (engine names).
        delete_before_replace: its ``deleteBeforeReplace`` option (``None`` when unset).

    """
    identity = FIXED_IDENTITIES.get(resource_type)
    if identity is None or delete_before_replace or identity.provider_orders_replacement:
        return ""
    value = inputs.get(identity.key)
    if value in (None, ""):
        return ""
    return f"{identity.key} {value!r} is fixed and {identity.why}"


def _check_replace_order(args: ResourceValidationArgs, report: ReportViolation) -> None:
    problem = needs_delete_before_replace(
        args.resource_type, args.props, args.opts.delete_before_replace
    )
    if problem:
        report(
            f"{args.resource_type} would be replaced create-before-delete, but {problem}: "
            "set deleteBeforeReplace",
            None,
        )


POLICIES = [
    resource_policy(
        "retained-resources-protected",
        "A resource retained on delete is also protected: otherwise a destroy, or switching "
        "its component off, leaves it behind, unmanaged and billed, and the next create "
        "collides with it.",
        _check_retained,
        enforcement_level=MANDATORY,
    ),
    resource_policy(
        "fixed-names-delete-before-replace",
        "A stateful resource whose physical name or path is fixed (an FSx data repository "
        "association's file system path) is replaced delete-before-replace, because the "
        "default create-first replacement fails on the name the old one still holds.",
        _check_replace_order,
        enforcement_level=MANDATORY,
    ),
]
