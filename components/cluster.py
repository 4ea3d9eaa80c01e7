"""The EKS cluster on pulumi-eks: control plane, access entries, system nodes, core add-ons.

The control plane is created with no default node group and no self-managed add-ons; the add-ons
are EKS managed add-ons at the versions of the bill of materials, ordered so that the CNI,
kube-proxy and Pod Identity agent exist before the first node joins and CoreDNS and the EBS CSI
driver come after it. Every in-cluster resource of the platform uses the one Kubernetes provider
made here from the cluster's kubeconfig.
"""

from __future__ import annotations

import base64
import json
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components import user_data, versions
from components.catalog import cpu_architecture
from components.config import ClusterConfig
from components.iam import (
    EKS_NODE_POLICIES,
    IMDSV2_ONE_HOP,
    VPC_CNI_POLICY,
    account_key_policy,
    customer_key,
    eks_cluster_arn,
    pod_identity_trust_policy,
    role_with_policies,
    service_trust_policy,
)

CONTROL_PLANE_LOG_TYPES: Final = ("api", "audit", "authenticator")
CLUSTER_ADMIN_POLICY: Final = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
SYSTEM_TAINT: Final = {"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}
SYSTEM_NODE_LABEL: Final = "trainingplatform.io/node-role"
SYSTEM_NODE_SELECTOR: Final = {SYSTEM_NODE_LABEL: "system"}
"""Selects the system node group: where controllers run."""
SYSTEM_TOLERATION: Final = {"key": SYSTEM_TAINT["key"], "operator": "Exists"}
"""Lets a controller onto the system nodes despite their taint."""
EBS_CSI_SERVICE_ACCOUNT: Final = "ebs-csi-controller-sa"
VPC_CNI_SERVICE_ACCOUNT: Final = "aws-node"
"""The VPC CNI's DaemonSet runs as ``kube-system/aws-node``; its Pod Identity role holds
``AmazonEKS_CNI_Policy``, which node roles no longer carry."""
ADDON_NAMESPACE: Final = "kube-system"
"""Where EKS managed add-ons run their controllers."""
DEFAULT_STORAGE_CLASS: Final = "gp3"


def ami_type(instance_types: list[str]) -> str:
    """EKS managed node group AMI type (AL2023) for instance types of one architecture."""
    architecture = cpu_architecture(instance_types[0])
    return "AL2023_ARM_64_STANDARD" if architecture == "arm64" else "AL2023_x86_64_STANDARD"


def secrets_key_policy(key_arn: str) -> dict[str, Any]:
    """Inline policy letting the cluster role use its secrets-encryption key, and only that key."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "EncryptKubernetesSecrets",
                "Effect": "Allow",
                "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"],
                "Resource": key_arn,
            }
        ],
    }


def system_launch_template_args(
    cluster_name: str, root_volume_size_gib: int, tags: dict[str, str]
) -> dict[str, Any]:
    """Launch template settings of the system node group.

    IMDSv2 only with a hop limit of 1, so pods cannot reach the node's instance credentials;
    user data keeping ports below 1024 root's in every pod (``components.user_data``); an
    encrypted gp3 root volume; the platform's tags on instances and volumes (provider default
    tags do not reach instances that a node group launches).
    """
    return {
        "metadata_options": dict(IMDSV2_ONE_HOP),
        # EKS merges this part with its own NodeConfig (AL2023 node groups take MIME parts):
        # the system nodes keep privileged ports for root too (the Lustre boundary).
        "user_data": base64.b64encode(
            user_data.node_user_data(efa=False, hugepages_gib=0).encode()
        ).decode(),
        "block_device_mappings": [
            {
                "device_name": "/dev/xvda",
                "ebs": {
                    "volume_size": root_volume_size_gib,
                    "volume_type": "gp3",
                    "encrypted": "true",
                    "delete_on_termination": "true",
                },
            }
        ],
        "tag_specifications": [
            {"resource_type": kind, "tags": {**tags, "Name": f"{cluster_name}-system"}}
            for kind in ("instance", "volume")
        ],
    }


EBS_TAG_PARAMETER_PREFIX: Final = "tagSpecification_"
"""StorageClass parameters the EBS CSI driver turns into tags on each volume it creates.

kubernetes-sigs/aws-ebs-csi-driver v1.54.0 (the add-on's version), pkg/driver/controller.go
CreateVolume: every parameter whose key starts with ``tagSpecification`` (case-sensitive) is a
tag; pkg/util/template/template.go Evaluate splits its value at the first ``=`` into key and
value and renders the value as a Go template. So a key must not hold ``=`` and a value must
not hold ``{{`` (config allows neither, components/config/tags.py); spaces, ``:`` and ``=`` in
values arrive unchanged. docs/tagging.md ("StorageClass Tagging") numbers them ``_1``, ``_2``...
"""


def ebs_tag_parameters(tags: Mapping[str, str]) -> dict[str, str]:
    """StorageClass parameters that put ``tags`` on every volume the EBS CSI driver creates.

    Numbered in key order, so the same tags always give the same parameters. Provider default
    tags never reach these volumes: the driver, not Pulumi, creates them.

    Args:
        tags: tag key -> value, e.g. the stack's required tags and ``managed-by``.
    """
    return {
        f"{EBS_TAG_PARAMETER_PREFIX}{index}": f"{key}={value}"
        for index, (key, value) in enumerate(sorted(tags.items()), start=1)
    }


def state_reclaim_policy(protect: bool) -> str:
    """``reclaimPolicy`` of a class holding state: kept (``Retain``) only where protected.

    Where nothing is protected (dev) a volume goes with its claim, so a ``destroy`` leaves no
    volume behind; where it is (prod) the volume outlives its claim and the cluster.

    Args:
        protect: the stack's ``protectStatefulResources``.
    """
    return "Retain" if protect else "Delete"


def encrypted_gp3_class(
    name: str,
    *,
    reclaim_policy: str,
    default: bool,
    tags: Mapping[str, str],
    kms_key_id: pulumi.Input[str] | None = None,
) -> dict[str, Any]:
    """An encrypted gp3 StorageClass of the EBS CSI driver, bound where its pod lands.

    Args:
        name: StorageClass name.
        reclaim_policy: ``Delete`` (the volume goes with its claim) or ``Retain``.
        default: mark it the cluster's default class.
        tags: tags of every volume the class provisions (:func:`ebs_tag_parameters`).
        kms_key_id: the customer key's ARN that encrypts each volume (kubernetes-sigs/
            aws-ebs-csi-driver v1.54.0 docs/parameters.md, ``kmsKeyId``); the driver's role
            must be allowed to use it. Default None: the region's AWS managed key.
    """
    metadata: dict[str, Any] = {"name": name}
    if default:
        metadata["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return {
        "metadata": metadata,
        "provisioner": "ebs.csi.aws.com",
        "parameters": {
            "type": "gp3",
            "encrypted": "true",
            "fsType": "ext4",
            **({"kmsKeyId": kms_key_id} if kms_key_id is not None else {}),
            **ebs_tag_parameters(tags),
        },
        "reclaimPolicy": reclaim_policy,
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
    }


VPC_CNI_CONFIGURATION: Final = {"enableNetworkPolicy": "true"}
"""The VPC CNI add-on's configuration: its network policy agent enforces NetworkPolicies
(off by default; the add-on's configuration schema, ``aws eks describe-addon-configuration
--addon-name vpc-cni``). The agent polices each pod's VPC interface (eth0) in the kernel; EFA
traffic bypasses the kernel and is not policed (components/tenancy.py)."""

MONITORING_AGENT_CONFIGURATION: Final = {
    "nodeAgent": {"tolerations": [{"operator": "Exists"}]},
    "dcgmAgent": {"tolerations": [{"operator": "Exists"}]},
}
"""The node monitoring agent add-on's configuration: both its DaemonSets tolerate every taint.

The agent must run on a node the acceptance gate still holds (its startup taint) or has marked
unhealthy, and on every accelerator pool's own taints, or nothing reports the conditions
Karpenter's node repair acts on. Its chart defaults the node agent to ``operator: Exists`` but
the DCGM host engine (``dcgmAgent``, which the agent's GPU checks talk to) to no toleration at
all (aws/eks-node-monitoring-agent v1.7.0 charts/eks-node-monitoring-agent/values.yaml); both
are set so neither depends on a default. ``DCGM_DIAG_LEVEL`` is not set: at v1.7.0 the add-on's
configuration schema has no field for the agent's environment (charts/configuration.schema.json,
``additionalProperties: false``) and its DaemonSet sets only ``HOST_ROOT`` and ``MY_NODE_NAME``
(charts/eks-node-monitoring-agent/templates/daemonset.yaml); the gate runs ``dcgmi diag`` on each
new node instead (docs: concepts, node acceptance, Repair)."""

IMMUTABLE_STORAGE_CLASS_FIELDS: Final = ("reclaimPolicy", "volumeBindingMode")
"""StorageClass fields the API server refuses to update and pulumi-kubernetes would patch."""


def storage_class(
    resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions
) -> k8s.storage.v1.StorageClass:
    """Create the StorageClass ``manifest`` (as :func:`encrypted_gp3_class` builds it).

    The API server refuses any update of ``reclaimPolicy`` or ``volumeBindingMode``
    (kubernetes pkg/apis/storage/validation/validation.go, ValidateStorageClassUpdate), and
    pulumi-kubernetes' own table replaces only on ``parameters`` and ``provisioner``
    (provider/pkg/provider/diff.go): without ``replaceOnChanges`` a ``protectStatefulResources``
    toggle would be a patch the cluster refuses. The class keeps its name, so the old one goes
    first. Volumes already provisioned keep the policy they were created with (a PV copies it);
    docs/upgrades/index.md shows the ``kubectl patch pv`` that changes theirs.

    Args:
        resource_name: the Pulumi resource name.
        manifest: the class, as :func:`encrypted_gp3_class` builds it.
        opts: resource options (parent, provider, ordering).
    """
    return k8s.storage.v1.StorageClass(
        resource_name,
        metadata=manifest["metadata"],
        provisioner=manifest["provisioner"],
        parameters=manifest["parameters"],
        reclaim_policy=manifest["reclaimPolicy"],
        volume_binding_mode=manifest["volumeBindingMode"],
        allow_volume_expansion=manifest["allowVolumeExpansion"],
        opts=pulumi.ResourceOptions.merge(
            opts,
            pulumi.ResourceOptions(
                replace_on_changes=list(IMMUTABLE_STORAGE_CLASS_FIELDS),
                delete_before_replace=True,
            ),
        ),
    )


def api_server_endpoint(kubeconfig_json: str) -> str:
    """The API server URL written in a kubeconfig."""
    return str(json.loads(kubeconfig_json)["clusters"][0]["cluster"]["server"])


class Cluster(pulumi.ComponentResource):
    """An EKS cluster ready for platform controllers.

    Outputs: ``name``, ``endpoint``, ``kubeconfig`` (secret), ``node_security_group_id`` (the
    group EKS itself creates for the cluster: every node sits in it, the system node group's
    and Karpenter's, which select it by its tag), ``api_security_group_id`` (the deploy path's
    HTTPS rules, on the control plane's ENIs only), ``secrets_key_arn`` and
    ``kubernetes_provider``.

    pulumi-eks makes nothing here that goes unused: no default node group, none of its default
    security groups (its node group's would hold no node, and its cluster group would carry
    only what :attr:`api_security_group_id` carries) and no IAM OIDC provider, which only IRSA
    needs; every controller role is assumed through EKS Pod Identity (components/iam.py).
    """

    def __init__(
        self,
        name: str,
        *,
        cluster: ClusterConfig,
        vpc_id: pulumi.Input[str],
        private_subnet_ids: list[pulumi.Input[str]],
        tags: dict[str, str],
        volume_tags: Mapping[str, str],
        protect: bool,
        logs_key_arn: pulumi.Input[str],
        account_id: str,
        region: str,
        deploy_path: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Create the control plane, system nodes and core add-ons.

        Args:
            name: EKS cluster name, also the prefix of child resource names.
            cluster: the validated ``platform.cluster`` section.
            vpc_id: VPC of the cluster.
            private_subnet_ids: private subnets, one per zone (>= 2 zones); control plane ENIs
                and system nodes go there, never to public subnets. Only zones the cluster was
                created in: EKS UpdateClusterConfig refuses a subnet of another zone (EKS user
                guide, networking requirements for VPC and subnets;
                aws/containers-roadmap#2330), and the system node group's ``subnet_ids`` is
                ForceNew (every system node would go).
            tags: the platform's required tags, copied onto instances and volumes the system
                node group launches.
            volume_tags: tags of every EBS volume the CSI driver creates through the default
                StorageClass (the stack's default tags: the driver, not Pulumi, tags them).
            protect: protect the cluster and its secrets key from deletion (production).
            logs_key_arn: customer KMS key of the control-plane log group.
            account_id: the stack's account, which administers the secrets key.
            region: the cluster's region (its ARN, which add-on roles trust).
            deploy_path: resources deployments reach the API through (the network's transit
                gateway attachment and routes); with the API's 443 rules, the Kubernetes
                provider depends on them, so they exist before any in-cluster resource and go
                after the last one. Default: none.
            opts: resource options; the AWS provider comes from here.

        """
        super().__init__("trainingplatform:index:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        addon_versions = versions.EKS_ADDONS[cluster.kubernetes_version]
        self.name = name

        secrets_key = customer_key(
            f"{name}-secrets",
            alias=f"{name}-eks-secrets",
            description=f"Encrypts Kubernetes secrets of EKS cluster {name}",
            protect=protect,
            parent=self,
            # EKS uses it through a grant the cluster's creator makes: IAM decides.
            policy=account_key_policy(account_id),
        )
        self.secrets_key_arn = secrets_key.arn

        # EKS writes control-plane logs here; creating the group first sets their retention.
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-control-plane",
            name=f"/aws/eks/{name}/cluster",
            retention_in_days=cluster.log_retention_days,
            kms_key_id=logs_key_arn,
            opts=child,
        )

        service_role = role_with_policies(
            f"{name}-cluster",
            trust_policy=service_trust_policy("eks.amazonaws.com", tag_session=True),
            managed_policies=["AmazonEKSClusterPolicy"],
            opts=child,
        )
        key_access = aws.iam.RolePolicy(
            f"{name}-cluster-secrets-key",
            role=service_role.role.id,
            policy=secrets_key.arn.apply(lambda arn: json.dumps(secrets_key_policy(arn))),
            opts=child,
        )

        endpoint = cluster.endpoint
        # The control plane's ENIs get this group besides the one EKS creates (which the nodes
        # share): the deploy path's HTTPS rules below land on the API only, never on a node.
        # Always made, even without rules, so adding a CIDR changes no cluster input. No inline
        # rules: pulumi-eks's clusterSecurityGroup input asks for separate rule resources.
        api_group = aws.ec2.SecurityGroup(
            f"{name}-api",
            description=f"Kubernetes API of EKS cluster {name} from the deploy path",
            vpc_id=vpc_id,
            tags={"Name": f"{name}-api"},
            opts=child,
        )
        self.api_security_group_id = api_group.id
        self.eks_cluster = eks.Cluster(
            name,
            name=name,
            version=cluster.kubernetes_version,
            vpc_id=vpc_id,
            private_subnet_ids=private_subnet_ids,
            endpoint_private_access=endpoint.private_access,
            endpoint_public_access=endpoint.public_access,
            public_access_cidrs=endpoint.public_access_cidrs if endpoint.public_access else None,
            authentication_mode=eks.AuthenticationMode.API,
            encryption_config_key_arn=secrets_key.arn,
            enabled_cluster_log_types=list(CONTROL_PLANE_LOG_TYPES),
            service_role=service_role.role,
            skip_default_node_group=True,
            # pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts (createCore, createCluster; v4.3.0,
            # unchanged since but for dependency bumps, and the 4.4.0 SDK's docstrings agree):
            # with skipDefaultSecurityGroups it makes neither its cluster group nor its node
            # group and node ingress rule; clusterSecurityGroup takes the place of its cluster
            # group in the control plane's vpcConfig, and nodeSecurityGroupId then reports the
            # group EKS creates.
            skip_default_security_groups=True,
            cluster_security_group=api_group,
            node_associate_public_ip_address=False,
            # Only IRSA needs an IAM OIDC provider; every role here trusts Pod Identity.
            create_oidc_provider=False,
            # Add-ons are EKS managed add-ons below, pinned by the bill of materials.
            bootstrap_self_managed_addons=False,
            use_default_vpc_cni=True,
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(enabled=False),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=protect,
                depends_on=[log_group, *service_role.ready, key_access],
            ),
        )
        after_cluster = pulumi.ResourceOptions(parent=self, depends_on=[self.eks_cluster])
        # The private endpoint admits HTTPS from where deployments come (a VPN, a peering, a
        # runner in the VPC), through the API's own group.
        api_access: list[pulumi.Resource] = list(deploy_path)
        for cidr in endpoint.deploy_from.cidrs:
            api_access.append(
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-api-from-{cidr.replace('/', '-')}",
                    security_group_id=api_group.id,
                    cidr_ipv4=cidr,
                    ip_protocol="tcp",
                    from_port=443,
                    to_port=443,
                    description="Kubernetes API from the deploy path",
                    opts=after_cluster,
                )
            )

        for index, principal_arn in enumerate(cluster.admin_principal_arns):
            entry = aws.eks.AccessEntry(
                f"{name}-admin-{index}",
                cluster_name=name,
                principal_arn=principal_arn,
                type="STANDARD",
                opts=after_cluster,
            )
            aws.eks.AccessPolicyAssociation(
                f"{name}-admin-{index}",
                cluster_name=name,
                principal_arn=principal_arn,
                policy_arn=CLUSTER_ADMIN_POLICY,
                access_scope={"type": "cluster"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]),
            )

        cluster_arn = eks_cluster_arn(region, account_id, name)
        identity_agent = self._addon(
            name, "eks-pod-identity-agent", addon_versions.eks_pod_identity_agent, after_cluster
        )
        # The CNI assigns addresses with its own role, not the node's: a node's credentials
        # cannot then move a private address (the admin client's no-squash one) to another
        # interface. The agent (host network, needs no pod address) serves the CNI's
        # credentials, so it comes first; both exist before the first node joins.
        cni_role = role_with_policies(
            f"{name}-vpc-cni",
            trust_policy=pod_identity_trust_policy(
                cluster_arn, ADDON_NAMESPACE, VPC_CNI_SERVICE_ACCOUNT
            ),
            managed_policies=[VPC_CNI_POLICY],
            opts=child,
        )
        vpc_cni = self._addon(
            name,
            "vpc-cni",
            addon_versions.vpc_cni,
            pulumi.ResourceOptions(
                parent=self, depends_on=[self.eks_cluster, identity_agent, *cni_role.ready]
            ),
            configuration_values=VPC_CNI_CONFIGURATION,
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(
                    role_arn=cni_role.role.arn, service_account=VPC_CNI_SERVICE_ACCOUNT
                )
            ],
        )
        early_addons = [
            vpc_cni,
            self._addon(name, "kube-proxy", addon_versions.kube_proxy, after_cluster),
            identity_agent,
        ]

        node_group = self._system_node_group(name, cluster, private_subnet_ids, tags, early_addons)
        after_nodes = pulumi.ResourceOptions(parent=self, depends_on=[node_group])
        coredns = self._addon(name, "coredns", addon_versions.coredns, after_nodes)
        # Sets the node conditions Karpenter's nodeRepair acts on (components/karpenter.py).
        self._addon(
            name,
            "eks-node-monitoring-agent",
            addon_versions.eks_node_monitoring_agent,
            after_nodes,
            configuration_values=MONITORING_AGENT_CONFIGURATION,
        )
        ebs_role = role_with_policies(
            f"{name}-ebs-csi",
            trust_policy=pod_identity_trust_policy(
                cluster_arn, ADDON_NAMESPACE, EBS_CSI_SERVICE_ACCOUNT
            ),
            managed_policies=["service-role/AmazonEBSCSIDriverPolicy"],
            opts=child,
        )
        self.ebs_csi_role_name: pulumi.Output[str] = ebs_role.role.name
        """The EBS CSI driver's role (Pod Identity), which classes with a customer key extend
        with that key's use (:func:`components.notebooks.ebs_key_policy`)."""
        ebs_addon = self._addon(
            name,
            "aws-ebs-csi-driver",
            addon_versions.aws_ebs_csi_driver,
            pulumi.ResourceOptions(
                parent=self, depends_on=[node_group, early_addons[2], *ebs_role.ready]
            ),
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(
                    role_arn=ebs_role.role.arn, service_account=EBS_CSI_SERVICE_ACCOUNT
                )
            ],
        )

        self.ready: list[pulumi.Resource] = [
            self.eks_cluster,
            node_group,
            *early_addons,
            coredns,
            ebs_addon,
        ]
        """What in-cluster software waits for: control plane, system nodes, core add-ons."""

        kubeconfig_json = self.eks_cluster.kubeconfig_json
        self.kubeconfig: pulumi.Output[str] = typing.cast(
            pulumi.Output[str], pulumi.Output.secret(kubeconfig_json)
        )
        self.endpoint = kubeconfig_json.apply(api_server_endpoint)
        self.node_security_group_id = self.eks_cluster.node_security_group_id
        self.kubernetes_provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=api_access)),
        )
        # pulumi-kubernetes 4.x refuses to create an object that exists unless the provider
        # upserts (provider.py, upsertExistingObjects). Only objects an older layout of the
        # stack left behind outside Pulumi's state go through this one: JobSet's CRD, which
        # Trainer's subchart installed from its crds/ and Helm never removes.
        self.adopting_kubernetes_provider = k8s.Provider(
            f"{name}-k8s-adopting",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            upsert_existing_objects=True,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=api_access)),
        )
        storage_class(
            f"{name}-{DEFAULT_STORAGE_CLASS}",
            encrypted_gp3_class(
                DEFAULT_STORAGE_CLASS, reclaim_policy="Delete", default=True, tags=volume_tags
            ),
            pulumi.ResourceOptions(
                parent=self, provider=self.kubernetes_provider, depends_on=[ebs_addon]
            ),
        )
        self.register_outputs(
            {
                "name": name,
                "endpoint": self.endpoint,
                "kubeconfig": self.kubeconfig,
                "nodeSecurityGroupId": self.node_security_group_id,
            }
        )

    def _addon(
        self,
        cluster_name: str,
        addon_name: str,
        version: str,
        opts: pulumi.ResourceOptions,
        *,
        pod_identity_associations: list[aws.eks.AddonPodIdentityAssociationArgs] | None = None,
        configuration_values: dict[str, Any] | None = None,
    ) -> aws.eks.Addon:
        return aws.eks.Addon(
            f"{cluster_name}-{addon_name}",
            cluster_name=cluster_name,
            addon_name=addon_name,
            addon_version=version,
            configuration_values=(
                json.dumps(configuration_values, sort_keys=True) if configuration_values else None
            ),
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            pod_identity_associations=pod_identity_associations,
            opts=opts,
        )

    def _system_node_group(
        self,
        name: str,
        cluster: ClusterConfig,
        private_subnet_ids: list[pulumi.Input[str]],
        tags: dict[str, str],
        node_addons: list[aws.eks.Addon],
    ) -> aws.eks.NodeGroup:
        child = pulumi.ResourceOptions(parent=self)
        group = cluster.system_node_group
        node_role = role_with_policies(
            f"{name}-system-node",
            trust_policy=service_trust_policy("ec2.amazonaws.com"),
            managed_policies=list(EKS_NODE_POLICIES),
            opts=child,
        )
        launch_template = aws.ec2.LaunchTemplate(
            f"{name}-system",
            description=f"System nodes of EKS cluster {name}",
            update_default_version=True,
            **system_launch_template_args(name, group.root_volume_size_gib, tags),
            opts=child,
        )
        return aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=name,
            # A prefix, not a name: replacing the group (new instance types) creates first.
            node_group_name_prefix=f"{name}-system-",
            node_role_arn=node_role.role.arn,
            subnet_ids=private_subnet_ids,
            ami_type=ami_type(group.instance_types),
            capacity_type="ON_DEMAND",
            instance_types=group.instance_types,
            # Follows the control plane: a changed version is UpdateNodegroupVersion in place
            # (terraform-provider-aws internal/service/eks/node_group.go, version is not
            # ForceNew), after the cluster's own update, on which the group depends. No
            # releaseVersion: each such update takes the newest AMI release of the version.
            version=cluster.kubernetes_version,
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=group.min_size,
                desired_size=group.desired_size,
                max_size=group.max_size,
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=launch_template.id,
                version=launch_template.latest_version.apply(str),
            ),
            labels=dict(SYSTEM_NODE_SELECTOR),
            taints=[aws.eks.NodeGroupTaintArgs(**SYSTEM_TAINT)],
            node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(enabled=True),
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[self.eks_cluster, *node_addons, *node_role.ready]
            ),
        )
