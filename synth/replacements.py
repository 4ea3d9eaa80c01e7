"""Which input changes replace a resource, per resource type, from the providers' source.

Pulumi replaces a resource when its provider's diff says an input cannot change in place (the
bridged AWS provider: terraform-provider-aws ``ForceNew`` fields and ``CustomizeDiff`` calls
to ``ForceNew``; pulumi-kubernetes: its table of immutable fields) or when the resource's own
``replaceOnChanges`` option names the input. :func:`replacing_changes` forecasts it from the
changed key paths of ``synth diff``; the refusal classes say which replacements destroy data.

Each table entry names the upstream file it comes from. terraform-provider-aws files are under
``internal/service/`` of the upstream pulumi-aws 7.51.1 embeds (pulumi-aws ``upstream``
submodule; its schema is what the bridge diffs); read there, not in the AWS API reference.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

When = Literal["change", "decrease", "removed"]

_TF: Final = "terraform-provider-aws internal/service/"
_EKS: Final = "pulumi-eks 4.4.0 nodejs/eks/cluster/cluster.ts (inputs passed to aws.eks.Cluster)"
_K8S_DIFF: Final = "pulumi-kubernetes provider/pkg/provider/diff.go (forceNew)"
_K8S_IDENTITY: Final = (
    "pulumi-kubernetes provider/pkg/provider/provider.go, Diff: changing the identity of the "
    "resource always causes a replacement"
)


@dataclass(frozen=True)
class Trigger:
    """One input whose change replaces the resource."""

    path: str
    """Input key path (engine names), matched with everything under it."""
    source: str
    """The upstream file (and field) the rule comes from."""
    when: When = "change"
    """``change``: any change; ``decrease``: a smaller number; ``removed``: the input goes."""


def _tf(file: str, *fields: tuple[str, str], when: When = "change") -> list[Trigger]:
    return [Trigger(path, f"{_TF}{file} ({tf_name})", when) for path, tf_name in fields]


FILE_SYSTEM: Final = "aws:fsx/lustreFileSystem:LustreFileSystem"
ASSOCIATION: Final = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
AWS_CLUSTER: Final = "aws:eks/cluster:Cluster"
EKS_CLUSTER: Final = "eks:index:Cluster"
PERSISTENT_VOLUME: Final = "kubernetes:core/v1:PersistentVolume"
PERSISTENT_VOLUME_CLAIM: Final = "kubernetes:core/v1:PersistentVolumeClaim"

_CLUSTER_SOURCE: Final = "eks/cluster.go"
_FSX: Final = "fsx/lustre_file_system.go"

REPLACED_BY: Final[dict[str, list[Trigger]]] = {
    FILE_SYSTEM: [
        *_tf(
            _FSX,
            ("subnetIds", "subnet_ids ForceNew"),
            ("securityGroupIds", "security_group_ids ForceNew"),
            ("kmsKeyId", "kms_key_id ForceNew"),
            ("deploymentType", "deployment_type ForceNew"),
            ("storageType", "storage_type ForceNew"),
            ("efaEnabled", "efa_enabled ForceNew"),
            ("driveCacheType", "drive_cache_type ForceNew"),
            ("fileSystemTypeVersion", "file_system_type_version ForceNew"),
            ("importPath", "import_path ForceNew"),
            ("exportPath", "export_path ForceNew"),
            ("importedFileChunkSize", "imported_file_chunk_size ForceNew"),
            ("backupId", "backup_id ForceNew"),
            ("copyTagsToBackups", "copy_tags_to_backups ForceNew"),
        ),
        # Increases are updated in place (UpdateFileSystem); a decrease cannot be.
        *_tf(
            _FSX,
            ("storageCapacity", "resourceLustreFileSystemStorageCapacityCustomizeDiff"),
            ("metadataConfiguration.iops", "resourceLustreFileSystemMetadataConfigCustomizeDiff"),
            when="decrease",
        ),
    ],
    ASSOCIATION: _tf(
        "fsx/data_repository_association.go",
        ("fileSystemId", "file_system_id ForceNew"),
        ("fileSystemPath", "file_system_path ForceNew"),
        ("dataRepositoryPath", "data_repository_path ForceNew"),
    ),
    "aws:s3/bucket:Bucket": _tf(
        "s3/bucket.go",
        ("bucket", "bucket ForceNew"),
        ("bucketPrefix", "bucket_prefix ForceNew"),
        ("objectLockEnabled", "object_lock_enabled ForceNew"),
    ),
    "aws:kms/key:Key": _tf(
        "kms/key.go",
        ("customerMasterKeySpec", "customer_master_key_spec ForceNew"),
        ("keyUsage", "key_usage ForceNew"),
        ("multiRegion", "multi_region ForceNew"),
        ("customKeyStoreId", "custom_key_store_id ForceNew"),
        ("xksKeyId", "xks_key_id ForceNew"),
    ),
    "aws:kms/alias:Alias": _tf("kms/alias.go", ("name", "name ForceNew")),
    "aws:ebs/volume:Volume": _tf(
        "ec2/ebs_volume.go",
        ("availabilityZone", "availability_zone ForceNew"),
        ("encrypted", "encrypted ForceNew"),
        ("kmsKeyId", "kms_key_id ForceNew"),
        ("snapshotId", "snapshot_id ForceNew"),
    ),
    "aws:ec2/vpc:Vpc": _tf("ec2/vpc_.go", ("cidrBlock", "cidr_block ForceNew")),
    "aws:ec2/instance:Instance": _tf(
        "ec2/ec2_instance.go",
        ("subnetId", "subnet_id ForceNew"),
        ("privateIp", "private_ip ForceNew"),
        ("availabilityZone", "availability_zone ForceNew"),
    ),
    "aws:ec2/subnetCidrReservation:SubnetCidrReservation": _tf(
        "ec2/vpc_subnet_cidr_reservation.go",
        ("cidrBlock", "cidr_block ForceNew"),
        ("subnetId", "subnet_id ForceNew"),
        ("reservationType", "reservation_type ForceNew"),
        ("description", "description ForceNew"),
    ),
    "aws:ec2/subnet:Subnet": _tf(
        "ec2/vpc_subnet.go",
        ("cidrBlock", "cidr_block ForceNew"),
        ("availabilityZone", "availability_zone ForceNew"),
        ("availabilityZoneId", "availability_zone_id ForceNew"),
        ("vpcId", "vpc_id ForceNew"),
    ),
    "aws:ec2/securityGroup:SecurityGroup": _tf(
        "ec2/vpc_security_group.go",
        ("name", "name ForceNew"),
        ("description", "description ForceNew"),
        ("vpcId", "vpc_id ForceNew"),
    ),
    # Subnets and security groups of a cluster update in place at this provider version
    # (vpc_config has no ForceNew); removing envelope encryption cannot (ForceNewIfChange).
    AWS_CLUSTER: [
        *_tf(
            _CLUSTER_SOURCE,
            ("name", "name ForceNew"),
            ("roleArn", "role_arn ForceNew"),
            ("bootstrapSelfManagedAddons", "bootstrap_self_managed_addons ForceNew"),
            ("kubernetesNetworkConfig.ipFamily", "kubernetes_network_config.ip_family ForceNew"),
            (
                "kubernetesNetworkConfig.serviceIpv4Cidr",
                "kubernetes_network_config.service_ipv4_cidr ForceNew",
            ),
        ),
        *_tf(
            _CLUSTER_SOURCE,
            ("encryptionConfig", "customdiff.ForceNewIfChange(encryption_config) on removal"),
            when="removed",
        ),
    ],
    # pulumi-eks passes these component inputs to the aws.eks.Cluster it creates; its own
    # ignoreChanges covers bootstrapSelfManagedAddons.
    EKS_CLUSTER: [
        Trigger("name", f"{_EKS}: name -> {_TF}{_CLUSTER_SOURCE} name ForceNew"),
        Trigger("serviceRole", f"{_EKS}: roleArn -> {_TF}{_CLUSTER_SOURCE} role_arn ForceNew"),
        Trigger(
            "kubernetesServiceIpAddressRange",
            f"{_EKS}: kubernetesNetworkConfig.serviceIpv4Cidr -> {_TF}{_CLUSTER_SOURCE} ForceNew",
        ),
        Trigger(
            "ipFamily",
            f"{_EKS}: kubernetesNetworkConfig.ipFamily -> {_TF}{_CLUSTER_SOURCE} ForceNew",
        ),
        Trigger(
            "encryptionConfigKeyArn",
            f"{_EKS}: encryptionConfig -> {_TF}{_CLUSTER_SOURCE} ForceNewIfChange on removal",
            "removed",
        ),
    ],
    # The system node group: a replacement creates the new group first (its name is a
    # prefix) and is not refused, but a reviewer sees every node of it go.
    "aws:eks/nodeGroup:NodeGroup": _tf(
        "eks/node_group.go",
        ("amiType", "ami_type ForceNew"),
        ("capacityType", "capacity_type ForceNew"),
        ("clusterName", "cluster_name ForceNew"),
        ("instanceTypes", "instance_types ForceNew"),
        ("launchTemplate.id", "launch_template.id ForceNew"),
        ("launchTemplate.name", "launch_template.name ForceNew"),
        ("nodeGroupNamePrefix", "node_group_name_prefix ForceNew"),
        ("nodeRoleArn", "node_role_arn ForceNew"),
        ("subnetIds", "subnet_ids ForceNew"),
    ),
    PERSISTENT_VOLUME_CLAIM: [
        Trigger(f"spec.{field}", _K8S_DIFF)
        for field in ("accessModes", "selector", "storageClassName", "volumeName")
    ],
    PERSISTENT_VOLUME: [
        Trigger(f"spec.{source}", _K8S_DIFF)
        for source in ("awsElasticBlockStore", "csi", "hostPath", "local", "nfs")
    ],
    "kubernetes:storage.k8s.io/v1:StorageClass": [
        Trigger("parameters", _K8S_DIFF),
        Trigger("provisioner", _K8S_DIFF),
    ],
}
"""Replacement-triggering inputs per resource type."""

KUBERNETES_IDENTITY: Final = (
    Trigger("metadata.name", _K8S_IDENTITY),
    Trigger("metadata.namespace", _K8S_IDENTITY),
)
"""Every Kubernetes object is replaced when its name or namespace changes."""

REFUSED: Final[dict[str, str]] = {
    AWS_CLUSTER: "cluster",
    EKS_CLUSTER: "cluster",
    FILE_SYSTEM: "file system",
    ASSOCIATION: "association",
    "aws:s3/bucket:Bucket": "bucket",
    "aws:s3/bucketV2:BucketV2": "bucket",
    "aws:kms/key:Key": "key",
    "aws:ebs/volume:Volume": "volume",
    PERSISTENT_VOLUME_CLAIM: "volume",
    PERSISTENT_VOLUME: "volume",
}
"""Types whose replacement loses data or the platform itself: refused without --allow-replace
(a retained PersistentVolume and its claim excepted: :func:`synth.diff.deletes_no_data`)."""

_INDEX: Final = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class Replacement:
    """Why a change replaces its resource."""

    key: str
    """The changed key path."""
    source: str
    """The rule's upstream file, or ``replaceOnChanges``."""


def _covers(path: str, key: str) -> bool:
    """Whether a changed key (``subnetIds[0]``, ``spec.selector.x``) is at or under ``path``.

    ``*`` (``replaceOnChanges: ["*"]``) covers every key; list indexes are ignored.
    """
    if path == "*":
        return True
    plain = _INDEX.sub("", key)
    return plain == path or plain.startswith((path + ".", path + "["))


def _fires(trigger: Trigger, old: Any, new: Any, absent: Any) -> bool:
    if trigger.when == "removed":
        return new is absent and old is not absent
    if trigger.when == "decrease":
        return isinstance(old, int | float) and isinstance(new, int | float) and new < old
    return True


def kubernetes_type(manifest: Mapping[str, Any]) -> str:
    """The Pulumi type token of a manifest (``kubernetes:core/v1:PersistentVolumeClaim``)."""
    api_version = str(manifest.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{manifest.get('kind', '')}"


def triggers_of(resource_type: str, replace_on_changes: Iterable[str] = ()) -> list[Trigger]:
    """The rules for one resource: its type's table entry plus its ``replaceOnChanges``.

    Args:
        resource_type: the Pulumi type token.
        replace_on_changes: the resource's own option (``*`` replaces on any change).

    """
    triggers = list(REPLACED_BY.get(resource_type, []))
    if resource_type.startswith("kubernetes:"):
        triggers += KUBERNETES_IDENTITY
    triggers += [Trigger(path, "replaceOnChanges") for path in replace_on_changes]
    return triggers


def replaced_through(triggers: Iterable[Trigger], input_name: str) -> Trigger | None:
    """The rule that replaces a resource when a resource its ``input_name`` depends on is.

    A replaced resource gets a new id, unknown until it exists, so every input that carries
    it changes; the engine replaces the dependent when a replace-on-change rule covers that
    input, or an input under it (``launchTemplate`` carries ``launchTemplate.id``). A rule
    that fires only on a decrease or a removal does not.

    Args:
        triggers: the dependent's rules (:func:`triggers_of`).
        input_name: a top-level input that depends on the replaced resource.
    """
    for trigger in triggers:
        if trigger.when != "change":
            continue
        if _covers(trigger.path, input_name) or _covers(input_name, trigger.path):
            return trigger
    return None


def replacing_changes(
    triggers: Iterable[Trigger], changes: Iterable[tuple[str, Any, Any]], absent: Any
) -> list[Replacement]:
    """The changes that replace the resource, each with the rule behind it.

    Args:
        triggers: the resource's rules (:func:`triggers_of`).
        changes: ``(key, old, new)`` of every changed key path.
        absent: the marker a side uses for a key it lacks.

    """
    rules = list(triggers)
    found = []
    for key, old, new in changes:
        rule = next(
            (t for t in rules if _covers(t.path, key) and _fires(t, old, new, absent)), None
        )
        if rule is not None:
            found.append(Replacement(key, rule.source))
    return found
