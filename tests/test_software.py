"""The accelerator software bill of materials: every image on an accelerator pool works with the
drivers of the pool's AMI release, and config refuses one that would not."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import pytest

from components import software, versions
from components.catalog import CATALOG
from components.config import ConfigError, parse_platform_config
from tests.config_problems import MISSING, assert_reported, problems_of
from tests.conftest import STACKS, stack_data

AMI = software.AMI_RELEASES["al2023@v20260714"]
ROOT = Path(__file__).resolve().parent.parent
ACCELERATOR_SOFTWARE = ROOT / "docs" / "concepts" / "accelerator-software.md"


def _stack_images(stack: str) -> list[tuple[str, software.ImageSoftware, Any, bool, str]]:
    """(pool, image record, instance, efa, release) of every image a stack runs on accelerators."""
    config = parse_platform_config(stack_data(stack))
    found = []
    slurm_pools = (
        {node_set.pool for node_set in config.slurm.node_sets} if config.slurm.enabled else set()
    )
    for pool in config.node_pools:
        release = pool.ami_alias
        accelerator = pool.instance.accelerator
        references = [
            (getattr(config.trainer.images, key), recipe, key)
            for key, recipe in (
                [("torch", "training-cuda"), ("mpi", "training-cuda"), ("jax", "training-cuda")]
                if accelerator == "nvidia"
                else [("neuron", "training-neuron")]
            )
        ]
        if pool.name in slurm_pools:
            images = config.slurm.images
            slurmd = images.slurmd_gpu if accelerator == "nvidia" else images.slurmd_neuron
            references.append((slurmd, "slurmd", accelerator))
        for reference, recipe, variant in references:
            record = software.identify(reference, recipe, variant)
            assert record is not None, (stack, pool.name, reference)
            found.append((pool.name, record, pool.instance, pool.uses_efa, release))
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_every_image_on_every_accelerator_pool_works_with_its_ami(stack: str) -> None:
    images = _stack_images(stack)
    assert any(instance.accelerator != "nvidia" for _, _, instance, _, _ in images)
    for pool, record, instance, efa, release in images:
        assert release in software.AMI_RELEASES, (stack, pool)
        ami = software.AMI_RELEASES[release]
        assert software.image_problems(record, instance, efa=efa, ami=ami) == [], (pool, record)


def test_the_default_ami_release_is_recorded() -> None:
    assert versions.DEFAULT_AMI_ALIAS in software.AMI_RELEASES


# ------------------------------------------------------------------------------ Neuron


def test_the_neuron_sdk_2_26_image_cannot_start_on_driver_2_29() -> None:
    """The old default (pytorch-training-neuronx, SDK 2.26.1) bundles runtime 2.28."""
    old_default = software.ImageSoftware(
        name="pytorch-training-neuronx:2.8.0-neuronx-py311-sdk2.26.1-ubuntu22.04",
        os="ubuntu22.04",
        efa_installer="1.43.0",
        neuron_runtime="2.28.0.0",
        neuron_collectives="2.28.0.0",
        torch_neuronx="2.8.0.2.10",
    )
    (problem,) = software.image_problems(old_default, CATALOG["trn2.48xlarge"], efa=True, ami=AMI)
    assert "needs 2.33 or later" in problem and "nrt_init" in problem


def test_the_built_neuron_image_is_the_chosen_sdk() -> None:
    built = software.training_neuron()
    assert built.neuron_runtime == "2.33.10.0"
    assert built.os == "ubuntu24.04"
    assert software.image_problems(built, CATALOG["trn1.32xlarge"], efa=True, ami=AMI) == []


def test_a_driver_without_a_recorded_runtime_minimum_is_refused() -> None:
    newer = replace(AMI, neuron_driver="2.30.0.0")
    (problem,) = software.image_problems(
        software.training_neuron(), CATALOG["trn2.48xlarge"], efa=True, ami=newer
    )
    assert "no runtime minimum for Neuron driver 2.30" in problem


def test_collectives_must_be_the_runtimes_release() -> None:
    mixed = replace(software.training_neuron(), neuron_collectives="2.32.4.0")
    (problem,) = software.image_problems(mixed, CATALOG["trn2.48xlarge"], efa=True, ami=AMI)
    assert "collectives 2.32.4.0" in problem


@pytest.mark.parametrize(
    ("instance_type", "os", "works"),
    [
        # The Neuron runtime's release notes: Rocky 9 on trn1 but not on trn2; no Ubuntu 26.04.
        ("trn1.32xlarge", "rockylinux9", True),
        ("trn2.48xlarge", "rockylinux9", False),
        ("trn2.48xlarge", "ubuntu26.04", False),
        ("trn1n.32xlarge", "ubuntu26.04", False),
    ],
)
def test_the_neuron_runtime_only_runs_where_it_is_released(
    instance_type: str, os: str, works: bool
) -> None:
    image = replace(software.slurmd("neuron"), os=os)
    problems = software.image_problems(image, CATALOG[instance_type], efa=True, ami=AMI)
    assert (problems == []) is works, problems


def test_slurmd_builds_on_an_os_the_neuron_runtime_supports() -> None:
    assert software.slurmd("neuron").os == "ubuntu24.04"
    assert software.slurmd("neuron").neuron_runtime == software.training_neuron().neuron_runtime


# ------------------------------------------------------------------------------ NVIDIA


def test_the_default_gpu_images_have_no_efa_user_space() -> None:
    for key, image in software.DEFAULT_IMAGES.items():
        on_efa = software.image_problems(image, CATALOG["p5.48xlarge"], efa=True, ami=AMI)
        assert len(on_efa) == 1 and "TCP sockets" in on_efa[0], key
        assert software.image_problems(image, CATALOG["g5.xlarge"], efa=False, ami=AMI) == []
        built = software.training_cuda(key)
        assert software.image_problems(built, CATALOG["p5.48xlarge"], efa=True, ami=AMI) == []


@pytest.mark.parametrize(
    ("cuda", "driver", "expected"),
    [
        ("13.0", "580.159.03", None),
        ("13.0", "575.57.08", "needs NVIDIA driver 580.65.06 or later"),
        ("12.9", "575.51.03", None),
        ("13.1", "580.159.03", "no driver minimum"),
    ],
)
def test_the_cuda_of_an_image_needs_its_driver(
    cuda: str, driver: str, expected: str | None
) -> None:
    image = replace(software.DEFAULT_IMAGES["torch"], cuda=cuda)
    problems = software.image_problems(
        image, CATALOG["g6.xlarge"], efa=False, ami=replace(AMI, nvidia_driver=driver)
    )
    if expected is None:
        assert problems == []
    else:
        (problem,) = problems
        assert expected in problem


def test_nccl_older_than_the_plugin_supports_is_refused() -> None:
    old = replace(software.training_cuda("torch"), nccl="2.16.5")
    (problem,) = software.image_problems(old, CATALOG["p5.48xlarge"], efa=True, ami=AMI)
    assert "2.17.1" in problem


def test_slurmd_gpu_carries_the_plugin_on_a_distribution_it_is_released_for() -> None:
    image = software.slurmd("nvidia")
    assert image.aws_ofi_nccl == "1.18.0"
    assert software.image_problems(image, CATALOG["p5en.48xlarge"], efa=True, ami=AMI) == []
    on_26_04 = replace(image, os="ubuntu26.04")
    (problem,) = software.image_problems(on_26_04, CATALOG["p5.48xlarge"], efa=True, ami=AMI)
    assert "aws-ofi-nccl is not released for" in problem


# ------------------------------------------------------------------------------ the recipes


_SHARED_PINS = {
    "EFA_INSTALLER_VERSION": ("training-cuda", "training-neuron", "slurmd", "acceptance"),
    "AWS_OFI_NCCL_VERSION": ("training-cuda", "slurmd", "acceptance"),
    "NEURON_RUNTIME_LIB_VERSION": ("training-neuron", "slurmd", "acceptance"),
    "NEURON_COLLECTIVES_VERSION": ("training-neuron", "slurmd", "acceptance"),
    "NEURON_TOOLS_VERSION": ("training-neuron", "slurmd", "acceptance"),
    "NEURON_SDK_VERSION": ("training-neuron", "slurmd", "acceptance"),
    "CUDA_VERSION": ("slurmd", "acceptance"),
    "NCCL_VERSION": ("slurmd", "acceptance"),
    "BOTOCORE_VERSION": ("training-cuda", "training-neuron"),
}


def test_slurms_gpu_images_carry_the_default_pytorch_images_cuda_and_nccl() -> None:
    """Issue 21 point 6: CUDA and NCCL on the GPU slurmd and login images, at the versions the
    bill of materials states for the framework images (one NCCL across Trainer and Slurm)."""
    pins = software.recipe_pins("slurmd")
    torch = software.DEFAULT_IMAGES["torch"]
    assert (pins["CUDA_VERSION"], pins["NCCL_VERSION"]) == (torch.cuda, torch.nccl)
    gpu = software.slurmd("nvidia")
    assert (gpu.cuda, gpu.nccl, gpu.framework) == (torch.cuda, torch.nccl, True)
    # and so the driver rules apply to it: an AMI too old for its CUDA refuses it
    old = replace(software.AMI_RELEASES[versions.DEFAULT_AMI_ALIAS], nvidia_driver="535.0.0")
    problems = software.image_problems(gpu, CATALOG["p5.48xlarge"], efa=True, ami=old)
    assert any("needs NVIDIA driver" in problem for problem in problems), problems
    assert not software.image_problems(
        gpu, CATALOG["p5.48xlarge"], efa=True,
        ami=software.AMI_RELEASES[versions.DEFAULT_AMI_ALIAS],
    )  # fmt: skip


def test_the_images_botocore_is_the_one_the_checkpoint_tool_is_tested_with() -> None:
    requirements = (ROOT / "requirements.txt").read_text()
    (tested,) = re.findall(r"^botocore==(\S+)$", requirements, re.MULTILINE)
    assert software.recipe_pins("training-cuda")["BOTOCORE_VERSION"] == tested


@pytest.mark.parametrize("pin", sorted(_SHARED_PINS))
def test_recipes_agree_on_the_pins_they_share(pin: str) -> None:
    values = {recipe: software.recipe_pins(recipe).get(pin) for recipe in _SHARED_PINS[pin]}
    assert None not in values.values(), values
    assert len(set(values.values())) == 1, values


@pytest.mark.parametrize(
    "recipe", ["training-cuda", "training-neuron", "slurmd", "acceptance", "efa-exporter"]
)
def test_recipe_pins_are_exact_versions(recipe: str) -> None:
    pins = software.recipe_pins(recipe)
    assert pins
    for name, value in pins.items():
        if name.endswith("_VERSION"):
            assert re.fullmatch(r"\d+(\.\d+)+", value), (name, value)
        if name.endswith("_IMAGE"):
            assert not value.endswith(":latest") and ":" in value, (name, value)


def test_the_acceptance_images_are_known_by_their_tags_and_fit_the_ami() -> None:
    ami = software.AMI_RELEASES[versions.DEFAULT_AMI_ALIAS]
    pins = software.recipe_pins("acceptance")
    # The agent's client library is the one its tests run with.
    requirements = (ROOT / "requirements.txt").read_text()
    (tested,) = re.findall(r"^kubernetes==(\S+)$", requirements, re.MULTILINE)
    assert pins["KUBERNETES_CLIENT_VERSION"] == tested
    tags = {vendor: software.built_tag("acceptance", vendor) for vendor in ("nvidia", "neuron")}
    assert tags == {
        "nvidia": f"{software.program_version()}-cuda{pins['CUDA_VERSION']}-dcgm"
        f"{pins['DCGM_VERSION']}-nccl-tests{pins['NCCL_TESTS_VERSION']}-efa"
        f"{pins['EFA_INSTALLER_VERSION']}",
        "neuron": f"{software.program_version()}-sdk{pins['NEURON_SDK_VERSION']}-efa"
        f"{pins['EFA_INSTALLER_VERSION']}",
    }
    for vendor, instance in (("nvidia", "p5.48xlarge"), ("neuron", "trn2.48xlarge")):
        image = software.identify(f"r.example/acceptance-{vendor}:{tags[vendor]}", "acceptance",
                                  vendor)  # fmt: skip
        assert image == software.acceptance(vendor)
        # One node, no EFA traffic: the check runs with efa=False.
        assert software.image_problems(image, CATALOG[instance], efa=False, ami=ami) == []
    # The fabric test runs the GPU image across two nodes over EFA: it carries the plugin.
    fabric = software.acceptance("nvidia")
    assert fabric.aws_ofi_nccl == software.recipe_pins("training-cuda")["AWS_OFI_NCCL_VERSION"]
    assert software.image_problems(fabric, CATALOG["p5.48xlarge"], efa=True, ami=ami) == []
    old = replace(ami, nvidia_driver="535.0.0")
    assert software.image_problems(
        software.acceptance("nvidia"), CATALOG["p5.48xlarge"], efa=False, ami=old
    )
    assert (
        software.identify("r.example/acceptance-nvidia:0.0.1-old", "acceptance", "nvidia") is None
    )


BOT_ONLY: Final = {"BOTOCORE_VERSION"}
"""Recipe pins the dependency bot moves without anyone editing a record beside them: the docs
name them through the generated bill of materials only, so the bot's pull request stays green."""


def _recipe_versions(recipe: str) -> set[str]:
    # A base image by its tag (the bot adds and refreshes digests in place).
    return {
        value.split("@")[0]
        for name, value in software.recipe_pins(recipe).items()
        if name not in BOT_ONLY
    }


def test_every_version_the_bill_of_materials_pins_is_in_the_docs() -> None:
    section = ACCELERATOR_SOFTWARE.read_text()
    wanted = {
        AMI.nvidia_driver, AMI.neuron_driver, AMI.efa_driver,
        versions.DEFAULT_AMI_ALIAS,
        *_recipe_versions("training-neuron"),
        *_recipe_versions("training-cuda"),
        *(image.cuda for image in software.DEFAULT_IMAGES.values()),
    }  # fmt: skip
    missing = sorted(str(v) for v in wanted if str(v) not in section)
    assert missing == []


# ------------------------------------------------------------------------------ config


def test_a_trainium_pool_needs_the_built_neuron_image() -> None:
    data = stack_data("staging")
    del data["trainer"]["images"]["neuron"]
    assert_reported(data, "platform.trainer.images.neuron", MISSING, "images/training-neuron")


def test_the_default_torch_image_is_refused_on_an_efa_pool() -> None:
    data = stack_data("prod")
    data["trainer"]["images"]["torch"] = versions.DEFAULT_TORCH_IMAGE
    assert_reported(
        data, "platform.trainer.images.torch", versions.DEFAULT_TORCH_IMAGE, "TCP sockets"
    )


def test_an_ami_release_without_recorded_drivers_is_refused() -> None:
    data = stack_data("prod")
    data["nodePools"][0]["amiAlias"] = "al2023@v20260903"
    assert_reported(data, "platform.nodePools[0].amiAlias", "al2023@v20260903", "v20260714")


def test_the_default_gpu_images_serve_pools_without_efa() -> None:
    data = stack_data("dev")
    assert "torch" not in data["trainer"]["images"]
    assert parse_platform_config(data).trainer.images.torch == versions.DEFAULT_TORCH_IMAGE


def test_every_software_problem_is_reported_at_once() -> None:
    data = stack_data("prod")
    data["trainer"]["images"] = {}
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data)
    paths = {problem.path for problem in caught.value.problems}
    assert {f"platform.trainer.images.{key}" for key in ("torch", "mpi", "jax", "neuron")} <= paths


# ------------------------------------------------------------------------------ which image it is


@pytest.mark.parametrize(
    ("reference", "recipe", "variant", "known"),
    [
        # A build is known by the tag its recipe gives it, with or without a digest.
        ("1.dkr.ecr.us-east-1.amazonaws.com/t:sdk2.31.1@sha256:" + "a" * 64,
         "training-neuron", "neuron", True),
        ("1.dkr.ecr.us-east-1.amazonaws.com/t:sdk2.26.1", "training-neuron", "neuron", False),
        ("1.dkr.ecr.us-east-1.amazonaws.com/t@sha256:" + "a" * 64,
         "training-neuron", "neuron", False),
        # The last AWS PyTorch training image for Trainium is not one the bill knows.
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training-neuronx:"
         "2.8.0-neuronx-py311-sdk2.26.1-ubuntu22.04", "training-neuron", "neuron", False),
        ("r/training-mpi:v2.3.0-efa1.47.0", "training-cuda", "mpi", True),
        ("r/training-mpi:v2.3.0-efa1.47.0", "training-cuda", "torch", False),
        ("nvcr.io/nvidia/pytorch:24.01-py3", "training-cuda", "torch", False),
        ("r/slurmd-neuron:26.05-ubuntu26.04-sdk2.26", "slurmd", "neuron", False),
        ("r/slurmd-neuron:26.05-ubuntu24.04-sdk2.31.1", "slurmd", "neuron", True),
    ],
)  # fmt: skip
def test_an_image_is_known_by_its_reference_or_its_recipes_tag(
    reference: str, recipe: str, variant: str, known: bool
) -> None:
    assert (software.identify(reference, recipe, variant) is not None) is known


def test_a_default_image_is_known_however_it_is_spelled() -> None:
    spelled = "docker.io/" + versions.DEFAULT_TORCH_IMAGE + "@sha256:" + "b" * 64
    assert software.identify(spelled, "training-cuda", "torch") == software.DEFAULT_IMAGES["torch"]
    assert software.normalized("docker.io/library/ubuntu:24.04") == "ubuntu:24.04"


@pytest.mark.parametrize(
    ("key", "reference"),
    [
        ("neuron", "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training-neuronx:"
                   "2.8.0-neuronx-py311-sdk2.26.1-ubuntu22.04"),
        ("torch", "nvcr.io/nvidia/pytorch:24.01-py3"),
        ("torch", "docker.io/pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"),
    ],
)  # fmt: skip
def test_config_refuses_images_it_cannot_vouch_for(key: str, reference: str) -> None:
    data = stack_data("prod")
    data["trainer"]["images"][key] = reference
    problems = [p for p in problems_of(data) if p.path == f"platform.trainer.images.{key}"]
    assert len(problems) == 1, problems  # one problem per key, however many pools it fails on
    assert "images/training-" in problems[0].allowed


def test_config_refuses_a_slurmd_image_built_from_old_pins() -> None:
    data = stack_data("prod")
    data["slurm"]["images"]["slurmdNeuron"] = "r/slurmd-neuron:26.05-ubuntu26.04-sdk2.26"
    assert_reported(
        data, "platform.slurm.images.slurmdNeuron", "r/slurmd-neuron:26.05-ubuntu26.04-sdk2.26",
        ":26.05-ubuntu24.04-sdk2.31.1",
    )  # fmt: skip


def test_the_ami_family_is_part_of_the_release() -> None:
    data = stack_data("staging")
    data["nodePools"][0]["amiAlias"] = "bottlerocket@v20260714"
    data["nodePools"][0]["hugepagesGiB"] = 0
    assert_reported(data, "platform.nodePools[0].amiAlias", "bottlerocket@v20260714", "al2023@")


def test_an_unknown_neuron_family_is_not_waved_through() -> None:
    trn3 = replace(CATALOG["trn2.48xlarge"], name="trn3.48xlarge")
    problems = software.image_problems(software.training_neuron(), trn3, efa=True, ami=AMI)
    assert any("no Neuron runtime OS list for trn3" in p for p in problems)


@pytest.mark.parametrize("key", sorted(software.DEFAULT_IMAGES))
def test_a_default_image_moved_to_another_tag_is_refused_until_recorded(key: str) -> None:
    # The dependency bot moves a default image's pin; what the image carries (CUDA, NCCL) is a
    # record read for one tag, so the moved pin is refused on every accelerator pool, built
    # images included, until someone records the new tag's contents.
    record = software.DEFAULT_IMAGES[key]
    assert record.recorded_tag == software.reference_tag(record.name)
    ami = software.AMI_RELEASES[versions.DEFAULT_AMI_ALIAS]
    assert not software.image_problems(record, CATALOG["p5.48xlarge"], efa=False, ami=ami)
    repository = record.name.split("@")[0].rpartition(":")[0]
    moved = replace(record, name=f"{repository}:9.9.9")
    built = replace(software.training_cuda(key), name=f"images/training-cuda on {moved.name}")
    for image in (moved, built):
        (problem,) = software.image_problems(image, CATALOG["p5.48xlarge"], efa=True, ami=ami)
        assert f"({record.recorded_tag})" in problem and "record what the new tag" in problem


def test_a_neuron_sdk_pin_moved_without_its_packages_is_refused() -> None:
    ami = software.AMI_RELEASES[versions.DEFAULT_AMI_ALIAS]
    trn = CATALOG["trn1.32xlarge"]
    for image in (software.training_neuron(), software.slurmd("neuron")):
        assert image.neuron_sdk == software.recipe_pins("training-neuron")["NEURON_SDK_VERSION"]
        assert not software.image_problems(image, trn, efa=True, ami=ami)
        unknown = replace(image, neuron_sdk="2.99.0")
        assert any(
            "no runtime record for" in p
            for p in software.image_problems(unknown, trn, efa=True, ami=ami)
        )
        known_but_other = replace(image, neuron_runtime="2.34.1.0", neuron_collectives="2.34.1.0")
        assert any(
            "ships 2.33" in p
            for p in software.image_problems(known_but_other, trn, efa=True, ami=ami)
        )
