"""Config sections ``platform.ray`` (KubeRay) and ``platform.teams[].ray`` (team switches)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Final

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from components import catalog, software, versions
from components.config.base import CONFIG_KEY, ConfigProblem, StrictModel, duplicates, matching
from components.config.pools import GENERAL_LUSTRE_POOL, GENERAL_POOL, NodePoolConfig
from components.config.slurm import slurm_held_nodes
from components.config.trainer import PinnedImage

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig
    from components.config.teams import TeamConfig

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
        description=f"Clusters on GPU pools. Default: {versions.RAY_IMAGE} (Ray's own: no "
        "PyTorch, NCCL or EFA user space, so a TorchTrainer needs torch from its runtime_env; "
        "allowed on pools without EFA only). The image images/ray-cuda builds (the Trainer "
        "torch image's images/training-cuda build plus Ray's dashboard, Jobs API and Train), "
        f"tagged {software.built_tag('ray-cuda', 'nvidia')}, runs Ray Train with PyTorch "
        "anywhere and is required on pools with EFA. Its tag must start with the Ray release "
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


MAX_RAY_CLUSTER_NAME: Final = 53
"""KubeRay's longest RayCluster name (ray-project/kuberay v1.7.0
ray-operator/controllers/ray/utils/constant.go, MaxRayClusterNameLength), a DNS-1035 label
(utils/validation.go, ValidateRayClusterMetadata)."""

RayClusterName = Annotated[
    str,
    AfterValidator(
        matching(
            rf"[a-z]([-a-z0-9]{{0,{MAX_RAY_CLUSTER_NAME - 2}}}[a-z0-9])?",
            f"a DNS-1035 label of at most {MAX_RAY_CLUSTER_NAME} characters (KubeRay's limit): "
            "lower-case letters, digits and '-', starting with a letter",
        )
    ),
]


class TeamRayClusterConfig(StrictModel):
    """A standing RayCluster of the team: made by the platform, there until removed here."""

    name: RayClusterName = Field(description="The RayCluster's name in the team's namespace.")
    pool: str = Field(description="The accelerator pool its workers run on. Required.")
    workers: int = Field(
        ge=1,
        description="Workers, each a whole node of the pool (every accelerator and EFA "
        "interface). The cluster holds them, and the head on a general pool, for as long as it "
        "exists: minReplicas = replicas = maxReplicas, no autoscaler. Required.",
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
    clusters: list[TeamRayClusterConfig] = Field(
        default_factory=list,
        description="Standing RayClusters the platform keeps in the team's namespace and queue "
        "(with ray.enabled), gang-scheduled like a RayJob's: for interactive work and RayJobs "
        "that name them. Each holds its nodes while it exists. Default: none.",
    )


def team_pool_nodes(team: TeamConfig, pool: NodePoolConfig) -> int:
    """Whole nodes of ``pool`` the team's quota and its queue's capability both allow.

    The rule by which a team gets Trainer runtimes on a pool (components/trainer.py,
    ``team_nodes``), so a team runs Ray on the pools it runs Trainer on.
    """
    resource = pool.instance.accelerator_resource
    allowed = min(team.quota.resources()[resource], team.capability.resources()[resource])
    return allowed // pool.instance.accelerators


def _gang_problem(
    team: TeamConfig,
    pool: NodePoolConfig,
    workers: int,
    where: str,
    taken: dict[str, int],
) -> ConfigProblem | None:
    """A problem if the team's quota or queue cannot hold ``workers`` more whole nodes.

    Beside what the team's clusters listed before this one hold (``taken``, which this one
    adds to where it fits).

    Args:
        team: the team.
        pool: the cluster's pool.
        workers: its workers.
        where: its ``workers`` key path.
        taken: quota or queue key -> what the team's earlier clusters hold of it; updated.
    """
    instance = pool.instance
    resource = "gpus" if instance.accelerator == "nvidia" else "neuronDevices"
    attribute = "gpus" if instance.accelerator == "nvidia" else "neuron_devices"
    limits = {
        f"quota.{resource}": getattr(team.quota, attribute),
        f"queue capability {resource}": getattr(team.capability, attribute),
    }
    per_node = {key: instance.accelerators for key in limits}
    if pool.uses_efa:
        limits["quota.efaInterfaces"] = team.quota.efa_interfaces
        per_node["quota.efaInterfaces"] = instance.efa_interfaces
    free = {key: limit - taken.get(key, 0) for key, limit in limits.items()}
    short = [
        f"{key} {limit} holds {free[key] // per_node[key]} (each node takes {per_node[key]}"
        + (f"; the team's clusters before it hold {taken[key]}" if taken.get(key) else "")
        + ")"
        for key, limit in limits.items()
        if workers * per_node[key] > free[key]
    ]
    if not short:
        for key in limits:
            taken[key] = taken.get(key, 0) + workers * per_node[key]
        return None
    fits = max(min(free[key] // per_node[key] for key in limits), 0)
    return ConfigProblem(
        where,
        workers,
        f"at most {fits} workers of pool {pool.name}, what the team's quota and queue hold "
        "of the minimum gang (the head takes no accelerator, every worker a whole node): "
        + "; ".join(short),
    )


def ray_cluster_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Each team's standing RayClusters fit their pool, the team's share of it and its queue."""
    pools = {pool.name: pool for pool in config.node_pools}
    held = slurm_held_nodes(config)
    standing: dict[str, list[str]] = {}  # pool -> the standing clusters on it so far
    taken_nodes: dict[str, int] = {}
    for index, team in enumerate(config.teams):
        taken: dict[str, int] = {}
        clusters = team.ray.clusters
        base = f"{CONFIG_KEY}.teams[{index}].ray.clusters"
        if not clusters:
            continue
        if not config.ray.enabled:
            yield ConfigProblem(
                base,
                [cluster.name for cluster in clusters],
                "none unless ray.enabled (the RayCluster CRD and its operator come with it)",
            )
            continue
        names = [cluster.name for cluster in clusters]
        if duplicates(names):
            yield ConfigProblem(base, names, "unique cluster names within the team")
        usable = [p.name for p in pools.values() if _known(p) and team_pool_nodes(team, p) >= 1]
        for position, cluster in enumerate(clusters):
            where = f"{base}[{position}]"
            pool = pools.get(cluster.pool)
            if pool is None:
                general = cluster.pool in (GENERAL_POOL, GENERAL_LUSTRE_POOL)
                yield ConfigProblem(
                    f"{where}.pool",
                    cluster.pool,
                    ("an accelerator pool, not a general one (the head runs there by itself): "
                     if general else "a pool of nodePools the team can use: ")
                    + (", ".join(usable) or "none (the team's quota fills no node)"),
                )  # fmt: skip
                continue
            if not _known(pool):
                continue  # the pool's own problem says why
            if team_pool_nodes(team, pool) < 1:
                yield ConfigProblem(
                    f"{where}.pool",
                    cluster.pool,
                    "a pool of which the team's quota and queue capability allow a whole node "
                    "(as for its Trainer runtimes): " + (", ".join(usable) or "none"),
                )
                continue
            before = taken_nodes.get(pool.name, 0)
            free = pool.max_nodes - held.get(pool.name, 0) - before
            if cluster.workers > free:
                others = ", ".join(standing.get(pool.name, []))
                yield ConfigProblem(
                    f"{where}.workers",
                    cluster.workers,
                    f"at most {max(free, 0)}: pool {pool.name}'s maxNodes ({pool.max_nodes}) "
                    f"less the {held.get(pool.name, 0)} its Slurm node set holds"
                    + (f" and the {before} of standing clusters {others}" if others else ""),
                )
                continue
            problem = _gang_problem(team, pool, cluster.workers, f"{where}.workers", taken)
            if problem is not None:
                yield problem
                continue
            taken_nodes[pool.name] = before + cluster.workers
            standing.setdefault(pool.name, []).append(f"{team.name}/{cluster.name}")


def _known(pool: NodePoolConfig) -> bool:
    return all(t in catalog.CATALOG for t in pool.instance_types)
