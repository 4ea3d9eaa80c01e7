"""Stack configuration: every stack loads, and bad input names the key, the value and the fix."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import catalog, versions
from components.config import ConfigError, parse_platform_config
from components.config.base import did_you_mean
from synth.__main__ import main as synth_main
from synth.stackfile import REPOSITORY_ROOT, StackFile, load_stack
from tests.config_problems import failures_of_the_program
from tests.conftest import STACKS, stack_data
from tests.mutations import Mutation
from tests.mutations import both as _both
from tests.mutations import delete_at as _delete
from tests.mutations import set_at as _set


def _pool(index: int = 0, **fields: Any) -> Mutation:
    """Replace dev's pool list entry ``index`` with a trn1 EFA pool changed by ``fields``."""

    def mutate(data: dict[str, Any]) -> None:
        pool = {"name": "trn", "instanceTypes": ["trn1.32xlarge"], "maxNodes": 2, **fields}
        data["nodePools"] = [*data.get("nodePools", [])[:index], pool]

    return mutate


def _lustre(**fields: Any) -> Mutation:
    """Change fields of dev's file system."""

    def mutate(data: dict[str, Any]) -> None:
        data["storage"]["lustre"].update(fields)

    return mutate


def _first_team(**fields: Any) -> Mutation:
    """Change fields of dev's first team (None deletes one)."""

    def mutate(data: dict[str, Any]) -> None:
        team = data["teams"][0]
        for key, value in fields.items():
            if value is None:
                team.pop(key, None)
            else:
                team[key] = value

    return mutate


# (id, mutation of the dev stack, key path in the message, words of the allowed text)
INVALID: list[tuple[str, Mutation, str, str]] = [
    ("training zone not a cluster zone", _set("network.trainingZone", "us-west-2c"),
     "platform.network.trainingZone", "one of the availability zones us-west-2a, us-west-2b"),
    ("zone of another region", _set("network.availabilityZones", ["us-west-2a", "us-east-1b"]),
     "platform.network.availabilityZones[1]", "a zone of region us-west-2"),
    ("single zone", _set("network.availabilityZones", ["us-west-2a"]),
     "platform.network.availabilityZones", "at least 2 items"),
    ("duplicate zones", _set("network.availabilityZones", ["us-west-2a", "us-west-2a"]),
     "platform.network.availabilityZones", "each zone once"),
    ("malformed CIDR", _set("network.vpcCidr", "10.10.0.0/33"),
     "platform.network.vpcCidr", "IPv4 network in CIDR form"),
    ("CIDR with host bits", _set("network.vpcCidr", "10.10.0.1/16"),
     "platform.network.vpcCidr", "no host bits set"),
    ("pinned subnet outside a smaller CIDR", _set("network.vpcCidr", "10.10.0.0/18"),
     "platform.network.subnetCidrs.us-west-2a.public", "a block inside the VPC 10.10.0.0/18"),
    ("zone with no room left in the VPC",
     _both(_set("network.privateSubnetPrefixLength", 17),
           _set("network.availabilityZones", ["us-west-2a", "us-west-2b", "us-west-2c",
                                              "us-west-2i"])),
     "platform.network.availabilityZones[3]", "a zone with room for its private subnet"),
    ("subnet pin for a zone the cluster lacks",
     _set("network.subnetCidrs.us-west-2c", {"private": "10.10.96.0/19"}),
     "platform.network.subnetCidrs.us-west-2c", "a zone of network.availabilityZones"),
    ("private subnets too small for pods", _set("network.privateSubnetPrefixLength", 24),
     "platform.network.privateSubnetPrefixLength", "a number from 16 to 22"),
    ("unknown NAT mode", _set("network.natGateways", "none"),
     "platform.network.natGateways", "one of single, perZone"),
    ("flow log retention CloudWatch rejects", _set("network.flowLogs.retentionDays", 10),
     "platform.network.flowLogs.retentionDays", "a CloudWatch Logs retention: 1, 3, 5, 7, 14"),
    ("existing VPC missing a zone's subnet",
     _set("network.existingVpc", {"vpcId": "vpc-0123456789abcdef0",
                                  "privateSubnetIds": {"us-west-2a": "subnet-0123456789abcdef0"}}),
     "platform.network.existingVpc.privateSubnetIds",
     "exactly one subnet for each availability zone us-west-2a, us-west-2b"),
    ("existing VPC with a malformed id",
     _set("network.existingVpc", {"vpcId": "my-vpc", "privateSubnetIds": {}}),
     "platform.network.existingVpc.vpcId", "a VPC id, vpc-<hex>"),
    ("unsupported Kubernetes version", _set("cluster.kubernetesVersion", "1.29"),
     "platform.cluster.kubernetesVersion", "one of " + ", ".join(versions.SUPPORTED_KUBERNETES_VERSIONS)),
    ("public endpoint without CIDRs", _set("cluster.endpoint.publicAccessCidrs", []),
     "platform.cluster.endpoint.publicAccessCidrs", "at least one CIDR when publicAccess is true"),
    ("CIDRs for a private endpoint", _set("cluster.endpoint.publicAccess", False),
     "platform.cluster.endpoint.publicAccessCidrs", "none while publicAccess is false"),
    ("no endpoint at all",
     _both(_set("cluster.endpoint", {"privateAccess": False, "publicAccess": False})),
     "platform.cluster.endpoint.privateAccess", "true when publicAccess is false"),
    ("admin that is not an IAM ARN", _set("cluster.adminPrincipalArns", ["admin@example.com"]),
     "platform.cluster.adminPrincipalArns[0]", "an IAM role or user ARN"),
    ("no admin", _set("cluster.adminPrincipalArns", []),
     "platform.cluster.adminPrincipalArns", "at least 1 item"),
    ("duplicate admins",
     _set("cluster.adminPrincipalArns", ["arn:aws:iam::111122223333:role/A"] * 2),
     "platform.cluster.adminPrincipalArns", "each principal once"),
    ("desired size above max", _set("cluster.systemNodeGroup.desiredSize", 9),
     "platform.cluster.systemNodeGroup.desiredSize", "between minSize (2) and maxSize (3)"),
    ("misspelt system instance type", _set("cluster.systemNodeGroup.instanceTypes", ["m6i.xlarg"]),
     "platform.cluster.systemNodeGroup.instanceTypes[0]", "did you mean m6i.xlarge?"),
    ("system group in one node", _set("cluster.systemNodeGroup.minSize", 1),
     "platform.cluster.systemNodeGroup.minSize", "a number of at least 2"),
    ("mixed CPU architectures", _set("cluster.systemNodeGroup.instanceTypes", ["m7i.large", "m7g.large"]),
     "platform.cluster.systemNodeGroup.instanceTypes", "one CPU architecture"),
    ("misspelt key", _set("cluster.kubernetesVerison", "1.34"),
     "platform.cluster.kubernetesVerison", "no such key: did you mean kubernetesVersion?"),
    ("key in snake_case", _set("cluster.log_retention_days", 30),
     "platform.cluster.log_retention_days", "did you mean logRetentionDays? (stack keys are camelCase)"),
    ("key in another case", _set("network.TrainingZone", "us-west-2a"),
     "platform.network.TrainingZone", "did you mean trainingZone?"),
    ("unknown key", _set("cluster.flavour", "vanilla"),
     "platform.cluster.flavour", "one of the keys adminPrincipalArns, deployerPrincipalArn, endpoint, kubernetesVersion"),
    ("Kubernetes version YAML read as a number", _set("cluster.kubernetesVersion", 1.3),
     "platform.cluster.kubernetesVersion",
     "a quoted Kubernetes minor version, one of "
     + ", ".join(f'"{v}"' for v in versions.SUPPORTED_KUBERNETES_VERSIONS)),
    ("account id that lost its leading zero", _set("accountId", 12345678901),
     "platform.accountId", "write an id that starts with 0 as a quoted string"),
    ("number given as a boolean", _pool(maxNodes=True),
     "platform.nodePools[0].maxNodes", "a whole number"),
    ("boolean given as a number", _set("slurm.enabled", 0),
     "platform.slurm.enabled", "true or false"),
    ("boolean given as yes", _set("cluster.endpoint.publicAccess", "yes"),
     "platform.cluster.endpoint.publicAccess", "true or false"),
    ("digits where a network is expected", _set("network.vpcCidr", 10),
     "platform.network.vpcCidr", "an IPv4 network in CIDR form"),
    ("tag value too long", _set("tags.owner", "x" * 300),
     "platform.tags.owner", "text of at most 256 characters"),
    ("system nodes with min above max", _set("cluster.systemNodeGroup", {"minSize": 5, "maxSize": 4}),
     "platform.cluster.systemNodeGroup.minSize", "at most maxSize (4)"),
    ("tag value YAML read as a fraction", _set("tags.extra", {"budget": 1.5}),
     "platform.tags.extra.budget", "text (YAML reads an unquoted number as a number"),
    ("missing required tag", _delete("tags.costCenter"),
     "platform.tags.costCenter", "Cost center billed for the platform"),
    ("reserved AWS tag key", _set("tags.extra", {"aws:created-by": "me"}),
     "platform.tags.extra.aws:created-by", "a key not starting with aws:"),
    ("required tag repeated in extra", _set("tags.extra", {"owner": "someone-else"}),
     "platform.tags.extra.owner", "a key other than owner, cost-center, environment"),
    ("account id with letters", _set("accountId", "1111-2222-3333"),
     "platform.accountId", "a 12-digit AWS account id"),
    ("environment with capitals", _set("environment", "Dev"),
     "platform.environment", "lower-case letters"),
    ("region that does not exist in form", _set("region", "uswest2"),
     "platform.region", "an AWS region name such as us-west-2"),
    ("boolean given as text", _set("protectStatefulResources", "maybe"),
     "platform.protectStatefulResources", "true or false"),
    # node pools
    ("unknown instance type", _pool(instanceTypes=["p9.96xlarge"]),
     "platform.nodePools[0].instanceTypes[0]", "one of p4d.24xlarge, p4de.24xlarge, p5.48xlarge"),
    ("shortened instance type", _pool(instanceTypes=["p5.48xl"]),
     "platform.nodePools[0].instanceTypes[0]", "did you mean p5.48xlarge? one of p4d.24xlarge"),
    ("EFA pool mixing EFA layouts", _pool(instanceTypes=["p5.48xlarge", "p5en.48xlarge"]),
     "platform.nodePools[0].instanceTypes", "same EFA layout"),
    ("GPU and Trainium in one pool", _pool(instanceTypes=["g5.xlarge", "trn1.32xlarge"], efa=False),
     "platform.nodePools[0].instanceTypes", "one accelerator kind"),
    ("different accelerator counts in one pool", _pool(instanceTypes=["g5.xlarge", "g5.48xlarge"], efa=False),
     "platform.nodePools[0].instanceTypes", "same number of accelerators"),
    ("EFA pool outside the training zone", _pool(zone="us-west-2a"),
     "platform.nodePools[0].zone", "the training zone us-west-2b"),
    ("pool zone not in the cluster", _pool(instanceTypes=["g5.xlarge"], zone="us-west-2c"),
     "platform.nodePools[0].zone", "one of the availability zones us-west-2a, us-west-2b"),
    ("EFA on a type without EFA", _pool(instanceTypes=["g5.xlarge"], efa=True),
     "platform.nodePools[0].efa", "g5.xlarge has no EFA interfaces"),
    ("reserved pool without reservations", _pool(capacityType="reserved"),
     "platform.nodePools[0].capacityReservationIds", "at least one reservation id"),
    ("reservations on an on-demand pool", _pool(capacityReservationIds=["cr-0123456789abcdef0"]),
     "platform.nodePools[0].capacityType", "reserved, since the pool names capacity reservations"),
    ("malformed reservation id", _pool(capacityType="reserved", capacityReservationIds=["cr-123"]),
     "platform.nodePools[0].capacityReservationIds[0]", "a capacity reservation id"),
    ("duplicate pool names", _both(_pool(), _pool(index=1)),
     "platform.nodePools", "unique pool names"),
    ("pool named like the CPU pool", _pool(name="general"),
     "platform.nodePools", "none named 'general'"),
    ("unpinnable AMI alias", _pool(amiAlias="ubuntu@22.04"),
     "platform.nodePools[0].amiAlias", "an EKS AMI alias"),
    ("no nodes at all", _pool(maxNodes=0),
     "platform.nodePools[0].maxNodes", "a number from 1 to 2000"),
    ("taint with an unknown effect", _pool(taints=[{"key": "team", "value": "a", "effect": "NoRun"}]),
     "platform.nodePools[0].taints[0].effect", "one of NoSchedule, PreferNoSchedule, NoExecute"),
    ("label in a Karpenter-owned domain", _pool(labels={"karpenter.sh/capacity-type": "spot"}),
     "platform.nodePools[0].labels.karpenter.sh/capacity-type", "outside the domains Karpenter reserves"),
    ("label the platform sets itself", _pool(labels={"trainingplatform.io/lustre-client": "true"}),
     "platform.nodePools[0].labels.trainingplatform.io/lustre-client", "the platform's own"),
    ("pool name with capitals", _pool(name="P5"),
     "platform.nodePools[0].name", "lower-case letters"),
    # storage
    ("Lustre capacity off the steps", _lustre(storageCapacityGiB=3600),
     "platform.storage.lustre.storageCapacityGiB", "1200, 2400, or a multiple of 2400 GiB"),
    ("Lustre throughput tier that does not exist", _lustre(throughputPerTiB=200),
     "platform.storage.lustre.throughputPerTiB", "one of 125, 250, 500, 1000"),
    ("metadata IOPS off the steps", _lustre(metadataIops=5000),
     "platform.storage.lustre.metadataIops", "1500, 3000, 6000, or 12000 to 192000"),
    ("overlapping association paths", _lustre(associations=[
        {"fileSystemPath": "/data", "s3Prefix": "a/"}, {"fileSystemPath": "/data/images", "s3Prefix": "b/"}]),
     "platform.storage.lustre.associations[1].fileSystemPath", "neither contains nor is inside /data"),
    ("relative association path", _lustre(associations=[{"fileSystemPath": "checkpoints"}]),
     "platform.storage.lustre.associations[0].fileSystemPath", "an absolute path"),
    ("overlapping S3 prefixes", _lustre(associations=[
        {"fileSystemPath": "/a", "s3Prefix": "data/"}, {"fileSystemPath": "/b", "s3Prefix": "data/raw/"}]),
     "platform.storage.lustre.associations[1].s3Prefix", "neither contains nor is inside 'data/'"),
    ("nine associations", _lustre(associations=[{"fileSystemPath": f"/d{i}", "s3Prefix": f"d{i}/"} for i in range(9)]),
     "platform.storage.lustre.associations", "at most 8 associations"),
    ("file system outside the training zone", _lustre(zone="us-west-2a"),
     "platform.storage.lustre.zone", "the training zone us-west-2b"),
    ("file system linked to an unknown bucket", _lustre(bucket="nosuch"),
     "platform.storage.lustre.bucket", "the key of a bucket in storage.buckets: data"),
    ("unknown data repository event", _lustre(associations=[{"fileSystemPath": "/c", "exportEvents": ["CREATED"]}]),
     "platform.storage.lustre.associations[0].exportEvents[0]", "one of NEW, CHANGED, DELETED"),
    ("backups kept too long", _lustre(automaticBackupRetentionDays=120),
     "platform.storage.lustre.automaticBackupRetentionDays", "a number from 0 to 90"),
    ("backup window not a time", _lustre(dailyBackupStartTime="3am"),
     "platform.storage.lustre.dailyBackupStartTime", "HH:MM (UTC)"),
    ("duplicate bucket keys", _set("storage.buckets", [{"name": "data"}, {"name": "data"}]),
     "platform.storage.buckets", "unique bucket keys"),
    ("bucket name S3 refuses", _set("storage.buckets", [{"name": "data", "bucketName": "My_Bucket"}]),
     "platform.storage.buckets[0].bucketName", "an S3 bucket name"),
    ("model store without a writers' gid", _delete("modelStore.writersGid"),
     "platform.modelStore.writersGid", "the platform writers' gid"),
    ("model store writers' gid a team's", _set("modelStore.writersGid", 5003),
     "platform.modelStore.writersGid", "a gid no team has (team ml-dev has it)"),
    ("model store team without a gid", _first_team(gid=None),
     "platform.teams[0].gid", "its model store directory belongs to it"),
    ("model store team named like the shared area", _both(_first_team(name="shared"), _set("modelStore.publishers", [])),
     "platform.teams[0].name", "a name other than 'shared'"),
    ("model store uid of nobody", _set("modelStore.uid", 65534),
     "platform.modelStore.uid", "nobody, the readers' user"),
    ("model store uid of root", _set("modelStore.uid", 0),
     "platform.modelStore.uid", "root (EFS would not squash it)"),
    ("model store team named like the readers' access point",
     _both(_first_team(name="shared-readers"), _set("modelStore.publishers", [])),
     "platform.teams[0].name", "or 'shared-readers'"),
    ("model store publisher not a team", _set("modelStore.publishers", ["nobody"]),
     "platform.modelStore.publishers[0]", "a team of platform.teams (ml-dev)"),
    ("model store throughput mode EFS lacks", _set("modelStore.throughputMode", "burst"),
     "platform.modelStore.throughputMode", "one of elastic, bursting, provisioned"),
    ("provisioned model store without a throughput", _set("modelStore.throughputMode", "provisioned"),
     "platform.modelStore.provisionedThroughputMiBps", "provisioned requires it"),
    ("model store throughput without provisioned mode", _set("modelStore.provisionedThroughputMiBps", 100.0),
     "platform.modelStore.provisionedThroughputMiBps", "only provisioned takes it"),
    ("model store transition EFS lacks", _set("modelStore.infrequentAccessAfterDays", 45),
     "platform.modelStore.infrequentAccessAfterDays", "180, 270, 365"),
    ("model store archive before infrequent access", _set("modelStore.archiveAfterDays", 14),
     "platform.modelStore.archiveAfterDays", "more days than infrequentAccessAfterDays (30)"),
    ("model store archive without elastic throughput",
     _both(_set("modelStore.throughputMode", "bursting"), _set("modelStore.archiveAfterDays", 90)),
     "platform.modelStore.archiveAfterDays", "unless throughputMode is elastic"),
    ("unknown model store key", _set("modelStore.lifecycle", "AFTER_30_DAYS"),
     "platform.modelStore.lifecycle", "one of the keys archiveAfterDays"),
    ("dcgm level dcgmi lacks", _set("acceptance.dcgmDiagLevel", 5),
     "platform.acceptance.dcgmDiagLevel", "one of 0, 1, 2, 3, 4"),
    ("acceptance deadline shorter than the checks", _set("acceptance.deadlineMinutes", 2),
     "platform.acceptance.deadlineMinutes", "a number from 10 to 480"),
    ("baseline of a type the pool lacks", _pool(acceptance={"baselines": [
        {"instanceType": "trn2.48xlarge", "check": "nccom-all-reduce", "nodes": 1,
         "floorGbps": 10, "of": "x", "source": "y"}]}),
     "platform.nodePools[0].acceptance.baselines[0].instanceType",
     "one of the pool's instance types: trn1.32xlarge"),
    ("two baselines for one type, check and size", _pool(acceptance={"baselines": [
        {"instanceType": "trn1.32xlarge", "check": "nccom-all-reduce", "nodes": 2,
         "floorGbps": f, "of": "x", "source": "y"} for f in (10, 12)]}),
     "platform.nodePools[0].acceptance.baselines[1]", "one baseline per instance type"),
]  # fmt: skip


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_file_loads(stack: str) -> None:
    config = parse_platform_config(load_stack(stack).platform)
    assert config.environment == stack
    assert config.network.training_zone in config.network.availability_zones


@pytest.mark.parametrize(
    ("mutation", "path", "allowed"),
    [pytest.param(m, p, a, id=i) for i, m, p, a in INVALID],
)
def test_invalid_configuration_names_key_value_and_allowed(
    mutation: Mutation, path: str, allowed: str
) -> None:
    data = stack_data("dev")
    mutation(data)
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data)
    lines = [str(problem) for problem in caught.value.problems]
    matching = [line for line in lines if line.startswith(f"{path}: ")]
    assert matching, f"no problem at {path}: {lines}"
    assert any(allowed in line for line in matching), matching
    assert all("\n" not in line for line in lines)
    assert all(("got " in line or "missing" in line) and "allowed: " in line for line in lines)


def test_invalid_cases_are_distinct() -> None:
    assert len({path + allowed for _, _, path, allowed in INVALID}) == len(INVALID) >= 15


def test_every_problem_is_reported_at_once() -> None:
    data = stack_data("dev")
    data["network"]["trainingZone"] = "us-west-2c"
    data["cluster"]["kubernetesVersion"] = "1.20"
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data)
    paths = {problem.path for problem in caught.value.problems}
    assert {"platform.network.trainingZone", "platform.cluster.kubernetesVersion"} <= paths


def test_missing_platform_key_is_reported() -> None:
    with pytest.raises(ConfigError, match=r"^platform: missing"):
        parse_platform_config(None)


def test_defaults_fill_optional_sections() -> None:
    data = stack_data("dev")
    for key in ("protectStatefulResources", "tags"):
        data.pop(key, None)
    data["tags"] = {"owner": "a", "costCenter": "b"}
    data["network"] = {
        "availabilityZones": ["us-west-2a", "us-west-2b"],
        "trainingZone": "us-west-2a",
    }
    for pool in data["nodePools"]:
        if "zone" in pool:
            pool["zone"] = "us-west-2a"  # beside the file system, which follows trainingZone
    data["cluster"] = {
        "deployerPrincipalArn": "arn:aws:iam::111122223333:role/D",
        "adminPrincipalArns": ["arn:aws:iam::111122223333:role/A"],
        # the default endpoint is private only, which needs a declared way in
        "endpoint": {"deployFrom": {"cidrs": ["10.0.0.0/16"]}},
    }
    config = parse_platform_config(data)
    assert config.protect_stateful_resources is False
    assert config.network.nat_gateways == "perZone"
    assert config.network.private_subnet_prefix_length == 19
    assert config.cluster.kubernetes_version == versions.DEFAULT_KUBERNETES_VERSION
    assert config.cluster.endpoint.public_access is False
    assert config.cluster.endpoint.private_access is True
    assert config.name == "training-dev"
    assert config.required_tags == {"owner": "a", "cost-center": "b", "environment": "dev"}
    # GangPending's default waits out every family's default cold start: a gang on a cold
    # pool waits unscheduled while its nodes launch and pass the acceptance gate.
    assert config.observability.gang_pending_alert_minutes >= max(
        catalog.COLD_START_BUDGET_MINUTES.values()
    )


def test_program_with_invalid_config_registers_nothing() -> None:
    base = load_stack("dev")
    data = stack_data("dev")
    data["network"]["trainingZone"] = "us-west-2z"
    config = dict(base.config)
    config[f"{base.project}:platform"] = data
    failures = failures_of_the_program(StackFile(base.project, "dev", config, []))
    assert 'platform.network.trainingZone: got "us-west-2z"' in failures[0]
    assert "Traceback" not in failures[0]


def _project_with(tmp_path: Path, stack: str, platform: Any) -> Path:
    shutil.copy(REPOSITORY_ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "stacks").mkdir()
    document = {"config": {"eks-training-platform:platform": platform}}
    (tmp_path / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    return tmp_path


def test_cli_rejects_bad_stack_with_one_line_per_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = stack_data("dev")
    data["network"]["trainingZone"] = "us-west-2z"
    data["cluster"]["kubernetesVersion"] = "1.20"
    data["environment"] = "broken"
    project = _project_with(tmp_path, "broken", data)
    out = tmp_path / "out"
    assert synth_main(["broken", "--project-dir", str(project), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines == [
        'broken: platform.network.trainingZone: got "us-west-2z"; allowed: one of the '
        "availability zones us-west-2a, us-west-2b",
        'broken: platform.cluster.kubernetesVersion: got "1.20"; allowed: one of '
        + ", ".join(versions.SUPPORTED_KUBERNETES_VERSIONS),
    ]
    assert "Traceback" not in err
    assert not (out / "broken").exists()


def test_cli_reports_unreadable_stack_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project_with(tmp_path, "broken", {})
    (project / "stacks" / "Pulumi.broken.yaml").write_text("config: [unclosed\n")
    out = str(tmp_path / "out")
    assert synth_main(["broken", "--project-dir", str(project), "--out", out]) == 2
    err = capsys.readouterr().err
    assert "not valid YAML" in err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- config as the CLI writes it

LIBRARY_WORDING = (
    "Input should",
    "should have",
    "after validation",
    "Value error",
    "valid integer",
    "valid string",
    "valid boolean",
    "Field required",
    "Extra inputs",
)
"""pydantic's own English, which must never reach a user."""


def test_no_problem_speaks_the_validation_library() -> None:
    for _, mutation, _, _ in INVALID:
        data = stack_data("dev")
        mutation(data)
        with pytest.raises(ConfigError) as caught:
            parse_platform_config(data)
        for line in map(str, caught.value.problems):
            assert not any(words in line for words in LIBRARY_WORDING), line


def _as_the_cli_writes(value: Any) -> Any:
    """``value`` as ``pulumi config set --path`` would store it, scalar by scalar.

    pulumi/pulumi sdk/go/common/resource/config, adjustObjectValue: "true"/"false" become
    booleans, digits that do not start with 0 an integer; everything else stays a string.
    """
    if isinstance(value, dict):
        return {key: _as_the_cli_writes(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_the_cli_writes(item) for item in value]
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    if isinstance(value, str) and value.isdigit() and not (len(value) > 1 and value[0] == "0"):
        return int(value)
    return value


@pytest.mark.parametrize("stack", STACKS)
def test_config_the_pulumi_cli_writes_means_the_same(stack: str) -> None:
    data = stack_data(stack)
    written = _as_the_cli_writes(data)
    assert written["accountId"] != data["accountId"]  # the CLI makes the account id a number
    assert parse_platform_config(written) == parse_platform_config(data)


def test_account_id_keeps_leading_zeros_given_as_text() -> None:
    data = stack_data("dev")
    data["accountId"] = "012345678901"
    assert parse_platform_config(data).account_id == "012345678901"
    data["accountId"] = 111122223333
    assert parse_platform_config(data).account_id == "111122223333"
    data["accountId"] = True
    with pytest.raises(ConfigError, match=r"^platform.accountId: got true; allowed: text"):
        parse_platform_config(data)


def test_numeric_tags_become_text() -> None:
    data = stack_data("dev")
    data["tags"]["costCenter"] = 4711
    data["tags"]["extra"] = {"project": 42}
    config = parse_platform_config(data)
    assert config.required_tags["cost-center"] == "4711"
    assert config.tags.extra == {"project": "42"}


def test_misspelt_required_key_is_one_problem_not_two() -> None:
    data = stack_data("dev")
    data["network"]["training_zone"] = data["network"].pop("trainingZone")
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data)
    assert [str(p) for p in caught.value.problems] == [
        'platform.network.training_zone: got "us-west-2b"; allowed: no such key: did you mean '
        "trainingZone? (stack keys are camelCase)"
    ]


def test_unknown_instance_type_is_not_also_every_queue_too_large() -> None:
    data = stack_data("staging")
    shares = [t["queue"].get("deserved", {}) for t in data["teams"]]
    assert any(share.get("gpus") for share in shares), "staging's teams must ask for GPUs"
    gpu_pools = [p for p in data["nodePools"] if p["instanceTypes"][0].startswith("p")]
    for pool in gpu_pools:
        pool["instanceTypes"] = ["p9.96xlarge"]
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data)
    paths = [problem.path for problem in caught.value.problems]
    assert paths == [
        f"platform.nodePools[{data['nodePools'].index(p)}].instanceTypes[0]" for p in gpu_pools
    ]


def test_environment_must_be_the_stack_name() -> None:
    data = stack_data("dev")
    assert parse_platform_config(data, stack="dev").environment == "dev"
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data, stack="sandbox")
    (problem,) = caught.value.problems
    assert problem.path == "platform.environment"
    assert problem.value == "dev"
    assert "the stack's name, sandbox" in problem.allowed


def test_aws_region_must_agree_with_platform_region() -> None:
    data = stack_data("dev")
    assert parse_platform_config(data, aws_region=data["region"]).region == data["region"]
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data, aws_region="eu-west-1")
    (problem,) = caught.value.problems
    assert (problem.path, problem.value) == ("aws:region", "eu-west-1")
    assert data["region"] in problem.allowed


def test_program_refuses_an_environment_copied_from_another_stack() -> None:
    base = load_stack("dev")
    config = dict(base.config)
    config["aws:region"] = "eu-west-1"
    failures = failures_of_the_program(StackFile(base.project, "sandbox", config, []))
    assert 'platform.environment: got "dev"; allowed: the stack\'s name, sandbox' in failures[0]
    assert 'aws:region: got "eu-west-1"' in failures[0]


def test_an_unknown_region_is_not_also_every_zone_of_it() -> None:
    data = stack_data("dev")
    data["region"] = "us-west-9"
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data)
    assert [problem.path for problem in caught.value.problems] == ["platform.region"]


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("p5.48xl", "did you mean p5.48xlarge? "),
        ("trn2.48xlage", "did you mean trn2.48xlarge? "),
        ("P5.48XLARGE", "did you mean p5.48xlarge? "),
        ("p9.96xlarge", ""),  # a type that does not exist, not a misspelling of one
        ("p5.48xlarge", ""),  # exists: nothing to hint
    ],
)
def test_did_you_mean_hints_only_likely_misspellings(given: str, hint: str) -> None:
    assert did_you_mean(given, catalog.CATALOG) == hint
