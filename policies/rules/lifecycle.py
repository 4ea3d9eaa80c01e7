"""Lifecycle: what a delete or a replacement leaves behind, and whether a replacement can succeed.

Two resource options decide it: ``retainOnDelete`` (the engine drops the resource from the stack
but never deletes it in the cloud) and ``deleteBeforeReplace`` (Pulumi's default replacement
creates the new resource first and deletes the old one after: pulumi/pulumi
``pkg/resource/deploy/step_generator.go``, the replacement steps, delete-first only where the
provider's diff or the option asks for it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pulumi_policy import PolicyResource, StackValidationArgs, StackValidationPolicy

from .common import HELM_TYPES, MANDATORY, ReportViolation, ResourceValidationArgs, resource_policy

DATA_REPOSITORY_ASSOCIATION: Final = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
NAMESPACE_TYPE: Final = "kubernetes:core/v1:Namespace"


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


def kubernetes_namespace_of(resource_type: str, props: Any) -> str | None:
    """The namespace a Kubernetes resource of the stack lives in, or None (cluster-scoped).

    Two shapes name it: ``metadata.namespace`` of an object, and ``namespace`` of a Helm
    release or chart (where its objects go). A Namespace lives in none.

    Args:
        resource_type: the resource's type token.
        props: its inputs (engine names).

    """
    if not resource_type.startswith("kubernetes:") or resource_type == NAMESPACE_TYPE:
        return None
    if resource_type in HELM_TYPES:
        namespace = props.get("namespace")
    else:
        metadata = props.get("metadata")
        namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    return namespace if isinstance(namespace, str) and namespace else None


def _namespace_name(resource: PolicyResource) -> str | None:
    metadata = resource.props.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else None


def _check_retained_namespaces(args: StackValidationArgs, report: ReportViolation) -> None:
    # Kubernetes deletes every object of a namespace it deletes, retained by Pulumi or not
    # (the namespace controller empties it first), and an object whose finalizer's owner is
    # already gone keeps the namespace Terminating, past pulumi-kubernetes' 10-minute wait for
    # the delete (v4.34.2 provider/pkg/await/await.go, Deletion).
    namespaces: dict[str, PolicyResource] = {}
    for resource in args.resources:
        if resource.resource_type == NAMESPACE_TYPE and (name := _namespace_name(resource)):
            namespaces[name] = resource
    for resource in args.resources:
        if getattr(resource.opts, "retain_on_delete", None) is not True:
            continue  # not retained, or the analyzer does not pass the option
        namespace = kubernetes_namespace_of(resource.resource_type, resource.props)
        owner = namespaces.get(namespace or "")
        if owner is None:
            continue  # cluster-scoped, or a namespace the stack never deletes
        if getattr(owner.opts, "retain_on_delete", None) is not True:
            report(
                f"{resource.resource_type} {resource.name} is retained on delete, but its "
                f"namespace {namespace!r} ({owner.name}) is not: deleting the namespace "
                "deletes it anyway. Retain the namespace too (retain_on_delete where "
                "protectStatefulResources), or move the object into a retained namespace.",
                resource.urn,
            )


CRD_RELEASE_SUFFIX: Final = "-crds"
"""How the stacks name a Helm release that installs only CustomResourceDefinitions
(``slurm-operator-crds``, ``mariadb-operator-crds``, ``trainer-jobset-crds``)."""


def _check_crd_releases(args: ResourceValidationArgs, report: ReportViolation) -> None:
    # Uninstalling a chart deletes the CRDs in its templates, and the API server deletes every
    # object of a deleted CRD, retained by Pulumi or not; with the operator already gone, their
    # finalizers keep the CRD Terminating and the uninstall waits until it times out.
    if args.resource_type not in HELM_TYPES or not args.name.endswith(CRD_RELEASE_SUFFIX):
        return
    retained = retain_on_delete(args)
    if retained is None:
        args.not_applicable("the analyzer does not pass retainOnDelete; the offline gate does")
    if args.opts.protect and retained is False:
        report(
            f"the CRD release {args.name} is protected but not retained on delete: a destroy, "
            "or switching its component off once unprotected, uninstalls it, deleting its "
            "CRDs and with them every object of theirs the stack retains (a database), while "
            "their finalizers keep the CRDs Terminating past the uninstall's wait. Retain it "
            "where protectStatefulResources protects it.",
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
    resource_policy(
        "crd-releases-retained",
        "A protected Helm release of CustomResourceDefinitions is retained on delete too: "
        "uninstalling it deletes the CRDs and every object of theirs, retained or not, and "
        "their finalizers then stall the uninstall.",
        _check_crd_releases,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="retained-objects-in-retained-namespaces",
        description="A Kubernetes object retained on delete lives in a namespace that is "
        "retained too: deleting a namespace deletes everything in it, and an operator's "
        "finalizers on what it held keep it Terminating once the operator is gone, so the "
        "destroy stops before the cluster.",
        validate=_check_retained_namespaces,
        enforcement_level=MANDATORY,
    ),
]
