"""Offline synthesis of every stack: the files reviewers read and CI checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from synth.engine import SECRET_MARK, plain_value
from synth.output import is_kubernetes_object, manifest_file_name
from synth.run import StackResult, synthesize_stack
from synth.stackfile import SECURE_PLACEHOLDER, stack_from_document
from tests.conftest import STACKS, synth_cli
from tests.schemas import UnknownKind, validation_errors

RECORD_KEYS = {"type", "name", "urn", "parent", "provider", "dependencies", "protect", "inputs"}


def test_resources_json_describes_every_registration(stack_result: StackResult) -> None:
    document = json.loads((stack_result.written.directory / "resources.json").read_text())
    assert len(document) == len(stack_result.records) > 40
    urns = {entry["urn"] for entry in document}
    assert len(urns) == len(document), "URNs are unique"
    for entry in document:
        assert set(entry) >= RECORD_KEYS
        assert isinstance(entry["protect"], bool)
        assert (
            entry["parent"] is None
            or entry["parent"] in urns
            or entry["parent"].endswith(
                "pulumi:pulumi:Stack::eks-training-platform-" + stack_result.stack
            )
        )
        assert set(entry["dependencies"]) <= urns, entry["urn"]
        assert entry["provider"] is None or entry["provider"] in urns
    types = {entry["type"] for entry in document}
    assert {"eks:index:Cluster", "aws:ec2/vpc:Vpc", "aws:kms/key:Key"} <= types


def test_inputs_use_engine_property_names(stack_result: StackResult) -> None:
    cluster = next(r for r in stack_result.records if r.type == "eks:index:Cluster")
    assert "enabledClusterLogTypes" in cluster.inputs
    assert "enabled_cluster_log_types" not in cluster.inputs


def test_manifests_one_file_per_kubernetes_object(stack_result: StackResult) -> None:
    manifests_dir = stack_result.written.directory / "manifests"
    objects = [r for r in stack_result.records if is_kubernetes_object(r)]
    files = sorted(manifests_dir.glob("*.yaml"))
    assert len(files) == len(objects) == stack_result.written.manifests >= 1
    for path in files:
        manifest = yaml.safe_load(path.read_text())
        assert path.name == manifest_file_name(manifest)


def _manifests(stack_result: StackResult) -> list[tuple[str, dict[str, Any]]]:
    directory = stack_result.written.directory / "manifests"
    return [
        (path.name, yaml.safe_load(path.read_text())) for path in sorted(directory.glob("*.yaml"))
    ]


def test_core_manifests_are_strictly_valid(stack_result: StackResult) -> None:
    """Built-in kinds need no reference data: kubernetes-validate ships their schemas."""
    version = stack_result.config.cluster.kubernetes_version
    core = 0
    for name, manifest in _manifests(stack_result):
        try:
            errors = validation_errors(manifest, version, None)
        except UnknownKind:
            continue  # a custom resource: checked against its CRD below
        assert errors == [], name
        core += 1
    assert core >= 1


def test_every_manifest_is_valid_for_the_cluster_version(
    stack_result: StackResult, reference_dir: Path
) -> None:
    version = stack_result.config.cluster.kubernetes_version
    for name, manifest in _manifests(stack_result):
        assert validation_errors(manifest, version, reference_dir / "crds") == [], name


def test_helm_directory_matches_releases(stack_result: StackResult) -> None:
    helm_dir = stack_result.written.directory / "helm"
    assert helm_dir.is_dir()
    releases = [r for r in stack_result.records if r.type == "kubernetes:helm.sh/v3:Release"]
    assert len(list(helm_dir.glob("*.yaml"))) == len(releases)


def test_synthesis_is_deterministic(tmp_path: Path) -> None:
    first = synthesize_stack("dev", tmp_path / "a")
    second = synthesize_stack("dev", tmp_path / "b")
    assert (tmp_path / "a/dev/resources.json").read_text() == (
        tmp_path / "b/dev/resources.json"
    ).read_text()
    assert len(first.records) == len(second.records)


def test_rerun_removes_stale_files(tmp_path: Path) -> None:
    synthesize_stack("dev", tmp_path)
    stale = tmp_path / "dev" / "manifests" / "ConfigMap.default.removed.yaml"
    stale.write_text("{}")
    synthesize_stack("dev", tmp_path)
    assert not stale.exists()


def test_cli_all_writes_every_stack_and_summarises(tmp_path: Path) -> None:
    result = synth_cli("--all", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    for stack in STACKS:
        assert (tmp_path / stack / "resources.json").is_file()
        assert f"{stack}: " in result.stdout
    assert "eks:index:Cluster" in result.stdout


def test_cli_unknown_stack_is_a_one_line_error(tmp_path: Path) -> None:
    result = synth_cli("nosuchstack", "--out", str(tmp_path))
    assert result.returncode == 2
    assert "stacks: dev, prod, staging" in result.stderr
    assert "Traceback" not in result.stderr


def test_secure_values_become_marked_placeholders() -> None:
    document = {
        "config": {
            "platform": {"slurm": {"sshKey": {"secure": "v1:abc"}}, "region": "us-west-2"},
            "aws:region": "us-west-2",
        }
    }
    stack = stack_from_document("proj", "x", document, "test")
    assert stack.config["proj:platform"]["slurm"]["sshKey"] == SECURE_PLACEHOLDER
    assert stack.secret_keys == ["proj:platform"]
    assert stack.config["aws:region"] == "us-west-2"
    assert json.loads(stack.engine_config()["proj:platform"])["region"] == "us-west-2"


@pytest.mark.parametrize(
    ("wire", "plain"),
    [
        (8.0, 8),
        (0.5, 0.5),
        (
            {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "x"},
            SECRET_MARK,
        ),
        (
            {
                "4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e",
                "urn": "urn:a",
                "id": "i",
            },
            "urn:a",
        ),
        ({"a": [1.0, {"b": 2.0}]}, {"a": [1, {"b": 2}]}),
    ],
)
def test_wire_values_become_plain_json(wire: object, plain: object) -> None:
    assert plain_value(wire) == plain


def test_records_come_in_dependency_order(stack_result: StackResult) -> None:
    position = {record.urn: index for index, record in enumerate(stack_result.records)}
    for record in stack_result.records:
        for prerequisite in (record.parent, record.provider, *record.dependencies):
            if prerequisite in position:
                assert position[prerequisite] < position[record.urn], (prerequisite, record.urn)
