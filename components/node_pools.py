"""Karpenter pools: per accelerated pool a placement group, an EC2NodeClass and NodePools.

Everything a pool asks of EC2 is derived from the catalog entry of its instance type: the EFA
interfaces the EC2NodeClass attaches, the accelerator taint, and the NodePool's limits. EFA pools
are pinned to the training zone: their placement group, their subnets and their NodePool's zone
requirement all say the same zone.

A pool that Slurm takes nodes from gets a second NodePool, ``<pool>-slurm``, on the same
EC2NodeClass (so the same placement group, subnets and EFA layout), whose nodes carry a label
and taint that only slurmd pods match. The pool's own NodePool is limited to the nodes Slurm does
not hold. slurmd pods (the default scheduler) and Volcano gangs then never compete for a node.

Nodes of a pool with huge pages reserve them at boot (EC2NodeClass user data) and a NodeOverlay
per NodePool tells Karpenter's scheduling simulation they exist, which it cannot know otherwise
(aws/karpenter-provider-aws#3315).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import health_marks, user_data
from components.catalog import GPU_RESOURCE, HUGEPAGES_RESOURCE, efa_network_interfaces, lookup
from components.config import GeneralPoolConfig, NodePoolConfig
from components.config.pools import (
    GENERAL_LUSTRE_POOL,
    GENERAL_POOL,
    launch_zones,
    placement_group_name,
)

NODE_CLASS_API: Final = "karpenter.k8s.aws/v1"
NODE_POOL_API: Final = "karpenter.sh/v1"
NODE_OVERLAY_API: Final = "karpenter.sh/v1alpha1"
NODE_POOL_LABEL: Final = "karpenter.sh/nodepool"
"""Label Karpenter puts on every node with its NodePool's name; NodeOverlays select by it."""
RESERVED_FOR_LABEL: Final = "trainingplatform.io/reserved-for"
"""Label (and taint key) of nodes a pool keeps for Slurm: ``slurm``."""
SLURM_POOL_SUFFIX: Final = "-slurm"
POOL_LABEL: Final = "trainingplatform.io/pool"
ACCELERATOR_LABEL: Final = "trainingplatform.io/accelerator"
GPU_PRESENT_LABEL: Final = "nvidia.com/gpu.present"
GENERAL_WEIGHT: Final = 10
"""Karpenter tries NodePools by descending weight, so a CPU pod that asks for no pool gets a
general node, and only pods that select general-lustre make its nodes."""
INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"
ZONE: Final = "topology.kubernetes.io/zone"
FSX_STARTUP_TAINT: Final = {"key": "fsx.csi.aws.com/agent-not-ready", "effect": "NoExecute"}
"""Keeps pods off a node until the FSx CSI node agent is ready (the agent removes it)."""
LUSTRE_CLIENT_LABEL: Final = "trainingplatform.io/lustre-client"
"""Label (``"true"``) of every node that can mount the file system: its pool carries the client
security group and sits in the file system's zone. The Lustre PersistentVolumes require it
(:func:`components.storage.lustre_node_affinity`), so a pod with a Lustre claim only lands on
such a node, whichever pool it names."""
CLUSTER_SG_TAG: Final = "aws:eks:cluster-name"
"""Tag EKS puts on the cluster security group it creates (the one managed nodes use)."""

# Training nodes are emptied by jobs finishing, never by Karpenter: only empty nodes are
# consolidated, nodes never expire, and drift never replaces a node that runs something.
TRAINING_DISRUPTION: Final = {
    "consolidationPolicy": "WhenEmpty",
    "consolidateAfter": "30m",
    "budgets": [
        {"nodes": "0", "reasons": ["Drifted"]},
        {"nodes": "10%", "reasons": ["Empty"]},
    ],
}


def required_node_affinity(label: str, values: Sequence[str]) -> dict[str, Any]:
    """A pod's required node affinity: only nodes whose ``label`` is one of ``values``.

    Args:
        label: the node label (:data:`POOL_LABEL`, :data:`NODE_POOL_LABEL`).
        values: the values allowed, in order.
    """
    term = {"matchExpressions": [{"key": label, "operator": "In", "values": list(values)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip


def accelerator_taint(pool: NodePoolConfig) -> dict[str, str]:
    """The taint that keeps non-accelerator pods off a pool's nodes."""
    return {"key": pool.instance.accelerator_resource, "value": "true", "effect": "NoSchedule"}


def slurm_taint() -> dict[str, str]:
    """The taint of nodes a pool keeps for Slurm: only slurmd pods tolerate it."""
    return {"key": RESERVED_FOR_LABEL, "value": "slurm", "effect": "NoSchedule"}


SLURM_TOPOLOGY_ANNOTATION: Final = "topology.slinky.slurm.net/spec"
"""The node annotation the Slinky operator copies into the Slurm node's topology when a slurmd
pod runs there (slurm-operator v1.2.1 internal/controller/nodeset/nodeset_sync.go,
syncSlurmTopology; docs/usage/topology.md)."""
SLURM_TOPOLOGY: Final = "placement"
"""The Slurm topology (topology.yaml) whose switches are the pools' placement groups."""


def slurm_topology_spec(pool: NodePoolConfig) -> str:
    """A Slurm node's place in :data:`SLURM_TOPOLOGY`: the switch named after its pool."""
    return f"{SLURM_TOPOLOGY}:{pool.name}"


def slurm_node_pool_name(pool: NodePoolConfig) -> str:
    """The NodePool of a pool's nodes that Slurm holds, e.g. ``p5-slurm``."""
    return pool.name + SLURM_POOL_SUFFIX


def node_user_data(pool: NodePoolConfig) -> str:
    """EC2NodeClass user data of a pool (:func:`components.user_data.node_user_data`).

    Args:
        pool: the validated pool.
    """
    return user_data.node_user_data(
        efa=pool.uses_efa,
        hugepages_gib=pool.hugepages,
        bottlerocket=pool.ami_alias.startswith(user_data.BOTTLEROCKET_ALIAS_PREFIX),
    )


def hugepages_overlay_spec(node_pool_name: str, gib: int) -> dict[str, Any]:
    """NodeOverlay telling Karpenter that a NodePool's nodes offer ``gib`` GiB of huge pages.

    Karpenter's instance types offer no ``hugepages-2Mi`` (aws/karpenter-provider-aws#3315), so a
    pod requesting them fits no type and its pool never scales. The overlay adds the capacity
    during scheduling; Karpenter then also takes it out of allocatable memory, as the kubelet
    does (kubernetes-sigs/karpenter v1.14.1 pkg/cloudprovider/types.go). Overlays match on
    ``karpenter.sh/nodepool`` (pkg/controllers/nodeoverlay/controller.go); one per NodePool, so
    no two of the same weight set the same resource (which Karpenter treats as a conflict).
    """
    return {
        "weight": 10,
        "requirements": [requirement(NODE_POOL_LABEL, "In", [node_pool_name])],
        "capacity": {HUGEPAGES_RESOURCE: f"{gib}Gi"},
    }


def pool_labels(pool: NodePoolConfig) -> dict[str, str]:
    """Node labels of a pool: its name, accelerator kind, the NVIDIA plugin's label, extras."""
    labels = {POOL_LABEL: pool.name, ACCELERATOR_LABEL: pool.instance.accelerator}
    if pool.instance.accelerator_resource == GPU_RESOURCE:
        # The NVIDIA device plugin's default affinity requires it (no NFD on this platform).
        labels[GPU_PRESENT_LABEL] = "true"
    return {**labels, **pool.labels}


pool_zones = launch_zones
"""Zones a pool may launch in (:func:`components.config.pools.launch_zones`)."""


def placement_group_resource_name(component: str, cluster_name: str, group: str) -> str:
    """Pulumi name of a placement group: from the group's name, not the pool's.

    ``<component>-<pool>`` for the default ``<cluster>-<pool>``, as it always was, so a renamed
    pool that keeps its group through ``placementGroupName`` keeps the resource too: a new
    resource of the same name would be created before the old one is deleted, which EC2
    refuses (a group name is unique in the region).

    Args:
        component: the NodePools component's name.
        cluster_name: the EKS cluster's name.
        group: the placement group's name.
    """
    return f"{component}-{group.removeprefix(cluster_name + '-')}"


def node_class_spec(
    pool: NodePoolConfig,
    *,
    node_role_name: pulumi.Input[str],
    subnet_ids: list[pulumi.Input[str]],
    security_group_terms: list[dict[str, Any]],
    placement_group: str | None,
    tags: dict[str, str],
) -> dict[str, Any]:
    """The EC2NodeClass spec of an accelerated pool.

    Args:
        pool: the validated pool config.
        node_role_name: IAM role of the nodes (Karpenter manages the instance profile).
        subnet_ids: the subnets the pool may use (only the training zone's for EFA pools).
        security_group_terms: securityGroupSelectorTerms (cluster group, EFA group).
        placement_group: placement group name, or None.
        tags: tags of every instance and volume (provider default tags do not reach them).
    """
    instance = pool.instance
    spec: dict[str, Any] = {
        "role": node_role_name,
        "amiSelectorTerms": [{"alias": pool.ami_alias}],
        "subnetSelectorTerms": [{"id": subnet_id} for subnet_id in subnet_ids],
        "securityGroupSelectorTerms": security_group_terms,
        "blockDeviceMappings": [_root_volume(pool.root_volume_size_gib)],
        "metadataOptions": _METADATA_OPTIONS,
        "tags": {**tags, POOL_LABEL: pool.name},
    }
    if instance.nvme_gb > 0:
        spec["instanceStorePolicy"] = "RAID0"
    if pool.uses_efa:
        spec["networkInterfaces"] = efa_network_interfaces(instance.efa_interfaces)
    if placement_group is not None:
        spec["placementGroupSelector"] = {"name": placement_group}
    spec["userData"] = node_user_data(pool)
    if pool.capacity_type == "reserved":
        spec["capacityReservationSelectorTerms"] = [
            {"id": reservation} for reservation in pool.capacity_reservation_ids
        ] + (
            [{"tags": dict(pool.capacity_reservation_tags)}]
            if pool.capacity_reservation_tags
            else []
        )
    return spec


def requirement(key: str, operator: str, values: list[str]) -> dict[str, Any]:
    """One NodePool requirement (a node selector term Karpenter must satisfy)."""
    return {"key": key, "operator": operator, "values": values}


def node_class_ref(name: str) -> dict[str, str]:
    """Reference from a NodePool to its EC2NodeClass."""
    return {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name}


def node_pool_spec(
    pool: NodePoolConfig,
    *,
    zones: list[str],
    nodes: int,
    mounts_lustre: bool = False,
    for_slurm: bool = False,
    acceptance: bool = False,
) -> dict[str, Any]:
    """A NodePool of an accelerated pool: requirements, taints, limits, disruption.

    Args:
        pool: the pool.
        zones: zones it may launch in.
        nodes: most nodes of this NodePool (the pool's ``maxNodes``, less what Slurm holds, or
            for Slurm's NodePool what it holds); becomes the node and accelerator limits. CPU
            and memory limits admit that many of the pool's largest type.
        mounts_lustre: its nodes are Lustre clients: the FSx startup taint, which holds pods
            back until the CSI node agent can mount the file system, and
            :data:`LUSTRE_CLIENT_LABEL`, which the Lustre volumes require. Default False.
        for_slurm: the NodePool of the nodes Slurm holds: its nodes carry the reservation
            label and taint that only slurmd pods match.
        acceptance: the acceptance gate is on: its nodes start with
            :data:`components.health_marks.ACCEPTANCE_TAINT`, which the acceptance agent removes
            once the node passes (Slurm's NodePool too: slurmd waits for acceptance like any
            pod). Default False.
    """
    instance = pool.instance
    entries = [lookup(name) for name in pool.instance_types]
    vcpu = max(entry.vcpu for entry in entries)
    memory_gib = max(entry.memory_gib for entry in entries)
    labels = pool_labels(pool)
    if mounts_lustre:
        labels[LUSTRE_CLIENT_LABEL] = "true"
    taints = [accelerator_taint(pool)] + [t.model_dump() for t in pool.taints]
    metadata: dict[str, Any] = {"labels": labels}
    if for_slurm:
        labels[RESERVED_FOR_LABEL] = slurm_taint()["value"]
        taints.append(slurm_taint())
        metadata["annotations"] = {SLURM_TOPOLOGY_ANNOTATION: slurm_topology_spec(pool)}
    spec: dict[str, Any] = {
        "template": {
            "metadata": metadata,
            "spec": {
                "nodeClassRef": node_class_ref(pool.name),
                "requirements": [
                    requirement(INSTANCE_TYPE, "In", list(pool.instance_types)),
                    requirement(CAPACITY_TYPE, "In", [pool.capacity_type]),
                    requirement(ZONE, "In", zones),
                ],
                "taints": taints,
                "expireAfter": "Never",
            },
        },
        "limits": {
            "nodes": nodes,
            instance.accelerator_resource: nodes * instance.accelerators,
            "cpu": nodes * vcpu,
            "memory": f"{nodes * memory_gib}Gi",
        },
        "disruption": TRAINING_DISRUPTION,
    }  # fmt: skip
    startup = [
        *([dict(health_marks.ACCEPTANCE_TAINT)] if acceptance else []),
        *([FSX_STARTUP_TAINT] if mounts_lustre else []),
    ]
    if startup:
        # Startup taints only hold pods back: Karpenter's simulation ignores them and expects a
        # DaemonSet to remove each (kubernetes-sigs/karpenter v1.14.1
        # pkg/apis/v1/nodepool.go, StartupTaints).
        spec["template"]["spec"]["startupTaints"] = startup
    return spec


def general_node_class_spec(
    general: GeneralPoolConfig,
    *,
    node_role_name: pulumi.Input[str],
    subnet_ids: list[pulumi.Input[str]],
    security_group_terms: list[dict[str, Any]],
    tags: dict[str, str],
    pool_name: str = GENERAL_POOL,
) -> dict[str, Any]:
    """The EC2NodeClass of a general-purpose CPU pool.

    Args:
        general: the CPU pools' settings (AMI).
        node_role_name: IAM role of the nodes.
        subnet_ids: the subnets it launches into (one per zone it may use).
        security_group_terms: its security group selector terms.
        tags: required tags, written onto its instances.
        pool_name: ``general``, or ``general-lustre`` for the file system's clients. Default:
            general.
    """
    return {
        "role": node_role_name,
        "amiSelectorTerms": [{"alias": general.ami_alias}],
        "subnetSelectorTerms": [{"id": subnet_id} for subnet_id in subnet_ids],
        "securityGroupSelectorTerms": security_group_terms,
        "blockDeviceMappings": [_root_volume(100)],
        "metadataOptions": _METADATA_OPTIONS,
        "tags": {**tags, POOL_LABEL: pool_name},
        # Privileged ports stay root's on CPU nodes too: general-lustre mounts the file system,
        # whose servers trust a client connecting from one (the Lustre boundary).
        "userData": user_data.node_user_data(
            efa=False,
            hugepages_gib=0,
            bottlerocket=general.ami_alias.startswith(user_data.BOTTLEROCKET_ALIAS_PREFIX),
        ),
    }


def general_node_pool_spec(
    general: GeneralPoolConfig, *, zones: list[str], mounts_lustre: bool = False
) -> dict[str, Any]:
    """A NodePool of current-generation c, m and r CPU instances.

    Args:
        general: the CPU pools' settings (capacity types, limits).
        zones: the zones it launches in: all for ``general``, the file system's for
            ``general-lustre``.
        mounts_lustre: this is ``general-lustre``: the file system's zone, its limits, the FSx
            startup taint and :data:`LUSTRE_CLIENT_LABEL`. Default False: ``general``, preferred
            by weight.
    """
    pool_name = GENERAL_LUSTRE_POOL if mounts_lustre else GENERAL_POOL
    limits = (
        {"cpu": general.lustre_max_cpu, "memory": f"{general.lustre_max_memory_gib}Gi"}
        if mounts_lustre
        else {"cpu": general.max_cpu, "memory": f"{general.max_memory_gib}Gi"}
    )
    labels = {POOL_LABEL: pool_name}
    if mounts_lustre:
        labels[LUSTRE_CLIENT_LABEL] = "true"
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "nodeClassRef": node_class_ref(pool_name),
                "requirements": [
                    requirement("karpenter.k8s.aws/instance-category", "In", ["c", "m", "r"]),
                    requirement("karpenter.k8s.aws/instance-generation", "Gt", ["5"]),
                    requirement("kubernetes.io/arch", "In", ["amd64"]),
                    requirement(CAPACITY_TYPE, "In", list(general.capacity_types)),
                    requirement(ZONE, "In", zones),
                ],
                "expireAfter": "720h",
            },
        },
        "limits": limits,
        "disruption": {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": "5m",
        },
    }  # fmt: skip
    if mounts_lustre:
        spec["template"]["spec"]["startupTaints"] = [FSX_STARTUP_TAINT]
    else:
        spec["weight"] = GENERAL_WEIGHT
    return spec


_METADATA_OPTIONS: Final = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 1,
    "httpTokens": "required",
}


def _root_volume(size_gib: int) -> dict[str, Any]:
    return {
        "deviceName": "/dev/xvda",
        "ebs": {
            "volumeSize": f"{size_gib}Gi",
            "volumeType": "gp3",
            "encrypted": True,
            "deleteOnTermination": True,
        },
    }


class NodePools(pulumi.ComponentResource):
    """The Karpenter NodePools and EC2NodeClasses of one platform, with their AWS parts."""

    def __init__(
        self,
        name: str,
        *,
        cluster_name: str,
        pools: list[NodePoolConfig],
        general: GeneralPoolConfig,
        zones: list[str],
        training_zone: str,
        vpc_id: pulumi.Input[str],
        private_subnet_ids: dict[str, pulumi.Input[str]],
        node_role_name: pulumi.Input[str],
        tags: dict[str, str],
        lustre_client_group_id: pulumi.Input[str] | None,
        lustre_pools: set[str],
        slurm_nodes: dict[str, int],
        acceptance: bool,
        karpenter_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Create the pools.

        Args:
            name: prefix of child resource names.
            cluster_name: EKS cluster (placement group names, security group selection).
            pools: validated accelerated pools.
            general: the CPU pool's settings.
            zones: every availability zone of the cluster.
            training_zone: the zone of EFA pools and placement groups.
            vpc_id: VPC of the EFA security group.
            private_subnet_ids: private subnet per zone.
            node_role_name: IAM role of Karpenter nodes.
            tags: required tags, written onto instances through the EC2NodeClasses.
            lustre_client_group_id: security group that admits nodes to the Lustre file system,
                or None without one; with it, the pools in ``lustre_pools`` and a
                ``general-lustre`` CPU pool in the training zone carry it and the FSx startup
                taint.
            lustre_pools: names of the accelerator pools whose nodes mount the file system
                (:func:`components.config.pools.mounts_lustre`: those in its zone only).
            slurm_nodes: pool name -> nodes its Slurm node set holds (pools given to Slurm
                only); those nodes come from the pool's ``-slurm`` NodePool.
            acceptance: the acceptance gate is on (``platform.acceptance.enabled``): every
                accelerator NodePool starts its nodes with the acceptance taint.
            karpenter_ready: Karpenter's CRD and controller releases and its node role's access
                entry; every custom resource here waits for them, and is deleted before them.
            kubernetes_provider: provider of the custom resources.
            opts: resource options; the AWS provider comes from here.
        """
        super().__init__("trainingplatform:index:NodePools", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        in_cluster = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=karpenter_ready
        )
        shared_groups: list[dict[str, Any]] = [{"tags": {CLUSTER_SG_TAG: cluster_name}}]
        client_groups: list[dict[str, Any]] = (
            [*shared_groups, {"id": lustre_client_group_id}]
            if lustre_client_group_id is not None
            else list(shared_groups)
        )
        efa_group: aws.ec2.SecurityGroup | None = None
        if any(pool.uses_efa for pool in pools):
            efa_group = aws.ec2.SecurityGroup(
                f"{name}-efa",
                description=f"EFA traffic between training nodes of {cluster_name}",
                vpc_id=vpc_id,
                ingress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True,
                          "description": "all traffic from EFA peers"}],
                egress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True,
                         "description": "all traffic to EFA peers"}],
                tags={"Name": f"{cluster_name}-efa"},
                opts=child,
            )  # fmt: skip
        self.node_classes: dict[str, k8s.apiextensions.CustomResource] = {}
        self.node_pools: dict[str, k8s.apiextensions.CustomResource] = {}
        for pool in pools:
            pool_zone_list = pool_zones(pool, zones, training_zone)
            group_name: str | None = None
            if pool.uses_placement_group:
                group_name = placement_group_name(cluster_name, pool)
                group = aws.ec2.PlacementGroup(
                    placement_group_resource_name(name, cluster_name, group_name),
                    name=group_name,
                    strategy="cluster",
                    opts=child,
                )
                depends: list[pulumi.Resource] = [group]
            else:
                depends = []
            mounts_lustre = lustre_client_group_id is not None and pool.name in lustre_pools
            terms: list[dict[str, Any]] = list(client_groups if mounts_lustre else shared_groups)
            if pool.uses_efa and efa_group is not None:
                terms.append({"id": efa_group.id})
                depends.append(efa_group)
            spec = node_class_spec(
                pool,
                node_role_name=node_role_name,
                subnet_ids=[private_subnet_ids[zone] for zone in pool_zone_list],
                security_group_terms=terms,
                placement_group=group_name,
                tags=tags,
            )
            self.node_classes[pool.name] = self._custom(
                f"{name}-{pool.name}-class",
                api_version=NODE_CLASS_API,
                kind="EC2NodeClass",
                object_name=pool.name,
                spec=spec,
                opts=in_cluster,
                depends_on=depends,
            )
            held = slurm_nodes.get(pool.name, 0)
            node_pool_names = {pool.name: (pool.max_nodes - held, False)}
            if held:
                node_pool_names[slurm_node_pool_name(pool)] = (held, True)
            for node_pool_name, (nodes, for_slurm) in node_pool_names.items():
                node_pool = self._custom(
                    f"{name}-{node_pool_name}",
                    api_version=NODE_POOL_API,
                    kind="NodePool",
                    object_name=node_pool_name,
                    spec=node_pool_spec(
                        pool,
                        zones=pool_zone_list,
                        nodes=nodes,
                        mounts_lustre=mounts_lustre,
                        for_slurm=for_slurm,
                        acceptance=acceptance,
                    ),
                    opts=in_cluster,
                    depends_on=[self.node_classes[pool.name]],
                )
                self.node_pools[node_pool_name] = node_pool
                if pool.hugepages:
                    self._custom(
                        f"{name}-{node_pool_name}-hugepages",
                        api_version=NODE_OVERLAY_API,
                        kind="NodeOverlay",
                        object_name=f"{node_pool_name}-hugepages",
                        spec=hugepages_overlay_spec(node_pool_name, pool.hugepages),
                        opts=in_cluster,
                        depends_on=[],
                    )
        cpu_pools = [(GENERAL_POOL, zones, shared_groups, False)]
        if lustre_client_group_id is not None:
            cpu_pools.append((GENERAL_LUSTRE_POOL, [training_zone], client_groups, True))
        for pool_name, pool_zone_list, terms, mounts_lustre in cpu_pools:
            general_class = self._custom(
                f"{name}-{pool_name}-class",
                api_version=NODE_CLASS_API,
                kind="EC2NodeClass",
                object_name=pool_name,
                spec=general_node_class_spec(
                    general,
                    node_role_name=node_role_name,
                    subnet_ids=[private_subnet_ids[zone] for zone in pool_zone_list],
                    security_group_terms=list(terms),
                    tags=tags,
                    pool_name=pool_name,
                ),
                opts=in_cluster,
                depends_on=[],
            )
            self._custom(
                f"{name}-{pool_name}",
                api_version=NODE_POOL_API,
                kind="NodePool",
                object_name=pool_name,
                spec=general_node_pool_spec(
                    general, zones=pool_zone_list, mounts_lustre=mounts_lustre
                ),
                opts=in_cluster,
                depends_on=[general_class],
            )
        self.register_outputs({})

    def _custom(
        self,
        resource_name: str,
        *,
        api_version: str,
        kind: str,
        object_name: str,
        spec: dict[str, Any],
        opts: pulumi.ResourceOptions,
        depends_on: list[pulumi.Resource],
    ) -> k8s.apiextensions.CustomResource:
        return k8s.apiextensions.CustomResource(
            resource_name,
            api_version=api_version,
            kind=kind,
            metadata={"name": object_name},
            spec=spec,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends_on)),
        )
