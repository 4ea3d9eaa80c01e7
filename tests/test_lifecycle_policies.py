"""Resource options in the synthesis, and the lifecycle policies that read them.

The recording monitor keeps ``retainOnDelete``, ``deleteBeforeReplace``, ``replaceOnChanges`` and
``ignoreChanges`` of every registration; the offline gate hands them to the policies; and two
policies follow: nothing retained without protection, and a fixed-path association replaced
delete-first.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest
from pulumi_policy import PolicyResourceOptions, ResourceValidationArgs
from pulumi_policy.policy import PolicyCustomTimeouts, _NotApplicableError

from policies.offline import RecordedResourceOptions, evaluate, load_policy_config
from policies.rules import ALL_POLICIES
from policies.rules.lifecycle import FIXED_IDENTITIES, retain_on_delete
from synth.engine import ResourceRecord, synthesize
from synth.stackfile import StackFile
from tests.conftest import STACKS

POLICIES = {policy.name: policy for policy in ALL_POLICIES}
RETAINED = POLICIES["retained-resources-protected"]
ORDERED = POLICIES["fixed-names-delete-before-replace"]
ASSOCIATION = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"


def _program() -> None:
    aws.s3.Bucket(
        "kept",
        bucket="kept-bucket",
        opts=pulumi.ResourceOptions(
            retain_on_delete=True,
            delete_before_replace=True,
            replace_on_changes=["bucket"],
            ignore_changes=["tags"],
        ),
    )
    aws.s3.Bucket("plain")


@pytest.fixture(scope="module")
def recorded() -> dict[str, ResourceRecord]:
    stack_file = StackFile(project="p", stack="dev", config={}, secret_keys=[])
    run = synthesize(stack_file, _program, region="us-west-2", account_id="111122223333")
    return {record.name: record for record in run.records}


def test_registrations_keep_their_lifecycle_options(recorded: dict[str, ResourceRecord]) -> None:
    kept, plain = recorded["kept"], recorded["plain"]
    assert kept.retain_on_delete is True and kept.delete_before_replace is True
    assert kept.replace_on_changes == ["bucket"] and kept.ignore_changes == ["tags"]
    # Unset stays unset: the provider's diff decides the order, not a recorded false.
    assert plain.retain_on_delete is False and plain.delete_before_replace is None
    assert plain.replace_on_changes == [] and plain.ignore_changes == []


def test_options_round_trip_and_old_files_still_load(recorded: dict[str, ResourceRecord]) -> None:
    entry = json.loads(json.dumps(recorded["kept"].to_json()))
    assert entry["retainOnDelete"] is True and entry["deleteBeforeReplace"] is True
    assert entry["replaceOnChanges"] == ["bucket"] and entry["ignoreChanges"] == ["tags"]
    assert ResourceRecord.from_json(entry) == recorded["kept"]
    old = {k: v for k, v in entry.items() if k not in {"retainOnDelete", "deleteBeforeReplace",
                                                       "replaceOnChanges", "ignoreChanges"}}  # fmt: skip
    legacy = ResourceRecord.from_json(old)
    assert (legacy.retain_on_delete, legacy.delete_before_replace) == (False, None)
    assert legacy.replace_on_changes == [] == legacy.ignore_changes


def test_the_gate_hands_the_options_to_policies(recorded: dict[str, ResourceRecord]) -> None:
    options = RecordedResourceOptions(recorded["kept"])
    assert options.retain_on_delete is True and options.replace_on_changes == ["bucket"]
    assert options.delete_before_replace is True and options.ignore_changes == ["tags"]
    assert RecordedResourceOptions(recorded["plain"]).delete_before_replace is None


def _record(resource_type: str, inputs: dict[str, Any], **options: Any) -> ResourceRecord:
    return ResourceRecord.from_json(
        {
            "type": resource_type,
            "name": "r",
            "urn": f"urn:pulumi:dev::p::{resource_type}::r",
            "inputs": inputs,
            **options,
        }
    )


def _findings(policy: Any, record: ResourceRecord, stack: str = "dev") -> list[Any]:
    return evaluate([record], load_policy_config(stack), policies=[policy])


RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.mark.parametrize("stack", STACKS)
def test_a_retained_resource_must_be_protected(stack: str) -> None:
    bad = _findings(RETAINED, _record(RELEASE, {}, retainOnDelete=True), stack)
    assert [f.enforcementLevel for f in bad] == ["mandatory"]
    assert "retained on delete but not protected" in bad[0].message
    assert _findings(RETAINED, _record(RELEASE, {}, retainOnDelete=True, protect=True)) == []
    assert _findings(RETAINED, _record(RELEASE, {})) == []


def test_under_the_analyzer_the_retain_policy_does_not_apply() -> None:
    options = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
    args = ResourceValidationArgs(RELEASE, {}, "urn", "r", options, None, {})
    assert retain_on_delete(args) is None
    with pytest.raises(_NotApplicableError):
        RETAINED.validate(args, lambda message, urn: None)  # type: ignore[attr-defined]


def test_an_association_on_a_fixed_path_is_replaced_delete_first() -> None:
    inputs = {"fileSystemPath": "/checkpoints", "dataRepositoryPath": "s3://b/checkpoints"}
    bad = _findings(ORDERED, _record(ASSOCIATION, inputs))
    assert len(bad) == 1 and "fileSystemPath '/checkpoints'" in bad[0].message
    assert _findings(ORDERED, _record(ASSOCIATION, inputs, deleteBeforeReplace=True)) == []


def test_fixed_names_the_provider_orders_itself_pass() -> None:
    # The bridge answers delete-before-replace for a given autonamed input (bucket, name).
    assert FIXED_IDENTITIES["aws:s3/bucket:Bucket"].provider_orders_replacement
    assert _findings(ORDERED, _record("aws:s3/bucket:Bucket", {"bucket": "fixed"})) == []
    assert not FIXED_IDENTITIES[ASSOCIATION].provider_orders_replacement


IN_RETAINED_NAMESPACE = POLICIES["retained-objects-in-retained-namespaces"]
NAMESPACE = "kubernetes:core/v1:Namespace"
MARIADB = "kubernetes:k8s.mariadb.com/v1alpha1:MariaDB"


def _namespace_entry(name: str, **options: Any) -> dict[str, Any]:
    return {
        "type": NAMESPACE,
        "name": f"{name}-namespace",
        "urn": f"urn:pulumi:dev::p::{NAMESPACE}::{name}-namespace",
        "inputs": {"metadata": {"name": name}},
        **options,
    }


def _retained_in(resource_type: str, namespace: str) -> dict[str, Any]:
    inputs = (
        {"namespace": namespace}
        if resource_type == RELEASE
        else {"metadata": {"name": "db", "namespace": namespace}}
    )
    return {
        "type": resource_type,
        "name": "kept",
        "urn": f"urn:pulumi:dev::p::{resource_type}::kept",
        "inputs": inputs,
        "protect": True,
        "retainOnDelete": True,
    }


def _stack_findings(entries: list[dict[str, Any]], stack: str) -> list[Any]:
    records = [ResourceRecord.from_json(entry) for entry in entries]
    return evaluate(records, load_policy_config(stack), policies=[IN_RETAINED_NAMESPACE])


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_keeps_its_retained_objects_in_retained_namespaces(
    synthesized: dict[str, Any], stack: str
) -> None:
    findings = evaluate(
        synthesized[stack].records, load_policy_config(stack), policies=[IN_RETAINED_NAMESPACE]
    )
    assert findings == []


def test_prod_with_its_slurm_namespace_not_retained_is_refused(
    synthesized: dict[str, Any],
) -> None:
    """The shape of today's destroy failure: the database retained, its namespace deleted."""
    entries = [json.loads(json.dumps(r.to_json())) for r in synthesized["prod"].records]
    (namespace,) = [
        e for e in entries if e["type"] == NAMESPACE and e["inputs"]["metadata"]["name"] == "slurm"
    ]
    (database,) = [e for e in entries if e["type"] == MARIADB]
    # the database and the Secret of the passwords it was made with
    kept = [e for e in entries if e.get("retainOnDelete") and "slurm-accounting-db" in e["urn"]]
    assert {e["type"] for e in kept} == {MARIADB, "kubernetes:core/v1:Secret"}
    assert database["retainOnDelete"] is True
    namespace["retainOnDelete"] = False
    findings = _stack_findings(entries, "prod")
    assert sorted((f.urn, f.enforcementLevel) for f in findings) == sorted(
        (e["urn"], "mandatory") for e in kept
    )
    assert all("namespace 'slurm'" in f.message for f in findings)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("resource_type", [MARIADB, RELEASE], ids=["object", "helm-release"])
def test_a_retained_object_in_a_namespace_that_goes_is_refused(
    stack: str, resource_type: str
) -> None:
    kept = _retained_in(resource_type, "data")
    bad = _stack_findings([_namespace_entry("data", protect=True), kept], stack)
    assert [(f.urn, f.enforcementLevel) for f in bad] == [(kept["urn"], "mandatory")]
    assert "retained on delete, but its namespace 'data'" in bad[0].message
    retained = _namespace_entry("data", protect=True, retainOnDelete=True)
    assert _stack_findings([retained, kept], stack) == []
    # A namespace the stack does not own (a Helm release's createNamespace, kube-system) is
    # never deleted by a destroy; an object that is not retained goes with its namespace.
    assert _stack_findings([kept], stack) == []
    plain = {**kept, "retainOnDelete": False, "protect": False}
    assert _stack_findings([_namespace_entry("data"), plain], stack) == []


CRD_RELEASES = POLICIES["crd-releases-retained"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_protected_crd_release_of_the_stacks_is_retained(
    synthesized: dict[str, Any], stack: str
) -> None:
    """Uninstalling a CRD chart deletes its CRDs and every object of theirs: the retained
    accounting database would go with mariadb-operator-crds."""
    records = synthesized[stack].records
    crd_releases = [r for r in records if r.type == RELEASE and r.name.endswith("-crds")]
    assert {r.name for r in crd_releases} >= {"slurm-operator-crds", "mariadb-operator-crds"}
    assert evaluate(records, load_policy_config(stack), policies=[CRD_RELEASES]) == []
    for release in crd_releases:
        assert release.retain_on_delete == release.protect, release.name


@pytest.mark.parametrize("stack", STACKS)
def test_a_protected_crd_release_not_retained_is_refused(stack: str) -> None:
    crds = {"type": RELEASE, "name": "mariadb-operator-crds",
            "urn": f"urn:pulumi:dev::p::{RELEASE}::mariadb-operator-crds", "inputs": {}}  # fmt: skip
    bad = evaluate(
        [ResourceRecord.from_json({**crds, "protect": True})],
        load_policy_config(stack),
        policies=[CRD_RELEASES],
    )
    assert [f.enforcementLevel for f in bad] == ["mandatory"]
    assert "deleting its CRDs" in bad[0].message
    for options in ({"protect": True, "retainOnDelete": True}, {}):
        record = ResourceRecord.from_json({**crds, **options})
        assert evaluate([record], load_policy_config(stack), policies=[CRD_RELEASES]) == []
