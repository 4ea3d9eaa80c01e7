"""Every pin the repository declares, and what keeps each one current.

The dependency bot (Renovate, configured in ``renovate.json``) keeps pins current through
reviewed pull requests. This module is the other half of that contract, read by
``tests/test_renovate.py``:

- :func:`declared_pins` lists every pin, read from where it is written: the bill of materials
  (``components/versions.py``), the image recipes' ``ARG`` defaults, the stacks' images, the
  Python requirements, the workflows and the Renovate tool's own ``package.json``. The test runs
  Renovate's extraction offline and fails on any pin no manager extracts, unless
  :data:`WITHOUT_A_MANAGER` says why none can.
- :data:`MOVES_TOGETHER` lists the pins that must move in one pull request (a compatibility pair,
  or one upstream release written in several places), the ``packageRules`` group that moves
  them, and the check that refuses a one-sided move.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from components import software, versions
from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml

RENOVATE_CONFIG: Final = REPOSITORY_ROOT / "renovate.json"
RENOVATE_PACKAGE: Final = REPOSITORY_ROOT / "ci" / "renovate" / "package.json"

_REQUIREMENT: Final = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)\s*$", re.MULTILINE)
_USES: Final = re.compile(
    r"^\s*-?\s*uses:\s*([\w.-]+/[\w./-]+)@(\S+)(?:\s+#\s*(\S+))?", re.MULTILINE
)
"""``uses: owner/repo@ref``, and the release in a comment after a commit the bot pinned."""
_WITH_VERSION: Final = re.compile(
    r"^\s*(python-version|pulumi-version):\s*\"?([\w.]+)\"?\s*$", re.MULTILINE
)
_RUNS_ON: Final = re.compile(r"^\s*runs-on:\s*(ubuntu)-([\d.]+)\s*$", re.MULTILINE)
_RECIPE_PIN: Final = re.compile(r"_(VERSION|IMAGE)$")


@dataclass(frozen=True)
class Pin:
    """One pinned version, where it is written."""

    file: str
    """Repository path of the file that holds the literal."""
    name: str
    """What is pinned, as the bot names it: a package, chart or image repository, an action, an
    add-on as ``<name>@<Kubernetes minor>``, or a recipe's ``ARG`` name for a vendor version."""
    value: str
    """The version or tag (an image's digest is not part of it)."""

    def __str__(self) -> str:
        return f"{self.file}: {self.name} {self.value}"


def _image_pin(file: str, reference: str) -> Pin:
    repository, tag = software.repository_and_tag(reference)
    return Pin(file, repository, tag.split("@", 1)[0])


def _bill_of_materials() -> Iterator[Pin]:
    file = "components/versions.py"
    for name, value in vars(versions).items():
        if name.startswith("_") or not name.isupper():
            continue
        if isinstance(value, versions.HelmChart):
            yield Pin(file, value.chart.removeprefix("oci://"), value.version)
        elif isinstance(value, str) and name.endswith("_IMAGE"):
            yield _image_pin(file, value)
        elif isinstance(value, dict) and name.endswith("_IMAGES"):
            yield from (_image_pin(file, image) for image in value.values())
    for minor, addons in versions.EKS_ADDONS.items():
        for addon, version in addons.by_addon_name().items():
            yield Pin(file, f"{addon}@{minor}", version)
    release = versions.DEFAULT_AMI_ALIAS.partition("@")[2]
    yield Pin(file, "awslabs/amazon-eks-ami", release)
    yield Pin(file, "kubeflow-training-operator", versions.TRAINING_OPERATOR_VERSION)
    yield Pin(file, "kubeflow-katib", versions.KATIB_VERSION)


def _recipes() -> Iterator[Pin]:
    for dockerfile in sorted(software.IMAGES_DIR.glob("*/Dockerfile")):
        file = dockerfile.relative_to(REPOSITORY_ROOT).as_posix()
        for name, value in software.recipe_pins(dockerfile.parent.name).items():
            if not _RECIPE_PIN.search(name):
                continue  # a variant switch (ROLE, ACCELERATOR) or a path, not a version
            yield _image_pin(file, value) if name.endswith("_IMAGE") else Pin(file, name, value)


def _stack_images(node: Any, under_images: bool = False) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _stack_images(value, under_images or key == "images")
    elif isinstance(node, list):
        for item in node:
            yield from _stack_images(item, under_images)
    elif under_images and isinstance(node, str):
        yield node


def _stacks() -> Iterator[Pin]:
    for stack in sorted((REPOSITORY_ROOT / "stacks").glob("Pulumi.*.yaml")):
        file = stack.relative_to(REPOSITORY_ROOT).as_posix()
        for reference in _stack_images(load_yaml(stack.read_text())):
            yield _image_pin(file, reference)


def _requirements() -> Iterator[Pin]:
    for requirements in sorted(REPOSITORY_ROOT.glob("**/requirements*.txt")):
        if any(part.startswith(".") or part == "build" for part in requirements.parts):
            continue
        file = requirements.relative_to(REPOSITORY_ROOT).as_posix()
        for name, version in _REQUIREMENT.findall(requirements.read_text()):
            yield Pin(file, name, version)


def _workflows() -> Iterator[Pin]:
    for workflow in sorted((REPOSITORY_ROOT / ".github" / "workflows").glob("*.y*ml")):
        file = workflow.relative_to(REPOSITORY_ROOT).as_posix()
        text = workflow.read_text()
        for action, ref, release in _USES.findall(text):
            # Pinned to a commit, the release the bot compares is the comment's.
            yield Pin(file, action, release if re.fullmatch(r"[0-9a-f]{40}", ref) else ref)
        for key, version in _WITH_VERSION.findall(text):
            yield Pin(file, key.removesuffix("-version"), version)
        for image, version in _RUNS_ON.findall(text):
            yield Pin(file, image, version)


def _renovate_tool() -> Iterator[Pin]:
    package = json.loads(RENOVATE_PACKAGE.read_text())
    file = RENOVATE_PACKAGE.relative_to(REPOSITORY_ROOT).as_posix()
    for name, version in package["dependencies"].items():
        yield Pin(file, name, version)


def declared_pins() -> list[Pin]:
    """Every pin in the repository, each where its literal is written (duplicates kept)."""
    return [
        *_bill_of_materials(),
        *_recipes(),
        *_stacks(),
        *_requirements(),
        *_workflows(),
        *_renovate_tool(),
    ]


_NEURON_PACKAGE: Final = (
    "a package of the Neuron SDK release that NEURON_SDK_VERSION names (which the bot moves). "
    "Its apt and pip repositories are download locations the builder passes, never named in "
    "this repository, so no datasource can read them; the SDK's release notes list the "
    "release's packages. components/software.py refuses an SDK pin whose runtime is not that "
    "release's (NEURON_SDK_RUNTIME), so a bumped SDK waits for these."
)

WITHOUT_A_MANAGER: Final[dict[str, str]] = {
    "EFA_INSTALLER_VERSION": (
        "AWS publishes the EFA installer as a download (its version in the EFA user guide), with "
        "no registry, tags or release feed a datasource could read; the EFA driver it pairs with "
        "comes from the AMI release, which the bot does move."
    ),
    "AWS_OFI_NCCL_VERSION": (
        "the aws-ofi-nccl the EFA installer bundles, recorded for the driver checks: it moves "
        "with EFA_INSTALLER_VERSION, and the build refuses another version."
    ),
    "NEURON_RUNTIME_LIB_VERSION": _NEURON_PACKAGE,
    "NEURON_COLLECTIVES_VERSION": _NEURON_PACKAGE,
    "NEURON_TOOLS_VERSION": _NEURON_PACKAGE,
    "TORCH_NEURONX_VERSION": _NEURON_PACKAGE,
    "NEURONX_CC_VERSION": _NEURON_PACKAGE,
    "NEURONX_DISTRIBUTED_VERSION": _NEURON_PACKAGE,
    "CUDA_VERSION": (
        "the CUDA runtime of the default PyTorch image, which the GPU slurmd and login images "
        "carry for programs outside a Python environment: it moves with that image (the bot "
        "moves it; tests/test_software.py holds the two equal)."
    ),
    "NCCL_VERSION": (
        "the NCCL of the default PyTorch image, which aws-ofi-nccl plugs into on the GPU slurmd "
        "images: it moves with that image (tests/test_software.py holds the two equal)."
    ),
}
"""Recipe ``ARG`` pins no manager extracts, each with the reason none can and what moves it."""


@dataclass(frozen=True)
class MovesTogether:
    """Pins that must change in one pull request, and what stops one moving alone."""

    name: str
    """What the pins are, for messages and the docs."""
    group: str
    """The ``groupName`` of the ``packageRules`` entry that moves them together."""
    packages: tuple[str, ...]
    """Each pin as Renovate's extraction names it (``depName``)."""
    guard: str
    """The check that refuses one side moving without the other, or the record that must be
    updated by hand in the same pull request."""
    by_hand: tuple[str, ...] = ()
    """Those of :attr:`packages` the bot never looks up (a rule turns them off): a person sets
    them on the group's branch, to what the other side names."""


MOVES_TOGETHER: Final[tuple[MovesTogether, ...]] = (
    MovesTogether(
        "the AMI release and the drivers it carries",
        "Accelerator drivers and user space",
        ("awslabs/amazon-eks-ami",),
        "an accelerator pool may boot only a release recorded in AMI_RELEASES "
        "(components/software.py) with its drivers: a new release is refused until recorded",
    ),
    MovesTogether(
        "the Neuron driver (AMI) and the Neuron runtime (the recipes' Neuron SDK)",
        "Accelerator drivers and user space",
        ("awslabs/amazon-eks-ami", "aws-neuron/aws-neuron-sdk"),
        "image_problems: a runtime older than NEURON_DRIVER_MINIMUM_RUNTIME of the AMI's driver, "
        "or an SDK without a NEURON_SDK_RUNTIME record, is refused",
    ),
    MovesTogether(
        "CUDA (the default framework images) and the NVIDIA driver (AMI)",
        "Accelerator drivers and user space",
        ("awslabs/amazon-eks-ami", "pytorch/pytorch", "nvcr.io/nvidia/jax"),
        "image_problems: a default image pinned at another tag than its record's recorded_tag, "
        "or CUDA newer than the AMI's driver (CUDA_MINIMUM_DRIVER), is refused",
    ),
    MovesTogether(
        "Kubeflow Trainer and its runtime images",
        "Kubeflow Trainer and JobSet",
        ("ghcr.io/kubeflow/charts/kubeflow-trainer", "ghcr.io/kubeflow/trainer/deepspeed-runtime"),
        "tests/test_versions.py: the DeepSpeed runtime's tag is v + Trainer's chart version; its "
        "CUDA record (recorded_tag) refuses it at another tag until re-recorded",
    ),
    MovesTogether(
        "JobSet and Kubeflow Trainer",
        "Kubeflow Trainer and JobSet",
        ("registry.k8s.io/jobset/charts/jobset", "ghcr.io/kubeflow/charts/kubeflow-trainer"),
        "tests/test_trainer.py: JobSet's chart is the version Trainer's Chart.yaml depends on",
        by_hand=("registry.k8s.io/jobset/charts/jobset",),
    ),
    MovesTogether(
        "Karpenter's CRD chart and controller chart",
        "Karpenter",
        ("public.ecr.aws/karpenter/karpenter-crd", "public.ecr.aws/karpenter/karpenter"),
        "tests/test_versions.py: the charts of one release share its version",
    ),
    MovesTogether(
        "Slinky's charts, its Slurm images and the recipes' Slinky bases",
        "Slinky (Slurm on Kubernetes)",
        (
            "ghcr.io/slinkyproject/charts/slurm-operator-crds",
            "ghcr.io/slinkyproject/charts/slurm-operator",
            "ghcr.io/slinkyproject/charts/slurm",
            "ghcr.io/slinkyproject/slurmctld",
            "ghcr.io/slinkyproject/slurmrestd",
            "ghcr.io/slinkyproject/slurmdbd",
            "ghcr.io/slinkyproject/login",
            "ghcr.io/slinkyproject/slurmd",
        ),
        "tests/test_versions.py (one chart version), tests/test_images.py (one Slurm release "
        "for the daemons, the login image and the slurmd recipe's bases)",
    ),
    MovesTogether(
        "mariadb-operator's CRD chart and operator chart",
        "mariadb-operator",
        (
            "ghcr.io/mariadb-operator/charts/mariadb-operator-crds",
            "ghcr.io/mariadb-operator/charts/mariadb-operator",
        ),
        "tests/test_versions.py: the charts of one release share its version",
    ),
    MovesTogether(
        "the Pulumi SDK and the CLI the preview job installs",
        "Pulumi",
        ("pulumi", "pulumi/pulumi"),
        "tests/test_ci.py: the workflow's pulumi-version is requirements.txt's pulumi",
    ),
    MovesTogether(
        "the program's botocore and the images' (fsx-checkpoint)",
        "botocore",
        ("botocore",),
        "tests/test_software.py: the images' BOTOCORE_VERSION is requirements.txt's",
    ),
    MovesTogether(
        "Renovate and the Node.js it needs",
        "Renovate",
        ("renovate", "node"),
        ".ci/run: the validator runs on the pinned Node.js",
    ),
)
"""Pins that move in one pull request: compatibility pairs and releases written in several
places (docs/how-to/dependency-updates.md lists them)."""


def renovate_groups() -> set[str]:
    """The ``groupName`` of every ``packageRules`` entry in ``renovate.json``."""
    config = json.loads(RENOVATE_CONFIG.read_text())
    return {rule["groupName"] for rule in config.get("packageRules", []) if "groupName" in rule}
