"""Shared storage: hardened S3 buckets, FSx for Lustre linked to them, and who reaches what.

The file system is PERSISTENT_2 in the training zone (next to the EFA pools), encrypted with a
customer key, reachable only on the Lustre ports from the nodes that carry the storage-client
security group, and linked to S3 through data repository associations, one bucket and prefix
each, data flowing one way on each path: checkpoints written to ``/checkpoints`` are exported
to S3 and outlive the file system once exported. Daily release tasks free what S3 holds and
nobody reads, and an alarm watches free space. Every namespace that mounts it gets its own
static PersistentVolume and claim, and each team's job service account an IAM role reaching
only the team's prefixes.

One module per concern: :mod:`~components.storage.buckets`, :mod:`~components.storage.lustre`
(with :mod:`~components.storage.capacity`, its release tasks and alarms),
:mod:`~components.storage.admin_client` and :mod:`~components.storage.layout` (the team
directories it makes), :mod:`~components.storage.volumes` (CSI driver, volumes, claims) and
:mod:`~components.storage.iam` (the data key and the teams' roles). :class:`Storage` wires them.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.config import PlatformConfig, access_log_bucket_name, bucket_name
from components.config.storage import admin_client_address
from components.iam import customer_key
from components.storage.admin_client import admin_client, admin_launch_template
from components.storage.buckets import (
    LOG_DELIVERY_SERVICE,
    access_log_bucket,
    access_log_bucket_policy,
    current_version_rules,
    data_bucket,
    tls_only_bucket_policy,
)
from components.storage.capacity import capacity, with_release_schedules
from components.storage.iam import (
    data_key_policy,
    data_key_principals,
    import_only_prefixes,
    team_data_policy,
    team_prefixes,
    team_role,
    team_role_name,
)
from components.storage.lustre import (
    association_s3_config,
    data_repository_path,
    file_system,
    lustre_egress,
    lustre_ingress,
)
from components.storage.model_store import ModelStore, model_store
from components.storage.volumes import (
    CLAIM_NAME,
    CSI_DRIVER,
    csi,
    lustre_node_affinity,
    persistent_volume_claim_spec,
    persistent_volume_name,
    persistent_volume_spec,
)

__all__ = [
    "CLAIM_NAME",
    "CSI_DRIVER",
    "LOG_DELIVERY_SERVICE",
    "Storage",
    "access_log_bucket_policy",
    "admin_launch_template",
    "association_s3_config",
    "current_version_rules",
    "data_key_policy",
    "data_key_principals",
    "data_repository_path",
    "import_only_prefixes",
    "lustre_egress",
    "lustre_ingress",
    "lustre_node_affinity",
    "persistent_volume_claim_spec",
    "persistent_volume_name",
    "persistent_volume_spec",
    "team_data_policy",
    "team_prefixes",
    "team_role_name",
    "tls_only_bucket_policy",
]


class Storage(pulumi.ComponentResource):
    """Buckets, the Lustre file system, its associations, CSI driver and claims.

    Outputs: ``client_security_group_id`` (for node classes; None without a file system),
    ``file_system_id``, ``buckets`` (key -> S3 name) and ``access_log_bucket``.
    """

    def __init__(
        self,
        name: str,
        *,
        config: PlatformConfig,
        vpc_id: pulumi.Input[str],
        training_subnet_id: pulumi.Input[str],
        logs_key_arn: pulumi.Input[str],
        cluster_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        mounting_namespaces: dict[str, pulumi.Resource] | None = None,
        team_namespaces: dict[str, pulumi.Resource] | None = None,
        private_subnet_ids: Mapping[str, pulumi.Input[str]] | None = None,
        node_security_group_id: pulumi.Input[str] | None = None,
        lustre_check_namespaces: dict[str, pulumi.Resource] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Create the storage.

        Args:
            name: prefix of child resource names.
            config: the validated platform (storage section, names, account, region, protection).
            vpc_id: VPC of the security groups.
            training_subnet_id: private subnet of the training zone (the file system's subnet).
            logs_key_arn: customer KMS key of the file system's log group.
            cluster_ready: what the CSI add-on and Kubernetes objects wait for.
            kubernetes_provider: provider of the namespaces, PVs and claims.
            mounting_namespaces: namespaces created elsewhere (Slurm's) that mount the whole
                file system and get the claim ``shared-lustre``; ``storage.lustre.namespaces``
                are created here. Default: none.
            team_namespaces: team name -> its namespace; each team with ``sharedFileSystem``
                gets one claim per team root on its own directory there
                (components/storage/layout.py). Default: none.
            lustre_check_namespaces: namespaces created elsewhere whose pods only prove a node
                mounts the file system (the acceptance gate's): the claim ``shared-lustre``,
                which they mount read-only, and no model store claim. Default: none.
            private_subnet_ids: zone -> private subnet, where the model store's mount targets
                go. Required with ``modelStore.enabled``. Default: none.
            node_security_group_id: the nodes' security group (the EKS cluster group, on
                system and Karpenter nodes alike), the only source NFS is admitted from.
                Required with ``modelStore.enabled``. Default: none.
            opts: resource options; the AWS provider comes from here.
        """
        super().__init__("trainingplatform:index:Storage", name, None, opts)
        storage = config.storage
        cluster = config.name
        stateful = pulumi.ResourceOptions(parent=self, protect=config.protect_stateful_resources)
        self.client_security_group_id: pulumi.Output[str] | None = None
        self.file_system_id: pulumi.Output[str] | None = None
        self.data_key_arn: pulumi.Output[str] | None = None
        """The stack's data key (None where the stack stores nothing of its own)."""
        self.dns_name: pulumi.Output[str] | None = None
        self.mount_name: pulumi.Output[str] | None = None
        self.buckets: dict[str, str] = {}
        self.access_log_bucket: str | None = None
        """S3 name of the bucket the data buckets log their requests into (None without)."""
        self.claims: dict[str, list[k8s.core.v1.PersistentVolumeClaim]] = {}
        """The claims of each mounting namespace (what pods there wait for)."""
        self.layout: list[pulumi.Resource] = []
        """The admin client that lays out the team directories (what team claims wait for)."""
        self.team_roles: dict[str, aws.iam.Role] = {}
        """Each team's job role (Pod Identity of its job service account), by team name."""
        self.model_store: ModelStore | None = None
        """The EFS model store (None when ``modelStore.enabled`` is false)."""
        store_enabled = config.model_store.enabled
        if not storage.buckets and storage.lustre is None and not store_enabled:
            self.register_outputs({})
            return

        key = customer_key(
            f"{name}-data",
            alias=f"{cluster}-data",
            description=f"Encrypts training data, checkpoints and the file system of {cluster}",
            protect=config.protect_stateful_resources,
            parent=self,
            policy=with_release_schedules(
                data_key_policy(
                    config.account_id,
                    config.region,
                    data_key_principals(config),
                    efs=store_enabled,
                ),
                config,
                storage.lustre,
            ),
        )
        self.data_key_arn = key.arn
        bucket_ready: dict[str, list[pulumi.Resource]] = {}
        if storage.buckets:
            access_logs = access_log_bucket(name, config, parent=self, stateful=stateful)
            self.access_log_bucket = access_log_bucket_name(config)
        for bucket in storage.buckets:
            bucket_ready[bucket.name] = data_bucket(
                name, config, bucket, key=key, access_logs=access_logs, parent=self,
                stateful=stateful,
            )  # fmt: skip
            self.buckets[bucket.name] = bucket_name(config, bucket)

        for team in config.teams:
            role = team_role(name, config, team.name, cluster_ready, parent=self)
            if role is not None:
                self.team_roles[team.name] = role
        lustre = storage.lustre
        if lustre is not None:
            # Config refuses a stack whose admin client has no known address.
            address = typing.cast(str, admin_client_address(config))
            made = file_system(
                name, config=config, lustre=lustre, admin_address=address, key=key,
                vpc_id=vpc_id, training_subnet_id=training_subnet_id, logs_key_arn=logs_key_arn,
                bucket_ready=bucket_ready, parent=self, stateful=stateful,
            )  # fmt: skip
            self.client_security_group_id = made.clients.id
            self.file_system_id = made.file_system.id
            self.dns_name = made.file_system.dns_name
            self.mount_name = made.file_system.mount_name
            admin = admin_client(
                name, config=config, lustre=lustre, file_system=made.file_system,
                address=address, vpc_id=vpc_id, training_subnet_id=training_subnet_id,
                clients=made.clients, servers=made.servers, associations=made.associations,
                parent=self,
            )  # fmt: skip
            self.layout.append(admin)
            capacity(
                name, config=config, lustre=lustre, file_system=made.file_system, key=key,
                parent=self,
            )  # fmt: skip
            self.claims = csi(
                name,
                config=config,
                lustre=lustre,
                file_system=made.file_system,
                layout=self.layout,
                cluster_ready=cluster_ready,
                kubernetes_provider=kubernetes_provider,
                mounting_namespaces={
                    **(mounting_namespaces or {}),
                    **(lustre_check_namespaces or {}),
                },
                team_namespaces=team_namespaces or {},
                parent=self,
            )
        if store_enabled:
            if private_subnet_ids is None or node_security_group_id is None:
                raise ValueError("the model store needs the private subnets and the node group")
            # Slurm's namespace: its users carry the team gids, so it mounts the root.
            whole = dict(mounting_namespaces or {})
            self.model_store = model_store(
                name, config=config, key=key, vpc_id=vpc_id,
                private_subnet_ids=private_subnet_ids,
                node_security_group_ids=[node_security_group_id],
                cluster_ready=cluster_ready, kubernetes_provider=kubernetes_provider,
                team_namespaces=team_namespaces or {}, whole_file_system_namespaces=whole,
                parent=self,
            )  # fmt: skip
            for namespace, claims in self.model_store.claims.items():
                self.claims[namespace] = [*self.claims.get(namespace, []), *claims]
        self.register_outputs({"buckets": self.buckets})
