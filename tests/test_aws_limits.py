"""Values AWS refuses are config errors with the key path, not failures at `pulumi up`.

Where botocore's service models state a limit, the test reads it from there, so a config rule
that drifts from the API fails here; the other rules cite the AWS guide they come from.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from botocore.loaders import Loader

from components import config
from tests.config_problems import assert_reported
from tests.conftest import stack_data
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
    "cidrs", [["10.10.0.0/16"], ["100.64.0.0/16", "192.168.0.0/24"]], ids=["vpc", "vpn-ranges"]
)
def test_slurm_login_from_private_ranges_is_accepted(cidrs: list[str]) -> None:
    data = stack_data("dev")
    data["slurm"]["login"]["allowedCidrs"] = cidrs
    assert config.parse_platform_config(data).slurm.login is not None
