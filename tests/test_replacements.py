"""``synth diff`` forecasts replacements from the providers' rules and refuses the ones that lose data.

Each case edits one input of a real synthesized record (dev's) the way a config change would, and
checks the forecast against the provider rule it comes from (synth/replacements.py names the
upstream file of each); the command refuses it without ``--allow-replace``.
"""

from __future__ import annotations

import copy
import functools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from synth.__main__ import main as synth_main
from synth.diff import (
    RERUN_NOTE,
    Changed,
    Synthesis,
    SynthesisDiff,
    association_collisions,
    diff_syntheses,
    load_synthesis,
    refusals,
    render,
    rerun_replacements,
    retained_replacements,
)
from synth.engine import ResourceRecord
from synth.output import HELM_RELEASE_TYPE as HELM_RELEASE
from synth.replacements import (
    AUDIT_PAGE,
    INSTANCE,
    LATEST_VERSION_SOURCE,
    LAUNCH_TEMPLATE,
    REPLACED_BY,
    Trigger,
    audit_table,
    kubernetes_type,
    with_audit,
)
from synth.run import StackResult, synthesize_stack
from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml
from tests.project_copies import project_copy

FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"
ASSOCIATION = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
EKS = "eks:index:Cluster"
BUCKET = "aws:s3/bucket:Bucket"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
EFS = "aws:efs/fileSystem:FileSystem"
ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"
MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"
Edit = Callable[[dict[str, Any]], None]


def _set(key: str, value: Any) -> Edit:
    def edit(inputs: dict[str, Any]) -> None:
        inputs[key] = value

    return edit


def _drop(key: str) -> Edit:
    def edit(inputs: dict[str, Any]) -> None:
        del inputs[key]

    return edit


def _scaled(key: str, factor: float) -> Edit:
    def edit(inputs: dict[str, Any]) -> None:
        inputs[key] = int(inputs[key] * factor)

    return edit


def _tagged(inputs: dict[str, Any]) -> None:
    inputs["tags"] = {**(inputs.get("tags") or {}), "review": "x"}


def _edited(base: Synthesis, resource_type: str, edit: Edit, index: int = 0) -> Synthesis:
    """``base`` with one input of its ``index``-th record of ``resource_type`` edited."""
    resources = dict(base.resources)
    urn = [u for u, r in resources.items() if r.type == resource_type][index]
    entry = copy.deepcopy(resources[urn].to_json())
    edit(entry["inputs"])
    resources[urn] = ResourceRecord.from_json(entry)
    return Synthesis(base.directory, resources, base.manifests, base.helm)


@pytest.fixture(scope="module")
def dev(synthesized: dict[str, StackResult]) -> Synthesis:
    return load_synthesis(synthesized["dev"].written.directory)


# (resource type, edit, replacing key): each change the issue lists, refused as a replacement.
REFUSED_CASES = [
    (FILE_SYSTEM, _set("subnetIds", "subnet-0000000000000000a"), "subnetIds"),
    (FILE_SYSTEM, _set("securityGroupIds", ["sg-0000000000000000a"]), "securityGroupIds[0]"),
    (FILE_SYSTEM, _set("kmsKeyId", "arn:aws:kms:us-west-2:111122223333:key/x"), "kmsKeyId"),
    (FILE_SYSTEM, _set("deploymentType", "PERSISTENT_1"), "deploymentType"),
    (FILE_SYSTEM, _set("storageType", "HDD"), "storageType"),
    (FILE_SYSTEM, _set("efaEnabled", True), "efaEnabled"),
    (FILE_SYSTEM, _scaled("storageCapacity", 0.5), "storageCapacity"),
    (ASSOCIATION, _set("fileSystemPath", "/elsewhere"), "fileSystemPath"),
    (ASSOCIATION, _set("dataRepositoryPath", "s3://other/prefix"), "dataRepositoryPath"),
    (EKS, _set("name", "training-dev-2"), "name"),
    (EKS, _drop("encryptionConfigKeyArn"), "encryptionConfigKeyArn"),
    (BUCKET, _set("bucket", "another-bucket-name"), "bucket"),
    (EFS, _set("kmsKeyId", "arn:aws:kms:us-west-2:111122223333:key/x"), "kmsKeyId"),
    (EFS, _set("performanceMode", "maxIO"), "performanceMode"),
]


@pytest.mark.parametrize(("resource_type", "edit", "key"), REFUSED_CASES)
def test_a_stateful_replacement_is_forecast_and_refused(
    dev: Synthesis, resource_type: str, edit: Edit, key: str
) -> None:
    diff = diff_syntheses(dev, _edited(dev, resource_type, edit))
    changed = _edited_entry(diff, resource_type)
    assert [r.key for r in changed.replaced_by] == [key]
    assert changed in refusals(diff)
    if resource_type == FILE_SYSTEM:  # its associations go with it
        dragged = [c for c in refusals(diff) if c.resource_type == ASSOCIATION]
        assert dragged and all(r.key == "fileSystemId" for c in dragged for r in c.replaced_by)
    text = render("dev", Path("base"), diff)
    assert f"~ {changed.name} (replaced)" in text
    assert f"replacements refused: {len(refusals(diff))}" in text
    assert "allowed (--allow-replace)" in render("dev", Path("b"), diff, allow_replace=True)


# In-place updates: the providers change these without replacing.
IN_PLACE_CASES = [
    (FILE_SYSTEM, _tagged),  # tags: no ForceNew
    (FILE_SYSTEM, _scaled("storageCapacity", 2)),  # an increase: UpdateFileSystem
    (EKS, _set("privateSubnetIds", ["subnet-0000000000000000a"])),  # vpc_config: no ForceNew
    (EKS, _set("encryptionConfigKeyArn", "arn:aws:kms:us-west-2:111122223333:key/y")),
    (BUCKET, _tagged),
    (NODE_GROUP, _set("version", "1.36")),  # UpdateNodegroupVersion
    (NODE_GROUP, _set("scalingConfig", {"minSize": 3, "desiredSize": 3, "maxSize": 6})),
    # the release schedules' key (issue 39): kms_key_arn has no ForceNew in
    # terraform-provider-aws internal/service/scheduler/schedule.go (UpdateSchedule takes
    # KmsKeyArn), nor has the data key's policy (PutKeyPolicy)
    ("aws:scheduler/schedule:Schedule", _drop("kmsKeyArn")),
    ("aws:kms/key:Key", _set("policy", '{"Version": "2012-10-17", "Statement": []}')),
    (EFS, _set("throughputMode", "bursting")),  # UpdateFileSystem
    (EFS, _set("lifecyclePolicies", [])),  # PutLifecycleConfiguration
    (MOUNT_TARGET, _set("securityGroups", ["sg-0000000000000000a"])),
    (ACCESS_POINT, _tagged),  # an access point updates its tags only
]


@pytest.mark.parametrize(("resource_type", "edit"), IN_PLACE_CASES)
def test_an_in_place_change_is_not_a_replacement(
    dev: Synthesis, resource_type: str, edit: Edit
) -> None:
    diff = diff_syntheses(dev, _edited(dev, resource_type, edit))
    (changed,) = diff.resources.changed
    assert changed.changes and changed.replaced_by == []
    assert refusals(diff) == [] and "(replaced)" not in render("dev", Path("b"), diff)


def test_a_model_store_access_point_is_replaced_but_not_refused(dev: Synthesis) -> None:
    """A changed gid replaces the team's access point, which holds no data: forecast, not
    refused (its files stay in the file system)."""

    def new_gid(inputs: dict[str, Any]) -> None:
        inputs["posixUser"] = {**inputs["posixUser"], "gid": 5999}

    diff = diff_syntheses(dev, _edited(dev, ACCESS_POINT, new_gid))
    changed = _edited_entry(diff, ACCESS_POINT)
    assert [r.key for r in changed.replaced_by] == ["posixUser.gid"]
    assert refusals(diff) == []


def _edited_entry(diff: SynthesisDiff, resource_type: str) -> Changed:
    """The changed entry of the one resource of ``resource_type`` a test edited."""
    (changed,) = [
        c for c in diff.resources.changed if c.resource_type == resource_type and c.changes
    ]
    return changed


def test_a_capacity_decrease_replaces_and_an_increase_does_not(dev: Synthesis) -> None:
    smaller = diff_syntheses(dev, _edited(dev, FILE_SYSTEM, _scaled("storageCapacity", 0.5)))
    larger = diff_syntheses(dev, _edited(dev, FILE_SYSTEM, _scaled("storageCapacity", 2)))
    assert [r.key for r in _edited_entry(smaller, FILE_SYSTEM).replaced_by] == ["storageCapacity"]
    assert [c.resource_type for c in larger.resources.changed] == [FILE_SYSTEM]
    assert larger.resources.changed[0].replaced_by == []


@pytest.mark.parametrize(
    ("edit", "key"),
    [(_set("subnetIds", ["subnet-0000000000000000a"]), "subnetIds"),
     (_set("instanceTypes", ["m7i.2xlarge"]), "instanceTypes"),
     (_set("amiType", "BOTTLEROCKET_x86_64"), "amiType")],
)  # fmt: skip
def test_a_node_group_replacement_is_forecast_but_not_refused(
    dev: Synthesis, edit: Edit, key: str
) -> None:
    """It holds no data: the diff says every system node goes, and lets it."""
    diff = diff_syntheses(dev, _edited(dev, NODE_GROUP, edit))
    (changed,) = diff.resources.changed
    assert {r.key.partition("[")[0] for r in changed.replaced_by} == {key}
    assert "eks/node_group.go" in changed.replaced_by[0].source
    assert refusals(diff) == []


def test_fewer_metadata_iops_replace_and_more_do_not(dev: Synthesis) -> None:
    def provisioned(iops: int) -> Edit:
        return _set("metadataConfiguration", {"mode": "USER_PROVISIONED", "iops": iops})

    base = _edited(dev, FILE_SYSTEM, provisioned(6000))
    fewer = diff_syntheses(base, _edited(base, FILE_SYSTEM, provisioned(3000)))
    more = diff_syntheses(base, _edited(base, FILE_SYSTEM, provisioned(12000)))
    assert [r.key for r in _edited_entry(fewer, FILE_SYSTEM).replaced_by] == [
        "metadataConfiguration.iops"
    ]
    assert "file system" in [c.refused_as for c in refusals(fewer)]
    assert [c.resource_type for c in more.resources.changed] == [FILE_SYSTEM]
    assert more.resources.changed[0].replaced_by == []


def test_a_replacement_drags_along_what_depends_on_it_and_refuses_the_file_system(
    dev: Synthesis,
) -> None:
    """A new VPC block replaces the VPC; its subnets and groups carry its id in ForceNew
    inputs, and the file system theirs: the diff follows the property dependencies."""
    diff = diff_syntheses(dev, _edited(dev, "aws:ec2/vpc:Vpc", _set("cidrBlock", "10.99.0.0/16")))
    replaced = {c.resource_type for c in diff.resources.changed if c.replaced_by}
    assert {"aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", FILE_SYSTEM} <= replaced
    (file_system,) = [c for c in diff.resources.changed if c.resource_type == FILE_SYSTEM]
    assert file_system.changes == []  # its own inputs read the same offline
    assert "which is replaced" in file_system.replaced_by[0].source
    assert "file system" in [c.refused_as for c in refusals(diff)]
    text = render("dev", Path("b"), diff)
    assert f"~ {file_system.name} (replaced)" in text
    # the EKS component's subnets update in place: it is not dragged along
    assert EKS not in replaced


def test_a_dependency_updated_in_place_drags_nothing(dev: Synthesis) -> None:
    diff = diff_syntheses(dev, _edited(dev, "aws:ec2/vpc:Vpc", _tagged))
    assert [c.resource_type for c in diff.resources.changed] == ["aws:ec2/vpc:Vpc"]
    assert refusals(diff) == []


def test_replace_on_changes_of_the_resource_itself_replaces(dev: Synthesis) -> None:
    resources = dict(dev.resources)
    urn = next(u for u, r in resources.items() if r.type == BUCKET)
    entry = resources[urn].to_json()
    resources[urn] = ResourceRecord.from_json({**entry, "replaceOnChanges": ["tags"]})
    marked = Synthesis(dev.directory, resources, dev.manifests, dev.helm)
    diff = diff_syntheses(marked, _edited(marked, BUCKET, _tagged))
    (changed,) = [c for c in diff.resources.changed if c.resource_type == BUCKET]
    assert [(r.key, r.source) for r in changed.replaced_by] == [("tags.review", "replaceOnChanges")]
    assert refusals(diff) == [changed]
    # its configuration resources name it (bucket ForceNew) and are replaced with it
    dragged = [c for c in diff.resources.changed if c is not changed]
    assert dragged and all(
        c.resource_type.startswith("aws:s3/bucket") and [r.key for r in c.replaced_by] == ["bucket"]
        for c in dragged
    )


def _manifest_edit(dev: Synthesis, prefix: str, edit: Callable[[dict[str, Any]], None]) -> Any:
    manifests = copy.deepcopy(dev.manifests)
    name = next(n for n in manifests if n.startswith(prefix))
    edit(manifests[name])
    return diff_syntheses(dev, Synthesis(dev.directory, dev.resources, manifests, dev.helm))


def test_immutable_kubernetes_fields_replace_and_a_volume_is_refused(dev: Synthesis) -> None:
    def storage_class_name(m: dict[str, Any]) -> None:
        m["spec"]["storageClassName"] = "other"

    def parameters(m: dict[str, Any]) -> None:
        m["parameters"] = {**(m.get("parameters") or {}), "type": "io2"}

    def label(m: dict[str, Any]) -> None:
        m["metadata"]["labels"] = {"review": "x"}

    # replaced, but bound to a retained volume: no data goes, so it is flagged, not refused,
    # and flagged as left Pending, since its volume stays Released to the old claim
    claim = _manifest_edit(dev, "PersistentVolumeClaim.ml-dev.", storage_class_name)
    assert refusals(claim) == []
    (flagged,) = retained_replacements(claim)
    assert flagged.released_volume.startswith(("shared-lustre-", "lustre-"))
    storage_class = _manifest_edit(dev, "StorageClass.", parameters)
    (changed,) = storage_class.manifests.changed
    assert changed.replaced_by and not changed.refused_as  # replaced, but holds no data

    def reclaim(m: dict[str, Any]) -> None:
        m["reclaimPolicy"] = "Retain" if m["reclaimPolicy"] == "Delete" else "Delete"

    # the API server refuses the update, pulumi-kubernetes' table lacks it: the class's own
    # replaceOnChanges (components/cluster.py, storage_class) makes it a replacement
    (changed,) = _manifest_edit(dev, "StorageClass.", reclaim).manifests.changed
    assert [(r.key, r.source) for r in changed.replaced_by] == [
        ("reclaimPolicy", "replaceOnChanges")
    ]
    relabelled = _manifest_edit(dev, "PersistentVolumeClaim.", label)
    assert relabelled.manifests.changed[0].replaced_by == []


def test_kubernetes_type_tokens() -> None:
    assert kubernetes_type({"apiVersion": "v1", "kind": "PersistentVolumeClaim"}) == (
        "kubernetes:core/v1:PersistentVolumeClaim"
    )
    assert kubernetes_type({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass"}) == (
        "kubernetes:storage.k8s.io/v1:StorageClass"
    )


def _base_with(
    synthesized: dict[str, StackResult], tmp_path: Path, resource_type: str, edit: Edit
) -> Path:
    """A copy of dev's synthesis with one record edited: synthesizing now undoes the edit."""
    base = tmp_path / "base" / "dev"
    shutil.copytree(synthesized["dev"].written.directory, base)
    entries = json.loads((base / "resources.json").read_text())
    edit(next(e for e in entries if e["type"] == resource_type)["inputs"])
    (base / "resources.json").write_text(json.dumps(entries))
    return base


@pytest.mark.usefixtures("replay_synthesis")
@pytest.mark.parametrize(
    ("options", "status"), [([], 1), (["--gate"], 1), (["--allow-replace", "--gate"], 0)]
)
def test_the_command_refuses_a_replacement_unless_allowed(
    synthesized: dict[str, StackResult],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    options: list[str],
    status: int,
) -> None:
    base = _base_with(synthesized, tmp_path, FILE_SYSTEM, _set("deploymentType", "PERSISTENT_1"))
    argv = ["diff", "dev", "--base", str(base), "--out", str(tmp_path / "out"), *options]
    assert synth_main(argv) == status
    out = capsys.readouterr().out
    assert "! file system: aws:fsx/lustreFileSystem:LustreFileSystem" in out


@pytest.mark.usefixtures("replay_synthesis")
@pytest.mark.parametrize(("options", "status"), [([], 1), (["--gate"], 0)])
def test_the_command_does_not_refuse_an_update(
    synthesized: dict[str, StackResult],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    options: list[str],
    status: int,
) -> None:
    base = _base_with(synthesized, tmp_path, FILE_SYSTEM, _tagged)
    argv = ["diff", "dev", "--base", str(base), "--out", str(tmp_path / "out"), *options]
    assert synth_main(argv) == status
    out = capsys.readouterr().out
    assert "(replaced)" not in out and "refused" not in out


@pytest.mark.slow
def test_moving_an_association_to_a_new_path_is_refused_even_when_replacing_is_allowed(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The new association is created while the old one still holds the S3 prefix."""

    def move(platform: dict[str, Any]) -> None:
        association = next(a for a in platform["storage"]["lustre"]["associations"]
                           if a["fileSystemPath"] == "/checkpoints")  # fmt: skip
        association["fileSystemPath"] = "/ckpt"
        platform["storage"]["lustre"]["checkpointPath"] = "/ckpt"

    project = project_copy(tmp_path, "dev", move)
    base = synthesized["dev"].written.directory
    argv = ["diff", "dev", "--base", str(base), "--out", str(tmp_path / "out"), "--allow-replace"]
    assert synth_main([*argv, "--project-dir", str(project)]) == 1
    out = capsys.readouterr().out
    assert "creates AWS refuses: 1" in out
    (line,) = [x for x in out.splitlines() if "collides with" in x]
    assert "storage-dra/ckpt" in line and "storage-dra/checkpoints" in line
    assert "dataRepositoryPath" in line and "fileSystemPath" not in line


def test_an_association_on_its_own_paths_collides_with_nothing(dev: Synthesis) -> None:
    resources = dict(dev.resources)
    urn = next(u for u, r in resources.items() if r.type == ASSOCIATION)
    entry = copy.deepcopy(resources[urn].to_json())
    del resources[urn]
    moved = {**entry["inputs"], "fileSystemPath": "/elsewhere",
             "dataRepositoryPath": entry["inputs"]["dataRepositoryPath"].rstrip("/") + "-v2/"}  # fmt: skip
    new_urn = urn.replace(entry["name"], "storage-dra/elsewhere")
    resources[new_urn] = ResourceRecord.from_json(
        {**entry, "urn": new_urn, "name": "storage-dra/elsewhere", "inputs": moved}
    )
    new = Synthesis(dev.directory, resources, dev.manifests, dev.helm)
    assert association_collisions(dev, new) == []
    inside = {**moved, "fileSystemPath": entry["inputs"]["fileSystemPath"] + "/sub"}
    resources[new_urn] = ResourceRecord.from_json({**entry, "urn": new_urn, "inputs": inside})
    (collision,) = association_collisions(dev, Synthesis(dev.directory, resources, {}, {}))
    assert "fileSystemPath" in collision  # a path inside the old one overlaps it


@pytest.mark.slow
def test_moving_the_training_zone_replaces_the_file_system_as_the_docs_show(
    synthesized: dict[str, StackResult],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def move(platform: dict[str, Any]) -> None:
        network = platform["network"]
        other = next(z for z in network["availabilityZones"] if z != network["trainingZone"])
        for pool in platform["nodePools"]:
            if pool.get("zone") == network["trainingZone"]:
                pool["zone"] = other  # pinned beside the file system, so it moves with it
        network["trainingZone"] = other

    project = project_copy(tmp_path, "dev", move)
    # Both commands synthesize the same copy into the same --out: synthesis is deterministic
    # (tests/test_synth.py), so the second reads back the first's instead of repeating it.
    synthesized_once: dict[tuple[str, Path, Path], StackResult] = {}

    def once(stack: str, out: Path, root: Path = REPOSITORY_ROOT) -> StackResult:
        if (stack, out, root) not in synthesized_once:
            synthesized_once[stack, out, root] = synthesize_stack(stack, out, root)
        return synthesized_once[stack, out, root]

    monkeypatch.setattr("synth.__main__.synthesize_stack", once)
    base = synthesized["dev"].written.directory
    argv = ["diff", "dev", "--base", str(base), "--out", str(tmp_path / "out")]
    assert synth_main([*argv, "--project-dir", str(project)]) == 1
    out = capsys.readouterr().out
    assert len(synthesized_once) == 1
    assert "~ aws:fsx/lustreFileSystem:LustreFileSystem storage-lustre (replaced)" in out
    assert "! file system: aws:fsx/lustreFileSystem:LustreFileSystem storage-lustre" in out
    assert synth_main([*argv, "--project-dir", str(project), "--allow-replace", "--gate"]) == 0
    assert len(synthesized_once) == 1
    capsys.readouterr()
    page = (REPOSITORY_ROOT / "docs" / "concepts" / "offline-synthesis.md").read_text()
    section = page[page.index("## What changed? (`synth diff`)") :]
    first = section.index("```\n") + 4
    shown = section[first : section.index("```\n", first)]
    assert shown == out.replace(str(base), "build/base/dev"), (
        "docs/concepts/offline-synthesis.md's diff example is stale"
    )


# --- every type the stacks create is audited, and every rule of the audit fires ------------

EDITED: Final = "edited-by-test"


def _set_path(value: dict[str, Any], path: str, new: Any) -> None:
    *parents, leaf = path.split(".")
    for key in parents:
        child = value.get(key)
        if not isinstance(child, dict):
            child = value[key] = {}
        value = child
    value[leaf] = new


def _get_path(value: Any, path: str) -> Any:
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _changed_type_of(
    synthesis: Synthesis, resource_type: str, path: str, new: Any = EDITED
) -> SynthesisDiff:
    """``synthesis`` with ``path`` of its first object of ``resource_type`` set to ``new``:
    a Kubernetes object's manifest file, any other resource's record."""
    if resource_type == HELM_RELEASE:  # compared as its helm/ file
        helm = copy.deepcopy(synthesis.helm)
        _set_path(helm[min(helm)], path, new)
        edited = Synthesis(synthesis.directory, synthesis.resources, synthesis.manifests, helm)
        return diff_syntheses(synthesis, edited)
    if resource_type.startswith("kubernetes:"):
        manifests = copy.deepcopy(synthesis.manifests)
        name = next(n for n, m in sorted(manifests.items()) if kubernetes_type(m) == resource_type)
        _set_path(manifests[name], path, new)
        edited = Synthesis(synthesis.directory, synthesis.resources, manifests, synthesis.helm)
        return diff_syntheses(synthesis, edited)
    return diff_syntheses(
        synthesis, _edited(synthesis, resource_type, lambda i: _set_path(i, path, new))
    )


def _stacks_records(synthesized: dict[str, StackResult]) -> dict[str, str]:
    """Every resource type any stack creates (custom resources, and the providers' components:
    the EKS cluster whose inputs reach its cluster, pulumi-kubernetes' ConfigFile and
    Directory), with the first stack that has it. The platform's own components
    (``trainingplatform:``) have no provider to replace them."""
    found: dict[str, str] = {}
    for stack, result in synthesized.items():
        for record in result.records:
            if record.custom or not record.type.startswith("trainingplatform:"):
                found.setdefault(record.type, stack)
    return found


def test_every_type_the_stacks_create_is_in_the_audited_table(
    synthesized: dict[str, StackResult],
) -> None:
    """A new resource type cannot slip in unchecked: add its provider's replacing fields to
    synth/replacements.py REPLACED_BY (an empty list where nothing but its identity replaces
    it, with where that was read)."""
    created = _stacks_records(synthesized)
    missing = sorted(set(created) - set(REPLACED_BY))
    assert missing == []
    # Components count: the JobSet CRDs everywhere, the legacy operator where a stack turns
    # trainer.legacyTrainingOperator on (staging).
    assert {"kubernetes:yaml/v2:ConfigFile", "kubernetes:kustomize/v2:Directory", EKS} <= set(
        created
    )


def test_the_audit_cites_files_that_exist_upstream() -> None:
    """terraform-provider-aws keeps VPC resources in internal/service/ec2 (vpc_*.go): there is
    no internal/service/vpc package, whatever Pulumi's ``aws:vpc`` module says."""
    table = audit_table()
    assert "internal/service/vpc/" not in table
    assert REPLACED_BY["aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"] == [
        Trigger(
            "securityGroupId",
            "terraform-provider-aws internal/service/ec2/vpc_security_group_ingress_rule.go"
            " (security_group_id ForceNew)",
        )
    ]
    for component in ("yaml/v2:ConfigFile", "kustomize/v2:Directory"):
        assert f"| `kubernetes:{component}` | nothing: a component resource;" in table


def test_the_docs_list_the_audit_as_the_table_says() -> None:
    page = (REPOSITORY_ROOT / AUDIT_PAGE).read_text()
    assert with_audit(page) == page, "run: scripts/synth reference --write"


@functools.cache
def _loaded(directory: Path) -> Synthesis:
    """A stack's synthesis read once per test process: the rule cases only read it (each edit
    copies what it changes), and parsing every manifest is most of a case's cost."""
    return load_synthesis(directory)


def _rule_cases() -> list[tuple[str, Trigger]]:
    return [
        (resource_type, trigger)
        for resource_type, triggers in sorted(REPLACED_BY.items())
        for trigger in triggers
        if trigger.when == "change"
    ]


@pytest.mark.parametrize(
    ("resource_type", "trigger"),
    _rule_cases(),
    ids=[f"{t.split(':')[-1]}.{r.path}" for t, r in _rule_cases()],
)
def test_each_rule_of_the_audit_replaces_a_synthesized_resource(
    synthesized: dict[str, StackResult], resource_type: str, trigger: Trigger
) -> None:
    """Each audited input, changed on a real record (or manifest) of the type, is forecast as
    a replacement with its rule. A type no stack creates (kept for a later change) is skipped,
    and so is a provider's input the stacks give as an unknown."""
    stack = _stacks_records(synthesized).get(resource_type)
    if stack is None:
        pytest.skip(f"no stack creates {resource_type}")
    synthesis = _loaded(synthesized[stack].written.directory)
    diff = _changed_type_of(synthesis, resource_type, trigger.path)
    entries = [
        c
        for c in (*diff.resources.changed, *diff.manifests.changed, *diff.helm.changed)
        if c.replaced_by
    ]
    keys = {(r.key, r.source) for c in entries for r in c.replaced_by}
    if trigger.only_if:  # the stacks' instance sets the flag: see the next test for without
        assert (trigger.path, trigger.source) in keys
        return
    assert any(key == trigger.path or key.startswith(trigger.path + ".") for key, _ in keys), keys


def test_user_data_replaces_only_with_replace_on_change(dev: Synthesis) -> None:
    """terraform-provider-aws internal/service/ec2/ec2_instance.go: customdiff.ForceNewIf
    ("user_data") when user_data_replace_on_change; without it the change is in place."""

    def new_user_data(flag: bool) -> Edit:
        def edit(inputs: dict[str, Any]) -> None:
            inputs["userData"] = inputs["userData"] + "\n# edited"
            inputs["userDataReplaceOnChange"] = flag

        return edit

    diff = diff_syntheses(dev, _edited(dev, INSTANCE, new_user_data(True)))
    (changed,) = rerun_replacements(diff)
    assert [r.key for r in changed.replaced_by] == ["userData"]
    assert changed not in refusals(diff)
    assert RERUN_NOTE in render("dev", Path("b"), diff)
    # the base had the flag too: only the new inputs decide
    base = _edited(dev, INSTANCE, _set("userDataReplaceOnChange", False))
    in_place = diff_syntheses(base, _edited(base, INSTANCE, new_user_data(False)))
    (changed,) = in_place.resources.changed
    assert changed.replaced_by == [] and rerun_replacements(in_place) == []


@pytest.mark.slow
def test_a_prod_quota_change_replaces_the_admin_client_which_runs_the_layout_again(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A team's Lustre quota is in the admin client's user data (layout_script): the change
    replaces the instance, which boots and lays the directories out again; nothing is
    refused, so the gate passes."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPOSITORY_ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    shutil.copytree(REPOSITORY_ROOT / "stacks", project / "stacks")
    stack_file = project / "stacks" / "Pulumi.prod.yaml"
    document = load_yaml(stack_file.read_text())
    team = document["config"]["eks-training-platform:platform"]["teams"][0]
    team["lustreQuotaGiB"] += 1000
    stack_file.write_text(yaml.safe_dump(document))
    base = synthesized["prod"].written.directory
    argv = ["diff", "prod", "--base", str(base), "--out", str(tmp_path / "out"), "--gate"]
    assert synth_main([*argv, "--project-dir", str(project)]) == 0
    out = capsys.readouterr().out
    assert "~ aws:ec2/instance:Instance storage-lustre-admin (replaced)" in out
    assert "user_data_replace_on_change" in out
    assert (
        f"  instances that boot again: 1\n    ! aws:ec2/instance:Instance storage-lustre-admin\n{RERUN_NOTE}"
        in out
    )


def test_deleting_an_association_on_a_releasing_path_says_what_stays_behind(dev: Synthesis) -> None:
    """FSx deletes an association without file-system data, but its released stubs and files
    not yet exported stay behind, linked to no bucket: the forecast says so, and the steps."""
    schedules = [
        r.name for r in dev.resources.values() if r.type == "aws:scheduler/schedule:Schedule"
    ]
    assert "storage-release/checkpoints" in schedules, schedules
    resources = dict(dev.resources)
    urn, record = next((u, r) for u, r in resources.items()
                       if r.type == ASSOCIATION and r.inputs["fileSystemPath"] == "/checkpoints")  # fmt: skip
    entry = copy.deepcopy(record.to_json())
    replaced = {**entry, "inputs": {**entry["inputs"], "dataRepositoryPath": "s3://other/ckpt/"}}
    resources[urn] = ResourceRecord.from_json(replaced)
    diff = diff_syntheses(dev, Synthesis(dev.directory, resources, dev.manifests, dev.helm))
    assert diff.unlinked_releasing == [f"{record.name} (/checkpoints)"]
    text = render("dev", dev.directory, diff)
    assert "associations on releasing paths deleted: 1" in text
    assert "without deleting file-system data or anything in S3" in text
    assert "released stubs and files not yet exported stay behind" in text
    assert "Restore the path's released files, export it" in text
    # Moved: the old one is removed, a new one added at another path.
    del resources[urn]
    moved_urn = urn.replace(entry["name"], "storage-dra/checkpoints-v2")
    resources[moved_urn] = ResourceRecord.from_json(
        {**entry, "urn": moved_urn, "name": "storage-dra/checkpoints-v2",
         "inputs": {**entry["inputs"], "fileSystemPath": "/checkpoints-v2"}}
    )  # fmt: skip
    moved = diff_syntheses(dev, Synthesis(dev.directory, resources, dev.manifests, dev.helm))
    assert moved.unlinked_releasing == [f"{record.name} (/checkpoints)"]
    # Unchanged, or on a path nothing releases: nothing to say.
    assert diff_syntheses(dev, dev).unlinked_releasing == []
    quiet = {u: r for u, r in resources.items() if r.name != "storage-release/checkpoints"}
    base = Synthesis(dev.directory, {u: r for u, r in dev.resources.items()
                                     if r.name != "storage-release/checkpoints"}, {}, {})  # fmt: skip
    assert diff_syntheses(base, Synthesis(dev.directory, quiet, {}, {})).unlinked_releasing == []


def _edited_named(base: Synthesis, resource_type: str, name: str, edit: Edit) -> Synthesis:
    """``base`` with the inputs of its resource of ``resource_type`` called ``name`` edited."""
    resources = dict(base.resources)
    (urn,) = [u for u, r in resources.items() if r.type == resource_type and r.name == name]
    entry = copy.deepcopy(resources[urn].to_json())
    edit(entry["inputs"])
    resources[urn] = ResourceRecord.from_json(entry)
    return Synthesis(base.directory, resources, base.manifests, base.helm)


def test_a_new_launch_template_version_replaces_the_admin_client(dev: Synthesis) -> None:
    """terraform-provider-aws internal/service/ec2/ec2_launch_template.go creates a new version
    on an update of the template's data, and internal/service/ec2/ec2_instance.go's
    CustomizeDiff forces a new instance when launch_template.version is $Latest and the latest
    version is not the instance's: the admin client is replaced, and boots its layout again."""
    admin = "storage-lustre-admin"
    (instance,) = [r for r in dev.resources.values() if r.type == INSTANCE and r.name == admin]
    assert instance.inputs["launchTemplate"]["version"] == "$Latest"
    (template,) = [
        r for r in dev.resources.values() if r.type == LAUNCH_TEMPLATE and r.name == admin
    ]
    assert template.urn in instance.property_dependencies["launchTemplate"]

    diff = diff_syntheses(
        dev, _edited_named(dev, LAUNCH_TEMPLATE, admin, _set("instanceType", "m7i.xlarge"))
    )
    by_type = {c.resource_type: c for c in diff.resources.changed}
    assert by_type[LAUNCH_TEMPLATE].replaced_by == []  # the template is updated in place
    replaced = by_type[INSTANCE]
    assert [r.key for r in replaced.replaced_by] == ["launchTemplate.version"]
    assert LATEST_VERSION_SOURCE in replaced.replaced_by[0].source
    assert rerun_replacements(diff) == [replaced]
    text = render("dev", Path("b"), diff)
    assert f"    ~ aws:ec2/instance:Instance {admin} (replaced)" in text
    assert f"instances that boot again: 1\n    ! aws:ec2/instance:Instance {admin}\n" in text
    assert replaced not in refusals(diff)

    # A description makes no new version; an instance pinned to a version keeps it.
    described = diff_syntheses(
        dev, _edited_named(dev, LAUNCH_TEMPLATE, admin, _set("description", "edited"))
    )
    assert [c.resource_type for c in described.resources.changed] == [LAUNCH_TEMPLATE]

    def pinned(inputs: dict[str, Any]) -> None:
        inputs["launchTemplate"] = {**inputs["launchTemplate"], "version": "3"}

    base = _edited(dev, INSTANCE, pinned)
    kept = diff_syntheses(
        base, _edited_named(base, LAUNCH_TEMPLATE, admin, _set("instanceType", "m7i.xlarge"))
    )
    assert [c.resource_type for c in kept.resources.changed] == [LAUNCH_TEMPLATE]


def test_a_lustre_upgrade_is_in_place_and_a_downgrade_replaces(
    synthesized: dict[str, StackResult],
) -> None:
    """pulumi-aws 7.51.1 (file_system_type_version): "Changing this value to a higher version
    triggers an in-place upgrade. Changing to a lower version forces resource replacement";
    versions compare by number (2.9 < 2.10). And a DRA's batch import flag updates in place."""
    synthesis = _loaded(synthesized["prod"].written.directory)

    def replaced(resource_type: str, path: str, value: Any) -> bool:
        diff = _changed_type_of(synthesis, resource_type, path, value)
        return any(c.replaced_by for c in diff.resources.changed)

    (lustre,) = [r for r in synthesis.resources.values() if r.type == FILE_SYSTEM]
    assert lustre.inputs["fileSystemTypeVersion"] == "2.15"
    assert not replaced(FILE_SYSTEM, "fileSystemTypeVersion", "2.16")
    assert not replaced(FILE_SYSTEM, "fileSystemTypeVersion", "2.100")
    assert replaced(FILE_SYSTEM, "fileSystemTypeVersion", "2.12")
    assert replaced(FILE_SYSTEM, "fileSystemTypeVersion", "2.9")
    association = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
    assert not replaced(association, "batchImportMetaDataOnCreate", False)
