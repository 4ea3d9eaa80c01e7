"""Subnet planning: every zone gets a private and a public block inside the VPC, none overlap."""

from __future__ import annotations

import ipaddress
import itertools

import pytest

from components.subnets import SubnetPlanError, plan_subnets

ZONES = ["us-east-1a", "us-east-1b", "us-east-1d"]


def test_blocks_are_inside_the_vpc_sized_as_asked_and_disjoint() -> None:
    plan = plan_subnets("10.40.0.0/16", ZONES, 19, 24)
    vpc = ipaddress.IPv4Network("10.40.0.0/16")
    blocks = [ipaddress.IPv4Network(c) for p in plan for c in (p.private_cidr, p.public_cidr)]
    assert [p.zone for p in plan] == ZONES
    assert all(block.subnet_of(vpc) for block in blocks)
    assert [ipaddress.IPv4Network(p.private_cidr).prefixlen for p in plan] == [19, 19, 19]
    assert [ipaddress.IPv4Network(p.public_cidr).prefixlen for p in plan] == [24, 24, 24]
    assert not any(a.overlaps(b) for a, b in itertools.combinations(blocks, 2))


def test_private_blocks_come_first() -> None:
    plan = plan_subnets("10.0.0.0/16", ZONES, 19, 24)
    assert [p.private_cidr for p in plan] == ["10.0.0.0/19", "10.0.32.0/19", "10.0.64.0/19"]
    assert plan[0].public_cidr == "10.0.96.0/24"


def test_exact_fit_is_accepted_and_one_block_more_is_not() -> None:
    # 2 x /19 fill a /18 completely, leaving nothing for public subnets.
    with pytest.raises(SubnetPlanError, match="public /24"):
        plan_subnets("10.0.0.0/18", ["a", "b"], 19, 24)
    assert len(plan_subnets("10.0.0.0/17", ["a", "b"], 19, 24)) == 2


def test_subnet_larger_than_vpc_is_rejected() -> None:
    with pytest.raises(SubnetPlanError, match="larger than the VPC"):
        plan_subnets("10.0.0.0/20", ["a", "b"], 19, 24)
