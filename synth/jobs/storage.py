"""The data path of a pod's claims: bound, and for the EFS model store, reachable and the team's.

A pod of a path (a Trainer runtime's, a Ray node, a notebook server, a Slurm login or slurmd
pod) mounts claims of its namespace. Each must exist there and name a PersistentVolume that the
stack creates, bound to that claim (a static PV with a ``claimRef``: the claim stays Pending
otherwise, and so does the pod). Lustre's volumes carry their zone and client label as node
affinity, which :func:`synth.jobs.karpenter.volume_node_terms` turns into the pools a pod may
use; an EFS volume carries none, so its reach is judged here from the cloud side:

- the PV's handle (``<fs>::<access point>``, or ``<fs>`` for the whole file system:
  kubernetes-sigs/aws-efs-csi-driver v3.4.1 pkg/driver/node.go, NodePublishVolume and
  parseVolumeId) names the stack's file system and an access point of it;
- in a team's namespace the area is the team's: the ``model-store`` claim's access point is
  rooted at ``/<team>`` with the team's gid as its POSIX gid (EFS runs every request through an
  access point as its POSIX user: boto/botocore 1.44.8 botocore/data/efs/2015-02-01/
  service-2.json, ``PosixUser``), the ``model-store-shared`` claim's at ``/shared``; unless the
  team publishes, through an access point whose POSIX user neither owns ``/shared`` nor is in
  its group (EFS then refuses its writes whatever the pod asks), and the pod's volume of it is
  ``persistentVolumeClaim.readOnly`` (the kubelet passes that, not the PV's ``csi.readOnly``,
  to NodePublishVolume, where the driver adds ``ro``: node.go);
- where the file system has a file system policy (it allows only IAM-signed mounts), the PV
  asks for ``iam`` in its mount options (:func:`components.storage.model_store
  .file_system_policy`);
- every zone a NodePool the pod may use launches nodes in has a mount target of the file
  system, and that mount target's security groups admit NFS (TCP 2049) from a group the
  pool's EC2NodeClass gives its nodes (``securityGroupSelectorTerms``: ids, or tags; EKS tags
  its cluster security group ``aws:eks:cluster-name``). A static volume carries no
  ``mountTargetIpMap`` (the controller fills it for volumes it provisions; node.go falls back
  to another zone only with one), so the node mounts by the file system's DNS name, which
  resolves to the mount target of the node's zone; a fallback of efs-utils to another zone's
  address is not counted on (it needs to look mount targets up, and crosses zones).

Where the view holds no cloud resources (a view of Kubernetes objects only) the cloud side is
not judged.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any, Final

from components.config.model_store import SHARED_AREA
from components.node_pools import CLUSTER_SG_TAG
from components.storage.model_store import (
    EFS_CSI_DRIVER,
    IAM_MOUNT_OPTION,
    NFS_PORT,
    SHARED_CLAIM,
    SHARED_READ_ONLY_POLICY,
    TEAM_CLAIM,
)
from synth.jobs.view import Manifest, StackView, name_of

FILE_SYSTEM: Final = "aws:efs/fileSystem:FileSystem"
ACCESS_POINT: Final = "aws:efs/accessPoint:AccessPoint"
MOUNT_TARGET: Final = "aws:efs/mountTarget:MountTarget"
FILE_SYSTEM_POLICY: Final = "aws:efs/fileSystemPolicy:FileSystemPolicy"
SUBNET: Final = "aws:ec2/subnet:Subnet"
SECURITY_GROUP: Final = "aws:ec2/securityGroup:SecurityGroup"
EKS_CLUSTER: Final = "eks:index:Cluster"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"


def _by_id(view: StackView, resource_type: str) -> dict[str, Manifest]:
    return {str(r["id"]): r for r in view.aws(resource_type)}


def pool_zones(view: StackView, pool: str) -> set[str]:
    """Zones NodePool ``pool`` launches nodes in: its node class's subnets', within its zones.

    karpenter-provider-aws v1.14.1 pkg/providers/subnet/subnet.go (a node class's subnets are
    the union of its selector terms: an ``id``, or every subnet with all the ``tags``); the
    NodePool's ``topology.kubernetes.io/zone`` requirement narrows them.

    Args:
        view: the stack, with its cloud resources.
        pool: the NodePool's name.
    """
    node_pool = view.named("NodePool", pool)
    template = (((node_pool or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    node_class = view.named("EC2NodeClass", str((template.get("nodeClassRef") or {}).get("name")))
    subnets = _by_id(view, SUBNET)
    zones: set[str] = set()
    for term in ((node_class or {}).get("spec") or {}).get("subnetSelectorTerms") or []:
        for subnet_id, subnet in subnets.items():
            tags = subnet["inputs"].get("tags") or {}
            if term.get("id") == subnet_id or (
                "tags" in term and all(tags.get(k) == v for k, v in term["tags"].items())
            ):
                zones.add(str(subnet["inputs"].get("availabilityZone")))
    for requirement in template.get("requirements") or []:
        if requirement.get("key") == ZONE_LABEL and requirement.get("operator") == "In":
            zones &= set(requirement.get("values") or [])
    return zones


def pool_security_groups(view: StackView, pool: str) -> set[str]:
    """Security groups a NodePool's nodes carry (its node class's ``securityGroupSelectorTerms``).

    An ``id`` term names a group; a ``tags`` term selects every group with those tags, and
    ``aws:eks:cluster-name`` is the tag EKS puts on the cluster security group it creates
    (pulumi-eks reports it as ``nodeSecurityGroupId`` with ``skipDefaultSecurityGroups``:
    components/cluster.py).

    Args:
        view: the stack, with its cloud resources.
        pool: the NodePool's name.
    """
    node_pool = view.named("NodePool", pool)
    template = (((node_pool or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    node_class = view.named("EC2NodeClass", str((template.get("nodeClassRef") or {}).get("name")))
    groups: set[str] = set()
    for term in ((node_class or {}).get("spec") or {}).get("securityGroupSelectorTerms") or []:
        if "id" in term:
            groups.add(str(term["id"]))
        tags = dict(term.get("tags") or {})
        if not tags:
            continue
        for group_id, group in _by_id(view, SECURITY_GROUP).items():
            own = group["inputs"].get("tags") or {}
            if all(own.get(k) == v for k, v in tags.items()):
                groups.add(group_id)
        cluster_name = tags.pop(CLUSTER_SG_TAG, None)
        if cluster_name is not None and not tags:
            for cluster in view.aws(EKS_CLUSTER):
                if cluster["inputs"].get("name") == cluster_name:
                    groups.add(str(cluster["inputs"]["nodeSecurityGroupId"]))
    return groups


def _admits_nfs(rule: Mapping[str, Any], sources: set[str], subnets: list[str]) -> bool:
    """Whether an inbound rule admits TCP 2049 from one of ``sources`` or the nodes' subnets."""
    protocol = str(rule.get("protocol"))
    if protocol not in ("tcp", "6", "-1", "all"):
        return False
    if protocol not in ("-1", "all") and not (
        int(rule.get("fromPort", 0)) <= NFS_PORT <= int(rule.get("toPort", 0))
    ):
        return False
    if sources & {str(g) for g in rule.get("securityGroups") or []}:
        return True
    blocks = [ipaddress.IPv4Network(str(c)) for c in rule.get("cidrBlocks") or []]
    return bool(subnets and blocks) and all(
        any(ipaddress.IPv4Network(s).subnet_of(b) for b in blocks) for s in subnets
    )


def reach_problems(view: StackView, file_system: str, pools: list[str]) -> Iterator[str]:
    """Why nodes of ``pools`` cannot mount ``file_system``: no mount target, or NFS refused.

    Args:
        view: the stack, with its cloud resources.
        file_system: the EFS file system's id.
        pools: the NodePools the pod may land on.
    """
    subnets = _by_id(view, SUBNET)
    groups = _by_id(view, SECURITY_GROUP)
    targets: dict[str, Manifest] = {}
    for target in view.aws(MOUNT_TARGET):
        if target["inputs"].get("fileSystemId") == file_system:
            subnet = subnets.get(str(target["inputs"].get("subnetId")))
            if subnet is not None:
                targets[str(subnet["inputs"].get("availabilityZone"))] = target
    for pool in pools:
        zones = pool_zones(view, pool)
        missing = sorted(zones - set(targets))
        if missing:
            yield (
                f"NodePool {pool} launches nodes in {', '.join(missing)}, where the model store "
                f"({file_system}) has no mount target: /models never mounts there"
            )
        sources = pool_security_groups(view, pool)
        cidrs = [
            str(s["inputs"].get("cidrBlock"))
            for s in subnets.values()
            if s["inputs"].get("availabilityZone") in zones and s["inputs"].get("cidrBlock")
        ]
        for zone in sorted(zones & set(targets)):
            rules = [
                rule
                for group in targets[zone]["inputs"].get("securityGroups") or []
                for rule in (groups.get(str(group), {}).get("inputs") or {}).get("ingress") or []
            ]
            if not any(_admits_nfs(rule, sources, cidrs) for rule in rules):
                yield (
                    f"the model store's mount target in {zone} admits NFS (TCP {NFS_PORT}) from "
                    f"none of NodePool {pool}'s security groups ({', '.join(sorted(sources))}): "
                    "the mount times out"
                )


def parse_volume_handle(handle: str) -> tuple[str, str]:
    """(file system, access point or ``""``) of an EFS volume handle.

    ``<fs>[:<subpath>[:<access point>]]``, or the newer ``efs:<fs>[:<subpath>[:<access
    point>]]`` (kubernetes-sigs/aws-efs-csi-driver v3.4.1 pkg/driver/node.go, parseVolumeId;
    pkg/util/filesystem.go, the types ``efs`` and ``s3files``).

    Args:
        handle: the PV's ``csi.volumeHandle``.
    """
    parts = handle.split(":")
    if parts[0] in ("efs", "s3files") and len(parts) > 1:
        parts = parts[1:]
    return parts[0], (parts[2] if len(parts) > 2 else "")


def _efs_problems(
    view: StackView,
    *,
    claim: str,
    volume: Manifest,
    team: str | None,
    group_ids: set[int],
    publishers: frozenset[str] | None,
    pools: list[str],
    pod_read_only: bool,
) -> Iterator[str]:
    """What is wrong with one EFS volume of a pod (:mod:`synth.jobs.storage`)."""
    csi = (volume.get("spec") or {}).get("csi") or {}
    handle = str(csi.get("volumeHandle") or "")
    file_system, access_point = parse_volume_handle(handle)
    systems = _by_id(view, FILE_SYSTEM)
    if file_system not in systems:
        yield (
            f"claim {claim} binds PV {name_of(volume)}, whose handle names file system "
            f"{file_system or '(none)'}, not the stack's model store"
        )
        return
    policed = any(
        p["inputs"].get("fileSystemId") == file_system for p in view.aws(FILE_SYSTEM_POLICY)
    )
    options = (volume.get("spec") or {}).get("mountOptions") or []
    if policed and IAM_MOUNT_OPTION not in options:
        yield (
            f"claim {claim} binds PV {name_of(volume)}, whose mount options lack "
            f"{IAM_MOUNT_OPTION}: the mount is anonymous, and the file system policy allows "
            "only the node plugin's role"
        )
    if team is not None and claim in (TEAM_CLAIM, SHARED_CLAIM):
        area = f"/{team}" if claim == TEAM_CLAIM else f"/{SHARED_AREA}"
        point = _by_id(view, ACCESS_POINT).get(access_point)
        if point is None or point["inputs"].get("fileSystemId") != file_system:
            yield (
                f"claim {claim} binds PV {name_of(volume)}, which mounts no access point of the "
                f"model store (handle {handle}): the pod would see the whole file system, not "
                f"{area}"
            )
        else:
            root = str((point["inputs"].get("rootDirectory") or {}).get("path"))
            gid = (point["inputs"].get("posixUser") or {}).get("gid")
            if root != area:
                yield (
                    f"claim {claim} mounts access point {access_point} rooted at {root}, "
                    f"not {area}: team {team} would read and write another area"
                )
            elif claim == TEAM_CLAIM and group_ids and gid not in group_ids:
                yield (
                    f"access point {root}'s POSIX gid is {gid}, not team {team}'s "
                    f"({', '.join(str(g) for g in sorted(group_ids))}): what the team writes "
                    "there is not its group's"
                )
        reader = claim == SHARED_CLAIM and publishers is not None and team not in publishers
        if reader and point is not None:
            yield from _reader_problems(point, claim=claim, team=str(team))
        if reader and not pod_read_only:
            yield (
                f"the pod mounts claim {claim} without persistentVolumeClaim.readOnly, but team "
                f"{team} does not publish: admission refuses it ({SHARED_READ_ONLY_POLICY})"
            )
    yield from reach_problems(view, file_system, pools)


def _reader_problems(point: Manifest, *, claim: str, team: str) -> Iterator[str]:
    """Why the access point of a non-publishing team's shared claim lets it write."""
    posix = point["inputs"].get("posixUser") or {}
    creation = (point["inputs"].get("rootDirectory") or {}).get("creationInfo") or {}
    uid, gid = posix.get("uid"), posix.get("gid")
    groups = {gid, *(posix.get("secondaryGids") or [])}
    owner_uid, owner_gid = creation.get("ownerUid"), creation.get("ownerGid")
    if uid == owner_uid or owner_gid in groups:
        yield (
            f"claim {claim} mounts an access point that writes as uid {uid}, gids "
            f"{sorted(g for g in groups if g is not None)}, owner or group of /{SHARED_AREA} "
            f"({owner_uid}:{owner_gid}), but team {team} does not publish: it could change "
            "the released models"
        )


def claim_problems(
    view: StackView,
    namespace: str | None,
    pod: Mapping[str, Any],
    *,
    pools: list[str],
    team: str | None,
    team_gid: int | None = None,
    publishers: frozenset[str] | None = None,
) -> list[str]:
    """Why the pod's claims keep it Pending or its model store is not the team's (module doc).

    Args:
        view: the stack.
        namespace: the pod's namespace (claims are namespaced).
        pod: the pod spec.
        pools: the NodePools the pod may land on (whose nodes mount its volumes).
        team: the team whose namespace it is; None in Slurm's, whose claim mounts the whole
            file system.
        team_gid: the team's gid (``teams[].gid``); None: the pod's supplemental groups, which
            carry it (components/trainer.py workload_security_context).
        publishers: the teams that write the shared area (``modelStore.publishers``); None:
            not judged (no configuration at hand).
    """
    problems: list[str] = []
    context = pod.get("securityContext") or {}
    group_ids = (
        {team_gid}
        if team_gid is not None
        else {int(g) for g in context.get("supplementalGroups") or []}
    )
    for volume in pod.get("volumes") or []:
        claim_name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if not claim_name:
            continue
        claim = view.named("PersistentVolumeClaim", str(claim_name), namespace)
        if claim is None:
            problems.append(
                f"claim {claim_name} does not exist in {namespace}: the pod stays Pending"
            )
            continue
        volume_name = (claim.get("spec") or {}).get("volumeName")
        persistent = view.named("PersistentVolume", str(volume_name)) if volume_name else None
        if persistent is None:
            continue  # provisioned on demand (a StorageClass), not the stack's
        reference = (persistent.get("spec") or {}).get("claimRef") or {}
        if (reference.get("namespace"), reference.get("name")) != (namespace, claim_name):
            problems.append(
                f"claim {claim_name} names PV {volume_name}, which is bound to "
                f"{reference.get('namespace')}/{reference.get('name')}: the claim stays Pending"
            )
            continue
        csi = (persistent.get("spec") or {}).get("csi") or {}
        if csi.get("driver") == EFS_CSI_DRIVER and view.cloud:
            problems += _efs_problems(
                view,
                pod_read_only=bool(volume["persistentVolumeClaim"].get("readOnly")),
                claim=str(claim_name),
                volume=persistent,
                team=team,
                group_ids=group_ids,
                publishers=publishers,
                pools=pools,
            )
    return list(dict.fromkeys(problems))
