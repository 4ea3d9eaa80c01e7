"""The network component under mocks: subnets, NAT, endpoint, flow logs, tags, existing VPCs."""

from __future__ import annotations

import ipaddress
import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest

from components.config import parse_platform_config
from components.subnets import SubnetPlanError, plan_subnets
from synth.diff import ABSENT, record_changes
from synth.replacements import replacing_changes, triggers_of
from synth.run import StackResult
from synth.stackfile import load_stack
from tests import component_runs as parts
from tests.config_problems import assert_reported
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data

SUBNET = "aws:ec2/subnet:Subnet"


def _private_subnets(run: ProgramRun) -> list[dict[str, Any]]:
    return [r.inputs for r in run.of_type(SUBNET) if "-private-" in r.name]


def test_private_subnet_per_zone_sized_for_pods_and_tagged(run_component: RunComponent) -> None:
    data = stack_data("staging")
    run = run_component(parts.network, data, "staging")
    private = _private_subnets(run)
    assert sorted(s["availabilityZone"] for s in private) == data["network"]["availabilityZones"]
    for subnet in private:
        assert ipaddress.IPv4Network(subnet["cidrBlock"]).prefixlen <= 19
        assert subnet["mapPublicIpOnLaunch"] is False
        assert subnet["tags"]["karpenter.sh/discovery"] == "training-staging"
        assert subnet["tags"]["kubernetes.io/role/internal-elb"] == "1"
    public = [r.inputs for r in run.of_type(SUBNET) if "-public-" in r.name]
    assert len(public) == 3
    assert all(s["mapPublicIpOnLaunch"] is False for s in public)
    assert all("karpenter.sh/discovery" not in s["tags"] for s in public)


def test_nat_gateways_single_or_per_zone(run_component: RunComponent) -> None:
    data = stack_data("staging")
    assert (
        len(run_component(parts.network, data, "staging").of_type("aws:ec2/natGateway:NatGateway"))
        == 3
    )
    data["network"]["natGateways"] = "single"
    run = run_component(parts.network, data, "staging")
    nats = run.of_type("aws:ec2/natGateway:NatGateway")
    assert len(nats) == 1
    # every private route table sends egress through that one gateway
    nat_id = {r.urn: r for r in nats}
    tables = {r.urn for r in run.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in r.name}
    assert len(tables) == 3
    defaults = [r for r in run.of_type("aws:ec2/route:Route")
                if r.inputs.get("destinationCidrBlock") == "0.0.0.0/0" and "-private-" in r.name]  # fmt: skip
    assert {r.property_dependencies["routeTableId"][0] for r in defaults} == tables
    assert all(set(r.property_dependencies["natGatewayId"]) <= set(nat_id) for r in defaults)


def test_routes_are_their_own_resources(synthesized: dict[str, StackResult]) -> None:
    """A route table's inline routes are its whole list: a later `up` would delete routes a VPN
    or peering added. So every route is an aws.ec2.Route and no table lists routes."""
    run = ProgramRun(synthesized["prod"].records)
    for table in run.of_type("aws:ec2/routeTable:RouteTable"):
        assert not table.inputs.get("routes"), table.name
    routes = run.of_type("aws:ec2/route:Route")
    public = [r for r in routes if r.name == "network-public-default"]
    assert len(public) == 1 and public[0].inputs["destinationCidrBlock"] == "0.0.0.0/0"


def test_the_deploy_path_is_attached_and_routed(synthesized: dict[str, StackResult]) -> None:
    data = stack_data("prod")
    deploy = data["cluster"]["endpoint"]["deployFrom"]
    run = ProgramRun(synthesized["prod"].records)
    (attachment,) = run.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")
    assert attachment.inputs["transitGatewayId"] == deploy["transitGatewayId"]
    private = {r.urn for r in run.of_type("aws:ec2/subnet:Subnet") if "-private-" in r.name}
    # the private subnets, one of them through its reservation (the Lustre admin client's)
    carried = set(attachment.property_dependencies["subnetIds"])
    assert private <= carried
    assert all("SubnetCidrReservation" in urn for urn in carried - private), carried - private
    via_gateway = [r for r in run.of_type("aws:ec2/route:Route")
                   if r.inputs.get("transitGatewayId") == deploy["transitGatewayId"]]  # fmt: skip
    zones = data["network"]["availabilityZones"]
    assert sorted(r.inputs["destinationCidrBlock"] for r in via_gateway) == sorted(
        deploy["cidrs"] * len(zones)
    )
    assert all(attachment.urn in r.dependencies for r in via_gateway)
    # The control plane admits HTTPS from each network.
    rules = [r for r in run.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
             if r.inputs.get("fromPort") == 443]  # fmt: skip
    assert sorted(r.inputs["cidrIpv4"] for r in rules) == sorted(deploy["cidrs"])
    assert all(r.inputs["toPort"] == 443 and r.inputs["ipProtocol"] == "tcp" for r in rules)


def test_flow_logs_trust_only_this_accounts_flow_logs(
    synthesized: dict[str, StackResult],
) -> None:
    data = stack_data("dev")
    run = ProgramRun(synthesized["dev"].records)
    role = run.one("aws:iam/role:Role", "network-flow-logs")
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
    account, region = data["accountId"], data["region"]
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": account},
        "ArnLike": {"aws:SourceArn": f"arn:aws:ec2:{region}:{account}:vpc-flow-log/*"},
    }


def test_s3_gateway_endpoint_serves_every_private_route_table(
    synthesized: dict[str, StackResult],
) -> None:
    run = ProgramRun(synthesized["prod"].records)
    endpoint = run.one("aws:ec2/vpcEndpoint:VpcEndpoint").inputs
    assert endpoint["serviceName"] == "com.amazonaws.us-east-1.s3"
    assert endpoint["vpcEndpointType"] == "Gateway"
    assert len(endpoint["routeTableIds"]) == 3


def test_flow_logs_to_a_retained_log_group_with_a_scoped_role(
    synthesized: dict[str, StackResult],
) -> None:
    run = ProgramRun(synthesized["dev"].records)
    flow_log = run.one("aws:ec2/flowLog:FlowLog").inputs
    assert flow_log["trafficType"] == "REJECT"
    group = run.one("aws:cloudwatch/logGroup:LogGroup", "flow-logs").inputs
    assert group["retentionInDays"] == 14
    assert flow_log["logDestination"].endswith(group["name"])
    policy = json.loads(run.one("aws:iam/rolePolicy:RolePolicy", "flow-logs").inputs["policy"])
    resources = policy["Statement"][0]["Resource"]
    assert "*" not in resources and all(group["name"] in r for r in resources)


def test_existing_vpc_is_tagged_not_created(run_platform: Callable[..., ProgramRun]) -> None:
    data = stack_data("dev")
    subnets = {"us-west-2a": "subnet-0aaaaaaaaaaaaaaaa", "us-west-2b": "subnet-0bbbbbbbbbbbbbbbb"}
    data["network"]["existingVpc"] = {"vpcId": "vpc-0123456789abcdef0", "privateSubnetIds": subnets}
    del data["network"]["subnetCidrs"]  # the stack creates no subnets to pin
    data["storage"]["lustre"]["adminClient"] = {"reservedCidr": "10.10.63.224/28"}
    run = run_platform(data)
    assert run.of_type("aws:ec2/vpc:Vpc") == []
    # its default group is its owner's: adopting it would strip rules someone relies on
    assert run.of_type("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup") == []
    assert run.of_type(SUBNET) == []
    assert run.of_type("aws:ec2/natGateway:NatGateway") == []
    tags = [r.inputs for r in run.of_type("aws:ec2/tag:Tag")]
    assert {(t["resourceId"], t["key"], t["value"]) for t in tags} == {
        (subnet, key, value)
        for subnet in subnets.values()
        for key, value in (
            ("karpenter.sh/discovery", "training-dev"),
            ("kubernetes.io/role/internal-elb", "1"),
        )
    }
    assert run.one("aws:ec2/flowLog:FlowLog").inputs["vpcId"] == "vpc-0123456789abcdef0"
    cluster = run.one("eks:index:Cluster").inputs
    assert cluster["vpcId"] == "vpc-0123456789abcdef0"
    assert sorted(cluster["privateSubnetIds"]) == sorted(subnets.values())


def test_subnet_pins_are_refused_with_an_existing_vpc() -> None:
    data = stack_data("dev")
    zones = data["network"]["availabilityZones"]
    data["network"]["existingVpc"] = {
        "vpcId": "vpc-0123456789abcdef0",
        "privateSubnetIds": {zone: f"subnet-0123456789abcdef{i}" for i, zone in enumerate(zones)},
    }
    assert_reported(
        data, "platform.network.subnetCidrs", sorted(data["network"]["subnetCidrs"]), "existingVpc"
    )


# ------------------------------------------------------------------ addresses that do not move
# A subnet whose cidrBlock or availabilityZone changes is replaced (both ForceNew), and so is a
# NAT gateway whose subnet_id changes (hashicorp/terraform-provider-aws,
# internal/service/ec2/vpc_subnet.go and vpc_nat_gateway.go): whatever exists must keep its
# URN and inputs when zones are added or reordered.

KEPT_TYPES = (
    SUBNET,
    "aws:ec2/natGateway:NatGateway",
    "aws:ec2/eip:Eip",
    "aws:ec2/routeTableAssociation:RouteTableAssociation",
    "aws:ec2/routeTable:RouteTable",
    "aws:ec2/route:Route",
)


def _network_resources(run: ProgramRun, types: tuple[str, ...]) -> dict[str, tuple[Any, ...]]:
    """URN -> what a change of would update or replace: inputs and where they come from."""
    return {
        r.urn: (r.name, r.inputs, r.property_dependencies, sorted(r.dependencies))
        for r in run.records
        if r.type in types
    }


def _zone_to_add(data: dict[str, Any]) -> tuple[str, dict[str, str] | None]:
    """A zone of the stack's region to add, and the pin it needs (None: its slot fits).

    The zone with the lowest letter whose slot fits; where none does (prod's /18s fill the
    VPC), the lowest letter not used, pinned to the first free blocks, as its owner would.
    """
    network = data["network"]
    zones = network["availabilityZones"]
    config = parse_platform_config(data).network
    spare = [f"{data['region']}{letter}" for letter in "abcdefghij"]
    spare = [zone for zone in spare if zone not in zones]
    for zone in spare:
        try:
            plan_subnets(
                config.vpc_cidr,
                [*zones, zone],
                config.private_subnet_prefix_length,
                config.public_subnet_prefix_length,
                config.subnet_cidrs,
            )
        except SubnetPlanError:
            continue
        return zone, None
    taken = [
        ipaddress.IPv4Network(cidr)
        for entry in plan_subnets(
            config.vpc_cidr,
            zones,
            config.private_subnet_prefix_length,
            config.public_subnet_prefix_length,
            config.subnet_cidrs,
        )
        for cidr in (entry.private_cidr, entry.public_cidr)
    ]
    vpc = ipaddress.IPv4Network(config.vpc_cidr)
    pin: dict[str, str] = {}
    for kind, shortest in (("private", config.private_subnet_prefix_length),
                           ("public", config.public_subnet_prefix_length)):  # fmt: skip
        free = next(
            block
            for length in range(shortest, 29)
            for block in vpc.subnets(new_prefix=length)
            if not any(block.overlaps(used) for used in taken)
        )
        taken.append(free)
        pin[kind] = str(free)
    return spare[0], pin


@pytest.mark.parametrize("stack", STACKS)
def test_adding_a_zone_changes_nothing_that_exists(run_component: RunComponent, stack: str) -> None:
    data = stack_data(stack)
    before = _network_resources(run_component(parts.network, data, stack), KEPT_TYPES)
    added, pin = _zone_to_add(data)
    data["network"]["availabilityZones"].append(added)
    if pin is not None:
        data["network"].setdefault("subnetCidrs", {})[added] = pin
    after_run = run_component(parts.network, data, stack)
    after = _network_resources(after_run, KEPT_TYPES)
    assert {urn: after.get(urn) for urn in before} == before
    new = [r for r in after_run.of_type(SUBNET) if r.urn not in before]
    assert sorted(r.inputs["availabilityZone"] for r in new) == [added, added]


@pytest.mark.parametrize("stack", STACKS)
def test_reordering_zones_changes_no_network_resource(
    run_component: RunComponent, stack: str
) -> None:
    data = stack_data(stack)
    before_run = run_component(parts.network, data, stack)
    data["network"]["availabilityZones"].reverse()
    after_run = run_component(parts.network, data, stack)
    everything = tuple({r.type for r in before_run.records if "index:Network$" in r.urn})
    assert SUBNET in everything
    assert _network_resources(after_run, everything) == _network_resources(before_run, everything)


@pytest.mark.parametrize("stack", STACKS)
def test_reordering_zones_changes_no_resource_of_the_stack(
    run_platform: Callable[..., ProgramRun], synthesized: dict[str, StackResult], stack: str
) -> None:
    """Not the cluster's or the system node group's subnets either: both are sets upstream
    (terraform-provider-aws eks/cluster.go vpc_config.subnet_ids, eks/node_group.go
    subnet_ids), passed sorted by zone, so a new order is no diff."""
    data = stack_data(stack)
    before = {r.urn: r.inputs for r in synthesized[stack].records}
    data["network"]["availabilityZones"].reverse()
    assert {r.urn: r.inputs for r in run_platform(data, stack).records} == before


@pytest.mark.parametrize("stack", STACKS)
def test_adding_a_zone_replaces_only_the_system_node_group_and_diff_says_so(
    run_platform: Callable[..., ProgramRun], synthesized: dict[str, StackResult], stack: str
) -> None:
    """The node group's subnets are ForceNew (synth/replacements.py): it is replaced (the new
    group first, its name being a prefix), the cluster's subnets update in place."""
    data = stack_data(stack)
    before = {r.urn: r for r in synthesized[stack].records}
    added, pin = _zone_to_add(data)
    data["network"]["availabilityZones"].append(added)
    if pin is not None:
        data["network"].setdefault("subnetCidrs", {})[added] = pin
    after = {r.urn: r for r in run_platform(data, stack).records}
    replaced = {
        before[urn].type
        for urn in before.keys() & after.keys()
        if replacing_changes(
            triggers_of(before[urn].type, before[urn].replace_on_changes),
            [(c.key, c.old, c.new) for c in record_changes(before[urn], after[urn])],
            absent=ABSENT,
        )
    }
    assert replaced == {"aws:eks/nodeGroup:NodeGroup"}


def test_adding_a_zone_to_a_fresh_stack_takes_the_next_slot(run_component: RunComponent) -> None:
    """A stack without pinned blocks: zone c lands at slot 2, and a and b stay."""
    data = stack_data("staging")
    data["network"].pop("subnetCidrs", None)
    data["network"]["availabilityZones"] = ["us-east-2b", "us-east-2a"]
    before = _network_resources(run_component(parts.network, data, "staging"), KEPT_TYPES)
    data["network"]["availabilityZones"].append("us-east-2c")
    run = run_component(parts.network, data, "staging")
    assert {urn: r for urn, r in _network_resources(run, KEPT_TYPES).items() if urn in before} == (
        before
    )
    vpc = ipaddress.IPv4Network(data["network"]["vpcCidr"])
    private = {s.inputs["availabilityZone"]: s.inputs["cidrBlock"]
               for s in run.of_type(SUBNET) if "-private-" in s.name}  # fmt: skip
    blocks = list(vpc.subnets(new_prefix=19))
    assert private == {f"us-east-2{letter}": str(blocks[i]) for i, letter in enumerate("abc")}


def test_a_zone_that_lands_on_a_pinned_block_gets_a_free_one() -> None:
    data = stack_data("dev")
    # dev's public subnets are pinned where zone c's private slot (10.10.64.0/19) starts.
    data["network"]["availabilityZones"].append("us-west-2c")
    network = parse_platform_config(data).network
    assert network.planned_private_cidr("us-west-2c") == "10.10.96.0/19"
    assert network.planned_private_cidr("us-west-2a") == "10.10.0.0/19"


def test_single_nat_gateway_stays_in_the_zone_with_the_lowest_letter(
    run_component: RunComponent,
) -> None:
    data = stack_data("staging")
    del data["network"]["subnetCidrs"]
    data["network"]["natGateways"] = "single"
    for order in (["us-east-2c", "us-east-2b", "us-east-2a"], ["us-east-2b", "us-east-2a"]):
        data["network"]["availabilityZones"] = order
        run = run_component(parts.network, data, "staging")
        (nat,) = run.of_type("aws:ec2/natGateway:NatGateway")
        (subnet,) = [
            s for s in run.of_type(SUBNET) if s.urn in nat.property_dependencies["subnetId"]
        ]
        assert subnet.inputs["availabilityZone"] == "us-east-2a", order


def test_existing_subnets_keep_the_addresses_they_were_deployed_with(
    synthesized: dict[str, StackResult],
) -> None:
    """The shipped stacks' subnets where list positions put them before zone slots.

    Before slots, the n-th zone got the n-th private block and the n-th public block after the
    last private one; the stack files pin what slots would otherwise move.
    """
    for stack, result in synthesized.items():
        network = load_stack(stack).platform["network"]
        zones = network["availabilityZones"]
        vpc = ipaddress.IPv4Network(network["vpcCidr"])
        private_length = network.get("privateSubnetPrefixLength", 19)
        private = list(itertools.islice(vpc.subnets(new_prefix=private_length), len(zones)))
        public_length = network.get("publicSubnetPrefixLength", 24)
        after_private = int(private[-1].broadcast_address) + 1
        size = 2 ** (32 - public_length)
        public = [
            ipaddress.IPv4Network((after_private + i * size, public_length))
            for i in range(len(zones))
        ]
        subnets = {r.name: r.inputs["cidrBlock"] for r in result.records if r.type == SUBNET}
        for index, zone in enumerate(zones):
            assert subnets[f"network-private-{zone}"] == str(private[index]), (stack, zone)
            assert subnets[f"network-public-{zone}"] == str(public[index]), (stack, zone)


def test_the_vpcs_default_group_is_adopted_with_no_rules(
    synthesized: dict[str, StackResult],
) -> None:
    """EC2's default group admits all traffic among its members; the stack leaves it empty."""
    run = ProgramRun(synthesized["dev"].records)
    (group,) = run.of_type("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup")
    assert group.inputs["ingress"] == [] and group.inputs["egress"] == []
    vpc = run.one("aws:ec2/vpc:Vpc")
    assert group.property_dependencies["vpcId"] == [vpc.urn]
