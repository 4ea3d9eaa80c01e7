"""How each accelerated instance type can be had, per region: one table, from upstream's data.

Karpenter offers an on-demand instance type only where it has an on-demand price for it in the
region (karpenter-provider-aws v1.14.1 pkg/providers/instancetype/offering/base_resolver.go: an
offering without a price is unavailable), so an on-demand NodePool of a type without one never
gets a node, whatever EC2 would sell. Its prices come from the AWS Pricing API at run time,
seeded by a generated table; for the regions that table covers, it is the evidence this module
holds. Capacity Blocks are sold per type in the regions the EC2 User Guide lists. A capacity
reservation (an ODCR, or a Capacity Block's) is the way to run where neither exists.
"""

from __future__ import annotations

from typing import Final, Literal

CapacityType = Literal["on-demand", "spot", "reserved"]

ON_DEMAND_PRICED: Final[dict[str, frozenset[str]]] = {
    # pkg/providers/pricing/zz_generated.pricing_aws.go at v1.14.1 ("generated at
    # 2026-07-06T14:20:29Z for us-east-1"), restricted to the catalog's types. No trn2 (nor
    # p5e) has an on-demand price there.
    "us-east-1": frozenset({
        "g5.2xlarge", "g5.48xlarge", "g5.xlarge", "g6.xlarge", "g6e.48xlarge",
        "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
        "trn1.32xlarge", "trn1n.32xlarge",
    }),
}  # fmt: skip
"""Region -> the catalog types with an on-demand price in Karpenter's generated table. Regions
missing here are not known offline (Karpenter reads them from the Pricing API when it runs)."""

CAPACITY_BLOCK_REGIONS: Final[dict[str, frozenset[str]]] = {
    # EC2 User Guide, "Capacity Blocks for ML", supported instance types and Regions.
    "p5.48xlarge": frozenset({"us-east-1", "us-east-2", "us-west-2", "ap-northeast-1"}),
    "p5e.48xlarge": frozenset({"us-east-2"}),
    "p5en.48xlarge": frozenset({"us-east-2"}),
    "p4d.24xlarge": frozenset({"us-east-2", "us-west-2"}),
    "trn1.32xlarge": frozenset({"us-east-1", "ap-southeast-4"}),
    "trn2.48xlarge": frozenset({"us-east-2"}),
}
"""Instance type -> regions where EC2 sells Capacity Blocks of it."""


def on_demand_known(region: str) -> bool:
    """Whether the table knows which catalog types have an on-demand price in ``region``."""
    return region in ON_DEMAND_PRICED


def offered(instance_type: str, capacity_type: CapacityType, region: str) -> bool | None:
    """Whether Karpenter can launch ``instance_type`` as ``capacity_type`` in ``region``.

    True or False where the table knows, None where it does not (spot, and regions whose
    on-demand prices only the running Karpenter reads). A reservation is always an offering:
    Karpenter builds reserved offerings from the reservations it finds, with a price of zero
    when it has no on-demand price (v1.14.1 offering/reserved_capacity_resolver.go); whether
    EC2 sells a reservation of the type in the region is for the buyer to find out.
    """
    if capacity_type == "reserved":
        return True
    if capacity_type == "on-demand" and on_demand_known(region):
        return instance_type in ON_DEMAND_PRICED[region]
    return None


def what_would_work(instance_type: str, region: str) -> str:
    """The ways to have ``instance_type`` that do exist, for an error message."""
    ways = [
        f"capacityType: reserved with a capacity reservation you hold in {region} (where EC2 "
        "offers the type there: aws ec2 describe-instance-type-offerings)"
    ]
    blocks = sorted(CAPACITY_BLOCK_REGIONS.get(instance_type, ()))
    if blocks:
        ways.append("Capacity Blocks, sold for it in " + ", ".join(blocks))
    priced = sorted(r for r, types in ON_DEMAND_PRICED.items() if instance_type in types)
    if priced:
        ways.append("on demand in " + ", ".join(priced))
    return "; ".join(ways)
