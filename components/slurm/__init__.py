"""Slurm on Kubernetes with Slinky: node sets on the same accelerator pools as Kubernetes jobs.

Install order: cert-manager (the operator webhook's certificate), the Slinky CRDs, the operator,
the accounting database (mariadb-operator and one ``MariaDB``), then the ``slurm`` chart with
the controller, REST API, accounting and login set, as Slinky's installation guide has it:
https://github.com/SlinkyProject/slurm-operator/blob/v1.2.1/docs/installation.md

The node sets are ``NodeSet`` resources created here rather than through the chart's
``nodesets`` values: each is built from the pool's catalog entry (every accelerator and EFA
interface, GRES), so it can be validated against the CRD schema and checked by policy before
anything reaches a cluster. The chart's partition ``all`` (``Nodes=ALL``) still spans them.

The Slurm auth keys are random values kept as Pulumi secrets: the chart would generate them with
a cluster ``lookup`` and regenerate them whenever that lookup sees nothing.

One module per concern: :mod:`~components.slurm.conf` (Slurm's config files),
:mod:`~components.slurm.health_mirror` (one health truth with Kubernetes),
:mod:`~components.slurm.node_sets`, :mod:`~components.slurm.login`,
:mod:`~components.slurm.accounting` (the database), :mod:`~components.slurm.directory` (users,
accounts, fair share), :mod:`~components.slurm.autoscaling` (KEDA), the chart's values
(:mod:`~components.slurm.chart`), the namespace's NetworkPolicies
(:mod:`~components.slurm.network_policies`), and what they share
(:mod:`~components.slurm.common`). :class:`Slurm` registers them.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.checkpoints import checkpoint_location
from components.cluster import encrypted_gp3_class, state_reclaim_policy, storage_class
from components.config import PlatformConfig
from components.helm import release
from components.node_pools import POOL_LABEL
from components.slurm import directory as slurm_directory
from components.slurm.accounting import DATABASE_POD_LABELS, MARIADB_API, MYSQL_UID, database
from components.slurm.autoscaling import Autoscaling, scaled_object
from components.slurm.chart import cert_manager_values, slurm_operator_values, slurm_values
from components.slurm.common import (
    AUTH_KEY_LENGTH,
    CERT_MANAGER_NAMESPACE,
    JWT_KEY,
    LOGIN_SSH_PORT,
    NAMESPACE,
    OPERATOR_NAMESPACE,
    PRIVILEGED_NAMESPACE,
    RELEASE,
    SLINKY_API,
    SLURM_APP_LABEL,
    SLURM_KEY,
    SLURMCTLD_PORT,
    SLURMD_PORT,
    SLURMDBD_PORT,
    SLURMRESTD_PORT,
    STATE_STORAGE_CLASS,
    chart_rendered,
    random_secret,
    retained,
)
from components.slurm.conf import (
    TASK_PROLOG,
    TASK_PROLOG_CONFIG_MAP,
    TASK_PROLOG_DIR,
    gres_name,
    job_tools_path,
    task_prolog,
)
from components.slurm.health_mirror import register_health_mirror
from components.slurm.host_keys import host_key_objects
from components.slurm.login import login_image, login_sources
from components.slurm.network_policies import slurm_network_policies
from components.slurm.node_sets import node_set_image, nodeset_spec

__all__ = [
    "DATABASE_POD_LABELS",
    "LOGIN_SSH_PORT",
    "MARIADB_API",
    "MYSQL_UID",
    "NAMESPACE",
    "RELEASE",
    "SLURMCTLD_PORT",
    "SLURMDBD_PORT",
    "SLURMD_PORT",
    "SLURMRESTD_PORT",
    "SLURM_APP_LABEL",
    "TASK_PROLOG",
    "TASK_PROLOG_CONFIG_MAP",
    "TASK_PROLOG_DIR",
    "Slurm",
    "chart_rendered",
    "create_namespace",
    "job_tools_path",
    "login_image",
    "task_prolog",
]


def slurm_team_rows(config: PlatformConfig) -> list[slurm_directory.TeamRow]:
    """The teams' Slurm accounts and QOS (:func:`components.slurm.directory.team_rows`)."""
    node_sets = config.slurm.node_sets
    pools = [pool for ns in node_sets if (pool := config.pool(ns.pool))]
    return slurm_directory.team_rows(
        config.teams,
        gres_types=sorted({gres_name(pool) for pool in pools}),
        longest_hours=max(ns.max_time_hours for ns in node_sets),
    )


def create_namespace(
    *,
    cluster_ready: list[pulumi.Resource],
    kubernetes_provider: pulumi.ProviderResource,
    parent: pulumi.Resource,
    protect: bool = False,
) -> k8s.core.v1.Namespace:
    """The ``slurm`` namespace, made before the storage claims that mount Lustre in it.

    Args:
        cluster_ready: what the namespace waits for (the cluster's API and nodes).
        kubernetes_provider: provider of the namespace.
        parent: the platform component.
        protect: the stack's ``protectStatefulResources`` (default False): protect the
            namespace and retain it on delete, as the accounting database in it is. Deleting
            a namespace deletes every object in it, retained or not, and the database's
            User, Database and Grant objects then wait on mariadb-operator's finalizers
            (v26.6.0 internal/controller/user_controller_finalizer.go and its siblings),
            which nobody removes once the operator is gone: the namespace would stay
            Terminating and the ``destroy`` would stop at it.
    """
    return k8s.core.v1.Namespace(
        "slurm-namespace",
        metadata={"name": NAMESPACE, "labels": dict(PRIVILEGED_NAMESPACE)},
        opts=pulumi.ResourceOptions(
            parent=parent,
            provider=kubernetes_provider,
            depends_on=cluster_ready,
            protect=protect,
            retain_on_delete=protect,
        ),
    )


class Slurm(pulumi.ComponentResource):
    """cert-manager, Slinky, the accounting database, the Slurm cluster and its node sets."""

    def __init__(
        self,
        name: str,
        *,
        config: PlatformConfig,
        namespace: k8s.core.v1.Namespace,
        volume_tags: Mapping[str, str],
        cluster_ready: list[pulumi.Resource],
        workloads_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        monitoring_ready: Sequence[pulumi.Resource] = (),
        bind_password: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Install Slurm (the platform builds this only when ``slurm.enabled``).

        Args:
            name: prefix of child resource names.
            config: the validated platform; its ``slurm`` section says what to build.
            namespace: the ``slurm`` namespace (:func:`create_namespace`).
            volume_tags: tags of the state volumes (slurmctld, the database) the EBS CSI driver
                creates: the stack's default tags, which never reach them otherwise.
            cluster_ready: what the operators wait for (nodes, add-ons, storage class).
            workloads_ready: what slurmd and login pods need first: the namespace's Lustre
                claim, the priority classes.
            kubernetes_provider: provider of every release and object.
            monitoring_ready: the metrics stack's release (``Observability.ready``), which
                KEDA and slurmctld's ServiceMonitor need. Default: nothing to wait for.
            bind_password: the directory's bind password (a secret; the config key
                ``slurmDirectoryBindPassword``), with ``slurm.directory.bindDn``. Default: none.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:Slurm", name, None, opts)
        self.node_sets: dict[str, k8s.apiextensions.CustomResource] = {}
        self.scaled_objects: dict[str, k8s.apiextensions.CustomResource] = {}
        slurm = config.slurm
        protect = config.protect_stateful_resources

        def opts_after(
            *depends_on: pulumi.Resource, stateful: bool = False
        ) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self,
                provider=kubernetes_provider,
                depends_on=[*cluster_ready, *depends_on],
                protect=protect and stateful,
            )

        # Before anything runs in the namespace. The agent's default (standard) mode still
        # lets a new pod accept traffic for the moment before its policies attach.
        for manifest in slurm_network_policies(login_sources(config)):
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{manifest['metadata']['name']}",
                metadata=typing.cast(Any, manifest["metadata"]),
                spec=typing.cast(Any, manifest["spec"]),
                opts=opts_after(namespace),
            )
        cert_manager = release(
            "cert-manager",
            versions.CERT_MANAGER_CHART,
            namespace=CERT_MANAGER_NAMESPACE,
            values=cert_manager_values(),
            create_namespace=True,
            opts=opts_after(),
        )
        crds = release(
            "slurm-operator-crds",
            versions.SLURM_OPERATOR_CRDS_CHART,
            namespace=OPERATOR_NAMESPACE,
            values={},
            create_namespace=True,
            opts=retained(opts_after(cert_manager, stateful=True)),
        )
        operator = release(
            "slurm-operator",
            versions.SLURM_OPERATOR_CHART,
            namespace=OPERATOR_NAMESPACE,
            values=slurm_operator_values(),
            opts=opts_after(cert_manager, crds),
        )
        keys: list[pulumi.Resource] = [
            random_secret(f"{name}-{ref['name']}", ref["name"], {ref["key"]: AUTH_KEY_LENGTH},
                          namespace=namespace, parent=self,
                          opts=opts_after(namespace, stateful=True))
            for ref in (SLURM_KEY, JWT_KEY)
        ]  # fmt: skip
        keys.append(
            k8s.core.v1.ConfigMap(
                f"{name}-task-prolog",
                metadata={"name": TASK_PROLOG_CONFIG_MAP, "namespace": NAMESPACE},
                data={
                    "task-prolog": task_prolog(
                        job_tools_path(), checkpoints=checkpoint_location(config)
                    )
                },
                opts=opts_after(namespace),
            )
        )
        if slurm.directory is not None:
            keys += slurm_directory.directory_objects(
                name,
                slurm.directory,
                bind_password,
                teams=slurm_team_rows(config),
                opts=opts_after(namespace),
            )
            # Node SSH is on only with a directory (nodeset_spec), and with it these.
            node_set_pools = [config.pool(node_set.pool) for node_set in slurm.node_sets]
            keys += host_key_objects(
                name,
                [pool for pool in node_set_pools if pool is not None],
                parent=self,
                opts=opts_after(namespace),
            )
        # Where protected, deleting a claim must not delete Slurm's state or its job history.
        # slurmctld's claim has no retention policy (Slinky v1.2.1 internal/builder/
        # controllerbuilder/controller_app.go sets none, so Kubernetes keeps it): it goes with
        # the namespace, and its volume then by this class's reclaim policy.
        state_class = storage_class(
            f"{name}-{STATE_STORAGE_CLASS}",
            encrypted_gp3_class(
                STATE_STORAGE_CLASS,
                reclaim_policy=state_reclaim_policy(protect),
                default=False,
                tags=volume_tags,
            ),
            opts_after(),
        )
        # The operator makes slurmctld's ServiceMonitor, whose CRD comes with the monitoring
        # release (components/observability); the ScaledObjects need KEDA's.
        autoscaling = Autoscaling(
            f"{name}-autoscaling",
            cluster_ready=cluster_ready,
            monitoring_ready=list(monitoring_ready),
            kubernetes_provider=kubernetes_provider,
            opts=pulumi.ResourceOptions(parent=self),
        )
        chart_needs: list[pulumi.Resource] = [
            operator, state_class, *keys, *workloads_ready, *autoscaling.ready,
        ]  # fmt: skip
        if slurm.accounting.enabled:
            chart_needs.append(
                database(name, slurm.accounting.storage_gib, namespace, state_class,
                         parent=self, opts_after=opts_after)
            )  # fmt: skip
        cluster = release(
            RELEASE,
            versions.SLURM_CHART,
            namespace=NAMESPACE,
            values=slurm_values(config),
            opts=opts_after(namespace, *chart_needs, stateful=True),
        )
        # The operator serves Tokens and the chart's JWT key signs them.
        register_health_mirror(name, config, opts_after(namespace, cluster))
        for node_set in slurm.node_sets:
            pool = config.pool(node_set.pool)
            assert pool is not None  # config validation guarantees it
            spec = nodeset_spec(
                node_set,
                pool,
                image=node_set_image(config, node_set),
                shared_file_system=config.storage.lustre is not None,
                model_store=config.model_store.enabled,
                default_partition=pool.name == slurm.default_partition_pool,
                directory=slurm.directory,
                billing=slurm_directory.billing_weights(pool, gres_name(pool), config.teams)
                if slurm.directory is not None
                else None,
            )
            self.node_sets[pool.name] = k8s.apiextensions.CustomResource(
                f"{name}-nodeset-{pool.name}",
                api_version=SLINKY_API,
                kind="NodeSet",
                metadata={
                    "name": pool.name,
                    "namespace": NAMESPACE,
                    "labels": {POOL_LABEL: pool.name},
                },
                spec=typing.cast(Any, spec),
                opts=pulumi.ResourceOptions.merge(
                    opts_after(cluster, *workloads_ready),
                    # KEDA sets the replicas through the scale subresource; an up must not
                    # take them back (pulumi-kubernetes leaves an ignored field another field
                    # manager owns out of its server-side apply, since 4.9.0).
                    pulumi.ResourceOptions(ignore_changes=["spec.replicas"]),
                ),
            )
            self.scaled_objects[pool.name] = scaled_object(
                f"{name}-scaledobject-{pool.name}",
                node_set,
                pool,
                namespace=NAMESPACE,
                opts=opts_after(self.node_sets[pool.name], *autoscaling.ready),
            )
        self.register_outputs({})
