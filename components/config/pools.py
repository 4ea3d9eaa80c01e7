"""Config sections ``platform.nodePools`` and ``generalPool``: the Karpenter pools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Final, Literal

from pydantic import AfterValidator, Field

from components import catalog, offerings, versions
from components.config.acceptance import PoolAcceptanceConfig
from components.config.base import (
    CONFIG_KEY,
    AvailabilityZone,
    ConfigProblem,
    StrictModel,
    did_you_mean,
    duplicates,
    matching,
)

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig


PoolName = Annotated[
    str,
    AfterValidator(
        matching(
            r"[a-z][a-z0-9-]{0,30}",
            "lower-case letters, digits and '-', starting with a letter, at most 31 characters",
        )
    ),
]


PlacementGroupName = Annotated[
    str,
    AfterValidator(
        matching(
            r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}",
            "an EC2 placement group name: letters, digits, '.', '_' and '-', at most 255 "
            "characters",
        )
    ),
]


AmiAlias = Annotated[
    str,
    AfterValidator(
        matching(
            r"(al2023|bottlerocket)@(latest|v\d+(\.\d+)*)",
            "an EKS AMI alias, al2023@vYYYYMMDD (@latest only outside production)",
        )
    ),
]


CapacityReservationId = Annotated[
    str, AfterValidator(matching(r"cr-[0-9a-f]{17}", "a capacity reservation id, cr-<17 hex>"))
]


_LABEL_KEY_REGEX: Final = (
    r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)


LabelKey = Annotated[
    str, AfterValidator(matching(_LABEL_KEY_REGEX, "a Kubernetes label key, [prefix/]name"))
]


LabelValue = Annotated[
    str,
    AfterValidator(
        matching(
            r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?",
            "a Kubernetes label value (<= 63 characters)",
        )
    ),
]


# Karpenter rejects labels in these domains on a NodePool (it owns them, or Kubernetes does).
RESTRICTED_LABEL_DOMAINS: Final = ("kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws")
PLATFORM_LABEL_DOMAIN: Final = "trainingplatform.io"
"""The platform's own node labels (pool, accelerator, Lustre client, Slurm's reservation): a
pool's extra label there could send pods, or Lustre claims, to nodes that do not fit them."""


DEFAULT_HUGEPAGES_GIB: Final = 5
"""2 MiB huge pages per EFA node, GiB: libfabric registers its buffers there (AWS's EKS EFA
examples request 5120Mi per pod)."""


class TaintConfig(StrictModel):
    """A Kubernetes taint added to every node of a pool."""

    key: LabelKey = Field(description="Taint key. Required.")
    value: LabelValue = Field(default="", description="Taint value. Default: empty.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        description="Taint effect. Required."
    )


class NodePoolConfig(StrictModel):
    """One accelerated Karpenter pool: a NodePool, its EC2NodeClass and placement group."""

    name: PoolName = Field(
        description="Pool name (NodePool, EC2NodeClass, placement group). Required."
    )
    instance_types: list[str] = Field(
        min_length=1,
        description="Instance types from the catalog (components/catalog.py), all with the same "
        "accelerator and EFA layout. Required.",
    )
    capacity_type: Literal["on-demand", "spot", "reserved"] = Field(
        default="on-demand",
        description="`reserved` launches only into the capacity reservations (ODCR or Capacity "
        "Block) named below. Default: on-demand.",
    )
    capacity_reservation_ids: list[CapacityReservationId] = Field(
        default_factory=list,
        description="Capacity reservations of a `reserved` pool, by id. Default: none.",
    )
    capacity_reservation_tags: dict[str, str] = Field(
        default_factory=dict,
        description="Capacity reservations of a `reserved` pool, by tags (instead of ids). "
        "Default: none.",
    )
    max_nodes: int = Field(
        ge=1,
        le=2000,
        description="Most nodes; becomes the NodePool's node and accelerator limits. Required.",
    )
    efa: bool | None = Field(
        default=None,
        description="Attach every EFA interface of the instance type. Default: true for "
        "EFA-capable types.",
    )
    placement_group: bool | None = Field(
        default=None,
        description="Launch into the pool's own cluster placement group. Default: same as `efa`. "
        "A reserved pool's reservation must have been bought into that group.",
    )
    placement_group_name: PlacementGroupName | None = Field(
        default=None,
        description="Name of the pool's EC2 placement group. Default: `<cluster>-<pool name>`. "
        "A capacity reservation is bought into a group by its name, so renaming a reserved pool "
        "would move it to a new, empty group and its launches into the reservation would fail: "
        "when you rename one, set this to the old group's name (`<cluster>-<old name>`) and the "
        "group stays as it is (docs/how-to/capacity-reservations.md, renaming a reserved pool).",
    )
    zone: AvailabilityZone | None = Field(
        default=None,
        description="Zone of a pool that is not pinned to the training zone. EFA and placement "
        "group pools always live in `network.trainingZone`. Default: all zones (non-EFA pools).",
    )
    ami_alias: AmiAlias = Field(
        default=versions.DEFAULT_AMI_ALIAS,
        description=f"EKS AMI alias. Default: {versions.DEFAULT_AMI_ALIAS} (bill of materials).",
    )
    root_volume_size_gib: int = Field(
        default=200,
        alias="rootVolumeSizeGiB",
        ge=50,
        le=16384,
        description="Encrypted gp3 root volume (container images), GiB. Default: 200.",
    )
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Extra node labels. Default: none."
    )
    taints: list[TaintConfig] = Field(
        default_factory=list,
        description="Extra taints (the accelerator taint is always set). Default: none.",
    )
    cold_start_budget_minutes: int | None = Field(
        default=None,
        ge=1,
        le=1440,
        description="Minutes from a gang's submission to its first training step that a cold "
        "start on this pool may take before the ColdStartOverBudget alert fires. Default: the "
        "largest of its instance families' budgets (components/catalog.py "
        "COLD_START_BUDGET_MINUTES).",
    )
    acceptance: PoolAcceptanceConfig = Field(
        default_factory=PoolAcceptanceConfig,
        description="This pool's overrides of the acceptance gate and its measured baselines. "
        "Default: the platform's settings, the shipped floors.",
    )
    hugepages_gib: int | None = Field(
        default=None,
        alias="hugepagesGiB",
        ge=0,
        le=64,
        description="2 MiB huge pages each node reserves at boot, GiB; every whole-node pod "
        "(Trainer runtimes, Slurm node sets) requests all of them (libfabric registers EFA "
        f"buffers there). Default: {DEFAULT_HUGEPAGES_GIB} on EFA pools, 0 otherwise.",
    )

    @property
    def hugepages(self) -> int:
        """Huge pages of each node, GiB: configured, or the EFA default."""
        if self.hugepages_gib is not None:
            return self.hugepages_gib
        return DEFAULT_HUGEPAGES_GIB if self.uses_efa else 0

    @property
    def uses_efa(self) -> bool:
        """Whether the pool attaches EFA interfaces."""
        if self.efa is not None:
            return self.efa
        return all(
            t in catalog.CATALOG and catalog.CATALOG[t].supports_efa for t in self.instance_types
        )

    @property
    def uses_placement_group(self) -> bool:
        """Whether the pool launches into its own cluster placement group."""
        return self.uses_efa if self.placement_group is None else self.placement_group

    @property
    def instance(self) -> catalog.InstanceType:
        """The catalog entry that sizes the pool (all its types share accelerators and EFA)."""
        return catalog.CATALOG[self.instance_types[0]]


_GENERAL_CAPACITY_TYPES: Final[tuple[Literal["on-demand", "spot"], ...]] = ("on-demand", "spot")


class GeneralPoolConfig(StrictModel):
    """The CPU pool for everything that is not training: controllers' helpers, notebooks, jobs."""

    max_cpu: int = Field(default=256, ge=8, description="vCPU limit of the pool. Default: 256.")
    max_memory_gib: int = Field(
        default=1024,
        alias="maxMemoryGiB",
        ge=16,
        description="Memory limit of the pool, GiB. Default: 1024.",
    )
    lustre_max_cpu: int = Field(
        default=64,
        ge=8,
        description="vCPU limit of general-lustre, the CPU nodes in the file system's zone "
        "that mount it (Slurm login pods, CPU jobs that read /fsx). Default: 64.",
    )
    lustre_max_memory_gib: int = Field(
        default=256,
        alias="lustreMaxMemoryGiB",
        ge=16,
        description="Memory limit of general-lustre, GiB. Default: 256.",
    )
    capacity_types: list[Literal["on-demand", "spot"]] = Field(
        default_factory=lambda: list(_GENERAL_CAPACITY_TYPES),
        min_length=1,
        description="Capacity types Karpenter may use. Default: [on-demand, spot].",
    )
    ami_alias: AmiAlias = Field(
        default=versions.DEFAULT_AMI_ALIAS,
        description=f"EKS AMI alias. Default: {versions.DEFAULT_AMI_ALIAS}.",
    )


class AcceleratorAmounts(StrictModel):
    """An amount of accelerators, per kind."""

    gpus: int = Field(default=0, ge=0, description="NVIDIA GPUs (nvidia.com/gpu). Default: 0.")
    neuron_devices: int = Field(
        default=0, ge=0, description="Neuron devices (aws.amazon.com/neuron). Default: 0."
    )

    def resources(self) -> dict[str, int]:
        """As Kubernetes extended resources."""
        return {catalog.GPU_RESOURCE: self.gpus, catalog.NEURON_RESOURCE: self.neuron_devices}


GENERAL_POOL: Final = "general"
"""The CPU pool for everything that is not training, across every zone."""
GENERAL_LUSTRE_POOL: Final = "general-lustre"
"""The CPU pool of the file system's zone whose nodes mount it (Slurm's login pods, CPU jobs
that read /fsx); the general pool crosses zones and does not."""


def launch_zones(pool: NodePoolConfig, zones: list[str], training_zone: str) -> list[str]:
    """Zones a pool may launch in: the training zone for EFA and placement-group pools.

    Args:
        pool: the pool.
        zones: every availability zone of the cluster.
        training_zone: the zone of EFA pools, placement groups and the file system.
    """
    if pool.uses_efa or pool.uses_placement_group:
        return [training_zone]
    return [pool.zone] if pool.zone else list(zones)


def mounts_lustre(config: PlatformConfig, pool: NodePoolConfig) -> bool:
    """Whether a pool's nodes are Lustre clients: only in the file system's (training) zone.

    The stack must have the file system, and the pool launch only in its zone. A pool that
    crosses zones would read the file system across them (slower, and billed per GB both
    ways), so it does not mount it: its nodes get neither the client security group nor the
    FSx startup taint, and its runtimes no claim. Pin such a pool with ``zone`` to the training
    zone to give it the file system.
    """
    network = config.network
    in_zone = launch_zones(pool, network.availability_zones, network.training_zone)
    return config.storage.lustre is not None and in_zone == [network.training_zone]


def node_pool_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Cross-field problems of ``platform.nodePools``."""
    names = [pool.name for pool in config.node_pools]
    if duplicates([*names, GENERAL_POOL, GENERAL_LUSTRE_POOL]):
        yield ConfigProblem(
            f"{CONFIG_KEY}.nodePools",
            names,
            f"unique pool names, none named {GENERAL_POOL!r} or {GENERAL_LUSTRE_POOL!r} (the "
            "CPU pools)",
        )
    for index, pool in enumerate(config.node_pools):
        yield from _pool_problems(config, pool, f"{CONFIG_KEY}.nodePools[{index}]")
    yield from _placement_group_problems(config)


def placement_group_name(cluster_name: str, pool: NodePoolConfig) -> str:
    """Name of a pool's EC2 placement group: ``placementGroupName``, else ``<cluster>-<pool>``.

    Fixed, so capacity can be reserved into it, and kept across a rename when the key is set.

    Args:
        cluster_name: the EKS cluster's name (the default name's prefix).
        pool: the pool.
    """
    return pool.placement_group_name or f"{cluster_name}-{pool.name}"


def _placement_group_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """A group name set on a pool without a group, or two pools naming one group."""
    seen: dict[str, int] = {}
    for index, pool in enumerate(config.node_pools):
        key = f"{CONFIG_KEY}.nodePools[{index}].placementGroupName"
        if pool.placement_group_name is not None and not pool.uses_placement_group:
            yield ConfigProblem(
                key,
                pool.placement_group_name,
                "nothing: the pool launches into no placement group (placementGroup false, or "
                "no EFA)",
            )
            continue
        if not pool.uses_placement_group:
            continue
        group = placement_group_name(config.name, pool)
        if group in seen:
            yield ConfigProblem(
                key,
                group,
                f"a group no other pool uses (nodePools[{seen[group]}] launches into it): "
                "each pool has its own cluster placement group",
            )
        seen.setdefault(group, index)


def _pool_problems(
    config: PlatformConfig, pool: NodePoolConfig, base: str
) -> Iterator[ConfigProblem]:
    unknown = [t for t in pool.instance_types if t not in catalog.CATALOG]
    for name in unknown:
        position = pool.instance_types.index(name)
        yield ConfigProblem(
            f"{base}.instanceTypes[{position}]",
            name,
            did_you_mean(name, catalog.CATALOG) + "one of " + ", ".join(catalog.CATALOG),
        )
    if unknown:
        return
    if duplicates(pool.instance_types):
        yield ConfigProblem(f"{base}.instanceTypes", pool.instance_types, "each type once")
    entries = [catalog.CATALOG[t] for t in pool.instance_types]
    if len({entry.accelerator for entry in entries}) > 1:
        yield ConfigProblem(
            f"{base}.instanceTypes",
            pool.instance_types,
            "types of one accelerator kind (NVIDIA or Neuron): one taint and plugin per pool",
        )
    if len({entry.accelerators for entry in entries}) > 1:
        yield ConfigProblem(
            f"{base}.instanceTypes",
            pool.instance_types,
            "types with the same number of accelerators per node (limits and job requests "
            "are per node)",
        )
    if pool.uses_efa:
        layouts = {entry.efa_interfaces for entry in entries}
        if len(layouts) > 1:
            yield ConfigProblem(
                f"{base}.instanceTypes",
                pool.instance_types,
                "types with the same EFA layout (one EC2NodeClass attaches one set of "
                f"interfaces); found {sorted(layouts)} EFA interfaces",
            )
        no_efa = [entry.name for entry in entries if not entry.supports_efa]
        if no_efa:
            yield ConfigProblem(
                f"{base}.efa", True, f"false: {', '.join(no_efa)} has no EFA interfaces"
            )
    if pool.hugepages and not pool.ami_alias.startswith("al2023@"):
        yield ConfigProblem(
            f"{base}.amiAlias",
            pool.ami_alias,
            "an al2023@ alias while the pool reserves huge pages (hugepagesGiB "
            f"{pool.hugepages}): its nodes reserve them through an AL2023 cloud-init script, "
            "which Karpenter cannot pass to Bottlerocket (whose user data is TOML); or "
            "hugepagesGiB: 0",
        )
    smallest = min(entry.memory_gib for entry in entries)
    if pool.hugepages * 2 > smallest:
        yield ConfigProblem(
            f"{base}.hugepagesGiB",
            pool.hugepages,
            f"at most half the memory of the pool's smallest type ({smallest // 2} GiB)",
        )
    zones = config.network.availability_zones
    if pool.zone is not None and pool.zone not in zones:
        yield ConfigProblem(
            f"{base}.zone", pool.zone, "one of the availability zones " + ", ".join(zones)
        )
    elif (
        pool.zone is not None
        and pool.zone != config.network.training_zone
        and (pool.uses_efa or pool.uses_placement_group)
    ):
        yield ConfigProblem(
            f"{base}.zone",
            pool.zone,
            f"the training zone {config.network.training_zone} (or nothing): EFA pools and "
            "placement groups live there, next to the file system",
        )
    for position, name in enumerate(pool.instance_types):
        if offerings.offered(name, pool.capacity_type, config.region) is False:
            yield ConfigProblem(
                f"{base}.capacityType",
                pool.capacity_type,
                f"a capacity type under which {name} is offered in {config.region}: Karpenter "
                "has no on-demand price for it there, so the pool would never get a node "
                f"(instanceTypes[{position}]); what exists: "
                + offerings.what_would_work(name, config.region),
            )
    reservations = bool(pool.capacity_reservation_ids or pool.capacity_reservation_tags)
    if pool.capacity_type == "reserved" and not reservations:
        yield ConfigProblem(
            f"{base}.capacityReservationIds",
            [],
            "at least one reservation id (or capacityReservationTags) for a reserved pool",
        )
    if pool.capacity_type != "reserved" and reservations:
        yield ConfigProblem(
            f"{base}.capacityType",
            pool.capacity_type,
            "reserved, since the pool names capacity reservations",
        )
    reserved = (*RESTRICTED_LABEL_DOMAINS, PLATFORM_LABEL_DOMAIN)
    for key in pool.labels:
        domain = key.split("/", 1)[0] if "/" in key else ""
        if any(domain == d or domain.endswith("." + d) for d in reserved):
            yield ConfigProblem(
                f"{base}.labels.{key}",
                key,
                "a label outside the domains Karpenter reserves ("
                + ", ".join(RESTRICTED_LABEL_DOMAINS)
                + f") and the platform's own ({PLATFORM_LABEL_DOMAIN})",
            )


def pool_capacity(config: PlatformConfig) -> AcceleratorAmounts:
    """Most accelerators the node pools can provide at once (maxNodes x devices per node)."""
    totals = dict.fromkeys((catalog.GPU_RESOURCE, catalog.NEURON_RESOURCE), 0)
    for pool in config.node_pools:
        if all(t in catalog.CATALOG for t in pool.instance_types):
            totals[pool.instance.accelerator_resource] += (
                pool.max_nodes * pool.instance.accelerators
            )
    return AcceleratorAmounts(
        gpus=totals[catalog.GPU_RESOURCE], neuron_devices=totals[catalog.NEURON_RESOURCE]
    )
