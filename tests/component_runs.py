"""One component under Pulumi mocks, wired as ``TrainingPlatform`` wires it.

A component test that checks what one component registers does not need the whole program: a
:data:`Part` builds that component with the platform's own builder (``build_network`` and the
rest in components/platform.py, which ``TrainingPlatform`` calls too) from the parsed stack
config and a :class:`Wiring` whose stand-ins replace what other components would hand it. The stand-ins are what the mock engine
gives those resources in a whole-program run (:class:`synth.engine.PlatformMocks` derives ids
and ARNs from a resource's type and name), and the component sits under a parent of the
platform's type and the platform's AWS provider, so its URNs, providers and inputs are the
whole program's. tests/test_component_runs.py holds every part to that for every stack.

What a stand-in cannot be is another component's resource: dependencies on them are absent
(``cluster_ready`` and the like are empty lists). A test that follows a dependency into another
component runs the whole program (``run_platform``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from pulumi.runtime.mocks import MockResourceArgs

from components import acceptance_gate
from components.acceptance_gate import AcceptanceGate
from components.cluster import Cluster
from components.config import PlatformConfig
from components.device_plugins import DevicePlugins
from components.karpenter import Karpenter
from components.katib import Katib
from components.network import Network
from components.node_pools import NodePools
from components.observability.stack import Observability
from components.platform import (
    InCluster,
    build_acceptance_gate,
    build_cluster,
    build_device_plugins,
    build_karpenter,
    build_katib,
    build_network,
    build_node_pools,
    build_observability,
    build_scheduling,
    build_slurm,
    build_storage,
    build_teams,
    build_trainer,
    gated,
    load_config,
    stack_tags,
)
from components.scheduling import Scheduling
from components.slurm import Slurm, create_namespace
from components.storage import Storage
from components.teams import Teams
from components.trainer import Trainer
from synth.engine import PlatformMocks

PLATFORM_TYPE: Final = "trainingplatform:index:TrainingPlatform"
STAND_IN_TYPE: Final = "tests:index:StandIn"
"""The type of a stand-in for a resource of another component (a namespace to depend on)."""


class StandIn(pulumi.ComponentResource):
    """A resource to depend on where the platform passes one of another component's."""

    def __init__(self, name: str, parent: pulumi.Resource) -> None:
        super().__init__(STAND_IN_TYPE, name, None, pulumi.ResourceOptions(parent=parent))
        self.register_outputs({})


CLUSTER_TYPE: Final = "eks:index:Cluster"


def mocked_output(config: PlatformConfig, resource_type: str, name: str, output: str = "id") -> Any:
    """The output the mock engine gives resource ``name`` of ``resource_type`` with no inputs.

    Args:
        config: the stack's config (the mocks' region and account).
        resource_type: the resource's type token.
        name: the resource's logical name in the whole program.
        output: which output (``id``, ``arn``, ``name``, ``nodeSecurityGroupId``).
    """
    mocks = PlatformMocks(region=config.region, account_id=config.account_id)
    _, outputs = mocks.new_resource(
        MockResourceArgs(resource_type, name, {}, provider="", resource_id="", custom=True)
    )
    return outputs[output]


def node_security_group_id(config: PlatformConfig) -> str:
    """The group every node carries, as the whole program's mocked cluster gives it.

    Args:
        config: the stack's config; the EKS cluster's logical name is the cluster's name.
    """
    return str(mocked_output(config, CLUSTER_TYPE, config.name, "nodeSecurityGroupId"))


@dataclass(frozen=True)
class Wiring:
    """What ``TrainingPlatform`` gives every component, and stand-ins for the rest."""

    config: PlatformConfig
    parent: pulumi.ComponentResource
    """A component of the platform's type and name: the component's URNs are the platform's."""
    aws_provider: aws.Provider
    """The platform's AWS provider, with the stack's default tags."""
    kubernetes_provider: k8s.Provider
    adopting_kubernetes_provider: k8s.Provider

    @classmethod
    def of(cls, config: PlatformConfig) -> Wiring:
        """Register the parent and the providers (inside a mocked program run).

        Args:
            config: the validated stack configuration.
        """
        parent = pulumi.ComponentResource(PLATFORM_TYPE, config.environment, None)
        aws_provider = aws.Provider(
            "aws",
            region=config.region,
            allowed_account_ids=[config.account_id],
            default_tags={"tags": stack_tags(config)},
            opts=pulumi.ResourceOptions(parent=parent),
        )
        in_parent = pulumi.ResourceOptions(parent=parent)
        return cls(
            config,
            parent,
            aws_provider,
            k8s.Provider("stand-in-k8s", kubeconfig="{}", opts=in_parent),
            k8s.Provider(
                "stand-in-k8s-adopting",
                kubeconfig="{}",
                upsert_existing_objects=True,
                opts=in_parent,
            ),
        )

    @property
    def opts(self) -> pulumi.ResourceOptions:
        """The options ``TrainingPlatform`` gives each component."""
        return pulumi.ResourceOptions(parent=self.parent, providers={"aws": self.aws_provider})

    def mocked(self, resource_type: str, name: str, output: str = "id") -> pulumi.Output[Any]:
        """The output the mock engine gives resource ``name`` of ``resource_type`` with no inputs.

        Args:
            resource_type: the resource's type token.
            name: the resource's logical name in the whole program.
            output: which output (``id``, ``arn``, ``name``).
        """
        return pulumi.Output.from_input(mocked_output(self.config, resource_type, name, output))

    @property
    def vpc_id(self) -> pulumi.Output[str]:
        """The network's VPC id."""
        return self.mocked("aws:ec2/vpc:Vpc", "network-vpc")

    @property
    def private_subnet_ids(self) -> dict[str, pulumi.Output[str]]:
        """Zone -> the network's private subnet id there."""
        return {
            zone: self.mocked("aws:ec2/subnet:Subnet", f"network-private-{zone}")
            for zone in self.config.network.availability_zones
        }

    @property
    def in_cluster(self) -> InCluster:
        """The stand-in providers, and nothing to wait for (no cluster is built)."""
        return InCluster(
            ready=[],
            provider=self.kubernetes_provider,
            adopting_provider=self.adopting_kubernetes_provider,
        )

    @property
    def logs_key_arn(self) -> pulumi.Output[str]:
        """The ARN of the platform's customer key for log groups."""
        return self.mocked("aws:kms/key:Key", "logs", "arn")

    def team_namespaces(self) -> dict[str, pulumi.Resource]:
        """Team name -> a stand-in for its namespace (what ``Teams.namespaces`` holds)."""
        return {team.name: StandIn(f"teams-{team.name}", self.parent) for team in self.config.teams}


Part = Callable[[Wiring], pulumi.ComponentResource]
"""Builds one component from the wiring, as ``TrainingPlatform.__init__`` does."""


def network(wiring: Wiring) -> Network:
    """The network."""
    return build_network(wiring.config, logs_key_arn=wiring.logs_key_arn, opts=wiring.opts)


def cluster(wiring: Wiring) -> Cluster:
    """The EKS cluster, its system node group and add-ons (no deploy path: no attachment)."""
    return build_cluster(
        wiring.config,
        vpc_id=wiring.vpc_id,
        private_subnet_ids=wiring.private_subnet_ids,
        logs_key_arn=wiring.logs_key_arn,
        deploy_path=[],
        opts=wiring.opts,
    )


def karpenter(wiring: Wiring) -> Karpenter:
    """Karpenter's roles, queue and controller."""
    return build_karpenter(wiring.config, cluster=wiring.in_cluster, opts=wiring.opts)


def teams(wiring: Wiring) -> Teams:
    """The team namespaces, their roles, quotas and access entries."""
    return build_teams(
        wiring.config,
        cluster_name=wiring.config.name,
        cluster=wiring.in_cluster,
        opts=wiring.opts,
    )


def scheduling(wiring: Wiring) -> Scheduling:
    """Volcano, the team queues and the priority classes."""
    return build_scheduling(wiring.config, cluster=wiring.in_cluster, opts=wiring.opts)


def storage(wiring: Wiring) -> Storage:
    """Buckets, keys, the file system, its associations and claims."""
    return build_storage(
        wiring.config,
        vpc_id=wiring.vpc_id,
        private_subnet_ids=wiring.private_subnet_ids,
        logs_key_arn=wiring.logs_key_arn,
        slurm_namespace=_namespace(wiring) if wiring.config.slurm.enabled else None,
        team_namespaces=wiring.team_namespaces(),
        node_security_group_id=node_security_group_id(wiring.config),
        cluster=wiring.in_cluster,
        opts=wiring.opts,
        acceptance_namespace=_gate_namespace(wiring) if gated(wiring.config) else None,
    )


def _gate_namespace(wiring: Wiring) -> k8s.core.v1.Namespace:
    """The acceptance gate's namespace, which the platform makes before storage and the gate."""
    return acceptance_gate.create_namespace(
        cluster_ready=[], kubernetes_provider=wiring.kubernetes_provider, parent=wiring.parent
    )


def acceptance(wiring: Wiring) -> AcceptanceGate:
    """The acceptance agents, their rights, settings and node policy (claims are storage's)."""
    return build_acceptance_gate(
        wiring.config,
        namespace=_gate_namespace(wiring),
        claims=[],
        cluster=wiring.in_cluster,
        opts=wiring.opts,
    )


def _namespace(wiring: Wiring) -> k8s.core.v1.Namespace:
    """Slurm's namespace, which the platform makes before storage and Slurm."""
    return create_namespace(
        cluster_ready=[],
        kubernetes_provider=wiring.kubernetes_provider,
        parent=wiring.parent,
        protect=wiring.config.protect_stateful_resources,
    )


def node_pools(wiring: Wiring) -> NodePools:
    """Karpenter's node classes and pools, placement and EFA groups."""
    config = wiring.config
    return build_node_pools(
        config,
        vpc_id=wiring.vpc_id,
        private_subnet_ids=wiring.private_subnet_ids,
        node_role_name=wiring.mocked("aws:iam/role:Role", "karpenter-node", "name"),
        lustre_client_group_id=(
            wiring.mocked("aws:ec2/securityGroup:SecurityGroup", "storage-lustre-clients")
            if config.storage.lustre is not None
            else None
        ),
        karpenter_ready=[],
        cluster=wiring.in_cluster,
        opts=wiring.opts,
    )


def trainer(wiring: Wiring) -> Trainer:
    """Kubeflow Trainer, JobSet and the team runtimes."""
    return build_trainer(
        wiring.config,
        team_namespaces=wiring.team_namespaces(),
        volcano_ready=[],
        cluster=wiring.in_cluster,
        opts=wiring.opts,
    )


def katib(wiring: Wiring) -> Katib:
    """Katib: its release manifests, config, database and UI Service (Trainer a stand-in)."""
    assert wiring.config.katib.enabled, "the stack has no Katib to build"
    return build_katib(
        wiring.config,
        trainer=StandIn("trainer", wiring.parent),
        cluster=wiring.in_cluster,
        opts=wiring.opts,
    )


def device_plugins(wiring: Wiring) -> DevicePlugins:
    """The NVIDIA, Neuron and EFA device plugins the pools need."""
    return build_device_plugins(wiring.config, cluster=wiring.in_cluster, opts=wiring.opts)


def slurm(wiring: Wiring) -> Slurm:
    """Slurm: cert-manager, Slinky, accounting, the cluster and its node sets."""
    assert wiring.config.slurm.enabled, "the stack has no Slurm to build"
    return build_slurm(
        wiring.config,
        namespace=_namespace(wiring),
        workloads_ready=[],
        cluster=wiring.in_cluster,
        opts=wiring.opts,
    )


def observability(wiring: Wiring) -> Observability:
    """The metrics stack, Grafana and remote write (the data key and EBS role stand-ins)."""
    config = wiring.config
    stores = bool(config.storage.buckets or config.storage.lustre or config.model_store.enabled)
    return build_observability(
        config,
        data_key_arn=wiring.mocked("aws:kms/key:Key", "storage-data", "arn") if stores else None,
        ebs_csi_role_name=wiring.mocked("aws:iam/role:Role", f"{config.name}-ebs-csi", "name"),
        cluster=wiring.in_cluster,
        opts=wiring.opts,
        lustre_file_system_id=(
            wiring.mocked("aws:fsx/lustreFileSystem:LustreFileSystem", "storage-lustre")
            if config.storage.lustre is not None
            else None
        ),
    )


PARTS: Final[dict[str, Part]] = {
    "Network": network,
    "Cluster": cluster,
    "Karpenter": karpenter,
    "Teams": teams,
    "Scheduling": scheduling,
    "Storage": storage,
    "NodePools": node_pools,
    "Trainer": trainer,
    "Katib": katib,
    "DevicePlugins": device_plugins,
    "Slurm": slurm,
    "AcceptanceGate": acceptance,
    "Observability": observability,
}
"""Every part by the type name of the component it builds."""


def program(part: Part) -> Callable[[], pulumi.ComponentResource]:
    """A Pulumi program that validates the stack's config as ``deploy`` does, then builds ``part``.

    Args:
        part: the component to build.
    """
    return lambda: part(Wiring.of(load_config()))
