"""Pure subnet planning: carve per-zone private and public subnets out of a VPC CIDR.

Used by config validation (does the plan fit?) and by the network component (what to create), so
both agree on the same addresses.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


class SubnetPlanError(ValueError):
    """The requested subnets do not fit in the VPC CIDR."""


@dataclass(frozen=True)
class ZoneSubnets:
    """The two subnets of one availability zone."""

    zone: str
    """Availability zone name, e.g. ``us-west-2a``."""
    private_cidr: str
    """Private subnet for nodes and pods (pods take VPC addresses with the VPC CNI)."""
    public_cidr: str
    """Public subnet that only holds NAT gateways and internet-facing load balancers."""


def plan_subnets(
    vpc_cidr: str,
    zones: list[str],
    private_prefix_length: int,
    public_prefix_length: int,
) -> list[ZoneSubnets]:
    """Allocate one private and one public subnet per zone, private blocks first.

    Args:
        vpc_cidr: the VPC's IPv4 CIDR, e.g. ``10.0.0.0/16``.
        zones: availability zones, in the order their subnets are allocated.
        private_prefix_length: prefix length of each private subnet (19 gives 8,187 usable
            addresses per zone, enough for pods that each take a VPC address).
        public_prefix_length: prefix length of each public subnet (small: NAT gateways only).

    Returns:
        One entry per zone, in ``zones`` order.

    Raises:
        SubnetPlanError: when the subnets do not fit, with the numbers that do not add up.

    """
    network = ipaddress.IPv4Network(vpc_cidr, strict=True)
    for length in (private_prefix_length, public_prefix_length):
        if length < network.prefixlen:
            raise SubnetPlanError(f"a /{length} subnet is larger than the VPC {network}")
    private_blocks = _take(network, private_prefix_length, len(zones), taken=[])
    if private_blocks is None:
        raise SubnetPlanError(
            f"{len(zones)} private /{private_prefix_length} subnets do not fit in {network}"
        )
    public_blocks = _take(network, public_prefix_length, len(zones), taken=private_blocks)
    if public_blocks is None:
        raise SubnetPlanError(
            f"{len(zones)} private /{private_prefix_length} and {len(zones)} public "
            f"/{public_prefix_length} subnets do not fit in {network}"
        )
    return [
        ZoneSubnets(zone=zone, private_cidr=str(private), public_cidr=str(public))
        for zone, private, public in zip(zones, private_blocks, public_blocks, strict=True)
    ]


def _take(
    network: ipaddress.IPv4Network,
    prefix_length: int,
    count: int,
    taken: list[ipaddress.IPv4Network],
) -> list[ipaddress.IPv4Network] | None:
    """First ``count`` blocks of ``/prefix_length`` in ``network`` that overlap nothing taken."""
    chosen: list[ipaddress.IPv4Network] = []
    for block in network.subnets(new_prefix=prefix_length):
        if len(chosen) == count:
            break
        if not any(block.overlaps(used) for used in taken):
            chosen.append(block)
    return chosen if len(chosen) == count else None
