"""TrainingPlatform: the composition of every component of one stack, and the program entry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from pulumi.runtime.config import is_config_secret

from components import acceptance_gate
from components.acceptance_gate import AcceptanceGate, FileSystemMount
from components.checkpoints import checkpoint_location
from components.cluster import Cluster
from components.config import (
    CONFIG_KEY,
    OIDC_CLIENT_SECRET_KEY,
    ConfigError,
    NodePoolConfig,
    PlatformConfig,
    oidc_client_secret_problems,
    parse_platform_config,
    slurm_held_nodes,
)
from components.config.pools import mounts_lustre
from components.config.slurm import BIND_PASSWORD_KEY, bind_password_problems
from components.config.storage import admin_client_block
from components.device_plugins import DevicePlugins, neuron_pools
from components.fabric_test import FabricTest, platform_queue_capability, tested_pools
from components.first_step import PROMETHEUS_INGRESS as PROMETHEUS_FIRST_STEP_INGRESS
from components.iam import customer_key, logs_key_policy
from components.karpenter import Karpenter
from components.katib import CONTROLLER_INGRESS as KATIB_CONTROLLER_INGRESS
from components.katib import Katib
from components.kuberay import NAMESPACE as KUBERAY_NAMESPACE
from components.kuberay import OPERATOR_INGRESS as KUBERAY_OPERATOR_INGRESS
from components.kuberay import (
    KubeRay,
    StandingCluster,
    ray_cluster,
    ray_image,
    standing_quota_problems,
)
from components.metric_names import MONITORING_NAMESPACE, NODE_EXPORTERS_NAMESPACE
from components.network import Network
from components.node_pools import NodePools
from components.notebooks import HUB_INGRESS as NOTEBOOK_HUB_INGRESS
from components.notebooks import (
    NAMESPACE as NOTEBOOKS_NAMESPACE,
)
from components.notebooks import PROXY_INGRESS as NOTEBOOK_PROXY_INGRESS
from components.notebooks import (
    JupyterHub,
    hub_values,
    pool_profiles,
    team_groups,
    team_profile_list,
)
from components.observability.dashboards import platform_dashboards
from components.observability.ledger import kube_state_metrics_values
from components.observability.stack import Observability
from components.platform_network import PlatformNetwork, kube_system_fences
from components.scheduling import NAMESPACE as SCHEDULING_NAMESPACE
from components.scheduling import Scheduling
from components.slurm import NAMESPACE as SLURM_NAMESPACE
from components.slurm import Slurm, create_namespace
from components.slurm.autoscaling import KEDA_NAMESPACE
from components.slurm.common import (
    CERT_MANAGER_NAMESPACE,
    MARIADB_OPERATOR_NAMESPACE,
    OPERATOR_NAMESPACE,
)
from components.storage import Storage
from components.storage.layout import layout_problems, team_directories
from components.storage.volumes import CLAIM_NAME as LUSTRE_CLAIM
from components.teams import Teams
from components.tenancy import ControllerIngress
from components.tenant_api import GangLimits, gang_limits
from components.trainer import (
    JOBSET_NAMESPACE,
    RUNTIME_NUM_NODES,
    Trainer,
    runtime_name,
    team_runtimes,
)
from components.trainer import NAMESPACE as TRAINER_NAMESPACE

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
        self.network = build_network(config, logs_key_arn=self.logs_key.arn, opts=with_aws)
        self.cluster = build_cluster(
            config,
            vpc_id=self.network.vpc_id,
            private_subnet_ids=self.network.private_subnet_ids,
            logs_key_arn=self.logs_key.arn,
            deploy_path=self.network.deploy_path,
            opts=with_aws,
        )
        in_cluster = InCluster(
            ready=self.cluster.ready,
            provider=self.cluster.kubernetes_provider,
            adopting_provider=self.cluster.adopting_kubernetes_provider,
        )
        self.karpenter = build_karpenter(config, cluster=in_cluster, opts=with_aws)
        self.teams = build_teams(
            config, cluster_name=self.cluster.name, cluster=in_cluster, opts=with_aws
        )
        self.scheduling = build_scheduling(config, cluster=in_cluster, opts=with_aws)
        slurm_namespace = (
            create_namespace(
                cluster_ready=in_cluster.ready,
                kubernetes_provider=in_cluster.provider,
                parent=self,
                protect=config.protect_stateful_resources,
            )
            if config.slurm.enabled
            else None
        )
        gate_namespace = (
            acceptance_gate.create_namespace(
                cluster_ready=in_cluster.ready,
                kubernetes_provider=in_cluster.provider,
                parent=self,
            )
            if gated(config)
            else None
        )
        self.storage = build_storage(
            config,
            vpc_id=self.network.vpc_id,
            private_subnet_ids=self.network.private_subnet_ids,
            logs_key_arn=self.logs_key.arn,
            slurm_namespace=slurm_namespace,
            acceptance_namespace=gate_namespace,
            team_namespaces=dict(self.teams.namespaces),
            node_security_group_id=self.cluster.node_security_group_id,
            cluster=in_cluster,
            opts=with_aws,
        )
        self.node_pools = build_node_pools(
            config,
            vpc_id=self.network.vpc_id,
            private_subnet_ids=self.network.private_subnet_ids,
            node_role_name=self.karpenter.node_role_name,
            lustre_client_group_id=self.storage.client_security_group_id,
            karpenter_ready=self.karpenter.ready,
            cluster=in_cluster,
            opts=with_aws,
        )
        self.trainer = build_trainer(
            config,
            team_namespaces=dict(self.teams.namespaces),
            volcano_ready=self.scheduling.ready,
            cluster=in_cluster,
            opts=with_aws,
        )
        self.fabric_test = build_fabric_test(
            config, trainer=self.trainer, cluster=in_cluster, opts=with_aws
        )
        self.katib: Katib | None = None
        if config.katib.enabled:
            self.katib = build_katib(
                config, trainer=self.trainer, cluster=in_cluster, opts=with_aws
            )
        self.device_plugins = build_device_plugins(config, cluster=in_cluster, opts=with_aws)
        self.acceptance_gate: AcceptanceGate | None = None
        if gate_namespace is not None:
            self.acceptance_gate = build_acceptance_gate(
                config,
                namespace=gate_namespace,
                claims=self.storage.claims.get(acceptance_gate.NAMESPACE, []),
                cluster=in_cluster,
                opts=with_aws,
            )
        self.kuberay: KubeRay | None = (
            KubeRay(
                "kuberay",
                protect=config.protect_stateful_resources,
                volcano_ready=self.scheduling.ready,
                kubernetes_provider=in_cluster.provider,
                clusters=standing_ray_clusters(
                    config,
                    team_ready={
                        team.name: [
                            self.teams.namespaces[team.name],
                            *self.storage.claims.get(team.name, []),
                        ]
                        for team in config.teams
                    },
                ),
                opts=with_aws,
            )
            if config.ray.enabled
            else None
        )
        self.notebooks: JupyterHub | None = None
        if config.notebooks.enabled:
            # Notebooks need the model store, so the stack has its data key.
            assert self.storage.data_key_arn is not None
            self.notebooks = build_notebooks(
                config,
                data_key_arn=self.storage.data_key_arn,
                ebs_csi_role_name=self.cluster.ebs_csi_role_name,
                team_ready={
                    team.name: [
                        self.teams.namespaces[team.name],
                        *self.storage.claims.get(team.name, []),
                    ]
                    for team in config.teams
                },
                cluster=in_cluster,
                opts=with_aws,
            )
        self.observability = build_observability(
            config,
            data_key_arn=self.storage.data_key_arn,
            lustre_file_system_id=self.storage.file_system_id,
            ebs_csi_role_name=self.cluster.ebs_csi_role_name,
            cluster=in_cluster,
            opts=with_aws,
        )
        self.slurm: Slurm | None = None
        if slurm_namespace is not None:
            self.slurm = build_slurm(
                config,
                namespace=slurm_namespace,
                workloads_ready=[
                    *self.storage.claims.get(SLURM_NAMESPACE, []),
                    *self.scheduling.priority_classes,
                ],
                monitoring_ready=self.observability.ready,
                cluster=in_cluster,
                opts=with_aws,
            )
        self.platform_network = build_platform_network(
            config,
            creators={
                "scheduling": [self.scheduling],
                "trainer": [self.trainer],
                "slurm": [self.slurm] if self.slurm is not None else [],
                "ray": [self.kuberay] if self.kuberay is not None else [],
                "notebooks": [self.notebooks] if self.notebooks is not None else [],
                "observability": [self.observability],
                "acceptance": (
                    [gate_namespace, self.acceptance_gate]
                    if gate_namespace is not None and self.acceptance_gate is not None
                    else []
                ),
            },
            cluster=in_cluster,
            opts=with_aws,
        )
        self.register_outputs({})


@dataclass(frozen=True)
class InCluster:
    """What every in-cluster component gets from the cluster.

    Args:
        ready: what in-cluster resources wait for (the cluster, its system nodes, add-ons).
        provider: the Kubernetes provider of in-cluster resources.
        adopting_provider: the provider that adopts objects that already exist (Trainer's CRDs).
    """

    ready: list[pulumi.Resource]
    provider: k8s.Provider
    adopting_provider: k8s.Provider


# One builder per component: what the stack's config says, plus what other components hand it.
# TrainingPlatform calls them in order; a component test calls one with stand-ins for the rest
# (tests/component_runs.py), so the wiring is written once.


def build_network(
    config: PlatformConfig, *, logs_key_arn: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> Network:
    """The VPC, subnets, NAT, endpoints, flow logs and the deploy path.

    Args:
        config: the validated stack configuration.
        logs_key_arn: the platform's customer key for log groups.
        opts: the platform's options for its components (parent, AWS provider).
    """
    admin_block = admin_client_block(config)
    return Network(
        "network",
        network=config.network,
        region=config.region,
        account_id=config.account_id,
        cluster_name=config.name,
        deploy_path=config.cluster.endpoint.deploy_from,
        logs_key_arn=logs_key_arn,
        reserved_blocks=(
            {config.network.training_zone: str(admin_block)} if admin_block is not None else None
        ),
        opts=opts,
    )


def availability_zones(config: PlatformConfig) -> list[str]:
    """The stack's zones by name.

    Subnet sets are unordered upstream and zones mean nothing in order to Karpenter, so a
    reordered list is no diff.

    Args:
        config: the validated stack configuration.
    """
    return sorted(config.network.availability_zones)


def build_cluster(
    config: PlatformConfig,
    *,
    vpc_id: pulumi.Input[str],
    private_subnet_ids: Mapping[str, pulumi.Input[str]],
    logs_key_arn: pulumi.Input[str],
    deploy_path: Sequence[pulumi.Resource],
    opts: pulumi.ResourceOptions,
) -> Cluster:
    """The EKS cluster, its system node group, add-ons and access entries.

    Args:
        config: the validated stack configuration.
        vpc_id: the network's VPC.
        private_subnet_ids: zone -> the network's private subnet there; the cluster gets
            those of ``network.clusterZones`` (default: every zone).
        logs_key_arn: the platform's customer key for log groups.
        deploy_path: what the deploy path is made of (the cluster's resources wait for it).
        opts: the platform's options for its components.
    """
    return Cluster(
        config.name,
        cluster=config.cluster,
        vpc_id=vpc_id,
        # The cluster stays on the zones it was created in (network.clusterZones): EKS
        # refuses subnets of other zones on update, and the system group's are ForceNew.
        private_subnet_ids=[
            private_subnet_ids[zone] for zone in config.network.control_plane_zones()
        ],
        tags=config.required_tags,
        volume_tags=stack_tags(config),
        protect=config.protect_stateful_resources,
        logs_key_arn=logs_key_arn,
        account_id=config.account_id,
        region=config.region,
        deploy_path=deploy_path,
        opts=opts,
    )


def build_karpenter(
    config: PlatformConfig, *, cluster: InCluster, opts: pulumi.ResourceOptions
) -> Karpenter:
    """Karpenter's roles, interruption queue and controller.

    Args:
        config: the validated stack configuration.
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
    """
    return Karpenter(
        "karpenter",
        cluster_name=config.name,
        region=config.region,
        account_id=config.account_id,
        cluster_ready=cluster.ready,
        kubernetes_provider=cluster.provider,
        node_overlays=any(pool.hugepages for pool in config.node_pools),
        opts=opts,
    )


def build_teams(
    config: PlatformConfig,
    *,
    cluster_name: pulumi.Input[str],
    cluster: InCluster,
    opts: pulumi.ResourceOptions,
) -> Teams:
    """The team namespaces, their roles, quotas and access entries.

    Args:
        config: the validated stack configuration.
        cluster_name: the EKS cluster's name (its access entries name it).
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
    """
    return Teams(
        "teams",
        teams=config.teams,
        pools=config.node_pools,
        cluster_name=cluster_name,
        kubernetes_version=config.cluster.kubernetes_version,
        kubernetes_provider=cluster.provider,
        cluster_ready=cluster.ready,
        gang_limits=stack_gang_limits(config),
        katib=config.katib.enabled,
        controllers=team_controllers(config),
        opts=opts,
    )


def team_controllers(config: PlatformConfig) -> dict[str, list[ControllerIngress]]:
    """Team -> the controllers of the stack that connect to pods in its namespace.

    The KubeRay operator where Ray is on, Katib's controller where Katib is and the team
    searches (``teams[].katib.enabled``), JupyterHub's proxy and hub where notebooks are on
    (to the servers' port), and Prometheus to the first-step exporters of training pods
    (:data:`components.first_step.PROMETHEUS_INGRESS`); each gets a NetworkPolicy
    in the team's namespace
    (:func:`components.tenancy.team_network_policies`).

    Args:
        config: the validated stack configuration.
    """
    return {
        team.name: [
            *([KUBERAY_OPERATOR_INGRESS] if config.ray.enabled else []),
            *([KATIB_CONTROLLER_INGRESS] if config.katib.enabled and team.katib.enabled else []),
            *([NOTEBOOK_PROXY_INGRESS, NOTEBOOK_HUB_INGRESS] if config.notebooks.enabled else []),
            # every stack runs Prometheus; it scrapes training pods' first step
            PROMETHEUS_FIRST_STEP_INGRESS,
        ]
        for team in config.teams
    }


def stack_gang_limits(config: PlatformConfig) -> GangLimits:
    """The pools' node limits and every team runtime's pool, for the gang size policy.

    Args:
        config: the validated stack configuration.
    """
    runtimes = (
        {
            runtime_name(framework, pool): pool.name
            for team in config.teams
            for pool, framework in team_runtimes(team, config.node_pools)
        }
        if config.trainer.enabled
        else {}
    )
    return gang_limits(
        config.node_pools,
        slurm_nodes=slurm_held_nodes(config),
        runtime_pools=runtimes,
        runtime_nodes=dict.fromkeys(runtimes, RUNTIME_NUM_NODES),
        team_runtimes={
            team.name: (
                team,
                {
                    runtime_name(framework, pool): pool.name
                    for pool, framework in team_runtimes(team, config.node_pools)
                },
            )
            for team in config.teams
        }
        if config.trainer.enabled
        else {},
        teams=config.teams if config.ray.enabled else (),
    )


def build_scheduling(
    config: PlatformConfig, *, cluster: InCluster, opts: pulumi.ResourceOptions
) -> Scheduling:
    """Volcano, the team queues and the priority classes.

    Args:
        config: the validated stack configuration.
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
    """
    return Scheduling(
        "scheduling",
        teams=config.teams,
        cluster_ready=cluster.ready,
        kubernetes_provider=cluster.provider,
        platform_capability=platform_queue_capability(
            [pool for pool, _ in fabric_test_pools(config)]
        ),
        opts=opts,
    )


def fabric_test_pools(config: PlatformConfig) -> list[tuple[NodePoolConfig, str]]:
    """(pool, image) of the pools with a fabric test; none without Trainer, which runs it.

    Args:
        config: the validated stack configuration.
    """
    if not config.trainer.enabled:
        return []
    return tested_pools(config.node_pools, config.acceptance, slurm_nodes=slurm_held_nodes(config))


def build_fabric_test(
    config: PlatformConfig,
    *,
    trainer: Trainer,
    cluster: InCluster,
    opts: pulumi.ResourceOptions,
) -> FabricTest:
    """The fabric test's namespace and runtimes (:mod:`components.fabric_test`).

    Args:
        config: the validated stack configuration.
        trainer: Trainer, whose CRDs the runtimes are.
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
    """
    return FabricTest(
        "fabric-test",
        tested=fabric_test_pools(config),
        kubernetes_version=config.cluster.kubernetes_version,
        trainer_ready=[trainer],
        kubernetes_provider=cluster.provider,
        opts=opts,
    )


def build_storage(
    config: PlatformConfig,
    *,
    vpc_id: pulumi.Input[str],
    private_subnet_ids: Mapping[str, pulumi.Input[str]],
    logs_key_arn: pulumi.Input[str],
    slurm_namespace: pulumi.Resource | None,
    team_namespaces: dict[str, pulumi.Resource],
    node_security_group_id: pulumi.Input[str],
    cluster: InCluster,
    opts: pulumi.ResourceOptions,
    acceptance_namespace: pulumi.Resource | None = None,
) -> Storage:
    """Buckets, keys, the file system, its associations and the claims that mount it.

    Args:
        config: the validated stack configuration.
        vpc_id: the network's VPC.
        private_subnet_ids: zone -> the network's private subnet there (the training zone's
            holds the file system).
        logs_key_arn: the platform's customer key for log groups.
        slurm_namespace: Slurm's namespace, which mounts the whole file system; None without
            Slurm.
        team_namespaces: team name -> its namespace.
        node_security_group_id: the nodes' security group (the EKS cluster group), the model
            store's only NFS clients.
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
        acceptance_namespace: the acceptance gate's namespace, whose check pods mount the
            file system read-only to prove a node mounts it; None without the gate. Default
            None.
    """
    checking = (
        {acceptance_gate.NAMESPACE: acceptance_namespace}
        if acceptance_namespace is not None and lustre_pools(config)
        else {}
    )
    return Storage(
        "storage",
        config=config,
        vpc_id=vpc_id,
        training_subnet_id=private_subnet_ids[config.network.training_zone],
        logs_key_arn=logs_key_arn,
        cluster_ready=cluster.ready,
        kubernetes_provider=cluster.provider,
        mounting_namespaces=(
            {SLURM_NAMESPACE: slurm_namespace} if slurm_namespace is not None else {}
        ),
        lustre_check_namespaces=checking,
        team_namespaces=team_namespaces,
        private_subnet_ids=private_subnet_ids,
        node_security_group_id=node_security_group_id,
        opts=opts,
    )


def lustre_pools(config: PlatformConfig) -> set[str]:
    """The pools whose nodes mount the file system.

    Args:
        config: the validated stack configuration.
    """
    return {pool.name for pool in config.node_pools if mounts_lustre(config, pool)}


def build_node_pools(
    config: PlatformConfig,
    *,
    vpc_id: pulumi.Input[str],
    private_subnet_ids: Mapping[str, pulumi.Input[str]],
    node_role_name: pulumi.Input[str],
    lustre_client_group_id: pulumi.Input[str] | None,
    karpenter_ready: list[pulumi.Resource],
    cluster: InCluster,
    opts: pulumi.ResourceOptions,
) -> NodePools:
    """Karpenter's node classes and pools, their placement groups and EFA interfaces.

    Args:
        config: the validated stack configuration.
        vpc_id: the network's VPC.
        private_subnet_ids: zone -> the network's private subnet there.
        node_role_name: the nodes' IAM role (Karpenter's).
        lustre_client_group_id: the security group of Lustre clients; None without a file
            system.
        karpenter_ready: what node pools wait for (Karpenter's CRDs and controller).
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
    """
    return NodePools(
        "pools",
        cluster_name=config.name,
        pools=config.node_pools,
        general=config.general_pool,
        zones=availability_zones(config),
        training_zone=config.network.training_zone,
        vpc_id=vpc_id,
        private_subnet_ids=dict(private_subnet_ids),
        node_role_name=node_role_name,
        tags=config.required_tags,
        lustre_client_group_id=lustre_client_group_id,
        lustre_pools=lustre_pools(config),
        slurm_nodes=slurm_held_nodes(config),
        acceptance=config.acceptance.enabled,
        karpenter_ready=karpenter_ready,
        kubernetes_provider=cluster.provider,
        opts=opts,
    )


def build_trainer(
    config: PlatformConfig,
    *,
    team_namespaces: dict[str, pulumi.Resource],
    volcano_ready: list[pulumi.Resource],
    cluster: InCluster,
    opts: pulumi.ResourceOptions,
) -> Trainer:
    """Kubeflow Trainer, JobSet, the legacy operator and the team runtimes.

    Args:
        config: the validated stack configuration.
        team_namespaces: team name -> its namespace.
        volcano_ready: what Trainer waits for (Volcano, whose PodGroups it creates).
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
    """
    return Trainer(
        "trainer",
        trainer=config.trainer,
        pools=config.node_pools,
        lustre_pools=lustre_pools(config),
        teams=config.teams,
        team_namespaces=team_namespaces,
        checkpoints=checkpoint_location(config),
        lustre=config.storage.lustre,
        protect=config.protect_stateful_resources,
        volcano_ready=volcano_ready,
        model_store=config.model_store.enabled,
        model_publishers=frozenset(config.model_store.publishers),
        kubernetes_provider=cluster.provider,
        adopting_kubernetes_provider=cluster.adopting_provider,
        opts=opts,
    )


def standing_ray_clusters(
    config: PlatformConfig, *, team_ready: dict[str, list[pulumi.Resource]]
) -> list[StandingCluster]:
    """The teams' standing RayClusters (``teams[].ray.clusters``), built as a RayJob's cluster.

    Each mounts the team's directories where the team has the shared file system and the pool
    mounts it, as the team's Trainer runtimes on that pool do.

    Args:
        config: the validated stack configuration (it has checked each cluster's pool,
            workers and the team's share).
        team_ready: team name -> its namespace and the claims its pods mount.
    """
    lustre = config.storage.lustre
    mounting = lustre_pools(config)
    models = config.model_store.enabled
    made: list[StandingCluster] = []
    for team in config.teams:
        for cluster in team.ray.clusters:
            pool = config.pool(cluster.pool)
            if pool is None:
                continue  # config refused it
            mounted = lustre is not None and team.shared_file_system and pool.name in mounting
            body = ray_cluster(
                cluster.name, pool, team=team.name,
                image=ray_image(config.ray.images, pool), workers=cluster.workers,
                checkpoints=checkpoint_location(config) if mounted else None,
                directories=team_directories(lustre, team) if lustre and mounted else None,
                group_id=team.gid if lustre is not None or models else None,
                models=models, publishes_models=team.name in config.model_store.publishers,
            )  # fmt: skip
            made.append(StandingCluster(body=body, after=team_ready.get(team.name, [])))
    return made


def build_katib(
    config: PlatformConfig,
    *,
    trainer: pulumi.Resource,
    cluster: InCluster,
    opts: pulumi.ResourceOptions,
) -> Katib:
    """Katib, its trials TrainJobs (:mod:`components.katib`).

    Args:
        config: the validated stack configuration (Katib enabled, so Trainer too).
        trainer: Trainer and the legacy operator, whose CRDs the controller needs at start.
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
    """
    return Katib(
        "katib",
        katib=config.katib,
        legacy_training_operator=config.trainer.legacy_training_operator,
        ui_exposure=config.cluster.ui_exposure,
        kubernetes_version=config.cluster.kubernetes_version,
        protect=config.protect_stateful_resources,
        volume_tags=stack_tags(config),
        trainer=trainer,
        cluster_ready=cluster.ready,
        kubernetes_provider=cluster.provider,
        opts=opts,
    )


def notebook_values(config: PlatformConfig) -> dict[str, Any]:
    """The jupyterhub chart's values of the stack: every team's profiles on every pool.

    A profile mounts the team's Lustre directories where its pool mounts the file system (the
    CPU profile then runs on ``general-lustre``), as the team's runtimes there do.

    Args:
        config: the validated stack configuration (notebooks enabled).
    """
    lustre = config.storage.lustre
    mounting = lustre_pools(config)
    profiles: dict[str, list[dict[str, Any]]] = {}
    for team in config.teams:
        shared = lustre is not None and team.shared_file_system
        directories = team_directories(lustre, team) if lustre is not None and shared else []
        by_pool = {"": directories} | {
            pool.name: directories if pool.name in mounting else [] for pool in config.node_pools
        }
        profiles[team.name] = team_profile_list(
            team,
            pool_profiles(config.node_pools, config.notebooks, team),
            directories=by_pool,
            job_service_account=config.notebooks.job_service_account,
        )
    return hub_values(config.notebooks, config.oidc, config.teams, profiles)


def build_notebooks(
    config: PlatformConfig,
    *,
    data_key_arn: pulumi.Input[str],
    ebs_csi_role_name: pulumi.Input[str],
    team_ready: dict[str, list[pulumi.Resource]],
    cluster: InCluster,
    opts: pulumi.ResourceOptions,
) -> JupyterHub:
    """JupyterHub (:mod:`components.notebooks`).

    Args:
        config: the validated stack configuration (notebooks enabled).
        data_key_arn: the stack's data key (the hub database's volume).
        ebs_csi_role_name: the EBS CSI driver's role, allowed that key's use.
        team_ready: team -> its namespace and the claims its servers mount.
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
    """
    secret = (
        pulumi.Config().get_secret(OIDC_CLIENT_SECRET_KEY)
        if config.notebooks.authenticator == "oidc"
        else None
    )
    return JupyterHub(
        "notebooks",
        values=notebook_values(config),
        # A team without groups has no member who could log in: no Role for the hub there.
        teams=[team.name for team in config.teams if team_groups(team)],
        exposure=config.cluster.ui_exposure,
        kubernetes_version=config.cluster.kubernetes_version,
        client_secret=secret,
        protect=config.protect_stateful_resources,
        volume_tags=stack_tags(config),
        database_key_arn=data_key_arn,
        ebs_csi_role_name=ebs_csi_role_name,
        team_ready=team_ready,
        cluster_ready=cluster.ready,
        kubernetes_provider=cluster.provider,
        opts=opts,
    )


def gated(config: PlatformConfig) -> bool:
    """Whether the stack runs the acceptance gate: enabled, with an accelerator pool.

    Args:
        config: the validated stack configuration.
    """
    return config.acceptance.enabled and bool(config.node_pools)


LUSTRE_CHECK_MOUNT: Final = "/mnt/lustre"
"""Where a check pod mounts the file system (read-only) to prove its node can."""


def acceptance_mounts(config: PlatformConfig) -> dict[str, list[FileSystemMount]]:
    """Pool name -> the file systems its nodes must mount: Lustre where the pool mounts it.

    The model store (EFS) is not checked: it is mounted over NFS per pod, by no node client
    that a node could lack.

    Args:
        config: the validated stack configuration.
    """
    return {
        name: [FileSystemMount("lustre", LUSTRE_CLAIM, LUSTRE_CHECK_MOUNT, "lustre")]
        for name in sorted(lustre_pools(config))
    }


def build_acceptance_gate(
    config: PlatformConfig,
    *,
    namespace: k8s.core.v1.Namespace,
    claims: Sequence[pulumi.Resource],
    cluster: InCluster,
    opts: pulumi.ResourceOptions,
) -> AcceptanceGate:
    """The acceptance agents, their rights, settings and node policy (:mod:`acceptance_gate`).

    Args:
        config: the validated stack configuration (the gate on, an accelerator pool).
        namespace: the gate's namespace.
        claims: the file-system claims in it (its check pods mount them).
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
    """
    return AcceptanceGate(
        "acceptance",
        acceptance=config.acceptance,
        pools=config.node_pools,
        slurm_pools=sorted(slurm_held_nodes(config)),
        namespace=namespace,
        mounts=acceptance_mounts(config),
        claims=claims,
        cluster_ready=cluster.ready,
        kubernetes_provider=cluster.provider,
        opts=opts,
    )


def build_device_plugins(
    config: PlatformConfig, *, cluster: InCluster, opts: pulumi.ResourceOptions
) -> DevicePlugins:
    """The NVIDIA, EFA and Neuron device plugins the pools need.

    Args:
        config: the validated stack configuration.
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
    """
    return DevicePlugins(
        "device-plugins",
        pools=config.node_pools,
        region=config.region,
        kubernetes_version=config.cluster.kubernetes_version,
        slurm_pools=sorted(slurm_held_nodes(config)),
        cluster_ready=cluster.ready,
        kubernetes_provider=cluster.provider,
        opts=opts,
    )


def build_observability(
    config: PlatformConfig,
    *,
    data_key_arn: pulumi.Input[str] | None,
    ebs_csi_role_name: pulumi.Input[str],
    cluster: InCluster,
    opts: pulumi.ResourceOptions,
    lustre_file_system_id: pulumi.Input[str] | None = None,
) -> Observability:
    """The metrics stack, Grafana and remote write (:mod:`components.observability`).

    Args:
        config: the validated stack configuration.
        data_key_arn: the stack's data key (volumes, AMP workspace); None without one.
        ebs_csi_role_name: the EBS CSI driver's role, allowed that key's use.
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
        lustre_file_system_id: the stack's Lustre file system, for its CloudWatch alarms;
            None where it has none (default).

    The dashboards (:func:`components.observability.dashboards.platform_dashboards`) and the
    cold-start ledger's kube-state-metrics values come from the config.
    """
    secret = (
        pulumi.Config().get_secret(OIDC_CLIENT_SECRET_KEY)
        if config.oidc.client_id is not None and config.observability.grafana.enabled
        else None
    )
    return Observability(
        "observability",
        config=config,
        dashboards=[
            (dashboard.uid, dashboard.folder, dashboard.json())
            for dashboard in platform_dashboards(config)
        ],
        extra_kube_state_metrics_values=kube_state_metrics_values(),
        lustre_file_system_id=lustre_file_system_id,
        client_secret=secret,
        data_key_arn=data_key_arn,
        ebs_csi_role_name=ebs_csi_role_name,
        volume_tags=stack_tags(config),
        cluster_ready=cluster.ready,
        kubernetes_provider=cluster.provider,
        adopting_kubernetes_provider=cluster.adopting_provider,
        opts=opts,
    )


def build_slurm(
    config: PlatformConfig,
    *,
    namespace: k8s.core.v1.Namespace,
    workloads_ready: list[pulumi.Resource],
    cluster: InCluster,
    opts: pulumi.ResourceOptions,
    monitoring_ready: Sequence[pulumi.Resource] = (),
) -> Slurm:
    """Slurm: cert-manager, Slinky, accounting, the Slurm cluster and its node sets.

    Args:
        config: the validated stack configuration (Slurm enabled).
        namespace: Slurm's namespace (:func:`components.slurm.create_namespace`).
        workloads_ready: what slurmd and login pods need first (Slurm's Lustre claims, the
            priority classes).
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
        monitoring_ready: the metrics stack's release, which KEDA waits for. Default: none.
    """
    return Slurm(
        "slurm",
        config=config,
        namespace=namespace,
        volume_tags=stack_tags(config),
        cluster_ready=cluster.ready,
        workloads_ready=workloads_ready,
        monitoring_ready=monitoring_ready,
        kubernetes_provider=cluster.provider,
        bind_password=pulumi.Config().get_secret(BIND_PASSWORD_KEY),
        opts=opts,
    )


def platform_namespaces(config: PlatformConfig) -> dict[str, str]:
    """The platform namespaces a stack's releases create, each with the component that does.

    Args:
        config: the validated stack configuration.

    Returns:
        namespace -> ``scheduling``, ``trainer``, ``slurm``, ``ray``, ``notebooks``,
        ``acceptance`` or ``observability``.
    """
    namespaces = {
        SCHEDULING_NAMESPACE: "scheduling",
        MONITORING_NAMESPACE: "observability",
        NODE_EXPORTERS_NAMESPACE: "observability",
    }
    if config.trainer.enabled:
        # Without Trainer its namespaces do not exist: a policy there could not be applied.
        namespaces |= {TRAINER_NAMESPACE: "trainer", JOBSET_NAMESPACE: "trainer"}
    if config.ray.enabled:
        namespaces[KUBERAY_NAMESPACE] = "ray"
    if config.notebooks.enabled:
        namespaces[NOTEBOOKS_NAMESPACE] = "notebooks"
    if gated(config):
        namespaces[acceptance_gate.NAMESPACE] = "acceptance"
    if config.slurm.enabled:
        for namespace in (
            CERT_MANAGER_NAMESPACE, OPERATOR_NAMESPACE, KEDA_NAMESPACE
        ):  # fmt: skip
            namespaces[namespace] = "slurm"
        if config.slurm.accounting.enabled:
            namespaces[MARIADB_OPERATOR_NAMESPACE] = "slurm"
    return namespaces


def build_platform_network(
    config: PlatformConfig,
    *,
    creators: dict[str, list[pulumi.Resource]],
    cluster: InCluster,
    opts: pulumi.ResourceOptions,
) -> PlatformNetwork:
    """The platform namespaces' NetworkPolicies (:mod:`components.platform_network`).

    Args:
        config: the validated stack configuration.
        creators: component name (as :func:`platform_namespaces` gives it) -> the components
            whose releases create its namespaces; the policies wait for them.
        cluster: what the cluster hands in-cluster components.
        opts: the platform's options for its components.
    """
    return PlatformNetwork(
        "platform-network",
        namespaces={
            namespace: creators[component]
            for namespace, component in platform_namespaces(config).items()
        },
        vpc_cidr=config.network.vpc_cidr,
        fences=kube_system_fences(neuron_scheduler=bool(neuron_pools(config.node_pools))),
        kubernetes_provider=cluster.provider,
        opts=opts,
    )


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
    return parse_platform_config(
        raw,
        stack=stack,
        aws_region=aws_region,
        checks=[layout_problems, standing_quota_problems],
    )


INVALID_CONFIG: Final = "invalid stack configuration:\n"
"""The first line of the run error :func:`load_config` raises; one problem a line follows."""


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
        ) + oidc_client_secret_problems(
            config,
            present=stack_config.get_secret(OIDC_CLIENT_SECRET_KEY) is not None,
            secret=is_config_secret(stack_config.full_key(OIDC_CLIENT_SECRET_KEY)),
        )
        if problems:
            raise ConfigError(problems)
        return config
    except ConfigError as exc:
        raise pulumi.RunError(f"{INVALID_CONFIG}{exc}") from None


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
