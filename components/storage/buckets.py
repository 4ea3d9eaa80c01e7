"""S3 buckets: hardened data buckets, their access-log bucket, and their lifecycle rules.

Every bucket is owner-enforced, private, versioned, encrypted and TLS-only, and aborts
incomplete multipart uploads; data buckets use the stack's data key and log their requests into
one access-log bucket.
"""

from __future__ import annotations

import json
import typing
from typing import Any, Final

import pulumi
import pulumi_aws as aws

from components.config import BucketConfig, PlatformConfig, access_log_bucket_name, bucket_name
from components.iam import deny_insecure_transport

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


def hardened_bucket(
    resource_name: str,
    s3_name: str,
    *,
    encryption: aws.s3.BucketServerSideEncryptionConfigurationRuleArgsDict,
    policy: typing.Callable[[str], dict[str, Any]],
    rules: list[aws.s3.BucketLifecycleConfigurationRuleArgsDict],
    parent: pulumi.Resource,
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
        parent: the storage component, parent of the bucket's settings.
        stateful: options of the bucket itself (parent, protection).

    Returns:
        The bucket, and every resource that has to exist before the bucket is used.
    """
    s3_bucket = aws.s3.Bucket(resource_name, bucket=s3_name, force_destroy=False, opts=stateful)
    in_bucket = pulumi.ResourceOptions(parent=parent, depends_on=[s3_bucket])
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
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[public]),
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
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[versioning]),
    )
    return s3_bucket, [s3_bucket, ownership, public, versioning, sse, bucket_policy, lifecycle]


def access_log_bucket(
    name: str, config: PlatformConfig, *, parent: pulumi.Resource, stateful: pulumi.ResourceOptions
) -> tuple[aws.s3.Bucket, list[pulumi.Resource]]:
    """The bucket the data buckets' server access logs go to.

    S3-managed encryption, because log delivery does not write to a bucket whose default
    encryption is SSE-KMS (S3 user guide, "Enabling Amazon S3 server access logging");
    logs expire after ``storage.accessLogs.retentionDays``.

    Args:
        name: the storage component's name, prefix of the bucket's.
        config: the validated platform (buckets, access logs, account).
        parent: the storage component.
        stateful: options of the bucket itself (parent, protection).
    """
    sources = [f"arn:aws:s3:::{bucket_name(config, b)}" for b in config.storage.buckets]
    logs = config.storage.access_logs
    return hardened_bucket(
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
        parent=parent,
        stateful=stateful,
    )


def data_bucket(
    name: str,
    config: PlatformConfig,
    bucket: BucketConfig,
    *,
    key: aws.kms.Key,
    access_logs: tuple[aws.s3.Bucket, list[pulumi.Resource]],
    parent: pulumi.Resource,
    stateful: pulumi.ResourceOptions,
) -> list[pulumi.Resource]:
    """A data bucket, encrypted with the data key, logging into the access-log bucket.

    Args:
        name: the storage component's name, prefix of the bucket's.
        config: the validated platform (names).
        bucket: the bucket's config.
        key: the stack's data key.
        access_logs: the access-log bucket and what it needs first (:func:`access_log_bucket`).
        parent: the storage component.
        stateful: options of the bucket itself (parent, protection).

    Returns:
        Every resource that has to exist before the bucket is used.
    """
    resource_name = f"{name}-{bucket.name}"
    s3_bucket, ready = hardened_bucket(
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
        parent=parent,
        stateful=stateful,
    )
    log_bucket, log_bucket_ready = access_logs
    logging = aws.s3.BucketLogging(
        resource_name,
        bucket=s3_bucket.id,
        target_bucket=log_bucket.id,
        target_prefix=f"{bucket.name}/",
        target_object_key_format={"partitioned_prefix": {"partition_date_source": "EventTime"}},
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[s3_bucket, *log_bucket_ready]),
    )
    return [*ready, logging]
