"""Shared storage: hardened S3 buckets, FSx for Lustre linked to them, and who reaches what.

The file system is PERSISTENT_2 in the training zone (next to the EFA pools), encrypted with a
customer key, reachable only on the Lustre ports from the nodes that carry the storage-client
security group, and linked to S3 through data repository associations, one bucket and prefix
each, data flowing one way on each path: checkpoints written to ``/checkpoints`` are exported
to S3 and outlive the file system once exported. Daily release tasks free what S3 holds and
nobody reads, and an alarm watches free space. Every namespace that mounts it gets its own
static PersistentVolume and claim, and each team's job service account an IAM role reaching
only the team's prefixes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import typing
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import versions
from components.admission import enforced_policy
from components.config import (
    BucketConfig,
    DataRepositoryAssociationConfig,
    LustreConfig,
    PlatformConfig,
    access_log_bucket_name,
    association_bucket_name,
    bucket_name,
)
from components.config.storage import (
    LUSTRE_FIRST_STEPS_GIB,
    TEAM_CLAIM_PREFIX,
    admin_client_address,
    normalized_file_system_path,
)
from components.file_system_layout import (
    TeamDirectory,
    admin_user_data,
    layout_script,
    no_squash_nid,
    team_directories,
)
from components.iam import (
    IMDSV2_ONE_HOP,
    account_administers_key,
    customer_key,
    deny_insecure_transport,
    pod_identity_trust_policy,
    role_with_policies,
    service_trust_policy,
)
from components.node_pools import LUSTRE_CLIENT_LABEL, ZONE
from components.teams import JOB_SERVICE_ACCOUNT, TEAM_LABEL

LUSTRE_PORTS: Final = ((988, 988), (1018, 1023))
"""TCP ports Lustre clients and servers use (REFERENCE §5: 988 and 1018-1023)."""
CSI_DRIVER: Final = "fsx.csi.aws.com"
CSI_CONTROLLER_SERVICE_ACCOUNT: Final = "fsx-csi-controller-sa"
CLAIM_NAME: Final = "shared-lustre"
MULTIPART_ABORT_DAYS: Final = 7
LOG_DELIVERY_SERVICE: Final = "logging.s3.amazonaws.com"
"""The principal that writes S3 server access logs (S3 user guide, "Enabling Amazon S3 server
access logging": with ACLs disabled, only a bucket policy can grant it)."""
LOG_NONCURRENT_DAYS: Final = 30


def tls_only_bucket_policy(bucket_arn: str) -> dict[str, Any]:
    """Bucket policy denying every request that does not use TLS."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            deny_insecure_transport("DenyInsecureTransport", "s3", [bucket_arn, f"{bucket_arn}/*"])
        ],
    }


def access_log_bucket_policy(
    log_bucket_arn: str, source_bucket_arns: list[str], account_id: str
) -> dict[str, Any]:
    """Policy of the access log bucket: TLS only, and log delivery for this stack's buckets.

    S3's log delivery may write objects only for the listed source buckets of this account
    (``aws:SourceArn``, ``aws:SourceAccount``), so no other bucket can fill it or forge a log.

    Args:
        log_bucket_arn: ARN of the log bucket.
        source_bucket_arns: ARNs of the data buckets that log into it.
        account_id: the account that owns them.
    """
    policy = tls_only_bucket_policy(log_bucket_arn)
    policy["Statement"].append(
        {
            "Sid": "S3ServerAccessLogsOfThisStacksBuckets",
            "Effect": "Allow",
            "Principal": {"Service": LOG_DELIVERY_SERVICE},
            "Action": "s3:PutObject",
            "Resource": f"{log_bucket_arn}/*",
            "Condition": {
                "ArnLike": {"aws:SourceArn": sorted(source_bucket_arns)},
                "StringEquals": {"aws:SourceAccount": account_id},
            },
        }
    )
    return policy


def data_key_policy(account_id: str, region: str) -> dict[str, Any]:
    """Key policy of the data key: account administers it; S3 and FSx use it in this account.

    FSx reaches SSE-KMS buckets through a service-linked role created per file system, so use is
    granted through the services (``kms:ViaService``) rather than to named roles.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            account_administers_key(account_id),
            {
                "Sid": "UseThroughS3AndFSx",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": [
                    "kms:Encrypt",
                    "kms:Decrypt",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:DescribeKey",
                    "kms:CreateGrant",
                ],
                "Resource": "*",
                "Condition": {
                    "StringEquals": {
                        "kms:CallerAccount": account_id,
                        "kms:ViaService": [
                            f"s3.{region}.amazonaws.com",
                            f"fsx.{region}.amazonaws.com",
                        ],
                    }
                },
            },
        ],
    }


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


@dataclasses.dataclass(frozen=True)
class TeamPrefix:
    """A part of a data bucket that one team's job role reaches.

    Attributes:
        bucket: the bucket's S3 name.
        prefix: the key prefix, ending in ``/`` (the team's own, e.g. ``checkpoints/ml-a/``).
        writable: whether the role may write and delete objects there, not only read them.
    """

    bucket: str
    prefix: str
    writable: bool


def team_prefixes(config: PlatformConfig, team: str) -> list[TeamPrefix]:
    """Every part of the data buckets a team's jobs reach with their own identity.

    Under each association, the team's directory ``<path>/<team>`` is ``<prefix><team>/`` in
    the association's bucket: writable where the path imports from S3 (what lands there appears
    on the file system), read-only where it only exports, since the file system owns that copy
    and a direct write would never reach it. In a bucket with ``teamAccess`` the team owns
    ``<team>/``. Never the whole bucket: one team's role cannot read or delete another's data.

    Args:
        config: the validated platform (buckets, associations).
        team: the team's name (its namespace and directory name).
    """
    storage = config.storage
    prefixes: list[TeamPrefix] = []
    for association in storage.lustre.associations if storage.lustre else []:
        s3_name = association_bucket_name(config, association)
        if s3_name is not None:
            prefixes.append(
                TeamPrefix(s3_name, f"{association.s3_prefix}{team}/", bool(association.imports))
            )
    prefixes += [
        TeamPrefix(bucket_name(config, bucket), f"{team}/", writable=True)
        for bucket in storage.buckets
        if bucket.team_access
    ]
    return prefixes


S3_READ_ACTIONS: Final = ("s3:GetObject", "s3:GetObjectVersion")
S3_WRITE_ACTIONS: Final = (
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)


IAM_ROLE_NAME_LIMIT: Final = 64
SCHEDULE_NAME_LIMIT: Final = 64


def fitted_name(stem: str, suffix: str, limit: int) -> str:
    """``<stem>-<suffix>`` within ``limit`` characters, still distinct when it had to be cut.

    A name that says what it is in CloudTrail and the console; when it is too long, the stem is
    cut and a hash of the whole stem keeps names distinct.

    Args:
        stem: the identifying part (cluster and team, cluster and path).
        suffix: what kind of thing it is (``jobs``, ``release``); kept whole.
        limit: the AWS limit on the name.
    """
    name = f"{stem}-{suffix}"
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(stem.encode()).hexdigest()[:8]
    return f"{stem[: limit - len(suffix) - 10]}-{digest}-{suffix}"


def team_role_name(cluster: str, team: str) -> str:
    """IAM name of a team's job role: ``<cluster>-<team>-jobs``, fitted to IAM's 64."""
    return fitted_name(f"{cluster}-{team}", "jobs", IAM_ROLE_NAME_LIMIT)


def team_data_policy(prefixes: list[TeamPrefix]) -> dict[str, Any]:
    """The job role's policy: list, read (and write where allowed) only the team's prefixes.

    Listing is allowed on the bucket only for keys under the team's prefixes
    (``s3:prefix`` condition), so the role cannot even see other teams' object names. No KMS
    statement: the data key's policy lets any principal of the account use it through S3
    (:func:`data_key_policy`), and this policy bounds what that principal reaches in S3.

    Args:
        prefixes: what the team reaches (:func:`team_prefixes`), at least one.
    """
    statements: list[dict[str, Any]] = []
    for index, part in enumerate(prefixes):
        bucket_arn = f"arn:aws:s3:::{part.bucket}"
        actions = [*S3_READ_ACTIONS, *(S3_WRITE_ACTIONS if part.writable else ())]
        statements += [
            {
                "Sid": f"List{index}",
                "Effect": "Allow",
                # Versions too: a team finds and reads (restores) its own overwritten or
                # deleted objects while noncurrentVersionRetentionDays keeps them.
                "Action": ["s3:ListBucket", "s3:ListBucketVersions"],
                "Resource": bucket_arn,
                "Condition": {"StringLike": {"s3:prefix": [part.prefix, f"{part.prefix}*"]}},
            },
            {
                "Sid": f"Objects{index}",
                "Effect": "Allow",
                "Action": actions,
                "Resource": f"{bucket_arn}/{part.prefix}*",
            },
        ]
    return {"Version": "2012-10-17", "Statement": statements}


SCHEDULER_SERVICE: Final = "scheduler.amazonaws.com"
RELEASE_TARGET: Final = "arn:aws:scheduler:::aws-sdk:fsx:createDataRepositoryTask"
"""EventBridge Scheduler's universal target calling FSx's CreateDataRepositoryTask with the
schedule's input as the request (EventBridge Scheduler user guide, "Using universal
targets": ``arn:aws:scheduler:::aws-sdk:<service>:<apiAction>``)."""
RELEASE_RETRY_HOURS: Final = 6
RELEASE_FAILURE_RETENTION_SECONDS: Final = 14 * 24 * 3600
"""SQS's longest retention: a failed run stays readable for two weeks."""
ALARM_PERIOD_SECONDS: Final = 300
"""The release-failure alarm's period: a failed run is one message, any period shows it."""
CAPACITY_ALARM_PERIOD_SECONDS: Final = 60
"""The free-capacity alarm's period. FSx for Lustre reports ``FreeDataStorageCapacity`` per
storage target, so ``Sum`` adds every datapoint of the period (FSx for Lustre User Guide,
"Amazon FSx for Lustre metrics": ``SampleCount`` is the number of targets): over the minute the
targets report in it is the file system's free space; over 5 minutes it would be about five
times that, and the alarm would never fire. AWS's own free-capacity alarms for Lustre use 60
seconds with ``Sum``."""
CAPACITY_ALARM_PERIODS: Final = 5
"""Five minutes in a row below the threshold."""


def release_schedules(
    lustre: LustreConfig,
) -> list[tuple[DataRepositoryAssociationConfig, str]]:
    """Each path with ``releaseAfterDays`` and the daily cron expression of its release task.

    FSx runs one data repository task at a time and refuses another meanwhile
    (CreateDataRepositoryTask, error DataRepositoryTaskExecuting, botocore's fsx model), so the
    paths start an hour apart from ``releaseStartTime``.
    """
    hours, minutes = (int(part) for part in lustre.release_start_time.split(":"))
    releasing = [a for a in lustre.associations if a.release_after_days is not None]
    return [
        (association, f"cron({minutes} {(hours + offset) % 24} * * ? *)")
        for offset, association in enumerate(releasing)
    ]


def release_task_request(
    file_system_id: str, association: DataRepositoryAssociationConfig
) -> dict[str, Any]:
    """The CreateDataRepositoryTask request that frees one path's unread, exported files.

    Only a release task frees Lustre space, and only for files S3 holds (REFERENCE §13); the
    path is relative to the file system's root (the API's ``Paths``), and last access is what
    ``relatime`` keeps. No report: the task's status is in ``DescribeDataRepositoryTasks``.

    Args:
        file_system_id: the file system's id.
        association: the path's association (its ``releaseAfterDays`` is set).
    """
    assert association.release_after_days is not None
    path = normalized_file_system_path(association.file_system_path).lstrip("/")
    return {
        "Type": "RELEASE_DATA_FROM_FILESYSTEM",
        "FileSystemId": file_system_id,
        "Paths": [path] if path else [],
        "Report": {"Enabled": False},
        "ReleaseConfiguration": {
            "DurationSinceLastAccess": {"Unit": "DAYS", "Value": association.release_after_days}
        },
    }


def release_role_policy(
    file_system_arn: str, failures_queue_arn: str, region: str, account_id: str
) -> dict[str, Any]:
    """What the release schedules may do: start tasks on this file system, report failures.

    EventBridge Scheduler sends a run it could not deliver to the target's dead-letter queue
    with the schedule's own role (EventBridge Scheduler user guide, "Configuring a dead-letter
    queue").
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "StartReleaseTasks",
                "Effect": "Allow",
                "Action": "fsx:CreateDataRepositoryTask",
                "Resource": [file_system_arn, f"arn:aws:fsx:{region}:{account_id}:task/*"],
            },
            {
                "Sid": "ReportFailedRuns",
                "Effect": "Allow",
                "Action": "sqs:SendMessage",
                "Resource": failures_queue_arn,
            },
        ],
    }


def scheduler_trust_policy(account_id: str) -> dict[str, Any]:
    """EventBridge Scheduler may assume the role, for schedules of this account only."""
    policy = service_trust_policy(SCHEDULER_SERVICE)
    policy["Statement"][0]["Condition"] = {"StringEquals": {"aws:SourceAccount": account_id}}
    return policy


def free_capacity_threshold_bytes(lustre: LustreConfig) -> int:
    """Free bytes below which the capacity alarm fires (FreeDataStorageCapacity is in bytes)."""
    return lustre.storage_capacity_gib * 2**30 * lustre.free_capacity_alarm_percent // 100


def current_version_rules(
    bucket: BucketConfig,
) -> list[aws.s3.BucketLifecycleConfigurationRuleArgsDict]:
    """The lifecycle rules of a bucket's current objects: its transitions and its expiry."""
    rules: list[aws.s3.BucketLifecycleConfigurationRuleArgsDict] = []
    if bucket.transitions:
        rules.append(
            {
                "id": "transition-current-versions",
                "status": "Enabled",
                "filter": {},
                "transitions": [
                    {"days": t.days, "storage_class": t.storage_class} for t in bucket.transitions
                ],
            }
        )
    if bucket.current_version_retention_days is not None:
        rules.append(
            {
                "id": "expire-current-versions",
                "status": "Enabled",
                "filter": {},
                # On a versioned bucket expiry adds a delete marker: the object becomes a
                # noncurrent version, which the noncurrent rule removes later.
                "expiration": {"days": bucket.current_version_retention_days},
            }
        )
    return rules


def _alarm(
    resource_name: str,
    *,
    description: str,
    metric: tuple[str, str, str],
    dimensions: dict[str, pulumi.Input[str]],
    breached_when: tuple[str, int, int],
    period_seconds: int,
    actions: list[str],
    opts: pulumi.ResourceOptions,
) -> aws.cloudwatch.MetricAlarm:
    """A CloudWatch alarm on one metric, notifying ``actions``.

    Args:
        resource_name: Pulumi name (and the alarm's name stem).
        description: what it means and what to do, as the on-call reads it.
        metric: namespace, metric name and statistic.
        dimensions: the metric's dimensions.
        breached_when: comparison operator, threshold and how many periods in a row.
        period_seconds: the period each statistic covers, seconds.
        actions: SNS topics told when it fires and when it clears.
        opts: resource options.
    """
    namespace, metric_name, statistic = metric
    comparison, threshold, periods = breached_when
    return aws.cloudwatch.MetricAlarm(
        resource_name,
        alarm_description=description,
        namespace=namespace,
        metric_name=metric_name,
        dimensions=dimensions,
        statistic=statistic,
        period=period_seconds,
        evaluation_periods=periods,
        threshold=threshold,
        comparison_operator=comparison,
        # No data is no trouble: a queue nobody wrote to, a file system being created.
        treat_missing_data="notBreaching",
        alarm_actions=list(actions),
        ok_actions=list(actions),
        opts=opts,
    )


def _release_input(
    file_system_id: pulumi.Output[str], association: DataRepositoryAssociationConfig
) -> pulumi.Output[str]:
    return file_system_id.apply(lambda fs: json.dumps(release_task_request(fs, association)))


def data_repository_path(bucket: str, association: DataRepositoryAssociationConfig) -> str:
    """``s3://bucket/prefix/`` of an association."""
    return f"s3://{bucket}/{association.s3_prefix}"


def checkpoint_s3_uri(config: PlatformConfig) -> str | None:
    """``s3://bucket/prefix/`` that holds the checkpoint path, or None (no association)."""
    lustre = config.storage.lustre
    association = lustre.checkpoint_association() if lustre else None
    s3_name = association_bucket_name(config, association) if association else None
    return data_repository_path(s3_name, association) if association and s3_name else None


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


def lustre_node_affinity(zone: str) -> dict[str, Any]:
    """The nodes a Lustre volume mounts on: Lustre clients in its zone.

    Their pools carry the client security group and
    :data:`~components.node_pools.LUSTRE_CLIENT_LABEL`.

    The scheduler filters nodes by a bound claim's PV affinity (kubernetes
    pkg/scheduler/framework/plugins/volumebinding, checkBoundClaims) and Karpenter provisions
    for it (karpenter v1.14.1 pkg/controllers/provisioning/scheduling/volumetopology.go,
    getPersistentVolumeRequirements), so a pod of any kind with a Lustre claim lands on a node
    that can mount it instead of waiting in ``ContainerCreating`` on ``general``.

    Args:
        zone: the file system's zone (the training zone).
    """
    return {
        "required": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": LUSTRE_CLIENT_LABEL, "operator": "In", "values": ["true"]},
                        {"key": ZONE, "operator": "In", "values": [zone]},
                    ]
                }
            ]
        }
    }


def persistent_volume_spec(
    lustre: LustreConfig,
    *,
    namespace: str,
    volume_handle: pulumi.Input[str],
    dns_name: pulumi.Input[str],
    mount_name: pulumi.Input[str],
    zone: str,
    claim_name: str = CLAIM_NAME,
) -> dict[str, Any]:
    """A static PV bound to exactly one namespace's claim (a PV binds one claim).

    Always read-write: a read-only mount records no access times, and release goes by them
    (:data:`components.file_system_layout.IMPORT_ONLY_DIRECTORY_MODE` keeps jobs from writing
    where they only read).

    Args:
        lustre: the file system's config (capacity, mount options).
        namespace: the namespace of the claim it binds.
        volume_handle: the file system's id, or :func:`team_volume_handle` for a team's
            directory.
        dns_name: the file system's DNS name.
        mount_name: what the node mounts after ``<dnsname>@tcp:/``: the file system's mount
            name, or a directory below it (``<mountname>/checkpoints/<team>``).
        zone: the file system's zone (:func:`lustre_node_affinity`).
        claim_name: the claim's name. Default ``shared-lustre`` (the whole file system).
    """
    return {
        "capacity": {"storage": f"{lustre.storage_capacity_gib}Gi"},
        "volumeMode": "Filesystem",
        "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "mountOptions": list(lustre.mount_options),
        "claimRef": {"namespace": namespace, "name": claim_name},
        "nodeAffinity": lustre_node_affinity(zone),
        "csi": {
            "driver": CSI_DRIVER,
            "volumeHandle": volume_handle,
            "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name},
        },
    }


IMMUTABLE_VOLUME_FIELDS: Final = ("csi", "nodeAffinity", "volumeMode")
"""What the API server never lets a PV change once set (kubernetes
pkg/apis/core/validation/validation.go, ValidatePersistentVolumeUpdate: the volume source,
``volumeMode``, and ``nodeAffinity`` once it is set)."""
VOLUME_DIGEST_LENGTH: Final = 10


def persistent_volume_name(stem: str, spec: dict[str, Any]) -> str:
    """``<stem>-<digest>``: a PV's name, which changes whenever an immutable field does.

    A change to such a field must make a new PV, and a new PV must have a new name.
    pulumi-kubernetes replaces a PV on a changed ``csi`` but patches a changed
    ``nodeAffinity``, which the API server refuses once one is set (provider/pkg/provider/
    diff.go, forceNew); and it deletes a
    same-named object before creating it again (provider.go, Diff: deleteBeforeReplace), which
    for a bound PV waits on ``kubernetes.io/pv-protection`` until its claim goes, while the
    claim, still naming the same PV, is never replaced. With the digest in the name the PV is
    created beside the old one, the claim's ``volumeName`` changes, so the claim is replaced
    (deleted once no pod uses it) and binds the new PV; the old PV, released, goes last.
    Capacity and mount options are left out: they change in place.

    Args:
        stem: the name without the digest (``lustre-checkpoints-ml-research``).
        spec: the PV's spec with every value known (:func:`persistent_volume_spec`).
    """
    immutable = {field: spec.get(field) for field in IMMUTABLE_VOLUME_FIELDS}
    digest = hashlib.sha256(json.dumps(immutable, sort_keys=True).encode()).hexdigest()
    return f"{stem}-{digest[:VOLUME_DIGEST_LENGTH]}"


ADMIN_IMAGE_PARAMETER: Final = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-{}"
"""The public SSM parameter of the newest Amazon Linux 2023 AMI per architecture; a launch
template may name it as ``resolve:ssm:<parameter>`` instead of an AMI id (EC2 User Guide, "Use a
Systems Manager parameter instead of an AMI ID"), so each new admin client boots the current
AMI and the stack needs no lookup at plan time."""
GRAVITON_FAMILY: Final = re.compile(r"[a-z]+[0-9]+[a-z]*g[a-z]*(?:-[a-z]+)?")
"""Graviton (arm64) families name a ``g`` after the generation: m7g, c7gn, r8gd, t4g, im4gn."""


def admin_launch_template(lustre: LustreConfig, tags: dict[str, str]) -> dict[str, Any]:
    """Launch template arguments of the admin client: the current AMI, and its tags.

    The network (private subnet, address, groups) and the hardening are the instance's own
    (:data:`ADMIN_INSTANCE_HARDENING`), where policies and scanners read them; EC2 refuses
    instance-level groups beside a template's network interface.

    Args:
        lustre: the file system's config (the admin client's instance type).
        tags: tags of the instance and its volume.
    """
    instance_type = lustre.admin_client.instance_type
    family = instance_type.split(".", maxsplit=1)[0]
    architecture = "arm64" if GRAVITON_FAMILY.fullmatch(family) else "x86_64"
    return {
        "image_id": f"resolve:ssm:{ADMIN_IMAGE_PARAMETER.format(architecture)}",
        "instance_type": instance_type,
        "update_default_version": True,
        "metadata_options": dict(IMDSV2_ONE_HOP),
        # On the template, not the instance: with a template naming its AMI by SSM parameter,
        # the provider would look up the root device of the parameter's name for an
        # instance-level root_block_device. The AMI's size, encrypted, deleted with it.
        "block_device_mappings": [
            {
                "device_name": ADMIN_ROOT_DEVICE,
                "ebs": {"encrypted": "true", "volume_type": "gp3", "delete_on_termination": "true"},
            }
        ],
        "tag_specifications": [
            {"resource_type": kind, "tags": tags} for kind in ("instance", "volume")
        ],
    }


ADMIN_ROOT_DEVICE: Final = "/dev/xvda"
"""The root device of the Amazon Linux 2023 AMIs."""
ADMIN_INSTANCE_HARDENING: Final = {
    "metadata_options": IMDSV2_ONE_HOP,
    "ebs_optimized": True,
    # One-minute metrics for the minutes it runs: a stuck layout shows in CloudWatch.
    "monitoring": True,
}
"""The admin client's IMDSv2-only metadata and detailed monitoring (its root volume is the
template's: :func:`admin_launch_template`)."""


def team_volume_handle(
    file_system_id: pulumi.Input[str], directory: TeamDirectory
) -> pulumi.Output[str]:
    """The handle of a team directory's PV: ``<file system id>::<directory>``, one per PV.

    kubelet knows a CSI volume by driver and handle (kubernetes pkg/volume/csi/csi_plugin.go,
    GetVolumeName) and mounts one volume of a name once per pod
    (pkg/kubelet/volumemanager/cache/desired_state_of_world.go, AddPodToVolume): a pod with
    four claims on one handle would get one mount. The FSx driver reads the handle as the file
    system's id only in DeleteVolume, ValidateVolumeCapabilities and ControllerExpandVolume
    (aws-fsx-csi-driver v1.7.0 pkg/driver/controller.go), which a static, retained PV
    without a StorageClass never gets; it mounts from the volume's attributes
    (pkg/driver/node.go).
    """
    return pulumi.Output.concat(file_system_id, "::", directory.subdirectory)


ACCESS_TIME_POLICY: Final = "trainingplatform-lustre-access-times"
SHARED_LUSTRE_LABEL: Final = "trainingplatform.io/shared-lustre"
"""Label of the namespaces of ``storage.lustre.namespaces`` (their ``shared-lustre`` claim)."""


def access_time_policy(team_label: str) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: no pod mounts a Lustre claim read-only.

    A read-only mount records no access times: Linux skips the update when the mount refuses
    writes (fs/inode.c, touch_atime), and the Lustre client treats a read-only mount as
    ``noatime`` (lustre llite/file.c, file_is_noatime). Whether the claim's volume is read-only
    (``persistentVolumeClaim.readOnly``: kubelet asks the FSx driver for an ``ro`` mount,
    aws-fsx-csi-driver v1.7.0 pkg/driver/node.go) or a container's mount of it is (a read-only
    bind mount), files a job reads every day look unread, and the daily release frees them:
    each read then fetches them from S3 again, at S3's speed instead of the file system's.
    Refused in team namespaces and those of ``storage.lustre.namespaces`` (Slurm's pods are the
    platform's own, and mount read-write); the directory's mode already keeps a team from
    writing where it only reads (:data:`components.file_system_layout.IMPORT_ONLY_DIRECTORY_MODE`).
    A TrainJob that patches in a read-only mount is admitted, and its Job then reports
    ``FailedCreate`` with this policy's message.

    Args:
        team_label: the namespace label of team namespaces.
    """
    labels = "(has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {})"
    claims = (
        "has(object.spec.volumes) ? object.spec.volumes.filter(v, has(v.persistentVolumeClaim) "
        f"&& (v.persistentVolumeClaim.claimName == '{CLAIM_NAME}' || "
        f"v.persistentVolumeClaim.claimName.startsWith('{TEAM_CLAIM_PREFIX}'))) : []"
    )
    read_only_volumes = (
        "variables.claims.filter(v, has(v.persistentVolumeClaim.readOnly) && "
        "v.persistentVolumeClaim.readOnly).map(v, v.name)"
    )
    # Each list to names before they are added: the API server types containers and init
    # containers apart, and names (strings) add up where the two lists would not.
    mounts_read_only = (
        "filter(c, has(c.volumeMounts) && c.volumeMounts.exists(m, "
        "m.name in variables.claims.map(v, v.name) && has(m.readOnly) && m.readOnly))"
        ".map(c, c.name)"
    )
    read_only_containers = " + ".join(
        f"(has(object.spec.{field}) ? object.spec.{field}.{mounts_read_only} : [])"
        for field in ("containers", "initContainers")
    )
    return {
        # It guards speed, not data or isolation, and it sees every pod of the cluster: a pod
        # it cannot evaluate is let through rather than refused.
        "failurePolicy": "Ignore",
        "matchConstraints": {
            "resourceRules": [
                {
                    "operations": ["CREATE"],
                    "apiVersions": ["v1"],
                    "apiGroups": [""],
                    "resources": ["pods"],
                }
            ],
        },
        "variables": [
            {
                "name": "mountsLustre",
                # Pods are namespaced: the API server always gives their namespace.
                "expression": f"'{team_label}' in {labels} || '{SHARED_LUSTRE_LABEL}' in {labels}",
            },
            {"name": "claims", "expression": f"variables.mountsLustre ? ({claims}) : []"},
            {"name": "readOnlyVolumes", "expression": read_only_volumes},
            {"name": "readOnlyContainers", "expression": read_only_containers},
        ],
        "validations": [
            {
                "expression": "size(variables.readOnlyVolumes) == 0 && "
                "size(variables.readOnlyContainers) == 0",
                "messageExpression": (
                    "'pod mounts a Lustre claim read-only (' + "
                    "(size(variables.readOnlyVolumes) > 0 ? 'volume ' + "
                    "variables.readOnlyVolumes[0] : 'in container ' + "
                    "variables.readOnlyContainers[0]) + '): a read-only mount records "
                    "no access times, so the daily release frees what the job reads and each "
                    "read goes back to S3; mount it read-write (directory permissions keep a "
                    "team from writing where it only reads)'"
                ),
                "reason": "Forbidden",
            }
        ],
    }


def persistent_volume_claim_spec(volume_name: pulumi.Input[str]) -> dict[str, Any]:
    """The claim that binds a namespace to its PV, requesting the smallest Lustre file system.

    The request stays the same whatever the file system's capacity: a bound claim's request
    may only grow by expansion, which the API server refuses for a claim without a
    StorageClass (kubernetes pkg/apis/core/validation/validation.go,
    ValidatePersistentVolumeClaimUpdate, and the expand controller), so growing the file
    system would fail the claim's update. Binding needs only the PV's capacity (which follows
    the file system) to be at least the request (pkg/controller/volume/persistentvolume,
    checkVolumeSatisfyClaim), and the claim's status shows the PV's capacity.

    Args:
        volume_name: the PV the claim binds.
    """
    return {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "",
        "volumeName": volume_name,
        "resources": {"requests": {"storage": f"{LUSTRE_FIRST_STEPS_GIB[0]}Gi"}},
    }


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


class Storage(pulumi.ComponentResource):
    """Buckets, the Lustre file system, its associations, CSI driver and claims.

    Outputs: ``client_security_group_id`` (for node classes; None without a file system),
    ``file_system_id``, ``buckets`` (key -> S3 name) and ``access_log_bucket``.
    """

    def __init__(
        self,
        name: str,
        *,
        config: PlatformConfig,
        vpc_id: pulumi.Input[str],
        training_subnet_id: pulumi.Input[str],
        logs_key_arn: pulumi.Input[str],
        cluster_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        mounting_namespaces: dict[str, pulumi.Resource] | None = None,
        team_namespaces: dict[str, pulumi.Resource] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Create the storage.

        Args:
            name: prefix of child resource names.
            config: the validated platform (storage section, names, account, region, protection).
            vpc_id: VPC of the security groups.
            training_subnet_id: private subnet of the training zone (the file system's subnet).
            logs_key_arn: customer KMS key of the file system's log group.
            cluster_ready: what the CSI add-on and Kubernetes objects wait for.
            kubernetes_provider: provider of the namespaces, PVs and claims.
            mounting_namespaces: namespaces created elsewhere (Slurm's) that mount the whole
                file system and get the claim ``shared-lustre``; ``storage.lustre.namespaces``
                are created here. Default: none.
            team_namespaces: team name -> its namespace; each team with ``sharedFileSystem``
                gets one claim per team root on its own directory there
                (components/file_system_layout.py). Default: none.
            opts: resource options; the AWS provider comes from here.
        """
        super().__init__("trainingplatform:index:Storage", name, None, opts)
        storage = config.storage
        cluster = config.name
        mounting_namespaces = mounting_namespaces or {}
        child = pulumi.ResourceOptions(parent=self)
        stateful = pulumi.ResourceOptions(parent=self, protect=config.protect_stateful_resources)
        self.client_security_group_id: pulumi.Output[str] | None = None
        self.file_system_id: pulumi.Output[str] | None = None
        self.buckets: dict[str, str] = {}
        self.access_log_bucket: str | None = None
        """S3 name of the bucket the data buckets log their requests into (None without)."""
        self.claims: dict[str, list[k8s.core.v1.PersistentVolumeClaim]] = {}
        """The claims of each mounting namespace (what pods there wait for)."""
        self.layout: list[pulumi.Resource] = []
        """The admin client that lays out the team directories (what team claims wait for)."""
        self.team_roles: dict[str, aws.iam.Role] = {}
        """Each team's job role (Pod Identity of its job service account), by team name."""
        if not storage.buckets and storage.lustre is None:
            self.register_outputs({})
            return

        key = customer_key(
            f"{name}-data",
            alias=f"{cluster}-data",
            description=f"Encrypts training data, checkpoints and the file system of {cluster}",
            protect=config.protect_stateful_resources,
            parent=self,
            policy=data_key_policy(config.account_id, config.region),
        )
        bucket_ready: dict[str, list[pulumi.Resource]] = {}
        if storage.buckets:
            access_logs = self._access_log_bucket(name, config, stateful)
            self.access_log_bucket = access_log_bucket_name(config)
        for bucket in storage.buckets:
            bucket_ready[bucket.name] = self._bucket(
                name, config, bucket, key=key, access_logs=access_logs, stateful=stateful
            )
            self.buckets[bucket.name] = bucket_name(config, bucket)

        for team in config.teams:
            self._team_role(name, config, team.name, cluster_ready)
        lustre = storage.lustre
        if lustre is not None:
            self._lustre(
                name,
                config=config,
                lustre=lustre,
                key=key,
                vpc_id=vpc_id,
                training_subnet_id=training_subnet_id,
                logs_key_arn=logs_key_arn,
                bucket_ready=bucket_ready,
                stateful=stateful,
                child=child,
            )
            self._csi(
                name,
                config=config,
                lustre=lustre,
                cluster_ready=cluster_ready,
                kubernetes_provider=kubernetes_provider,
                mounting_namespaces=mounting_namespaces,
                team_namespaces=team_namespaces or {},
                child=child,
            )
        self.register_outputs({"buckets": self.buckets})

    def _team_role(
        self,
        name: str,
        config: PlatformConfig,
        team: str,
        cluster_ready: list[pulumi.Resource],
    ) -> None:
        """The team's job role, reaching only its prefixes, given to its job service account.

        EKS Pod Identity gives the role to every pod of the team's job service account; its
        webhook mounts its own projected token (audience ``pods.eks.amazonaws.com``), so the
        account's ``automountServiceAccountToken: false`` still holds for the API server's
        token (aws/amazon-eks-pod-identity-webhook main.go, container-credentials flags). Nodes
        answer IMDS with hop limit 1, so the node role never reaches a pod.
        """
        prefixes = team_prefixes(config, team)
        if not prefixes:
            return
        child = pulumi.ResourceOptions(parent=self)
        role = role_with_policies(
            f"{name}-{team}-jobs", trust_policy=pod_identity_trust_policy(), managed_policies=[],
            opts=child, role_name=team_role_name(config.name, team),
        )  # fmt: skip
        data = aws.iam.RolePolicy(
            f"{name}-{team}-jobs",
            role=role.role.id,
            policy=json.dumps(team_data_policy(prefixes)),
            opts=child,
        )
        aws.eks.PodIdentityAssociation(
            f"{name}-{team}-jobs",
            cluster_name=config.name,
            namespace=team,
            service_account=JOB_SERVICE_ACCOUNT,
            role_arn=role.role.arn,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*cluster_ready, data]),
        )
        self.team_roles[team] = role.role

    def _hardened_bucket(
        self,
        resource_name: str,
        s3_name: str,
        *,
        encryption: aws.s3.BucketServerSideEncryptionConfigurationRuleArgsDict,
        policy: typing.Callable[[str], dict[str, Any]],
        rules: list[aws.s3.BucketLifecycleConfigurationRuleArgsDict],
        stateful: pulumi.ResourceOptions,
    ) -> tuple[aws.s3.Bucket, list[pulumi.Resource]]:
        """A bucket with its owner-enforced, private, versioned, encrypted, TLS-only settings.

        Args:
            resource_name: Pulumi name of the bucket and its settings.
            s3_name: the bucket's S3 name.
            encryption: the default encryption rule (``apply_server_side_encryption_by_default``
                and ``bucket_key_enabled``).
            policy: bucket ARN -> the bucket policy.
            rules: lifecycle rules; one that aborts incomplete multipart uploads is added.
            stateful: options of the bucket itself (protection).

        Returns:
            The bucket, and every resource that has to exist before the bucket is used.
        """
        s3_bucket = aws.s3.Bucket(resource_name, bucket=s3_name, force_destroy=False, opts=stateful)
        in_bucket = pulumi.ResourceOptions(parent=self, depends_on=[s3_bucket])
        ownership = aws.s3.BucketOwnershipControls(
            resource_name,
            bucket=s3_bucket.id,
            rule={"object_ownership": "BucketOwnerEnforced"},
            opts=in_bucket,
        )
        public = aws.s3.BucketPublicAccessBlock(
            resource_name,
            bucket=s3_bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=in_bucket,
        )
        versioning = aws.s3.BucketVersioning(
            resource_name,
            bucket=s3_bucket.id,
            versioning_configuration={"status": "Enabled"},
            opts=in_bucket,
        )
        sse = aws.s3.BucketServerSideEncryptionConfiguration(
            resource_name, bucket=s3_bucket.id, rules=[encryption], opts=in_bucket
        )
        bucket_policy = aws.s3.BucketPolicy(
            resource_name,
            bucket=s3_bucket.id,
            policy=s3_bucket.arn.apply(lambda arn: json.dumps(policy(arn))),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[public]),
        )
        abort_uploads: aws.s3.BucketLifecycleConfigurationRuleArgsDict = {
            "id": "abort-incomplete-multipart-uploads",
            "status": "Enabled",
            "filter": {},
            "abort_incomplete_multipart_upload": {"days_after_initiation": MULTIPART_ABORT_DAYS},
        }
        lifecycle = aws.s3.BucketLifecycleConfiguration(
            resource_name,
            bucket=s3_bucket.id,
            rules=[abort_uploads, *rules],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )
        return s3_bucket, [s3_bucket, ownership, public, versioning, sse, bucket_policy, lifecycle]

    def _access_log_bucket(
        self, name: str, config: PlatformConfig, stateful: pulumi.ResourceOptions
    ) -> tuple[aws.s3.Bucket, list[pulumi.Resource]]:
        """The bucket the data buckets' server access logs go to.

        S3-managed encryption, because log delivery does not write to a bucket whose default
        encryption is SSE-KMS (S3 user guide, "Enabling Amazon S3 server access logging");
        logs expire after ``storage.accessLogs.retentionDays``.
        """
        sources = [f"arn:aws:s3:::{bucket_name(config, b)}" for b in config.storage.buckets]
        logs = config.storage.access_logs
        return self._hardened_bucket(
            f"{name}-access-logs",
            access_log_bucket_name(config),
            encryption={"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}},
            policy=lambda arn: access_log_bucket_policy(arn, sources, config.account_id),
            rules=[
                {
                    "id": "expire-access-logs",
                    "status": "Enabled",
                    "filter": {},
                    "expiration": {"days": logs.retention_days},
                    "noncurrent_version_expiration": {"noncurrent_days": LOG_NONCURRENT_DAYS},
                }
            ],
            stateful=stateful,
        )

    def _bucket(
        self,
        name: str,
        config: PlatformConfig,
        bucket: BucketConfig,
        *,
        key: aws.kms.Key,
        access_logs: tuple[aws.s3.Bucket, list[pulumi.Resource]],
        stateful: pulumi.ResourceOptions,
    ) -> list[pulumi.Resource]:
        resource_name = f"{name}-{bucket.name}"
        s3_bucket, ready = self._hardened_bucket(
            resource_name,
            bucket_name(config, bucket),
            encryption={
                "apply_server_side_encryption_by_default": {
                    "sse_algorithm": "aws:kms",
                    "kms_master_key_id": key.arn,
                },
                "bucket_key_enabled": True,
            },
            policy=tls_only_bucket_policy,
            rules=[
                {
                    "id": "expire-noncurrent-versions",
                    "status": "Enabled",
                    "filter": {},
                    "noncurrent_version_expiration": {
                        "noncurrent_days": bucket.noncurrent_version_retention_days
                    },
                },
                *current_version_rules(bucket),
            ],
            stateful=stateful,
        )
        log_bucket, log_bucket_ready = access_logs
        logging = aws.s3.BucketLogging(
            resource_name,
            bucket=s3_bucket.id,
            target_bucket=log_bucket.id,
            target_prefix=f"{bucket.name}/",
            target_object_key_format={"partitioned_prefix": {"partition_date_source": "EventTime"}},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[s3_bucket, *log_bucket_ready]),
        )
        return [*ready, logging]

    def _lustre(
        self,
        name: str,
        *,
        config: PlatformConfig,
        lustre: LustreConfig,
        key: aws.kms.Key,
        vpc_id: pulumi.Input[str],
        training_subnet_id: pulumi.Input[str],
        logs_key_arn: pulumi.Input[str],
        bucket_ready: dict[str, list[pulumi.Resource]],
        stateful: pulumi.ResourceOptions,
        child: pulumi.ResourceOptions,
    ) -> None:
        cluster = config.name
        # Config refuses a stack whose admin client has no known address.
        admin_address = typing.cast(str, admin_client_address(config))
        clients = aws.ec2.SecurityGroup(
            f"{name}-lustre-clients",
            description=f"Training nodes of {cluster} that mount the Lustre file system",
            vpc_id=vpc_id,
            tags={"Name": f"{cluster}-lustre-clients"},
            opts=child,
        )
        self.client_security_group_id = clients.id
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
        file_system = aws.fsx.LustreFileSystem(
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
        self.file_system_id = file_system.id
        self.dns_name = file_system.dns_name
        self.mount_name = file_system.mount_name
        associations: list[pulumi.Resource] = []
        for index, association in enumerate(lustre.associations):
            # Config refuses an association without a known bucket.
            bucket_key = typing.cast(str, lustre.association_bucket(association))
            s3_name = typing.cast(str, association_bucket_name(config, association))
            associations.append(aws.fsx.DataRepositoryAssociation(
                association_resource_name(name, association),
                file_system_id=file_system.id,
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
        self._admin_client(
            name, config=config, lustre=lustre, file_system=file_system, address=admin_address,
            vpc_id=vpc_id, training_subnet_id=training_subnet_id, clients=clients,
            servers=servers, associations=associations,
        )  # fmt: skip
        self._capacity(name, config=config, lustre=lustre, file_system=file_system)

    def _admin_client(
        self,
        name: str,
        *,
        config: PlatformConfig,
        lustre: LustreConfig,
        file_system: aws.fsx.LustreFileSystem,
        address: str,
        vpc_id: pulumi.Input[str],
        training_subnet_id: pulumi.Input[str],
        clients: aws.ec2.SecurityGroup,
        servers: aws.ec2.SecurityGroup,
        associations: list[pulumi.Resource],
    ) -> None:
        """The instance that lays out the team directories as root, then stops.

        Its address is reserved in the training subnet by the network (an ``explicit`` subnet
        CIDR reservation: EC2 assigns none of it to nodes or pods, EC2 API
        CreateSubnetCidrReservation) and is the file system's only no-squash NID. A change to
        the layout replaces the instance: the new one boots, runs :func:`layout_script` and
        stops; it runs it again whenever it is started (:func:`admin_user_data`). It has no
        role, key pair or inbound rule; its output is on its console.
        """
        child = pulumi.ResourceOptions(parent=self)
        group = aws.ec2.SecurityGroup(
            f"{name}-lustre-admin",
            description=f"Lustre admin client of {config.name}: Lustre and package downloads",
            vpc_id=vpc_id,
            egress=[
                *(
                    aws.ec2.SecurityGroupEgressArgs(
                        protocol="tcp", from_port=low, to_port=high,
                        security_groups=[servers.id], description="to the Lustre file servers",
                    )
                    for low, high in LUSTRE_PORTS
                ),
                aws.ec2.SecurityGroupEgressArgs(
                    protocol="tcp", from_port=443, to_port=443, cidr_blocks=["0.0.0.0/0"],
                    description="the Lustre client package (Amazon Linux repositories)",
                ),
            ],
            tags={"Name": f"{config.name}-lustre-admin"},
            opts=child,
        )  # fmt: skip
        template = aws.ec2.LaunchTemplate(
            f"{name}-lustre-admin",
            description="Lustre admin client: Amazon Linux 2023, IMDSv2, encrypted root volume",
            **typing.cast(
                Any,
                admin_launch_template(
                    lustre, {**config.required_tags, "Name": f"{config.name}-lustre-admin"}
                ),
            ),
            opts=child,
        )
        self.layout.append(
            aws.ec2.Instance(
                f"{name}-lustre-admin",
                launch_template=aws.ec2.InstanceLaunchTemplateArgs(
                    id=template.id, version="$Latest"
                ),
                subnet_id=training_subnet_id,
                private_ip=address,
                vpc_security_group_ids=[clients.id, group.id],
                user_data=pulumi.Output.all(file_system.dns_name, file_system.mount_name).apply(
                    lambda names: admin_user_data(
                        layout_script(
                            lustre,
                            [team for team in config.teams if team.gid is not None],
                            dns_name=names[0],
                            mount_name=names[1],
                        )
                    )
                ),
                user_data_replace_on_change=True,
                instance_initiated_shutdown_behavior="stop",
                **typing.cast(Any, ADMIN_INSTANCE_HARDENING),
                tags={"Name": f"{config.name}-lustre-admin"},
                opts=pulumi.ResourceOptions(
                    parent=self,
                    # Its subnet id carries the reservation of its address
                    # (components/network.py).
                    depends_on=associations,
                    # Its address is fixed: the old instance must go before the new one starts.
                    delete_before_replace=True,
                ),
            )
        )

    def _capacity(
        self,
        name: str,
        *,
        config: PlatformConfig,
        lustre: LustreConfig,
        file_system: aws.fsx.LustreFileSystem,
    ) -> None:
        """The daily release task of each releasing path, and the free capacity alarm.

        Auto-export never frees space on the file system: without release tasks it fills up
        with what S3 already holds.
        """
        child = pulumi.ResourceOptions(parent=self)
        schedules = release_schedules(lustre)
        if schedules:
            role = aws.iam.Role(
                f"{name}-lustre-release",
                assume_role_policy=json.dumps(scheduler_trust_policy(config.account_id)),
                opts=child,
            )
            # A run FSx refused (a task already running: DataRepositoryTaskExecuting) lands
            # here instead of vanishing; its alarm says so.
            failures = aws.sqs.Queue(
                f"{name}-lustre-release-failures",
                message_retention_seconds=RELEASE_FAILURE_RETENTION_SECONDS,
                sqs_managed_sse_enabled=True,
                opts=child,
            )
            permission = aws.iam.RolePolicy(
                f"{name}-lustre-release",
                role=role.id,
                policy=pulumi.Output.all(file_system.arn, failures.arn).apply(
                    lambda arns: json.dumps(
                        release_role_policy(arns[0], arns[1], config.region, config.account_id)
                    )
                ),
                opts=child,
            )
            _alarm(
                f"{name}-lustre-release-failures",
                description=f"{config.name}: a daily release task of the Lustre file system "
                "could not start (its message in the queue says why); the path's space is not "
                "freed until the next run",
                # Messages sent, not messages waiting: nobody consumes the queue, so a waiting
                # message would hold the alarm in ALARM for the queue's two weeks and hide every
                # later failure. Scheduler's dead-letter delivery is a SendMessage, counted here.
                metric=("AWS/SQS", "NumberOfMessagesSent", "Sum"),
                dimensions={"QueueName": failures.name},
                breached_when=("GreaterThanThreshold", 0, 1),
                period_seconds=ALARM_PERIOD_SECONDS,
                actions=lustre.alarm_actions,
                opts=child,
            )
            for association, expression in schedules:
                path = normalized_file_system_path(association.file_system_path)
                slug = path.strip("/").replace("/", "-") or "root"
                aws.scheduler.Schedule(
                    f"{name}-release{path}",
                    name=fitted_name(f"{config.name}-{slug}", "release", SCHEDULE_NAME_LIMIT),
                    description=f"Release {path} files unread for "
                    f"{association.release_after_days} days (S3 holds them)",
                    schedule_expression=expression,
                    schedule_expression_timezone="UTC",
                    flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
                    target=aws.scheduler.ScheduleTargetArgs(
                        arn=RELEASE_TARGET,
                        role_arn=role.arn,
                        input=_release_input(file_system.id, association),
                        retry_policy=aws.scheduler.ScheduleTargetRetryPolicyArgs(
                            maximum_event_age_in_seconds=RELEASE_RETRY_HOURS * 3600,
                            maximum_retry_attempts=3,
                        ),
                        dead_letter_config=aws.scheduler.ScheduleTargetDeadLetterConfigArgs(
                            arn=failures.arn
                        ),
                    ),
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[permission]),
                )
        # Reported per storage target: Sum over one minute is the file system's free space,
        # Minimum only its fullest target's (CAPACITY_ALARM_PERIOD_SECONDS).
        _alarm(
            f"{name}-lustre-free-capacity",
            description=f"{config.name}: the Lustre file system has less than "
            f"{lustre.free_capacity_alarm_percent}% of its {lustre.storage_capacity_gib} GiB "
            "free (README, 'Where data and checkpoints live': release, or grow it)",
            metric=("AWS/FSx", "FreeDataStorageCapacity", "Sum"),
            dimensions={"FileSystemId": file_system.id},
            breached_when=(
                "LessThanThreshold",
                free_capacity_threshold_bytes(lustre),
                CAPACITY_ALARM_PERIODS,
            ),
            period_seconds=CAPACITY_ALARM_PERIOD_SECONDS,
            actions=lustre.alarm_actions,
            opts=child,
        )

    def _csi(
        self,
        name: str,
        *,
        config: PlatformConfig,
        lustre: LustreConfig,
        cluster_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        mounting_namespaces: dict[str, pulumi.Resource],
        team_namespaces: dict[str, pulumi.Resource],
        child: pulumi.ResourceOptions,
    ) -> None:
        role = role_with_policies(
            f"{name}-fsx-csi", trust_policy=pod_identity_trust_policy(), managed_policies=[],
            opts=child,
        )  # fmt: skip
        # Static volumes only: the controller describes file systems and creates none.
        describe = aws.iam.RolePolicy(
            f"{name}-fsx-csi",
            role=role.role.id,
            policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": ["fsx:DescribeFileSystems"],
                            "Resource": "*",
                        }
                    ],
                }
            ),
            opts=child,
        )
        addon = aws.eks.Addon(
            f"{name}-fsx-csi",
            cluster_name=config.name,
            addon_name="aws-fsx-csi-driver",
            addon_version=versions.EKS_ADDONS[config.cluster.kubernetes_version].fsx_csi_driver,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(
                    role_arn=role.role.arn, service_account=CSI_CONTROLLER_SERVICE_ACCOUNT
                )
            ],
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*cluster_ready, *role.ready, describe]
            ),
        )
        in_cluster = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=[*cluster_ready, addon]
        )
        assert self.file_system_id is not None
        mounting: dict[str, pulumi.Resource] = dict(mounting_namespaces)
        for namespace in lustre.namespaces:
            mounting[namespace] = k8s.core.v1.Namespace(
                f"{name}-ns-{namespace}",
                metadata={
                    "name": namespace,
                    "labels": {SHARED_LUSTRE_LABEL: "true"},
                },
                opts=in_cluster,
            )
        enforced_policy(
            f"{name}-lustre-access-times",
            ACCESS_TIME_POLICY,
            access_time_policy(TEAM_LABEL),
            opts=in_cluster,
        )
        zone = config.network.training_zone
        for namespace, ns in mounting.items():
            self.claims[namespace] = [
                self._claim(
                    name, lustre, namespace=namespace, namespace_resource=ns,
                    claim_name=CLAIM_NAME, volume_stem=f"{CLAIM_NAME}-{namespace}",
                    volume_handle=self.file_system_id, mount_name=self.mount_name,
                    zone=zone, opts=in_cluster,
                )
            ]  # fmt: skip
        for team in config.teams:
            if not team.shared_file_system or team.name not in team_namespaces:
                continue
            self.claims[team.name] = [
                self._claim(
                    name, lustre, namespace=team.name,
                    namespace_resource=team_namespaces[team.name],
                    claim_name=directory.claim_name, volume_stem=directory.volume_stem,
                    volume_handle=team_volume_handle(self.file_system_id, directory),
                    mount_name=pulumi.Output.concat(self.mount_name, "/", directory.subdirectory),
                    zone=zone,
                    opts=pulumi.ResourceOptions.merge(
                        in_cluster, pulumi.ResourceOptions(depends_on=self.layout)
                    ),
                )
                for directory in team_directories(lustre, team)
            ]  # fmt: skip

    def _claim(
        self,
        name: str,
        lustre: LustreConfig,
        *,
        namespace: str,
        namespace_resource: pulumi.Resource,
        claim_name: str,
        volume_stem: str,
        volume_handle: pulumi.Input[str],
        mount_name: pulumi.Input[str],
        zone: str,
        opts: pulumi.ResourceOptions,
    ) -> k8s.core.v1.PersistentVolumeClaim:
        """A static PV (:func:`persistent_volume_name`) and the one claim that binds it."""
        # Resource names of the whole-file-system claims predate team directories.
        suffix = namespace if claim_name == CLAIM_NAME else f"{namespace}-{claim_name}"

        def spec(handle: Any, dns_name: Any, mount: Any) -> dict[str, Any]:
            return persistent_volume_spec(
                lustre, namespace=namespace, volume_handle=handle, dns_name=dns_name,
                mount_name=mount, zone=zone, claim_name=claim_name,
            )  # fmt: skip

        volume_name = pulumi.Output.all(volume_handle, self.dns_name, mount_name).apply(
            lambda known: persistent_volume_name(volume_stem, spec(*known))
        )
        volume = k8s.core.v1.PersistentVolume(
            f"{name}-pv-{suffix}",
            metadata={"name": volume_name},
            # The builders speak the Kubernetes API's field names, which the SDK passes through.
            spec=typing.cast(Any, spec(volume_handle, self.dns_name, mount_name)),
            opts=opts,
        )
        return k8s.core.v1.PersistentVolumeClaim(
            f"{name}-pvc-{suffix}",
            metadata={"name": claim_name, "namespace": namespace},
            spec=typing.cast(Any, persistent_volume_claim_spec(volume.metadata.name)),
            opts=pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(depends_on=[namespace_resource, volume])
            ),
        )
