"""The names of ``pulumi_aws.ec2`` the program uses (../__init__.pyi says why)."""

from pulumi_aws.ec2._inputs import InstanceLaunchTemplateArgs as InstanceLaunchTemplateArgs
from pulumi_aws.ec2._inputs import SecurityGroupEgressArgs as SecurityGroupEgressArgs
from pulumi_aws.ec2._inputs import SecurityGroupIngressArgs as SecurityGroupIngressArgs
from pulumi_aws.ec2.default_security_group import DefaultSecurityGroup as DefaultSecurityGroup
from pulumi_aws.ec2.eip import Eip as Eip
from pulumi_aws.ec2.flow_log import FlowLog as FlowLog
from pulumi_aws.ec2.instance import Instance as Instance
from pulumi_aws.ec2.internet_gateway import InternetGateway as InternetGateway
from pulumi_aws.ec2.launch_template import LaunchTemplate as LaunchTemplate
from pulumi_aws.ec2.nat_gateway import NatGateway as NatGateway
from pulumi_aws.ec2.placement_group import PlacementGroup as PlacementGroup
from pulumi_aws.ec2.route import Route as Route
from pulumi_aws.ec2.route_table import RouteTable as RouteTable
from pulumi_aws.ec2.route_table_association import RouteTableAssociation as RouteTableAssociation
from pulumi_aws.ec2.security_group import SecurityGroup as SecurityGroup
from pulumi_aws.ec2.security_group_rule import SecurityGroupRule as SecurityGroupRule
from pulumi_aws.ec2.subnet import Subnet as Subnet
from pulumi_aws.ec2.subnet_cidr_reservation import SubnetCidrReservation as SubnetCidrReservation
from pulumi_aws.ec2.tag import Tag as Tag
from pulumi_aws.ec2.vpc import Vpc as Vpc
from pulumi_aws.ec2.vpc_endpoint import VpcEndpoint as VpcEndpoint
