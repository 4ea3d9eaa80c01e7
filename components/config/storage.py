"""Config section ``platform.storage``: S3 buckets and FSx for Lustre (storage.py)."""

from __future__ import annotations

import dataclasses
import ipaddress
import posixpath
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Final, Literal, get_args

from pydantic import AfterValidator, Field

from components.config.base import (
    CONFIG_KEY,
    AvailabilityZone,
    ConfigProblem,
    InstanceType,
    Ipv4Cidr,
    RetentionDays,
    StrictModel,
    duplicates,
    matching,
)

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig


LUSTRE_THROUGHPUT_PER_TIB: Final = (125, 250, 500, 1000)
"""PERSISTENT_2 throughput tiers, MB/s per TiB of storage."""


LUSTRE_FIRST_STEPS_GIB: Final = (1200, 2400)


LUSTRE_STEP_GIB: Final = 2400


MAX_DATA_REPOSITORY_ASSOCIATIONS: Final = 8


MAX_BACKUP_RETENTION_DAYS: Final = 90


DEFAULT_BACKUP_RETENTION_DAYS: Final = 7


def automatic_metadata_iops(capacity_gib: int) -> int:
    """Metadata IOPS that FSx's AUTOMATIC mode gives an SSD PERSISTENT_2 file system.

    1500 at 1200 GiB, 3000 at 2400, 6000 up to 9600, 12000 up to 45600, then 12000 per
    24000 GiB, at most 192000. User-provisioned IOPS below it are refused by the FSx API.
    Between the 24000 GiB steps (50400 GiB: 25200 pro rata) the floor is the next value FSx
    accepts for user-provisioned IOPS (a multiple of 12000), so config may refuse a value AWS
    would take but never accept one it refuses. FSx for Lustre User Guide, "Lustre metadata
    performance configuration":
    https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-metadata-performance.html
    """
    if capacity_gib <= 1200:
        return 1500
    if capacity_gib <= 2400:
        return 3000
    if capacity_gib <= 9600:
        return 6000
    if capacity_gib <= 45600:
        return 12000
    return min(12000 * -(-capacity_gib // 24000), 192000)


DataRepositoryEvent = Literal["NEW", "CHANGED", "DELETED"]


DEFAULT_MOUNT_OPTIONS: Final = ("relatime", "flock")
"""The Lustre client options of AWS's mount command for FSx (FSx for Lustre User Guide,
"Mounting your Amazon FSx file system": ``-o relatime,flock``): ``relatime`` keeps access times,
which a release by last access reads (``DurationSinceLastAccess`` in the FSx API); ``flock``
gives coherent locks across clients (mount.lustre(8)). The FSx API at our botocore pin:
https://github.com/boto/botocore/blob/1.44.8/botocore/data/fsx/2018-03-01/service-2.json"""


ALL_EVENTS: Final[tuple[DataRepositoryEvent, ...]] = ("NEW", "CHANGED", "DELETED")


BucketKey = Annotated[
    str,
    AfterValidator(
        matching(
            r"[a-z][a-z0-9-]{0,20}",
            "lower-case letters, digits and '-', starting with a letter, at most 21 characters",
        )
    ),
]


BucketName = Annotated[
    str,
    AfterValidator(
        matching(
            r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]",
            "an S3 bucket name (3-63 lower-case letters, digits, '.' and '-')",
        )
    ),
]


NamespaceName = Annotated[
    str,
    AfterValidator(
        matching(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a Kubernetes namespace name (DNS label)")
    ),
]


FileSystemPath = Annotated[
    str, AfterValidator(matching(r"/[A-Za-z0-9._/-]*", "an absolute path such as /datasets"))
]


S3Prefix = Annotated[
    str,
    AfterValidator(
        matching(
            r"([A-Za-z0-9._-]+/)*",
            "an S3 key prefix ending in '/', e.g. checkpoints/ (empty for the whole bucket)",
        )
    ),
]


SnsTopicArn = Annotated[
    str,
    AfterValidator(
        matching(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}", "an SNS topic ARN")
    ),
]


DailyTime = Annotated[str, AfterValidator(matching(r"([01]\d|2[0-3]):[0-5]\d", "HH:MM (UTC)"))]


WeeklyTime = Annotated[
    str,
    AfterValidator(matching(r"[1-7]:([01]\d|2[0-3]):[0-5]\d", "D:HH:MM, D=1 (Monday)..7 (UTC)")),
]


# In the order S3's lifecycle waterfall allows transitions (STORAGE_CLASS_ORDER reads it).
StorageClass = Literal[
    "STANDARD_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE"
]


STORAGE_CLASS_ORDER: Final[tuple[str, ...]] = get_args(StorageClass)
"""The order S3 lifecycle transitions may go in, as :data:`StorageClass` lists them (S3 user
guide, "Transitioning objects using Amazon S3 Lifecycle": the waterfall)."""


ARCHIVE_CLASSES: Final = ("GLACIER", "DEEP_ARCHIVE")
"""Classes whose objects must be restored before anyone can read them: FSx cannot import or
read them lazily, so a bucket linked to the file system never transitions to them."""


STANDARD_IA_MIN_DAYS: Final = 30
"""S3 refuses a transition to STANDARD_IA before 30 days ("'Days' in Transition action for
StorageClass 'STANDARD_IA' must be greater than or equal to 30")."""


class TransitionConfig(StrictModel):
    """A lifecycle transition of a bucket's current objects to a cheaper storage class."""

    days: int = Field(ge=1, le=36500, description="Days after an object is written. Required.")
    storage_class: StorageClass = Field(
        description="Class it moves to: STANDARD_IA (30 days or more), INTELLIGENT_TIERING, "
        "GLACIER_IR, or (buckets not linked to the file system) GLACIER or DEEP_ARCHIVE. "
        "Required."
    )


class BucketConfig(StrictModel):
    """An S3 bucket for datasets, checkpoints and artifacts."""

    name: BucketKey = Field(description="Key the rest of the config refers to. Required.")
    bucket_name: BucketName | None = Field(
        default=None,
        description="Globally unique S3 name. Default: <cluster>-<name>-<accountId>.",
    )
    noncurrent_version_retention_days: int = Field(
        default=30,
        ge=1,
        le=3650,
        description="Days an overwritten or deleted object version is kept. Default: 30.",
    )
    transitions: list[TransitionConfig] = Field(
        default_factory=list,
        description="Lifecycle transitions of current objects, in S3's order of classes (old "
        "checkpoints to GLACIER_IR, say). Default: none (all STANDARD).",
    )
    current_version_retention_days: int | None = Field(
        default=None,
        ge=1,
        le=36500,
        description="Days after it is written that S3 expires an object (it becomes an old "
        "version, kept noncurrentVersionRetentionDays more, then goes). Deletes on the file "
        "system are not exported, and team roles cannot delete, so without it a bucket of "
        "checkpoints only grows. Later than every transition; refused on a bucket an "
        "association with releaseAfterDays links (a released file's only copy is its object). "
        "Default: none (kept until someone deletes it).",
    )
    team_access: bool = Field(
        default=False,
        description="Each team's job role reads and writes <team>/ of this bucket directly "
        "(streaming data loaders, sync sidecars); for buckets no association links. "
        "Default: false.",
    )


class DataRepositoryAssociationConfig(StrictModel):
    """A link between a directory of the file system and a prefix of a bucket.

    Data flows one way on each path: S3 into the file system (datasets) or the file system into
    S3 (checkpoints, artifacts). AWS warns that importing and exporting the same events on one
    path can overwrite either side (FSx for Lustre User Guide, "Automatically export updates to
    your S3 bucket").
    """

    file_system_path: FileSystemPath = Field(
        description="Directory on the file system, e.g. /checkpoints. Required."
    )
    bucket: BucketKey | None = Field(
        default=None,
        description="Key of the bucket (storage.buckets) it links. Default: storage.lustre.bucket.",
    )
    s3_prefix: S3Prefix = Field(
        default="", description="Prefix in the bucket. Default: the whole bucket."
    )
    import_events: list[DataRepositoryEvent] | None = Field(
        default=None,
        description="S3 changes imported into the file system. Default: NEW, CHANGED, DELETED "
        "on a path that exports nothing, none on one that exports.",
    )
    export_events: list[DataRepositoryEvent] = Field(
        default_factory=list,
        description="File system changes exported to S3 (checkpoints: NEW and CHANGED). "
        "Default: none.",
    )
    batch_import_metadata_on_create: bool = Field(
        default=True,
        description="List the prefix's objects when the association is created. Default: true.",
    )
    release_after_days: int | None = Field(
        default=None,
        ge=1,
        le=3650,
        description="Free the file system's copy of files here that nobody has read for this "
        "many days and that S3 holds (a daily RELEASE_DATA_FROM_FILESYSTEM task; a later read "
        "fetches them back from S3). Default: never.",
    )

    @property
    def imports(self) -> list[DataRepositoryEvent]:
        """S3 events imported: configured, or all three on a path that exports nothing."""
        if self.import_events is not None:
            return list(self.import_events)
        return [] if self.export_events else list(ALL_EVENTS)


TEAM_CLAIM_PREFIX: Final = "lustre-"
"""Every team claim's name starts with it (:attr:`TeamRoot.claim_name`)."""
NO_ACCESS_TIME_OPTIONS: Final = frozenset({"ro", "noatime"})
"""Mount options under which a Lustre client records no access times, which release goes by."""
SHARED_MOUNT: Final = "/fsx"
"""Where every training pod, slurmd and login pod sees the shared file system."""
TEAM_HOME_PATH: Final = "/teams"
"""Each team's working directory (scratch, the Neuron compile cache), linked to no bucket."""
DNS_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
MAX_CLAIM_NAME_LENGTH: Final = 63
"""A claim's name is also its pod volume's name, a DNS label (core/v1 validation)."""


@dataclasses.dataclass(frozen=True)
class TeamRoot:
    """A directory of the file system under which every team has its own directory.

    Attributes:
        path: normalised absolute path, e.g. ``/checkpoints``.
        writable: whether teams write there: False for a path that only imports from S3
            (what a job wrote would never reach S3, and a later import could overwrite it).
    """

    path: str
    writable: bool

    @property
    def claim_name(self) -> str:
        """Name of each team's claim on its directory here: ``lustre-checkpoints``."""
        return (
            TEAM_CLAIM_PREFIX
            + self.path.strip("/").replace("/", "-").replace(".", "-").replace("_", "-").lower()
        )


ROOT_SQUASH_PATTERN: Final = r"[1-9][0-9]{0,9}:[1-9][0-9]{0,9}"
"""FSx's ``LustreRootSquash`` (``UID:GID``, up to ten digits each), both non-zero: zero turns
root squash off (FSx API model, LustreRootSquashConfiguration)."""
ADMIN_CLIENT_BLOCK_PREFIX: Final = 28


class LustreAdminClientConfig(StrictModel):
    """The one client that mounts the file system as root: it lays out the team directories.

    An EC2 instance at a fixed address (the file system's only no-squash NID) that runs the
    layout at boot and stops (docs/concepts/data-and-checkpoints.md, "Team isolation").
    """

    reserved_cidr: Ipv4Cidr | None = Field(
        default=None,
        description="A block of the training zone's private subnet reserved for explicit "
        "addresses (an EC2 subnet CIDR reservation: nodes and pods never get them); the admin "
        "client takes its first address. /28 to /32. Default: the second-to-last /28 of the "
        "subnet the stack creates; required with network.existingVpc.",
    )
    instance_type: InstanceType = Field(
        default="m7i.large",
        description="Instance type (it runs for minutes at each layout change). Default: "
        "m7i.large.",
    )


class LustreConfig(StrictModel):
    """FSx for Lustre PERSISTENT_2 in the training zone, linked to one S3 bucket."""

    storage_capacity_gib: int = Field(
        alias="storageCapacityGiB",
        ge=1200,
        description="SSD capacity, GiB: 1200, 2400, then steps of 2400. Required.",
    )
    throughput_per_tib: int = Field(
        alias="throughputPerTiB",
        default=250,
        description="MB/s per TiB: 125, 250, 500 or 1000. Default: 250.",
    )
    metadata_iops: int | None = Field(
        default=None,
        ge=1500,
        description="Provisioned metadata IOPS (1500, 3000, 6000, then steps of 12000). "
        "Default: automatic, sized by FSx from capacity.",
    )
    data_compression: Literal["LZ4", "NONE"] = Field(
        default="LZ4", description="Compress data on disk. Default: LZ4."
    )
    efa_enabled: bool = Field(
        default=False,
        description="EFA-enabled file system. Refused for now: the nodes' Lustre client is not "
        "set up for EFA (docs: concepts, data and checkpoints, 'The fast path'). Default: false.",
    )
    bucket: BucketKey | None = Field(
        default=None,
        description="Key of the bucket (storage.buckets) of associations that name none. "
        "Default: none (each association names its bucket).",
    )
    associations: list[DataRepositoryAssociationConfig] = Field(
        default_factory=list,
        description="Data repository associations, at most 8, non-overlapping. Default: none.",
    )
    checkpoint_path: FileSystemPath = Field(
        default="/checkpoints",
        description="Directory of checkpoints: runtimes give each job CHECKPOINT_DIR="
        "<mount><path>/<team>/<job>. With associations it must be one that exports NEW and "
        "CHANGED, imports nothing and does not export deletes. Default: /checkpoints.",
    )
    automatic_backup_retention_days: int | None = Field(
        default=None,
        ge=0,
        le=MAX_BACKUP_RETENTION_DAYS,
        description="Daily backups kept, days (0 turns them off). FSx cannot back up a file "
        "system linked to S3 by data repository associations, so it must be 0 with "
        "associations (S3 is the durable copy: docs, concepts, data and checkpoints). "
        f"Default: 0 with associations, {DEFAULT_BACKUP_RETENTION_DAYS} without.",
    )

    @property
    def backup_retention_days(self) -> int:
        """Daily backups kept: configured, or the default for linked or unlinked file systems."""
        if self.automatic_backup_retention_days is not None:
            return self.automatic_backup_retention_days
        return 0 if self.associations else DEFAULT_BACKUP_RETENTION_DAYS

    daily_backup_start_time: DailyTime = Field(
        default="03:00", description="Backup window start, UTC. Default: 03:00."
    )
    weekly_maintenance_start_time: WeeklyTime = Field(
        default="7:04:00", description="Maintenance window start, UTC. Default: 7:04:00."
    )
    log_level: Literal["WARN_ERROR", "WARN_ONLY", "ERROR_ONLY", "DISABLED"] = Field(
        default="WARN_ERROR",
        description="Data repository events logged to CloudWatch. Default: WARN_ERROR.",
    )
    log_retention_days: RetentionDays = Field(
        default=90, description="Days the file system's log group keeps events. Default: 90."
    )
    zone: AvailabilityZone | None = Field(
        default=None,
        description="Must be the training zone when set (EFA pools read it at full speed only "
        "from there). Default: the training zone.",
    )
    namespaces: list[NamespaceName] = Field(
        default_factory=list,
        description="Namespaces that mount it; each gets its own PersistentVolume and claim "
        "`shared-lustre`. Default: none.",
    )
    release_start_time: DailyTime = Field(
        default="04:00",
        description="When the first path's daily release task starts, UTC; each further path "
        "with releaseAfterDays an hour later, as FSx runs one task at a time. Default: 04:00.",
    )
    free_capacity_alarm_percent: int = Field(
        default=20,
        ge=1,
        le=90,
        description="Alarm when the file system's free capacity stays below this share of it "
        "for 15 minutes. Default: 20.",
    )
    alarm_actions: list[SnsTopicArn] = Field(
        default_factory=list,
        description="SNS topics the capacity alarm notifies. Default: none (the alarm shows in "
        "CloudWatch only).",
    )
    root_squash: Annotated[
        str, AfterValidator(matching(ROOT_SQUASH_PATTERN, "UID:GID, both non-zero"))
    ] = Field(
        default="65534:65534",
        description="Who root on every client but the admin client is on the file system, "
        "UID:GID (non-zero: root squash is always on). Default: 65534:65534 (nobody).",
    )
    admin_client: LustreAdminClientConfig = Field(
        default_factory=LustreAdminClientConfig,
        description="The client that lays out team directories as root. Default: an "
        "m7i.large at the first address of its default reserved block.",
    )
    mount_options: list[str] = Field(
        default_factory=lambda: list(DEFAULT_MOUNT_OPTIONS),
        description="Lustre client mount options. Default: [relatime, flock] (AWS's "
        "recommendation; release of unused data goes by last access time).",
    )

    @property
    def team_roots(self) -> list[TeamRoot]:
        """Where teams get directories: every association's path, then :data:`TEAM_HOME_PATH`.

        One layout whatever the number of teams: FSx allows 8 associations per file system,
        so teams share an association and own a directory under it.
        """
        roots = [
            TeamRoot(
                normalized_file_system_path(association.file_system_path),
                writable=not (association.imports and not association.export_events),
            )
            for association in self.associations
        ]
        # Config refuses an association over the home path.
        return [*roots, TeamRoot(TEAM_HOME_PATH, writable=True)]

    @property
    def root_squash_ids(self) -> tuple[int, int]:
        """(uid, gid) root is squashed to."""
        uid, gid = self.root_squash.split(":")
        return int(uid), int(gid)

    def association_bucket(self, association: DataRepositoryAssociationConfig) -> str | None:
        """Key of the bucket an association links: its own, or the file system's default."""
        return association.bucket or self.bucket

    @property
    def checkpoint_root(self) -> str:
        """The checkpoint path, normalised (``/checkpoints/`` is ``/checkpoints``)."""
        return normalized_file_system_path(self.checkpoint_path)

    def checkpoint_association(self) -> DataRepositoryAssociationConfig | None:
        """The association whose path is the checkpoint path, or None."""
        target = self.checkpoint_root
        return next(
            (
                association
                for association in self.associations
                if normalized_file_system_path(association.file_system_path) == target
            ),
            None,
        )


class AccessLogsConfig(StrictModel):
    """The bucket the stack owns for the S3 server access logs of its data buckets.

    Each data bucket logs every request (who, which object, when, the result) under
    ``<bucket key>/`` of this bucket. AWS delivers the logs best-effort and charges only their
    storage. The log bucket itself is encrypted with S3-managed keys (log delivery refuses
    KMS-encrypted destinations), logs nothing and expires its objects.
    """

    bucket_name: BucketName | None = Field(
        default=None,
        description="Globally unique S3 name. Default: <cluster>-access-logs-<accountId>.",
    )
    retention_days: int = Field(
        default=365,
        ge=1,
        le=3650,
        description="Days an access log object is kept, then deleted. Default: 365.",
    )


class StorageConfig(StrictModel):
    """Shared storage: S3 buckets and the Lustre file system in front of one of them."""

    buckets: list[BucketConfig] = Field(default_factory=list, description="Buckets. Default: none.")
    access_logs: AccessLogsConfig = Field(
        default_factory=AccessLogsConfig,
        description="Where the buckets' server access logs go (only with buckets). Default: "
        "a stack-owned log bucket keeping logs 365 days.",
    )
    lustre: LustreConfig | None = Field(
        default=None, description="The shared file system. Default: none."
    )


def storage_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Cross-field problems of ``platform.storage``."""
    storage = config.storage
    base = f"{CONFIG_KEY}.storage"
    keys = [bucket.name for bucket in storage.buckets]
    if duplicates(keys):
        yield ConfigProblem(f"{base}.buckets", keys, "unique bucket keys")
    named = [
        (f"{base}.buckets[{index}].bucketName", bucket_name(config, bucket))
        for index, bucket in enumerate(storage.buckets)
    ]
    if storage.buckets:
        named.append((f"{base}.accessLogs.bucketName", access_log_bucket_name(config)))
    names = [name for _, name in named]
    if duplicates(names):
        yield ConfigProblem(f"{base}.buckets", names, "distinct S3 names (access logs included)")
    for key, name in named:
        if len(name) > 63:
            yield ConfigProblem(
                key, name, "at most 63 characters; the default name is too long, set bucketName"
            )
        elif (refusal := _s3_refuses(name)) is not None:
            yield ConfigProblem(key, name, refusal)
    yield from _reachability_problems(config)
    yield from _transition_problems(config)
    yield from _released_expiry_problems(config)
    lustre = storage.lustre
    if lustre is None:
        return
    base = f"{base}.lustre"
    capacity = lustre.storage_capacity_gib
    if capacity not in LUSTRE_FIRST_STEPS_GIB and capacity % LUSTRE_STEP_GIB:
        yield ConfigProblem(
            f"{base}.storageCapacityGiB",
            capacity,
            f"1200, 2400, or a multiple of {LUSTRE_STEP_GIB} GiB",
        )
    if lustre.throughput_per_tib not in LUSTRE_THROUGHPUT_PER_TIB:
        yield ConfigProblem(
            f"{base}.throughputPerTiB",
            lustre.throughput_per_tib,
            "one of " + ", ".join(map(str, LUSTRE_THROUGHPUT_PER_TIB)) + " (MB/s per TiB)",
        )
    iops = lustre.metadata_iops
    if iops is not None and iops not in (1500, 3000, 6000) and (iops % 12000 or iops > 192000):
        yield ConfigProblem(
            f"{base}.metadataIops", iops, "1500, 3000, 6000, or 12000 to 192000 in steps of 12000"
        )
    elif iops is not None and iops < (floor := automatic_metadata_iops(capacity)):
        yield ConfigProblem(
            f"{base}.metadataIops",
            iops,
            f"at least {floor}, what AUTOMATIC mode gives {capacity} GiB (FSx refuses less), "
            "or leave it out for AUTOMATIC",
        )
    if lustre.efa_enabled:
        yield ConfigProblem(
            f"{base}.efaEnabled",
            True,
            "false: the platform does not configure the nodes' Lustre client for EFA (LNet over "
            "EFA at boot, which the EKS AMI does not do), so every client would still read over "
            "TCP, and turning it off later replaces the file system (docs: concepts, data and "
            "checkpoints, 'The fast path')",
        )
    if lustre.associations and lustre.backup_retention_days:
        yield ConfigProblem(
            f"{base}.automaticBackupRetentionDays",
            lustre.backup_retention_days,
            "0 (or leave it out): FSx cannot back up a file system linked to S3 by data "
            "repository associations; S3, versioned, is the durable copy",
        )
    known = "the key of a bucket in storage.buckets: " + ", ".join(keys)
    if lustre.bucket is not None and lustre.bucket not in keys:
        yield ConfigProblem(f"{base}.bucket", lustre.bucket, known)
    training_zone = config.network.training_zone
    if lustre.zone is not None and lustre.zone != training_zone:
        yield ConfigProblem(
            f"{base}.zone",
            lustre.zone,
            f"the training zone {training_zone}: the file system sits beside the EFA pools",
        )
    associations = lustre.associations
    if len(associations) > MAX_DATA_REPOSITORY_ASSOCIATIONS:
        yield ConfigProblem(
            f"{base}.associations",
            len(associations),
            f"at most {MAX_DATA_REPOSITORY_ASSOCIATIONS} associations per file system",
        )
    paths = [normalized_file_system_path(a.file_system_path) for a in associations]
    for index, path in enumerate(paths):
        for other in paths[:index]:
            if _overlaps(path, other):
                yield ConfigProblem(
                    f"{base}.associations[{index}].fileSystemPath",
                    associations[index].file_system_path,
                    f"a path that neither contains nor is inside {other} (no overlaps)",
                )
    linked = [lustre.association_bucket(a) for a in associations]
    for index, association in enumerate(associations):
        where = f"{base}.associations[{index}]"
        bucket_key = linked[index]
        if bucket_key is None:
            yield ConfigProblem(
                f"{where}.bucket",
                None,
                f"{known} (or set storage.lustre.bucket, the default of associations)",
            )
        elif association.bucket is not None and bucket_key not in keys:
            yield ConfigProblem(f"{where}.bucket", bucket_key, known)
        prefix = association.s3_prefix
        for other_index in range(index):
            other = associations[other_index].s3_prefix
            if linked[other_index] == bucket_key and (
                prefix.startswith(other) or other.startswith(prefix)
            ):
                yield ConfigProblem(
                    f"{where}.s3Prefix",
                    prefix,
                    f"a prefix that neither contains nor is inside {other!r} of the same bucket",
                )
        for field_name, events in (
            ("importEvents", association.import_events or []),
            ("exportEvents", association.export_events),
        ):
            if duplicates(list(events)):
                yield ConfigProblem(f"{where}.{field_name}", events, "each event once")
        if both := sorted(set(association.imports) & set(association.export_events)):
            yield ConfigProblem(
                f"{where}.importEvents",
                association.imports,
                f"no event the path also exports ({', '.join(both)}): data flows one way on a "
                "path, since importing and exporting the same changes can overwrite either "
                "side (set importEvents: [] on a path that exports)",
            )
    yield from _checkpoint_problems(lustre, base)
    yield from _admin_client_problems(config, lustre, base)
    yield from _team_root_problems(lustre, base)
    if NO_ACCESS_TIME_OPTIONS & set(lustre.mount_options):
        yield ConfigProblem(
            f"{base}.mountOptions",
            lustre.mount_options,
            f"options without {' or '.join(sorted(NO_ACCESS_TIME_OPTIONS))}: releasing data "
            "not read for a while goes by access time (use relatime, and read-write mounts)",
        )
    if duplicates(lustre.namespaces):
        yield ConfigProblem(f"{base}.namespaces", lustre.namespaces, "each namespace once")


def admin_client_block(config: PlatformConfig) -> ipaddress.IPv4Network | None:
    """The reserved block of the admin client: configured, or the default of a created subnet.

    The default is the second-to-last /28 of the training zone's private subnet: the last
    holds the subnet's broadcast address, which AWS reserves. None when neither is known (an
    existing VPC without ``adminClient.reservedCidr``, refused by config).
    """
    lustre = config.storage.lustre
    if lustre is None:
        return None
    if lustre.admin_client.reserved_cidr is not None:
        return ipaddress.IPv4Network(lustre.admin_client.reserved_cidr)
    subnet = config.network.planned_private_cidr(config.network.training_zone)
    if subnet is None:
        return None
    network = ipaddress.IPv4Network(subnet)
    size = 2 ** (32 - ADMIN_CLIENT_BLOCK_PREFIX)
    return ipaddress.IPv4Network(
        (int(network.broadcast_address) + 1 - 2 * size, ADMIN_CLIENT_BLOCK_PREFIX)
    )


def admin_client_address(config: PlatformConfig) -> str | None:
    """The admin client's private address: the first of its reserved block."""
    block = admin_client_block(config)
    return None if block is None else str(block.network_address)


def _admin_client_problems(
    config: PlatformConfig, lustre: LustreConfig, base: str
) -> Iterator[ConfigProblem]:
    key = f"{base}.adminClient.reservedCidr"
    given = lustre.admin_client.reserved_cidr
    if given is None:
        if config.network.existing_vpc is not None:
            yield ConfigProblem(
                key,
                None,
                "a free /28 of the training zone's private subnet (the stack cannot read an "
                "existing subnet's addresses): the admin client's reserved addresses",
            )
        return
    block = ipaddress.IPv4Network(given)
    if not ADMIN_CLIENT_BLOCK_PREFIX <= block.prefixlen <= 32:
        yield ConfigProblem(key, given, f"a /{ADMIN_CLIENT_BLOCK_PREFIX} to /32 block")
    subnet = config.network.planned_private_cidr(config.network.training_zone)
    if subnet is not None and not block.subnet_of(ipaddress.IPv4Network(subnet)):
        yield ConfigProblem(
            key,
            given,
            f"a block inside the training zone's private subnet {subnet}, where the file "
            "system's clients are",
        )


def _team_root_problems(lustre: LustreConfig, base: str) -> Iterator[ConfigProblem]:
    """Each team directory root needs a claim name of its own that Kubernetes accepts."""
    for index, association in enumerate(lustre.associations):
        if _overlaps(normalized_file_system_path(association.file_system_path), TEAM_HOME_PATH):
            yield ConfigProblem(
                f"{base}.associations[{index}].fileSystemPath",
                association.file_system_path,
                f"a path apart from {TEAM_HOME_PATH}, the teams' working directories, which "
                "no bucket links",
            )
    names: dict[str, str] = {}
    for root in lustre.team_roots:
        claim = root.claim_name
        if len(claim) > MAX_CLAIM_NAME_LENGTH or not re.fullmatch(DNS_LABEL, claim):
            yield ConfigProblem(
                f"{base}.associations",
                root.path,
                f"a path below the root whose claim name ({claim}) is a DNS label of at most "
                f"{MAX_CLAIM_NAME_LENGTH} characters",
            )
        if claim in names:
            yield ConfigProblem(
                f"{base}.associations",
                root.path,
                f"a path whose claim name ({claim}) differs from that of {names[claim]}",
            )
        names.setdefault(claim, root.path)


def _checkpoint_problems(lustre: LustreConfig, base: str) -> Iterator[ConfigProblem]:
    """The checkpoint path of a linked file system is an export-only association.

    A checkpoint is durable once S3 has it, so the path must export what jobs write (NEW and
    CHANGED), import nothing (an import could overwrite a shard being written), and not export
    deletes: a job's clean-up, or anyone's ``rm -rf``, would otherwise delete the S3 copy too.
    """
    if not lustre.associations:
        return
    association = lustre.checkpoint_association()
    if association is None:
        paths = ", ".join(a.file_system_path for a in lustre.associations)
        yield ConfigProblem(
            f"{base}.checkpointPath",
            lustre.checkpoint_path,
            f"the fileSystemPath of an association ({paths}), so checkpoints reach S3",
        )
        return
    index = lustre.associations.index(association)
    where = f"{base}.associations[{index}]"
    missing = [event for event in ("NEW", "CHANGED") if event not in association.export_events]
    if missing or "DELETED" in association.export_events:
        yield ConfigProblem(
            f"{where}.exportEvents",
            association.export_events,
            "[NEW, CHANGED] on the checkpoint path: every checkpoint written reaches S3, and a "
            "delete on the file system (a job's clean-up, a release) never deletes the S3 copy",
        )
    if association.imports:
        yield ConfigProblem(
            f"{where}.importEvents",
            association.imports,
            "[] on the checkpoint path: it only exports",
        )


def _released_expiry_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """No current-version expiry on a bucket behind an association that releases files.

    A release leaves a stub on the file system whose data FSx fetches back from the S3 object
    on the next read (FSx for Lustre User Guide, "Releasing data from your file system"). Once
    S3 expires that object (a delete marker over it; the old version is not what a restore
    reads) the stub can never be restored, while its size and mtime still look whole.
    """
    lustre = config.storage.lustre
    if lustre is None:
        return
    releasing: dict[str, list[str]] = {}
    for association in lustre.associations:
        key = lustre.association_bucket(association)
        if association.release_after_days is not None and key is not None:
            releasing.setdefault(key, []).append(association.file_system_path)
    for index, bucket in enumerate(config.storage.buckets):
        paths = releasing.get(bucket.name)
        if paths and bucket.current_version_retention_days is not None:
            yield ConfigProblem(
                f"{CONFIG_KEY}.storage.buckets[{index}].currentVersionRetentionDays",
                bucket.current_version_retention_days,
                "unset: associations release files of this bucket ("
                + ", ".join(paths)
                + ", releaseAfterDays), and a released file whose S3 object expired can never "
                "be restored; drop releaseAfterDays on those paths to expire objects",
            )


def _transition_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Lifecycle transitions S3 accepts, and none a linked bucket's readers could not follow."""
    lustre = config.storage.lustre
    linked = {lustre.association_bucket(a) for a in lustre.associations} if lustre else set()
    for index, bucket in enumerate(config.storage.buckets):
        base = f"{CONFIG_KEY}.storage.buckets[{index}].transitions"
        classes = [t.storage_class for t in bucket.transitions]
        days = [t.days for t in bucket.transitions]
        ranks = [STORAGE_CLASS_ORDER.index(c) for c in classes]
        if ranks != sorted(set(ranks)) or days != sorted(set(days)):
            yield ConfigProblem(
                base,
                [f"{c}@{d}" for c, d in zip(classes, days, strict=True)],
                "each class once, later days for later classes, in S3's order "
                + " < ".join(STORAGE_CLASS_ORDER),
            )
        expiry = bucket.current_version_retention_days
        if expiry is not None and days and expiry <= max(days):
            yield ConfigProblem(
                f"{CONFIG_KEY}.storage.buckets[{index}].currentVersionRetentionDays",
                expiry,
                f"more than {max(days)} days, the last transition (an object would go before "
                "it moves)",
            )
        for position, transition in enumerate(bucket.transitions):
            where = f"{base}[{position}]"
            if transition.storage_class == "STANDARD_IA" and transition.days < STANDARD_IA_MIN_DAYS:
                yield ConfigProblem(
                    f"{where}.days",
                    transition.days,
                    f"at least {STANDARD_IA_MIN_DAYS} for STANDARD_IA (S3 refuses less)",
                )
            if transition.storage_class in ARCHIVE_CLASSES and bucket.name in linked:
                yield ConfigProblem(
                    f"{where}.storageClass",
                    transition.storage_class,
                    "one of "
                    + ", ".join(c for c in STORAGE_CLASS_ORDER if c not in ARCHIVE_CLASSES)
                    + ": the bucket is linked to the file system, which cannot read objects "
                    "that need a restore",
                )


def _reachability_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Every data bucket is reachable by jobs: linked by an association, or by the team roles."""
    storage = config.storage
    lustre = storage.lustre
    linked = {lustre.association_bucket(a) for a in lustre.associations} if lustre else set()
    for index, bucket in enumerate(storage.buckets):
        if bucket.name in linked or (bucket.team_access and config.teams):
            continue
        yield ConfigProblem(
            f"{CONFIG_KEY}.storage.buckets[{index}]",
            bucket.name,
            "a bucket jobs can reach: link it to the file system "
            "(storage.lustre.associations[].bucket) or set teamAccess: true so each team's job "
            "role reaches <team>/ in it" + ("" if config.teams else " (with teams)"),
        )


def normalized_file_system_path(path: str) -> str:
    """An absolute path without repeated, trailing or ``.`` components: ``/a//b/`` is ``/a/b``.

    What overlap checks compare and what names an association's resource (storage.py), so two
    spellings of one directory are one association.
    """
    return posixpath.normpath(path).replace("//", "/", 1)


def _overlaps(path: str, other: str) -> bool:
    def inside(inner: str, outer: str) -> bool:
        return outer in ("/", inner) or inner.startswith(outer + "/")

    return inside(path, other) or inside(other, path)


S3_RESERVED_PREFIXES: Final = ("xn--", "sthree-", "amzn-s3-demo-")


S3_RESERVED_SUFFIXES: Final = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def _s3_refuses(name: str) -> str | None:
    """Why S3 refuses a bucket name the basic pattern allows, or None.

    S3 user guide, "General purpose bucket naming rules".
    """
    rules = "an S3 bucket name S3 accepts"
    if ".." in name:
        return f"{rules}: no two adjacent periods"
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        pass
    else:
        return f"{rules}: not shaped like an IP address"
    if name.startswith(S3_RESERVED_PREFIXES):
        return f"{rules}: none of the reserved prefixes " + ", ".join(S3_RESERVED_PREFIXES)
    if name.endswith(S3_RESERVED_SUFFIXES):
        return f"{rules}: none of the reserved suffixes " + ", ".join(S3_RESERVED_SUFFIXES)
    return None


def bucket_name(config: PlatformConfig, bucket: BucketConfig) -> str:
    """The S3 name of a bucket: its configured name, or <cluster>-<key>-<account>."""
    return bucket.bucket_name or f"{config.name}-{bucket.name}-{config.account_id}"


def association_bucket_name(
    config: PlatformConfig, association: DataRepositoryAssociationConfig
) -> str | None:
    """The S3 name of the bucket an association links; None when config names no known one."""
    lustre = config.storage.lustre
    key = lustre.association_bucket(association) if lustre else None
    bucket = next((b for b in config.storage.buckets if b.name == key), None)
    return bucket_name(config, bucket) if bucket else None


def access_log_bucket_name(config: PlatformConfig) -> str:
    """The S3 name of the access log bucket: configured, or <cluster>-access-logs-<account>."""
    configured = config.storage.access_logs.bucket_name
    return configured or f"{config.name}-access-logs-{config.account_id}"
