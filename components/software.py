"""The accelerator software bill of materials, and whether its halves work together.

What each AMI release carries, what each image that runs on accelerator nodes carries, and the
rules that say whether they agree.

Everything a node runs comes in two halves: the kernel side (NVIDIA or Neuron driver, EFA driver)
from the EKS AMI release that Karpenter boots, and the user side (CUDA, NCCL, libfabric, the
aws-ofi-nccl plugin, the Neuron runtime and collectives, the framework) from the container image.
This module records both at the versions the platform pins, side by side, and
:func:`image_problems` says what would fail on a node. Config runs it for every image on every
accelerator pool, so an incompatible pin is refused before anything is registered.

The images this repository builds (``images/``) are recorded by their recipes: the versions are
the ``ARG`` defaults of each Dockerfile, read by :func:`recipe_pins`, so a pin lives in one place.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Final

from components import versions
from components.catalog import InstanceType

IMAGES_DIR: Final = Path(__file__).resolve().parent.parent / "images"


@dataclass(frozen=True)
class AmiRelease:
    """Driver versions of one EKS-optimized AL2023 release (x86_64 NVIDIA and Neuron variants)."""

    nvidia_driver: str
    """``kmod-nvidia-latest-dkms`` of the NVIDIA variant, e.g. ``580.159.03``."""
    neuron_driver: str
    """``aws-neuronx-dkms`` of the Neuron variant, e.g. ``2.29.0.0``."""
    efa_driver: str
    """``efa`` kernel module package (both variants)."""
    nvidia_container_toolkit: str
    """``nvidia-container-toolkit`` of the NVIDIA variant (its default mode is jit-cdi)."""


AMI_RELEASES: Final[dict[str, AmiRelease]] = {
    # awslabs/amazon-eks-ami CHANGELOG.md, "AMI Release v20260714": the package tables of
    # Kubernetes 1.33, 1.34 and 1.35 agree on these.
    "al2023@v20260714": AmiRelease(
        nvidia_driver="580.159.03",
        neuron_driver="2.29.0.0",
        efa_driver="3.1.0",
        nvidia_container_toolkit="1.19.1",
    ),
}
"""Karpenter AMI alias -> the drivers of that release. An accelerator pool may only boot a
release recorded here (the family is part of the key: Bottlerocket carries other drivers)."""


# ------------------------------------------------------------------------------ compatibility

CUDA_MINIMUM_DRIVER: Final[dict[str, str]] = {
    # CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver Versions" (Linux, GA).
    "12.1": "530.30.02",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
}
"""CUDA release -> the oldest Linux driver that runs everything it builds, PTX JIT included."""

NEURON_DRIVER_MINIMUM_RUNTIME: Final[dict[str, str]] = {
    # Neuron SDK 2.31.0 release notes, Neuron Driver 2.29 known issues (aws-neuron-sdk v2.31.1
    # release-notes/components/runtime.rst): with an older runtime library nrt_init() fails.
    "2.29": "2.33",
}
"""Neuron driver (major.minor) -> the oldest runtime library that initialises on it."""

NEURON_SDK_RUNTIME: Final[dict[str, str]] = {
    # aws-neuron-sdk v2.31.1 release-notes: Neuron 2.31.1 ships aws-neuronx-runtime-lib 2.33.
    "2.31.1": "2.33",
}
"""Neuron SDK release -> the runtime library (major.minor) it ships. The SDK releases its
packages as one set, so an image's runtime must be its SDK's: a recipe whose SDK pin moved
without its package pins (the dependency bot moves only the SDK) is refused until both agree."""

NEURON_RUNTIME_OS: Final[dict[str, frozenset[str]]] = {
    # The runtime's compatibility table in the same release notes (Neuron 2.31.0).
    "trn1": frozenset({"ubuntu22.04", "ubuntu24.04", "rockylinux9", "debian12", "al2023"}),
    "trn2": frozenset({"ubuntu22.04", "ubuntu24.04", "debian12", "al2023"}),
}
"""Instance family -> the operating systems the Neuron runtime was released for there."""

AWS_OFI_NCCL_MINIMUM_NCCL: Final = "2.17.1"
"""aws-ofi-nccl 1.18.0 keeps compatibility with NCCL 2.17.1 and later (its RELEASENOTES.md)."""
AWS_OFI_NCCL_OS: Final = frozenset(
    {"ubuntu22.04", "ubuntu24.04", "al2023", "al2", "debian13", "rhel9"}
)
"""Distributions aws-ofi-nccl 1.18.0 supports (RELEASENOTES.md), in this module's spelling."""


def version_tuple(version: str) -> tuple[int, ...]:
    """``"580.159.03"`` -> ``(580, 159, 3)``; non-numeric parts end the tuple."""
    parts: list[int] = []
    for part in version.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def major_minor(version: str) -> str:
    """``"2.33.10.0"`` -> ``"2.33"``."""
    return ".".join(version.split(".")[:2])


@dataclass(frozen=True)
class ImageSoftware:
    """What one image carries that must agree with the node: the user half of the stack."""

    name: str
    """The image reference, or the recipe it is built from, for messages."""
    os: str
    """Its distribution, e.g. ``ubuntu24.04``."""
    cuda: str | None = None
    """CUDA runtime the framework loads (major.minor); None on images without CUDA."""
    cuda_toolkit: str | None = None
    """CUDA toolkit in the image when it differs from ``cuda`` (nvcc for JIT-built ops)."""
    nccl: str | None = None
    """NCCL the framework loads."""
    efa_installer: str | None = None
    """EFA installer the user space (libfabric, Open MPI) comes from; None: no EFA user space."""
    aws_ofi_nccl: str | None = None
    """aws-ofi-nccl, the NCCL network plugin for libfabric; None: NCCL would use TCP sockets."""
    neuron_runtime: str | None = None
    """``aws-neuronx-runtime-lib``."""
    neuron_collectives: str | None = None
    """``aws-neuronx-collectives``."""
    torch_neuronx: str | None = None
    """``torch-neuronx``, PyTorch on Trainium."""
    neuron_sdk: str | None = None
    """The Neuron SDK release the Neuron packages are said to come from (a recipe's pin)."""
    recorded_tag: str | None = None
    """The tag whose contents these fields were read from (release notes, the image's build
    files); None for a recipe, whose fields are its own pins. When the image's pin names another
    tag (the dependency bot moved it), the record no longer describes it and is refused."""
    framework: bool = True
    """Whether the image carries CUDA and NCCL for the driver rules to check; False for Trainium's
    slurmd, whose jobs bring their framework in a virtualenv or container on the shared file
    system."""


def image_problems(
    image: ImageSoftware, instance: InstanceType, *, efa: bool, ami: AmiRelease
) -> list[str]:
    """Why ``image`` would not work on a node of ``instance`` booted from ``ami``; [] if it would.

    Args:
        image: what the image carries.
        instance: the catalog entry of the node.
        efa: whether the node's pool attaches EFA interfaces (then the image needs the EFA
            user space, or its collectives run over TCP).
        ami: the drivers of the node's AMI release.
    """
    stale = _stale_record(image)
    if stale:
        return [stale]
    if instance.accelerator == "nvidia":
        return _nvidia_problems(image, efa=efa, ami=ami)
    return _neuron_problems(image, instance, efa=efa, ami=ami)


def _stale_record(image: ImageSoftware) -> str | None:
    """Why the record of ``image`` does not describe the image it names, or None if it does."""
    if image.recorded_tag is None or reference_tag(image.name) == image.recorded_tag:
        return None
    return (
        f"{image.name} is pinned at another tag than the one whose contents components/software.py "
        f"records ({image.recorded_tag}): record what the new tag carries (OS, CUDA, NCCL) and "
        "set recorded_tag to it"
    )


def _nvidia_problems(image: ImageSoftware, *, efa: bool, ami: AmiRelease) -> list[str]:
    problems: list[str] = []
    driver = version_tuple(ami.nvidia_driver)
    if not image.framework:
        pass
    elif image.cuda is None:
        problems.append(f"{image.name} records no CUDA runtime")
    elif image.cuda not in CUDA_MINIMUM_DRIVER:
        problems.append(
            f"{image.name} loads CUDA {image.cuda}, which the bill of materials has no driver "
            "minimum for (add it from the CUDA release notes)"
        )
    elif driver < version_tuple(CUDA_MINIMUM_DRIVER[image.cuda]):
        problems.append(
            f"{image.name} loads CUDA {image.cuda}, which needs NVIDIA driver "
            f"{CUDA_MINIMUM_DRIVER[image.cuda]} or later; the AMI has {ami.nvidia_driver}"
        )
    toolkit = image.cuda_toolkit
    if toolkit and version_tuple(toolkit)[0] != version_tuple(image.cuda or toolkit)[0]:
        problems.append(f"{image.name}'s CUDA toolkit {toolkit} is another major than its runtime")
    if efa:
        if image.efa_installer is None or image.aws_ofi_nccl is None:
            problems.append(
                f"{image.name} has no EFA user space (libfabric and the aws-ofi-nccl plugin), "
                "so NCCL would run over TCP sockets instead of the node's EFA interfaces"
            )
            return problems
        if image.nccl and version_tuple(image.nccl) < version_tuple(AWS_OFI_NCCL_MINIMUM_NCCL):
            problems.append(
                f"{image.name}'s NCCL {image.nccl} is older than aws-ofi-nccl supports "
                f"({AWS_OFI_NCCL_MINIMUM_NCCL})"
            )
        if image.os not in AWS_OFI_NCCL_OS:
            problems.append(
                f"{image.name} is {image.os}, which aws-ofi-nccl is not released for: "
                + ", ".join(sorted(AWS_OFI_NCCL_OS))
            )
    return problems


def _neuron_problems(
    image: ImageSoftware, instance: InstanceType, *, efa: bool, ami: AmiRelease
) -> list[str]:
    problems: list[str] = []
    driver = major_minor(ami.neuron_driver)
    minimum = NEURON_DRIVER_MINIMUM_RUNTIME.get(driver)
    if image.neuron_runtime is None:
        problems.append(f"{image.name} has no Neuron runtime library")
    elif minimum is None:
        problems.append(
            f"the bill of materials has no runtime minimum for Neuron driver {driver} "
            "(add it from that driver's release notes)"
        )
    elif version_tuple(image.neuron_runtime) < version_tuple(minimum):
        problems.append(
            f"{image.name} has Neuron runtime {image.neuron_runtime}; the AMI's Neuron driver "
            f"{ami.neuron_driver} needs {minimum} or later (nrt_init() fails)"
        )
    shipped = NEURON_SDK_RUNTIME.get(image.neuron_sdk) if image.neuron_sdk else None
    if image.neuron_sdk and shipped is None:
        problems.append(
            f"{image.name} installs Neuron SDK {image.neuron_sdk}, which the bill of materials "
            "has no runtime record for (add it to NEURON_SDK_RUNTIME from the SDK's release "
            "notes, and set the recipe's package pins to that release's)"
        )
    elif shipped and image.neuron_runtime and major_minor(image.neuron_runtime) != shipped:
        problems.append(
            f"{image.name} installs runtime {image.neuron_runtime}, but Neuron SDK "
            f"{image.neuron_sdk} ships {shipped}: set the recipe's package pins to its release's"
        )
    if image.neuron_runtime and image.neuron_collectives is None:
        problems.append(f"{image.name} has no Neuron collectives (multi-device jobs fail)")
    elif (
        image.neuron_runtime
        and image.neuron_collectives
        and major_minor(image.neuron_collectives) != major_minor(image.neuron_runtime)
    ):
        problems.append(
            f"{image.name} has collectives {image.neuron_collectives} beside runtime "
            f"{image.neuron_runtime}: the SDK releases them as one version"
        )
    family = instance.name.split(".")[0].removesuffix("n")
    supported = NEURON_RUNTIME_OS.get(family)
    if supported is None:
        problems.append(
            f"the bill of materials has no Neuron runtime OS list for {family} (add it from the "
            "runtime's release notes)"
        )
    elif image.os not in supported:
        problems.append(
            f"{image.name} is {image.os}; the Neuron runtime is released for {family} on "
            + ", ".join(sorted(supported))
        )
    if efa and image.efa_installer is None:
        problems.append(
            f"{image.name} has no EFA user space (libfabric), so Neuron collectives cannot "
            "reach the node's EFA interfaces"
        )
    return problems


# ------------------------------------------------------------------------------ the images

_TORCH_2_13 = ImageSoftware(
    name=versions.DEFAULT_TORCH_IMAGE,
    # PyTorch's image for 2.13.0 on CUDA 13.0; the PyPI wheel of torch 2.13.0 (x86_64) depends
    # on nvidia-cuda-runtime 13.0.96 and nvidia-nccl-cu13 2.29.7.
    os="ubuntu22.04",
    cuda="13.0",
    nccl="2.29.7",
    recorded_tag="2.13.0-cuda13.0-cudnn9-runtime",
)
DEFAULT_IMAGES: Final[dict[str, ImageSoftware]] = {
    "torch": _TORCH_2_13,
    "mpi": replace(
        _TORCH_2_13,
        name=versions.DEFAULT_MPI_IMAGE,
        # kubeflow/trainer v2.3.0 cmd/runtimes/deepspeed: nvidia/cuda:13.3.0-devel-ubuntu22.04
        # with torch==2.13.0 from PyPI (CUDA 13.0). The toolkit only compiles DeepSpeed's ops
        # for the node's GPU, which CUDA's minor version compatibility runs on a 13.0 driver.
        cuda_toolkit="13.3",
        recorded_tag="v2.3.0",
    ),
    "jax": ImageSoftware(
        name=versions.DEFAULT_JAX_IMAGE,
        # NGC framework containers 25.10 are CUDA 13.0 builds (25.12 moved to CUDA 13.1.0).
        os="ubuntu24.04",
        cuda="13.0",
        recorded_tag="25.10-py3",
    ),
}
"""Trainer runtime key -> the default image of that key."""

RAY_GPU_IMAGE: Final = ImageSoftware(
    name=versions.RAY_IMAGE,
    # Ray's image build (its ci/ray_ci/docker_container.py) aliases "-gpu" to GPU_PLATFORM
    # cu12.1.1-cudnn8, built on nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04. Ray itself loads
    # no NCCL; a job's PyTorch brings its own, so no NCCL is recorded.
    os="ubuntu22.04",
    cuda="12.1",
    recorded_tag="2.52.0-py312-gpu",
)
"""Ray's own GPU image (:data:`components.versions.RAY_IMAGE`): the default ``ray.images.gpu``."""


_ARG = re.compile(r"^ARG\s+([A-Z0-9_]+)=(\S+)\s*$", re.MULTILINE)


@cache
def _recipe_arguments(recipe: str) -> tuple[tuple[str, str], ...]:
    """Every ``ARG NAME=default`` of ``images/<recipe>/Dockerfile``, in the file's order."""
    return tuple(_ARG.findall((IMAGES_DIR / recipe / "Dockerfile").read_text()))


def recipe_pins(recipe: str) -> dict[str, str]:
    """The pinned ``ARG`` defaults of ``images/<recipe>/Dockerfile`` (one source for each pin).

    Arguments whose default is empty (download locations the builder passes) are not pins.
    """
    return {name: value for name, value in _recipe_arguments(recipe) if value != '""'}


def recipe_downloads(recipe: str) -> tuple[str, ...]:
    """The download locations ``images/<recipe>`` takes, in the recipe's order.

    They are its arguments whose default is empty: the builder passes them from the vendors'
    documentation, never from this repository.
    """
    return tuple(name for name, value in _recipe_arguments(recipe) if value == '""')


def _image_os(reference: str) -> str:
    """``ubuntu:24.04`` or ``.../slurmd:26.05-ubuntu24.04`` -> ``ubuntu24.04``."""
    name = reference.rsplit("/", maxsplit=1)[-1]
    match = re.search(r"(ubuntu|rockylinux|debian)[-:]?(\d+(?:\.\d+)?)", name)
    if match is None:
        raise ValueError(f"no distribution in the name of image {reference!r}")
    return match.group(1) + match.group(2)


def training_cuda(framework: str) -> ImageSoftware:
    """``images/training-cuda`` built on the default image of a Trainer ``framework`` key."""
    pins = recipe_pins("training-cuda")
    return replace(
        DEFAULT_IMAGES[framework],
        # Ends with the base's reference, so a stale record of the base is refused for the
        # build as well (reference_tag reads the tag of the name's last path part).
        name=f"images/training-cuda on {DEFAULT_IMAGES[framework].name}",
        efa_installer=pins["EFA_INSTALLER_VERSION"],
        aws_ofi_nccl=pins["AWS_OFI_NCCL_VERSION"],
    )


def training_neuron() -> ImageSoftware:
    """``images/training-neuron``: PyTorch on Trainium from the chosen Neuron SDK's packages."""
    pins = recipe_pins("training-neuron")
    return ImageSoftware(
        name=f"images/training-neuron (Neuron SDK {pins['NEURON_SDK_VERSION']})",
        neuron_sdk=pins["NEURON_SDK_VERSION"],
        os=_image_os(pins["BASE_IMAGE"]),
        efa_installer=pins["EFA_INSTALLER_VERSION"],
        neuron_runtime=pins["NEURON_RUNTIME_LIB_VERSION"],
        neuron_collectives=pins["NEURON_COLLECTIVES_VERSION"],
        torch_neuronx=pins["TORCH_NEURONX_VERSION"],
    )


RAY_CUDA_FRAMEWORK: Final = "torch"
"""The Trainer image key whose ``images/training-cuda`` build ``images/ray-cuda`` is built on:
Ray Train's TorchTrainer needs PyTorch, and the EFA plugin needs its NCCL."""


def ray_cuda() -> ImageSoftware:
    """``images/ray-cuda``: the ``images/training-cuda`` build of the torch image plus Ray.

    What it carries besides Ray is that build's (torch, its CUDA and NCCL, the EFA user space
    and aws-ofi-nccl): the recipe declares no versions of its own, so the Trainer and Ray GPU
    images cannot drift apart.
    """
    base = training_cuda(RAY_CUDA_FRAMEWORK)
    # Ends with the torch image's reference, as the training build's name does.
    return replace(
        base,
        name=f"images/ray-cuda (Ray {versions.RAY_VERSION}) on "
        f"{DEFAULT_IMAGES[RAY_CUDA_FRAMEWORK].name}",
    )


def ray_neuron() -> ImageSoftware:
    """``images/ray-neuron``: the ``images/training-neuron`` build plus Ray ``RAY_VERSION``."""
    return replace(
        training_neuron(),
        name=f"images/ray-neuron (Ray {versions.RAY_VERSION} on "
        f"Neuron SDK {recipe_pins('training-neuron')['NEURON_SDK_VERSION']})",
    )


def slurmd(accelerator: str) -> ImageSoftware:
    """``images/slurmd`` for a pool of ``accelerator`` (``nvidia`` or ``neuron``).

    Jobs bring their own framework (a virtualenv or container on /fsx). GPU images carry the
    EFA user space, the NCCL plugin, and the CUDA runtime and NCCL of the default PyTorch image
    (for programs outside a Python environment, and the NCCL the plugin needs), checked
    against the AMI's driver like any framework image's.
    """
    pins = recipe_pins("slurmd")
    common = ImageSoftware(
        name=f"images/slurmd ({accelerator})",
        os=_image_os(pins["SLURMD_IMAGE"]),
        efa_installer=pins["EFA_INSTALLER_VERSION"],
        framework=False,
    )
    if accelerator == "nvidia":
        return replace(
            common,
            aws_ofi_nccl=pins["AWS_OFI_NCCL_VERSION"],
            framework=True,
            cuda=pins["CUDA_VERSION"],
            nccl=pins["NCCL_VERSION"],
        )
    return replace(
        common,
        neuron_sdk=pins["NEURON_SDK_VERSION"],
        neuron_runtime=pins["NEURON_RUNTIME_LIB_VERSION"],
        neuron_collectives=pins["NEURON_COLLECTIVES_VERSION"],
    )


# ------------------------------------------------------------------------------ which image is it


def normalized(reference: str) -> str:
    """``reference`` without its digest, as Docker names it (for comparison).

    ``docker.io/library/x:t`` is ``x:t``, ``docker.io/x/y:t`` is ``x/y:t``.
    """
    name = reference.split("@", 1)[0]
    for prefix in ("index.docker.io/", "docker.io/"):
        if name.startswith(prefix):
            name = name.removeprefix(prefix).removeprefix("library/")
            break
    return name


KNOWN_IMAGES: Final[dict[str, ImageSoftware]] = {
    normalized(image.name): image for image in (*DEFAULT_IMAGES.values(), RAY_GPU_IMAGE)
}
"""Published images whose contents the bill of materials records, by :func:`normalized`
reference (the tag, not the digest: another digest of a recorded tag is a rebuild of the same
contents). An image of your own joins here, as one reviewed entry, before a stack may use it on an
accelerator pool."""


def repository_and_tag(reference: str) -> tuple[str, str]:
    """``repo:tag`` -> ``(repo, tag)``; ``repo:tag@sha256:...`` -> ``(repo, tag@sha256:...)``.

    For charts that render an image as ``{{ repository }}:{{ tag }}``: the digest rides in the
    tag field, so the rendered reference is the pinned one (containerd pulls by the digest).
    """
    name, at, digest = reference.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon <= slash:
        raise ValueError(f"image {reference!r} has no tag")
    return name[:colon], name[colon + 1 :] + at + digest


def reference_tag(reference: str) -> str | None:
    """The tag of ``repo:tag`` or ``repo:tag@sha256:...``; None for a digest alone."""
    last = reference.split("@", 1)[0].rsplit("/", maxsplit=1)[-1]
    return last.rpartition(":")[2] if ":" in last else None


def built_tag(recipe: str, variant: str) -> str:
    """The tag a build of ``images/<recipe>`` carries (the README's build commands).

    The tag names what the build was made from, so a stack that pins ``<repo>:<tag>@<digest>``
    says which recipe and pins its image has, and an image built from older pins carries another
    tag. ``variant``: the Trainer image key for ``training-cuda`` (its base is that key's default
    image), ``nvidia`` or ``neuron`` for ``slurmd`` (``login`` for its login image); unused
    for ``training-neuron``, ``ray-cuda`` and ``ray-neuron``; ``cuda`` or ``neuron`` for
    ``notebook`` (its base's tag, or the Neuron SDK, and the JupyterHub release); ``nvidia``
    or ``neuron`` for ``acceptance`` (this repository's release, then the tools' pins:
    ``0.1.0-cuda13.0-dcgm4.6.0-nccl-tests2.19.6-efa1.47.0``, ``0.1.0-sdk2.31.1-efa1.47.0``);
    unused for ``efa-exporter`` (this repository's release and the client library's pin:
    ``0.1.0-prometheus-client0.26.0``).

    Ray's images begin with the Ray release, so config can hold every Ray image's tag to
    ``rayVersion`` (components/config/ray.py): ``ray-cuda`` is the Ray release, ``torch`` and
    the tag of its ``images/training-cuda`` base
    (``2.52.0-torch2.13.0-cuda13.0-cudnn9-runtime-efa1.47.0``), ``ray-neuron`` the Ray release
    and the Neuron SDK of its ``images/training-neuron`` base (``2.52.0-sdk2.31.1``).
    """
    if recipe == "ray-cuda":
        return f"{versions.RAY_VERSION}-torch{built_tag('training-cuda', RAY_CUDA_FRAMEWORK)}"
    if recipe == "ray-neuron":
        sdk = recipe_pins("training-neuron")["NEURON_SDK_VERSION"]
        return f"{versions.RAY_VERSION}-sdk{sdk}"
    if recipe == "notebook":
        hub = f"hub{versions.NOTEBOOK_JUPYTERHUB_VERSION}"
        if variant == "neuron":
            return f"sdk{recipe_pins('training-neuron')['NEURON_SDK_VERSION']}-{hub}"
        return f"{reference_tag(versions.NOTEBOOK_CUDA_BASE_IMAGE)}-{hub}"
    if recipe == EFA_EXPORTER_RECIPE:
        return f"{program_version()}-prometheus-client{efa_exporter_client_version()}"
    pins = recipe_pins(recipe)
    efa = f"efa{pins['EFA_INSTALLER_VERSION']}"
    if recipe == "acceptance":
        # The program's release first: the image carries this repository's acceptance code.
        if variant == "neuron":
            return f"{program_version()}-sdk{pins['NEURON_SDK_VERSION']}-{efa}"
        return (
            f"{program_version()}-cuda{pins['CUDA_VERSION']}-dcgm{pins['DCGM_VERSION']}-"
            f"nccl-tests{pins['NCCL_TESTS_VERSION']}-{efa}"
        )
    if recipe == "training-cuda":
        return f"{reference_tag(DEFAULT_IMAGES[variant].name)}-{efa}"
    if recipe == "training-neuron":
        return f"sdk{pins['NEURON_SDK_VERSION']}"
    if variant == "login":
        # Slinky tags its login and slurmd images alike: "login" keeps the two builds apart.
        return f"{reference_tag(pins['LOGIN_IMAGE'])}-login-{efa}"
    base = reference_tag(pins["SLURMD_IMAGE"])
    return f"{base}-{efa}" if variant == "nvidia" else f"{base}-sdk{pins['NEURON_SDK_VERSION']}"


EFA_EXPORTER_RECIPE: Final = "efa-exporter"
"""``images/efa-exporter``: this repository's EFA exporter on a slim Python."""


def efa_exporter_client_version() -> str:
    """The prometheus-client release ``images/efa-exporter/requirements.txt`` pins.

    The recipe's one package, installed from that file (the bot moves it there).
    """
    text = (IMAGES_DIR / EFA_EXPORTER_RECIPE / "requirements.txt").read_text()
    (version,) = re.findall(r"^prometheus-client==(\S+)$", text, re.MULTILINE)
    return str(version)


def program_version() -> str:
    """This repository's release (``pyproject.toml`` ``[project] version``).

    Images that carry the repository's own code (``images/acceptance``) name it in their tag, so
    a release with other code builds another tag.
    """
    project = tomllib.loads((IMAGES_DIR.parent / "pyproject.toml").read_text())["project"]
    return str(project["version"])


def acceptance(vendor: str) -> ImageSoftware:
    """``images/acceptance`` for ``vendor`` (``nvidia`` or ``neuron``): the checking tools.

    The GPU image's CUDA runtime and NCCL are checked against the AMI's driver like a framework
    image's (all_reduce_perf loads them). The node check runs on one node, with no EFA traffic
    (check it with ``efa=False``); the fabric test runs the same image across two nodes, over the
    aws-ofi-nccl plugin its EFA installer bundles (``efa=True``). The Trainium image's Neuron
    runtime is checked against the driver.
    """
    pins = recipe_pins("acceptance")
    common = ImageSoftware(
        name=f"images/acceptance ({vendor})",
        os=_image_os(pins["BASE_IMAGE"]),
        efa_installer=pins["EFA_INSTALLER_VERSION"],
        framework=vendor == "nvidia",
    )
    if vendor == "nvidia":
        return replace(
            common,
            cuda=pins["CUDA_VERSION"],
            nccl=pins["NCCL_VERSION"],
            aws_ofi_nccl=pins["AWS_OFI_NCCL_VERSION"],
        )
    return replace(
        common,
        neuron_sdk=pins["NEURON_SDK_VERSION"],
        neuron_runtime=pins["NEURON_RUNTIME_LIB_VERSION"],
        neuron_collectives=pins["NEURON_COLLECTIVES_VERSION"],
    )


TRAINER_RECIPES: Final[dict[str, str]] = {"nvidia": "training-cuda", "neuron": "training-neuron"}
"""Accelerator -> the ``images/`` recipe that builds Trainer runtime images for its pools."""

RAY_RECIPES: Final[dict[str, str]] = {"nvidia": "ray-cuda", "neuron": "ray-neuron"}
"""Accelerator -> the ``images/`` recipe that builds Ray images for its pools."""


def _recipe_record(recipe: str, variant: str) -> ImageSoftware:
    if recipe == "training-cuda":
        return training_cuda(variant)
    if recipe == "training-neuron":
        return training_neuron()
    if recipe == "ray-cuda":
        return ray_cuda()
    if recipe == "ray-neuron":
        return ray_neuron()
    if recipe == "acceptance":
        return acceptance(variant)
    return slurmd(variant)


def identify(reference: str, recipe: str, variant: str) -> ImageSoftware | None:
    """What ``reference`` carries, as far as the bill of materials knows; None if it does not.

    Args:
        reference: the pinned image of a stack.
        recipe: the ``images/`` recipe that builds images for this use.
        variant: the recipe's variant (see :func:`built_tag`).
    """
    known = KNOWN_IMAGES.get(normalized(reference))
    if known is not None:
        return known
    if reference_tag(reference) == built_tag(recipe, variant):
        return _recipe_record(recipe, variant)
    return None
