"""A stack's AWS resources in the Terraform plan JSON shape, for scanners that read Terraform.

checkov's ``terraform_plan`` framework (``checkov/terraform/plan_parser.py``) reads
``planned_values.root_module.resources`` (type, name, address, values),
``configuration.root_module.resources`` (``expressions`` with the ``references`` that connect
resources in its graph) and ``resource_changes``. This module writes that shape from the
engine's records:

- resource types are terraform-provider-aws's (:data:`TERRAFORM_TYPES`, as pulumi-aws's
  ``provider/cmd/pulumi-resource-aws/bridge-metadata.json`` maps its tokens), attribute names
  and nesting are those of the provider's schema (:mod:`synth.terraform_schema`): a Pulumi
  property is its Terraform attribute in camelCase, pluralized where Pulumi pluralizes a
  repeated block (``rules`` for ``rule``); a property the schema lacks is an error, never a
  guess;
- nested objects become the lists of blocks a plan shows, whichever way Pulumi flattened them;
  a JSON document given as an object becomes the string Terraform holds;
- an input that carries another exported resource's id (a property dependency) is left out of
  ``values`` and given as a reference, as a plan shows a value known only after apply;
- pulumi-eks's ``Cluster`` component stands for the ``aws_eks_cluster`` it creates.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from synth.engine import ResourceRecord
from synth.terraform_schema import SCHEMA_FILE, SchemaError, TerraformSchema, extract

EKS_COMPONENT: Final = "eks:index:Cluster"
EKS_CLUSTER: Final = "aws:eks/cluster:Cluster"
PROVIDER: Final = "pulumi:providers:aws"
FORMAT_VERSION: Final = "1.2"
TERRAFORM_VERSION: Final = "0.0.0+synth"
"""Readers require the key (checkov's ``context_parsers/tf_plan``); a semver no Terraform
release has, so nothing mistakes the export for a real plan."""
TERRAFORM_TYPES: Final[Mapping[str, str]] = {
    "aws:amp/workspace:Workspace": "aws_prometheus_workspace",
    "aws:cloudtrail/trail:Trail": "aws_cloudtrail",
    "aws:cloudwatch/eventRule:EventRule": "aws_cloudwatch_event_rule",
    "aws:cloudwatch/eventTarget:EventTarget": "aws_cloudwatch_event_target",
    "aws:cloudwatch/logGroup:LogGroup": "aws_cloudwatch_log_group",
    "aws:cloudwatch/metricAlarm:MetricAlarm": "aws_cloudwatch_metric_alarm",
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": "aws_default_security_group",
    "aws:ec2/eip:Eip": "aws_eip",
    "aws:ec2/instance:Instance": "aws_instance",
    "aws:ec2/flowLog:FlowLog": "aws_flow_log",
    "aws:ec2/internetGateway:InternetGateway": "aws_internet_gateway",
    "aws:ec2/launchTemplate:LaunchTemplate": "aws_launch_template",
    "aws:ec2/natGateway:NatGateway": "aws_nat_gateway",
    "aws:ec2/placementGroup:PlacementGroup": "aws_placement_group",
    "aws:ec2/route:Route": "aws_route",
    "aws:ec2/routeTable:RouteTable": "aws_route_table",
    "aws:ec2/routeTableAssociation:RouteTableAssociation": "aws_route_table_association",
    "aws:ec2/securityGroup:SecurityGroup": "aws_security_group",
    "aws:ec2/subnet:Subnet": "aws_subnet",
    "aws:ec2/subnetCidrReservation:SubnetCidrReservation": "aws_ec2_subnet_cidr_reservation",
    "aws:ec2/vpc:Vpc": "aws_vpc",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "aws_vpc_endpoint",
    "aws:ec2transitgateway/vpcAttachment:VpcAttachment": "aws_ec2_transit_gateway_vpc_attachment",
    "aws:eks/accessEntry:AccessEntry": "aws_eks_access_entry",
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": (
        "aws_eks_access_policy_association"
    ),
    "aws:eks/addon:Addon": "aws_eks_addon",
    "aws:eks/cluster:Cluster": "aws_eks_cluster",
    "aws:eks/nodeGroup:NodeGroup": "aws_eks_node_group",
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": "aws_eks_pod_identity_association",
    "aws:efs/accessPoint:AccessPoint": "aws_efs_access_point",
    "aws:efs/backupPolicy:BackupPolicy": "aws_efs_backup_policy",
    "aws:efs/fileSystem:FileSystem": "aws_efs_file_system",
    "aws:efs/fileSystemPolicy:FileSystemPolicy": "aws_efs_file_system_policy",
    "aws:efs/mountTarget:MountTarget": "aws_efs_mount_target",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": (
        "aws_fsx_data_repository_association"
    ),
    "aws:fsx/lustreFileSystem:LustreFileSystem": "aws_fsx_lustre_file_system",
    "aws:iam/role:Role": "aws_iam_role",
    "aws:iam/rolePolicy:RolePolicy": "aws_iam_role_policy",
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "aws_iam_role_policy_attachment",
    "aws:kms/alias:Alias": "aws_kms_alias",
    "aws:kms/key:Key": "aws_kms_key",
    # pulumi-aws 7 gave the BucketV2 family the plain names (6.x mapped Bucket to the legacy
    # aws_s3_bucket_legacy); the settings are the provider's separate resources.
    "aws:s3/bucket:Bucket": "aws_s3_bucket",
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": (
        "aws_s3_bucket_lifecycle_configuration"
    ),
    "aws:s3/bucketLogging:BucketLogging": "aws_s3_bucket_logging",
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": "aws_s3_bucket_ownership_controls",
    "aws:s3/bucketPolicy:BucketPolicy": "aws_s3_bucket_policy",
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": "aws_s3_bucket_public_access_block",
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        "aws_s3_bucket_server_side_encryption_configuration"
    ),
    "aws:s3/bucketVersioning:BucketVersioning": "aws_s3_bucket_versioning",
    "aws:scheduler/schedule:Schedule": "aws_scheduler_schedule",
    "aws:sqs/queue:Queue": "aws_sqs_queue",
    "aws:sqs/queuePolicy:QueuePolicy": "aws_sqs_queue_policy",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": (
        "aws_vpc_security_group_egress_rule"
    ),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": (
        "aws_vpc_security_group_ingress_rule"
    ),
}
"""Pulumi resource token -> terraform-provider-aws resource type, for every AWS type a stack
creates. A new type goes here and into ``terraform_schema.json`` (``scripts/terraform-schema``)."""
_CAMEL_HUMP: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_ADDRESS_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")


class ExportError(Exception):
    """A resource or property the export cannot name as Terraform does (the message says which)."""


def terraform_type(token: str) -> str:
    """The Terraform resource type of a Pulumi resource token.

    Raises:
        ExportError: :data:`TERRAFORM_TYPES` does not list the token.
    """
    if token not in TERRAFORM_TYPES:
        raise ExportError(f"{token}: no Terraform type in synth/terraform.py TERRAFORM_TYPES")
    return TERRAFORM_TYPES[token]


def _singulars(name: str) -> list[str]:
    """What a pluralized Terraform block name was (``policies`` -> ``policy``, ``rules``)."""
    forms = []
    if name.endswith("ies"):
        forms.append(name[:-3] + "y")
    if name.endswith("es"):
        forms.append(name[:-2])
    if name.endswith("s"):
        forms.append(name[:-1])
    return forms


def attribute_name(pulumi_name: str, schema: Mapping[str, Any], where: str) -> str:
    """The Terraform attribute a Pulumi property stands for, as the schema names it.

    Raises:
        ExportError: no attribute of the schema matches.
    """
    snake = _CAMEL_HUMP.sub("_", pulumi_name).lower()
    for candidate in (snake, *_singulars(snake)):
        if candidate in schema:
            return candidate
    raise ExportError(f"{where}.{pulumi_name}: the Terraform schema has no {snake!r}")


def terraform_values(
    inputs: Mapping[str, Any], schema: Mapping[str, Any], where: str
) -> dict[str, Any]:
    """One resource's (or nested block's) Pulumi inputs as Terraform attributes.

    Args:
        inputs: Pulumi property -> value.
        schema: the Terraform schema of the resource or block.
        where: what to name in an error (``aws_s3_bucket.data``).

    Raises:
        ExportError: a property the schema has no attribute for.
    """
    values: dict[str, Any] = {}
    for key, value in inputs.items():
        attribute = attribute_name(key, schema, where)
        kind = schema[attribute]
        if isinstance(kind, dict):
            items = value if isinstance(value, list) else [value]
            if not all(isinstance(item, dict) for item in items):
                raise ExportError(f"{where}.{attribute}: a block, given {value!r}")
            values[attribute] = [
                terraform_values(item, kind["attributes"], f"{where}.{attribute}") for item in items
            ]
        elif kind == "simple" and isinstance(value, (dict, list)):
            values[attribute] = json.dumps(value, sort_keys=True)
        else:
            values[attribute] = value
    return values


EKS_MAPPED_INPUTS: Final = frozenset({
    "name", "serviceRole", "version", "enabledClusterLogTypes", "bootstrapSelfManagedAddons",
    "endpointPrivateAccess", "endpointPublicAccess", "publicAccessCidrs", "clusterSecurityGroup",
    "publicSubnetIds", "privateSubnetIds", "encryptionConfigKeyArn", "authenticationMode",
    "tags",
})  # fmt: skip
"""The component's inputs that become the ``aws_eks_cluster``'s (:func:`eks_cluster_inputs`)."""
EKS_QUIET_INPUTS: Final = {
    "createOidcProvider": False,
    "skipDefaultNodeGroup": True,
    "skipDefaultSecurityGroups": True,
    "useDefaultVpcCni": True,
    "corednsAddonOptions": {"enabled": False},
    "kubeProxyAddonOptions": {"enabled": False},
}
"""Inputs that make pulumi-eks create resources of its own unless they hold these values
(an OIDC provider, a node group, security groups, a VPC CNI manifest, add-ons): the export
shows only the cluster, so any other value is refused rather than left unscanned."""
EKS_UNUSED_INPUTS: Final = frozenset({"vpcId", "nodeAssociatePublicIpAddress"})
"""Inputs only the resources above use (the security groups' VPC, the node group's addresses)."""


def _check_eks_inputs(component: ResourceRecord) -> None:
    for key, value in component.inputs.items():
        if key in EKS_MAPPED_INPUTS or key in EKS_UNUSED_INPUTS:
            continue
        if key not in EKS_QUIET_INPUTS:
            raise ExportError(
                f"{component.urn}: eks:index:Cluster input {key} has no place in the export "
                "(synth/terraform.py EKS_MAPPED_INPUTS): map it, or say why it creates nothing"
            )
        quiet = EKS_QUIET_INPUTS[key]
        matches = (
            all(value.get(k) == v for k, v in quiet.items())
            if isinstance(quiet, dict) and isinstance(value, dict)
            else value == quiet
        )
        if not matches:
            raise ExportError(
                f"{component.urn}: eks:index:Cluster input {key}={value!r} makes pulumi-eks "
                f"create resources the export does not show (expected {quiet!r})"
            )


def eks_cluster_inputs(component: ResourceRecord) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The ``aws.eks.Cluster`` inputs pulumi-eks derives from its ``Cluster`` component's.

    As ``nodejs/eks/cluster/cluster.ts`` (pulumi-eks) builds them: the role's ARN, the cluster
    security group and the public then private subnets in ``vpcConfig``, the key as the
    ``secrets`` encryption provider, ``accessConfig`` only with an authentication mode (with
    the creator's admin bootstrap), and the log types, version and add-on bootstrap as given.

    Returns:
        The inputs and their property dependencies, keyed as the ``aws.eks.Cluster`` inputs.

    Raises:
        ExportError: an input the export has no place for, or one that makes pulumi-eks create
            resources of its own.
    """
    _check_eks_inputs(component)
    given, depends = component.inputs, component.property_dependencies
    vpc_config = {
        "endpointPrivateAccess": given.get("endpointPrivateAccess"),
        "endpointPublicAccess": given.get("endpointPublicAccess"),
        "publicAccessCidrs": given.get("publicAccessCidrs"),
        "securityGroupIds": [given["clusterSecurityGroup"]]
        if given.get("clusterSecurityGroup")
        else None,
        "subnetIds": [*given.get("publicSubnetIds", []), *given.get("privateSubnetIds", [])],
    }
    inputs: dict[str, Any] = {
        "name": given.get("name"),
        "roleArn": given.get("serviceRole"),
        "version": given.get("version"),
        "enabledClusterLogTypes": given.get("enabledClusterLogTypes"),
        "bootstrapSelfManagedAddons": given.get("bootstrapSelfManagedAddons", True),
        "vpcConfig": {k: v for k, v in vpc_config.items() if v is not None},
        "tags": {"Name": f"{component.name}-eksCluster", **(given.get("tags") or {})},
    }
    if given.get("encryptionConfigKeyArn"):
        inputs["encryptionConfig"] = {
            "provider": {"keyArn": given["encryptionConfigKeyArn"]},
            "resources": ["secrets"],
        }
    if given.get("authenticationMode"):
        inputs["accessConfig"] = {
            "authenticationMode": given["authenticationMode"],
            "bootstrapClusterCreatorAdminPermissions": True,
        }
    dependencies = {
        "roleArn": depends.get("serviceRole", []),
        "encryptionConfig": depends.get("encryptionConfigKeyArn", []),
        "vpcConfig": [
            urn
            for key in ("clusterSecurityGroup", "publicSubnetIds", "privateSubnetIds")
            for urn in depends.get(key, [])
        ],
    }
    return {k: v for k, v in inputs.items() if v is not None}, dependencies


@dataclass(frozen=True)
class _Exported:
    token: str
    terraform_type: str
    name: str
    inputs: Mapping[str, Any]
    dependencies: Mapping[str, list[str]]

    @property
    def address(self) -> str:
        return f"{self.terraform_type}.{self.name}"


def _address_name(name: str) -> str:
    """A Terraform resource name for a Pulumi one: letters, digits, ``_`` and ``-``."""
    safe = _ADDRESS_UNSAFE.sub("_", name)
    return safe if safe[:1].isalpha() or safe[:1] == "_" else f"_{safe}"


def _exported(records: Iterable[ResourceRecord]) -> dict[str, _Exported]:
    """The records that stand for AWS resources, by URN, with unique addresses."""
    exported: dict[str, _Exported] = {}
    addresses: dict[str, str] = {}
    for record in records:
        if record.type == EKS_COMPONENT:
            inputs, dependencies = eks_cluster_inputs(record)
            token = EKS_CLUSTER
        elif record.custom and record.type.startswith("aws:"):
            token, inputs, dependencies = record.type, record.inputs, record.property_dependencies
        else:
            continue
        entry = _Exported(
            token, terraform_type(token), _address_name(record.name), inputs, dependencies
        )
        if entry.address in addresses:
            raise ExportError(
                f"{record.urn} and {addresses[entry.address]} both export as {entry.address}"
            )
        addresses[entry.address] = record.urn
        exported[record.urn] = entry
    return exported


def _reference(target: _Exported, value: Any) -> list[str]:
    """The references a plan gives for a value taken from ``target``: attribute, then resource."""
    sample = value[0] if isinstance(value, list) and value else value
    attribute = "arn" if isinstance(sample, str) and sample.startswith("arn:") else "id"
    return [f"{target.address}.{attribute}", target.address]


def _is_document(value: str) -> bool:
    """A JSON object or list given as text: a policy document, not an identifier."""
    if not value.lstrip().startswith(("{", "[")):
        return False
    try:
        json.loads(value)
    except ValueError:
        return False
    return True


def _is_identifier_value(value: Any) -> bool:
    """A string or a list of strings: what a plan would not know before the target exists.

    Not a JSON document that merely names another resource (a policy with a bucket's or a
    role's ARN in it): the document stays in ``values`` with its references, or checkov's
    policy checks would find nothing to read and pass without a word.
    """
    if isinstance(value, str):
        return not _is_document(value)
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def terraform_plan(
    records: list[ResourceRecord], schema: TerraformSchema | None = None
) -> dict[str, Any]:
    """The plan JSON a ``terraform plan`` of the same AWS resources would show, creating all.

    Args:
        records: one stack's registrations (``resources.json``).
        schema: the provider's schema; default: the extract beside this module.

    Raises:
        ExportError: a type or property the export cannot name (or the extract is missing).
    """
    try:
        schema = schema or TerraformSchema.load()
    except SchemaError as exc:
        raise ExportError(str(exc)) from exc
    exported = _exported(records)
    planned, configured, changes = [], [], []
    for entry in sorted(exported.values(), key=lambda e: e.address):
        try:
            type_schema = schema.of(entry.terraform_type)
        except SchemaError as exc:
            raise ExportError(str(exc)) from exc
        inputs = dict(entry.inputs)
        expressions: dict[str, Any] = {}
        unknown: dict[str, bool] = {}
        for key, urns in entry.dependencies.items():
            targets = [exported[urn] for urn in urns if urn in exported]
            if not targets or key not in inputs:
                continue
            attribute = attribute_name(key, type_schema, entry.address)
            value = inputs[key]
            expressions[attribute] = {
                "references": [r for target in targets for r in _reference(target, value)]
            }
            if _is_identifier_value(value):
                del inputs[key]
                unknown[attribute] = True
        values = terraform_values(inputs, type_schema, entry.address)
        common = {
            "address": entry.address,
            "mode": "managed",
            "type": entry.terraform_type,
            "name": entry.name,
        }
        planned.append({**common, "schema_version": 0, "values": values})
        configured.append({**common, "provider_config_key": "aws", "expressions": expressions})
        changes.append(
            {
                **common,
                "change": {
                    "actions": ["create"],
                    "before": None,
                    "after": values,
                    "after_unknown": unknown,
                },
            }
        )
    region = next((r.inputs.get("region") for r in records if r.type == PROVIDER), None)
    provider = {"name": "aws", "expressions": {"region": {"constant_value": region}}}
    return {
        "format_version": FORMAT_VERSION,
        "terraform_version": TERRAFORM_VERSION,
        "planned_values": {"root_module": {"resources": planned}},
        "resource_changes": changes,
        "configuration": {
            "provider_config": {"aws": provider},
            "root_module": {"resources": configured},
        },
        "exported_by": {
            "tool": "synth (offline synthesis under Pulumi's mock engine)",
            "terraform_schema": dict(schema.source),
        },
    }


def main(argv: list[str]) -> int:
    """``python -m synth.terraform PACKAGE_DIR``: write the schema extract for the mapped types.

    Args:
        argv: the unpacked bindings package's directory (``scripts/terraform-schema``).
    """
    if len(argv) != 1:
        print("usage: python -m synth.terraform UNPACKED_PACKAGE_DIR", file=sys.stderr)
        return 2
    try:
        document = extract(Path(argv[0]), TERRAFORM_TYPES.values())
    except SchemaError as exc:
        print(f"terraform-schema: {exc}", file=sys.stderr)
        return 1
    SCHEMA_FILE.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    print(f"wrote {SCHEMA_FILE.name}: {len(document['types'])} types")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
