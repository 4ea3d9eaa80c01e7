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
_K8S: Final = "pulumi-kubernetes provider/pkg/provider/"
_K8S_DIFF: Final = f"{_K8S}diff.go (forceNew)"
_RANDOM: Final = (
    "pulumi-random 4.21.4 (terraform-provider-random internal/provider/resource_password.go, "
    "RequiresReplace on every argument)"
)
_RANDOM_BYTES: Final = (
    "pulumi-random 4.21.4 (terraform-provider-random internal/provider/resource_bytes.go, "
    "RequiresReplace on keepers and length)"
)
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
    """``change``: any change; ``decrease``: a smaller number or dotted version; ``removed``:
    the input goes."""
    only_if: str = ""
    """An input of the resource that must be true for the rule to apply
    (``userDataReplaceOnChange``: a ``CustomizeDiff`` ``ForceNewIf``); empty: always."""


def _tf(
    file: str, *fields: tuple[str, str], when: When = "change", only_if: str = ""
) -> list[Trigger]:
    return [Trigger(path, f"{_TF}{file} ({tf_name})", when, only_if) for path, tf_name in fields]


def _forcenew(file: str, *paths: str) -> list[Trigger]:
    """One ``ForceNew`` trigger per engine path, named by its Terraform attribute."""
    return _tf(file, *((path, f"{_snake(path)} ForceNew") for path in paths))


def _snake(path: str) -> str:
    if path in _TF_NAMES:
        return _TF_NAMES[path]
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", path).lower()


FILE_SYSTEM: Final = "aws:fsx/lustreFileSystem:LustreFileSystem"
EFS_FILE_SYSTEM: Final = "aws:efs/fileSystem:FileSystem"
ASSOCIATION: Final = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
AWS_CLUSTER: Final = "aws:eks/cluster:Cluster"
EKS_CLUSTER: Final = "eks:index:Cluster"
PERSISTENT_VOLUME: Final = "kubernetes:core/v1:PersistentVolume"
PERSISTENT_VOLUME_CLAIM: Final = "kubernetes:core/v1:PersistentVolumeClaim"

INSTANCE: Final = "aws:ec2/instance:Instance"
_INSTANCE: Final = "ec2/ec2_instance.go"
LAUNCH_TEMPLATE: Final = "aws:ec2/launchTemplate:LaunchTemplate"
LATEST_VERSION: Final = "$Latest"
UNVERSIONED_TEMPLATE_KEYS: Final = frozenset(
    {"defaultVersion", "description", "tags", "tagsAll", "updateDefaultVersion"}
)
"""Launch template inputs whose change makes no new version: every other updatable input is in
``updateKeys`` of resourceLaunchTemplateUpdate, which calls CreateLaunchTemplateVersion."""
LAUNCH_TEMPLATE_VERSIONS: Final = (
    f"{_TF}ec2/ec2_launch_template.go (resourceLaunchTemplateUpdate: CreateLaunchTemplateVersion"
    " when an updateKeys input changes)"
)
LATEST_VERSION_SOURCE: Final = (
    f"{_TF}{_INSTANCE} (CustomizeDiff: ForceNew(launch_template.0.version) when the version is"
    " $Latest and the template's latest version is not the instance's)"
)
"""Why an instance launched from ``$Latest`` is replaced when its template gets a new version."""
_CLUSTER_SOURCE: Final = "eks/cluster.go"
_FSX: Final = "fsx/lustre_file_system.go"

_NOTHING_REPLACES: Final = {
    "aws:ec2/internetGateway:InternetGateway": f"{_TF}ec2/vpc_internet_gateway.go: no ForceNew "
    "(vpc_id detaches and attaches in place)",
    "pulumi:providers:aws": "not audited: pulumi-aws's provider configuration diff was not read; "
    "the stacks fix its region and account per stack",
}
"""Types with no replacing input, and where that was read."""
_COMPONENTS: Final = {
    "kubernetes:yaml/v2:ConfigFile": f"{_K8S}yaml/v2/configfile.go (Construct)",
    "kubernetes:kustomize/v2:Directory": f"{_K8S}kustomize/v2/directory.go (Construct)",
}
"""pulumi-kubernetes' component resources (``RegisterComponentResource`` in the provider's
Construct): no provider diff, so never replaced themselves. Their children are the objects of the
file or the kustomization, registered with the component as parent and named with its
``resourcePrefix`` (default: the component's name); each child is an object of its own kind,
replaced by that kind's rules, and an object gone from the file is deleted."""
_K8S_IDENTITY_ONLY: Final = tuple(
    f"kubernetes:{token}"
    for token in (
        "admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
        "admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
        "core/v1:LimitRange",
        "core/v1:Namespace",
        "core/v1:ServiceAccount",
        "k8s.mariadb.com/v1alpha1:MariaDB",
        "karpenter.k8s.aws/v1:EC2NodeClass",
        "karpenter.sh/v1:NodePool",
        "karpenter.sh/v1alpha1:NodeOverlay",
        "keda.sh/v1alpha1:ScaledObject",
        "monitoring.coreos.com/v1:PodMonitor",
        "monitoring.coreos.com/v1:PrometheusRule",
        "monitoring.coreos.com/v1:ServiceMonitor",
        "networking.k8s.io/v1:NetworkPolicy",
        "ray.io/v1:RayCluster",
        "rbac.authorization.k8s.io/v1:ClusterRole",
        "rbac.authorization.k8s.io/v1:Role",
        "scheduling.k8s.io/v1:PriorityClass",
        "scheduling.volcano.sh/v1beta1:Queue",
        "slinky.slurm.net/v1beta1:NodeSet",
        "slinky.slurm.net/v1beta1:Token",
        "trainer.kubeflow.org/v1alpha1:TrainingRuntime",
    )
)
"""Kinds with no forceNew entry of their own in diff.go: only their identity replaces them."""
_TF_NAMES: Final = {
    "ebsBlockDevices": "ebs_block_device",
    "ephemeralBlockDevices": "ephemeral_block_device",
    "networkInterfaces": "network_interface",
}
"""Engine names of list blocks, which Pulumi pluralizes, and their Terraform names."""

REPLACED_BY: Final[dict[str, list[Trigger]]] = {
    **{
        resource_type: []
        for resource_type in (*_NOTHING_REPLACES, *_COMPONENTS, *_K8S_IDENTITY_ONLY)
    },
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
            # pulumi-aws 7.51.1: a higher version upgrades the file system in place, a lower
            # one replaces it
            ("fileSystemTypeVersion", "file_system_type_version, lower version only"),
            when="decrease",
        ),
    ],
    # The model store (components/storage/model_store.py). Throughput, lifecycle policies and
    # protection update in place (resourceFileSystemUpdate); a mount target's security groups
    # too (ModifyMountTargetSecurityGroups); an access point updates its tags only.
    EFS_FILE_SYSTEM: _forcenew(
        "efs/file_system.go",
        "availabilityZoneName",
        "creationToken",
        "encrypted",
        "kmsKeyId",
        "performanceMode",
    ),
    "aws:efs/mountTarget:MountTarget": _forcenew(
        "efs/mount_target.go",
        "fileSystemId",
        "ipAddress",
        "ipAddressType",
        "ipv6Address",
        "subnetId",
    ),
    "aws:efs/accessPoint:AccessPoint": _forcenew(
        "efs/access_point.go", "fileSystemId", "posixUser", "rootDirectory"
    ),
    "aws:efs/backupPolicy:BackupPolicy": _forcenew("efs/backup_policy.go", "fileSystemId"),
    # Its policy text updates in place (PutFileSystemPolicy).
    "aws:efs/fileSystemPolicy:FileSystemPolicy": _forcenew(
        "efs/file_system_policy.go", "fileSystemId"
    ),
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
    # The admin client (components/storage/admin_client.py) sets userDataReplaceOnChange: its
    # user data changes with the teams and the layout, and the change replaces it.
    INSTANCE: [
        *_forcenew(
            _INSTANCE,
            "ami",
            "associatePublicIpAddress",
            "availabilityZone",
            "cpuOptions",
            "ebsBlockDevices",
            "ebsOptimized",
            "enclaveOptions",
            "ephemeralBlockDevices",
            "hibernation",
            "hostId",
            "instanceMarketOptions",
            "ipv6Addresses",
            "keyName",
            "launchTemplate.id",
            "launchTemplate.name",
            "networkInterfaces",
            "placementGroup",
            "placementPartitionNumber",
            "privateIp",
            "securityGroups",
            "subnetId",
            "tenancy",
        ),
        *_tf(
            _INSTANCE,
            ("userData", "customdiff.ForceNewIf(user_data) when user_data_replace_on_change"),
            (
                "userDataBase64",
                "customdiff.ForceNewIf(user_data_base64) when user_data_replace_on_change",
            ),
            only_if="userDataReplaceOnChange",
        ),
    ],
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
            (
                "accessConfig.bootstrapClusterCreatorAdminPermissions",
                "access_config.bootstrap_cluster_creator_admin_permissions ForceNew",
            ),
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
        for source in (
            "awsElasticBlockStore",
            "azureDisk",
            "azureFile",
            "cephfs",
            "cinder",
            "csi",
            "fc",
            "flexVolume",
            "flocker",
            "gcePersistentDisk",
            "glusterfs",
            "hostPath",
            "iscsi",
            "local",
            "nfs",
            "photonPersistentDisk",
            "portworxVolume",
            "quobyte",
            "rbd",
            "scaleIO",
            "storageos",
            "vsphereVolume",
        )
    ],
    "kubernetes:storage.k8s.io/v1:StorageClass": [
        Trigger("parameters", _K8S_DIFF),
        Trigger("provisioner", _K8S_DIFF),
    ],
    # The stacks' provider sets neither enableConfigMapMutable nor enableSecretMutable, so a
    # ConfigMap's and a Secret's data replace them (diff.go, forceNewProperties).
    "kubernetes:core/v1:ConfigMap": [Trigger(f, _K8S_DIFF) for f in ("binaryData", "data")],
    "kubernetes:core/v1:Secret": [Trigger(f, _K8S_DIFF) for f in ("data", "stringData", "type")],
    "kubernetes:core/v1:ResourceQuota": [Trigger("spec.scopes", _K8S_DIFF)],
    "kubernetes:core/v1:Service": [Trigger("spec.clusterIP", _K8S_DIFF)],
    "kubernetes:apps/v1:Deployment": [Trigger("spec.selector", _K8S_DIFF)],
    "kubernetes:apps/v1:DaemonSet": [Trigger("spec.selector", _K8S_DIFF)],
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": [Trigger("roleRef", _K8S_DIFF)],
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": [Trigger("roleRef", _K8S_DIFF)],
    # Keyed as in helm/<release>.yaml, where the release's name is `release`.
    "kubernetes:helm.sh/v3:Release": [
        Trigger(key, f"{_K8S}helm_release.go, Diff (forceNewFields .{field})")
        for key, field in (("release", "name"), ("namespace", "namespace"))
    ],
    # A provider replaced replaces every resource it manages (not followed by the cascade).
    "pulumi:providers:kubernetes": [
        Trigger(f, f"{_K8S}provider.go, DiffConfig (the active cluster changes)")
        for f in ("cluster", "context", "kubeconfig", "renderYamlToDirectory")
    ],
    "random:index/randomPassword:RandomPassword": [
        Trigger(f, _RANDOM)
        for f in (
            "keepers",
            "length",
            "lower",
            "minLower",
            "minNumeric",
            "minSpecial",
            "minUpper",
            "number",
            "numeric",
            "overrideSpecial",
            "special",
            "upper",
        )
    ],
    "random:index/randomBytes:RandomBytes": [
        Trigger(f, _RANDOM_BYTES) for f in ("keepers", "length")
    ],
    # terraform-provider-aws, the other types the stacks create: each ForceNew attribute.
    "aws:cloudwatch/eventRule:EventRule": _forcenew(
        "events/rule.go", "eventBusName", "name", "namePrefix"
    ),
    "aws:cloudwatch/eventTarget:EventTarget": _forcenew(
        "events/target.go", "eventBusName", "rule", "targetId"
    ),
    "aws:cloudwatch/logGroup:LogGroup": _forcenew(
        "logs/group.go", "logGroupClass", "name", "namePrefix"
    ),
    "aws:cloudwatch/metricAlarm:MetricAlarm": _tf(
        "cloudwatch/metric_alarm.go", ("name", "alarm_name ForceNew")
    ),
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": _forcenew(
        "ec2/vpc_default_security_group.go", "vpcId"
    ),
    "aws:ec2/eip:Eip": _forcenew(
        "ec2/ec2_eip.go",
        "address",
        "customerOwnedIpv4Pool",
        "domain",
        "ipamPoolId",
        "networkBorderGroup",
        "publicIpv4Pool",
    ),
    "aws:ec2/flowLog:FlowLog": _forcenew(
        "ec2/vpc_flow_log.go",
        "deliverCrossAccountRole",
        "destinationOptions",
        "eniId",
        "iamRoleArn",
        "logDestination",
        "logDestinationType",
        "logFormat",
        "maxAggregationInterval",
        "subnetId",
        "trafficType",
        "transitGatewayAttachmentId",
        "transitGatewayId",
        "vpcId",
    ),
    "aws:ec2/launchTemplate:LaunchTemplate": _forcenew(
        "ec2/ec2_launch_template.go", "name", "namePrefix"
    ),
    "aws:ec2/natGateway:NatGateway": _forcenew(
        "ec2/vpc_nat_gateway.go", "allocationId", "connectivityType", "privateIp", "subnetId"
    ),
    "aws:ec2/placementGroup:PlacementGroup": _forcenew(
        "ec2/ec2_placement_group.go", "name", "partitionCount", "spreadLevel", "strategy"
    ),
    "aws:ec2/route:Route": _forcenew(
        "ec2/vpc_route.go",
        "destinationCidrBlock",
        "destinationIpv6CidrBlock",
        "destinationPrefixListId",
        "routeTableId",
    ),
    "aws:ec2/routeTable:RouteTable": _forcenew("ec2/vpc_route_table.go", "vpcId"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": _forcenew(
        "ec2/vpc_route_table_association.go", "gatewayId", "subnetId"
    ),
    "aws:ec2/vpcEndpoint:VpcEndpoint": _forcenew(
        "ec2/vpc_endpoint.go", "serviceName", "serviceRegion", "vpcEndpointType", "vpcId"
    ),
    "aws:ec2transitgateway/vpcAttachment:VpcAttachment": _forcenew(
        "ec2/transitgateway_vpc_attachment.go", "transitGatewayId", "vpcId"
    ),
    "aws:eks/accessEntry:AccessEntry": _forcenew(
        "eks/access_entry.go", "clusterName", "principalArn", "type"
    ),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": _forcenew(
        "eks/access_policy_association.go",
        "accessScope",
        "clusterName",
        "policyArn",
        "principalArn",
    ),
    "aws:eks/addon:Addon": _forcenew("eks/addon.go", "addonName", "clusterName"),
    # The workspace's key is chosen at creation (CreateWorkspace's kmsKeyArn; UpdateWorkspace
    # takes the alias only); its alias and tags update in place.
    "aws:amp/workspace:Workspace": _forcenew("amp/workspace.go", "kmsKeyArn"),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": _forcenew(
        "eks/pod_identity_association.go", "clusterName", "namespace", "serviceAccount"
    ),
    "aws:iam/role:Role": _forcenew("iam/role.go", "name", "namePrefix", "path"),
    "aws:iam/rolePolicy:RolePolicy": _forcenew("iam/role_policy.go", "name", "namePrefix", "role"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": _forcenew(
        "iam/role_policy_attachment.go", "policyArn", "role"
    ),
    **{
        # expected_bucket_owner is deprecated and no longer ForceNew (provider v6)
        f"aws:s3/{token}": _forcenew(f"s3/{file}", "bucket")
        for token, file in (
            (
                "bucketLifecycleConfiguration:BucketLifecycleConfiguration",
                "bucket_lifecycle_configuration.go",
            ),
            ("bucketLogging:BucketLogging", "bucket_logging.go"),
            (
                "bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                "bucket_server_side_encryption_configuration.go",
            ),
            ("bucketVersioning:BucketVersioning", "bucket_versioning.go"),
        )
    },
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": _forcenew(
        "s3/bucket_ownership_controls.go", "bucket"
    ),
    "aws:s3/bucketPolicy:BucketPolicy": _forcenew("s3/bucket_policy.go", "bucket"),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": _forcenew(
        "s3/bucket_public_access_block.go", "bucket"
    ),
    "aws:scheduler/schedule:Schedule": _forcenew(
        "scheduler/schedule.go", "groupName", "name", "namePrefix"
    ),
    "aws:sqs/queue:Queue": _forcenew("sqs/queue.go", "fifoQueue", "name", "namePrefix"),
    "aws:sqs/queuePolicy:QueuePolicy": _forcenew("sqs/queue_policy.go", "queueUrl"),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": _forcenew(
        "ec2/vpc_security_group_ingress_rule.go", "securityGroupId"
    ),
}
"""Replacement-triggering inputs per resource type: every type the stacks create, each audited
against its provider's source (:data:`AUDITED` says where; an empty list: nothing replaces it,
only its identity for a Kubernetes object)."""


KUBERNETES_IDENTITY: Final = (
    Trigger("metadata.name", _K8S_IDENTITY),
    Trigger("metadata.namespace", _K8S_IDENTITY),
)
"""Every Kubernetes object is replaced when its name or namespace changes."""

REFUSED: Final[dict[str, str]] = {
    AWS_CLUSTER: "cluster",
    EKS_CLUSTER: "cluster",
    FILE_SYSTEM: "file system",
    EFS_FILE_SYSTEM: "file system",
    ASSOCIATION: "association",
    "aws:s3/bucket:Bucket": "bucket",
    "aws:s3/bucketV2:BucketV2": "bucket",
    "aws:kms/key:Key": "key",
    "aws:ebs/volume:Volume": "volume",
    "aws:amp/workspace:Workspace": "metrics workspace",
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
        if isinstance(old, str) and isinstance(new, str):
            return _version(new) < _version(old)
        return isinstance(old, int | float) and isinstance(new, int | float) and new < old
    return True


def _version(value: str) -> tuple[int, ...]:
    """A dotted version (``2.15``) as numbers, so ``2.9`` sorts before ``2.10``; () if not one."""
    parts = value.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


def kubernetes_type(manifest: Mapping[str, Any]) -> str:
    """The Pulumi type token of a manifest (``kubernetes:core/v1:PersistentVolumeClaim``)."""
    api_version = str(manifest.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{manifest.get('kind', '')}"


def triggers_of(
    resource_type: str,
    replace_on_changes: Iterable[str] = (),
    inputs: Mapping[str, Any] | None = None,
) -> list[Trigger]:
    """The rules for one resource: its type's table entry plus its ``replaceOnChanges``.

    Args:
        resource_type: the Pulumi type token.
        replace_on_changes: the resource's own option (``*`` replaces on any change).
        inputs: the resource's inputs now, which decide a rule with ``only_if``
            (``userDataReplaceOnChange``). Default none: such rules do not apply.

    """
    triggers = [
        t
        for t in REPLACED_BY.get(resource_type, [])
        if not t.only_if or (inputs or {}).get(t.only_if) is True
    ]
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


AUDIT_PAGE: Final = "docs/concepts/offline-synthesis.md"
"""The page that lists the audit (:func:`audit_table`), between :data:`AUDIT_MARKERS`."""
AUDIT_MARKERS: Final = (
    "<!-- replacement-audit:begin (generated by `scripts/synth reference --write`) -->",
    "<!-- replacement-audit:end -->",
)


def _rule_file(source: str) -> str:
    """The upstream file of a rule's source, without the field in parentheses."""
    return source.split(" (", 1)[0].split(", ", 1)[0].split(": ", 1)[0]


def _field(trigger: Trigger) -> str:
    qualifier = {"decrease": " (smaller)", "removed": " (removed)"}.get(trigger.when, "")
    if trigger.only_if:
        qualifier += f" (with `{trigger.only_if}`)"
    return f"`{trigger.path}`{qualifier}"


def audit_table() -> str:
    """:data:`REPLACED_BY` as a Markdown table: each type, the inputs that replace it, where from.

    Every Kubernetes object is also replaced when its name or namespace changes
    (:data:`KUBERNETES_IDENTITY`), which the table says once, under it.
    """
    lines = [
        "| Resource type | Replaced when these inputs change | Read in |",
        "| --- | --- | --- |",
    ]
    for resource_type, triggers in sorted(REPLACED_BY.items()):
        if triggers:
            fields = ", ".join(_field(t) for t in triggers)
            files = "; ".join(sorted({_rule_file(t.source) for t in triggers}))
        elif resource_type in _NOTHING_REPLACES:
            fields, files = "nothing", _NOTHING_REPLACES[resource_type]
        elif resource_type in _COMPONENTS:
            fields = (
                "nothing: a component resource; its children are the objects it reads, each"
                " replaced by its own kind's rules (named `<resourcePrefix>` or the component's"
                " name, then the object's), and an object gone from the source is deleted"
            )
            files = _COMPONENTS[resource_type]
        else:
            fields, files = "nothing but its identity", _K8S_DIFF.split(" (", 1)[0]
        lines.append(f"| `{resource_type}` | {fields} | {files} |")
    lines.append("")
    lines.append(
        "Every Kubernetes object is also replaced when `metadata.name` or `metadata.namespace`"
        f" changes ({_K8S_IDENTITY})."
    )
    lines.append("")
    unversioned = ", ".join(f"`{k}`" for k in sorted(UNVERSIONED_TEMPLATE_KEYS))
    lines.append(
        f"A `{LAUNCH_TEMPLATE}` change that makes a new version (any input but"
        f" {unversioned}: {LAUNCH_TEMPLATE_VERSIONS})"
        f" replaces every `{INSTANCE}` that launches from it with `launchTemplate.version:"
        f" {LATEST_VERSION}` ({LATEST_VERSION_SOURCE}): the admin client, whose launch template"
        " `storage-lustre-admin` it uses that way."
    )
    return "\n".join(lines)


def with_audit(page: str) -> str:
    """``page`` with the text between :data:`AUDIT_MARKERS` replaced by :func:`audit_table`.

    Raises:
        ValueError: the page lacks the markers.
    """
    begin, end = AUDIT_MARKERS
    if begin not in page or end not in page:
        raise ValueError(f"{AUDIT_PAGE}: no {begin} ... {end} markers")
    head, rest = page.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{audit_table()}\n{end}{tail}"
