"""Config sections ``platform.acceptance`` and ``nodePools[].acceptance``: the acceptance gate.

Every accelerator node starts with the startup taint of components/health_marks.py; the
acceptance agent checks it against the catalog and the floors, then frees it or moves it out
(docs: concepts, node acceptance). The platform section sets the gate for every pool; a pool
may override the replacement settings and carries the baselines measured on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from components.catalog import CATALOG, GPU_RESOURCE, NEURON_RESOURCE
from components.config.base import CONFIG_KEY, MISSING, ConfigProblem, StrictModel

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig

BaselineCheck = Literal["nccl-all-reduce", "nccom-all-reduce"]
"""The benchmarks with floors (acceptance/floors.py ``CHECKS``; a test holds them equal)."""


class AcceptanceBaselineConfig(StrictModel):
    """A bus-bandwidth floor measured on this pool, replacing the shipped one for its type."""

    instance_type: str = Field(
        description="The instance type it was measured on; one of the pool's. Required."
    )
    check: BaselineCheck = Field(
        description="nccl-all-reduce (all_reduce_perf, GPUs) or nccom-all-reduce (Trainium). "
        "Required."
    )
    nodes: Literal[1, 2] = Field(
        description="Nodes the run spanned: 1 (what acceptance runs on each new node) or 2 (the "
        "on-demand fabric test over EFA). Required."
    )
    floor_gbps: float = Field(
        alias="floorGbps",
        ge=0,
        description="Least bus bandwidth a node may show, GB/s (the measured figure less the "
        "margin the baseline command applies). Required.",
    )
    of: str = Field(
        min_length=1,
        description="What the figure measures (message size, ranks, path). Required.",
    )
    source: str = Field(
        min_length=1,
        description="Where it comes from: the run that measured it (job, date). Required.",
    )
    size_bytes: int | None = Field(
        default=None,
        alias="sizeBytes",
        gt=0,
        description="The message size the figure was taken at, bytes: a run is held to the "
        "floor at that size, as bus bandwidth grows with the size. The baseline command writes "
        "its run's largest size. Default: compared at the run's largest size.",
    )


class PoolAcceptanceConfig(StrictModel):
    """One pool's overrides of the acceptance gate, and the baselines measured on it."""

    replace_failed_nodes: bool | None = Field(
        default=None,
        description="Delete the NodeClaim of a node that fails acceptance, so Karpenter "
        "replaces it; false keeps it, marked karpenter.sh/do-not-disrupt, for an admin. "
        "Default: platform.acceptance.replaceFailedNodes.",
    )
    max_replacements_per_hour: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Most NodeClaims the gate deletes in this pool per hour (0: none; a "
        "replacement from a capacity reservation can land on the same bad host); it bounds "
        "deletions, not Karpenter's launches. Default: "
        "platform.acceptance.maxReplacementsPerPoolPerHour.",
    )
    baselines: list[AcceptanceBaselineConfig] = Field(
        default_factory=list,
        description="Floors measured on this pool (python -m acceptance baseline writes them), "
        "replacing the shipped floors for their type, check and node count. Default: none.",
    )


class AcceptanceImagesConfig(StrictModel):
    """The acceptance images, built from images/acceptance with the checking tools pinned."""

    nvidia: str | None = Field(
        default=None,
        description="Acceptance image of the GPU pools (images/acceptance, cuda target: "
        "nccl-tests, DCGM, the EFA tools and this repository's acceptance program). Pin by "
        "digest. Required with acceptance.enabled where a GPU pool exists.",
    )
    neuron: str | None = Field(
        default=None,
        description="Acceptance image of the Trainium pools (images/acceptance, neuron target: "
        "the Neuron tools, nccom-test, the EFA tools and the acceptance program). Pin by "
        "digest. Required with acceptance.enabled where a Trainium pool exists.",
    )


class AcceptanceConfig(StrictModel):
    """The gate every accelerator node passes before work lands on it."""

    enabled: bool = Field(
        default=True,
        description="Start every accelerator node with the acceptance taint and run the "
        "acceptance agent on the accelerator pools. Default: true.",
    )
    deadline_minutes: int = Field(
        default=45,
        ge=10,
        le=480,
        description="Minutes from a node's creation by which it must pass; after that it is "
        "marked expired and moved out as a failure (Karpenter waits on a startup taint "
        "forever). Default: 45 (DCGM level 2 and a one-node all-reduce take about 10).",
    )
    images: AcceptanceImagesConfig = Field(
        default_factory=AcceptanceImagesConfig,
        description="The agent's and its checks' images, per accelerator vendor. Default: none.",
    )
    dcgm_diag_level: Literal[0, 1, 2, 3, 4] = Field(
        default=2,
        description="dcgmi diag run level on each new GPU node: 0 none, 1 quick (seconds), 2 "
        "medium (about 2 minutes), 3 long (about 30), 4 extended (hours). Default: 2.",
    )
    replace_failed_nodes: bool = Field(
        default=True,
        description="Delete the NodeClaim of a node that fails acceptance, so Karpenter "
        "replaces it; false keeps it, tainted and marked karpenter.sh/do-not-disrupt, for an "
        "admin (Karpenter still launches a node for the pods that were waiting on it). "
        "Default: true.",
    )
    max_replacements_per_pool_per_hour: int = Field(
        default=2,
        ge=0,
        le=100,
        description="Most NodeClaims the gate deletes in one pool per hour (a pool and its "
        "-slurm NodePool share the count); further failed nodes stay, tainted and marked "
        "karpenter.sh/do-not-disrupt, until a slot frees. It bounds deletions, not the nodes "
        "Karpenter launches for pending pods. Default: 2.",
    )


def acceptance_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Cross-field problems of the acceptance sections.

    A baseline of a type the pool does not launch, or two for one type, check and node count;
    an enabled gate without the acceptance image of a vendor whose pool the stack has (the
    agent of that vendor could not run, and its nodes would wait on the taint until their
    deadline, with nothing to judge them).

    Args:
        config: the platform, validated field by field.
    """
    if config.acceptance.enabled:
        images = config.acceptance.images
        for vendor, resource, image in (
            ("nvidia", GPU_RESOURCE, images.nvidia),
            ("neuron", NEURON_RESOURCE, images.neuron),
        ):
            pools = [
                pool.name
                for pool in config.node_pools
                # a type the catalog lacks is refused by the pools' own check
                if all(name in CATALOG for name in pool.instance_types)
                and pool.instance.accelerator_resource == resource
            ]
            if pools and image is None:
                yield ConfigProblem(
                    f"{CONFIG_KEY}.acceptance.images.{vendor}",
                    MISSING,
                    f"the {vendor} acceptance image (built from images/acceptance, pinned by "
                    f"digest) while acceptance.enabled and the pools {', '.join(pools)} exist; "
                    "or acceptance.enabled: false",
                )
    for index, pool in enumerate(config.node_pools):
        seen: set[tuple[str, str, int]] = set()
        for position, baseline in enumerate(pool.acceptance.baselines):
            base = f"{CONFIG_KEY}.nodePools[{index}].acceptance.baselines[{position}]"
            if baseline.instance_type not in pool.instance_types:
                yield ConfigProblem(
                    f"{base}.instanceType",
                    baseline.instance_type,
                    f"one of the pool's instance types: {', '.join(pool.instance_types)}",
                )
            key = (baseline.instance_type, baseline.check, baseline.nodes)
            if key in seen:
                yield ConfigProblem(
                    base,
                    f"{baseline.instance_type} {baseline.check} nodes={baseline.nodes}",
                    "one baseline per instance type, check and node count",
                )
            seen.add(key)
