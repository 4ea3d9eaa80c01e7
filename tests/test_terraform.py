"""The Terraform-plan export of every stack's AWS resources (synth/terraform.py).

The names are held against terraform-provider-aws's schema (synth/terraform_schema.json) and
the Pulumi side against the installed pulumi-aws SDK, so neither a misspelt Terraform attribute
nor a token pulumi-aws does not have can pass.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

import pulumi
import pytest

from synth.engine import ResourceRecord
from synth.run import StackResult
from synth.terraform import (
    EKS_CLUSTER,
    EKS_COMPONENT,
    TERRAFORM_TYPES,
    ExportError,
    attribute_name,
    terraform_plan,
)
from synth.terraform_schema import BINDINGS_PACKAGE, SchemaError, TerraformSchema, parse_binding
from tests.conftest import STACKS

SCHEMA = TerraformSchema.load()


def _aws_records(result: StackResult) -> list[ResourceRecord]:
    return [
        r
        for r in result.records
        if (r.custom and r.type.startswith("aws:")) or r.type == EKS_COMPONENT
    ]


def _plan(result: StackResult) -> dict[str, Any]:
    plan: dict[str, Any] = json.loads(
        (result.written.directory / "terraform-plan.json").read_text()
    )
    return plan


def _planned(plan: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["address"]: r for r in plan["planned_values"]["root_module"]["resources"]}


def _unknown_attributes(values: Any, schema: Mapping[str, Any], where: str) -> Iterator[str]:
    """Every attribute path in ``values`` that the schema does not declare, or shapes otherwise."""
    for name, value in values.items():
        if name not in schema:
            yield f"{where}.{name}"
            continue
        kind = schema[name]
        if isinstance(kind, dict):
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                yield f"{where}.{name} (a block: a list of objects)"
                continue
            for index, item in enumerate(value):
                yield from _unknown_attributes(item, kind["attributes"], f"{where}.{name}[{index}]")
        elif kind == "map" and not isinstance(value, dict):
            yield f"{where}.{name} (a map)"
        elif kind == "simple" and isinstance(value, (dict, list)):
            yield f"{where}.{name} (a single value)"


@pytest.mark.parametrize("stack", STACKS)
def test_every_aws_resource_is_exported_once(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    records = _aws_records(synthesized[stack])
    planned = _planned(_plan(synthesized[stack]))
    assert len(planned) == len(records)
    assert sorted(r["type"] for r in planned.values()) == sorted(
        TERRAFORM_TYPES[EKS_CLUSTER if r.type == EKS_COMPONENT else r.type] for r in records
    )


@pytest.mark.parametrize("stack", STACKS)
def test_every_exported_attribute_is_one_the_provider_declares(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    plan = _plan(synthesized[stack])
    problems = [
        problem
        for address, resource in _planned(plan).items()
        for problem in _unknown_attributes(resource["values"], SCHEMA.of(resource["type"]), address)
    ]
    configured = plan["configuration"]["root_module"]["resources"]
    problems += [
        f"{r['address']}.{name} (reference)"
        for r in configured
        for name in r["expressions"]
        if name not in SCHEMA.of(r["type"])
    ]
    assert problems == []


def test_the_schema_extract_covers_every_mapped_type_and_says_where_it_comes_from() -> None:
    assert set(SCHEMA.types) == set(TERRAFORM_TYPES.values())
    assert SCHEMA.source["package"] == BINDINGS_PACKAGE
    assert SCHEMA.source["terraformProviderAws"][0].startswith("6.")


def _sdk_class(token: str) -> type:
    """The pulumi-aws SDK class a token names (``aws:s3/bucket:Bucket`` -> ``s3.Bucket``)."""
    package, rest = token.split(":", 1)
    module = importlib.import_module(f"pulumi_{package}.{rest.split('/', 1)[0]}")
    return getattr(module, token.rsplit(":", 1)[1])  # type: ignore[no-any-return]


@pytest.mark.parametrize("token", sorted(TERRAFORM_TYPES))
def test_every_mapped_token_is_a_resource_of_the_installed_pulumi_aws(token: str) -> None:
    cls = _sdk_class(token)
    assert issubclass(cls, pulumi.CustomResource)
    source = inspect.getsource(cls._internal_init)  # type: ignore[attr-defined]
    registered = source.split("__init__(\n", 1)[1].split("'", 2)[1]
    assert registered == token


def test_pluralized_blocks_maps_and_documents_take_terraform_shapes(
    synthesized: dict[str, StackResult],
) -> None:
    planned = _planned(_plan(synthesized["prod"]))
    lifecycle = planned["aws_s3_bucket_lifecycle_configuration.storage-checkpoints"]["values"]
    assert "rules" not in lifecycle
    assert [rule["id"] for rule in lifecycle["rule"]] == [
        "abort-incomplete-multipart-uploads",
        "expire-noncurrent-versions",
        "transition-current-versions",
    ]
    assert lifecycle["rule"][0]["abort_incomplete_multipart_upload"] == [
        {"days_after_initiation": 7}
    ]
    # a list of blocks inside a list of blocks: each transition its own block
    assert lifecycle["rule"][2]["transition"] == [
        {"days": 30, "storage_class": "STANDARD_IA"},
        {"days": 90, "storage_class": "GLACIER_IR"},
    ]
    node_group = next(r for r in planned.values() if r["type"] == "aws_eks_node_group")["values"]
    assert isinstance(node_group["scaling_config"], list) and len(node_group["scaling_config"]) == 1
    assert isinstance(node_group["labels"], dict)
    template = next(r for r in planned.values() if r["type"] == "aws_launch_template")["values"]
    assert template["metadata_options"][0]["http_tokens"] == "required"
    key = next(r for r in planned.values() if r["type"] == "aws_kms_key")["values"]
    assert json.loads(key["policy"])["Statement"]


def test_an_input_from_another_resource_is_a_reference_not_a_value(
    synthesized: dict[str, StackResult],
) -> None:
    plan = _plan(synthesized["prod"])
    logging = "aws_s3_bucket_logging.storage-datasets"
    assert "bucket" not in _planned(plan)[logging]["values"]
    configured = {r["address"]: r for r in plan["configuration"]["root_module"]["resources"]}
    assert configured[logging]["expressions"]["bucket"]["references"] == [
        "aws_s3_bucket.storage-datasets.id",
        "aws_s3_bucket.storage-datasets",
    ]
    assert configured[logging]["expressions"]["target_bucket"]["references"][1] == (
        "aws_s3_bucket.storage-access-logs"
    )
    group = next(r for r in configured.values() if r["type"] == "aws_cloudwatch_log_group")
    assert group["expressions"]["kms_key_id"]["references"][0].endswith(".arn")
    change = next(c for c in plan["resource_changes"] if c["address"] == logging)
    assert change["change"]["actions"] == ["create"]
    assert change["change"]["after_unknown"]["bucket"] is True


POLICY_DOCUMENTS: Final = {
    "aws_iam_role_policy": "policy",
    "aws_iam_role": "assume_role_policy",
    "aws_s3_bucket_policy": "policy",
    "aws_sqs_queue_policy": "policy",
    "aws_kms_key": "policy",
}
"""Where the resources' policy documents sit; most name another resource (a bucket's, a
role's or a queue's ARN), which made the export once treat them as identifiers and drop them,
so checkov's IAM and bucket policy checks had nothing to read."""


@pytest.mark.parametrize("stack", STACKS)
def test_every_policy_document_is_in_the_plan_even_when_it_names_other_resources(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    plan = _plan(synthesized[stack])
    planned = _planned(plan)
    configured = {r["address"]: r for r in plan["configuration"]["root_module"]["resources"]}
    referencing = 0
    for address, resource in planned.items():
        attribute = POLICY_DOCUMENTS.get(resource["type"])
        if attribute is None:
            continue
        document = resource["values"].get(attribute)
        assert isinstance(document, str) and json.loads(document)["Statement"], address
        if attribute in configured[address]["expressions"]:
            referencing += 1  # it names another resource: both the text and the reference
    assert referencing, "no policy document names another resource?"


def test_the_eks_component_is_the_cluster_pulumi_eks_creates(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["prod"]
    component = next(r for r in result.records if r.type == EKS_COMPONENT)
    cluster = _planned(_plan(result))[f"aws_eks_cluster.{component.name}"]["values"]
    assert cluster["encryption_config"] == [
        {"provider": [{"key_arn": component.inputs["encryptionConfigKeyArn"]}],
         "resources": ["secrets"]}
    ]  # fmt: skip
    assert cluster["vpc_config"][0]["endpoint_public_access"] is False
    assert cluster["vpc_config"][0]["subnet_ids"] == component.inputs["privateSubnetIds"]
    assert cluster["enabled_cluster_log_types"] == component.inputs["enabledClusterLogTypes"]
    assert cluster["access_config"] == [
        {"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": True}
    ]


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("createOidcProvider", True, "create resources the export does not show"),
        ("skipDefaultNodeGroup", False, "create resources the export does not show"),
        ("corednsAddonOptions", {"enabled": True}, "create resources the export does not show"),
        ("kubernetesServiceIpAddressRange", "10.100.0.0/16", "has no place in the export"),
    ],
)
def test_an_eks_input_the_export_would_drop_is_refused(
    synthesized: dict[str, StackResult], key: str, value: Any, words: str
) -> None:
    """pulumi-eks makes resources of its own for some inputs, and others would vanish."""
    records = copy.deepcopy(synthesized["dev"].records)
    component = next(r for r in records if r.type == EKS_COMPONENT)
    component.inputs[key] = value
    with pytest.raises(ExportError, match=words):
        terraform_plan(records)


def test_the_clusters_key_is_a_reference_of_its_encryption_config(
    synthesized: dict[str, StackResult],
) -> None:
    plan = _plan(synthesized["prod"])
    component = next(r for r in synthesized["prod"].records if r.type == EKS_COMPONENT)
    configured = {r["address"]: r for r in plan["configuration"]["root_module"]["resources"]}
    references = configured[f"aws_eks_cluster.{component.name}"]["expressions"][
        "encryption_config"
    ]["references"]
    assert references[1] == "aws_kms_key.ml-training-prod-secrets"


def test_a_property_the_schema_lacks_is_refused_not_guessed(
    synthesized: dict[str, StackResult],
) -> None:
    records = copy.deepcopy(synthesized["dev"].records)
    bucket = next(r for r in records if r.type == "aws:s3/bucket:Bucket")
    bucket.inputs["objectLockEnabledd"] = True
    with pytest.raises(ExportError, match=r"aws_s3_bucket\.storage-.*objectLockEnabledd"):
        terraform_plan(records)
    del bucket.inputs["objectLockEnabledd"]
    index = records.index(bucket)
    records[index] = dataclasses.replace(
        bucket, type="aws:s3/bucketObjectLockConfiguration:BucketObjectLockConfiguration"
    )
    with pytest.raises(ExportError, match="TERRAFORM_TYPES"):
        terraform_plan(records)


@pytest.mark.parametrize(
    ("pulumi_name", "terraform_name"),
    [("rules", "rule"), ("inlinePolicies", "inline_policy"), ("tagSpecifications",
     "tag_specifications"), ("cidrIpv4", "cidr_ipv4"), ("s3", "s3")],
)  # fmt: skip
def test_attribute_names_follow_the_schema(pulumi_name: str, terraform_name: str) -> None:
    schema = {"rule": "simple", "inline_policy": "simple", "tag_specifications": "simple",
              "cidr_ipv4": "simple", "s3": "simple"}  # fmt: skip
    assert attribute_name(pulumi_name, schema, "x") == terraform_name


BINDING = """\
function thingNestedToHclTerraform(struct) {
    const attrs = {
        inner_value: {
            value: cdktf.numberToHclTerraform(struct.innerValue),
            isBlock: false,
            type: "simple",
            storageClassType: "number",
        },
    };
    return attrs;
}
class Thing extends cdktf.TerraformResource {
    synthesizeHclAttributes() {
        const attrs = {
            name: {
                value: cdktf.stringToHclTerraform(this._name),
                isBlock: false,
                type: "simple",
                storageClassType: "string",
            },
            tags: {
                value: cdktf.hashMapperHcl(cdktf.stringToHclTerraform)(this._tags),
                isBlock: false,
                type: "map",
                storageClassType: "stringMap",
            },
            nested: {
                value: cdktf.listMapperHcl(thingNestedToHclTerraform, true)(this._nested),
                isBlock: true,
                type: "set",
                storageClassType: "ThingNestedList",
            },
        };
        return attrs;
    }
}
Thing.tfResourceType = "aws_thing";
    terraformGeneratorMetadata: { providerName: 'aws', providerVersion: '6.25.0' },
"""


def test_a_binding_module_parses_into_names_and_nesting() -> None:
    assert parse_binding(BINDING) == (
        "aws_thing",
        "6.25.0",
        {
            "name": "simple",
            "tags": "map",
            "nested": {"block": "set", "attributes": {"inner_value": "simple"}},
        },
    )
    with pytest.raises(SchemaError, match="block without its mapping function"):
        parse_binding(BINDING.replace("thingNestedToHclTerraform, true", "other, true"))
    with pytest.raises(SchemaError, match="not a CDKTF resource binding"):
        parse_binding("module.exports = {};")
