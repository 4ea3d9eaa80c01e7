"""The ``Observability`` component: the metrics stack and what it needs around it.

It registers the ``monitoring`` namespace, the node exporters' namespace
(:data:`~components.metric_names.NODE_EXPORTERS_NAMESPACE`), the retained encrypted
StorageClass of Prometheus' volume, the kube-prometheus-stack release
(:func:`~components.observability.metrics_stack.monitoring_values`), Grafana's OIDC Secret,
organisations' plan (:mod:`~components.observability.grafana_orgs`), dashboards and CloudWatch
role, and, where ``observability.remoteWrite.enabled``, the Amazon
Managed Service for Prometheus workspace and the role Prometheus writes to it with. Slurm's
KEDA waits for the release (its ScaledObjects query this Prometheus).

The release was Slurm's (``Autoscaling``, issue 21) before it grew into the fleet's: its
Pulumi name and Helm name stay ``monitoring`` and an alias names its former place
(:func:`previous_release_urn`), so an existing stack updates the release in place.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import versions
from components.cluster import encrypted_gp3_class, storage_class
from components.config import PlatformConfig
from components.helm import release
from components.iam import eks_cluster_arn, pod_identity_trust_policy
from components.metric_names import (
    MONITORING_NAMESPACE,
    MONITORING_RELEASE,
    NODE_EXPORTERS_NAMESPACE,
    PROMETHEUS_SERVICE_ACCOUNT,
)
from components.notebooks import ebs_key_policy
from components.observability.efa_exporter import register_efa_exporter
from components.observability.grafana_orgs import grafana_orgs, orgs_config_map
from components.observability.ledger import first_step_pod_monitor
from components.observability.metrics_stack import (
    GRAFANA_CLIENT_SECRET_VARIABLE,
    GRAFANA_OIDC_SECRET,
    GRAFANA_POD_LABELS,
    GRAFANA_PORT,
    GRAFANA_SERVICE_ACCOUNT,
    GRAFANA_SERVICE_PORT,
    PROMETHEUS_STORAGE_CLASS,
    DashboardSpec,
    cloudwatch_read_policy,
    dashboard_config_map,
    dashboard_folders,
    monitoring_values,
    remote_write_policy,
    remote_write_spec,
    remote_write_url,
)
from components.observability.rules import register_fsx_alarms, register_rules
from components.observability.sources import register_sources
from components.tenancy import pod_security_labels
from components.web_uis import ui_service

COMPONENT_TYPE: Final = "trainingplatform:index:Observability"
RELEASE_TYPE: Final = "kubernetes:helm.sh/v3:Release"
PREVIOUS_PARENTS: Final = (
    "trainingplatform:index:TrainingPlatform",
    "trainingplatform:index:Slurm",
    "trainingplatform:index:Autoscaling",
)
"""The component types the release sat under before this component existed (components/slurm/
autoscaling.py at 53f67bb: ``TrainingPlatform`` > ``Slurm`` > ``Autoscaling``)."""
MONITORING_POD_SECURITY: Final = ("baseline", "restricted")
"""The monitoring namespace's Pod Security (enforced, warned and audited): nothing in it needs
the host (node-exporter is off; the exporters that read the host run in
:data:`NODE_EXPORTERS_POD_SECURITY`'s namespace)."""
NODE_EXPORTERS_POD_SECURITY: Final = ("privileged", "baseline")
"""Pod Security of :data:`~components.metric_names.NODE_EXPORTERS_NAMESPACE`, which holds only
the node-level exporters. Baseline refuses each of them (Kubernetes Pod Security Standards,
https://kubernetes.io/docs/concepts/security/pod-security-standards/, Baseline: "HostPath
Volumes", "Privileged Containers", "Capabilities"): the DCGM exporter mounts the kubelet's
pod-resources directory and adds SYS_ADMIN (NVIDIA/dcgm-exporter 4.5.3-4.8.2
deployment/templates/daemonset.yaml, deployment/values.yaml ``securityContext``),
neuron-monitor runs privileged (components/observability/sources.py), the EFA exporter mounts
the host's /sys (components/observability/efa_exporter.py). Enforce ``privileged``; warn and
audit ``baseline``, so every admission there is flagged and recorded as what it is. Only the
platform writes in this namespace: no team is bound to it."""
GRAFANA_ACCESS_SERVICE: Final = "grafana-access"
"""Grafana's Service for people where OIDC logs them in and ``cluster.uiExposure`` is the
internal load balancer; the chart's own ClusterIP Service serves port-forwards."""


def previous_release_urn(stack: str, project: str) -> str:
    """The URN the ``monitoring`` release had under Slurm's ``Autoscaling`` component.

    A URN is qualified by the types of every ancestor component (pulumi/pulumi
    pkg/resource/deploy, the step generator's URN of a registration), so moving the release to
    this component changes it; without the alias the engine would delete the old release and
    install a new one (Prometheus' samples with it).

    Args:
        stack: the stack's name.
        project: the project's name.
    """
    qualified = "$".join((*PREVIOUS_PARENTS, RELEASE_TYPE))
    return f"urn:pulumi:{stack}::{project}::{qualified}::{MONITORING_RELEASE}"


def grafana_client_policy(exposure_cidrs: Sequence[str]) -> dict[str, Any]:
    """Grafana's way in for people through the load balancer: its port from the client networks.

    Args:
        exposure_cidrs: ``cluster.uiExposure.clientCidrs`` (the load balancer keeps the
            client's address, :data:`components.web_uis.INTERNAL_LOAD_BALANCER`).
    """
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "allow-grafana-clients", "namespace": MONITORING_NAMESPACE},
        "spec": {
            "podSelector": {"matchLabels": dict(GRAFANA_POD_LABELS)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"ipBlock": {"cidr": cidr}} for cidr in exposure_cidrs],
                    "ports": [{"port": GRAFANA_PORT, "protocol": "TCP"}],
                }
            ],
        },
    }


class Observability(pulumi.ComponentResource):
    """The fleet's metrics stack (kube-prometheus-stack), Grafana, and remote write.

    Output: ``ready`` (the release: what KEDA's ScaledObjects and every ServiceMonitor,
    PodMonitor and PrometheusRule wait for, the CRDs being the release's).
    """

    def __init__(
        self,
        name: str,
        *,
        config: PlatformConfig,
        dashboards: Sequence[DashboardSpec],
        extra_kube_state_metrics_values: Mapping[str, Any],
        client_secret: pulumi.Input[str] | None,
        data_key_arn: pulumi.Input[str] | None,
        ebs_csi_role_name: pulumi.Input[str],
        volume_tags: Mapping[str, str],
        lustre_file_system_id: pulumi.Input[str] | None,
        cluster_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        adopting_kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Register the metrics stack.

        Args:
            name: prefix of child resource names.
            config: the validated stack configuration (``observability``, oidc, teams,
                ``cluster.uiExposure``).
            dashboards: (uid, folder, model JSON) of every dashboard; one ConfigMap each.
            extra_kube_state_metrics_values: values the cold-start ledger adds to
                kube-state-metrics' (deep-merged).
            client_secret: the OIDC client's secret (stack secret ``oidcClientSecret``) where
                the oidc section is set; None otherwise (Grafana by port-forward, local admin).
            data_key_arn: the stack's data key, which encrypts the volumes and the AMP
                workspace; None where the stack has none (AWS managed keys then).
            ebs_csi_role_name: the EBS CSI driver's role, allowed the data key's use.
            volume_tags: tags of the volumes the EBS CSI driver creates.
            lustre_file_system_id: the stack's Lustre file system, whose capacity and
                throughput CloudWatch alarms watch; None where the stack has none.
            cluster_ready: what everything waits for (the cluster, its system nodes).
            kubernetes_provider: provider of in-cluster resources.
            adopting_kubernetes_provider: the provider that adopts what exists: the namespace,
                which the release's Helm created on stacks that had Slurm.
            opts: resource options (parent, AWS provider).
        """
        super().__init__(COMPONENT_TYPE, name, None, opts)
        observability = config.observability
        grafana = observability.grafana.enabled
        oidc = grafana and config.oidc.client_id is not None and client_secret is not None
        child = pulumi.ResourceOptions(parent=self)
        in_cluster = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=cluster_ready
        )

        def pod_security(enforce: str, advise: str) -> dict[str, str]:
            return pod_security_labels(
                enforce, kubernetes_version=config.cluster.kubernetes_version, advise=advise
            )

        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={
                "name": MONITORING_NAMESPACE,
                "labels": pod_security(*MONITORING_POD_SECURITY),
            },
            opts=pulumi.ResourceOptions(
                parent=self, provider=adopting_kubernetes_provider, depends_on=cluster_ready
            ),
        )
        # Before the exporters, which the release's CRDs let the platform add below. Nothing
        # made it before this component, so there is nothing to adopt: the plain provider.
        nodes_namespace = k8s.core.v1.Namespace(
            f"{name}-nodes-namespace",
            metadata={
                "name": NODE_EXPORTERS_NAMESPACE,
                "labels": pod_security(*NODE_EXPORTERS_POD_SECURITY),
            },
            opts=in_cluster,
        )
        in_namespace = pulumi.ResourceOptions.merge(
            in_cluster, pulumi.ResourceOptions(depends_on=[*cluster_ready, namespace])
        )
        before_release: list[pulumi.Resource] = [namespace]
        class_ready: list[pulumi.Resource] = list(cluster_ready)
        if data_key_arn is not None:
            # The driver may use the key before the class can provision with it.
            class_ready.append(
                aws.iam.RolePolicy(
                    f"{name}-ebs-data-key",
                    role=ebs_csi_role_name,
                    policy=pulumi.Output.from_input(data_key_arn).apply(
                        lambda arn: json.dumps(ebs_key_policy(arn))
                    ),
                    opts=child,
                )
            )
        before_release.append(
            storage_class(
                f"{name}-storage-class",
                encrypted_gp3_class(
                    PROMETHEUS_STORAGE_CLASS,
                    kms_key_id=data_key_arn,
                    reclaim_policy="Retain",
                    default=False,
                    tags=volume_tags,
                ),
                pulumi.ResourceOptions(
                    parent=self, provider=kubernetes_provider, depends_on=class_ready
                ),
            )
        )
        cluster_arn = eks_cluster_arn(config.region, config.account_id, config.name)
        if oidc:
            assert client_secret is not None
            before_release.append(
                k8s.core.v1.Secret(
                    f"{name}-grafana-oidc",
                    metadata={"name": GRAFANA_OIDC_SECRET, "namespace": MONITORING_NAMESPACE},
                    string_data={GRAFANA_CLIENT_SECRET_VARIABLE: client_secret},
                    opts=in_namespace,
                )
            )
            exposure = config.cluster.ui_exposure
            if exposure.mode == "internalLoadBalancer":
                shape = ui_service(
                    exposure, selector=dict(GRAFANA_POD_LABELS), port=GRAFANA_SERVICE_PORT,
                    target_port=GRAFANA_PORT,
                )  # fmt: skip
                k8s.core.v1.Service(
                    f"{name}-grafana-access",
                    metadata={"name": GRAFANA_ACCESS_SERVICE, "namespace": MONITORING_NAMESPACE,
                              "annotations": shape["annotations"]},
                    spec=shape["spec"],
                    opts=in_namespace,
                )  # fmt: skip
                policy = grafana_client_policy(exposure.client_cidrs)
                k8s.networking.v1.NetworkPolicy(
                    f"{name}-grafana-clients",
                    metadata=typing.cast(Any, policy["metadata"]),
                    spec=typing.cast(Any, policy["spec"]),
                    opts=in_namespace,
                )
        if grafana:
            # Before the release: Grafana's pod mounts it, and its organisations' container
            # reads the plan from it.
            plan = orgs_config_map(grafana_orgs(config.teams))
            before_release.append(
                k8s.core.v1.ConfigMap(
                    f"{name}-grafana-orgs",
                    metadata=plan["metadata"],
                    data=plan["data"],
                    opts=in_namespace,
                )
            )
            folders = dashboard_folders(config.teams)
            for dashboard in dashboards:
                manifest = dashboard_config_map(dashboard, folders=folders)
                k8s.core.v1.ConfigMap(
                    f"{name}-{manifest['metadata']['name']}",
                    metadata=manifest["metadata"],
                    data=manifest["data"],
                    opts=in_namespace,
                )
            before_release += self._pod_identity(
                f"{name}-grafana-cloudwatch",
                cluster_arn=cluster_arn,
                cluster_name=config.name,
                service_account=GRAFANA_SERVICE_ACCOUNT,
                policy=pulumi.Output.from_input(
                    json.dumps(cloudwatch_read_policy(config.region, config.account_id))
                ),
                cluster_ready=cluster_ready,
            )
        remote_write: list[dict[str, Any]] | None = None
        self.workspace: aws.amp.Workspace | None = None
        if observability.remote_write.enabled:
            self.workspace = aws.amp.Workspace(
                f"{name}-workspace",
                alias=f"{config.name}-metrics",
                kms_key_arn=data_key_arn,
                opts=pulumi.ResourceOptions(parent=self, protect=config.protect_stateful_resources),
            )
            before_release += self._pod_identity(
                f"{name}-prometheus-remote-write",
                cluster_arn=cluster_arn,
                cluster_name=config.name,
                service_account=PROMETHEUS_SERVICE_ACCOUNT,
                policy=self.workspace.arn.apply(lambda arn: json.dumps(remote_write_policy(arn))),
                cluster_ready=cluster_ready,
            )
            remote_write = typing.cast(
                Any,
                self.workspace.id.apply(
                    lambda workspace: remote_write_spec(
                        remote_write_url(config.region, workspace), config.region
                    )
                ),
            )
        values = monitoring_values(
            config,
            oidc_secret=oidc,
            remote_write=remote_write,
            extra_kube_state_metrics_values=extra_kube_state_metrics_values,
        )
        self.release = release(
            MONITORING_RELEASE,
            versions.PROMETHEUS_STACK_CHART,
            namespace=MONITORING_NAMESPACE,
            values=values,
            create_namespace=True,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=kubernetes_provider,
                depends_on=[*cluster_ready, *before_release],
                aliases=[previous_release_urn(pulumi.get_stack(), pulumi.get_project())],
            ),
        )
        self.ready: list[pulumi.Resource] = [self.release]
        # What the release's CRDs and namespace let the platform add: the exporters each pool
        # needs, the controllers' monitors, the first-step PodMonitor and the rules.
        after_release = [*cluster_ready, self.release, nodes_namespace]
        self.sources = register_sources(
            config, ready=after_release, provider=kubernetes_provider, opts=child
        )
        self.efa_exporter = register_efa_exporter(
            config, ready=after_release, provider=kubernetes_provider, opts=child
        )
        monitor = first_step_pod_monitor()
        self.first_step_monitor = k8s.apiextensions.CustomResource(
            f"{name}-first-step",
            api_version=monitor["apiVersion"],
            kind=monitor["kind"],
            metadata=monitor["metadata"],
            spec=monitor["spec"],
            opts=pulumi.ResourceOptions(
                parent=self, provider=kubernetes_provider, depends_on=after_release
            ),
        )
        self.rules = register_rules(
            config, ready=after_release, provider=kubernetes_provider, opts=child
        )
        self.fsx_alarms = (
            register_fsx_alarms(name, config, file_system_id=lustre_file_system_id, opts=child)
            if lustre_file_system_id is not None
            else []
        )
        self.register_outputs({})

    def _pod_identity(
        self,
        name: str,
        *,
        cluster_arn: str,
        cluster_name: str,
        service_account: str,
        policy: pulumi.Output[str],
        cluster_ready: list[pulumi.Resource],
    ) -> list[pulumi.Resource]:
        """A role for one service account of the namespace, its policy and association."""
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            name,
            assume_role_policy=json.dumps(
                pod_identity_trust_policy(cluster_arn, MONITORING_NAMESPACE, service_account)
            ),
            opts=child,
        )
        permissions = aws.iam.RolePolicy(name, role=role.id, policy=policy, opts=child)
        association = aws.eks.PodIdentityAssociation(
            name,
            cluster_name=cluster_name,
            namespace=MONITORING_NAMESPACE,
            service_account=service_account,
            role_arn=role.arn,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*cluster_ready, permissions]),
        )
        return [role, permissions, association]
