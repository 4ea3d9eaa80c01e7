"""The FSx for Lustre file system: its security groups, log group and S3 associations.

PERSISTENT_2 in the training zone (next to the EFA pools), encrypted with the data key,
reachable only on the Lustre ports from the nodes that carry the client security group, and
linked to S3 through data repository associations, one bucket and prefix each, data flowing one
way on each path.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Final

import pulumi
import pulumi_aws as aws

from components.config import (
    DataRepositoryAssociationConfig,
    LustreConfig,
    PlatformConfig,
    association_bucket_name,
)
from components.config.storage import normalized_file_system_path
from components.storage.layout import no_squash_nid

LUSTRE_PORTS: Final = ((988, 988), (1018, 1023))
"""TCP ports Lustre clients and servers use, 988 and 1018-1023 (FSx for Lustre User Guide,
"File system access control with Amazon VPC":
https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html)."""


def _lustre_rules(
    client_group_id: pulumi.Input[str], *, efa_enabled: bool, towards: str
) -> list[dict[str, Any]]:
    """The file system's rules one way: Lustre ports with clients and itself (+ EFA traffic)."""
    peers = (
        ({"security_groups": [client_group_id]}, f"Lustre {towards} training nodes"),
        ({"self": True}, "Lustre between file servers"),
    )
    rules = [
        {"protocol": "tcp", "from_port": low, "to_port": high, **peer, "description": label}
        for low, high in LUSTRE_PORTS
        for peer, label in peers
    ]
    if efa_enabled:
        rules += [
            {"protocol": "-1", "from_port": 0, "to_port": 0, **peer,
             "description": label.replace("Lustre", "EFA")}
            for peer, label in peers
        ]  # fmt: skip
    return rules


def lustre_ingress(
    client_group_id: pulumi.Input[str], *, efa_enabled: bool = False
) -> list[dict[str, Any]]:
    """Inbound rules of the file system: the Lustre ports, from clients and from itself.

    An EFA-enabled file system also needs all traffic within its group and from its clients
    (FSx refuses to create one otherwise); the sources stay security groups, never addresses.

    Args:
        client_group_id: the clients' (training nodes') security group.
        efa_enabled: whether the file system uses EFA. Default False.
    """
    return _lustre_rules(client_group_id, efa_enabled=efa_enabled, towards="from")


def lustre_egress(
    client_group_id: pulumi.Input[str], *, efa_enabled: bool = False
) -> list[dict[str, Any]]:
    """Outbound rules of the file system: the Lustre ports, to its clients and to itself.

    The file servers open Lustre connections to clients and to each other on the ports they
    accept (FSx for Lustre User Guide, "File system access control with Amazon VPC"); an
    EFA-enabled file system sends all traffic to both. Nothing else leaves the group: S3 is
    reached by the FSx service, not through this group.

    Args:
        client_group_id: the clients' (training nodes') security group.
        efa_enabled: whether the file system uses EFA. Default False.
    """
    return _lustre_rules(client_group_id, efa_enabled=efa_enabled, towards="to")


def data_repository_path(bucket: str, association: DataRepositoryAssociationConfig) -> str:
    """``s3://bucket/prefix/`` of an association."""
    return f"s3://{bucket}/{association.s3_prefix}"


def association_resource_name(prefix: str, association: DataRepositoryAssociationConfig) -> str:
    """The Pulumi name of an association: ``<prefix>-dra`` and its file system path.

    Keyed by path, not list position, so reordering the associations renames none. Paths are
    unique once normalised (config refuses overlapping ones), and a URN may hold ``/``, so the
    path itself is the suffix: ``storage-dra/checkpoints``, ``storage-dra/`` for the root.

    Args:
        prefix: the storage component's name.
        association: the association's config; only its ``fileSystemPath`` counts.
    """
    return f"{prefix}-dra{normalized_file_system_path(association.file_system_path)}"


def association_s3_config(association: DataRepositoryAssociationConfig) -> dict[str, Any]:
    """The ``s3`` block of an association: automatic import and export events."""
    config: dict[str, Any] = {}
    if association.imports:
        config["auto_import_policy"] = {"events": association.imports}
    if association.export_events:
        config["auto_export_policy"] = {"events": list(association.export_events)}
    return config


def _s3_args(
    association: DataRepositoryAssociationConfig,
) -> aws.fsx.DataRepositoryAssociationS3Args | None:
    config = association_s3_config(association)
    if not config:
        return None
    imports = config.get("auto_import_policy")
    exports = config.get("auto_export_policy")
    return aws.fsx.DataRepositoryAssociationS3Args(
        auto_import_policy=(
            aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(**imports) if imports else None
        ),
        auto_export_policy=(
            aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(**exports) if exports else None
        ),
    )


@dataclasses.dataclass(frozen=True)
class FileSystem:
    """The file system and what was made with it.

    Attributes:
        file_system: the Lustre file system.
        clients: the security group of the nodes that mount it.
        servers: the file system's own security group.
        associations: its data repository associations.
    """

    file_system: aws.fsx.LustreFileSystem
    clients: aws.ec2.SecurityGroup
    servers: aws.ec2.SecurityGroup
    associations: list[pulumi.Resource]


def file_system(
    name: str,
    *,
    config: PlatformConfig,
    lustre: LustreConfig,
    admin_address: str,
    key: aws.kms.Key,
    vpc_id: pulumi.Input[str],
    training_subnet_id: pulumi.Input[str],
    logs_key_arn: pulumi.Input[str],
    bucket_ready: dict[str, list[pulumi.Resource]],
    parent: pulumi.Resource,
    stateful: pulumi.ResourceOptions,
) -> FileSystem:
    """The file system, its security groups and log group, and its associations.

    Args:
        name: the storage component's name, prefix of every resource's.
        config: the validated platform (cluster name, bucket names).
        lustre: the file system's config.
        admin_address: the admin client's address, the file system's only no-squash NID.
        key: the stack's data key.
        vpc_id: VPC of the security groups.
        training_subnet_id: private subnet of the training zone (the file system's subnet).
        logs_key_arn: customer KMS key of the file system's log group.
        bucket_ready: bucket key -> what must exist before an association uses the bucket.
        parent: the storage component.
        stateful: options of the stateful resources (parent, protection).
    """
    cluster = config.name
    child = pulumi.ResourceOptions(parent=parent)
    clients = aws.ec2.SecurityGroup(
        f"{name}-lustre-clients",
        description=f"Training nodes of {cluster} that mount the Lustre file system",
        vpc_id=vpc_id,
        tags={"Name": f"{cluster}-lustre-clients"},
        opts=child,
    )
    servers = aws.ec2.SecurityGroup(
        f"{name}-lustre",
        description=f"FSx for Lustre file system of {cluster}: Lustre ports only",
        vpc_id=vpc_id,
        ingress=[
            aws.ec2.SecurityGroupIngressArgs(**rule)
            for rule in lustre_ingress(clients.id, efa_enabled=lustre.efa_enabled)
        ],
        egress=[
            aws.ec2.SecurityGroupEgressArgs(**rule)
            for rule in lustre_egress(clients.id, efa_enabled=lustre.efa_enabled)
        ],
        tags={"Name": f"{cluster}-lustre"},
        opts=child,
    )  # fmt: skip
    # Lustre servers also open connections to clients on the same ports (and, with EFA, any
    # traffic): separate rules, since each group's inline rules would name the other.
    client_ports = (
        [("-1", 0, 0)] if lustre.efa_enabled else [("tcp", lo, hi) for lo, hi in LUSTRE_PORTS]
    )
    for protocol, low, high in client_ports:
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-lustre-clients-{protocol}-{low}",
            security_group_id=clients.id,
            referenced_security_group_id=servers.id,
            ip_protocol=protocol,
            from_port=None if protocol == "-1" else low,
            to_port=None if protocol == "-1" else high,
            description="from the Lustre file servers",
            opts=child,
        )
    logging = lustre.log_level != "DISABLED"
    # FSx refuses a destination with level DISABLED (LustreLogCreateConfiguration).
    log_group = (
        aws.cloudwatch.LogGroup(
            f"{name}-lustre",
            name=f"/aws/fsx/{cluster}",
            retention_in_days=lustre.log_retention_days,
            kms_key_id=logs_key_arn,
            opts=child,
        )
        if logging
        else None
    )
    metadata = (
        aws.fsx.LustreFileSystemMetadataConfigurationArgs(
            mode="USER_PROVISIONED", iops=lustre.metadata_iops
        )
        if lustre.metadata_iops
        else aws.fsx.LustreFileSystemMetadataConfigurationArgs(mode="AUTOMATIC")
    )
    lustre_file_system = aws.fsx.LustreFileSystem(
        f"{name}-lustre",
        deployment_type="PERSISTENT_2",
        storage_type="SSD",
        storage_capacity=lustre.storage_capacity_gib,
        per_unit_storage_throughput=lustre.throughput_per_tib,
        file_system_type_version="2.15",
        metadata_configuration=metadata,
        subnet_ids=training_subnet_id,
        security_group_ids=[servers.id],
        kms_key_id=key.arn,
        data_compression_type=lustre.data_compression,
        efa_enabled=lustre.efa_enabled,
        automatic_backup_retention_days=lustre.backup_retention_days,
        # A backup window without backups is rejected by FSx.
        daily_automatic_backup_start_time=(
            lustre.daily_backup_start_time if lustre.backup_retention_days else None
        ),
        weekly_maintenance_start_time=lustre.weekly_maintenance_start_time,
        # Not available on a file system linked to S3 (FSx API): only with backups.
        copy_tags_to_backups=bool(lustre.backup_retention_days),
        log_configuration=aws.fsx.LustreFileSystemLogConfigurationArgs(
            destination=log_group.arn if log_group else None, level=lustre.log_level
        ),
        root_squash_configuration=aws.fsx.LustreFileSystemRootSquashConfigurationArgs(
            root_squash=lustre.root_squash, no_squash_nids=[no_squash_nid(admin_address)]
        ),
        tags={"Name": cluster},
        opts=stateful,
    )
    associations: list[pulumi.Resource] = []
    for index, association in enumerate(lustre.associations):
        # Config refuses an association without a known bucket.
        bucket_key = typing.cast(str, lustre.association_bucket(association))
        s3_name = typing.cast(str, association_bucket_name(config, association))
        associations.append(aws.fsx.DataRepositoryAssociation(
            association_resource_name(name, association),
            file_system_id=lustre_file_system.id,
            file_system_path=association.file_system_path,
            data_repository_path=data_repository_path(s3_name, association),
            batch_import_meta_data_on_create=association.batch_import_metadata_on_create,
            s3=_s3_args(association),
            delete_data_in_filesystem=False,
            opts=pulumi.ResourceOptions.merge(
                stateful,
                pulumi.ResourceOptions(
                    depends_on=bucket_ready[bucket_key],
                    # A new prefix or file system replaces the association (file_system_id,
                    # file_system_path and data_repository_path are ForceNew in
                    # terraform-provider-aws internal/service/fsx/
                    # data_repository_association.go, v6), and FSx refuses a second
                    # association on a path the first still holds: delete it first.
                    delete_before_replace=True,
                    # The name stacks deployed before names were paths have in their
                    # state; an alias only applies while that URN is there.
                    aliases=[pulumi.Alias(name=f"{name}-dra-{index}")],
                ),
            ),
        ))  # fmt: skip
    return FileSystem(lustre_file_system, clients, servers, associations)
