"""Pure subnet planning: a private and a public subnet per zone, at addresses fixed by the zone.

Used by config validation (does the plan fit?) and by the network component (what to create), so
both agree on the same addresses.

Each zone's blocks follow from its letter (``us-west-2a`` is slot 0, ``b`` slot 1, ...), never
from its position in the list: EC2 cannot move a subnet, so terraform-provider-aws replaces one
whose ``cidr_block`` or ``availability_zone`` changes (both ``ForceNew`` in
hashicorp/terraform-provider-aws ``internal/service/ec2/vpc_subnet.go``, v6, the provider
pulumi-aws 7.x embeds), and with it the NAT gateway in it (``subnet_id`` is ``ForceNew`` in
``internal/service/ec2/vpc_nat_gateway.go``). With slots, adding a zone or reordering the list
leaves every existing subnet where it is.

- Private subnet of slot ``s``: the ``s``-th private-sized block from the bottom of the VPC. For
  zones lettered a, b, c... this is the block list positions gave before slots existed.
- Public subnet of slot ``s``: the ``s``-th public-sized block from the top of the VPC, so private
  and public blocks grow towards each other and any prefix lengths work.
- A zone's blocks can be pinned instead (``network.subnetCidrs``): for addresses a stack already
  has, or a zone whose slot does not fit.
- A zone whose slot block is past the VPC's end, or taken by a pin or by a zone listed before it,
  gets the first free block instead (:func:`free_block`): the largest one up to two prefix
  lengths smaller, in list order. So appending
  a zone to a stack whose blocks are pinned moves nothing that exists; zones on free blocks
  depend on the list order: append, or pin the block the plan gave.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, Protocol

EC2_SUBNET_PREFIX_LENGTHS: Final = range(16, 29)
"""Subnet sizes EC2 CreateSubnet accepts: /16 to /28."""


ZONE_NAME: Final = re.compile(r"[a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d([a-z])")
"""A region's availability zone: the region name and one letter. Local Zones
(``us-west-2-lax-1a``) and Wavelength Zones (``us-east-1-wl1-bos-wlz-1``) do not match: they
have no letter slot, and the platform does not place nodes there."""


SubnetKind = Literal["private", "public"]


@dataclass(frozen=True)
class SubnetProblem:
    """One reason the plan does not fit, keyed like the ``platform.network`` section."""

    key: str
    """Key path below ``platform.network``, e.g. ``availabilityZones[2]`` or
    ``subnetCidrs.us-east-1d.private``."""
    value: object
    """The value at that key."""
    allowed: str
    """What would fit, in words."""


class SubnetPlanError(ValueError):
    """The requested subnets do not fit in the VPC CIDR; ``problems`` says where and why."""

    def __init__(self, problems: list[SubnetProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p.key}: {p.value}: {p.allowed}" for p in problems))


class PinnedCidrs(Protocol):
    """A zone's pinned blocks (``network.subnetCidrs.<zone>``); None: the zone's slot decides."""

    @property
    def private(self) -> str | None:
        """The pinned private block, or None."""

    @property
    def public(self) -> str | None:
        """The pinned public block, or None."""


@dataclass(frozen=True)
class ZoneSubnets:
    """The two subnets of one availability zone."""

    zone: str
    """Availability zone name, e.g. ``us-west-2a``."""
    private_cidr: str
    """Private subnet for nodes and pods (pods take VPC addresses with the VPC CNI)."""
    public_cidr: str
    """Public subnet that only holds NAT gateways and internet-facing load balancers."""


def zone_slot(zone: str) -> int | None:
    """The slot of a zone: its letter's place in the alphabet (a: 0), None for other names."""
    match = ZONE_NAME.fullmatch(zone)
    return None if match is None else ord(match.group(1)) - ord("a")


def slot_block(
    network: ipaddress.IPv4Network, prefix_length: int, slot: int, kind: SubnetKind
) -> ipaddress.IPv4Network | None:
    """The block of ``slot``: counted from the bottom (private) or top (public) of the VPC.

    Args:
        network: the VPC's CIDR.
        prefix_length: size of the block (not shorter than the VPC's prefix).
        slot: the zone's slot, 0 for zone ``a``.
        kind: ``private`` counts up from the VPC's first address, ``public`` down from its last.

    Returns:
        The block, or None when the VPC has fewer than ``slot + 1`` blocks of that size.

    """
    size = 2 ** (32 - prefix_length)
    count = 2 ** (prefix_length - network.prefixlen)
    if slot >= count:
        return None
    index = slot if kind == "private" else count - 1 - slot
    return ipaddress.IPv4Network((int(network.network_address) + index * size, prefix_length))


@dataclass(frozen=True)
class _Block:
    zone: str
    kind: SubnetKind
    network: ipaddress.IPv4Network
    pinned: bool
    key: str
    value: object


def plan_subnets(
    vpc_cidr: str,
    zones: list[str],
    private_prefix_length: int,
    public_prefix_length: int,
    pinned: Mapping[str, PinnedCidrs] | None = None,
) -> list[ZoneSubnets]:
    """One private and one public subnet per zone, at its slot's blocks or its pinned ones.

    Args:
        vpc_cidr: the VPC's IPv4 CIDR, e.g. ``10.0.0.0/16``.
        zones: availability zones (distinct), in config order; the order changes no address.
        private_prefix_length: prefix length of each slotted private subnet (19 gives 8,187
            usable addresses per zone, enough for pods that each take a VPC address).
        public_prefix_length: prefix length of each slotted public subnet (small: NAT only).
        pinned: zone -> blocks that replace its slot's (``network.subnetCidrs``); default none.
            Pins of zones not in ``zones`` are ignored (config refuses them).

    Returns:
        One entry per zone, in ``zones`` order.

    Raises:
        SubnetPlanError: when a block does not fit or two overlap, naming each key to change.

    """
    network = ipaddress.IPv4Network(vpc_cidr, strict=True)
    pins = pinned or {}
    problems: list[SubnetProblem] = []
    lengths: dict[SubnetKind, int] = {
        "private": private_prefix_length,
        "public": public_prefix_length,
    }
    for kind, length in lengths.items():
        if length < network.prefixlen:
            problems.append(
                SubnetProblem(
                    f"{kind}SubnetPrefixLength",
                    length,
                    f"a prefix length of at least {network.prefixlen}: a /{length} subnet is "
                    f"larger than the VPC {network}",
                )
            )
    if problems:
        raise SubnetPlanError(problems)
    blocks: list[_Block] = []
    homeless: list[tuple[int, str, SubnetKind]] = []
    for index, zone in enumerate(zones):
        pin = pins.get(zone)
        for kind, length in lengths.items():
            slot_problems: list[SubnetProblem] = []
            block = _zone_block(
                network,
                zone=zone,
                index=index,
                kind=kind,
                prefix_length=length,
                pin=pin,
                problems=slot_problems,
            )
            if block is not None:
                blocks.append(block)
            elif _past_the_vpc(slot_problems, index):
                homeless.append((index, zone, kind))
            problems += slot_problems
    pinned_blocks = [block for block in blocks if block.pinned]
    problems += _overlaps(pinned_blocks, already={problem.key for problem in problems})
    if problems:
        raise SubnetPlanError(problems)
    blocks, problems = _place_slotted(
        network,
        lengths,
        pinned_blocks,
        slotted=[b for b in blocks if not b.pinned],
        homeless=homeless,
        zones=zones,
    )
    if problems:
        raise SubnetPlanError(problems)
    found = {(block.zone, block.kind): str(block.network) for block in blocks}
    return [
        ZoneSubnets(
            zone=zone, private_cidr=found[zone, "private"], public_cidr=found[zone, "public"]
        )
        for zone in zones
    ]


def _zone_block(
    network: ipaddress.IPv4Network,
    *,
    zone: str,
    index: int,
    kind: SubnetKind,
    prefix_length: int,
    pin: PinnedCidrs | None,
    problems: list[SubnetProblem],
) -> _Block | None:
    """The block of one zone and kind, or None with the reason added to ``problems``."""
    cidr = None if pin is None else (pin.private if kind == "private" else pin.public)
    if cidr is not None:
        key = f"subnetCidrs.{zone}.{kind}"
        given = ipaddress.IPv4Network(cidr, strict=True)
        if not given.subnet_of(network):
            problems.append(SubnetProblem(key, cidr, f"a block inside the VPC {network}"))
            return None
        if given.prefixlen not in EC2_SUBNET_PREFIX_LENGTHS:
            problems.append(
                SubnetProblem(key, cidr, "a /16 to /28 block: the sizes EC2 CreateSubnet accepts")
            )
            return None
        return _Block(zone, kind, given, pinned=True, key=key, value=cidr)
    key = f"availabilityZones[{index}]"
    slot = zone_slot(zone)
    if slot is None:
        problems.append(
            SubnetProblem(
                key,
                zone,
                "a zone of the region named by one letter (us-west-2a): Local and Wavelength "
                "Zones have no subnet slot",
            )
        )
        return None
    block = slot_block(network, prefix_length, slot, kind)
    if block is None:
        count = 2 ** (prefix_length - network.prefixlen)
        problems.append(
            SubnetProblem(
                key,
                zone,
                f"a zone whose slot fits: {zone} has slot {slot} (its letter), a {network} has "
                f"{count} {kind} /{prefix_length} slots (letters a to {chr(ord('a') + count - 1)});"
                f" pin its blocks in network.subnetCidrs.{zone} or use a larger VPC CIDR",
            )
        )
        return None
    return _Block(zone, kind, block, pinned=False, key=key, value=zone)


FALLBACK_SHRINK: Final = 2
"""How much smaller than its prefix length a zone's block on a free block may be: two prefix
lengths, a quarter of the addresses (prod's fourth zone gets a /20 where its /18 does not fit)."""


def _past_the_vpc(problems: list[SubnetProblem], index: int) -> bool:
    """Whether the only problem of a slotted block is that its slot is past the VPC's end."""
    if len(problems) != 1 or problems[0].key != f"availabilityZones[{index}]":
        return False
    if "a zone whose slot fits" not in problems[0].allowed:
        return False
    problems.clear()
    return True


def _place_slotted(
    network: ipaddress.IPv4Network,
    lengths: Mapping[SubnetKind, int],
    pinned: list[_Block],
    *,
    slotted: list[_Block],
    homeless: list[tuple[int, str, SubnetKind]],
    zones: list[str],
) -> tuple[list[_Block], list[SubnetProblem]]:
    """Every block of the plan: pins, kept slots and free blocks for the zones that need one.

    Pinned blocks come first (they hold addresses on purpose), then each zone in list order,
    the order zones are added in: its slot's block when nothing before it took it, else the
    first free block (:func:`free_block`). An appended zone is the one that moves, never a zone
    that exists, and a zone's free block depends only on the pins and the zones listed before
    it. A slotted block on a pin of a zone listed after it is refused instead: that zone's slot
    was there first, and the pin is the new thing (or was meant for another block).
    """
    kept = list(pinned)
    problems: list[SubnetProblem] = []
    own = {(block.zone, block.kind): block for block in slotted}
    wanted = sorted(
        [(zones.index(block.zone), block.zone, block.kind) for block in slotted] + homeless,
        # A zone's public block first: it sits at its slot near the top, where a private
        # block on a free block would otherwise land.
        key=lambda entry: (entry[0], entry[2] != "public"),
    )
    for index, zone, kind in wanted:
        block = own.get((zone, kind))
        if block is not None:
            pin = next(
                (
                    p
                    for p in pinned
                    if p.network.overlaps(block.network) and zones.index(p.zone) > index
                ),
                None,
            )
            if pin is not None:
                problems.append(
                    SubnetProblem(
                        block.key,
                        block.value,
                        f"subnets that do not overlap: the {block.kind} block {block.network} "
                        f"of {zone} overlaps the pinned {pin.kind} block {pin.network} of "
                        f"{pin.zone}, listed after it; change subnetCidrs.{pin.zone}.{pin.kind} "
                        f"if that pin is new, or pin the blocks of {zone}",
                    )
                )
                continue
            if not any(block.network.overlaps(other.network) for other in kept):
                kept.append(block)
                continue
        free = free_block(network, lengths[kind], kind, kept)
        if free is None:
            problems.append(
                SubnetProblem(
                    f"availabilityZones[{index}]",
                    zone,
                    f"a zone with room for its {kind} subnet: its slot's block is taken or past "
                    f"the VPC {network}, and no free block of /{lengths[kind]} to "
                    f"/{min(lengths[kind] + FALLBACK_SHRINK, 28)} is left; pin its blocks in "
                    f"network.subnetCidrs.{zone} or use a larger VPC CIDR",
                )
            )
            continue
        kept.append(_Block(zone, kind, free, pinned=False, key="", value=zone))
    return kept, problems


def free_block(
    network: ipaddress.IPv4Network,
    prefix_length: int,
    kind: SubnetKind,
    taken: list[_Block],
) -> ipaddress.IPv4Network | None:
    """The first free block for a zone whose slot is taken or past the VPC's end.

    The largest free one first, from ``prefix_length`` down to :data:`FALLBACK_SHRINK`
    lengths longer; private blocks are searched from the bottom of the VPC, public ones from
    the top (where each kind's slots are).

    Args:
        network: the VPC's CIDR.
        prefix_length: the kind's configured prefix length.
        kind: ``private`` or ``public``.
        taken: the blocks planned so far (pins, the zones listed before).

    Returns:
        The block, or None when there is none.
    """
    used = [block.network for block in taken]
    for length in range(prefix_length, min(prefix_length + FALLBACK_SHRINK, 28) + 1):
        candidates = list(network.subnets(new_prefix=length))
        if kind == "public":
            candidates.reverse()
        for candidate in candidates:
            if not any(candidate.overlaps(other) for other in used):
                return candidate
    return None


def _overlaps(blocks: list[_Block], already: set[str]) -> list[SubnetProblem]:
    """One problem per key whose block overlaps an earlier one, naming the block to move.

    Pinned blocks come first (they hold addresses on purpose), then slotted ones by slot: a
    zone added with a later letter is the one named, never the zones that already exist, and
    a zone whose slot lands on a pin is named rather than the pin (which may hold a subnet
    that exists). Keys in ``already`` have a problem and get no second one.
    """
    ordered = sorted(
        blocks, key=lambda b: (not b.pinned, 0 if b.pinned else zone_slot(b.zone) or 0)
    )
    problems: list[SubnetProblem] = []
    blamed = set(already)
    for position, block in enumerate(ordered):
        for earlier in ordered[:position]:
            if block.network.overlaps(earlier.network) and block.key not in blamed:
                blamed.add(block.key)
                if block.pinned:
                    fix = "choose a block that overlaps no other subnet"
                elif earlier.pinned:
                    fix = (
                        f"pin its blocks in network.subnetCidrs.{block.zone}, or change "
                        f"subnetCidrs.{earlier.zone}.{earlier.kind} if that pin is new"
                    )
                else:
                    fix = f"pin its blocks in network.subnetCidrs.{block.zone}"
                problems.append(
                    SubnetProblem(
                        block.key,
                        block.value,
                        f"subnets that do not overlap: the {block.kind} block {block.network} "
                        f"of {block.zone} overlaps the {'pinned ' if earlier.pinned else ''}"
                        f"{earlier.kind} block {earlier.network} "
                        f"of {earlier.zone}; {fix}",
                    )
                )
    return problems
