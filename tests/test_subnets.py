"""Subnet planning: each zone's blocks follow from its letter, fit the VPC and overlap nothing.

A subnet that moves is a new subnet (``cidr_block`` and ``availability_zone`` are ForceNew,
hashicorp/terraform-provider-aws ``internal/service/ec2/vpc_subnet.go``), so the properties that
matter are that adding or reordering zones moves no block, and that what does not fit is refused
with the key to change.
"""

from __future__ import annotations

import ipaddress
import itertools
from dataclasses import dataclass

import pytest

from components.subnets import SubnetPlanError, ZoneSubnets, plan_subnets, zone_slot

VPC = "10.40.0.0/16"
LETTERS = "abcdefg"  # the slots a /16 with /19 private and /24 public subnets holds
ZONES = [f"us-east-1{letter}" for letter in LETTERS]


@dataclass(frozen=True)
class Pin:
    """A ``network.subnetCidrs`` entry."""

    private: str | None = None
    public: str | None = None


def _by_zone(plan: list[ZoneSubnets]) -> dict[str, ZoneSubnets]:
    return {entry.zone: entry for entry in plan}


def _blocks(plan: list[ZoneSubnets]) -> list[ipaddress.IPv4Network]:
    return [ipaddress.IPv4Network(c) for p in plan for c in (p.private_cidr, p.public_cidr)]


def test_blocks_are_inside_the_vpc_sized_as_asked_and_disjoint() -> None:
    plan = plan_subnets(VPC, ZONES, 19, 24)
    vpc = ipaddress.IPv4Network(VPC)
    assert [p.zone for p in plan] == ZONES
    assert all(block.subnet_of(vpc) for block in _blocks(plan))
    assert {ipaddress.IPv4Network(p.private_cidr).prefixlen for p in plan} == {19}
    assert {ipaddress.IPv4Network(p.public_cidr).prefixlen for p in plan} == {24}
    assert not any(a.overlaps(b) for a, b in itertools.combinations(_blocks(plan), 2))


def test_private_blocks_count_up_by_letter_and_public_blocks_down() -> None:
    vpc = ipaddress.IPv4Network(VPC)
    private = list(vpc.subnets(new_prefix=19))
    public = list(vpc.subnets(new_prefix=24))
    for entry in plan_subnets(VPC, ["us-east-1d", "us-east-1a"], 19, 24):
        slot = LETTERS.index(entry.zone[-1])
        assert entry.private_cidr == str(private[slot])
        assert entry.public_cidr == str(public[-1 - slot])


def test_zones_a_b_c_in_order_keep_the_private_blocks_list_positions_gave() -> None:
    # Before slots, the n-th zone of the list got the n-th private block.
    vpc = ipaddress.IPv4Network("10.20.0.0/16")
    zones = ["us-east-2a", "us-east-2b", "us-east-2c"]
    plan = plan_subnets(str(vpc), zones, 19, 24)
    positional = [str(block) for block in itertools.islice(vpc.subnets(new_prefix=19), 3)]
    assert [p.private_cidr for p in plan] == positional


@pytest.mark.parametrize("count", [2, 3, 4, 5, 6])
def test_adding_any_zone_moves_no_existing_block(count: int) -> None:
    for existing in itertools.combinations(ZONES, count):
        before = _by_zone(plan_subnets(VPC, list(existing), 19, 24))
        for added in sorted(set(ZONES) - set(existing)):
            after = _by_zone(plan_subnets(VPC, [*existing, added], 19, 24))
            assert {zone: after[zone] for zone in existing} == before, (existing, added)


def test_reordering_zones_moves_no_block() -> None:
    zones = ["us-east-1a", "us-east-1b", "us-east-1d", "us-east-1f"]
    before = _by_zone(plan_subnets(VPC, zones, 20, 26))
    for order in itertools.permutations(zones):
        assert _by_zone(plan_subnets(VPC, list(order), 20, 26)) == before, order


def test_a_pinned_block_is_used_and_the_other_kind_keeps_its_slot() -> None:
    pins = {"us-east-1d": Pin(private="10.40.128.0/19")}
    plan = _by_zone(plan_subnets(VPC, ["us-east-1a", "us-east-1d"], 19, 24, pins))
    assert plan["us-east-1d"].private_cidr == "10.40.128.0/19"
    unpinned = _by_zone(plan_subnets(VPC, ["us-east-1a", "us-east-1d"], 19, 24))
    assert plan["us-east-1d"].public_cidr == unpinned["us-east-1d"].public_cidr
    assert plan["us-east-1a"] == unpinned["us-east-1a"]


def _problems(
    vpc: str, zones: list[str], private: int, public: int, pins: dict[str, Pin] | None = None
) -> dict[str, str]:
    """Key -> allowed text of each problem ``plan_subnets`` raises (it must raise)."""
    with pytest.raises(SubnetPlanError) as raised:
        plan_subnets(vpc, zones, private, public, pins)
    return {problem.key: problem.allowed for problem in raised.value.problems}


def _disjoint(plan: list[ZoneSubnets]) -> bool:
    return not any(a.overlaps(b) for a, b in itertools.combinations(_blocks(plan), 2))


def test_a_zone_whose_slot_is_past_the_vpc_gets_the_first_free_block() -> None:
    # A /16 holds 8 private /19 blocks: slots 0-7, letters a-h; i is slot 8.
    zones = ["us-east-1a", "us-east-1i"]
    plan = plan_subnets(VPC, zones, 19, 24)
    assert plan[0] == plan_subnets(VPC, zones[:1], 19, 24)[0]
    assert (plan[1].private_cidr, plan[1].public_cidr) == ("10.40.32.0/19", "10.40.247.0/24")
    # b, appended after i, finds its slot taken by i: b moves, i does not.
    later = plan_subnets(VPC, [*zones, "us-east-1b"], 19, 24)
    assert later[:2] == plan and later[2].private_cidr == "10.40.64.0/19"
    assert _disjoint(later)


def test_a_full_vpc_still_refuses_the_zone_by_its_key() -> None:
    # /18 private and public blocks: a and b fill the /16, c's slot is b's public block.
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    with pytest.raises(SubnetPlanError) as raised:
        plan_subnets(VPC, zones, 18, 18)
    problems = raised.value.problems
    assert [p.key for p in problems] == ["availabilityZones[2]"] * 2
    for problem, kind in zip(problems, ("public", "private"), strict=True):
        assert f"room for its {kind} subnet" in problem.allowed
        assert "no free block of /18 to /20" in problem.allowed
        assert "pin its blocks in network.subnetCidrs.us-east-1c" in problem.allowed


def test_a_zone_listed_later_moves_off_an_earlier_zones_block() -> None:
    # Slot 7 (h) is the last /19, where the public /24s of a and b sit: h, appended, moves.
    zones = ["us-east-1a", "us-east-1b", "us-east-1h"]
    plan = plan_subnets(VPC, zones, 19, 24)
    assert plan[:2] == plan_subnets(VPC, zones[:2], 19, 24)
    assert plan[2].private_cidr == "10.40.64.0/19"
    assert _disjoint(plan)


def test_a_new_zone_on_a_pinned_block_gets_a_free_block_and_the_pins_are_kept() -> None:
    # A stack from before slots: public /24s right after the private blocks of a and b, where
    # zone c's private slot is.
    pins = {"us-west-2a": Pin(public="10.10.64.0/24"), "us-west-2b": Pin(public="10.10.65.0/24")}
    zones = ["us-west-2a", "us-west-2b", "us-west-2c"]
    plan = _by_zone(plan_subnets("10.10.0.0/16", zones, 19, 24, pins))
    assert plan["us-west-2a"].public_cidr == "10.10.64.0/24"
    assert plan["us-west-2b"].public_cidr == "10.10.65.0/24"
    assert plan["us-west-2c"].private_cidr == "10.10.96.0/19"
    assert _disjoint(list(plan.values()))


def test_a_pin_on_a_zone_listed_before_it_is_refused() -> None:
    # b's new pin lands on a's private slot: a was there first, so the pin is named.
    pins = {"us-east-1b": Pin(public="10.40.0.0/24")}
    problems = _problems(VPC, ["us-east-1a", "us-east-1b"], 19, 24, pins)
    assert list(problems) == ["availabilityZones[0]"]
    assert "subnetCidrs.us-east-1b.public if that pin is new" in problems["availabilityZones[0]"]


@pytest.mark.parametrize(
    ("pin", "words"),
    [
        (Pin(public="10.41.0.0/24"), "inside the VPC 10.40.0.0/16"),
        (Pin(public="10.40.8.0/29"), "/16 to /28"),
        (Pin(public="10.40.255.0/24"), "overlaps the pinned public block 10.40.255.0/24 of"),
    ],
)
def test_a_bad_pin_is_refused_by_its_key(pin: Pin, words: str) -> None:
    pins = {"us-east-1a": Pin(public="10.40.255.0/24"), "us-east-1b": pin}
    problems = _problems(VPC, ["us-east-1a", "us-east-1b"], 19, 24, pins)
    assert list(problems) == ["subnetCidrs.us-east-1b.public"]
    assert words in problems["subnetCidrs.us-east-1b.public"]


@pytest.mark.parametrize("zone", ["us-west-2-lax-1a", "us-east-1-wl1-bos-wlz-1", "us-east-1"])
def test_local_and_wavelength_zones_have_no_slot(zone: str) -> None:
    assert zone_slot(zone) is None
    problems = _problems(VPC, ["us-east-1a", zone], 19, 24)
    assert "Local and Wavelength" in problems["availabilityZones[1]"]


def test_subnet_larger_than_vpc_is_rejected() -> None:
    problems = _problems("10.0.0.0/20", ["us-east-1a", "us-east-1b"], 19, 24)
    assert "larger than the VPC" in problems["privateSubnetPrefixLength"]
