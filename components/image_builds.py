"""The images this repository builds: every ``images/`` recipe and variant a stack can name.

The images workflow (``.github/workflows/images.yml``) builds exactly this list, with these
arguments and tags: ``python -m components.image_builds matrix`` prints it as a GitHub Actions
matrix and refuses, before anything is built, a recipe whose base image is not pinned by digest
(a tag can be moved to other bytes; a digest cannot). The versions themselves stay where the bill
of materials reads them (the recipes' ``ARG`` defaults and the default Trainer images,
:mod:`components.software`), so this module only decides what is built from what.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from components import software, versions

DIGEST: Final = re.compile(r"@sha256:[0-9a-f]{64}$")
"""How a reference pinned to its bytes ends."""

CHECKPOINT_CONTEXT: Final = "checkpoint=images/checkpoint"
"""The named build context of the checkpoint commit tool, for recipes that copy from it."""
PROGRAM_CONTEXT: Final = "program=."
"""The named build context of this repository's own code (the acceptance program and the
modules it imports), for recipes that copy from it."""
NAMED_CONTEXTS: Final = (CHECKPOINT_CONTEXT, PROGRAM_CONTEXT)


@dataclass(frozen=True)
class ImageBuild:
    """One image the workflow builds and pushes."""

    recipe: str
    """``images/<recipe>``, the build context."""
    variant: str
    """The recipe's variant, as :func:`components.software.built_tag` takes it."""
    repository: str
    """The image's name under the registry (what the example stacks name)."""
    config_key: str
    """The stack key that takes the pushed image (``<repo>:<tag>@<digest>``)."""
    bases: dict[str, str]
    """Build argument -> the base image reference it pins (``FROM``)."""
    arguments: dict[str, str] = field(default_factory=dict)
    """Other build arguments that choose the variant (``ACCELERATOR``, ``ROLE``) or pass pins
    another recipe holds (the Ray recipes take ``RAY_VERSION``)."""
    base_build: ImageBuild | None = None
    """A build of this plan the job makes first, in its own engine, and passes as
    ``BASE_IMAGE`` (``images/ray-neuron`` on ``images/training-neuron``, ``images/ray-cuda`` on
    the torch key's ``images/training-cuda``): pinned as far down as
    that build's own bases, with no registry round trip; None for the others."""

    @property
    def tag(self) -> str:
        """What the build is made of (:func:`components.software.built_tag`)."""
        return software.built_tag(self.recipe, self.variant)

    @property
    def floating_bases(self) -> list[str]:
        """The bases named by tag alone, which a registry can move to other bytes."""
        return [f"{name}={ref}" for name, ref in self.bases.items() if not DIGEST.search(ref)]

    @property
    def build_contexts(self) -> str:
        """The named contexts the recipe copies from, space-separated.

        Docker refuses a recipe a context it copies from is not given, and an unused one would
        be sent for nothing.
        """
        recipe = (software.IMAGES_DIR / self.recipe / "Dockerfile").read_text()
        return " ".join(
            context for context in NAMED_CONTEXTS
            if f"--from={context.split('=', 1)[0]} " in recipe
        )  # fmt: skip

    @property
    def downloads(self) -> tuple[str, ...]:
        """The download locations this build needs.

        Of Slurm's, Neuron's for Trainium images, CUDA's for GPU and login images; of the
        acceptance images, CUDA's and nccl-tests' for GPUs, Neuron's for Trainium.
        """
        names = software.recipe_downloads(self.recipe)
        if self.recipe == "slurmd":
            unused = "CUDA_" if self.arguments.get("ACCELERATOR") == "neuron" else "NEURON_"
            names = tuple(name for name in names if not name.startswith(unused))
        if self.recipe == "notebook" and self.variant == "cuda":
            names = tuple(name for name in names if not name.startswith("NEURON_"))
        if self.recipe == "acceptance":
            skipped = ("CUDA_", "NCCL_") if self.variant == "neuron" else ("NEURON_",)
            names = tuple(name for name in names if not name.startswith(skipped))
        if self.base_build is not None:
            names = tuple(dict.fromkeys((*self.base_build.downloads, *names)))
        return names

    @property
    def local_base(self) -> str:
        """The name the job gives :attr:`base_build`'s image in its engine ("" without one)."""
        base = self.base_build
        return "" if base is None else f"local/{base.repository}:{base.tag}"

    def matrix_entry(self) -> dict[str, object]:
        """The entry of the workflow's matrix (``docker buildx build`` reads each field)."""
        arguments = {**self.bases, **self.arguments}
        base = self.base_build
        if base is not None:
            arguments["BASE_IMAGE"] = self.local_base
        return {
            "name": f"{self.repository}:{self.tag}",
            "context": f"images/{self.recipe}",
            "repository": self.repository,
            "tag": self.tag,
            "config_key": self.config_key,
            "build_args": " ".join(f"--build-arg {k}={v}" for k, v in sorted(arguments.items())),
            "downloads": " ".join(self.downloads),
            "build_contexts": self.build_contexts,
            # The base build, made first in the job (empty where there is none).
            "base_context": "" if base is None else f"images/{base.recipe}",
            "base_build_args": "" if base is None else base.matrix_entry()["build_args"],
            "base_build_contexts": "" if base is None else base.matrix_entry()["build_contexts"],
            "base_tag": self.local_base,
        }


def builds() -> list[ImageBuild]:
    """Every image the stacks can name that this repository builds."""
    slurmd = software.recipe_pins("slurmd")
    neuron = software.recipe_pins("training-neuron")
    made = [
        ImageBuild(
            recipe="training-cuda",
            variant=key,
            repository=f"training-{key}",
            config_key=f"trainer.images.{key}",
            # The base is the key's default image (components/versions.py), so the bill of
            # materials records what the build carries (components/software.py training_cuda).
            bases={"BASE_IMAGE": software.DEFAULT_IMAGES[key].name},
        )
        for key in sorted(software.DEFAULT_IMAGES)
    ]
    training_neuron = ImageBuild(
        recipe="training-neuron",
        variant="neuron",
        repository="training-neuron",
        config_key="trainer.images.neuron",
        bases={"BASE_IMAGE": neuron["BASE_IMAGE"]},
    )
    made.append(training_neuron)
    (training_torch,) = [b for b in made if b.variant == software.RAY_CUDA_FRAMEWORK]
    made += [
        ImageBuild(
            recipe="ray-cuda",
            variant="nvidia",
            repository="ray-efa",
            config_key="ray.images.gpu",
            bases={},
            arguments={"RAY_VERSION": versions.RAY_VERSION},
            # torch, NCCL and the EFA user space are the Trainer torch image's build's.
            base_build=training_torch,
        ),
        ImageBuild(
            recipe="ray-neuron",
            variant="neuron",
            repository="ray-neuron",
            config_key="ray.images.neuron",
            bases={},
            arguments={"RAY_VERSION": versions.RAY_VERSION},
            base_build=training_neuron,
        ),
    ]
    # The notebook images: JupyterHub's single-user server on the training images.
    jupyter = {
        "JUPYTERHUB_VERSION": versions.NOTEBOOK_JUPYTERHUB_VERSION,
        "JUPYTERLAB_VERSION": versions.NOTEBOOK_JUPYTERLAB_VERSION,
    }
    made += [
        ImageBuild(
            recipe="notebook",
            variant="cuda",
            repository="notebook-cuda",
            config_key="notebooks.images.cuda",
            bases={"BASE_IMAGE": versions.NOTEBOOK_CUDA_BASE_IMAGE},
            arguments=dict(jupyter),
        ),
        ImageBuild(
            recipe="notebook",
            variant="neuron",
            repository="notebook-neuron",
            config_key="notebooks.images.neuron",
            bases={},
            arguments=dict(jupyter),
            base_build=training_neuron,
        ),
    ]
    # The node acceptance images: the agent and its checking tools, one per vendor.
    acceptance = software.recipe_pins("acceptance")
    made += [
        ImageBuild(
            recipe="acceptance",
            variant=vendor,
            repository=f"acceptance-{vendor}",
            config_key=f"acceptance.images.{vendor}",
            bases={"BASE_IMAGE": acceptance["BASE_IMAGE"]},
            arguments={"VENDOR": vendor},
        )
        for vendor in ("nvidia", "neuron")
    ]
    # The EFA exporter of the EFA pools (components/observability/efa_exporter.py).
    made.append(
        ImageBuild(
            recipe=software.EFA_EXPORTER_RECIPE,
            variant=software.EFA_EXPORTER_RECIPE,
            repository="efa-exporter",
            config_key="observability.images.efaExporter",
            bases={"BASE_IMAGE": software.recipe_pins(software.EFA_EXPORTER_RECIPE)["BASE_IMAGE"]},
        )
    )
    # One recipe, three images: variant, repository, slurm.images key, base argument, ROLE,
    # ACCELERATOR.
    slurm_images = [
        ("nvidia", "slurmd-efa", "slurmdGpu", "SLURMD_IMAGE", "slurmd", "gpu"),
        ("neuron", "slurmd-neuron", "slurmdNeuron", "SLURMD_IMAGE", "slurmd", "neuron"),
        ("login", "slurm-login", "login", "LOGIN_IMAGE", "login", "gpu"),
    ]
    made += [
        ImageBuild(
            recipe="slurmd",
            variant=variant,
            repository=repository,
            config_key=f"slurm.images.{key}",
            bases={base: slurmd[base]},
            arguments={"ROLE": role, "ACCELERATOR": accelerator},
        )
        for variant, repository, key, base, role, accelerator in slurm_images
    ]
    return made


def main(argv: Sequence[str]) -> int:
    """``matrix``: print the workflow's matrix as JSON, or say which bases float (exit 1).

    Args:
        argv: the command's arguments (``matrix``).
    """
    if list(argv) != ["matrix"]:
        print("usage: python -m components.image_builds matrix", file=sys.stderr)
        return 2
    planned = builds()
    floating = [f"{b.repository}: {base}" for b in planned for base in b.floating_bases]
    if floating:
        print(
            "refusing to build from bases pinned by tag only (pin each as "
            "<repository>:<tag>@sha256:<digest> where the bill of materials keeps it: the "
            "recipe's ARG default, or components/versions.py for the Trainer defaults):\n  "
            + "\n  ".join(floating),
            file=sys.stderr,
        )
        return 1
    print(json.dumps({"include": [b.matrix_entry() for b in planned]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
