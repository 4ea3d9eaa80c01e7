"""Config section ``platform.network``: the VPC, zones and subnets (components/network.py)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final, Literal

from pydantic import Field

from components import versions
from components.config.base import (
    CONFIG_KEY,
    AvailabilityZone,
    ConfigProblem,
    Ipv4Cidr,
    RetentionDays,
    StrictModel,
    SubnetId,
    VpcId,
    duplicates,
)
from components.subnets import SubnetPlanError, plan_subnets

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig


SHARED_ADDRESS_SPACE: Final = ipaddress.IPv4Network("100.64.0.0/10")
"""RFC 6598 space, which VPCs may use as CIDRs although it is not private in RFC 1918's sense."""


class FlowLogsConfig(StrictModel):
    """VPC flow logs to CloudWatch Logs."""

    retention_days: RetentionDays = Field(
        default=90, description="Days CloudWatch keeps flow log records. Default: 90."
    )
    traffic_type: Literal["ALL", "ACCEPT", "REJECT"] = Field(
        default="ALL", description="Which traffic is logged. Default: ALL."
    )


class ExistingVpcConfig(StrictModel):
    """A VPC and subnets the platform uses instead of creating its own."""

    vpc_id: VpcId = Field(description="Id of the existing VPC. Required.")
    private_subnet_ids: dict[AvailabilityZone, SubnetId] = Field(
        description="Private subnet per availability zone (every zone of "
        "`network.availabilityZones`, and no other). Nodes and pods use them; they get the "
        "Karpenter discovery and internal load balancer tags. Required."
    )


class ZoneSubnetCidrsConfig(StrictModel):
    """Blocks pinned for one zone's subnets, instead of those of its letter's slot."""

    private: Ipv4Cidr | None = Field(
        default=None,
        description="The zone's private subnet. Default: the zone's slot (its letter: a is "
        "slot 0), the slot-th `privateSubnetPrefixLength` block from the VPC's first address.",
    )
    public: Ipv4Cidr | None = Field(
        default=None,
        description="The zone's public subnet. Default: the zone's slot, the slot-th "
        "`publicSubnetPrefixLength` block down from the VPC's last address.",
    )


class NetworkConfig(StrictModel):
    """The VPC, its subnets and where accelerated capacity lives."""

    availability_zones: list[AvailabilityZone] = Field(
        min_length=2,
        description="Zones the cluster spans (at least two, all in `region`). Required.",
    )
    training_zone: AvailabilityZone = Field(
        description="The one zone of `availabilityZones` where EFA node pools, their placement "
        "groups and the Lustre file system live; EFA traffic does not cross zones. Required."
    )
    cluster_zones: list[AvailabilityZone] | None = Field(
        default=None,
        description="Zones of `availabilityZones` whose private subnets the EKS cluster itself "
        "gets: its control plane's network interfaces and the system node group. EKS keeps a "
        "cluster on the zones it was created in (EKS user guide, networking requirements "
        "for VPC and subnets: subnets added later must be in the zones first given), so when "
        "appending a zone to a running stack set this to the zones it had; node pools, "
        "Karpenter and the transit gateway attachment use every zone. At least two, each "
        "once. Default: every zone of `availabilityZones`.",
    )
    vpc_cidr: Ipv4Cidr = Field(
        default="10.0.0.0/16",
        description="IPv4 CIDR of the VPC (of the existing VPC when `existingVpc` is set). "
        "Default: 10.0.0.0/16.",
    )
    private_subnet_prefix_length: int = Field(
        default=19,
        ge=16,
        le=22,
        description="Prefix length of each zone's private subnet. Pods take VPC addresses, so "
        "keep it large: /19 gives 8,187 addresses per zone. Default: 19.",
    )
    public_subnet_prefix_length: int = Field(
        default=24,
        ge=20,
        le=28,
        description="Prefix length of each zone's public subnet (NAT gateways and internet "
        "load balancers only). Default: 24.",
    )
    subnet_cidrs: dict[AvailabilityZone, ZoneSubnetCidrsConfig] = Field(
        default_factory=dict,
        description="Zone -> the subnet blocks pinned for it (`private`, `public` or both), "
        "for addresses a stack already has. Every other subnet sits at its zone's slot, from "
        "the zone's letter, so adding or reordering zones moves none (a moved subnet is a new "
        "subnet; docs/upgrades/0.1.0.md, 'Subnet addresses and association names'); a zone "
        "whose slot is taken or past the VPC's end gets the first free block, after the zones "
        "listed before it (docs/how-to/add-an-environment.md, adding a zone). Only for a VPC "
        "the stack creates. Default: none.",
    )
    nat_gateways: Literal["single", "perZone"] = Field(
        default="perZone",
        description="`perZone` keeps egress up when a zone fails; `single` costs less and puts "
        "the one gateway in the zone with the lowest letter. Default: perZone.",
    )
    flow_logs: FlowLogsConfig = Field(
        default_factory=FlowLogsConfig, description="VPC flow logs. Default: all traffic, 90 days."
    )
    existing_vpc: ExistingVpcConfig | None = Field(
        default=None,
        description="Use this VPC and its subnets instead of creating them. Default: create.",
    )

    def control_plane_zones(self) -> list[str]:
        """The zones of the cluster's own subnets (``clusterZones``, else every zone), sorted.

        Sorted because subnet sets are unordered upstream: a reordered list is no diff.
        """
        zones = self.availability_zones if self.cluster_zones is None else self.cluster_zones
        return sorted(set(zones))

    def planned_private_cidr(self, zone: str) -> str | None:
        """The block of the private subnet the stack creates in ``zone``.

        None with an existing VPC (config does not know its blocks), for a zone the cluster
        does not span, or for a plan that does not fit (reported by :func:`network_problems`).
        """
        if self.existing_vpc is not None or zone not in self.availability_zones:
            return None
        try:
            plan = plan_subnets(
                self.vpc_cidr,
                self.availability_zones,
                self.private_subnet_prefix_length,
                self.public_subnet_prefix_length,
                self.subnet_cidrs,
            )
        except SubnetPlanError:
            return None
        return next(zone_plan.private_cidr for zone_plan in plan if zone_plan.zone == zone)


def network_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Cross-field problems of ``platform.network`` (and the region and deploy path)."""
    if config.region not in versions.EKS_IMAGE_REGISTRY_ACCOUNTS:
        yield ConfigProblem(
            f"{CONFIG_KEY}.region",
            config.region,
            "a region of the aws partition whose EKS image registry the bill of materials "
            "knows: " + ", ".join(sorted(versions.EKS_IMAGE_REGISTRY_ACCOUNTS)),
        )
    network = config.network
    zones = network.availability_zones
    base = f"{CONFIG_KEY}.network"
    deploy = config.cluster.endpoint.deploy_from
    if deploy.transit_gateway_id and network.existing_vpc is not None:
        yield ConfigProblem(
            f"{CONFIG_KEY}.cluster.endpoint.deployFrom.transitGatewayId",
            deploy.transit_gateway_id,
            "nothing with network.existingVpc: the stack does not own that VPC's route tables "
            "(route the deploy networks there yourself)",
        )
    if deploy.transit_gateway_id and not deploy.cidrs:
        yield ConfigProblem(
            f"{CONFIG_KEY}.cluster.endpoint.deployFrom.cidrs",
            [],
            "the networks to route through the transit gateway",
        )
    if duplicates(deploy.cidrs):
        yield ConfigProblem(
            f"{CONFIG_KEY}.cluster.endpoint.deployFrom.cidrs", deploy.cidrs, "each network once"
        )
    for index, cidr in enumerate(deploy.cidrs):
        if ipaddress.IPv4Network(cidr).prefixlen == 0:
            # 443 from everywhere routable, and a route that collides with the NAT default.
            yield ConfigProblem(
                f"{CONFIG_KEY}.cluster.endpoint.deployFrom.cidrs[{index}]",
                cidr,
                "the networks deployments come from, not every address",
            )
    vpc_prefix = ipaddress.IPv4Network(network.vpc_cidr).prefixlen
    if not 16 <= vpc_prefix <= 28:
        yield ConfigProblem(
            f"{base}.vpcCidr",
            network.vpc_cidr,
            "a /16 to /28 network: the sizes EC2 CreateVpc accepts",
        )
    known_region = config.region in versions.EKS_IMAGE_REGISTRY_ACCOUNTS
    for index, zone in enumerate(zones if known_region else []):
        # zones are judged against the region only once the region itself is one we know
        if not zone.startswith(config.region) or len(zone) != len(config.region) + 1:
            yield ConfigProblem(
                f"{base}.availabilityZones[{index}]", zone, f"a zone of region {config.region}"
            )
    duplicated = duplicates(zones)
    if duplicated:
        yield ConfigProblem(f"{base}.availabilityZones", zones, "each zone once")
    if network.training_zone not in zones:
        yield ConfigProblem(
            f"{base}.trainingZone",
            network.training_zone,
            "one of the availability zones " + ", ".join(dict.fromkeys(zones)),
        )
    yield from _cluster_zone_problems(network, base)
    if network.existing_vpc is not None:
        given = network.existing_vpc.private_subnet_ids
        if set(given) != set(zones):
            yield ConfigProblem(
                f"{base}.existingVpc.privateSubnetIds",
                sorted(given),
                "exactly one subnet for each availability zone " + ", ".join(zones),
            )
        if len(set(given.values())) != len(given):
            yield ConfigProblem(
                f"{base}.existingVpc.privateSubnetIds", given, "a different subnet per zone"
            )
        if network.subnet_cidrs:
            yield ConfigProblem(
                f"{base}.subnetCidrs",
                sorted(network.subnet_cidrs),
                "nothing with network.existingVpc: the stack creates no subnets there",
            )
        return
    for zone, pin in network.subnet_cidrs.items():
        if zone not in zones:
            yield ConfigProblem(
                f"{base}.subnetCidrs.{zone}",
                zone,
                "a zone of network.availabilityZones ("
                + ", ".join(zones)
                + "); drop the pins of a zone the cluster does not span",
            )
        elif pin.private is None and pin.public is None:
            yield ConfigProblem(
                f"{base}.subnetCidrs.{zone}", {}, "a private block, a public block or both"
            )
    if not duplicated:
        try:
            plan_subnets(
                network.vpc_cidr,
                zones,
                network.private_subnet_prefix_length,
                network.public_subnet_prefix_length,
                network.subnet_cidrs,
            )
        except SubnetPlanError as exc:
            for problem in exc.problems:
                yield ConfigProblem(f"{base}.{problem.key}", problem.value, problem.allowed)


def _cluster_zone_problems(network: NetworkConfig, base: str) -> Iterator[ConfigProblem]:
    """``clusterZones``: zones of ``availabilityZones``, each once, at least two of them.

    EKS CreateCluster wants subnets in at least two zones (EKS user guide, networking
    requirements for VPC and subnets), and a zone outside ``availabilityZones`` has no
    subnet of the stack.
    """
    chosen = network.cluster_zones
    if chosen is None:
        return
    zones = network.availability_zones
    for index, zone in enumerate(chosen):
        if zone not in zones:
            yield ConfigProblem(
                f"{base}.clusterZones[{index}]",
                zone,
                "a zone of network.availabilityZones (" + ", ".join(zones) + ")",
            )
    if duplicates(chosen):
        yield ConfigProblem(f"{base}.clusterZones", chosen, "each zone once")
    if len(set(chosen)) < 2:
        yield ConfigProblem(
            f"{base}.clusterZones",
            chosen,
            "at least two zones of network.availabilityZones: EKS creates a cluster only "
            "with subnets in two zones or more",
        )


def client_network_problems(
    config: PlatformConfig, key: str, cidrs: list[str], *, reached: str, stake: str, inside: str
) -> Iterator[ConfigProblem]:
    """Problems of the client networks allowed to an internal load balancer.

    One rule for every internal load balancer the stack opens to people (the Slurm login's,
    the web UIs'): a private network, outside the VPC, that the VPC routes back to.

    Args:
        config: the parsed platform (its VPC CIDR and deploy path).
        key: the config key of the list, e.g. ``platform.slurm.login.allowedCidrs``.
        cidrs: the list's CIDRs, each reported as ``key[index]``.
        reached: what the networks reach, e.g. "the login load balancer".
        stake: why the internet must not reach it, e.g. what guards a root shell.
        inside: what a team pod would reach through a range overlapping the VPC.
    """
    deploy_path = config.cluster.endpoint.deploy_from
    for index, cidr in enumerate(cidrs):
        network = ipaddress.IPv4Network(cidr, strict=False)
        private = network.is_private or network.subnet_of(SHARED_ADDRESS_SPACE)
        if network.prefixlen == 0 or not private:
            yield ConfigProblem(
                f"{key}[{index}]",
                cidr,
                "a private network (the VPC's, a VPN's or a peered one), never the internet: "
                f"{reached} is internal, and {stake}",
            )
        elif network.overlaps(ipaddress.IPv4Network(config.network.vpc_cidr)):
            # The VPC CNI gives pods addresses from the VPC's block: a range that overlaps it
            # lets team pods through the load balancer's source ranges.
            yield ConfigProblem(
                f"{key}[{index}]",
                cidr,
                f"a network outside the VPC's {config.network.vpc_cidr}, whose addresses every "
                "node and pod takes (the corporate VPN's or a peered VPC's): a range that "
                f"overlaps it lets team pods reach {inside}",
            )
        elif deploy_path.transit_gateway_id and not any(
            network.subnet_of(ipaddress.IPv4Network(routed, strict=False))
            for routed in deploy_path.cidrs
        ):
            # The load balancer keeps the client's address (preserve_client_ip), so the pod's
            # reply is routed by the private route tables, whose routes to other networks the
            # stack writes itself here: those of deployFrom, through the transit gateway. Any
            # other source's replies leave through the NAT gateway and never arrive.
            yield ConfigProblem(
                f"{key}[{index}]",
                cidr,
                "a network the VPC routes back to: within cluster.endpoint.deployFrom.cidrs ("
                + ", ".join(deploy_path.cidrs)
                + f"), which the stack routes through its transit gateway; {reached} keeps "
                "the client's address, so replies to any other source leave through the NAT "
                "gateway and the connection never completes",
            )
