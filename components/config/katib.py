"""Config section ``platform.katib``: hyperparameter search with Katib (components/katib.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import Field

from components import versions
from components.config.base import CONFIG_KEY, ConfigProblem, StrictModel

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig


class KatibConfig(StrictModel):
    """Katib, standalone, running each trial as a TrainJob in its team's namespace and queue."""

    enabled: bool = Field(
        default=False,
        description=f"Install Katib {versions.KATIB_VERSION} (its release manifests, the "
        "platform's own katib-config and its MySQL database). Needs trainer.enabled: trials "
        "are TrainJobs. Default: false.",
    )
    database_storage_gib: int = Field(
        default=10,
        alias="databaseStorageGiB",
        ge=10,
        le=1024,
        description="Size of the volume of Katib's MySQL database (every trial's observation "
        "log), GiB; encrypted gp3, retained where protectStatefulResources is true. It can "
        "grow, never shrink. Default: 10 (the release manifests' claim).",
    )


class TeamKatibConfig(StrictModel):
    """Whether a team runs Katib searches."""

    enabled: bool = Field(
        default=True,
        description="Let the team's members create Experiments and read their Suggestions and "
        "Trials, and give the team's namespace Katib's metrics collector (with katib.enabled). "
        "false leaves the team out of Katib: no Experiment, Suggestion or Trial RBAC. "
        "Default: true.",
    )


def katib_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Cross-field problems of ``platform.katib``.

    Args:
        config: the parsed platform.
    """
    if config.katib.enabled and not config.trainer.enabled:
        yield ConfigProblem(
            f"{CONFIG_KEY}.katib.enabled",
            True,
            "false while trainer.enabled is false: every trial is a TrainJob, which only "
            "Kubeflow Trainer runs",
        )
    for index, team in enumerate(config.teams):
        if (
            not config.katib.enabled
            and "enabled" in team.katib.model_fields_set
            and team.katib.enabled
        ):
            yield ConfigProblem(
                f"{CONFIG_KEY}.teams[{index}].katib.enabled",
                True,
                "unset or false while katib.enabled is false (no Katib to let the team use)",
            )
