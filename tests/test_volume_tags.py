"""Every EBS volume the CSI driver creates carries the stack's tags; FSx provisions nothing.

The driver, not Pulumi, creates these volumes, so the AWS provider's default tags never reach
them: each StorageClass must name the tags itself. How the driver reads them is
kubernetes-sigs/aws-ebs-csi-driver v1.54.0 (the EKS add-on's version in components/versions.py):
pkg/driver/controller.go CreateVolume takes every parameter whose key starts with
``tagSpecification``; pkg/util/template/template.go Evaluate splits each value at its first
``=`` and renders the value as a Go template; pkg/driver/validation.go validateExtraTags refuses
reserved keys. :func:`driver_tags` below reads parameters that way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import pytest

from components import versions
from components.cluster import ebs_tag_parameters
from components.config.tags import EBS_CSI_RESERVED_TAG_KEYS
from synth.run import StackResult
from tests.config_problems import assert_reported
from tests.conftest import ProgramRun, stack_data

STORAGE_CLASS: Final = "kubernetes:storage.k8s.io/v1:StorageClass"
PERSISTENT_VOLUME: Final = "kubernetes:core/v1:PersistentVolume"
EBS_DRIVER: Final = "ebs.csi.aws.com"
FSX_DRIVER: Final = "fsx.csi.aws.com"
DRIVER_TAG_PREFIX: Final = "tagSpecification"


def driver_tags(parameters: Mapping[str, str]) -> dict[str, str]:
    """The tags the EBS CSI driver writes for these StorageClass parameters.

    Key prefix test and the split at the first ``=`` as the driver does them; a value with a
    template action (``{{``) would be rendered, not copied, so none may have one.
    """
    tags = {}
    for key, text in parameters.items():
        if not key.startswith(DRIVER_TAG_PREFIX):
            continue
        tag_key, separator, value = text.partition("=")
        assert separator, f"{key}: {text!r} has no '=' (the driver refuses it)"
        assert "{{" not in value, f"{key}: {text!r} would be rendered as a template"
        assert tag_key not in tags, f"{tag_key} given twice"
        tags[tag_key] = value
    return tags


def _default_tags(records: list[Any]) -> dict[str, str]:
    provider = ProgramRun(records).one("pulumi:providers:aws")
    tags: dict[str, str] = json.loads(provider.inputs["defaultTags"])["tags"]
    return tags


def test_the_add_on_pin_is_the_driver_version_read() -> None:
    """The rules above were read at v1.54.0; a bump must recheck them."""
    pins = {addons.aws_ebs_csi_driver for addons in versions.EKS_ADDONS.values()}
    assert {versions.addon_semver(pin) for pin in pins} == {(1, 54, 0)}


def test_every_storage_class_tags_its_volumes_like_every_other_resource(
    stack_result: StackResult,
) -> None:
    """Each class gives its volumes exactly the AWS provider's default tags."""
    expected = _default_tags(stack_result.records)
    assert {"owner", "cost-center", "environment", "managed-by"} <= set(expected)
    classes = ProgramRun(stack_result.records).of_type(STORAGE_CLASS)
    assert classes, "every stack has at least the default class"
    for storage_class in classes:
        name = storage_class.inputs["metadata"]["name"]
        assert storage_class.inputs["provisioner"] == EBS_DRIVER, name
        assert driver_tags(storage_class.inputs["parameters"]) == expected, name


def test_fsx_provisions_nothing_dynamically(stack_result: StackResult) -> None:
    """FSx volumes are static PersistentVolumes of the one file system, tagged by Pulumi."""
    run = ProgramRun(stack_result.records)
    assert not [c for c in run.of_type(STORAGE_CLASS) if c.inputs["provisioner"] == FSX_DRIVER]
    volumes = [v for v in run.of_type(PERSISTENT_VOLUME) if v.inputs["spec"].get("csi")]
    for volume in volumes:
        spec = volume.inputs["spec"]
        if spec["csi"]["driver"] == FSX_DRIVER:
            assert spec["storageClassName"] == "", volume.name


def test_tag_parameters_are_numbered_in_key_order() -> None:
    tags = {"owner": "a", "cost-center": "b", "environment": "c"}
    parameters = ebs_tag_parameters(tags)
    assert list(parameters) == [f"{DRIVER_TAG_PREFIX}_{n}" for n in (1, 2, 3)]
    assert parameters[f"{DRIVER_TAG_PREFIX}_1"] == "cost-center=b"
    assert ebs_tag_parameters(dict(reversed(tags.items()))) == parameters
    assert driver_tags(parameters) == tags


def test_values_with_spaces_equals_and_colons_arrive_unchanged(
    run_platform: Callable[..., ProgramRun],
) -> None:
    data = stack_data("dev")
    data["tags"]["owner"] = "ML Platform: training=on-call"
    data["tags"]["extra"] = {
        "team name": "a=b=c",
        "path/to:thing": " spaced  out ",
        "contact@": "x+y@example.com",
        "empty-ish": "=",
    }
    run = run_platform(data, "dev")
    expected = _default_tags(run.records)
    assert expected["owner"] == "ML Platform: training=on-call"
    assert expected["team name"] == "a=b=c"
    for storage_class in run.of_type(STORAGE_CLASS):
        assert driver_tags(storage_class.inputs["parameters"]) == expected


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("team=ml", "a key without ="),
        ("kubernetes.io/role", "EBS CSI driver reserves"),
        ("kubernetes.io-custom", "EBS CSI driver reserves"),
        *((key, "EBS CSI driver reserves") for key in EBS_CSI_RESERVED_TAG_KEYS),
    ],
)
def test_keys_the_driver_cannot_carry_are_config_errors(key: str, allowed: str) -> None:
    data = stack_data("dev")
    data["tags"]["extra"] = {key: "x"}
    assert_reported(data, f"platform.tags.extra.{key}", key, allowed)
