"""Cross-section rule: every image on an accelerator pool works with its AMI's drivers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from components import catalog, software
from components.config.base import CONFIG_KEY, MISSING, ConfigProblem
from components.config.pools import NodePoolConfig
from components.config.trainer import RUNTIME_IMAGE_KEYS

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig


def _accelerator_pools(config: PlatformConfig) -> Iterator[tuple[int, NodePoolConfig]]:
    for index, pool in enumerate(config.node_pools):
        if all(t in catalog.CATALOG for t in pool.instance_types):
            yield index, pool


def software_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Every image on an accelerator pool works with the drivers of the pool's AMI release."""
    releases: dict[str, software.AmiRelease] = {}
    for index, pool in _accelerator_pools(config):
        if pool.ami_alias in software.AMI_RELEASES:
            releases[pool.name] = software.AMI_RELEASES[pool.ami_alias]
        else:
            yield ConfigProblem(
                f"{CONFIG_KEY}.nodePools[{index}].amiAlias",
                pool.ami_alias,
                "a release whose drivers the bill of materials records, so its images can be "
                "checked against them: " + ", ".join(software.AMI_RELEASES)
                + " (components/software.py; add a release from the EKS AMI changelog)",
            )  # fmt: skip
    checks = _ImageChecks()
    images = config.trainer.images
    for _, pool in _accelerator_pools(config) if config.trainer.enabled else ():
        ami = releases.get(pool.name)
        if ami is None:
            continue
        accelerator = pool.instance.accelerator
        for key in RUNTIME_IMAGE_KEYS[accelerator].values():
            checks.check(
                f"{CONFIG_KEY}.trainer.images.{key}", getattr(images, key), pool,
                recipe=software.TRAINER_RECIPES[accelerator], variant=key, ami=ami,
            )  # fmt: skip
    ray_images = config.ray.images
    for _, pool in _accelerator_pools(config) if config.ray.enabled else ():
        ami = releases.get(pool.name)
        if ami is None:
            continue
        accelerator = pool.instance.accelerator
        key = "gpu" if accelerator == "nvidia" else "neuron"
        checks.check(
            f"{CONFIG_KEY}.ray.images.{key}", ray_images.for_accelerator(accelerator), pool,
            recipe=software.RAY_RECIPES[accelerator], variant=accelerator, ami=ami,
        )  # fmt: skip
    slurm = config.slurm
    pools = {pool.name: pool for _, pool in _accelerator_pools(config)}
    for index, node_set in enumerate(slurm.node_sets if slurm.enabled else []):
        slurm_pool, ami = pools.get(node_set.pool), releases.get(node_set.pool)
        if slurm_pool is None or ami is None:
            continue
        accelerator = slurm_pool.instance.accelerator
        key, reference = slurm.images.for_accelerator(accelerator)
        where = f"{CONFIG_KEY}.slurm.images.{key}"
        if node_set.image is not None:
            where, reference = f"{CONFIG_KEY}.slurm.nodeSets[{index}].image", node_set.image
        if reference is not None:  # a missing slurmd image is reported by the Slurm rules
            checks.check(
                where, reference, slurm_pool, recipe="slurmd", variant=accelerator, ami=ami
            )
    yield from checks.problems()
    login = slurm.images.login if slurm.enabled else None
    login_tag = software.built_tag("slurmd", "login")
    if login is not None and software.reference_tag(login) != login_tag:
        yield ConfigProblem(
            f"{CONFIG_KEY}.slurm.images.login",
            login,
            f"a build of images/slurmd with ROLE=login, tagged :{login_tag} (the Slurm release "
            "and Open MPI of the node sets' images), or no key for Slinky's own login image",
        )


class _ImageChecks:
    """Problems of the images at each key, gathered over the pools they run on: one per key."""

    def __init__(self) -> None:
        self._found: dict[str, tuple[Any, list[str]]] = {}

    def check(
        self,
        where: str,
        reference: str | None,
        pool: NodePoolConfig,
        *,
        recipe: str,
        variant: str,
        ami: software.AmiRelease,
    ) -> None:
        """Record what is wrong with ``reference`` (at config key ``where``) on ``pool``."""
        reasons = self._found.setdefault(where, (MISSING if reference is None else reference, []))[
            1
        ]
        built = f"images/{recipe} tagged :{software.built_tag(recipe, variant)}"
        if reference is None:
            published = "Ray image" if recipe == "ray-neuron" else "PyTorch training image"
            reason = (
                f"the image {built} (pin it as <repo>:<tag>@<digest>): no published "
                f"{published} has a Neuron runtime that starts on the AMI's Neuron driver "
                f"{ami.neuron_driver} (pool {pool.name})"
            )
        else:
            record = software.identify(reference, recipe, variant)
            if record is None:
                reason = (
                    f"an image whose contents the bill of materials knows, for pool {pool.name}: "
                    f"a build of {built} (pin it as <repo>:<tag>@<digest>), a default image, or "
                    "one you record in components/software.py KNOWN_IMAGES"
                )
            else:
                problems = software.image_problems(
                    record, pool.instance, efa=pool.uses_efa, ami=ami
                )
                reason = (
                    f"an image that works on pool {pool.name} ({built}): " + "; ".join(problems)
                    if problems
                    else ""
                )
        if reason and reason not in reasons:
            reasons.append(reason)

    def problems(self) -> Iterator[ConfigProblem]:
        """One problem per key whose image fails on some pool."""
        for where, (value, reasons) in self._found.items():
            if reasons:
                yield ConfigProblem(where, value, "; and ".join(reasons))
