"""Offline synthesis of every stack: the files reviewers read and CI checks."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config_reference import render_reference
from policies.offline import Finding
from synth import COMMANDS
from synth.__main__ import main as synth_main
from synth.engine import SECRET_MARK, ResourceRecord, plain_value
from synth.output import component_counts, is_kubernetes_object, manifest_file_name
from synth.reference_pages import parts
from synth.run import StackResult, policy_summary, synthesize_stack
from synth.stackfile import (
    REPOSITORY_ROOT,
    SECURE_PLACEHOLDER,
    StackFileError,
    load_stack,
    stack_from_document,
)
from synth.yamlio import UNFOLDED, dump_yaml, load_yaml
from tests.conftest import STACKS, synth_cli
from tests.schemas import UnknownKind, validation_errors

RECORD_KEYS = {
    "type",
    "name",
    "urn",
    "parent",
    "provider",
    "dependencies",
    "protect",
    "retainOnDelete",
    "deleteBeforeReplace",
    "replaceOnChanges",
    "ignoreChanges",
    "inputs",
}

PARTS = parts(synth_main)


def test_resources_json_describes_every_registration(stack_result: StackResult) -> None:
    document = json.loads((stack_result.written.directory / "resources.json").read_text())
    assert len(document) == len(stack_result.records) > 40
    urns = {entry["urn"] for entry in document}
    assert len(urns) == len(document), "URNs are unique"
    for entry in document:
        assert set(entry) >= RECORD_KEYS
        assert isinstance(entry["protect"], bool)
        assert isinstance(entry["retainOnDelete"], bool)
        assert entry["deleteBeforeReplace"] in (None, True, False)
        assert isinstance(entry["replaceOnChanges"], list)
        assert isinstance(entry["ignoreChanges"], list)
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
        manifest = load_yaml(path.read_text())
        assert path.name == manifest_file_name(manifest)


def _manifests(stack_result: StackResult) -> list[tuple[str, dict[str, Any]]]:
    directory = stack_result.written.directory / "manifests"
    return [(path.name, load_yaml(path.read_text())) for path in sorted(directory.glob("*.yaml"))]


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


@pytest.mark.slow
def test_synthesis_is_deterministic(synthesized: dict[str, StackResult], tmp_path: Path) -> None:
    """A second synthesis of dev in this process writes what the session's first one wrote."""
    first = synthesized["dev"]
    second = synthesize_stack("dev", tmp_path)
    assert (first.written.directory / "resources.json").read_text() == (
        tmp_path / "dev/resources.json"
    ).read_text()
    assert len(first.records) == len(second.records)


def test_written_yaml_reads_the_same_whichever_pyyaml_wrote_it(
    synthesized: dict[str, StackResult],
) -> None:
    """Files are written through libyaml (synth/yamlio.py); without it, PyYAML's Python
    emitter must write the same text, or a synthesis would diff against itself on a machine
    whose PyYAML has no libyaml. The two fold long strings differently, so none is folded."""
    directory = synthesized["dev"].written.directory
    files = sorted(directory.rglob("*.yaml"))
    assert files
    folded = 0
    for path in files:
        text = path.read_text()
        document = load_yaml(text)
        assert text == dump_yaml(document), path
        python = yaml.dump(document, Dumper=yaml.SafeDumper, sort_keys=False, width=UNFOLDED)
        assert python == text, path
        folded += yaml.safe_dump(document, sort_keys=False) != python
    assert folded, "no file has a string long enough to fold: the check proves nothing"


@pytest.mark.slow
def test_rerun_removes_stale_files(synthesized: dict[str, StackResult], tmp_path: Path) -> None:
    shutil.copytree(synthesized["dev"].written.directory, tmp_path / "dev")
    stale = tmp_path / "dev" / "manifests" / "ConfigMap.default.removed.yaml"
    stale.write_text("{}")
    synthesize_stack("dev", tmp_path)
    assert not stale.exists()


@pytest.mark.usefixtures("replay_synthesis")
def test_cli_all_writes_every_stack_and_summarises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = synth_main(["--all", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert status == 0, err
    for stack in STACKS:
        assert (tmp_path / stack / "resources.json").is_file()
        assert f"{stack}: " in out
    assert "network (Network)" in out
    assert "eks:index:Cluster" not in out, "the per-type table needs --long"


@pytest.mark.usefixtures("replay_synthesis")
def test_cli_long_adds_the_per_type_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert synth_main(["dev", "--long", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "resources by component:" in out and "resources by type:" in out
    assert re.search(r"^    eks:index:Cluster +1$", out, flags=re.MULTILINE), out


def _record(urn_name: str, type_: str, parent: str | None, custom: bool = True) -> ResourceRecord:
    urn = f"urn:pulumi:s::p::{type_}::{urn_name}"
    return ResourceRecord(type_, urn_name, urn, parent, None, {}, [], {}, False, custom, {})


def test_components_are_read_off_the_resource_tree() -> None:
    stack = "urn:pulumi:s::p::pulumi:pulumi:Stack::p-s"
    root = _record("s", "acme:index:Platform", stack, custom=False)
    net = _record("net", "acme:index:Network", root.urn, custom=False)
    subnet = _record("a", "aws:ec2/subnet:Subnet", net.urn)
    inner = _record("inner", "acme:index:Routes", net.urn, custom=False)
    route = _record("r", "aws:ec2/route:Route", inner.urn)
    key = _record("logs", "aws:kms/key:Key", root.urn)
    records = [root, net, subnet, inner, route, key]
    assert component_counts(records) == [("net (Network)", 4), ("s (Platform)", 2)]
    # Without one root component, every root is a top-level component of its own.
    assert component_counts([net, subnet, key]) == [("logs (Key)", 1), ("net (Network)", 2)]


def test_component_counts_add_up_and_name_the_platform_parts(stack_result: StackResult) -> None:
    counts = dict(component_counts(stack_result.records))
    assert sum(counts.values()) == len(stack_result.records)
    parts = {label.split(" (")[1].rstrip(")") for label in counts}
    assert {"Network", "Cluster", "Karpenter", "NodePools", "Storage", "Teams"} <= parts
    summary = stack_result.summary()
    assert "resources by type" not in summary
    assert "resources by type" in stack_result.summary(long=True)


def test_policy_summary_lists_every_finding_mandatory_first() -> None:
    urn = "urn:pulumi:dev::p::acme:index:Storage$aws:s3/bucket:Bucket::data"
    findings = [
        Finding("bucket-tags", "advisory", urn, "no cost-center tag"),
        Finding("kms-key-rotation", "mandatory", urn, "rotation off"),
    ]
    lines = policy_summary(findings).splitlines()
    assert lines == [
        "  policies: 1 mandatory violation(s), 1 advisory finding(s)",
        "    MANDATORY kms-key-rotation: aws:s3/bucket:Bucket data: rotation off",
        "    ADVISORY bucket-tags: aws:s3/bucket:Bucket data: no cost-center tag",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["dev", "--bogus"],
        ["reference", "--bogus"],
        ["reference", "--write", "a", "b"],
        ["check", "resources.json", "--stack", "dev", "--bogus"],
        ["jobs", "dev", "--bogus"],
        ["diff", "dev", "--base", "build/synth", "--bogus"],
        ["diff", "dev"],
    ],
)
def test_every_command_rejects_an_unknown_option(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        synth_main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: scripts/synth"), err
    assert "error:" in err


def test_reference_write_updates_the_pages_in_the_named_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for part in PARTS:
        (tmp_path / part.page).write_text(f"intro\n{part.begin}\nold\n{part.end}\n")
    assert synth_main(["reference", "--write", str(tmp_path)]) == 0
    assert "`platform.region`" in (tmp_path / "configuration.md").read_text()
    assert all(part.current((tmp_path / part.page).read_text()) == part.block() for part in PARTS)
    assert synth_main(["reference", "--write", str(tmp_path)]) == 0
    assert capsys.readouterr().out.endswith("is current\n")
    assert synth_main(["reference"]) == 0
    assert capsys.readouterr().out.endswith(render_reference())


@pytest.mark.slow
def test_cli_unknown_stack_is_a_one_line_error(tmp_path: Path) -> None:
    """Through the process boundary: ``python -m synth``'s status and its stderr alone."""
    result = synth_cli("nosuchstack", "--out", str(tmp_path))
    assert result.returncode == 2
    assert f"stacks: {', '.join(STACKS)}" in result.stderr  # every stack file present
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


def test_help_lists_every_sub_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        synth_main(["--help"])
    assert exited.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    for command, usage in COMMANDS.items():
        assert " ".join(usage.split()) in shown, command
    assert "'scan <stack>... | --all'" in shown


def test_a_key_written_twice_in_a_stack_file_is_refused(tmp_path: Path) -> None:
    """YAML keeps the last of two equal keys without a word; a stack file must not, or a
    second block silently drops the first's settings (two ``observability:`` blocks once
    dropped prod's EFA exporter image)."""
    (tmp_path / "Pulumi.yaml").write_text((REPOSITORY_ROOT / "Pulumi.yaml").read_text())
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.twice.yaml").write_text(
        "config:\n  p:platform:\n    observability:\n      retentionDays: 3\n"
        "    teams: []\n    observability:\n      storageGiB: 20\n"
    )
    with pytest.raises(StackFileError, match=r"line 6: key 'observability' is written twice"):
        load_stack("twice", root=tmp_path)
    (stacks / "Pulumi.once.yaml").write_text("config:\n  a: {b: 1, c: 2}\n  d: [{b: 1}, {b: 2}]\n")
    assert load_stack("once", root=tmp_path).config  # the same key in separate maps is fine
