"""The shared model store: an EFS file system every node reaches, an access point per team.

Models are written once and read by many jobs in every zone, so they live on Amazon EFS (regional,
NFS, mount targets in every private subnet's zone) beside the Lustre scratch and checkpoints in
the training zone. Each team gets an access point on ``/<team>`` (its gid, setgid mode 2770), and
the ``shared`` access point on ``/shared`` belongs to the platform writers' gid (2775): publishers
mount it read-write. Every other team mounts ``/shared`` through the readers' access point, whose
POSIX user (``nobody``, 65534:65534) is neither the root's owner nor in the writers' group, so
EFS itself refuses its writes whatever the pod asks for (only the r-x "other" bits of 2775 apply).
Every team namespace gets one static PersistentVolume and claim per area, mounted at ``/models``
and ``/models/shared``; Slurm's namespace mounts the whole file system at ``/models`` (its users
carry the team gids, which the directories check).

EFS API model (fields, limits): boto/botocore 1.44.8
botocore/data/efs/2015-02-01/service-2.json. The CSI driver: kubernetes-sigs/aws-efs-csi-driver
v3.4.1 pkg/driver/node.go (NodePublishVolume: handle ``<fs>:<path>:<access point>``, TLS always
with an access point, ``ro`` for a read-only volume).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import versions
from components.admission import enforced_policy
from components.config import PlatformConfig, backups_enabled
from components.config.model_store import (
    SHARED_AREA,
    SHARED_READERS,
    ModelStoreConfig,
    transition_rule,
)
from components.iam import eks_cluster_arn, pod_identity_trust_policy, role_with_policies
from components.storage.volumes import persistent_volume_name
from components.teams import TEAM_LABEL
from components.tenancy import team_namespaces

NFS_PORT: Final = 2049
"""The one port EFS mount targets serve (EFS user guide, "Using VPC security groups")."""
EFS_CSI_DRIVER: Final = "efs.csi.aws.com"
EFS_CSI_CONTROLLER_SERVICE_ACCOUNT: Final = "efs-csi-controller-sa"
"""The add-on controller's service account (kubernetes-sigs/aws-efs-csi-driver v3.4.1
deploy/kubernetes/base/controller-serviceaccount.yaml)."""
EFS_CSI_NODE_SERVICE_ACCOUNT: Final = "efs-csi-node-sa"
"""The node plugin's service account (kubernetes-sigs/aws-efs-csi-driver v3.4.1
deploy/kubernetes/base/node-daemonset.yaml, hostNetwork): its role is the identity every mount
is signed with (:func:`file_system_policy`)."""
EFS_CSI_POLICY: Final = "service-role/AmazonEFSCSIDriverPolicy"
IAM_MOUNT_OPTION: Final = "iam"
"""The mount option that makes efs-utils sign the NFS connection with the mounting identity
(aws/efs-utils v3.2.0 src/efs_utils_common/aws_credentials.py, get_aws_security_credentials:
``use_iam``). The driver passes a PV's mountOptions to ``mount -t efs`` as they are
(kubernetes-sigs/aws-efs-csi-driver v3.4.1 pkg/driver/node.go, NodePublishVolume), and adds
``tls`` itself (``encryptInTransit``), so ``tls`` is not repeated here (a deprecated option)."""
CLIENT_ACTIONS: Final = ("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite")
"""What the node plugin's identity may do as an NFS client: mount and write. Not
``ClientRootAccess``: without it EFS squashes root (EFS user guide, "Using IAM to control
access to file systems"), which only Slurm's root mount would see (access points impose their
user anyway)."""
TEAM_DIRECTORY_MODE: Final = "2770"
"""A team's root: setgid, the team's group reads and writes, nobody else enters."""
SHARED_DIRECTORY_MODE: Final = "2775"
"""The shared root: setgid, the writers' group writes, every team reads."""
MODELS_MOUNT: Final = "/models"
"""Where a team's pods see their own area (and Slurm the whole file system)."""
SHARED_MODELS_MOUNT: Final = f"{MODELS_MOUNT}/{SHARED_AREA}"
"""Where a team's pods see the shared area (read-only but for publishers)."""
TEAM_CLAIM: Final = "model-store"
"""The claim of a team's own area (Slurm's: the whole file system)."""
SHARED_CLAIM: Final = "model-store-shared"
"""The claim of the shared area."""
READER_UID: Final = 65534
READER_GID: Final = 65534
"""The readers' POSIX user: ``nobody``/``nogroup`` (the overflow ids, Linux
Documentation/admin-guide/sysctl/fs.rst ``overflowuid``). Neither owns ``/shared`` nor is in the
writers' group, so EFS, which runs every request through an access point as its POSIX user
(EFS API model, ``PosixUser``), lets it read (the "other" r-x of 2775) and never write."""
SHARED_READ_ONLY_POLICY: Final = "trainingplatform-model-store-shared-read-only"
NOMINAL_CAPACITY: Final = "1Ti"
"""EFS grows without bound and the driver ignores capacity; a PV and claim still need one."""


def nfs_ingress(node_group_ids: list[pulumi.Input[str]]) -> list[dict[str, Any]]:
    """Inbound rules of the mount targets: NFS (TCP 2049) from the nodes' groups, nothing else.

    Args:
        node_group_ids: security groups of every node that mounts the store (the EKS cluster
            group, which the system node group and every Karpenter node class carry).
    """
    return [
        {
            "protocol": "tcp",
            "from_port": NFS_PORT,
            "to_port": NFS_PORT,
            "security_groups": [group],
            "description": "NFS from the cluster's nodes",
        }
        for group in node_group_ids
    ]


def lifecycle_policies(store: ModelStoreConfig) -> list[dict[str, str]]:
    """The file system's lifecycle policies, one transition each (the API takes one per item).

    Args:
        store: the model store's config.
    """
    policies: list[dict[str, str]] = []
    if store.infrequent_access_after_days is not None:
        policies.append({"transition_to_ia": transition_rule(store.infrequent_access_after_days)})
    if store.archive_after_days is not None:
        policies.append({"transition_to_archive": transition_rule(store.archive_after_days)})
    if store.back_to_standard_on_access and policies:
        policies.append({"transition_to_primary_storage_class": "AFTER_1_ACCESS"})
    return policies


@dataclasses.dataclass(frozen=True)
class AccessPointSpec:
    """An access point's identity and root.

    Attributes:
        area: the team's name, or ``shared``.
        uid: POSIX user every request through it runs as.
        gid: its group, which owns the root.
        mode: the root's permissions when EFS creates it (octal text).
        key: its name among the store's access points (resource name suffix); default the
            area's.
        owner_uid: owner of the root when EFS creates it; default ``uid``.
        owner_gid: group of the root when EFS creates it; default ``gid``. The readers'
            access point creates ``/shared`` as the writers' would, whichever mounts first.
    """

    area: str
    uid: int
    gid: int
    mode: str
    key: str = ""
    owner_uid: int | None = None
    owner_gid: int | None = None

    @property
    def name(self) -> str:
        """Its key: ``key``, or the area."""
        return self.key or self.area

    @property
    def path(self) -> str:
        """The root directory: ``/<area>``."""
        return f"/{self.area}"

    def args(self) -> dict[str, Any]:
        """The access point's ``posix_user`` and ``root_directory`` (provider names)."""
        return {
            "posix_user": {"uid": self.uid, "gid": self.gid},
            "root_directory": {
                "path": self.path,
                "creation_info": {
                    "owner_uid": self.uid if self.owner_uid is None else self.owner_uid,
                    "owner_gid": self.gid if self.owner_gid is None else self.owner_gid,
                    "permissions": self.mode,
                },
            },
        }


def access_points(config: PlatformConfig) -> list[AccessPointSpec]:
    """Every access point: one per team with a gid, then the shared area's writers' and readers'.

    Args:
        config: the validated platform (config refuses an enabled store without the gids).
    """
    store = config.model_store
    specs = [
        AccessPointSpec(team.name, store.uid, team.gid, TEAM_DIRECTORY_MODE)
        for team in config.teams
        if team.gid is not None
    ]
    writers = typing.cast(int, store.writers_gid)
    readers = AccessPointSpec(
        SHARED_AREA, READER_UID, READER_GID, SHARED_DIRECTORY_MODE,
        key=SHARED_READERS, owner_uid=store.uid, owner_gid=writers,
    )  # fmt: skip
    return [
        *specs,
        AccessPointSpec(SHARED_AREA, store.uid, writers, SHARED_DIRECTORY_MODE),
        readers,
    ]


def volume_handle(
    file_system_id: pulumi.Input[str], access_point_id: pulumi.Input[str] | None
) -> pulumi.Output[str]:
    """``<fs>::<access point>`` (no subpath), or ``<fs>`` for the whole file system.

    Args:
        file_system_id: the file system's id.
        access_point_id: the access point's id; None mounts the file system's root.
    """
    if access_point_id is None:
        return pulumi.Output.from_input(file_system_id)
    return pulumi.Output.concat(file_system_id, "::", access_point_id)


def model_volume_spec(
    *, namespace: str, claim_name: str, handle: pulumi.Input[str], read_only: bool
) -> dict[str, Any]:
    """A static EFS PV bound to one namespace's claim.

    Always ``Retain``: releasing a ``Delete`` volume would make the driver's DeleteVolume
    delete the access point in its handle (aws-efs-csi-driver v3.4.1
    pkg/driver/controller.go), which this stack owns. Encryption in transit is the driver's
    default and always on with an access point; said explicitly in the volume's attributes
    rather than through the deprecated ``tls`` mount option (pkg/driver/node.go). ``readOnly``
    here is recorded for what it says but enforces nothing: Kubernetes passes it to
    ControllerPublishVolume only, which EFS never runs; the pod's claim flag and the readers'
    access point do (:func:`model_store_volumes`).

    Args:
        namespace: the claim's namespace.
        claim_name: the claim's name.
        handle: :func:`volume_handle`.
        read_only: the shared area for readers (see above).
    """
    return {
        "capacity": {"storage": NOMINAL_CAPACITY},
        "volumeMode": "Filesystem",
        "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "claimRef": {"namespace": namespace, "name": claim_name},
        # The file system policy admits only IAM-signed mounts; a PV's mount options change
        # in place (its name's digest leaves them out).
        "mountOptions": [IAM_MOUNT_OPTION],
        "csi": {
            "driver": EFS_CSI_DRIVER,
            "volumeHandle": handle,
            "readOnly": read_only,
            "volumeAttributes": {"encryptInTransit": "true"},
        },
    }


def shared_read_only_policy(*, team_label: str, publishers: list[str]) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: readers mount the shared area read-only.

    Refuses, in a team namespace whose team does not publish, a Pod with a volume of the
    ``model-store-shared`` claim that is not ``persistentVolumeClaim.readOnly``. Pods only,
    on CREATE: a pod's volumes never change after, and every controller's pod is created
    through this. The readers' access point refuses writes whatever the pod says; this makes
    the mistake an admission error with its reason instead of ``Read-only file system`` later.

    Args:
        team_label: the namespace label of team namespaces.
        publishers: the teams (namespaces) that mount it read-write.
    """
    allowed = ", ".join(f"'{team}'" for team in sorted(publishers))
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": team_namespaces(team_label),
            "resourceRules": [
                {
                    "operations": ["CREATE"],
                    "apiVersions": ["v1"],
                    "apiGroups": [""],
                    "resources": ["pods"],
                }
            ],
        },
        "validations": [
            {
                "expression": f"namespaceObject.metadata.name in [{allowed}] || "
                "!has(object.spec.volumes) || object.spec.volumes.all(v, "
                "!has(v.persistentVolumeClaim) || "
                f"v.persistentVolumeClaim.claimName != '{SHARED_CLAIM}' || "
                "(has(v.persistentVolumeClaim.readOnly) && v.persistentVolumeClaim.readOnly))",
                "message": f"the {SHARED_CLAIM} claim is the released models every team reads: "
                "mount it with persistentVolumeClaim.readOnly: true (only the teams of "
                "platform.modelStore.publishers write there; docs/how-to/share-a-model.md)",
                "reason": "Forbidden",
            }
        ],
    }


def file_system_policy(
    *, file_system_arn: str, node_role_arn: str, access_point_arns: list[str] | None
) -> dict[str, Any]:
    """The file system policy: TLS only, and only the CSI node plugin's identity mounts.

    An explicit policy replaces EFS's default, which lets any client that reaches a mount
    target mount and write as root (EFS user guide, "Default EFS file system policy"). Here a
    connection without TLS is denied (``aws:SecureTransport``), and ClientMount and ClientWrite
    are allowed only to the node plugin's role, which efs-utils signs the mount with when the
    volume asks for ``iam`` (:data:`IAM_MOUNT_OPTION`): it reads the Pod Identity credentials
    from ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` before the node's instance profile (aws/efs-utils
    v3.2.0 src/efs_utils_common/aws_credentials.py, get_aws_security_credentials), the
    release the driver's image clones (kubernetes-sigs/aws-efs-csi-driver v3.4.1 Dockerfile,
    ``EFSUTILSSOURCE=github``, built 2026-07-23). A client without ``iam`` is anonymous, and
    nothing here allows an anonymous client. Where no namespace mounts the root (no Slurm),
    the allow also requires one of the stack's access points
    (``elasticfilesystem:AccessPointArn``, EFS user guide "Using access points in IAM
    policies"), so even the node plugin cannot mount ``/``. Every shipped stack runs Slurm, so
    there the node plugin's role may mount ``/``: what keeps a team's pod from it is that
    members cannot create PersistentVolumes (their RBAC), not this policy. Root is squashed
    (no ClientRootAccess) to 65534, the readers' uid, which owns nothing.

    Args:
        file_system_arn: the file system's ARN.
        node_role_arn: the role of ``efs-csi-node-sa`` (Pod Identity).
        access_point_arns: the access points every mount must use; None where the platform
            mounts the root (Slurm's claim), which then stays open to the node plugin.
    """
    allow: dict[str, Any] = {
        "Sid": "NodePluginMounts",
        "Effect": "Allow",
        "Principal": {"AWS": node_role_arn},
        "Action": list(CLIENT_ACTIONS),
        "Resource": file_system_arn,
        "Condition": {"Bool": {"aws:SecureTransport": "true"}},
    }
    if access_point_arns is not None:
        allow["Condition"]["StringEquals"] = {
            "elasticfilesystem:AccessPointArn": sorted(access_point_arns)
        }
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyWithoutTls",
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": "*",
                "Resource": file_system_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
            allow,
        ],
    }


def model_claim_spec(volume_name: pulumi.Input[str]) -> dict[str, Any]:
    """The claim that binds a namespace to its model store PV.

    Args:
        volume_name: the PV the claim binds.
    """
    return {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "",
        "volumeName": volume_name,
        "resources": {"requests": {"storage": NOMINAL_CAPACITY}},
    }


@dataclasses.dataclass(frozen=True)
class ModelStore:
    """The file system and what was made with it.

    Attributes:
        file_system: the EFS file system.
        security_group: its mount targets' group.
        access_points: area (team name or ``shared``) -> its access point.
        claims: namespace -> its model store claims.
    """

    file_system: aws.efs.FileSystem
    security_group: aws.ec2.SecurityGroup
    access_points: dict[str, aws.efs.AccessPoint]
    claims: dict[str, list[k8s.core.v1.PersistentVolumeClaim]]


def model_store(
    name: str,
    *,
    config: PlatformConfig,
    key: aws.kms.Key,
    vpc_id: pulumi.Input[str],
    private_subnet_ids: Mapping[str, pulumi.Input[str]],
    node_security_group_ids: list[pulumi.Input[str]],
    cluster_ready: list[pulumi.Resource],
    kubernetes_provider: pulumi.ProviderResource,
    team_namespaces: Mapping[str, pulumi.Resource],
    whole_file_system_namespaces: Mapping[str, pulumi.Resource],
    parent: pulumi.Resource,
) -> ModelStore:
    """The file system, its mount targets and group, access points, CSI add-on and claims.

    Args:
        name: the storage component's name, prefix of every resource's.
        config: the validated platform (model store enabled).
        key: the stack's data key, which encrypts the file system.
        vpc_id: VPC of the security group.
        private_subnet_ids: zone -> private subnet; one mount target in each.
        node_security_group_ids: the groups NFS is admitted from (the nodes').
        cluster_ready: what the add-on and Kubernetes objects wait for.
        kubernetes_provider: provider of the PVs and claims.
        team_namespaces: team name -> its namespace; each gets its own and the shared claim.
        whole_file_system_namespaces: namespaces (Slurm's) whose claim mounts the root.
        parent: the storage component.
    """
    store = config.model_store
    cluster = config.name
    protect = config.protect_stateful_resources
    child = pulumi.ResourceOptions(parent=parent)
    stateful = pulumi.ResourceOptions(parent=parent, protect=protect, retain_on_delete=protect)
    group = aws.ec2.SecurityGroup(
        f"{name}-models",
        description=f"EFS model store of {cluster}: NFS from the cluster's nodes only",
        vpc_id=vpc_id,
        ingress=[
            aws.ec2.SecurityGroupIngressArgs(**rule)
            for rule in nfs_ingress(node_security_group_ids)
        ],
        # Mount targets answer NFS clients and open nothing: replies are tracked connections.
        egress=[],
        tags={"Name": f"{cluster}-models"},
        opts=child,
    )
    file_system = aws.efs.FileSystem(
        f"{name}-models",
        creation_token=f"{cluster}-models",
        encrypted=True,
        kms_key_id=key.arn,
        performance_mode="generalPurpose",
        throughput_mode=store.throughput_mode,
        provisioned_throughput_in_mibps=store.provisioned_throughput_mibps,
        lifecycle_policies=[
            aws.efs.FileSystemLifecyclePolicyArgs(**policy) for policy in lifecycle_policies(store)
        ],
        tags={"Name": f"{cluster}-models"},
        opts=stateful,
    )
    aws.efs.BackupPolicy(
        f"{name}-models",
        file_system_id=file_system.id,
        backup_policy=aws.efs.BackupPolicyBackupPolicyArgs(
            status="ENABLED" if backups_enabled(config) else "DISABLED"
        ),
        opts=child,
    )
    mount_targets = [
        aws.efs.MountTarget(
            f"{name}-models-{zone}",
            file_system_id=file_system.id,
            subnet_id=subnet,
            security_groups=[group.id],
            opts=child,
        )
        for zone, subnet in sorted(private_subnet_ids.items())
    ]
    # Access points hold no data: deleting one deletes no file (EFS API model,
    # DeleteAccessPoint), and its area stays in the protected file system. Unprotected, a
    # team is removed, or its access point replaced, by a plain up, also in prod.
    points = {
        spec.name: aws.efs.AccessPoint(
            f"{name}-models-{spec.name}",
            file_system_id=file_system.id,
            **spec.args(),
            tags={"Name": f"{cluster}-models-{spec.name}"},
            opts=child,
        )
        for spec in access_points(config)
    }
    role = role_with_policies(
        f"{name}-efs-csi",
        trust_policy=pod_identity_trust_policy(
            eks_cluster_arn(config.region, config.account_id, cluster),
            "kube-system",
            EFS_CSI_CONTROLLER_SERVICE_ACCOUNT,
        ),
        managed_policies=[EFS_CSI_POLICY],
        opts=child,
    )
    node_role = role_with_policies(
        f"{name}-efs-csi-node",
        trust_policy=pod_identity_trust_policy(
            eks_cluster_arn(config.region, config.account_id, cluster),
            "kube-system",
            EFS_CSI_NODE_SERVICE_ACCOUNT,
        ),
        managed_policies=[],
        opts=child,
    )
    addon = aws.eks.Addon(
        f"{name}-efs-csi",
        cluster_name=cluster,
        addon_name="aws-efs-csi-driver",
        addon_version=versions.EKS_ADDONS[config.cluster.kubernetes_version].aws_efs_csi_driver,
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        pod_identity_associations=[
            aws.eks.AddonPodIdentityAssociationArgs(
                role_arn=role.role.arn, service_account=EFS_CSI_CONTROLLER_SERVICE_ACCOUNT
            ),
            # The node plugin mounts with this identity (file_system_policy).
            aws.eks.AddonPodIdentityAssociationArgs(
                role_arn=node_role.role.arn, service_account=EFS_CSI_NODE_SERVICE_ACCOUNT
            ),
        ],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*cluster_ready, *role.ready]),
    )
    in_cluster = pulumi.ResourceOptions(
        parent=parent,
        provider=kubernetes_provider,
        depends_on=[*cluster_ready, addon, *mount_targets],
    )
    claims: dict[str, list[k8s.core.v1.PersistentVolumeClaim]] = {}
    publishers = set(store.publishers)
    enforced_policy(
        f"{name}-models-shared-read-only",
        SHARED_READ_ONLY_POLICY,
        shared_read_only_policy(team_label=TEAM_LABEL, publishers=sorted(publishers)),
        opts=pulumi.ResourceOptions(
            parent=parent, provider=kubernetes_provider, depends_on=cluster_ready
        ),
    )
    for team, namespace in team_namespaces.items():
        if team not in points:
            continue
        shared = SHARED_AREA if team in publishers else SHARED_READERS
        claims[team] = [
            _claim(
                name, namespace=team, namespace_resource=namespace, claim_name=TEAM_CLAIM,
                handle=volume_handle(file_system.id, points[team].id), read_only=False,
                opts=in_cluster,
            ),
            _claim(
                name, namespace=team, namespace_resource=namespace, claim_name=SHARED_CLAIM,
                handle=volume_handle(file_system.id, points[shared].id),
                read_only=team not in publishers, opts=in_cluster,
            ),
        ]  # fmt: skip
    for namespace_name, namespace in whole_file_system_namespaces.items():
        claims[namespace_name] = [
            _claim(
                name, namespace=namespace_name, namespace_resource=namespace,
                claim_name=TEAM_CLAIM, handle=volume_handle(file_system.id, None),
                read_only=False, opts=in_cluster,
            )
        ]  # fmt: skip
    point_arns = [point.arn for point in points.values()]
    root_mounted = bool(whole_file_system_namespaces)
    aws.efs.FileSystemPolicy(
        f"{name}-models",
        file_system_id=file_system.id,
        policy=pulumi.Output.all(file_system.arn, node_role.role.arn, *point_arns).apply(
            lambda arns: json.dumps(
                file_system_policy(
                    file_system_arn=arns[0],
                    node_role_arn=arns[1],
                    access_point_arns=None if root_mounted else list(arns[2:]),
                )
            )
        ),
        # After the volumes ask for iam: a mount before would be anonymous, and refused.
        opts=pulumi.ResourceOptions(
            parent=parent, depends_on=[claim for made in claims.values() for claim in made]
        ),
    )
    return ModelStore(file_system, group, points, claims)


def _claim(
    name: str,
    *,
    namespace: str,
    namespace_resource: pulumi.Resource,
    claim_name: str,
    handle: pulumi.Output[str],
    read_only: bool,
    opts: pulumi.ResourceOptions,
) -> k8s.core.v1.PersistentVolumeClaim:
    """A static model store PV and the one claim that binds it.

    The PV is named as the Lustre PVs are
    (:func:`~components.storage.volumes.persistent_volume_name`).
    """

    def spec(known: Any) -> dict[str, Any]:
        return model_volume_spec(
            namespace=namespace, claim_name=claim_name, handle=known, read_only=read_only
        )

    volume_name = handle.apply(
        lambda known: persistent_volume_name(f"{claim_name}-{namespace}", spec(known))
    )
    volume = k8s.core.v1.PersistentVolume(
        f"{name}-pv-{namespace}-{claim_name}",
        metadata={"name": volume_name},
        spec=typing.cast(Any, spec(handle)),
        opts=opts,
    )
    return k8s.core.v1.PersistentVolumeClaim(
        f"{name}-pvc-{namespace}-{claim_name}",
        metadata={"name": claim_name, "namespace": namespace},
        spec=typing.cast(Any, model_claim_spec(volume.metadata.name)),
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(depends_on=[namespace_resource, volume])
        ),
    )


MODELS_VARIABLE: Final = "MODELS_DIR"
"""Where a job finds its team's models, beside ``CHECKPOINT_DIR`` (components/checkpoints.py)."""
SHARED_MODELS_VARIABLE: Final = "SHARED_MODELS_DIR"
"""Where a job finds the released models every team reads."""
TEAM_VOLUME: Final = "models"
SHARED_VOLUME: Final = "models-shared"


def model_store_volumes(
    *, whole_file_system: bool = False, publishes: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts) of the model store: the team's area at ``/models``, shared below it.

    The shared area's mount point sits inside the team's area: the container runtime makes
    the directory ``shared`` there, as the access point's user, the first time. For a team
    that does not publish, the shared claim is read-only in the pod (``persistentVolumeClaim
    .readOnly``, which the kubelet passes to the driver's NodePublishVolume, and the driver
    mounts ``ro``: kubernetes-sigs/aws-efs-csi-driver v3.4.1 pkg/driver/node.go; the PV's own
    ``csi.readOnly`` goes only to ControllerPublishVolume, which EFS, ``attachRequired:
    false`` in deploy/kubernetes/base/csidriver.yaml, never runs) and so is the container's
    mount; the readers' access point refuses writes besides (:data:`READER_UID`), and
    admission refuses a pod that drops the flag (:func:`shared_read_only_policy`).

    Args:
        whole_file_system: Slurm's claim, which holds every team's area and ``/shared`` under
            one root: one volume at ``/models``. Default False (a team namespace).
        publishes: the team publishes (``modelStore.publishers``): the shared area is mounted
            read-write. Default False (read-only, the safe side for a builder that does not
            know the team).
    """
    volumes: list[dict[str, Any]] = [
        {"name": TEAM_VOLUME, "persistentVolumeClaim": {"claimName": TEAM_CLAIM}}
    ]
    mounts: list[dict[str, Any]] = [{"name": TEAM_VOLUME, "mountPath": MODELS_MOUNT}]
    if not whole_file_system:
        claim: dict[str, Any] = {"claimName": SHARED_CLAIM}
        mount: dict[str, Any] = {"name": SHARED_VOLUME, "mountPath": SHARED_MODELS_MOUNT}
        if not publishes:
            claim["readOnly"] = True
            mount["readOnly"] = True
        volumes.append({"name": SHARED_VOLUME, "persistentVolumeClaim": claim})
        mounts.append(mount)
    return volumes, mounts


def model_store_environment() -> list[dict[str, str]]:
    """``MODELS_DIR`` and ``SHARED_MODELS_DIR``: where a team's job reads and writes models."""
    return [
        {"name": MODELS_VARIABLE, "value": MODELS_MOUNT},
        {"name": SHARED_MODELS_VARIABLE, "value": SHARED_MODELS_MOUNT},
    ]
