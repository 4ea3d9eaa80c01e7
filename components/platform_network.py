"""The platform namespaces' ingress: a default deny, then each listener from its clients only.

Every namespace a platform release creates and runs a listener in gets
``default-deny-ingress`` and one ``allow-<listener>`` per listener that has a client; a
listener nobody calls (controllers' metrics while no scraper is installed for them, Trainer's
status server) is reached by nobody. Rules select pods by port, not by the charts' pod labels,
so a chart upgrade that renames its labels cannot silently close a webhook; each port is the
chart's own default (the values at the pinned version in the reference charts).

The API server calls webhooks and aggregated APIs from the EKS control plane's cross-account
network interfaces, which EKS places in the cluster's subnets (EKS user guide, "VPC and subnet
requirements") and which have no fixed address. A NetworkPolicy cannot select a security group,
and the VPC CNI's network policy agent matches sources by address, so those calls are admitted
from the VPC's block. Pods take addresses from the same block: a team pod can therefore open a
connection to a webhook's port (and to that port only). A webhook answers an AdmissionReview
with a verdict or a patch for the object it is sent and changes nothing itself, so what that
gives a pod is a load on the webhook, not a way past it. Every other listener (Prometheus,
which holds every team's Slurm metrics, the controllers' metrics, KEDA's gRPC) is closed to it.

The ``slurm`` namespace has its own, per-daemon rules (:mod:`components.slurm.network_policies`).
``kube-system`` is left to EKS (every pod must reach CoreDNS there, and EKS's add-ons run
there): it has no default deny. The platform's own releases in it are fenced one by one
instead (:func:`kube_system_fences`): a policy selects exactly their pods, by the labels their
charts give them, and admits only their clients.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import (
    acceptance_gate,
    device_plugins,
    karpenter,
    kuberay,
    notebooks,
    scheduling,
    trainer,
)
from components.metric_names import (
    EFA_EXPORTER_PORT,
    MONITORING_NAMESPACE,
    NODE_EXPORTERS_NAMESPACE,
    PROMETHEUS_PORT,
)
from components.observability import sources
from components.observability.metrics_stack import (
    ALERTMANAGER_PORT,
    GRAFANA_PORT,
    KUBE_STATE_METRICS_PORT,
)
from components.slurm.autoscaling import KEDA_NAMESPACE
from components.slurm.common import (
    CERT_MANAGER_NAMESPACE,
    MARIADB_OPERATOR_NAMESPACE,
    OPERATOR_NAMESPACE,
)
from components.tenancy import DEFAULT_DENY_POLICY, from_namespace, network_policy, tcp

KUBE_SYSTEM_NAMESPACE: Final = device_plugins.NAMESPACE
"""EKS's namespace, where Karpenter and the Neuron chart run (:func:`kube_system_fences`)."""
API_SERVER: Final = "api-server"
"""A client that is the Kubernetes API server (webhooks, aggregated APIs)."""


@dataclass(frozen=True)
class Listener:
    """One port that pods of a platform namespace serve, and who may open it.

    Args:
        name: the listener's name; its policy is ``allow-<name>``.
        port: its TCP port (the chart's default at the pinned version).
        clients: :data:`API_SERVER` or the namespaces whose pods call it.
        why: who calls it and what for, for the docs and the tests.
    """

    name: str
    port: int
    clients: tuple[str, ...]
    why: str


WEBHOOK_PORT: Final = 9443
"""controller-runtime's default webhook port, which Trainer, JobSet, Slinky, mariadb-operator
and KEDA keep."""

LISTENERS: Final[dict[str, tuple[Listener, ...]]] = {
    scheduling.NAMESPACE: (
        Listener("volcano-admission", 8443, (API_SERVER,),
                 "Volcano's admission webhooks (volcano 1.15.1 values custom.admission_port)"),
        Listener("volcano-scheduler-metrics", sources.VOLCANO_SCHEDULER_METRICS_PORT,
                 (MONITORING_NAMESPACE,),
                 "the scheduler's metrics (templates/scheduler.yaml), scraped by Prometheus"),
        Listener("volcano-controller-metrics", sources.VOLCANO_CONTROLLER_METRICS_PORT,
                 (MONITORING_NAMESPACE,),
                 "the controllers' metrics (templates/controllers.yaml), scraped by Prometheus"),
    ),
    trainer.NAMESPACE: (
        Listener("trainer-webhook", WEBHOOK_PORT, (API_SERVER,),
                 "Trainer's webhooks (kubeflow-trainer 2.3.0 values manager.config.webhook.port)"),
        Listener("trainer-metrics", sources.TRAINER_METRICS_PORT, (MONITORING_NAMESPACE,),
                 "the manager's metrics (values manager.config.metrics.bindAddress), scraped by "
                 "Prometheus"),
    ),
    trainer.JOBSET_NAMESPACE: (
        Listener("jobset-webhook", WEBHOOK_PORT, (API_SERVER,), "JobSet's webhooks"),
        Listener("jobset-metrics", sources.JOBSET_METRICS_PORT, (MONITORING_NAMESPACE,),
                 "the controller's metrics (jobset 0.12.0 main.go metrics-bind-address), "
                 "scraped by Prometheus with its token"),
    ),
    # The operator has no webhook (ray-project/kuberay v1.7.0 helm-chart/kuberay-operator/
    # templates) and nobody scrapes its metrics yet: closed.
    kuberay.NAMESPACE: (),
    # The acceptance agents listen on nothing: they call the API server (components/
    # acceptance_gate.py), and their check pods report through their termination message.
    acceptance_gate.NAMESPACE: (),
    # No webhook either; the chart's own policies open the hub's API to the proxy and to
    # notebook servers, the proxy's API to the hub, and the notebooks component opens the
    # proxy to the exposure's clients (components/notebooks.py): everything else is closed.
    notebooks.NAMESPACE: (),
    CERT_MANAGER_NAMESPACE: (
        Listener("cert-manager-webhook", 10250, (API_SERVER,),
                 "cert-manager's webhook (cert-manager v1.21.1 values webhook.securePort)"),
    ),
    OPERATOR_NAMESPACE: (
        Listener("slurm-operator-webhook", WEBHOOK_PORT, (API_SERVER,),
                 "the Slinky operator's webhook (slurm-operator 1.2.1 values "
                 "webhook.serverPort)"),
    ),
    MARIADB_OPERATOR_NAMESPACE: (
        Listener("mariadb-operator-webhook", WEBHOOK_PORT, (API_SERVER,),
                 "mariadb-operator's webhook (mariadb-operator 26.6.0 values webhook.port)"),
    ),
    KEDA_NAMESPACE: (
        Listener("keda-webhooks", WEBHOOK_PORT, (API_SERVER,),
                 "KEDA's admission webhooks (keda 2.20.2 values webhooks.port, default 9443)"),
        Listener("keda-metrics-apiserver", 6443, (API_SERVER,),
                 "KEDA's external metrics API, an aggregated API the HPA reads through the "
                 "API server (values service.portHttpsTarget)"),
        Listener("keda-operator-grpc", 9666, (KEDA_NAMESPACE,),
                 "the KEDA operator's gRPC, which its metrics API server asks for metrics"),
        Listener("keda-operator-metrics", sources.KEDA_OPERATOR_METRICS_PORT,
                 (MONITORING_NAMESPACE,),
                 "the KEDA operator's metrics (values prometheus.operator.port), scraped by "
                 "Prometheus"),
    ),
    # The metrics stack (components/observability/metrics_stack.py). node-exporter is off
    # (NODE_EXPORTER_ENABLED): no listener of its own.
    MONITORING_NAMESPACE: (
        Listener("prometheus", PROMETHEUS_PORT, (KEDA_NAMESPACE, MONITORING_NAMESPACE),
                 "Prometheus: KEDA's operator queries Slurm's demand; Grafana queries it; "
                 "Prometheus scrapes itself"),
        Listener("grafana", GRAFANA_PORT, (MONITORING_NAMESPACE,),
                 "Grafana (grafana 12.11.1 values service.targetPort): Prometheus scrapes its "
                 "metrics (kube-prometheus-stack 88.5.3 values grafana.serviceMonitor). People "
                 "come by port-forward, which enters through the kubelet, or with OIDC and the "
                 "internal load balancer by allow-grafana-clients (components/observability/"
                 "stack.py)"),
        Listener("kube-state-metrics", KUBE_STATE_METRICS_PORT, (MONITORING_NAMESPACE,),
                 "kube-state-metrics (kube-state-metrics 8.4.0 values service.port), scraped "
                 "by Prometheus"),
        Listener("alertmanager", ALERTMANAGER_PORT, (MONITORING_NAMESPACE,),
                 "Alertmanager's web port: Prometheus sends it alerts and scrapes it, Grafana's "
                 "Alertmanager datasource reads it (kube-prometheus-stack 88.5.3 values "
                 "grafana.sidecar.datasources.alertmanager)"),
        Listener("prometheus-config-reloader", 8080, (MONITORING_NAMESPACE,),
                 "the config reloaders' metrics (Prometheus', Alertmanager's), scraped by "
                 "Prometheus"),
        Listener("prometheus-operator", 10250, (API_SERVER, MONITORING_NAMESPACE),
                 "the Prometheus operator's admission webhook (kube-prometheus-stack 88.5.3 "
                 "values prometheusOperator.tls.internalPort) and its metrics, which "
                 "Prometheus scrapes"),
    ),
    # The node-level exporters (components/observability/stack.py NODE_EXPORTERS_POD_SECURITY),
    # scraped by the monitoring namespace's Prometheus through its monitors there.
    NODE_EXPORTERS_NAMESPACE: (
        Listener("efa-exporter", EFA_EXPORTER_PORT, (MONITORING_NAMESPACE,),
                 "the EFA exporter's metrics on the EFA pools' nodes (components/observability/"
                 "efa_exporter.py), which Prometheus scrapes through its PodMonitor"),
        Listener("dcgm-exporter", sources.DCGM_PORT, (MONITORING_NAMESPACE,),
                 "the DCGM exporter on the GPU nodes, scraped by Prometheus"),
        Listener("neuron-monitor", sources.NEURON_MONITOR_PORT, (MONITORING_NAMESPACE,),
                 "neuron-monitor's Prometheus bridge on the Trainium nodes, scraped by "
                 "Prometheus"),
    ),
}  # fmt: skip
"""Platform namespace -> its listeners that have clients. Listeners not here are closed."""


def platform_network_policies(namespace: str, *, vpc_cidr: str) -> list[dict[str, Any]]:
    """One platform namespace's ingress: a default deny and an allow per listener.

    Args:
        namespace: a namespace of :data:`LISTENERS`.
        vpc_cidr: the VPC's block, from which the EKS control plane calls webhooks and
            aggregated APIs (see the module's docstring for what else that admits).

    Raises:
        KeyError: when ``namespace`` is not a platform namespace of :data:`LISTENERS`.
    """

    def peer(client: str) -> dict[str, Any]:
        return {"ipBlock": {"cidr": vpc_cidr}} if client == API_SERVER else from_namespace(client)

    return [
        network_policy(DEFAULT_DENY_POLICY, namespace, pods={}, ingress=[]),
        *(
            network_policy(
                f"allow-{listener.name}",
                namespace,
                pods={},
                ingress=[
                    {"from": [peer(c) for c in listener.clients], "ports": tcp(listener.port)}
                ],
            )
            for listener in LISTENERS[namespace]
        ),
    ]


@dataclass(frozen=True)
class Fence:
    """Pods of one platform release in ``kube-system``, closed but for their clients.

    Args:
        name: the fence's name; its policy is ``fence-<name>``.
        pods: the ``matchLabels`` the release's chart gives these pods (and only them).
        port: the TCP port its clients open; ``None``: no client (the pods are closed).
        clients: NetworkPolicy peers of the pods that call ``port``.
        why: what listens, who calls it, and from which chart template.
    """

    name: str
    pods: dict[str, str]
    port: int | None
    clients: tuple[dict[str, Any], ...]
    why: str


NEURON_SCHEDULER_EXTENSION_PODS: Final = {
    "app.kubernetes.io/component": "k8s-neuron-scheduler",
    "app.kubernetes.io/instance": device_plugins.NEURON_RELEASE,
}
"""The Neuron scheduler extension's pods: neuron-helm-chart 1.9.0 templateLabels of
``neuron-scheduler`` with its values' ``scheduler.fullnameOverride: k8s-neuron-scheduler``."""
NEURON_SCHEDULER_PODS: Final = {
    "app.kubernetes.io/component": device_plugins.NEURON_SCHEDULER_NAME,
    "app.kubernetes.io/instance": device_plugins.NEURON_RELEASE,
}
"""The second scheduler's pods (``scheduler.customScheduler.fullnameOverride: my-scheduler``)."""
KARPENTER_PODS: Final = {
    "app.kubernetes.io/name": "karpenter",
    "app.kubernetes.io/instance": karpenter.RELEASE,
}
"""Karpenter's controller pods: karpenter 1.14.1 selectorLabels (chart name, release name)."""

NEURON_SCHEDULER_EXTENSION_PORT: Final = 12345
KARPENTER_METRICS_PORT: Final = 8080

NEURON_FENCES: Final = (
    Fence(
        "neuron-scheduler-extension",
        NEURON_SCHEDULER_EXTENSION_PODS,
        NEURON_SCHEDULER_EXTENSION_PORT,
        ({"podSelector": {"matchLabels": NEURON_SCHEDULER_PODS}},),
        "the Neuron scheduler extension's filter and bind (neuron-helm-chart 1.9.0 values "
        "scheduler.env PORT), called only by the second scheduler, whose extender URL is its "
        "Service (templates/scheduler/scheduler-custom-config.yaml)",
    ),
    Fence(
        "neuron-scheduler",
        NEURON_SCHEDULER_PODS,
        None,
        (),
        "the second scheduler's secure port (10259: health and metrics), which nobody but "
        "the kubelet's probes opens; it calls out (API server, extension) and serves nobody",
    ),
)  # fmt: skip
"""Fences of the Neuron chart's scheduler pods, present when a Trainium pool exists."""

KARPENTER_FENCE: Final = Fence(
    "karpenter",
    KARPENTER_PODS,
    KARPENTER_METRICS_PORT,
    (from_namespace(MONITORING_NAMESPACE),),
    "Karpenter's metrics (karpenter 1.14.1 values controller.metrics.port), for the "
    "monitoring namespace's Prometheus, which selects every ServiceMonitor in the cluster. "
    "Karpenter 1.14.1 serves no webhook (charts/karpenter/templates has none) and its "
    "health port (8081) is probed by the kubelet",
)
"""Karpenter's controller pods, present in every stack."""


def kube_system_fences(*, neuron_scheduler: bool) -> tuple[Fence, ...]:
    """The fences of the platform's releases in ``kube-system``.

    Args:
        neuron_scheduler: whether the Neuron chart (and its scheduler extension) is installed,
            i.e. the stack has a Trainium pool (:func:`components.device_plugins.neuron_pools`).
    """
    return (KARPENTER_FENCE, *(NEURON_FENCES if neuron_scheduler else ()))


def fence_network_policy(fence: Fence) -> dict[str, Any]:
    """The NetworkPolicy of one :class:`Fence`: its pods isolated, its port open to its clients.

    The kubelet's probes come from the node's own address, which the VPC CNI's policy agent
    always admits, so a fence does not list them.

    Args:
        fence: the pods and their clients.
    """
    ingress = (
        [] if fence.port is None else [{"from": list(fence.clients), "ports": tcp(fence.port)}]
    )
    return network_policy(
        f"fence-{fence.name}",
        KUBE_SYSTEM_NAMESPACE,
        pods={"matchLabels": dict(fence.pods)},
        ingress=ingress,
    )


class PlatformNetwork(pulumi.ComponentResource):
    """The NetworkPolicies of the platform namespaces the stack's releases created."""

    def __init__(
        self,
        name: str,
        *,
        namespaces: dict[str, list[pulumi.Resource]],
        vpc_cidr: str,
        fences: tuple[Fence, ...],
        kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Register each namespace's policies after the release that creates the namespace.

        Args:
            name: prefix of child resource names.
            namespaces: platform namespace -> what creates it (the components whose Helm
                releases create it with ``createNamespace``); each must be in
                :data:`LISTENERS`.
            vpc_cidr: the VPC's block (:func:`platform_network_policies`).
            fences: the platform's releases in ``kube-system`` to fence
                (:func:`kube_system_fences`); that namespace exists before any release.
            kubernetes_provider: the provider of in-cluster resources.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:PlatformNetwork", name, None, opts)
        for namespace, creators in sorted(namespaces.items()):
            for manifest in platform_network_policies(namespace, vpc_cidr=vpc_cidr):
                k8s.networking.v1.NetworkPolicy(
                    f"{namespace}-{manifest['metadata']['name']}",
                    metadata=typing.cast(Any, manifest["metadata"]),
                    spec=typing.cast(Any, manifest["spec"]),
                    opts=pulumi.ResourceOptions(
                        parent=self, provider=kubernetes_provider, depends_on=creators
                    ),
                )
        for fence in fences:
            manifest = fence_network_policy(fence)
            k8s.networking.v1.NetworkPolicy(
                f"{KUBE_SYSTEM_NAMESPACE}-{manifest['metadata']['name']}",
                metadata=typing.cast(Any, manifest["metadata"]),
                spec=typing.cast(Any, manifest["spec"]),
                opts=pulumi.ResourceOptions(parent=self, provider=kubernetes_provider),
            )
        self.register_outputs({})
