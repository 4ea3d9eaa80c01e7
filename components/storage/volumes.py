"""The file system in Kubernetes: the FSx CSI driver, static volumes and their claims.

Every namespace that mounts the file system gets its own static PersistentVolume and claim
(a PV binds one claim): ``shared-lustre`` on the whole file system where Slurm and
``storage.lustre.namespaces`` mount it, and one claim per team root on the team's own directory
(:mod:`components.storage.layout`) in each team's namespace. An admission policy refuses
read-only mounts of them, which would record no access times.
"""

from __future__ import annotations

import hashlib
import json
import typing
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import versions
from components.admission import enforced_policy
from components.config import LustreConfig, PlatformConfig
from components.config.storage import LUSTRE_FIRST_STEPS_GIB, TEAM_CLAIM_PREFIX
from components.iam import eks_cluster_arn, pod_identity_trust_policy, role_with_policies
from components.node_pools import LUSTRE_CLIENT_LABEL, ZONE
from components.storage.layout import TeamDirectory, team_directories
from components.teams import TEAM_LABEL

CSI_DRIVER: Final = "fsx.csi.aws.com"
CSI_CONTROLLER_SERVICE_ACCOUNT: Final = "fsx-csi-controller-sa"
CLAIM_NAME: Final = "shared-lustre"


def lustre_node_affinity(zone: str) -> dict[str, Any]:
    """The nodes a Lustre volume mounts on: Lustre clients in its zone.

    Their pools carry the client security group and
    :data:`~components.node_pools.LUSTRE_CLIENT_LABEL`.

    The scheduler filters nodes by a bound claim's PV affinity (kubernetes
    pkg/scheduler/framework/plugins/volumebinding, checkBoundClaims) and Karpenter provisions
    for it (karpenter v1.14.1 pkg/controllers/provisioning/scheduling/volumetopology.go,
    getPersistentVolumeRequirements), so a pod of any kind with a Lustre claim lands on a node
    that can mount it instead of waiting in ``ContainerCreating`` on ``general``.

    Args:
        zone: the file system's zone (the training zone).
    """
    return {
        "required": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": LUSTRE_CLIENT_LABEL, "operator": "In", "values": ["true"]},
                        {"key": ZONE, "operator": "In", "values": [zone]},
                    ]
                }
            ]
        }
    }


def persistent_volume_spec(
    lustre: LustreConfig,
    *,
    namespace: str,
    volume_handle: pulumi.Input[str],
    dns_name: pulumi.Input[str],
    mount_name: pulumi.Input[str],
    zone: str,
    claim_name: str = CLAIM_NAME,
) -> dict[str, Any]:
    """A static PV bound to exactly one namespace's claim (a PV binds one claim).

    Always read-write: a read-only mount records no access times, and release goes by them
    (:data:`components.storage.layout.IMPORT_ONLY_DIRECTORY_MODE` keeps jobs from writing
    where they only read).

    Args:
        lustre: the file system's config (capacity, mount options).
        namespace: the namespace of the claim it binds.
        volume_handle: the file system's id, or :func:`team_volume_handle` for a team's
            directory.
        dns_name: the file system's DNS name.
        mount_name: what the node mounts after ``<dnsname>@tcp:/``: the file system's mount
            name, or a directory below it (``<mountname>/checkpoints/<team>``).
        zone: the file system's zone (:func:`lustre_node_affinity`).
        claim_name: the claim's name. Default ``shared-lustre`` (the whole file system).
    """
    return {
        "capacity": {"storage": f"{lustre.storage_capacity_gib}Gi"},
        "volumeMode": "Filesystem",
        "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "mountOptions": list(lustre.mount_options),
        "claimRef": {"namespace": namespace, "name": claim_name},
        "nodeAffinity": lustre_node_affinity(zone),
        "csi": {
            "driver": CSI_DRIVER,
            "volumeHandle": volume_handle,
            "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name},
        },
    }


IMMUTABLE_VOLUME_FIELDS: Final = ("csi", "nodeAffinity", "volumeMode")
"""What the API server never lets a PV change once set (kubernetes
pkg/apis/core/validation/validation.go, ValidatePersistentVolumeUpdate: the volume source,
``volumeMode``, and ``nodeAffinity`` once it is set)."""
VOLUME_DIGEST_LENGTH: Final = 10


def persistent_volume_name(stem: str, spec: dict[str, Any]) -> str:
    """``<stem>-<digest>``: a PV's name, which changes whenever an immutable field does.

    A change to such a field must make a new PV, and a new PV must have a new name.
    pulumi-kubernetes replaces a PV on a changed ``csi`` but patches a changed
    ``nodeAffinity``, which the API server refuses once one is set (provider/pkg/provider/
    diff.go, forceNew); and it deletes a
    same-named object before creating it again (provider.go, Diff: deleteBeforeReplace), which
    for a bound PV waits on ``kubernetes.io/pv-protection`` until its claim goes, while the
    claim, still naming the same PV, is never replaced. With the digest in the name the PV is
    created beside the old one, the claim's ``volumeName`` changes, so the claim is replaced
    (deleted once no pod uses it) and binds the new PV; the old PV, released, goes last.
    Capacity and mount options are left out: they change in place.

    Args:
        stem: the name without the digest (``lustre-checkpoints-ml-research``).
        spec: the PV's spec with every value known (:func:`persistent_volume_spec`).
    """
    immutable = {field: spec.get(field) for field in IMMUTABLE_VOLUME_FIELDS}
    digest = hashlib.sha256(json.dumps(immutable, sort_keys=True).encode()).hexdigest()
    return f"{stem}-{digest[:VOLUME_DIGEST_LENGTH]}"


def team_volume_handle(
    file_system_id: pulumi.Input[str], directory: TeamDirectory
) -> pulumi.Output[str]:
    """The handle of a team directory's PV: ``<file system id>::<directory>``, one per PV.

    kubelet knows a CSI volume by driver and handle (kubernetes pkg/volume/csi/csi_plugin.go,
    GetVolumeName) and mounts one volume of a name once per pod
    (pkg/kubelet/volumemanager/cache/desired_state_of_world.go, AddPodToVolume): a pod with
    four claims on one handle would get one mount. The FSx driver reads the handle as the file
    system's id only in DeleteVolume, ValidateVolumeCapabilities and ControllerExpandVolume
    (aws-fsx-csi-driver v1.7.0 pkg/driver/controller.go), which a static, retained PV
    without a StorageClass never gets; it mounts from the volume's attributes
    (pkg/driver/node.go).
    """
    return pulumi.Output.concat(file_system_id, "::", directory.subdirectory)


ACCESS_TIME_POLICY: Final = "trainingplatform-lustre-access-times"
SHARED_LUSTRE_LABEL: Final = "trainingplatform.io/shared-lustre"
"""Label of the namespaces of ``storage.lustre.namespaces`` (their ``shared-lustre`` claim)."""


def access_time_policy(team_label: str) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: no pod mounts a Lustre claim read-only.

    A read-only mount records no access times: Linux skips the update when the mount refuses
    writes (fs/inode.c, touch_atime), and the Lustre client treats a read-only mount as
    ``noatime`` (lustre llite/file.c, file_is_noatime). Whether the claim's volume is read-only
    (``persistentVolumeClaim.readOnly``: kubelet asks the FSx driver for an ``ro`` mount,
    aws-fsx-csi-driver v1.7.0 pkg/driver/node.go) or a container's mount of it is (a read-only
    bind mount), files a job reads every day look unread, and the daily release frees them:
    each read then fetches them from S3 again, at S3's speed instead of the file system's.
    Refused in team namespaces and those of ``storage.lustre.namespaces`` (Slurm's pods are the
    platform's own, and mount read-write); the directory's mode already keeps a team from
    writing where it only reads (:data:`components.storage.layout.IMPORT_ONLY_DIRECTORY_MODE`).
    A TrainJob that patches in a read-only mount is admitted, and its Job then reports
    ``FailedCreate`` with this policy's message.

    Args:
        team_label: the namespace label of team namespaces.
    """
    labels = "(has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {})"
    claims = (
        "has(object.spec.volumes) ? object.spec.volumes.filter(v, has(v.persistentVolumeClaim) "
        f"&& (v.persistentVolumeClaim.claimName == '{CLAIM_NAME}' || "
        f"v.persistentVolumeClaim.claimName.startsWith('{TEAM_CLAIM_PREFIX}'))) : []"
    )
    read_only_volumes = (
        "variables.claims.filter(v, has(v.persistentVolumeClaim.readOnly) && "
        "v.persistentVolumeClaim.readOnly).map(v, v.name)"
    )
    # Each list to names before they are added: the API server types containers and init
    # containers apart, and names (strings) add up where the two lists would not.
    mounts_read_only = (
        "filter(c, has(c.volumeMounts) && c.volumeMounts.exists(m, "
        "m.name in variables.claims.map(v, v.name) && has(m.readOnly) && m.readOnly))"
        ".map(c, c.name)"
    )
    read_only_containers = " + ".join(
        f"(has(object.spec.{field}) ? object.spec.{field}.{mounts_read_only} : [])"
        for field in ("containers", "initContainers")
    )
    return {
        # It guards speed, not data or isolation, and it sees every pod of the cluster: a pod
        # it cannot evaluate is let through rather than refused.
        "failurePolicy": "Ignore",
        "matchConstraints": {
            "resourceRules": [
                {
                    "operations": ["CREATE"],
                    "apiVersions": ["v1"],
                    "apiGroups": [""],
                    "resources": ["pods"],
                }
            ],
        },
        "variables": [
            {
                "name": "mountsLustre",
                # Pods are namespaced: the API server always gives their namespace.
                "expression": f"'{team_label}' in {labels} || '{SHARED_LUSTRE_LABEL}' in {labels}",
            },
            {"name": "claims", "expression": f"variables.mountsLustre ? ({claims}) : []"},
            {"name": "readOnlyVolumes", "expression": read_only_volumes},
            {"name": "readOnlyContainers", "expression": read_only_containers},
        ],
        "validations": [
            {
                "expression": "size(variables.readOnlyVolumes) == 0 && "
                "size(variables.readOnlyContainers) == 0",
                "messageExpression": (
                    "'pod mounts a Lustre claim read-only (' + "
                    "(size(variables.readOnlyVolumes) > 0 ? 'volume ' + "
                    "variables.readOnlyVolumes[0] : 'in container ' + "
                    "variables.readOnlyContainers[0]) + '): a read-only mount records "
                    "no access times, so the daily release frees what the job reads and each "
                    "read goes back to S3; mount it read-write (directory permissions keep a "
                    "team from writing where it only reads)'"
                ),
                "reason": "Forbidden",
            }
        ],
    }


def persistent_volume_claim_spec(volume_name: pulumi.Input[str]) -> dict[str, Any]:
    """The claim that binds a namespace to its PV, requesting the smallest Lustre file system.

    The request stays the same whatever the file system's capacity: a bound claim's request
    may only grow by expansion, which the API server refuses for a claim without a
    StorageClass (kubernetes pkg/apis/core/validation/validation.go,
    ValidatePersistentVolumeClaimUpdate, and the expand controller), so growing the file
    system would fail the claim's update. Binding needs only the PV's capacity (which follows
    the file system) to be at least the request (pkg/controller/volume/persistentvolume,
    checkVolumeSatisfyClaim), and the claim's status shows the PV's capacity.

    Args:
        volume_name: the PV the claim binds.
    """
    return {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "",
        "volumeName": volume_name,
        "resources": {"requests": {"storage": f"{LUSTRE_FIRST_STEPS_GIB[0]}Gi"}},
    }


def csi(
    name: str,
    *,
    config: PlatformConfig,
    lustre: LustreConfig,
    file_system: aws.fsx.LustreFileSystem,
    layout: list[pulumi.Resource],
    cluster_ready: list[pulumi.Resource],
    kubernetes_provider: pulumi.ProviderResource,
    mounting_namespaces: dict[str, pulumi.Resource],
    team_namespaces: dict[str, pulumi.Resource],
    parent: pulumi.Resource,
) -> dict[str, list[k8s.core.v1.PersistentVolumeClaim]]:
    """The FSx CSI add-on with its role, the access-time policy, and every namespace's claims.

    Args:
        name: the storage component's name, prefix of every resource's.
        config: the validated platform (cluster, Kubernetes version, teams, training zone).
        lustre: the file system's config.
        file_system: the file system the volumes mount.
        layout: the admin client, which team claims wait for (their directories exist first).
        cluster_ready: what the add-on and Kubernetes objects wait for.
        kubernetes_provider: provider of the namespaces, PVs and claims.
        mounting_namespaces: namespaces created elsewhere that get ``shared-lustre``.
        team_namespaces: team name -> its namespace.
        parent: the storage component.

    Returns:
        The claims of each mounting namespace, team namespaces included.
    """
    child = pulumi.ResourceOptions(parent=parent)
    role = role_with_policies(
        f"{name}-fsx-csi",
        trust_policy=pod_identity_trust_policy(
            eks_cluster_arn(config.region, config.account_id, config.name),
            "kube-system",
            CSI_CONTROLLER_SERVICE_ACCOUNT,
        ),
        managed_policies=[], opts=child,
    )  # fmt: skip
    # Static volumes only: the controller describes file systems and creates none.
    describe = aws.iam.RolePolicy(
        f"{name}-fsx-csi",
        role=role.role.id,
        policy=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": ["fsx:DescribeFileSystems"],
                        "Resource": "*",
                    }
                ],
            }
        ),
        opts=child,
    )
    addon = aws.eks.Addon(
        f"{name}-fsx-csi",
        cluster_name=config.name,
        addon_name="aws-fsx-csi-driver",
        addon_version=versions.EKS_ADDONS[config.cluster.kubernetes_version].aws_fsx_csi_driver,
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        pod_identity_associations=[
            aws.eks.AddonPodIdentityAssociationArgs(
                role_arn=role.role.arn, service_account=CSI_CONTROLLER_SERVICE_ACCOUNT
            )
        ],
        opts=pulumi.ResourceOptions(
            parent=parent, depends_on=[*cluster_ready, *role.ready, describe]
        ),
    )
    in_cluster = pulumi.ResourceOptions(
        parent=parent, provider=kubernetes_provider, depends_on=[*cluster_ready, addon]
    )
    mounting: dict[str, pulumi.Resource] = dict(mounting_namespaces)
    for namespace in lustre.namespaces:
        mounting[namespace] = k8s.core.v1.Namespace(
            f"{name}-ns-{namespace}",
            metadata={
                "name": namespace,
                "labels": {SHARED_LUSTRE_LABEL: "true"},
            },
            opts=in_cluster,
        )
    enforced_policy(
        f"{name}-lustre-access-times",
        ACCESS_TIME_POLICY,
        access_time_policy(TEAM_LABEL),
        opts=in_cluster,
    )
    zone = config.network.training_zone
    claims: dict[str, list[k8s.core.v1.PersistentVolumeClaim]] = {}
    for namespace, ns in mounting.items():
        claims[namespace] = [
            claim(
                name, lustre, namespace=namespace, namespace_resource=ns,
                claim_name=CLAIM_NAME, volume_stem=f"{CLAIM_NAME}-{namespace}",
                volume_handle=file_system.id, dns_name=file_system.dns_name,
                mount_name=file_system.mount_name, zone=zone, opts=in_cluster,
            )
        ]  # fmt: skip
    for team in config.teams:
        if not team.shared_file_system or team.name not in team_namespaces:
            continue
        claims[team.name] = [
            claim(
                name, lustre, namespace=team.name,
                namespace_resource=team_namespaces[team.name],
                claim_name=directory.claim_name, volume_stem=directory.volume_stem,
                volume_handle=team_volume_handle(file_system.id, directory),
                dns_name=file_system.dns_name,
                mount_name=pulumi.Output.concat(
                    file_system.mount_name, "/", directory.subdirectory
                ),
                zone=zone,
                opts=pulumi.ResourceOptions.merge(
                    in_cluster, pulumi.ResourceOptions(depends_on=layout)
                ),
            )
            for directory in team_directories(lustre, team)
        ]  # fmt: skip
    return claims


def claim(
    name: str,
    lustre: LustreConfig,
    *,
    namespace: str,
    namespace_resource: pulumi.Resource,
    claim_name: str,
    volume_stem: str,
    volume_handle: pulumi.Input[str],
    dns_name: pulumi.Input[str],
    mount_name: pulumi.Input[str],
    zone: str,
    opts: pulumi.ResourceOptions,
) -> k8s.core.v1.PersistentVolumeClaim:
    """A static PV (:func:`persistent_volume_name`) and the one claim that binds it.

    Args:
        name: the storage component's name, prefix of both resources' names.
        lustre: the file system's config.
        namespace: the claim's namespace.
        namespace_resource: that namespace, which the claim waits for.
        claim_name: the claim's name.
        volume_stem: the PV's name before its digest.
        volume_handle: the PV's handle (:func:`persistent_volume_spec`).
        dns_name: the file system's DNS name.
        mount_name: what the node mounts after ``<dnsname>@tcp:/``.
        zone: the file system's zone.
        opts: options of both (parent, provider, what they wait for).
    """
    # Resource names of the whole-file-system claims predate team directories.
    suffix = namespace if claim_name == CLAIM_NAME else f"{namespace}-{claim_name}"

    def spec(handle: Any, dns: Any, mount: Any) -> dict[str, Any]:
        return persistent_volume_spec(
            lustre, namespace=namespace, volume_handle=handle, dns_name=dns,
            mount_name=mount, zone=zone, claim_name=claim_name,
        )  # fmt: skip

    volume_name = pulumi.Output.all(volume_handle, dns_name, mount_name).apply(
        lambda known: persistent_volume_name(volume_stem, spec(*known))
    )
    volume = k8s.core.v1.PersistentVolume(
        f"{name}-pv-{suffix}",
        metadata={"name": volume_name},
        # The builders speak the Kubernetes API's field names, which the SDK passes through.
        spec=typing.cast(Any, spec(volume_handle, dns_name, mount_name)),
        opts=opts,
    )
    return k8s.core.v1.PersistentVolumeClaim(
        f"{name}-pvc-{suffix}",
        metadata={"name": claim_name, "namespace": namespace},
        spec=typing.cast(Any, persistent_volume_claim_spec(volume.metadata.name)),
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(depends_on=[namespace_resource, volume])
        ),
    )
