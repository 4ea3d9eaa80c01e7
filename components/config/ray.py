"""Config sections ``platform.ray`` (KubeRay) and ``platform.teams[].ray`` (team switches)."""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from components import catalog, software, versions
from components.config.base import StrictModel
from components.config.trainer import PinnedImage

RAY_TAG_CONVENTION: Final = (
    f"an image whose tag starts with the Ray release {versions.RAY_VERSION} (rayVersion), "
    f"followed by '-' or nothing, e.g. ray-efa:{software.built_tag('ray-cuda', 'nvidia')} or "
    f"ray-neuron:{software.built_tag('ray-neuron', 'neuron')}; an image pinned by digest "
    "names its tag too (<repo>:<tag>@sha256:<digest>)"
)
"""What config accepts as a Ray image: KubeRay starts every node from the image and declares
the cluster's ``rayVersion`` beside it, and Ray refuses a node of another release, so the tag
must say the release. A digest alone says nothing a reviewer can read, so it is refused."""


def _carries_ray_version(value: str) -> str:
    tag = software.reference_tag(value)
    if tag is None or not (
        tag == versions.RAY_VERSION or tag.startswith(versions.RAY_VERSION + "-")
    ):
        raise PydanticCustomError("ray_version", RAY_TAG_CONVENTION)
    return value


RayImage = Annotated[PinnedImage, AfterValidator(_carries_ray_version)]
"""A pinned image whose tag carries :data:`components.versions.RAY_VERSION`."""


class RayImagesConfig(StrictModel):
    """Images of Ray's heads, workers and submitters, one per accelerator (pinned).

    A worker group runs the image of its pool's accelerator; the head and a RayJob's submitter
    run the same image as the workers, so the driver has the workers' Ray and libraries. Config
    checks each image against its pools' AMI drivers (components/software.py), as Trainer's.
    """

    gpu: RayImage = Field(
        default=versions.RAY_IMAGE,
        description=f"Clusters on GPU pools. Default: {versions.RAY_IMAGE} (Ray's own, no EFA "
        "user space); on pools with EFA the image images/ray-cuda builds on it, tagged "
        f"{software.built_tag('ray-cuda', 'nvidia')}. Its tag must start with the Ray release "
        f"{versions.RAY_VERSION}.",
    )
    neuron: RayImage | None = Field(
        default=None,
        description="Clusters on Trainium pools: the image images/ray-neuron builds (the "
        f"images/training-neuron build plus Ray {versions.RAY_VERSION}), tagged "
        f"{software.built_tag('ray-neuron', 'neuron')}; Ray publishes no Neuron image. Required "
        "when Ray is on and a Trainium pool exists.",
    )

    def for_accelerator(self, accelerator: catalog.AcceleratorKind) -> str | None:
        """The image of clusters whose workers run on pools of ``accelerator``."""
        return self.gpu if accelerator == "nvidia" else self.neuron


class RayConfig(StrictModel):
    """KubeRay: its operator on the system nodes, Volcano as its batch scheduler."""

    enabled: bool = Field(
        default=False,
        description=f"Install the KubeRay operator (chart {versions.KUBERAY_VERSION}) with "
        "Volcano as its batch scheduler, let team members run RayClusters, RayJobs and "
        "RayServices in their namespaces, and hold every RayCluster and RayJob there to the "
        "team's queue (label volcano.sh/queue-name). Default: false.",
    )
    images: RayImagesConfig = Field(
        default_factory=RayImagesConfig, description="Ray images. Default: see keys."
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
