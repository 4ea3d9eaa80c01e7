"""The network component under mocks: subnets, NAT, endpoint, flow logs, tags, existing VPCs."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from typing import Any

from tests.conftest import ProgramRun, stack_data

SUBNET = "aws:ec2/subnet:Subnet"


def _private_subnets(run: ProgramRun) -> list[dict[str, Any]]:
    return [r.inputs for r in run.of_type(SUBNET) if "-private-" in r.name]


def test_private_subnet_per_zone_sized_for_pods_and_tagged(
    run_platform: Callable[..., ProgramRun],
) -> None:
    data = stack_data("staging")
    run = run_platform(data, "staging")
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


def test_nat_gateways_single_or_per_zone(run_platform: Callable[..., ProgramRun]) -> None:
    data = stack_data("staging")
    assert len(run_platform(data, "staging").of_type("aws:ec2/natGateway:NatGateway")) == 3
    data["network"]["natGateways"] = "single"
    run = run_platform(data, "staging")
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


def test_routes_are_their_own_resources(run_platform: Callable[..., ProgramRun]) -> None:
    """A route table's inline routes are its whole list: a later `up` would delete routes a VPN
    or peering added. So every route is an aws.ec2.Route and no table lists routes."""
    run = run_platform(stack_data("prod"), "prod")
    for table in run.of_type("aws:ec2/routeTable:RouteTable"):
        assert not table.inputs.get("routes"), table.name
    routes = run.of_type("aws:ec2/route:Route")
    public = [r for r in routes if r.name == "network-public-default"]
    assert len(public) == 1 and public[0].inputs["destinationCidrBlock"] == "0.0.0.0/0"


def test_the_deploy_path_is_attached_and_routed(run_platform: Callable[..., ProgramRun]) -> None:
    data = stack_data("prod")
    deploy = data["cluster"]["endpoint"]["deployFrom"]
    run = run_platform(data, "prod")
    (attachment,) = run.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")
    assert attachment.inputs["transitGatewayId"] == deploy["transitGatewayId"]
    private = {r.urn for r in run.of_type("aws:ec2/subnet:Subnet") if "-private-" in r.name}
    assert set(attachment.property_dependencies["subnetIds"]) == private
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
    run_platform: Callable[..., ProgramRun],
) -> None:
    data = stack_data("dev")
    run = run_platform(data, "dev")
    role = run.one("aws:iam/role:Role", "network-flow-logs")
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
    account, region = data["accountId"], data["region"]
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": account},
        "ArnLike": {"aws:SourceArn": f"arn:aws:ec2:{region}:{account}:vpc-flow-log/*"},
    }


def test_s3_gateway_endpoint_serves_every_private_route_table(
    run_platform: Callable[..., ProgramRun],
) -> None:
    run = run_platform(stack_data("prod"), "prod")
    endpoint = run.one("aws:ec2/vpcEndpoint:VpcEndpoint").inputs
    assert endpoint["serviceName"] == "com.amazonaws.us-east-1.s3"
    assert endpoint["vpcEndpointType"] == "Gateway"
    assert len(endpoint["routeTableIds"]) == 3


def test_flow_logs_to_a_retained_log_group_with_a_scoped_role(
    run_platform: Callable[..., ProgramRun],
) -> None:
    run = run_platform(stack_data("dev"))
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
    run = run_platform(data)
    assert run.of_type("aws:ec2/vpc:Vpc") == []
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
