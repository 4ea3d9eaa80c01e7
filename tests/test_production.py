"""What a first real `up` of a production stack needs: a way to the private API, a deployer that
EKS makes admin once, log groups under a customer key, a file system that talks Lustre only."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from components.config import parse_platform_config
from synth.run import StackResult
from tests import component_runs as parts
from tests.config_problems import MISSING, assert_reported
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data

LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
KEY = "aws:kms/key:Key"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"


# --------------------------------------------------------------------------- the deployer


@pytest.mark.parametrize(
    "admin",
    [
        "arn:aws:iam::333344445555:role/platform-deployer",
        # the same role under a path: IAM role names are unique in an account
        "arn:aws:iam::333344445555:role/ci/platform-deployer",
        # ... and regardless of case
        "arn:aws:iam::333344445555:role/Platform-Deployer",
    ],
    ids=["same-arn", "same-role-other-path", "same-role-other-case"],
)
def test_the_deployer_is_not_listed_as_an_admin_too(admin: str) -> None:
    """EKS gives the cluster's creator an access entry (pulumi-eks bootstraps it); a second
    one for it fails with 409 (pulumi/pulumi-eks#2373)."""
    data = stack_data("prod")
    data["cluster"]["adminPrincipalArns"].append(admin)
    index = len(data["cluster"]["adminPrincipalArns"]) - 1
    assert_reported(data, f"platform.cluster.adminPrincipalArns[{index}]", admin, "409")


@pytest.mark.parametrize("second", [
    "arn:aws:iam::333344445555:role/platform-admin",
    "arn:aws:iam::333344445555:role/break-glass/platform-admin",
    "arn:aws:iam::333344445555:role/PLATFORM-ADMIN",
])  # fmt: skip
def test_an_admin_listed_twice_in_any_form_is_refused(second: str) -> None:
    data = stack_data("prod")
    data["cluster"]["adminPrincipalArns"] = [
        "arn:aws:iam::333344445555:role/platform-admin",
        second,
    ]
    assert_reported(
        data, "platform.cluster.adminPrincipalArns", data["cluster"]["adminPrincipalArns"], "409"
    )


def test_a_session_arn_as_deployer_names_the_role_to_use() -> None:
    data = stack_data("prod")
    session = "arn:aws:sts::333344445555:assumed-role/platform-deployer/ci-run-42"
    data["cluster"]["deployerPrincipalArn"] = session
    assert_reported(
        data,
        "platform.cluster.deployerPrincipalArn",
        session,
        "arn:aws:iam::333344445555:role/<its path>/platform-deployer",
    )


def test_the_deployer_is_required() -> None:
    data = stack_data("dev")
    del data["cluster"]["deployerPrincipalArn"]
    assert_reported(data, "platform.cluster.deployerPrincipalArn", MISSING, "runs `pulumi up`")


@pytest.mark.parametrize("stack", STACKS)
def test_no_stack_lists_its_deployer_as_an_admin(stack: str) -> None:
    cluster = stack_data(stack)["cluster"]
    deployer = cluster["deployerPrincipalArn"].rsplit("/", 1)[-1]
    assert all(arn.rsplit("/", 1)[-1] != deployer for arn in cluster["adminPrincipalArns"])


# --------------------------------------------------------------------------- the deploy path


def test_a_private_only_endpoint_needs_a_deploy_path() -> None:
    data = stack_data("prod")
    del data["cluster"]["endpoint"]["deployFrom"]
    assert_reported(data, "platform.cluster.endpoint.deployFrom.cidrs", MISSING, "times out")


def test_a_public_endpoint_needs_no_deploy_path() -> None:
    data = stack_data("dev")
    assert "deployFrom" not in data["cluster"]["endpoint"]
    assert parse_platform_config(data).cluster.endpoint.public_access


def test_a_transit_gateway_only_for_a_vpc_the_stack_owns() -> None:
    data = stack_data("prod")
    data["network"]["existingVpc"] = {
        "vpcId": "vpc-0123456789abcdef0",
        "privateSubnetIds": {
            zone: f"subnet-0123456789abcdef{index}"
            for index, zone in enumerate(data["network"]["availabilityZones"])
        },
    }
    assert_reported(
        data,
        "platform.cluster.endpoint.deployFrom.transitGatewayId",
        data["cluster"]["endpoint"]["deployFrom"]["transitGatewayId"],
        "does not own",
    )


def test_a_runner_in_the_vpc_needs_only_the_ingress(
    run_platform: Callable[..., ProgramRun],
) -> None:
    data = stack_data("prod")
    data["cluster"]["endpoint"]["deployFrom"] = {"cidrs": [data["network"]["vpcCidr"]]}
    run = run_platform(data, "prod")
    assert run.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment") == []
    rules = [
        r
        for r in run.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs.get("fromPort") == 443
    ]
    assert [r.inputs["cidrIpv4"] for r in rules] == [data["network"]["vpcCidr"]]
    (cluster,) = run.of_type("eks:index:Cluster")
    assert all(cluster.urn in r.dependencies for r in rules)


def test_a_deploy_network_inside_the_vpc_gets_no_transit_gateway_route(
    run_platform: Callable[..., ProgramRun],
) -> None:
    """EC2 refuses a route as specific as the VPC's CIDR to a transit gateway; the local route
    carries a runner inside the VPC anyway."""
    data = stack_data("prod")
    deploy = data["cluster"]["endpoint"]["deployFrom"]
    inside = data["network"]["vpcCidr"].rsplit(".", 2)[0] + ".8.0/24"
    deploy["cidrs"] = [*deploy["cidrs"], inside]
    run = run_platform(data, "prod")
    routes = [r for r in run.of_type("aws:ec2/route:Route") if r.inputs.get("transitGatewayId")]
    zones = data["network"]["availabilityZones"]
    assert sorted(r.inputs["destinationCidrBlock"] for r in routes) == ["10.200.0.0/16"] * len(
        zones
    )
    ingress = [
        r.inputs["cidrIpv4"]
        for r in run.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs.get("fromPort") == 443
    ]
    assert sorted(ingress) == sorted(deploy["cidrs"])


@pytest.mark.parametrize(("cidrs", "allowed"), [
    (["10.200.0.0/16", "10.200.0.0/16"], "each network once"),
    (["0.0.0.0/0"], "not every address"),
])  # fmt: skip
def test_deploy_networks_aws_would_refuse(cidrs: list[str], allowed: str) -> None:
    data = stack_data("prod")
    data["cluster"]["endpoint"]["deployFrom"]["cidrs"] = cidrs
    path = "platform.cluster.endpoint.deployFrom.cidrs" + ("" if len(cidrs) > 1 else "[0]")
    assert_reported(data, path, cidrs if len(cidrs) > 1 else cidrs[0], allowed)


@pytest.mark.parametrize("cidr", ["10.20.0.0/16", "100.64.0.0/10", "192.168.1.0/24",
                                  "169.254.0.0/16", "0.0.0.0/1"])  # fmt: skip
def test_a_public_endpoint_admits_only_public_networks(cidr: str) -> None:
    data = stack_data("dev")
    data["cluster"]["endpoint"]["publicAccessCidrs"] = [cidr]
    assert_reported(data, "platform.cluster.endpoint.publicAccessCidrs[0]", cidr, "EKS refuses")


def test_the_kubernetes_provider_waits_for_the_deploy_path(
    synthesized: dict[str, StackResult],
) -> None:
    """Every in-cluster resource goes through the provider: it must be created after, and
    deleted before, the attachment, routes and 443 rules it reaches the API through."""
    records = synthesized["prod"].records
    providers = [r for r in records if r.type == "pulumi:providers:kubernetes"]
    assert providers
    path = [
        r.urn for r in records
        if r.type in ("aws:ec2transitgateway/vpcAttachment:VpcAttachment",)
        or (r.type == "aws:ec2/route:Route" and r.inputs.get("transitGatewayId"))
        or (r.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
            and r.inputs.get("fromPort") == 443)
    ]  # fmt: skip
    zones = len(stack_data("prod")["network"]["availabilityZones"])
    assert len(path) == 1 + zones + 1
    for provider in providers:
        assert set(path) <= set(provider.dependencies), provider.name


# --------------------------------------------------------------------------- log groups


@pytest.mark.parametrize("stack", STACKS)
def test_every_log_group_is_encrypted_with_the_stacks_logs_key(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    run = ProgramRun(synthesized[stack].records)
    groups = run.of_type(LOG_GROUP)
    assert {g.inputs["name"].split("/")[2] for g in groups} == {"eks", "vpc", "fsx"}
    (key,) = [k for k in run.of_type(KEY) if "log groups" in k.inputs["description"]]
    for group in groups:
        assert group.property_dependencies.get("kmsKeyId") == [key.urn], group.name
    policy = json.loads(key.inputs["policy"])
    (logs,) = [s for s in policy["Statement"] if "Service" in s["Principal"]]
    data = stack_data(stack)
    assert logs["Principal"]["Service"] == f"logs.{data['region']}.amazonaws.com"
    assert logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"] == (
        f"arn:aws:logs:{data['region']}:{data['accountId']}:log-group:*"
    )
    assert key.inputs["enableKeyRotation"] is True
    assert key.protect is bool(data.get("protectStatefulResources"))


# --------------------------------------------------------------------------- the file system's group


def _lustre_group(run: ProgramRun) -> Any:
    (group,) = [g for g in run.of_type(SECURITY_GROUP) if g.name == "storage-lustre"]
    return group


@pytest.mark.parametrize("stack", STACKS)
def test_the_file_system_sends_lustre_only_and_only_to_its_clients(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    run = ProgramRun(synthesized[stack].records)
    egress = _lustre_group(run).inputs["egress"]
    assert egress
    for rule in egress:
        assert not rule.get("cidrBlocks") and not rule.get("ipv6CidrBlocks"), rule
        assert rule["protocol"] == "tcp", rule
        assert (rule["fromPort"], rule["toPort"]) in {(988, 988), (1018, 1023)}, rule
        assert rule.get("self") or rule.get("securityGroups"), rule


# --------------------------------------------------------------------------- file system API


def test_lustre_logging_disabled_names_no_destination(
    run_component: RunComponent,
) -> None:
    """FSx refuses a log destination with level DISABLED (botocore fsx
    LustreLogCreateConfiguration.Destination)."""
    data = stack_data("prod")
    data["storage"]["lustre"]["logLevel"] = "DISABLED"
    run = run_component(parts.storage, data, "prod")
    file_system = run.one("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert file_system.inputs["logConfiguration"] == {"level": "DISABLED"}
    assert not [g for g in run.of_type(LOG_GROUP) if g.inputs["name"].startswith("/aws/fsx/")]


@pytest.mark.parametrize("stack", STACKS)
def test_backup_tags_only_where_backups_are_taken(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """CopyTagsToBackups is not available on a file system linked to S3 (FSx API)."""
    (file_system,) = [
        r for r in synthesized[stack].records
        if r.type == "aws:fsx/lustreFileSystem:LustreFileSystem"
    ]  # fmt: skip
    backups = file_system.inputs.get("automaticBackupRetentionDays", 0)
    assert file_system.inputs.get("copyTagsToBackups", False) is bool(backups)
    assert "destination" in file_system.inputs["logConfiguration"]
