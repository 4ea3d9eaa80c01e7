"""Ray's config: its images per accelerator, their Ray release (issue 42, items 2 and 5)."""

from __future__ import annotations

from typing import Any

import pytest

from components import image_builds, software, versions
from components.config import parse_platform_config
from components.config.ray import RayImagesConfig
from tests.config_problems import MISSING, assert_reported
from tests.conftest import stack_data

DIGEST = "@sha256:" + "0123456789abcdef" * 4
REGISTRY = "111122223333.dkr.ecr.us-west-2.amazonaws.com"


def _dev_with_ray_images(**images: Any) -> dict[str, Any]:
    data = stack_data("dev")
    data["ray"]["images"] = images
    return data


# -- images --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image",
    [
        "rayproject/ray:2.51.0-py312-gpu",  # another release
        "rayproject/ray:2.52.01-py312-gpu",  # a release that only starts like it
        f"{REGISTRY}/ray-efa{DIGEST}",  # a digest alone says no release
        f"{REGISTRY}/ray-efa:py312-gpu-2.52.0",  # the release, but not first
    ],
)
def test_a_ray_image_whose_tag_is_not_the_ray_release_is_refused(image: str) -> None:
    data = _dev_with_ray_images(gpu=image, neuron=f"{REGISTRY}/ray-neuron:2.52.0-sdk2.31.1")
    assert_reported(
        data, "platform.ray.images.gpu", image, f"the Ray release {versions.RAY_VERSION}"
    )


def test_a_ray_image_pinned_by_tag_and_digest_is_accepted() -> None:
    image = f"{REGISTRY}/ray-neuron:{software.built_tag('ray-neuron', 'neuron')}{DIGEST}"
    assert RayImagesConfig.model_validate({"neuron": image}).neuron == image
    assert RayImagesConfig().gpu == versions.RAY_IMAGE


def test_a_trainium_pool_needs_the_built_ray_neuron_image() -> None:
    data = stack_data("dev")
    del data["ray"]["images"]["neuron"]
    assert_reported(data, "platform.ray.images.neuron", MISSING, "images/ray-neuron tagged")
    # ...only while Ray is on
    data["ray"]["enabled"] = False
    assert parse_platform_config(data).ray.images.neuron is None


def test_the_trainer_image_is_no_ray_image() -> None:
    image = f"{REGISTRY}/training-neuron:sdk2.31.1"
    data = _dev_with_ray_images(neuron=image)
    assert_reported(data, "platform.ray.images.neuron", image, "2.52.0")


def test_rays_own_gpu_image_is_refused_on_an_efa_pool() -> None:
    data = stack_data("staging")
    del data["ray"]["images"]["gpu"]
    assert_reported(data, "platform.ray.images.gpu", versions.RAY_IMAGE, "TCP sockets")


def test_an_unknown_image_of_the_right_release_is_refused_on_an_accelerator_pool() -> None:
    image = f"{REGISTRY}/my-ray:2.52.0-custom"
    data = stack_data("staging")
    data["ray"]["images"]["gpu"] = image
    assert_reported(data, "platform.ray.images.gpu", image, "images/ray-cuda tagged")


def test_the_ray_builds_start_with_the_ray_release_and_reuse_the_training_pins() -> None:
    by_key = {build.config_key: build for build in image_builds.builds()}
    cuda, neuron = by_key["ray.images.gpu"], by_key["ray.images.neuron"]
    for build in (cuda, neuron):
        assert build.tag.startswith(f"{versions.RAY_VERSION}-"), build.tag
        assert build.arguments["RAY_VERSION"] == versions.RAY_VERSION
    # images/ray-cuda declares no EFA versions of its own: the plan passes training-cuda's
    training = software.recipe_pins("training-cuda")
    assert software.recipe_pins("ray-cuda") == {}
    for pin in ("EFA_INSTALLER_VERSION", "AWS_OFI_NCCL_VERSION"):
        assert cuda.arguments[pin] == training[pin]
    assert cuda.bases == {"BASE_IMAGE": versions.RAY_IMAGE}
    assert software.ray_cuda().efa_installer == training["EFA_INSTALLER_VERSION"]
    # images/ray-neuron is built on the training-neuron build, made first in the same job
    assert neuron.base_build == by_key["trainer.images.neuron"]
    entry = neuron.matrix_entry()
    assert f"--build-arg BASE_IMAGE={entry['base_tag']}" in str(entry["build_args"])
    assert entry["base_context"] == "images/training-neuron"
    assert software.ray_neuron().neuron_runtime == software.training_neuron().neuron_runtime
