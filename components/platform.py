"""TrainingPlatform: the composition of every component of one stack, and the program entry."""

from __future__ import annotations

from typing import Any, Final

import pulumi
import pulumi_aws as aws
from pulumi.runtime.config import is_config_secret

from components.checkpoints import checkpoint_location
from components.cluster import Cluster
from components.config import (
    CONFIG_KEY,
    ConfigError,
    PlatformConfig,
    parse_platform_config,
    slurm_held_nodes,
)
from components.config.pools import mounts_lustre
from components.config.slurm import BIND_PASSWORD_KEY, bind_password_problems
from components.config.storage import admin_client_block
from components.device_plugins import DevicePlugins
from components.iam import customer_key, logs_key_policy
from components.karpenter import Karpenter
from components.network import Network
from components.node_pools import NodePools
from components.scheduling import Scheduling
from components.slurm import NAMESPACE as SLURM_NAMESPACE
from components.slurm import Slurm, create_namespace
from components.storage import Storage
from components.storage.layout import layout_problems
from components.teams import Teams
from components.trainer import Trainer

MANAGED_BY_TAG: Final = {"managed-by": "pulumi"}
"""Added to the required tags on every AWS resource of the stack."""


def stack_tags(config: PlatformConfig) -> dict[str, str]:
    """The tags of every AWS resource, the EBS volumes of the CSI driver included.

    They are the AWS provider's default tags, and what the StorageClasses tell the EBS CSI
    driver to write on the volumes it creates (no provider default reaches those).

    Args:
        config: the validated stack configuration (its required tags).
    """
    return {**config.required_tags, **MANAGED_BY_TAG}


class TrainingPlatform(pulumi.ComponentResource):
    """Everything one stack deploys, wired from one validated :class:`PlatformConfig`.

    Attributes ``aws_provider``, ``network`` and ``cluster`` give later components (and tests)
    the pieces to wire to; ``cluster.kubernetes_provider`` is the provider of every in-cluster
    resource.
    """

    def __init__(
        self, name: str, config: PlatformConfig, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        """Build the platform.

        Args:
            name: logical name of the platform component (the stack's environment).
            config: the validated stack configuration; nothing here reads Pulumi config.
            opts: resource options of the component.

        """
        super().__init__("trainingplatform:index:TrainingPlatform", name, None, opts)
        # Default tags are applied by the provider, so every AWS resource carries them and
        # policies can see them on the provider.
        self.aws_provider = aws.Provider(
            "aws",
            region=config.region,
            allowed_account_ids=[config.account_id],
            default_tags={"tags": stack_tags(config)},
            opts=pulumi.ResourceOptions(parent=self),
        )
        with_aws = pulumi.ResourceOptions(parent=self, providers={"aws": self.aws_provider})
        # One customer key for every log group of the stack (control plane, flow logs, FSx).
        self.logs_key = customer_key(
            "logs",
            alias=f"{config.name}-logs",
            description=f"Encrypts the CloudWatch log groups of {config.name}",
            protect=config.protect_stateful_resources,
            parent=self,
            policy=logs_key_policy(config.account_id, config.region),
            provider=self.aws_provider,
        )
        self.network = Network(
            "network",
            network=config.network,
            region=config.region,
            account_id=config.account_id,
            cluster_name=config.name,
            deploy_path=config.cluster.endpoint.deploy_from,
            logs_key_arn=self.logs_key.arn,
            reserved_blocks=(
                {config.network.training_zone: str(admin_block)}
                if (admin_block := admin_client_block(config)) is not None
                else None
            ),
            opts=with_aws,
        )
        # By name: subnet sets are unordered upstream and zones mean nothing in order to
        # Karpenter, so a reordered list is no diff.
        zones = sorted(config.network.availability_zones)
        self.cluster = Cluster(
            config.name,
            cluster=config.cluster,
            vpc_id=self.network.vpc_id,
            private_subnet_ids=[self.network.private_subnet_ids[zone] for zone in zones],
            tags=config.required_tags,
            volume_tags=stack_tags(config),
            protect=config.protect_stateful_resources,
            logs_key_arn=self.logs_key.arn,
            account_id=config.account_id,
            deploy_path=self.network.deploy_path,
            opts=with_aws,
        )
        self.karpenter = Karpenter(
            "karpenter",
            cluster_name=config.name,
            region=config.region,
            account_id=config.account_id,
            cluster_ready=self.cluster.ready,
            kubernetes_provider=self.cluster.kubernetes_provider,
            node_overlays=any(pool.hugepages for pool in config.node_pools),
            opts=with_aws,
        )
        self.teams = Teams(
            "teams",
            teams=config.teams,
            cluster_name=self.cluster.name,
            kubernetes_version=config.cluster.kubernetes_version,
            kubernetes_provider=self.cluster.kubernetes_provider,
            cluster_ready=self.cluster.ready,
            opts=with_aws,
        )
        self.scheduling = Scheduling(
            "scheduling",
            teams=config.teams,
            cluster_ready=self.cluster.ready,
            kubernetes_provider=self.cluster.kubernetes_provider,
            opts=with_aws,
        )
        mounting_namespaces: dict[str, pulumi.Resource] = {}
        slurm_namespace = None
        if config.slurm.enabled:
            slurm_namespace = create_namespace(
                cluster_ready=self.cluster.ready,
                kubernetes_provider=self.cluster.kubernetes_provider,
                parent=self,
            )
            mounting_namespaces[SLURM_NAMESPACE] = slurm_namespace
        self.storage = Storage(
            "storage",
            config=config,
            vpc_id=self.network.vpc_id,
            training_subnet_id=self.network.private_subnet_ids[config.network.training_zone],
            logs_key_arn=self.logs_key.arn,
            cluster_ready=self.cluster.ready,
            kubernetes_provider=self.cluster.kubernetes_provider,
            mounting_namespaces=mounting_namespaces,
            team_namespaces=dict(self.teams.namespaces),
            opts=with_aws,
        )
        lustre_pools = {pool.name for pool in config.node_pools if mounts_lustre(config, pool)}
        self.node_pools = NodePools(
            "pools",
            cluster_name=config.name,
            pools=config.node_pools,
            general=config.general_pool,
            zones=zones,
            training_zone=config.network.training_zone,
            vpc_id=self.network.vpc_id,
            private_subnet_ids=dict(self.network.private_subnet_ids),
            node_role_name=self.karpenter.node_role_name,
            tags=config.required_tags,
            lustre_client_group_id=self.storage.client_security_group_id,
            lustre_pools=lustre_pools,
            slurm_nodes=slurm_held_nodes(config),
            karpenter_ready=self.karpenter.ready,
            kubernetes_provider=self.cluster.kubernetes_provider,
            opts=with_aws,
        )
        self.trainer = Trainer(
            "trainer",
            trainer=config.trainer,
            pools=config.node_pools,
            lustre_pools=lustre_pools,
            teams=config.teams,
            team_namespaces=dict(self.teams.namespaces),
            checkpoints=checkpoint_location(config),
            lustre=config.storage.lustre,
            protect=config.protect_stateful_resources,
            volcano_ready=self.scheduling.ready,
            kubernetes_provider=self.cluster.kubernetes_provider,
            adopting_kubernetes_provider=self.cluster.adopting_kubernetes_provider,
            opts=with_aws,
        )
        self.device_plugins = DevicePlugins(
            "device-plugins",
            pools=config.node_pools,
            region=config.region,
            kubernetes_version=config.cluster.kubernetes_version,
            slurm_pools=sorted(slurm_held_nodes(config)),
            cluster_ready=self.cluster.ready,
            kubernetes_provider=self.cluster.kubernetes_provider,
            opts=with_aws,
        )
        self.slurm: Slurm | None = None
        if slurm_namespace is not None:
            self.slurm = Slurm(
                "slurm",
                config=config,
                namespace=slurm_namespace,
                vpc_cidr=config.network.vpc_cidr,
                volume_tags=stack_tags(config),
                cluster_ready=self.cluster.ready,
                workloads_ready=[
                    *self.storage.claims.get(SLURM_NAMESPACE, []),
                    *self.scheduling.priority_classes,
                ],
                kubernetes_provider=self.cluster.kubernetes_provider,
                bind_password=pulumi.Config().get_secret(BIND_PASSWORD_KEY),
                opts=with_aws,
            )
        self.register_outputs({})


def validated_config(
    raw: Any, *, stack: str | None = None, aws_region: Any = None
) -> PlatformConfig:
    """:func:`~components.config.parse_platform_config` with the checks that need components.

    Config validates everything a stack states; a few limits are of what the components build
    from it (the admin client's layout script must fit in EC2's user data), and the components
    build on config, so those are passed in here and run once the model parses, with config's
    own cross-field rules, before anything is registered.

    Args:
        raw: the value of the stack's ``platform`` key.
        stack: the stack's name; when given, ``environment`` must be it. Default: not checked.
        aws_region: the stack's ``aws:region`` value, if it sets one. Default: not set.

    Raises:
        ConfigError: every structural problem, or, when the structure is sound, every
            problem of the cross-field rules and these checks.

    """
    return parse_platform_config(raw, stack=stack, aws_region=aws_region, checks=[layout_problems])


def load_config() -> PlatformConfig:
    """Read and validate the stack's ``platform`` config key against the stack's name and region.

    Raises:
        pulumi.RunError: with one line per problem, so the CLI prints no traceback.

    """
    stack_config = pulumi.Config()
    raw = stack_config.get_object(CONFIG_KEY)
    try:
        config = validated_config(
            raw, stack=pulumi.get_stack(), aws_region=pulumi.Config("aws").get("region")
        )
        problems = bind_password_problems(
            config,
            present=stack_config.get_secret(BIND_PASSWORD_KEY) is not None,
            secret=is_config_secret(stack_config.full_key(BIND_PASSWORD_KEY)),
        )
        if problems:
            raise ConfigError(problems)
        return config
    except ConfigError as exc:
        raise pulumi.RunError(f"invalid stack configuration:\n{exc}") from None


def deploy() -> TrainingPlatform:
    """The Pulumi program: validate config, build the platform, export its outputs.

    The outputs are the architecture page's list (docs/concepts/architecture.md,
    tests/test_outputs.py). No ``oidcIssuer``: nothing uses IRSA, so no OIDC provider is made.
    No ``clusterSecurityGroupId``: pulumi-eks's cluster group is not made, and the API's own
    group holds no node.
    """
    config = load_config()
    platform = TrainingPlatform(config.environment, config)
    cluster = platform.cluster
    pulumi.export("clusterName", cluster.name)
    pulumi.export("endpoint", cluster.endpoint)
    pulumi.export("kubeconfig", cluster.kubeconfig)
    # The group every node sits in (EKS's own cluster group): what another service's rules
    # admit nodes from.
    pulumi.export("nodeSecurityGroupId", cluster.node_security_group_id)
    pulumi.export("vpcId", platform.network.vpc_id)
    pulumi.export("privateSubnetIds", platform.network.private_subnet_ids)
    pulumi.export("trainingZone", config.network.training_zone)
    pulumi.export("buckets", platform.storage.buckets)
    if platform.storage.file_system_id is not None:
        pulumi.export("fileSystemId", platform.storage.file_system_id)
    return platform
