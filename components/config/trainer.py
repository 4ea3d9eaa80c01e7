"""Config section ``platform.trainer``: Kubeflow Trainer and its runtime images."""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from components import catalog, versions
from components.config.base import StrictModel, matching

ImageReference = Annotated[
    str,
    AfterValidator(
        matching(
            r"[a-z0-9._\-/{}:]+(:[A-Za-z0-9._-]+|@sha256:[a-f0-9]{64})",
            "an image with a tag or digest (never :latest)",
        )
    ),
]


FLOATING_TAGS: Final = ("latest", "main", "master", "HEAD", "nightly", "edge")


def _not_latest(value: str) -> str:
    if "@" not in value and value.rsplit(":", 1)[-1] in FLOATING_TAGS:
        raise PydanticCustomError(
            "floating", "a pinned tag or digest, not :" + ", :".join(FLOATING_TAGS)
        )
    return value


PinnedImage = Annotated[ImageReference, AfterValidator(_not_latest)]


RUNTIME_IMAGE_KEYS: Final[dict[catalog.AcceleratorKind, dict[str, str]]] = {
    "nvidia": {"torch": "torch", "mpi": "mpi", "jax": "jax"},
    "neuron": {"torch": "neuron"},
}
"""Accelerator -> the frameworks its pools get runtimes of -> the ``trainer.images`` key of each:
PyTorch everywhere, MPI and JAX on GPU pools; Trainium's PyTorch runs the Neuron image."""


class TrainerImagesConfig(StrictModel):
    """Container images of the generated training runtimes (pinned).

    On GPU pools with EFA the defaults cannot use the fabric (they carry no libfabric nor
    aws-ofi-nccl): there, each key names the image ``images/training-cuda`` builds on that
    key's default, by the tag the build carries. Config checks every image against its pools'
    AMI drivers (components/software.py).
    """

    torch: PinnedImage = Field(
        default=versions.DEFAULT_TORCH_IMAGE,
        description=f"PyTorch runtimes on GPU pools. Default: {versions.DEFAULT_TORCH_IMAGE}; "
        "on EFA pools an images/training-cuda build of it.",
    )
    mpi: PinnedImage = Field(
        default=versions.DEFAULT_MPI_IMAGE,
        description="MPI runtimes (DeepSpeed, NCCL tests). Default: "
        f"{versions.DEFAULT_MPI_IMAGE}; on EFA pools an images/training-cuda build of it.",
    )
    jax: PinnedImage = Field(
        default=versions.DEFAULT_JAX_IMAGE,
        description=f"JAX runtimes on GPU pools. Default: {versions.DEFAULT_JAX_IMAGE}; on EFA "
        "pools an images/training-cuda build of it.",
    )
    neuron: PinnedImage | None = Field(
        default=None,
        description="PyTorch runtimes on Trainium pools: the image images/training-neuron "
        "builds, tagged sdk2.31.1 (AWS publishes no PyTorch training image whose runtime "
        "starts on the AMI's Neuron driver). Required when Trainer is on and a Trainium pool "
        "exists.",
    )

    def for_runtime(self, accelerator: catalog.AcceleratorKind, framework: str) -> str | None:
        """The image of ``framework``'s runtimes on pools of ``accelerator``."""
        image: str | None = getattr(self, RUNTIME_IMAGE_KEYS[accelerator][framework])
        return image


class TrainerConfig(StrictModel):
    """Kubeflow Trainer v2 and the runtimes generated from the node pools."""

    enabled: bool = Field(default=True, description="Install Kubeflow Trainer. Default: true.")
    images: TrainerImagesConfig = Field(
        default_factory=TrainerImagesConfig, description="Runtime images. Default: see keys."
    )
    max_restarts: int = Field(
        default=3,
        ge=0,
        le=100,
        description="Times a job is restarted as a whole after a pod fails (a lost node, an "
        "OOM, a crash) before it fails; each restart resumes from the job's newest committed "
        "checkpoint. Default: 3.",
    )
    legacy_training_operator: bool = Field(
        default=False,
        description="Also run the Training Operator v1.9.4 (PyTorchJob, TFJob, MPIJob v1, ...), "
        "gang-scheduled by Volcano, while teams migrate. It conflicts with a standalone MPI "
        "Operator (same MPIJob CRD name). Default: false.",
    )
