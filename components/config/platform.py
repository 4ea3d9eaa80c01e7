"""The whole stack schema, :class:`PlatformConfig`, and :func:`parse_platform_config`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from pydantic import Field, ValidationError

from components.config.acceptance import AcceptanceConfig, acceptance_problems
from components.config.base import (
    CONFIG_KEY,
    MISSING,
    AccountId,
    AwsRegion,
    ClusterName,
    ConfigError,
    ConfigProblem,
    EnvironmentName,
    StrictModel,
)
from components.config.cluster import ClusterConfig, cluster_problems, ui_exposure_problems
from components.config.errors import problems_from_pydantic
from components.config.images import software_problems
from components.config.katib import KatibConfig, katib_problems
from components.config.model_store import ModelStoreConfig, model_store_problems
from components.config.network import NetworkConfig, network_problems
from components.config.notebooks import NotebooksConfig, OidcConfig, notebooks_problems
from components.config.observability import ObservabilityConfig, observability_problems
from components.config.pools import GeneralPoolConfig, NodePoolConfig, node_pool_problems
from components.config.ray import RayConfig, ray_cluster_problems
from components.config.slurm import SlurmConfig, slurm_problems
from components.config.storage import StorageConfig, storage_problems
from components.config.tags import TagsConfig, tag_problems
from components.config.teams import TeamConfig, team_problems
from components.config.trainer import TrainerConfig


class PlatformConfig(StrictModel):
    """The whole platform of one stack (config key ``platform``)."""

    environment: EnvironmentName = Field(
        description="Environment name (dev, staging, prod, ...); tag `environment` and part "
        "of resource names. Required."
    )
    region: AwsRegion = Field(description="AWS region of every resource. Required.")
    account_id: AccountId = Field(
        description="AWS account the stack deploys to; ARNs are built from it so the program "
        "never calls AWS while planning. Required."
    )
    cluster_name: ClusterName | None = Field(
        default=None,
        description="EKS cluster name, also the Karpenter discovery tag value. "
        "Default: training-<environment>.",
    )
    tags: TagsConfig = Field(description="Required and extra tags. Required.")
    protect_stateful_resources: bool = Field(
        default=False,
        description="Protect stateful resources (the cluster, KMS keys, the file system, "
        "buckets, Slurm's accounting database) from deletion. Default: false; set true in "
        "production.",
    )
    network: NetworkConfig = Field(description="VPC and zones. Required.")
    cluster: ClusterConfig = Field(description="EKS cluster. Required.")
    node_pools: list[NodePoolConfig] = Field(
        default_factory=list,
        description="Accelerated Karpenter pools (GPU and Trainium). Default: none.",
    )
    general_pool: GeneralPoolConfig = Field(
        default_factory=GeneralPoolConfig,
        description="The general-purpose CPU pool. Default: on-demand and spot, 256 vCPU.",
    )
    storage: StorageConfig = Field(
        default_factory=StorageConfig, description="S3 buckets and FSx for Lustre. Default: none."
    )
    model_store: ModelStoreConfig = Field(
        default_factory=ModelStoreConfig,
        description="The shared model store on Amazon EFS, mounted at /models. Default: off.",
    )
    acceptance: AcceptanceConfig = Field(
        default_factory=AcceptanceConfig,
        description="The acceptance gate of the accelerator pools: new nodes are checked before "
        "work lands. Default: on.",
    )
    teams: list[TeamConfig] = Field(
        default_factory=list,
        description="Teams: namespaces, quotas, access and Volcano queues. Default: none.",
    )
    trainer: TrainerConfig = Field(
        default_factory=TrainerConfig,
        description="Kubeflow Trainer v2 and its runtimes. Default: on, default images.",
    )
    ray: RayConfig = Field(
        default_factory=RayConfig,
        description="KubeRay, gang-scheduled by Volcano in the team queues. Default: off.",
    )
    slurm: SlurmConfig = Field(
        default_factory=SlurmConfig,
        description="Slurm on Kubernetes (Slinky) on the accelerator pools. Default: off.",
    )
    katib: KatibConfig = Field(
        default_factory=KatibConfig,
        description="Katib hyperparameter search, trials as TrainJobs. Default: off.",
    )
    notebooks: NotebooksConfig = Field(
        default_factory=NotebooksConfig,
        description="JupyterHub, each user's server in their team's namespace. Default: off.",
    )
    observability: ObservabilityConfig = Field(
        default_factory=ObservabilityConfig,
        description="The fleet's metrics stack, dashboards, alerts and cold-start ledger. "
        "Default: Prometheus keeping 15 days on 100 GiB, Grafana on, no remote write.",
    )
    oidc: OidcConfig = Field(
        default_factory=OidcConfig,
        description="The platform's OpenID Connect client (notebooks; Grafana later). "
        "Default: unset.",
    )

    @property
    def name(self) -> str:
        """The cluster name, also the prefix of every AWS resource name."""
        return self.cluster_name or f"training-{self.environment}"

    @property
    def slurm_cluster_name(self) -> str:
        """The Slurm ClusterName: configured, or the EKS cluster name in Slurm's alphabet."""
        return self.slurm.cluster_name or self.name.replace("-", "_")

    def pool(self, name: str) -> NodePoolConfig | None:
        """The accelerator pool called ``name``, if there is one."""
        return next((pool for pool in self.node_pools if pool.name == name), None)

    @property
    def required_tags(self) -> dict[str, str]:
        """The tags every AWS resource carries: required ones first, then extra."""
        return {
            "owner": self.tags.owner,
            "cost-center": self.tags.cost_center,
            "environment": self.environment,
            **self.tags.extra,
        }


ConfigCheck = Callable[[PlatformConfig], Iterable[ConfigProblem]]
"""A rule on the parsed model that lives above config (it needs what a component builds)."""


def parse_platform_config(
    raw: Any,
    *,
    stack: str | None = None,
    aws_region: Any = None,
    checks: Sequence[ConfigCheck] = (),
) -> PlatformConfig:
    """Validate raw stack data (the value of the ``platform`` key) into a :class:`PlatformConfig`.

    Args:
        raw: the value of the stack's ``platform`` key, as YAML or the engine gives it.
        stack: the stack's name (``Pulumi.<stack>.yaml``); when given, ``environment`` must be
            it. Default: not checked (tests of single sections).
        aws_region: the stack's ``aws:region`` value, if it sets one; it must be
            ``platform.region``. Default: not set.
        checks: rules of the parsed model that need more than config, passed in by the
            program (:func:`components.platform.validated_config`); they run with the
            cross-field rules, so a stack hears of every problem at once. Default: none.

    Raises:
        ConfigError: with every structural problem, or, when the structure is sound, every
            problem found by the cross-field rules.

    """
    if raw is None:
        raise ConfigError(
            [ConfigProblem(CONFIG_KEY, MISSING, "a mapping with the platform settings")]
        )
    if not isinstance(raw, dict):
        raise ConfigError([ConfigProblem(CONFIG_KEY, raw, "a mapping with the platform settings")])
    try:
        # by_name=False: a stack writes camelCase keys; snake_case ones get "did you mean".
        config = PlatformConfig.model_validate(raw, by_name=False)
    except ValidationError as exc:
        raise ConfigError(problems_from_pydantic(exc.errors(), PlatformConfig)) from None
    problems = list(_stack_problems(config, stack, aws_region))
    problems += _cross_field_problems(config)
    for check in checks:
        problems += check(config)
    if problems:
        raise ConfigError(problems)
    return config


def _stack_problems(
    config: PlatformConfig, stack: str | None, aws_region: Any
) -> Iterator[ConfigProblem]:
    """The platform config against the rest of the stack: its name and the AWS provider's key."""
    if stack is not None and config.environment != stack:
        yield ConfigProblem(
            f"{CONFIG_KEY}.environment",
            config.environment,
            f"the stack's name, {stack}: the environment names the cluster (training-<env>), "
            "tags every resource and picks the policy config, so a stack copied from another "
            f"must say its own name (stacks/Pulumi.{stack}.yaml; "
            "docs/how-to/add-an-environment.md)",
        )
    if aws_region is not None and aws_region != config.region:
        yield ConfigProblem(
            "aws:region",
            aws_region,
            f"the region of platform.region, {config.region}: the program deploys there, and "
            "the AWS provider's default region must not point elsewhere",
        )


def _cross_field_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    yield from network_problems(config)
    yield from cluster_problems(config.cluster)
    yield from ui_exposure_problems(config)
    yield from tag_problems(config.tags)
    yield from node_pool_problems(config)
    yield from acceptance_problems(config)
    yield from storage_problems(config)
    yield from model_store_problems(config)
    yield from team_problems(config)
    yield from slurm_problems(config)
    yield from software_problems(config)
    yield from katib_problems(config)
    yield from ray_cluster_problems(config)
    yield from notebooks_problems(config)
    yield from observability_problems(config)
