"""Config section ``platform.modelStore``: the shared model store on Amazon EFS (model_store.py).

One encrypted EFS file system, reachable from every zone, with an access point per team (its
gid, a 2770 root under ``/<team>``) and a ``shared`` area that teams mount read-only and the
platform's writers fill (docs: concepts, data and checkpoints, "Where models, datasets and
checkpoints live"). Values and limits follow the EFS API model at the botocore pin,
boto/botocore 1.44.8 botocore/data/efs/2015-02-01/service-2.json.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Final, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from components.config.base import CONFIG_KEY, ConfigProblem, StrictModel, duplicates
from components.config.teams import MAX_TEAM_GID, MIN_TEAM_GID, WORKLOAD_GID

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig


MAX_ACCESS_POINTS: Final = 10_000
"""Access points per file system (EFS API model, CreateAccessPoint: "A file system can have a
maximum of 10,000 access points unless you request an increase")."""
SHARED_AREA: Final = "shared"
"""Name of the read-only area every team mounts (access point root ``/shared``)."""
SHARED_READERS: Final = f"{SHARED_AREA}-readers"
"""Name of the access point non-publishers read ``/shared`` through (its resource's suffix, as
a team's name is the suffix of its own)."""
TRANSITION_DAYS: Final = (1, 7, 14, 30, 60, 90, 180, 270, 365)
"""Days EFS lifecycle transitions accept (EFS API model, TransitionToIARules and
TransitionToArchiveRules: AFTER_<n>_DAY(S))."""
STORE_UID: Final = 65533
"""The default POSIX user of the store's access points: no person's. Outside the range useradd
gives people (shadow-utils etc/login.defs: UID_MIN 1000 to UID_MAX 60000) and services
(SYS_UID_MIN 101 to SYS_UID_MAX 999), below ``nobody`` (65534, the readers' user), and in
the block Debian reserves and never allocates (Debian Policy 9.2.2, "65000-65533: Reserved").
Not 1000, the runtimes' own uid, which a Slurm directory often gives its first user: files
the access points write would be that person's, everywhere. Directories that map ids (SSSD's
``ldap_idmap_range_min`` defaults to 200000) stay far above it."""
RESERVED_UIDS: Final = {0: "root (EFS would not squash it)", 65534: "nobody, the readers' user"}
MAX_SECONDARY_GIDS: Final = 16
"""EFS API model, SecondaryGids: at most 16."""

ThroughputMode = Literal["elastic", "bursting", "provisioned"]


def _transition_days(value: int) -> int:
    if value not in TRANSITION_DAYS:
        raise PydanticCustomError(
            "transition_days", "one of " + ", ".join(str(days) for days in TRANSITION_DAYS)
        )
    return value


TransitionDays = Annotated[int, AfterValidator(_transition_days)]


def transition_rule(days: int) -> str:
    """The EFS API's name of a lifecycle transition after ``days`` days: ``AFTER_30_DAYS``.

    Args:
        days: one of :data:`TRANSITION_DAYS`.
    """
    return "AFTER_1_DAY" if days == 1 else f"AFTER_{days}_DAYS"


class ModelStoreConfig(StrictModel):
    """Amazon EFS for models: a directory per team and a shared area every team reads."""

    enabled: bool = Field(
        default=False,
        description="Create the model store: the file system, its mount targets in every "
        "private subnet's zone, the EFS CSI add-on, an access point per team and the shared "
        "area, mounted at /models in team workloads. Default: false.",
    )
    throughput_mode: ThroughputMode = Field(
        default="elastic",
        description="EFS throughput mode: elastic (scales with use, paid per transfer), "
        "bursting (grows with stored data) or provisioned (provisionedThroughputMiBps). "
        "Default: elastic (model loads are bursts: many nodes read one checkpoint at once).",
    )
    provisioned_throughput_mibps: float | None = Field(
        alias="provisionedThroughputMiBps",
        default=None,
        ge=1.0,
        description="Throughput paid for, MiB/s (at least 1); only with throughputMode "
        "provisioned, which requires it. Default: none.",
    )
    backups: bool | None = Field(
        default=None,
        description="AWS Backup's daily backups of the file system (its EFS backup policy). "
        "Default: on where protectStatefulResources is true, off elsewhere.",
    )
    infrequent_access_after_days: TransitionDays | None = Field(
        default=30,
        description="Move files nobody has read for this many days to Infrequent Access "
        "storage (1, 7, 14, 30, 60, 90, 180, 270 or 365; null: never). Default: 30.",
    )
    archive_after_days: TransitionDays | None = Field(
        default=None,
        description="Move files nobody has read for this many days to Archive storage (same "
        "values; later than infrequentAccessAfterDays; elastic throughput only). Default: "
        "never.",
    )
    back_to_standard_on_access: bool = Field(
        default=True,
        description="Move a file back to Standard storage on its first read from Infrequent "
        "Access or Archive (a model read once is usually read again). Default: true.",
    )
    uid: int = Field(
        default=STORE_UID,
        ge=0,
        le=4294967294,
        description="The POSIX user every team's and the writers' access point writes as: it "
        "owns every file written through them, so it must be no person's uid (not a Slurm "
        f"directory user's, nor {WORKLOAD_GID}, the runtimes' own, which directories often "
        "give their first user), not 0 and not 65534 (nobody, the readers' user). Changing it "
        "replaces every access point, PV and claim (docs/upgrades). Default: "
        f"{STORE_UID}, outside the ranges useradd allocates.",
    )
    writers_gid: int | None = Field(
        default=None,
        ge=MIN_TEAM_GID,
        le=MAX_TEAM_GID,
        description="The platform writers' POSIX group: it owns the shared area (/shared, "
        f"setgid, mode 2775) and writes there. {MIN_TEAM_GID} to {MAX_TEAM_GID}, no team's "
        "gid. Required when enabled.",
    )
    publishers: list[str] = Field(
        default_factory=list,
        description="Teams whose namespace mounts the shared area read-write, as the writers' "
        "group (they publish models; every other team reads). Default: none.",
    )


def backups_enabled(config: PlatformConfig) -> bool:
    """Whether the model store is backed up: configured, or where stateful resources are kept.

    Args:
        config: the validated platform.
    """
    store = config.model_store
    return store.backups if store.backups is not None else config.protect_stateful_resources


def model_store_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Cross-field problems of ``platform.modelStore``."""
    store = config.model_store
    base = f"{CONFIG_KEY}.modelStore"
    if store.throughput_mode == "provisioned" and store.provisioned_throughput_mibps is None:
        yield ConfigProblem(
            f"{base}.provisionedThroughputMiBps",
            None,
            "a throughput of at least 1 MiB/s: throughputMode provisioned requires it",
        )
    if store.throughput_mode != "provisioned" and store.provisioned_throughput_mibps is not None:
        yield ConfigProblem(
            f"{base}.provisionedThroughputMiBps",
            store.provisioned_throughput_mibps,
            f"nothing with throughputMode {store.throughput_mode} (only provisioned takes it)",
        )
    if store.archive_after_days is not None:
        if store.throughput_mode != "elastic":
            yield ConfigProblem(
                f"{base}.archiveAfterDays",
                store.archive_after_days,
                "nothing unless throughputMode is elastic (EFS Archive requires it)",
            )
        ia = store.infrequent_access_after_days
        if ia is not None and store.archive_after_days <= ia:
            yield ConfigProblem(
                f"{base}.archiveAfterDays",
                store.archive_after_days,
                f"more days than infrequentAccessAfterDays ({ia})",
            )
    teams = {team.name: team for team in config.teams}
    if duplicates(store.publishers):
        yield ConfigProblem(f"{base}.publishers", store.publishers, "each team once")
    for index, publisher in enumerate(store.publishers):
        if publisher not in teams:
            yield ConfigProblem(
                f"{base}.publishers[{index}]",
                publisher,
                f"a team of platform.teams ({', '.join(teams) or 'none defined'})",
            )
    if store.uid in RESERVED_UIDS:
        yield ConfigProblem(
            f"{base}.uid",
            store.uid,
            f"a uid other than {store.uid} ({RESERVED_UIDS[store.uid]}); default {STORE_UID}",
        )
    if not store.enabled:
        return
    if store.writers_gid is None:
        yield ConfigProblem(
            f"{base}.writersGid",
            None,
            f"the platform writers' gid ({MIN_TEAM_GID} to {MAX_TEAM_GID}): it owns the shared "
            "area",
        )
    # One access point per team and two for the shared area (writers', readers').
    if len(config.teams) + 2 > MAX_ACCESS_POINTS:
        yield ConfigProblem(
            f"{CONFIG_KEY}.teams",
            len(config.teams),
            f"at most {MAX_ACCESS_POINTS - 2} teams with the model store (EFS allows "
            f"{MAX_ACCESS_POINTS} access points per file system, two are the shared area's)",
        )
    for index, team in enumerate(config.teams):
        team_base = f"{CONFIG_KEY}.teams[{index}]"
        if team.name in (SHARED_AREA, SHARED_READERS):
            yield ConfigProblem(
                f"{team_base}.name",
                team.name,
                f"a name other than {SHARED_AREA!r} or {SHARED_READERS!r} with the model store: "
                f"/{SHARED_AREA} is the area every team reads, and its access points have "
                "those names",
            )
        if team.gid is None:
            yield ConfigProblem(
                f"{team_base}.gid",
                None,
                f"the team's POSIX group id ({MIN_TEAM_GID} to {MAX_TEAM_GID}): its model "
                "store directory belongs to it",
            )
        elif store.writers_gid is not None and team.gid == store.writers_gid:
            yield ConfigProblem(
                f"{base}.writersGid",
                store.writers_gid,
                f"a gid no team has (team {team.name} has it): the writers' group would "
                "reach the team's directory",
            )
