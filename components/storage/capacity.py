"""Free space on the file system: daily release tasks, and alarms on failures and capacity.

Auto-export never frees space on the file system: without release tasks it fills up with what
S3 already holds. Each releasing path gets a daily EventBridge Scheduler schedule that starts an
FSx release task; a run FSx refused lands in a queue an alarm watches, and another alarm watches
free capacity.
"""

from __future__ import annotations

import json
from typing import Any, Final

import pulumi
import pulumi_aws as aws

from components.config import DataRepositoryAssociationConfig, LustreConfig, PlatformConfig
from components.config.storage import normalized_file_system_path
from components.iam import service_trust_policy
from components.metric_names import FSX_CLOUDWATCH_DIMENSION, FSX_CLOUDWATCH_NAMESPACE
from components.storage.iam import fitted_name

SCHEDULE_NAME_LIMIT: Final = 64
SCHEDULER_SERVICE: Final = "scheduler.amazonaws.com"
SCHEDULE_GROUP: Final = "default"
"""The schedule group the release schedules are in (none is named, so Scheduler's own)."""
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


def release_schedule_name(stack_name: str, association: DataRepositoryAssociationConfig) -> str:
    """The EventBridge Scheduler name of one path's release schedule.

    Args:
        stack_name: the stack's name (``config.name``), so that two stacks in one account and
            region never share a schedule.
        association: the releasing path's association.
    """
    path = normalized_file_system_path(association.file_system_path)
    slug = path.strip("/").replace("/", "-") or "root"
    return fitted_name(f"{stack_name}-{slug}", "release", SCHEDULE_NAME_LIMIT)


def release_schedule_arns(config: PlatformConfig, lustre: LustreConfig) -> list[str]:
    """The ARN of every release schedule, in the ``default`` group they are created in.

    Each is the encryption context EventBridge Scheduler gives KMS when it encrypts or
    decrypts that schedule's input (EventBridge Scheduler user guide, "Encryption at rest":
    ``aws:scheduler:schedule:arn``), so the data key's statement for Scheduler and the release
    role's ``kms:Decrypt`` name these schedules and no other.

    Args:
        config: the validated platform (stack name, account, region).
        lustre: the file system's config (its releasing paths).
    """
    return [
        f"arn:aws:scheduler:{config.region}:{config.account_id}:schedule/{SCHEDULE_GROUP}/"
        f"{release_schedule_name(config.name, association)}"
        for association, _ in release_schedules(lustre)
    ]


def release_schedules_key_statements(
    account_id: str, region: str, schedule_arns: list[str]
) -> list[dict[str, Any]]:
    """Data key statements that let EventBridge Scheduler encrypt the release schedules' input.

    Scheduler encrypts a schedule's input with the credentials of whoever creates or updates
    it (``kms:GenerateDataKey``, ``kms:Decrypt``, and ``kms:DescribeKey`` to check that the
    key is symmetric), and decrypts it at each run with the schedule's role (EventBridge
    Scheduler user guide, "Encryption at rest", "Managing KMS keys"; its "Using
    identity-based policies" example conditions the first on ``kms:ViaService`` and the
    schedule's ARN as encryption context). So: any principal of this account, only through
    Scheduler in this region, only for these schedules' input. The release role's own
    ``kms:Decrypt`` is in :func:`release_role_policy`; grants are no use, Scheduler does not
    take them.

    Args:
        account_id: the account of the key and the schedules.
        region: the region of both (``kms:ViaService`` is ``scheduler.<region>.amazonaws.com``).
        schedule_arns: :func:`release_schedule_arns`.
    """
    through_scheduler = {
        "kms:CallerAccount": account_id,
        "kms:ViaService": f"scheduler.{region}.amazonaws.com",
    }
    return [
        {
            "Sid": "SchedulerEncryptsReleaseSchedules",
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
            "Resource": "*",
            "Condition": {
                "StringEquals": {
                    **through_scheduler,
                    "kms:EncryptionContext:aws:scheduler:schedule:arn": schedule_arns,
                }
            },
        },
        {
            # DescribeKey carries no encryption context to condition on.
            "Sid": "SchedulerDescribesTheKey",
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": "kms:DescribeKey",
            "Resource": "*",
            "Condition": {"StringEquals": through_scheduler},
        },
    ]


def with_release_schedules(
    key_policy: dict[str, Any], config: PlatformConfig, lustre: LustreConfig | None
) -> dict[str, Any]:
    """``key_policy`` (the data key's) plus Scheduler's statements, where schedules exist.

    Args:
        key_policy: the data key's policy (:func:`components.storage.iam.data_key_policy`),
            not modified.
        config: the validated platform (stack name, account, region).
        lustre: the file system's config; None or no releasing path adds nothing.
    """
    arns = release_schedule_arns(config, lustre) if lustre is not None else []
    if not arns:
        return key_policy
    statements = release_schedules_key_statements(config.account_id, config.region, arns)
    return {**key_policy, "Statement": [*key_policy["Statement"], *statements]}


def release_task_request(
    file_system_id: str, association: DataRepositoryAssociationConfig
) -> dict[str, Any]:
    """The CreateDataRepositoryTask request that frees one path's unread, exported files.

    Only a release task frees Lustre space, and only for files S3 holds (the API's
    ``ReleaseConfiguration``); the path is relative to the file system's root (the API's
    ``Paths``), and last access is what ``relatime`` keeps. No report: the task's status is in
    ``DescribeDataRepositoryTasks``. The API at our botocore pin:
    https://github.com/boto/botocore/blob/1.44.8/botocore/data/fsx/2018-03-01/service-2.json

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
    file_system_arn: str,
    failures_queue_arn: str,
    region: str,
    account_id: str,
    *,
    key_arn: str,
    schedule_arns: list[str],
) -> dict[str, Any]:
    """What the release schedules may do: start tasks on this file system, report failures.

    EventBridge Scheduler sends a run it could not deliver to the target's dead-letter queue
    with the schedule's own role (EventBridge Scheduler user guide, "Configuring a dead-letter
    queue"), and decrypts the schedule's input with it before each run ("Encryption at rest":
    the execution role needs ``kms:Decrypt`` on the schedule's key).

    Args:
        file_system_arn: the file system the tasks run on.
        failures_queue_arn: the dead-letter queue of the schedules.
        region: the stack's region (the task ARNs').
        account_id: the stack's account (the task ARNs').
        key_arn: the data key, which encrypts the schedules' input.
        schedule_arns: :func:`release_schedule_arns`: the role decrypts their input only.
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
            {
                "Sid": "DecryptReleaseSchedules",
                "Effect": "Allow",
                "Action": "kms:Decrypt",
                "Resource": key_arn,
                "Condition": {
                    "StringEquals": {
                        "kms:EncryptionContext:aws:scheduler:schedule:arn": schedule_arns
                    }
                },
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


def capacity(
    name: str,
    *,
    config: PlatformConfig,
    lustre: LustreConfig,
    file_system: aws.fsx.LustreFileSystem,
    key: aws.kms.Key,
    parent: pulumi.Resource,
) -> None:
    """The daily release task of each releasing path, and the free capacity alarm.

    Args:
        name: the storage component's name, prefix of every resource's.
        config: the validated platform (cluster name, account, region).
        lustre: the file system's config (releasing paths, alarm settings).
        file_system: the file system.
        key: the data key, which encrypts the schedules' input (its policy lets Scheduler use
            it: :func:`release_schedules_key_statements`).
        parent: the storage component.
    """
    child = pulumi.ResourceOptions(parent=parent)
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
            policy=pulumi.Output.all(file_system.arn, failures.arn, key.arn).apply(
                lambda arns: json.dumps(
                    release_role_policy(
                        arns[0],
                        arns[1],
                        config.region,
                        config.account_id,
                        key_arn=arns[2],
                        schedule_arns=release_schedule_arns(config, lustre),
                    )
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
            aws.scheduler.Schedule(
                f"{name}-release{path}",
                name=release_schedule_name(config.name, association),
                description=f"Release {path} files unread for "
                f"{association.release_after_days} days (S3 holds them)",
                schedule_expression=expression,
                schedule_expression_timezone="UTC",
                flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
                # The input names the file system and its paths; encrypted with the stack's
                # data key, like the data itself (checkov CKV_AWS_297).
                kms_key_arn=key.arn,
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
                opts=pulumi.ResourceOptions(parent=parent, depends_on=[permission]),
            )
    # Reported per storage target: Sum over one minute is the file system's free space,
    # Minimum only its fullest target's (CAPACITY_ALARM_PERIOD_SECONDS).
    _alarm(
        f"{name}-lustre-free-capacity",
        description=f"{config.name}: the Lustre file system has less than "
        f"{lustre.free_capacity_alarm_percent}% of its {lustre.storage_capacity_gib} GiB "
        "free (README, 'Where data and checkpoints live': release, or grow it)",
        metric=(FSX_CLOUDWATCH_NAMESPACE, "FreeDataStorageCapacity", "Sum"),
        dimensions={FSX_CLOUDWATCH_DIMENSION: file_system.id},
        breached_when=(
            "LessThanThreshold",
            free_capacity_threshold_bytes(lustre),
            CAPACITY_ALARM_PERIODS,
        ),
        period_seconds=CAPACITY_ALARM_PERIOD_SECONDS,
        actions=lustre.alarm_actions,
        opts=child,
    )
