"""Capacity that exists where a pool asks for it: config refuses a pool Karpenter cannot fill."""

from __future__ import annotations

import copy

import pytest

from components.catalog import CATALOG
from components.config import parse_platform_config
from components.offerings import CAPACITY_BLOCK_REGIONS, ON_DEMAND_PRICED, offered
from tests.config_problems import assert_reported
from tests.conftest import STACKS, stack_data


def test_the_tables_name_only_catalog_types() -> None:
    for types in ON_DEMAND_PRICED.values():
        assert types <= set(CATALOG)
    assert set(CAPACITY_BLOCK_REGIONS) <= set(CATALOG)


@pytest.mark.parametrize(
    ("instance_type", "capacity_type", "region", "expected"),
    [
        # Karpenter v1.14.1's generated us-east-1 prices have trn1 but no trn2.
        ("trn2.48xlarge", "on-demand", "us-east-1", False),
        ("trn1.32xlarge", "on-demand", "us-east-1", True),
        ("p5.48xlarge", "on-demand", "us-east-1", True),
        ("trn2.48xlarge", "reserved", "us-east-1", True),
        # Prices of other regions are read from the Pricing API at run time: unknown here.
        ("trn2.48xlarge", "on-demand", "us-east-2", None),
        ("trn2.48xlarge", "spot", "us-east-1", None),
    ],
)
def test_offered(
    instance_type: str, capacity_type: str, region: str, expected: bool | None
) -> None:
    assert offered(instance_type, capacity_type, region) is expected  # type: ignore[arg-type]


def test_an_on_demand_pool_of_a_type_without_a_price_is_refused() -> None:
    data = stack_data("prod")
    (index,) = [i for i, p in enumerate(data["nodePools"]) if p["name"] == "trn2"]
    pool = data["nodePools"][index]
    pool["capacityType"] = "on-demand"
    pool.pop("capacityReservationIds")
    assert_reported(
        data,
        f"platform.nodePools[{index}].capacityType",
        "on-demand",
        "Capacity Blocks, sold for it in us-east-2",
    )


def test_a_reservation_or_another_region_is_accepted() -> None:
    data = stack_data("prod")
    assert parse_platform_config(data)  # trn2 on a reservation in us-east-1
    moved = copy.deepcopy(stack_data("staging"))
    moved["nodePools"][-1]["instanceTypes"] = ["trn2.48xlarge"]
    assert parse_platform_config(moved).region == "us-east-2"


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_pool_is_offered_as_it_asks(stack: str) -> None:
    config = parse_platform_config(stack_data(stack))
    for pool in config.node_pools:
        for name in pool.instance_types:
            assert offered(name, pool.capacity_type, config.region) is not False
