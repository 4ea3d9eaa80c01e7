"""Config sections ``platform.ray`` (KubeRay) and ``platform.teams[].ray`` (team switches)."""

from __future__ import annotations

from pydantic import Field

from components import versions
from components.config.base import StrictModel


class RayConfig(StrictModel):
    """KubeRay: its operator on the system nodes, Volcano as its batch scheduler."""

    enabled: bool = Field(
        default=False,
        description=f"Install the KubeRay operator (chart {versions.KUBERAY_VERSION}) with "
        "Volcano as its batch scheduler, let team members run RayClusters, RayJobs and "
        "RayServices in their namespaces, and hold every RayCluster and RayJob there to the "
        "team's queue (label volcano.sh/queue-name). Default: false.",
    )


class TeamRayConfig(StrictModel):
    """What a team's members may do with Ray that others may not."""

    allow_cluster_selector: bool = Field(
        default=False,
        description="Admit the team's RayJobs that set spec.clusterSelector (a job on a "
        "RayCluster that already runs). KubeRay does not gang-schedule such a job (ray-project/"
        "kuberay v1.7.0 ray-operator/controllers/ray/batchscheduler/volcano/"
        "volcano_scheduler.go); with Volcano as batch scheduler it does not submit it either, "
        "so turn this on only for a KubeRay that does. Default: false (refused at admission).",
    )
