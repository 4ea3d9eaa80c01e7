"""The VPC: a private subnet per zone for nodes and pods, public subnets for NAT, flow logs.

Or, with ``existingVpc``, the VPC and subnets a team already has, tagged so that Karpenter and
internal load balancers find them.
"""

from __future__ import annotations

import ipaddress
import json
import typing
from typing import Any

import pulumi
import pulumi_aws as aws

from components.config import DeployPathConfig, NetworkConfig
from components.iam import service_trust_policy
from components.subnets import plan_subnets

KARPENTER_DISCOVERY_TAG = "karpenter.sh/discovery"
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
PUBLIC_ELB_TAG = "kubernetes.io/role/elb"


def private_subnet_tags(cluster_name: str) -> dict[str, str]:
    """Tags that make a private subnet usable by Karpenter nodes and internal load balancers."""
    return {KARPENTER_DISCOVERY_TAG: cluster_name, INTERNAL_ELB_TAG: "1"}


def flow_log_policy(log_group_arn: str) -> dict[str, Any]:
    """IAM policy that lets VPC flow logs write to one log group (and nothing else)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "WriteFlowLogs",
                "Effect": "Allow",
                "Action": [
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:DescribeLogStreams",
                ],
                "Resource": [log_group_arn, f"{log_group_arn}:*"],
            }
        ],
    }


def flow_log_trust_policy(account_id: str, region: str) -> dict[str, Any]:
    """Trust of the flow-log role: the VPC flow logs service, for this account's flow logs only.

    The conditions keep another account's flow logs from using the role (the confused deputy);
    AWS's flow-log guide documents both keys.
    """
    policy = service_trust_policy("vpc-flow-logs.amazonaws.com")
    policy["Statement"][0]["Condition"] = {
        "StringEquals": {"aws:SourceAccount": account_id},
        "ArnLike": {"aws:SourceArn": f"arn:aws:ec2:{region}:{account_id}:vpc-flow-log/*"},
    }
    return policy


def routed_deploy_networks(cidrs: list[str], vpc_cidr: str) -> list[str]:
    """The deploy networks that need a route out of the VPC: those not inside it.

    Args:
        cidrs: ``cluster.endpoint.deployFrom.cidrs``.
        vpc_cidr: the VPC's CIDR; a network inside it is reached by the local route.
    """
    vpc = ipaddress.IPv4Network(vpc_cidr)
    return [cidr for cidr in cidrs if not ipaddress.IPv4Network(cidr).subnet_of(vpc)]


def nat_gateway_zones(zones: list[str], mode: str) -> dict[str, str]:
    """Zone -> the zone of the NAT gateway its private subnets leave through.

    Args:
        zones: the cluster's availability zones, in config order.
        mode: ``perZone`` (each zone its own gateway) or ``single`` (one gateway, in the zone
            with the lowest letter: reordering the zones, or adding one with a later letter,
            leaves it where it is; a gateway moved to another subnet is a new gateway).
    """
    if mode == "perZone":
        return {zone: zone for zone in zones}
    home = min(zones)
    return {zone: home for zone in zones}


class Network(pulumi.ComponentResource):
    """VPC, subnets, NAT, S3 gateway endpoint and flow logs for one platform.

    Outputs: ``vpc_id``, ``private_subnet_ids`` and ``public_subnet_ids`` (zone -> subnet id,
    in the zone order of the config).
    """

    vpc_id: pulumi.Output[str]
    private_subnet_ids: dict[str, pulumi.Output[str]]
    public_subnet_ids: dict[str, pulumi.Output[str]]

    def __init__(
        self,
        name: str,
        *,
        network: NetworkConfig,
        region: str,
        account_id: str,
        cluster_name: str,
        deploy_path: DeployPathConfig,
        logs_key_arn: pulumi.Input[str],
        reserved_blocks: dict[str, str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Create or adopt the network.

        Args:
            name: logical name prefix of every child resource.
            network: the validated ``platform.network`` section (zones, CIDRs, NAT mode, flow
                logs, or an existing VPC).
            region: AWS region, for the S3 gateway endpoint's service name.
            account_id: AWS account, for the flow-log role's trust conditions.
            cluster_name: EKS cluster name; value of the Karpenter discovery tag on the
                private subnets.
            deploy_path: where deployments come from; with a transit gateway the VPC's
                private subnets are attached to it and its networks routed through it.
            logs_key_arn: customer KMS key of the flow-log group.
            reserved_blocks: zone -> a block of its private subnet that EC2 assigns to nobody
                (an ``explicit`` subnet CIDR reservation): the Lustre admin client's address.
                Whatever uses a zone's subnet id waits for its reservation, so no node, pod or
                cluster interface takes an address first. Default: none.
            opts: resource options; the AWS provider comes from here.

        """
        super().__init__("trainingplatform:index:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.public_subnet_ids = {}
        self.deploy_path: list[pulumi.Resource] = []
        """The transit gateway attachment and routes deployments reach the API through: the
        Kubernetes provider depends on them, so no `up` or `destroy` removes them first."""
        if network.existing_vpc is None:
            self._create(
                name,
                network=network,
                region=region,
                cluster_name=cluster_name,
                deploy_path=deploy_path,
                reserved_blocks=reserved_blocks,
                child=child,
            )
        else:
            self.vpc_id = pulumi.Output.from_input(network.existing_vpc.vpc_id)
            self.private_subnet_ids = {
                zone: self._reserved(
                    name, zone, pulumi.Output.from_input(subnet_id), reserved_blocks
                )
                for zone, subnet_id in network.existing_vpc.private_subnet_ids.items()
            }
            for zone, subnet_id in network.existing_vpc.private_subnet_ids.items():
                for key, value in private_subnet_tags(cluster_name).items():
                    aws.ec2.Tag(
                        f"{name}-{zone}-{key.replace('/', '-').replace('.', '-')}",
                        resource_id=subnet_id,
                        key=key,
                        value=value,
                        opts=child,
                    )
        self._flow_logs(
            name,
            network=network,
            account_id=account_id,
            region=region,
            cluster_name=cluster_name,
            logs_key_arn=logs_key_arn,
            child=child,
        )
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "privateSubnetIds": self.private_subnet_ids,
                "publicSubnetIds": self.public_subnet_ids,
            }
        )

    def _reserved(
        self,
        name: str,
        zone: str,
        subnet_id: pulumi.Output[str],
        reserved_blocks: dict[str, str] | None,
    ) -> pulumi.Output[str]:
        """The subnet's id, carrying its reservation (if the zone has one) as a dependency.

        Everything given the id then waits for the reservation: the cluster's, the endpoints'
        and the nodes' interfaces cannot take a reserved address first.
        """
        cidr = (reserved_blocks or {}).get(zone)
        if cidr is None:
            return subnet_id
        reservation = aws.ec2.SubnetCidrReservation(
            f"{name}-lustre-admin-{zone}",
            subnet_id=subnet_id,
            cidr_block=cidr,
            reservation_type="explicit",
            description="The Lustre admin client's address (the file system's no-squash NID)",
            # EC2 holds one reservation of a block: a replacement must wait for the old one.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        return pulumi.Output.all(subnet_id, reservation.id).apply(
            lambda ids: typing.cast(str, ids[0])
        )

    def _create(
        self,
        name: str,
        *,
        network: NetworkConfig,
        region: str,
        cluster_name: str,
        deploy_path: DeployPathConfig,
        reserved_blocks: dict[str, str] | None,
        child: pulumi.ResourceOptions,
    ) -> None:
        plan = plan_subnets(
            network.vpc_cidr,
            network.availability_zones,
            network.private_subnet_prefix_length,
            network.public_subnet_prefix_length,
            network.subnet_cidrs,
        )
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=network.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={"Name": cluster_name},
            opts=child,
        )
        self.vpc_id = vpc.id
        # EC2 gives every VPC a default security group that admits all traffic among its
        # members and out; nothing here uses it, and adopting it with no rules leaves a member
        # nothing (terraform-provider-aws: the resource "removes all ingress and egress rules"
        # when it adopts the group, and restores nothing on destroy).
        aws.ec2.DefaultSecurityGroup(
            f"{name}-default-group",
            vpc_id=vpc.id,
            ingress=[],
            egress=[],
            tags={"Name": f"{cluster_name}-default-unused"},
            opts=child,
        )
        gateway = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags={"Name": cluster_name}, opts=child
        )
        # Routes are their own resources, never inline: a route table's inline routes are the
        # whole list, so each `up` would delete routes others add (a VPN's, a peering's).
        public_routes = aws.ec2.RouteTable(
            f"{name}-public", vpc_id=vpc.id, tags={"Name": f"{cluster_name}-public"}, opts=child
        )
        aws.ec2.Route(
            f"{name}-public-default",
            route_table_id=public_routes.id,
            destination_cidr_block="0.0.0.0/0",
            gateway_id=gateway.id,
            opts=child,
        )
        nat_zones = nat_gateway_zones(network.availability_zones, network.nat_gateways)
        nat_ids: dict[str, pulumi.Output[str]] = {}
        for zone_plan in plan:
            zone = zone_plan.zone
            public = aws.ec2.Subnet(
                f"{name}-public-{zone}",
                vpc_id=vpc.id,
                cidr_block=zone_plan.public_cidr,
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags={"Name": f"{cluster_name}-public-{zone}", PUBLIC_ELB_TAG: "1"},
                opts=child,
            )
            self.public_subnet_ids[zone] = public.id
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone}",
                subnet_id=public.id,
                route_table_id=public_routes.id,
                opts=child,
            )
            if zone in nat_zones.values():
                address = aws.ec2.Eip(
                    f"{name}-nat-{zone}",
                    domain="vpc",
                    tags={"Name": f"{cluster_name}-nat-{zone}"},
                    opts=child,
                )
                nat = aws.ec2.NatGateway(
                    f"{name}-nat-{zone}",
                    allocation_id=address.id,
                    subnet_id=public.id,
                    tags={"Name": f"{cluster_name}-{zone}"},
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]),
                )
                nat_ids[zone] = nat.id
        private_route_tables: dict[str, aws.ec2.RouteTable] = {}
        self.private_subnet_ids = {}
        for zone_plan in plan:
            zone = zone_plan.zone
            private = aws.ec2.Subnet(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                cidr_block=zone_plan.private_cidr,
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags={
                    "Name": f"{cluster_name}-private-{zone}",
                    **private_subnet_tags(cluster_name),
                },
                opts=child,
            )
            self.private_subnet_ids[zone] = self._reserved(name, zone, private.id, reserved_blocks)
            routes = aws.ec2.RouteTable(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                tags={"Name": f"{cluster_name}-private-{zone}"},
                opts=child,
            )
            aws.ec2.Route(
                f"{name}-private-{zone}-default",
                route_table_id=routes.id,
                destination_cidr_block="0.0.0.0/0",
                nat_gateway_id=nat_ids[nat_zones[zone]],
                opts=child,
            )
            private_route_tables[zone] = routes
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}",
                subnet_id=private.id,
                route_table_id=routes.id,
                opts=child,
            )
        if deploy_path.transit_gateway_id:
            self._transit_gateway_routes(
                name,
                vpc_id=vpc.id,
                vpc_cidr=network.vpc_cidr,
                deploy_path=deploy_path,
                route_tables=private_route_tables,
                cluster_name=cluster_name,
                child=child,
            )
        # Datasets and checkpoints move between nodes and S3 without paying NAT per GB.
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{region}.s3",
            vpc_endpoint_type="Gateway",
            # By zone, not config order: reordering zones changes no input.
            route_table_ids=[
                private_route_tables[zone].id for zone in sorted(private_route_tables)
            ],
            tags={"Name": f"{cluster_name}-s3"},
            opts=child,
        )

    def _transit_gateway_routes(
        self,
        name: str,
        *,
        vpc_id: pulumi.Input[str],
        vpc_cidr: str,
        deploy_path: DeployPathConfig,
        route_tables: dict[str, aws.ec2.RouteTable],
        cluster_name: str,
        child: pulumi.ResourceOptions,
    ) -> None:
        """Attach the private subnets to the deploy path's transit gateway, route its networks.

        So deployments reach the private API endpoint. A deploy network inside the VPC (a runner
        there) needs no route: the local route carries it, and EC2 refuses a route as specific
        as the VPC's CIDR to a transit gateway.
        """
        attachment = aws.ec2transitgateway.VpcAttachment(
            f"{name}-deploy-path",
            transit_gateway_id=deploy_path.transit_gateway_id,
            vpc_id=vpc_id,
            subnet_ids=[self.private_subnet_ids[zone] for zone in sorted(self.private_subnet_ids)],
            tags={"Name": f"{cluster_name}-deploy-path"},
            opts=child,
        )
        self.deploy_path.append(attachment)
        for zone, table in route_tables.items():
            for cidr in routed_deploy_networks(deploy_path.cidrs, vpc_cidr):
                self.deploy_path.append(
                    aws.ec2.Route(
                        f"{name}-private-{zone}-deploy-{cidr.replace('/', '-')}",
                        route_table_id=table.id,
                        destination_cidr_block=cidr,
                        transit_gateway_id=deploy_path.transit_gateway_id,
                        opts=pulumi.ResourceOptions(parent=self, depends_on=[attachment]),
                    )
                )

    def _flow_logs(
        self,
        name: str,
        *,
        network: NetworkConfig,
        account_id: str,
        region: str,
        cluster_name: str,
        logs_key_arn: pulumi.Input[str],
        child: pulumi.ResourceOptions,
    ) -> None:
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-flow-logs",
            name=f"/aws/vpc/{cluster_name}/flow-logs",
            retention_in_days=network.flow_logs.retention_days,
            kms_key_id=logs_key_arn,
            opts=child,
        )
        role = aws.iam.Role(
            f"{name}-flow-logs",
            assume_role_policy=json.dumps(flow_log_trust_policy(account_id, region)),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-flow-logs",
            role=role.id,
            policy=log_group.arn.apply(lambda arn: json.dumps(flow_log_policy(arn))),
            opts=child,
        )
        aws.ec2.FlowLog(
            f"{name}-flow-logs",
            vpc_id=self.vpc_id,
            traffic_type=network.flow_logs.traffic_type,
            log_destination_type="cloud-watch-logs",
            log_destination=log_group.arn,
            iam_role_arn=role.arn,
            max_aggregation_interval=60,
            opts=child,
        )
