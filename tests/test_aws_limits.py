"""Values AWS refuses are config errors with the key path, not failures at `pulumi up`.

Where botocore's service models state a limit, the test reads it from there, so a config rule
that drifts from the API fails here; the other rules cite the AWS guide they come from.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest
from botocore.loaders import Loader

from components import config
from synth.engine import ResourceRecord
from tests.config_problems import assert_reported
from tests.conftest import STACKS, ProgramRun, stack_data
from tests.mutations import Mutation, set_at

SHAPES: dict[str, dict[str, Any]] = {}


def shape(service: str, name: str) -> dict[str, Any]:
    """A shape of a botocore service model."""
    if service not in SHAPES:
        SHAPES[service] = Loader().load_service_model(service, "service-2")["shapes"]
    found: dict[str, Any] = SHAPES[service][name]
    return found


def _botocore_pattern(pattern: str) -> re.Pattern[str]:
    """A botocore (Java) pattern in Python's re: \\p{L}, \\p{N} as \\w's letters and digits,
    \\p{Z} as a space."""
    return re.compile(
        pattern.replace("\\p{L}", "a-zA-Z\u00c0-\u024f")
        .replace("\\p{Z}", " ")
        .replace("\\p{N}", "0-9")
    )


# --------------------------------------------------------------------------- the models agree


def test_tag_limits_are_iams() -> None:
    key, value, tags = (
        shape("iam", "tagKeyType"),
        shape("iam", "tagValueType"),
        shape("iam", "tagListType"),
    )
    assert (key["max"], value["max"]) == (128, 256)
    assert config.MAX_EXTRA_TAGS < tags["max"] == 50
    allowed = _botocore_pattern(value["pattern"])
    for sample in ("ml-platform", "cc ml 1000", "a.b:c/d=e+f-g@h", "Åsa_1"):
        assert allowed.fullmatch(sample) and config.TAG_CHARACTERS.fullmatch(sample), sample
    for sample in ("R&D", "a,b", "x!", "(team)", "#1"):
        assert not allowed.fullmatch(sample) and not config.TAG_CHARACTERS.fullmatch(sample)


def test_lustre_log_levels_are_fsxs() -> None:
    levels = set(config.LustreConfig.model_fields["log_level"].annotation.__args__)  # type: ignore[union-attr]
    assert levels == set(shape("fsx", "LustreAccessAuditLogLevel")["enum"])


def test_role_names_are_iams() -> None:
    assert shape("iam", "roleNameType")["max"] == 64
    arn = "arn:aws:iam::111122223333:role/"
    good = stack_data("dev")
    good["cluster"]["adminPrincipalArns"] = [arn + "a" * 64]
    assert config.parse_platform_config(good)


def test_cluster_names_fit_eks_and_the_node_group_prefix() -> None:
    eks = shape("eks", "ClusterName")
    assert re.fullmatch(eks["pattern"].lstrip("^"), "a" * 29)
    # terraform-provider-aws caps node_group_name_prefix at 63 - 26 = 37: "<29>-system-" is 37.
    assert len("a" * 29 + "-system-") == 37


# --------------------------------------------------------------------------- refused in config


def _at(path: str, value: Any) -> Mutation:
    return set_at(path, value)


def _extra_tags(count: int) -> Mutation:
    return _at("tags.extra", {f"key{i}": "v" for i in range(count)})


def _bucket(name: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        data["storage"]["buckets"][0]["bucketName"] = name

    return mutate


CASES: list[tuple[str, Mutation, str, Any, str]] = [
    ("cluster name too long for the node group prefix", _at("clusterName", "a" * 30),
     "platform.clusterName", "a" * 30, "at most 29 characters"),
    ("VPC larger than /16", _at("network.vpcCidr", "10.0.0.0/8"),
     "platform.network.vpcCidr", "10.0.0.0/8", "/16 to /28"),
    ("tag value with &", _at("tags.owner", "R&D team"),
     "platform.tags.owner", "R&D team", "what AWS tags accept"),
    ("too many extra tags", _extra_tags(41), "platform.tags.extra", None, "at most 40"),
    ("tag key Karpenter owns", _at("tags.extra", {"karpenter.sh/nodepool": "x"}),
     "platform.tags.extra.karpenter.sh/nodepool", "karpenter.sh/nodepool", "Karpenter sets"),
    ("cluster tag key", _at("tags.extra", {"kubernetes.io/cluster/x": "owned"}),
     "platform.tags.extra.kubernetes.io/cluster/x", "kubernetes.io/cluster/x", "Karpenter sets"),
    ("21 system instance types",
     _at("cluster.systemNodeGroup.instanceTypes", [f"m7i.{i}xlarge" for i in range(2, 23)]),
     "platform.cluster.systemNodeGroup.instanceTypes", None, "at most 20"),
    ("empty file system", _at("storage.lustre.storageCapacityGiB", 0),
     "platform.storage.lustre.storageCapacityGiB", 0, "1200"),
    ("role name over 64", _at("cluster.adminPrincipalArns",
                              ["arn:aws:iam::111122223333:role/" + "a" * 65]),
     "platform.cluster.adminPrincipalArns[0]", "arn:aws:iam::111122223333:role/" + "a" * 65,
     "at most 64"),
    ("non-ASCII role name", _at("cluster.adminPrincipalArns",
                                ["arn:aws:iam::111122223333:role/Ä"]),
     "platform.cluster.adminPrincipalArns[0]", "arn:aws:iam::111122223333:role/Ä", "role or user ARN"),
    ("Lustre log level of Windows", _at("storage.lustre.logLevel", "FAILURE_ONLY"),
     "platform.storage.lustre.logLevel", "FAILURE_ONLY", "WARN_ERROR"),
    ("bucket with two periods", _bucket("data..bucket"),
     "platform.storage.buckets[0].bucketName", "data..bucket", "adjacent periods"),
    ("bucket shaped like an IP", _bucket("192.168.5.4"),
     "platform.storage.buckets[0].bucketName", "192.168.5.4", "IP address"),
    ("bucket with a reserved prefix", _bucket("xn--data"),
     "platform.storage.buckets[0].bucketName", "xn--data", "reserved prefixes"),
    ("bucket with a reserved suffix", _bucket("data-s3alias"),
     "platform.storage.buckets[0].bucketName", "data-s3alias", "reserved suffixes"),
    ("Slurm login from the world", _at("slurm.login.allowedCidrs", ["0.0.0.0/0"]),
     "platform.slurm.login.allowedCidrs[0]", "0.0.0.0/0", "never the internet"),
    ("Slurm login from a public range", _at("slurm.login.allowedCidrs", ["8.8.8.0/24"]),
     "platform.slurm.login.allowedCidrs[0]", "8.8.8.0/24", "a private network"),
    # dev's VPC is 10.10.0.0/16, and its pods take addresses from it
    ("Slurm login from the VPC", _at("slurm.login.allowedCidrs", ["10.10.0.0/16"]),
     "platform.slurm.login.allowedCidrs[0]", "10.10.0.0/16", "outside the VPC's 10.10.0.0/16"),
    ("Slurm login from part of the VPC",
     _at("slurm.login.allowedCidrs", ["192.168.0.0/24", "10.10.4.0/24"]),
     "platform.slurm.login.allowedCidrs[1]", "10.10.4.0/24", "lets team pods reach"),
    ("Slurm login from a range holding the VPC", _at("slurm.login.allowedCidrs", ["10.0.0.0/8"]),
     "platform.slurm.login.allowedCidrs[0]", "10.0.0.0/8", "outside the VPC's"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("mutation", "path", "value", "allowed"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_aws_refusals_are_config_errors(
    mutation: Callable[[dict[str, Any]], None], path: str, value: Any, allowed: str
) -> None:
    data = stack_data("dev")
    mutation(data)
    if value is None:
        value = data
        for part in path.removeprefix("platform.").split("."):
            value = value[part]
    assert_reported(data, path, value, allowed)


@pytest.mark.parametrize(
    "cidrs", [["10.200.0.0/16"], ["100.64.0.0/16", "192.168.0.0/24"]], ids=["vpn", "vpn-ranges"]
)
def test_slurm_login_from_private_ranges_is_accepted(cidrs: list[str]) -> None:
    data = stack_data("dev")
    data["slurm"]["login"]["allowedCidrs"] = cidrs
    assert config.parse_platform_config(data).slurm.login is not None


# --------------------------------------------------------------------------- derived names fit

AUTONAME_SUFFIX = 8
"""pulumi-aws auto-names a resource ``<logical name>-<7 random characters>``."""
NAME_PREFIX_SUFFIX = 26
"""terraform-provider-aws appends a 26-character unique id to a ``name_prefix``
(internal/create naming.go, id.UniqueIDSuffixLength), hence the node group prefix's 63 - 26."""

# type -> (limit on the physical name, where the limit comes from)
NAME_LIMITS: dict[str, tuple[int, str]] = {
    "aws:iam/role:Role": (shape("iam", "roleNameType")["max"], "iam roleNameType"),
    "aws:iam/rolePolicy:RolePolicy": (shape("iam", "policyNameType")["max"], "iam policyNameType"),
    "aws:iam/policy:Policy": (shape("iam", "policyNameType")["max"], "iam policyNameType"),
    "aws:kms/alias:Alias": (shape("kms", "AliasNameType")["max"], "kms AliasNameType"),
    "aws:cloudwatch/logGroup:LogGroup": (shape("logs", "LogGroupName")["max"], "logs LogGroupName"),
    "aws:cloudwatch/eventRule:EventRule": (shape("events", "RuleName")["max"], "events RuleName"),
    "aws:ec2/launchTemplate:LaunchTemplate": (
        shape("ec2", "LaunchTemplateName")["max"], "ec2 LaunchTemplateName"),
    "aws:eks/nodeGroup:NodeGroup": (63, "EKS node group names; prefix 63 - 26"),
    "aws:sqs/queue:Queue": (80, "SQS developer guide: queue names up to 80 characters"),
    "aws:ec2/placementGroup:PlacementGroup": (255, "EC2 user guide: placement group names"),
    "aws:s3/bucket:Bucket": (63, "S3 general purpose bucket naming rules"),
    "kubernetes:core/v1:Namespace": (63, "a DNS label"),
    "kubernetes:karpenter.sh/v1:NodePool": (63, "its name is the karpenter.sh/nodepool label"),
    "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass": (
        63, "its name is the karpenter.k8s.aws/ec2nodeclass label"),
    "kubernetes:helm.sh/v3:Release": (53, "Helm's release name limit"),
}  # fmt: skip


def _physical_name(record: ResourceRecord) -> str:
    """The name AWS or the cluster will see: the explicit name input, or pulumi's auto-name."""
    inputs = record.inputs if isinstance(record.inputs, dict) else {}
    metadata = inputs.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
        return str(metadata["name"])
    for key in ("name", "bucket"):
        if isinstance(inputs.get(key), str):
            return str(inputs[key])
    for key in ("namePrefix", "nodeGroupNamePrefix"):
        if isinstance(inputs.get(key), str):
            return str(inputs[key]) + "x" * NAME_PREFIX_SUFFIX
    return record.name + "x" * AUTONAME_SUFFIX


def _efs_refusals(records: list[ResourceRecord]) -> list[str]:
    """What the EFS API would refuse in the model store: a creation token, an access point's
    root path, or a tag of any EFS resource past its shape in the EFS service model."""
    token, path = shape("efs", "CreationToken"), shape("efs", "Path")
    key, value = shape("efs", "TagKey"), shape("efs", "TagValue")
    path_pattern = re.compile(path["pattern"])
    refused: list[str] = []
    for record in records:
        if not record.type.startswith("aws:efs/"):
            continue
        inputs = record.inputs
        if "creationToken" in inputs and len(inputs["creationToken"]) > token["max"]:
            refused.append(f"{record.name}: creationToken over {token['max']}")
        root = inputs.get("rootDirectory", {}).get("path")
        if root is not None and not (len(root) <= path["max"] and path_pattern.fullmatch(root)):
            refused.append(f"{record.name}: root directory {root!r} (EFS Path)")
        for tag, text in (inputs.get("tags") or {}).items():
            if len(tag) > key["max"] or len(text) > value["max"]:
                refused.append(
                    f"{record.name}: tag {tag}={text!r} over {key['max']}/{value['max']}"
                )
    return refused


def _renamed(names: list[str], length: int | None, filler: str) -> list[str]:
    """Each name stretched or cut to ``length`` (None: as it is), kept distinct by a last digit."""
    if length is None:
        return names
    return [(name + filler * length)[: length - 1] + str(i) for i, name in enumerate(names)]


def _with_long_names(
    data: dict[str, Any], cluster: int | None, pool: int | None, team: int | None
) -> dict[str, Any]:
    """The stack with its cluster, pool and team names of the given lengths."""
    stretched = copy.deepcopy(data)
    if cluster is not None:
        stretched["clusterName"] = "c" * cluster
    pools = stretched.get("nodePools", [])
    renamed = dict(
        zip(
            [p["name"] for p in pools], _renamed([p["name"] for p in pools], pool, "p"), strict=True
        )
    )
    for item in pools:
        item["name"] = renamed[item["name"]]
    for node_set in stretched.get("slurm", {}).get("nodeSets", []):
        node_set["pool"] = renamed.get(node_set["pool"], node_set["pool"])
    for team_data in stretched.get("teams", []):
        for ray_cluster in (team_data.get("ray") or {}).get("clusters", []):
            ray_cluster["pool"] = renamed.get(ray_cluster["pool"], ray_cluster["pool"])
    teams = stretched.get("teams", [])
    team_names = dict(
        zip(
            [t["name"] for t in teams], _renamed([t["name"] for t in teams], team, "t"), strict=True
        )
    )
    for item in teams:
        item["name"] = team_names[item["name"]]
    store = stretched.get("modelStore")
    if store and "publishers" in store:
        store["publishers"] = [team_names.get(p, p) for p in store["publishers"]]
    return stretched


def _longest(accepted: Callable[[int], bool]) -> int:
    """The largest length config accepts (lengths from 2 up)."""
    length = 2
    while length < 300 and accepted(length + 1):
        length += 1
    return length


def _accepted(data: dict[str, Any]) -> bool:
    try:
        config.parse_platform_config(data)
    except config.ConfigError:
        return False
    return True


@pytest.mark.parametrize("stack", STACKS)
def test_every_name_of_the_longest_accepted_config_fits_aws(
    stack: str, run_platform: Callable[..., ProgramRun]
) -> None:
    data = stack_data(stack)
    cluster = _longest(lambda n: _accepted(_with_long_names(data, n, None, None)))
    pool = _longest(lambda n: _accepted(_with_long_names(data, cluster, n, None)))
    team = _longest(lambda n: _accepted(_with_long_names(data, cluster, pool, n)))
    assert cluster >= 20 and pool >= 20 and team >= 20, (cluster, pool, team)
    records = run_platform(_with_long_names(data, cluster, pool, team), stack).records
    too_long = [
        f"{record.type} {name!r}: {len(name)} > {limit} ({why})"
        for record in records
        if record.type in NAME_LIMITS
        for (limit, why), name in [(NAME_LIMITS[record.type], _physical_name(record))]
        if len(name) > limit
    ]
    assert not too_long, ((cluster, pool, team), too_long)
    assert not _efs_refusals(records), ((cluster, pool, team), _efs_refusals(records))
    assert {record.type for record in records} >= {
        "aws:iam/role:Role", "aws:eks/nodeGroup:NodeGroup", "kubernetes:karpenter.sh/v1:NodePool",
        "aws:efs/fileSystem:FileSystem", "aws:efs/accessPoint:AccessPoint",
    }  # fmt: skip
