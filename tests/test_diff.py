"""``synth diff``: what changed between two syntheses, computed from the files alone."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from synth.__main__ import diff_parser
from synth.__main__ import main as synth_main
from synth.diff import (
    ABSENT,
    CLAIMS_NOTE,
    GATE_REFUSALS,
    PROTECTED_NOTE,
    RETAINED_PROTECTED,
    VOLUMES_NOTE,
    Change,
    Changed,
    NoSynthesis,
    SectionDiff,
    Synthesis,
    SynthesisDiff,
    diff_syntheses,
    flatten,
    gate_refusals,
    load_synthesis,
    refusals,
    render,
    render_change,
    retained_replacements,
    shorten,
    synthesis_directory,
)
from synth.engine import SECRET_MARK, UNKNOWN, ResourceRecord
from synth.output import manifest_file_name, resource_label
from synth.replacements import Replacement
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.conftest import STACKS
from tests.project_copies import project_copy

URN = "urn:pulumi:dev::p::acme:index:Network$aws:ec2/subnet:Subnet::"


def _record(name: str, inputs: dict[str, Any], **options: Any) -> ResourceRecord:
    fields: dict[str, Any] = {
        "type": "aws:ec2/subnet:Subnet",
        "name": name,
        "urn": URN + name,
        "parent": None,
        "provider": None,
        "providers": {},
        "dependencies": [],
        "property_dependencies": {},
        "protect": False,
        "custom": True,
        "inputs": inputs,
    }
    fields.update(options)
    return ResourceRecord(**fields)


def _synthesis(
    records: list[ResourceRecord],
    manifests: dict[str, Any] | None = None,
    helm: dict[str, Any] | None = None,
) -> Synthesis:
    return Synthesis(Path("x"), {r.urn: r for r in records}, manifests or {}, helm or {})


def test_identical_syntheses_have_no_diff() -> None:
    records = [_record("a", {"cidrBlock": "10.0.0.0/24"})]
    diff = diff_syntheses(_synthesis(records), _synthesis(copy.deepcopy(records)))
    assert diff.empty
    assert render("dev", Path("base/dev"), diff) == "dev: no changes against base/dev"


def test_resources_added_removed_and_changed_by_urn() -> None:
    old = _synthesis(
        [_record("a", {"cidrBlock": "10.0.0.0/24", "tags": {"team": "x"}}), _record("b", {})]
    )
    new = _synthesis(
        [
            _record("a", {"cidrBlock": "10.0.1.0/24", "tags": {}}, protect=True),
            _record("c", {}),
        ]
    )
    diff = diff_syntheses(old, new).resources
    assert diff.added == ["aws:ec2/subnet:Subnet c"]
    assert diff.removed == ["aws:ec2/subnet:Subnet b"]
    (changed,) = diff.changed
    assert changed.name == "aws:ec2/subnet:Subnet a"
    assert changed.changes == [
        Change("cidrBlock", "10.0.0.0/24", "10.0.1.0/24"),
        Change("tags", ABSENT, {}),
        Change("tags.team", "x", ABSENT),
        Change("option:protect", False, True),
    ]


def test_internal_defaults_marker_is_not_a_change() -> None:
    old = _synthesis([_record("a", {"__defaults": ["x"], "v": 1})])
    new = _synthesis([_record("a", {"__defaults": ["y"], "v": 1})])
    assert diff_syntheses(old, new).empty


def test_kubernetes_objects_and_releases_are_compared_as_their_files() -> None:
    pool: dict[str, Any] = {
        "kind": "NodePool",
        "metadata": {"labels": {"karpenter.sh/x": "1"}},
        "spec": {},
    }
    changed_pool = copy.deepcopy(pool)
    changed_pool["metadata"]["labels"]["karpenter.sh/x"] = "2"
    changed_pool["spec"]["args"] = ["--a", "--b"]
    release = {"release": "karpenter", "values": {"replicas": 2}}
    diff = diff_syntheses(
        _synthesis([], {"NodePool._cluster.gpu.yaml": pool, "Gone.yaml": {}}, {"k.yaml": release}),
        _synthesis(
            [],
            {"NodePool._cluster.gpu.yaml": changed_pool, "New.yaml": {}},
            {"k.yaml": {"release": "karpenter", "values": {"replicas": 1}}},
        ),
    )
    assert diff.manifests.added == ["New.yaml"] and diff.manifests.removed == ["Gone.yaml"]
    assert diff.manifests.changed[0].changes == [
        Change('metadata.labels["karpenter.sh/x"]', "1", "2"),
        Change("spec", {}, ABSENT),
        Change("spec.args[0]", ABSENT, "--a"),
        Change("spec.args[1]", ABSENT, "--b"),
    ]
    assert diff.helm.changed[0].changes == [Change("values.replicas", 2, 1)]
    text = render("dev", Path("b"), diff)
    assert text.splitlines()[0] == "dev: 1 added, 1 removed, 2 changed against b"
    assert "  manifests/: 1 added, 1 removed, 1 changed" in text
    assert "    ~ k.yaml\n        values.replicas: 2 -> 1" in text
    assert "    + New.yaml" in text and "    - Gone.yaml" in text


def test_records_of_kubernetes_objects_are_left_to_their_files() -> None:
    kind = "kubernetes:core/v1:ConfigMap"
    old = _synthesis([_record("cm", {"data": {"a": "1"}}, type=kind)])
    new = _synthesis([_record("cm", {"data": {"a": "2"}}, type=kind)])
    assert diff_syntheses(old, new).resources.empty


def test_secret_values_are_never_shown() -> None:
    assert "hunter2" not in render_change(Change("password", SECRET_MARK, "hunter2"))
    assert "hunter2" not in render_change(Change("password", "hunter2", SECRET_MARK))
    secret = {"kind": "Secret", "stringData": {"password": "hunter2"}, "type": "Opaque"}
    changed = {"kind": "Secret", "stringData": {"password": "swordfish"}, "type": "x"}
    diff = diff_syntheses(_synthesis([], {"s.yaml": secret}), _synthesis([], {"s.yaml": changed}))
    text = render("dev", Path("b"), diff)
    assert "hunter2" not in text and "swordfish" not in text
    assert "stringData.password: [secret] -> [secret] (secret; value not shown)" in text
    assert 'type: "Opaque" -> "x"' in text


def test_values_are_shortened() -> None:
    assert shorten("x" * 200).endswith("...") and len(shorten("x" * 200)) == 60
    assert shorten({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert shorten(UNKNOWN) == "(known after deploy)"
    assert shorten(ABSENT) == ABSENT
    assert flatten({"a": {}, "b": [], "c": [{"d": 1}]}) == {"a": {}, "b": [], "c[0].d": 1}


def test_base_may_be_the_output_root_or_the_stack_directory(
    synthesized: dict[str, StackResult], tmp_path: Path
) -> None:
    directory = synthesized["dev"].written.directory
    assert synthesis_directory(directory.parent, "dev") == directory
    assert synthesis_directory(directory, "dev") == directory
    with pytest.raises(NoSynthesis, match=str(tmp_path)):
        synthesis_directory(tmp_path, "dev")
    loaded = load_synthesis(directory)
    assert len(loaded.resources) == len(synthesized["dev"].records)
    assert len(loaded.manifests) == synthesized["dev"].written.manifests
    assert diff_syntheses(loaded, load_synthesis(directory)).empty


@pytest.mark.slow
def test_diff_command_shows_a_changed_stack_value_and_exits_one(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = project_copy(tmp_path)
    stack_file = project / "stacks" / "Pulumi.dev.yaml"
    document = load_yaml(stack_file.read_text())
    platform = document["config"]["eks-training-platform:platform"]
    platform["cluster"]["systemNodeGroup"]["maxSize"] += 1
    stack_file.write_text(yaml.safe_dump(document))
    base = synthesized["dev"].written.directory
    argv = ["diff", "dev", "--base", str(base.parent), "--out", str(tmp_path / "out")]
    assert synth_main([*argv, "--project-dir", str(project)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"dev: 0 added, 0 removed, 1 changed against {base}\n"), out
    assert "~ aws:eks/nodeGroup:NodeGroup training-dev-system" in out
    assert "scalingConfig.maxSize: 3 -> 4" in out
    assert (tmp_path / "out" / "dev" / "resources.json").is_file()
    assert "(replaced)" not in out and "refused" not in out


@pytest.mark.slow
def test_diff_command_exits_zero_without_changes(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fresh synthesis of an unchanged stack diffs clean against the session's: every file
    it writes (resources, manifests, Helm values, pods) comes out the same twice."""
    base = synthesized["dev"].written.directory
    assert synth_main(["diff", "dev", "--base", str(base), "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"dev: no changes against {base}\n"


@pytest.mark.usefixtures("replay_synthesis")
def test_diff_command_base_may_be_the_output_directory_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert synth_main(["dev", "--out", str(tmp_path)]) == 0
    assert synth_main(["diff", "dev", "--base", str(tmp_path), "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.endswith(
        "dev: no changes against " + str(tmp_path / "dev") + "\n"
    )


def test_diff_command_exits_two_for_a_base_without_synthesis_or_a_bad_stack(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nothing-here"
    assert synth_main(["diff", "dev", "--base", str(missing), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and str(missing) in err
    base = str(synthesized["dev"].written.directory)
    assert synth_main(["diff", "nosuch", "--base", base, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nosuch: ") and f"stacks: {', '.join(STACKS)}" in err


def test_long_strings_are_shown_from_where_they_differ() -> None:
    head = "# Generated by the training platform from the node pools\n"
    line = render_change(Change("gres", head + "Count=1\n", head + "Count=2\n"))
    assert line == r'gres: "...de pools\nCount=1\n" -> "...de pools\nCount=2\n"'
    assert render_change(Change("k", "short", "shorter")) == 'k: "short" -> "shorter"'


TEAM = "ml-research"
CLAIM_FILE = f"PersistentVolumeClaim.{TEAM}.lustre-checkpoints.yaml"


def _volume(name: str, policy: str | None = "Retain", handle: str = "fs-1") -> dict[str, Any]:
    """A static Lustre PersistentVolume as the stack writes it (``policy`` None: no field)."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "",
        "claimRef": {"namespace": TEAM, "name": "lustre-checkpoints"},
        "csi": {"driver": "fsx.csi.aws.com", "volumeHandle": handle},
    }
    if policy is not None:
        spec["persistentVolumeReclaimPolicy"] = policy
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": spec,
    }


def _claim(volume_name: str | None, storage_class: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteMany"], "storageClassName": storage_class}
    if volume_name is not None:
        spec["volumeName"] = volume_name
    metadata = {"name": "lustre-checkpoints", "namespace": TEAM}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def _objects(*manifests: dict[str, Any]) -> Synthesis:
    return _synthesis([], {manifest_file_name(m): m for m in manifests})


def test_a_retained_volume_renamed_with_its_claim_is_flagged_not_refused() -> None:
    old = _objects(_volume("lustre-checkpoints-aaaa"), _claim("lustre-checkpoints-aaaa"))
    new = _objects(_volume("lustre-checkpoints-bbbb"), _claim("lustre-checkpoints-bbbb"))
    diff = diff_syntheses(old, new)
    assert diff.manifests.removed == ["PersistentVolume._cluster.lustre-checkpoints-aaaa.yaml"]
    (claim,) = diff.manifests.changed
    assert [r.key for r in claim.replaced_by] == ["spec.volumeName"]
    assert refusals(diff) == [] and retained_replacements(diff) == [claim]
    text = render("dev", Path("b"), diff)
    assert f"  claims replaced: 1\n    ! volume claim: {CLAIM_FILE}\n{CLAIMS_NOTE}" in text
    assert "refused" not in text and "Pending" not in text and VOLUMES_NOTE not in text


@pytest.mark.parametrize("policy", ["Delete", None])
def test_a_claim_of_a_volume_not_retained_is_still_refused(policy: str | None) -> None:
    old = _objects(_volume("a", policy), _claim("a"))
    diff = diff_syntheses(old, _objects(_volume("b", policy), _claim("b")))
    assert [(c.name, c.refused_as) for c in refusals(diff)] == [(CLAIM_FILE, "volume")]
    assert retained_replacements(diff) == []
    assert "claims replaced" not in render("dev", Path("b"), diff)


def test_a_claim_without_volume_name_is_still_refused() -> None:
    old = _objects(_volume("a"), _claim(None))
    diff = diff_syntheses(old, _objects(_volume("a"), _claim(None, storage_class="other")))
    assert [(c.name, c.refused_as) for c in refusals(diff)] == [(CLAIM_FILE, "volume")]
    assert "claims replaced" not in render("dev", Path("b"), diff)


def test_a_claim_replaced_beside_its_retained_volume_is_flagged_as_left_pending() -> None:
    old = _objects(_volume("a"), _claim("a"))
    diff = diff_syntheses(old, _objects(_volume("a"), _claim("a", storage_class="other")))
    assert refusals(diff) == []
    (claim,) = retained_replacements(diff)
    assert claim.released_volume == "a"
    assert f"    ! volume claim: {CLAIM_FILE} (its PersistentVolume a stays, Released" in render(
        "dev", Path("b"), diff
    )


def test_a_retained_volume_replaced_under_its_own_name_is_flagged_not_refused() -> None:
    old = _objects(_volume("a"), _claim("a"))
    diff = diff_syntheses(old, _objects(_volume("a", handle="fs-2"), _claim("a")))
    (volume,) = diff.manifests.changed
    assert volume.replaced_by and refusals(diff) == [] and retained_replacements(diff) == [volume]
    text = render("dev", Path("b"), diff)
    assert "  volumes replaced under their own name: 1\n" in text
    assert f"    ! volume: PersistentVolume._cluster.a.yaml\n{VOLUMES_NOTE}" in text
    assert "claims replaced" not in text
    deleted = diff_syntheses(
        _objects(_volume("a", "Delete"), _claim("a")),
        _objects(_volume("a", "Delete", handle="fs-2"), _claim("a")),
    )
    assert [c.refused_as for c in refusals(deleted)] == ["volume"]


def test_a_retained_volume_renamed_through_a_replaced_file_system_is_not_refused() -> None:
    """The cascade enters a dragged object under its new file; the base's is found by URN."""
    file_system_type = "aws:fsx/lustreFileSystem:LustreFileSystem"
    volume_type = "kubernetes:core/v1:PersistentVolume"
    fs_urn = URN.replace("aws:ec2/subnet:Subnet", file_system_type) + "lustre"
    volume_urn = URN.replace("aws:ec2/subnet:Subnet", volume_type) + "pv"

    def synthesis(subnet: str, volume: dict[str, Any]) -> Synthesis:
        file_system = _record("lustre", {"subnetIds": [subnet]}, type=file_system_type, urn=fs_urn)
        dependencies = {"metadata": [fs_urn], "spec": [fs_urn]}
        record = _record(
            "pv", volume, type=volume_type, urn=volume_urn, property_dependencies=dependencies
        )
        return _synthesis([file_system, record], {manifest_file_name(volume): volume})

    diff = diff_syntheses(
        synthesis("subnet-a", _volume("lustre-aaaa")),
        synthesis("subnet-b", _volume("lustre-bbbb", handle="fs-2")),
    )
    assert [c.refused_as for c in refusals(diff)] == ["file system"]
    (volume,) = retained_replacements(diff)
    assert volume.name == "PersistentVolume._cluster.lustre-bbbb.yaml" and volume.renamed
    # created before the old one goes, which its claim no longer holds: nothing to list
    assert "volumes replaced under their own name" not in render("dev", Path("b"), diff)


@pytest.mark.usefixtures("replay_synthesis")
def test_diff_command_gate_passes_a_retained_volume_renamed_with_its_claim(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "base"
    shutil.copytree(synthesized["dev"].written.directory, base)
    manifests = base / "manifests"
    claim_file = next(
        path
        for path in sorted(manifests.glob("PersistentVolumeClaim.*"))
        if load_yaml(path.read_text())["spec"].get("volumeName")
    )
    claim = load_yaml(claim_file.read_text())
    name = claim["spec"]["volumeName"]
    volume_file = manifests / f"PersistentVolume._cluster.{name}.yaml"
    volume = load_yaml(volume_file.read_text())
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    # The base named the volume otherwise: now it is renamed and the claim follows.
    volume["metadata"]["name"] = claim["spec"]["volumeName"] = f"{name}-old"
    volume_file.unlink()
    (manifests / f"PersistentVolume._cluster.{name}-old.yaml").write_text(yaml.safe_dump(volume))
    claim_file.write_text(yaml.safe_dump(claim))
    argv = ["diff", "dev", "--base", str(base), "--out", str(tmp_path / "out")]
    assert synth_main([*argv, "--gate"]) == 0
    out = capsys.readouterr().out
    assert f"  claims replaced: 1\n    ! volume claim: {claim_file.name}\n" in out, out
    assert "refused" not in out
    assert synth_main(argv) == 1  # something changed


def _prod_project(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of the project whose prod stack file (its whole ``config`` map) went through
    ``edit``."""
    project = project_copy(tmp_path)
    stack_file = project / "stacks" / "Pulumi.prod.yaml"
    document = load_yaml(stack_file.read_text())
    edit(document["config"])
    stack_file.write_text(yaml.safe_dump(document))
    return project


PLATFORM = "eks-training-platform:platform"
BIND_PASSWORD = "eks-training-platform:slurmDirectoryBindPassword"


def _slurm_off(config: dict[str, Any]) -> None:
    config[PLATFORM]["slurm"] = {"enabled": False}
    del config[BIND_PASSWORD]  # nothing binds with it any more (a config error otherwise)


def _trainer_off(config: dict[str, Any]) -> None:
    config[PLATFORM]["trainer"]["enabled"] = False


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "refused"),
    [
        (
            _slurm_off,
            [
                "kubernetes:helm.sh/v3:Release slurm: deleted",
                "kubernetes:k8s.mariadb.com/v1alpha1:MariaDB slurm-slurm-accounting-db: "
                + RETAINED_PROTECTED,
                "kubernetes:core/v1:Namespace slurm-namespace: " + RETAINED_PROTECTED,
                "kubernetes:core/v1:Secret slurm-slurm-auth-slurm: deleted",
                "random:index/randomPassword:RandomPassword slurm-slurm-auth-jwt-jwt.key: deleted",
            ],
        ),
        (
            _trainer_off,
            [
                "kubernetes:helm.sh/v3:Release kubeflow-trainer: " + RETAINED_PROTECTED,
                "kubernetes:yaml/v2:ConfigFile trainer-jobset-crds: " + RETAINED_PROTECTED,
            ],
        ),
    ],
    ids=["slurm-off", "trainer-off"],
)
def test_gate_refuses_deleting_what_prod_protects(
    synthesized: dict[str, StackResult],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[dict[str, Any]], None],
    refused: list[str],
) -> None:
    """pulumi v3.272.0 pkg/resource/deploy/step.go (DeleteStep.Apply) fails the up on a
    protected resource the program no longer registers: the gate refuses it, --allow-replace
    (which is about replacements) does not let it through."""
    project = _prod_project(tmp_path, edit)
    base = synthesized["prod"].written.directory
    argv = ["diff", "prod", "--base", str(base), "--out", str(tmp_path / "out")]
    argv += ["--project-dir", str(project)]
    assert synth_main([*argv, "--gate"]) == 1
    out, err = capsys.readouterr()
    assert err == ""  # a valid stack: refused, not a config error
    listed = [
        line.removeprefix("    ! ")
        for line in out.split("  protected resources refused: ", 1)[1].splitlines()[1:]
        if line.startswith("    ! ")
    ]
    assert set(refused) <= set(listed), out
    records = {resource_label(r.urn): r for r in synthesized["prod"].records if r.protect}
    for entry in listed:
        label, verdict = entry.split(": ", 1)
        assert label in records, entry
        # retained on delete as well: said so, never "deleted"
        expected = RETAINED_PROTECTED if records[label].retain_on_delete else "deleted"
        assert verdict in (expected, "replaced"), entry
    assert PROTECTED_NOTE in out
    # --allow-replace is about replacements: judged on the same two syntheses, not a third
    changes = diff_syntheses(load_synthesis(base), load_synthesis(tmp_path / "out" / "prod"))
    assert "protected resources refused" in gate_refusals(changes, allow_replace=True)


@pytest.mark.slow
def test_gate_passes_removing_a_team_that_protects_nothing(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A prod team owns nothing protected (its claims and volumes are retained, not
    protected): removing it changes things but refuses nothing."""

    def one_team(config: dict[str, Any]) -> None:
        config[PLATFORM]["teams"] = config[PLATFORM]["teams"][:1]

    project = _prod_project(tmp_path, one_team)
    base = synthesized["prod"].written.directory
    argv = ["diff", "prod", "--base", str(base), "--out", str(tmp_path / "out")]
    assert synth_main([*argv, "--project-dir", str(project), "--gate"]) == 0
    out = capsys.readouterr().out
    assert "removed" in out and "protected resources refused" not in out


def test_a_protected_resource_also_retained_is_refused_and_said_to_be_retained() -> None:
    """Removed from the program, a protected resource fails the up either way (pulumi
    pkg/resource/deploy/step.go, DeleteStep.Apply); one also retained on delete would not be
    deleted even unprotected, and the forecast says that instead of "deleted"."""
    old = [
        _record("db", {}, protect=True, retain_on_delete=True),
        _record("key", {}, protect=True),
        _record("kept", {}, retain_on_delete=True),  # not protected: no refusal
    ]
    diff = diff_syntheses(_synthesis(old), _synthesis([]))
    assert diff.protected == [
        f"aws:ec2/subnet:Subnet db: {RETAINED_PROTECTED}",
        "aws:ec2/subnet:Subnet key: deleted",
    ]
    assert gate_refusals(diff) == ["protected resources refused"]
    text = render("dev", Path("b"), diff)
    assert (
        "    ! aws:ec2/subnet:Subnet db: protected (and retained: a destroy would only forget it)\n"
        in text
    )


@pytest.mark.parametrize("heading", GATE_REFUSALS)
def test_gate_help_names_every_refusal_that_exits_one(heading: str) -> None:
    """Each refusal alone makes the gate exit 1, is printed under its heading, and the --gate
    help (docs/reference/synth-cli.md is generated from it) names it."""
    # each comes with some change of the sections (the render says "no changes" otherwise)
    empty = SynthesisDiff(SectionDiff(removed=["x"]), SectionDiff(), SectionDiff())
    one = {
        "replacements refused": replace(
            empty,
            resources=SectionDiff(
                changed=[
                    Changed(
                        "aws:s3/bucket:Bucket b",
                        [Change("bucket", "a", "b")],
                        [Replacement("bucket", "rule")],
                        "aws:s3/bucket:Bucket",
                    )
                ]
            ),
        ),
        "protected resources refused": replace(empty, protected=["x: deleted"]),
        "creates AWS refuses": replace(empty, collisions=["a collides with b: /p"]),
        "reservations left behind": replace(empty, moved_reservations=["cr-1 of pool p"]),
        "cluster zones refused": replace(empty, cluster_zones=["eks:index:Cluster c: new zone z"]),
    }[heading]
    assert gate_refusals(one) == [heading]
    assert f"  {heading}: 1\n" in render("dev", Path("b"), one) + "\n"
    gate_help = next(a.help for a in diff_parser()._actions if "--gate" in a.option_strings)
    assert heading in " ".join(str(gate_help).split())
    if heading == "replacements refused":
        assert gate_refusals(one, allow_replace=True) == []


def test_replacing_a_resource_protected_on_both_sides_is_refused() -> None:
    """pulumi pkg/resource/deploy/step_generator.go: "unable to replace resource ... as it is
    currently marked for protection" when old and new are protected; unprotecting in the same
    up is allowed."""
    old = [_record("a", {"cidrBlock": "10.0.0.0/24"}, protect=True)]
    for protect, refused in ((True, ["aws:ec2/subnet:Subnet a: replaced"]), (False, [])):
        new = [_record("a", {"cidrBlock": "10.0.1.0/24"}, protect=protect)]
        diff = diff_syntheses(_synthesis(old), _synthesis(new))
        assert diff.resources.changed[0].replaced_by
        assert diff.protected == refused
    updated = diff_syntheses(
        _synthesis(old), _synthesis([_record("a", {"cidrBlock": "10.0.0.0/24", "tags": {}})])
    )
    assert updated.protected == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda config: config[PLATFORM]["slurm"].update(enabled=False),
            'prod: slurmDirectoryBindPassword: got "[secret]"; allowed: unset without '
            "platform.slurm.directory.bindDn (nothing binds with it)",
        ),
        (
            lambda config: config[PLATFORM]["cluster"]["systemNodeGroup"].update(maxSize="x"),
            'prod: platform.cluster.systemNodeGroup.maxSize: got "x"; allowed: a whole number',
        ),
    ],
    ids=["password-left-behind", "bad-value"],
)
def test_a_config_error_during_diff_exits_two_with_its_line(
    synthesized: dict[str, StackResult],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[dict[str, Any]], None],
    message: str,
) -> None:
    """The program's own check (the bind password left behind when Slurm goes) is made before
    the run, so diff and the plain command print the problem line, never a traceback."""
    project = _prod_project(tmp_path, edit)
    base = str(synthesized["prod"].written.directory)
    out = str(tmp_path / "out")
    options = ["--out", out, "--project-dir", str(project)]
    status = synth_main(["diff", "prod", "--base", base, "--gate", *options])
    err = capsys.readouterr().err
    assert status == 2
    assert err.splitlines() == [message]
    assert synth_main(["prod", *options]) == 2
    assert capsys.readouterr().err == err


def test_a_base_that_is_not_a_synthesis_exits_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "base" / "prod"
    base.mkdir(parents=True)
    (base / "resources.json").write_text("{not json")
    assert synth_main(["diff", "prod", "--base", str(base), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "not a readable synthesis" in err
