"""The metrics sources: the exporters each pool needs and the monitors of the controllers.

Each exporter runs only on the pools whose hardware it reads, selected by Karpenter's NodePool
label, and tolerates everything those nodes carry: the accelerator taint, the pool's own taints,
the Slurm reservation where the pool keeps nodes for Slurm, and the acceptance and unhealthy
taints (:mod:`components.health_marks`), so a node that waits for acceptance or failed it is
still seen. Every node-level series carries the node's name (``node``) and its Karpenter
NodePool (``nodepool``), from the node's own labels (``attachMetadata.node``). The exporters run
in :data:`~components.metric_names.NODE_EXPORTERS_NAMESPACE`, whose Pod Security admits what
they need of the host (the monitoring namespace's baseline does not); their monitors stay in
the monitoring namespace and select them there.

- GPU pools: NVIDIA's DCGM exporter (its chart at :data:`components.versions.DCGM_EXPORTER_CHART`),
  which attributes each GPU's series to the pod and namespace that hold the GPU through the
  kubelet's pod-resources socket; its counters file is a ConfigMap of ours.
- Trainium pools: neuron-monitor with its Prometheus bridge, a DaemonSet of ours (the Neuron
  chart installs none).
- Controllers: Volcano's scheduler and controllers, Karpenter, Trainer and JobSet (HTTPS, the
  latter with authentication and authorization), KEDA's operator (its chart's monitor, switched
  on in components/slurm/autoscaling.py). Slurm's slurmctld is scraped through the monitor the
  Slinky operator makes. The acceptance agent serves no metrics (it listens on nothing:
  components/platform_network.py), so it has no monitor; its verdicts are node labels and
  annotations.

Pure builders first, then :func:`register_sources`, which registers everything for a stack.
"""

from __future__ import annotations

import hashlib
import typing
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import device_plugins, karpenter, scheduling, trainer, versions, workloads
from components.config import NodePoolConfig, PlatformConfig
from components.config.slurm import slurm_held_nodes
from components.helm import release
from components.metric_names import (
    MONITORING_NAMESPACE,
    NODE_EXPORTERS_NAMESPACE,
    PROMETHEUS_SERVICE_ACCOUNT,
    SCRAPE_INTERVAL,
)
from components.node_pools import (
    NODE_POOL_LABEL,
    required_node_affinity,
    slurm_node_pool_name,
)
from components.observability import metric_catalog

MONITORING_API: Final = "monitoring.coreos.com/v1"
NODE_TARGET_LABEL: Final = "node"
"""Label of every node-level series: the node's name."""
POOL_TARGET_LABEL: Final = "nodepool"
"""Label of every node-level series: the node's Karpenter NodePool (``karpenter.sh/nodepool``),
as Karpenter's own metrics and the cold-start ledger name it."""

DCGM_RELEASE: Final = "dcgm-exporter"
DCGM_JOB: Final = DCGM_RELEASE
"""The ``job`` label of the DCGM exporter's series: its ServiceMonitor sets no ``jobLabel``, so
the job is the Service's name (prometheus-operator pkg/prometheus/promcfg.go,
generateServiceMonitorConfig, read at v0.93.0), the chart's fullname (NVIDIA/dcgm-exporter
4.5.3-4.8.2 deployment/templates/service.yaml), which ``fullnameOverride`` fixes. The alerts
read DCGM's fields only from this job."""
DCGM_PORT: Final = 9400
"""The exporter's port (NVIDIA/dcgm-exporter 4.5.3-4.8.2 deployment/values.yaml service.port)."""
DCGM_COUNTERS_CONFIGMAP: Final = "dcgm-exporter-counters"
DCGM_COUNTERS_KEY: Final = "counters.csv"
DCGM_COUNTERS_PATH: Final = f"/etc/dcgm-exporter/{DCGM_COUNTERS_KEY}"
DCGM_POD_LABELS: Final = {
    "app.kubernetes.io/name": DCGM_RELEASE,
    "app.kubernetes.io/instance": DCGM_RELEASE,
}
"""The chart's selector labels of its pods and Service (deployment/templates/_helpers.tpl
``dcgm-exporter.selectorLabels``: the chart's name and the release's)."""


NEURON_MONITOR_NAME: Final = "neuron-monitor"
NEURON_MONITOR_PORT: Final = 8000
"""The Prometheus bridge's port (aws-neuron/aws-neuron-sdk v2.32.0
src/k8/k8s-neuron-monitor-daemonset.yml, ``--port 8000``)."""
NEURON_MONITOR_LABELS: Final = {"app.kubernetes.io/name": NEURON_MONITOR_NAME}
NODE_EXPORTER_PRIORITY_CLASS: Final = "system-node-critical"
"""As the device plugins and the acceptance agent: an exporter that cannot be scheduled on a
full node leaves that node unseen."""

PROMETHEUS_TOKEN_FILE: Final = "/var/run/secrets/kubernetes.io/serviceaccount/token"
"""Prometheus' own service account token, which it presents to JobSet's metrics endpoint,
whose authorization filter asks the API server (SubjectAccessReview) whether that account may
``get`` the non-resource URL ``/metrics``: :func:`metrics_reader_rbac` says it may. (The
chart's own role grants it too while ``global.rbac.create`` holds: kube-prometheus-stack
88.5.3 templates/prometheus/clusterrole.yaml; ours does not depend on that.)"""

METRICS_READER_ROLE: Final = "trainingplatform:metrics-reader"
"""ClusterRole: ``get`` on the non-resource URL ``/metrics``, what controller-runtime's
authorization filter asks the API server about before it serves JobSet's metrics."""

VOLCANO_SCHEDULER_METRICS_PORT: Final = 8080
VOLCANO_CONTROLLER_METRICS_PORT: Final = 8081
TRAINER_METRICS_PORT: Final = 8443
JOBSET_METRICS_PORT: Final = 8443
KEDA_OPERATOR_METRICS_PORT: Final = 8080
"""keda 2.20.2 values prometheus.operator.port."""


def _exporter(name: str) -> workloads.NodeExporter:
    return next(e for e in workloads.NODE_EXPORTERS if e.name == name)


def exporter_pools(pools: Collection[NodePoolConfig], exporter: str) -> list[NodePoolConfig]:
    """The pools on whose nodes ``exporter`` runs (:data:`components.workloads.NODE_EXPORTERS`).

    Args:
        pools: the stack's accelerator pools.
        exporter: the exporter's name (``dcgm-exporter``, ``neuron-monitor``).
    """
    return [pool for pool in pools if _exporter(exporter).runs_on(pool)]


def node_pool_names(pools: Collection[NodePoolConfig], slurm_pools: Collection[str]) -> list[str]:
    """The Karpenter NodePools of ``pools``, their Slurm NodePools included.

    Each pool's own, and its ``<pool>-slurm`` where it keeps nodes for Slurm
    (components/node_pools.py).
    """
    names = {pool.name for pool in pools}
    names |= {slurm_node_pool_name(pool) for pool in pools if pool.name in slurm_pools}
    return sorted(names)


def pool_affinity(node_pools: list[str]) -> dict[str, Any]:
    """Required node affinity: only nodes of these Karpenter NodePools.

    Args:
        node_pools: NodePool names (:func:`node_pool_names`).
    """
    return required_node_affinity(NODE_POOL_LABEL, node_pools)


def exporter_tolerations(
    pools: Sequence[NodePoolConfig], slurm_pools: Collection[str] = ()
) -> list[dict[str, str]]:
    """Tolerations of a node-level exporter on ``pools``: every taint their nodes may carry.

    The pools' accelerator taints (GPU and Trainium pools both attach EFA, so the EFA exporter
    may span both), the pools' own taints, the Slurm reservation where held, the acceptance and
    unhealthy taints (:func:`components.device_plugins.extra_tolerations`, so the policy that
    holds the device plugins to the gated pools' taints holds here too), and the FSx startup
    taint (:data:`components.node_pools.FSX_STARTUP_TAINT`): the exporters read no file system,
    and a node whose FSx agent never comes up is one to see. One list for the three exporters
    (DCGM, neuron-monitor, EFA), each ``Exists`` by key and effect.

    Args:
        pools: the pools the exporter runs on.
        slurm_pools: names of pools that keep nodes for Slurm; default none.
    """
    return device_plugins.node_daemon_tolerations(pools, slurm_pools)


def node_relabelings() -> list[dict[str, Any]]:
    """Target relabelings of a node-level exporter: its node's name and NodePool.

    ``node`` and ``nodepool`` come from the node the target runs on (which
    ``attachMetadata.node`` exposes); the target's own pod labels are dropped, as they would
    clash with the series' attribution to the workload's pod.
    """
    pool_meta = "__meta_kubernetes_node_label_" + "".join(
        c if c.isalnum() else "_" for c in NODE_POOL_LABEL
    )
    return [
        {
            "action": "replace",
            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
            "targetLabel": NODE_TARGET_LABEL,
        },
        {"action": "replace", "sourceLabels": [pool_meta], "targetLabel": POOL_TARGET_LABEL},
        # The operator adds namespace, pod, container, service and endpoint labels of the
        # exporter's own pod before these (prometheus-operator v0.93.1
        # pkg/prometheus/promcfg.go); the exporter's series name the workload's pod and
        # namespace themselves, so the target's are dropped.
        {"action": "labeldrop", "regex": "pod|namespace|container|service|endpoint"},
    ]


COUNTERS_DIGEST_ANNOTATION: Final = "trainingplatform.io/counters-sha256"
"""Annotation of the DCGM exporter's pods: the digest of its counters file."""


def dcgm_values(
    gpu_pools: list[NodePoolConfig], slurm_pools: Collection[str] = (), counters_csv: str = ""
) -> dict[str, Any]:
    """Values of the dcgm-exporter chart: on the GPU pools, pods attributed, our counters.

    No ServiceMonitor of the chart's: ours adds the node's pool (:func:`node_service_monitor`).

    At 4.8.2 the chart mounts the kubelet's pod-resources directory (``kubeletPath``) and sets
    ``DCGM_EXPORTER_KUBERNETES=true`` (deployment/templates/daemonset.yaml): the exporter asks
    the kubelet which pod holds each GPU (internal/pkg/transformation/kubernetes.go, by GPU UUID,
    the NVIDIA device plugin's default device IDs) and labels its series ``pod``, ``namespace``
    and ``container`` (internal/pkg/transformation/const.go). It runs as root with SYS_ADMIN
    (the chart's securityContext) for the socket and the profiling fields.

    The counters file is mounted by ``subPath``, which a ConfigMap's update never reaches: the
    pods carry the file's digest (``podAnnotations``), so a new list of fields rolls them.

    Args:
        gpu_pools: the GPU pools; their NodePools, taints and Slurm reservation.
        slurm_pools: pools that keep nodes for Slurm.
        counters_csv: the counters file the ConfigMap holds (:func:`dcgm_counters_configmap`);
            default empty (a digest of nothing).
    """
    exporter = _exporter(DCGM_RELEASE)
    # The exporter starts its own host engine (no ``-r``). The EKS node monitoring agent runs
    # another nv-hostengine on each GPU node (hostPort 5555; aws/eks-node-monitoring-agent
    # v1.7.0 charts/eks-node-monitoring-agent/templates/dcgm-daemonset.yaml), DCGM 4.6.1
    # (its Dockerfile, DCGM_VERSION), not the exporter's 4.5.3, and the two releases would
    # have to move together; two engines contend only for the profiling fields, which the
    # agent does not watch (monitors/nvidia/dcgm/dcgm_client.go watches no DCGM_FI_PROF_*).
    return {
        "fullnameOverride": DCGM_RELEASE,
        "arguments": ["-f", DCGM_COUNTERS_PATH],
        "podAnnotations": {
            COUNTERS_DIGEST_ANNOTATION: hashlib.sha256(counters_csv.encode()).hexdigest()
        },
        "affinity": pool_affinity(node_pool_names(gpu_pools, slurm_pools)),
        "tolerations": exporter_tolerations(gpu_pools, slurm_pools),
        "priorityClassName": NODE_EXPORTER_PRIORITY_CLASS,
        "resources": {
            "requests": {"cpu": f"{exporter.cpu_millis}m", "memory": f"{exporter.memory_mib}Mi"},
            "limits": {"cpu": "200m", "memory": "512Mi"},
        },
        "kubeletPath": "/var/lib/kubelet/pod-resources",
        "serviceMonitor": {"enabled": False},
        # The chart's own ConfigMap (exporter-metrics-config-map) stays, unread: its volume is
        # replaced by ours, which the catalog's list of fields fills.
        "extraConfigMapVolumes": [
            {"name": "counters", "configMap": {"name": DCGM_COUNTERS_CONFIGMAP}}
        ],
        "extraVolumeMounts": [
            {
                "name": "counters",
                "mountPath": DCGM_COUNTERS_PATH,
                "subPath": DCGM_COUNTERS_KEY,
                "readOnly": True,
            }
        ],
    }


def dcgm_counters_configmap(counters_csv: str) -> dict[str, Any]:
    """The ConfigMap of the exporter's counters file.

    Args:
        counters_csv: the file: one ``DCGM field, Prometheus type, help`` per line, ``#``
            comments (the exporter's format, etc/default-counters.csv).

    Raises:
        ValueError: when a line is not a DCGM field, type and help.
    """
    for number, line in enumerate(counters_csv.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [part.strip() for part in line.split(",", 2)]
        if len(parts) != 3 or not parts[0].startswith("DCGM_FI_") or not parts[1]:
            raise ValueError(
                f"DCGM counters line {number}: {line!r} is not 'DCGM_FI_<field>, <type>, <help>'"
            )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": DCGM_COUNTERS_CONFIGMAP, "namespace": NODE_EXPORTERS_NAMESPACE},
        "data": {DCGM_COUNTERS_KEY: counters_csv},
    }


def node_service_monitor(
    name: str, *, pods: Mapping[str, str], port: str, interval: str = SCRAPE_INTERVAL
) -> dict[str, Any]:
    """A ServiceMonitor of a node-level exporter's Service in the node exporters' namespace.

    The monitor stays in the monitoring namespace, beside Prometheus' other configuration, and
    selects the Service in :data:`~components.metric_names.NODE_EXPORTERS_NAMESPACE`: a monitor
    selects targets in its own namespace unless ``namespaceSelector`` names others
    (prometheus-operator v0.93.1 Documentation/api-reference/api.md, ``NamespaceSelector``).
    The privileged namespace then holds only the pods that need the host.

    Args:
        name: the monitor's name.
        pods: the Service's labels (the chart's selector labels).
        port: the Service's port name.
        interval: scrape interval; default the stack's.
    """
    return {
        "apiVersion": MONITORING_API,
        "kind": "ServiceMonitor",
        "metadata": {"name": name, "namespace": MONITORING_NAMESPACE},
        "spec": {
            "attachMetadata": {"node": True},
            "selector": {"matchLabels": dict(pods)},
            "namespaceSelector": {"matchNames": [NODE_EXPORTERS_NAMESPACE]},
            "endpoints": [
                {
                    "port": port,
                    "path": "/metrics",
                    "interval": interval,
                    "relabelings": node_relabelings(),
                }
            ],
        },
    }


def neuron_monitor_daemonset(
    trainium_pools: list[NodePoolConfig], slurm_pools: Collection[str] = ()
) -> dict[str, Any]:
    """neuron-monitor and its Prometheus bridge on every node of the Trainium pools.

    The shape the Neuron SDK documents (aws-neuron/aws-neuron-sdk v2.32.0
    src/k8/k8s-neuron-monitor-daemonset.yml): the image's entrypoint runs neuron-monitor with
    its packaged configuration and serves its output on port 8000; privileged, as there, for
    the Neuron devices and the driver's sysfs, which no device plugin hands a monitor (asking
    for a device would take it from training). Its resources are the documented ones.

    Args:
        trainium_pools: the Trainium pools; their NodePools, taints and Slurm reservation.
        slurm_pools: pools that keep nodes for Slurm.
    """
    exporter = _exporter(NEURON_MONITOR_NAME)
    probe = {"tcpSocket": {"port": NEURON_MONITOR_PORT}, "periodSeconds": 30}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": NEURON_MONITOR_NAME,
            "namespace": NODE_EXPORTERS_NAMESPACE,
            "labels": dict(NEURON_MONITOR_LABELS),
        },
        "spec": {
            "selector": {"matchLabels": dict(NEURON_MONITOR_LABELS)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": dict(NEURON_MONITOR_LABELS)},
                "spec": {
                    "automountServiceAccountToken": False,
                    "priorityClassName": NODE_EXPORTER_PRIORITY_CLASS,
                    "affinity": pool_affinity(node_pool_names(trainium_pools, slurm_pools)),
                    "tolerations": exporter_tolerations(trainium_pools, slurm_pools),
                    "containers": [
                        {
                            "name": NEURON_MONITOR_NAME,
                            "image": versions.NEURON_MONITOR_IMAGE,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["/opt/bin/entrypoint.sh"],
                            "args": [
                                "--port",
                                str(NEURON_MONITOR_PORT),
                                "--neuron-monitor-config",
                                "/opt/aws/neuron/bin/neuron-monitor.conf",
                            ],
                            "ports": [
                                {
                                    "name": "metrics",
                                    "containerPort": NEURON_MONITOR_PORT,
                                    "protocol": "TCP",
                                }
                            ],
                            "env": [{"name": "GOMEMLIMIT", "value": "160MiB"}],
                            "resources": {
                                "requests": {
                                    "cpu": f"{exporter.cpu_millis}m",
                                    "memory": f"{exporter.memory_mib}Mi",
                                },
                                "limits": {"cpu": "500m", "memory": "256Mi"},
                            },
                            "livenessProbe": {**probe, "initialDelaySeconds": 30},
                            "readinessProbe": dict(probe),
                            "securityContext": {"privileged": True},
                        }
                    ],
                },
            },
        },
    }


def neuron_pod_monitor() -> dict[str, Any]:
    """The PodMonitor of the Neuron monitors (no Service: one pod per node is the target).

    In the monitoring namespace, selecting the pods in the node exporters' namespace, as
    :func:`node_service_monitor`.
    """
    return {
        "apiVersion": MONITORING_API,
        "kind": "PodMonitor",
        "metadata": {"name": NEURON_MONITOR_NAME, "namespace": MONITORING_NAMESPACE},
        "spec": {
            "attachMetadata": {"node": True},
            "selector": {"matchLabels": dict(NEURON_MONITOR_LABELS)},
            "namespaceSelector": {"matchNames": [NODE_EXPORTERS_NAMESPACE]},
            "podMetricsEndpoints": [
                {
                    "port": "metrics",
                    "path": "/",
                    "interval": SCRAPE_INTERVAL,
                    "relabelings": node_relabelings(),
                }
            ],
        },
    }


def controller_service_monitor(
    name: str,
    *,
    namespace: str,
    service_labels: Mapping[str, str],
    port: str,
    https: bool = False,
    bearer_token: bool = False,
) -> dict[str, Any]:
    """A ServiceMonitor of one controller's metrics Service, in the monitoring namespace.

    Args:
        name: the monitor's name.
        namespace: the controller's namespace.
        service_labels: labels of its metrics Service.
        port: the Service's port name.
        https: the controller serves metrics over HTTPS with a self-signed certificate
            (controller-runtime's secure serving): skip verification, as the charts' own
            monitors do. Default false.
        bearer_token: present Prometheus' service account token (for a controller that
            authenticates and authorizes the scraper). Default false.
    """
    endpoint: dict[str, Any] = {"port": port, "path": "/metrics", "interval": SCRAPE_INTERVAL}
    if https:
        endpoint["scheme"] = "https"
        endpoint["tlsConfig"] = {"insecureSkipVerify": True}
    if bearer_token:
        endpoint["bearerTokenFile"] = PROMETHEUS_TOKEN_FILE
    return {
        "apiVersion": MONITORING_API,
        "kind": "ServiceMonitor",
        "metadata": {"name": name, "namespace": MONITORING_NAMESPACE},
        "spec": {
            "selector": {"matchLabels": dict(service_labels)},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [endpoint],
        },
    }


def controller_monitors() -> list[dict[str, Any]]:
    """The monitors of the controllers every stack runs: Volcano, Karpenter, Trainer, JobSet.

    - Volcano's scheduler and controllers serve metrics while ``custom.scheduler_metrics_enable``
      and ``custom.controller_metrics_enable`` are on (both default true, set explicitly in
      components/scheduling.py) on Services labelled ``app: volcano-scheduler`` (port 8080) and
      ``app: volcano-controller`` (8081), port name ``metrics`` (volcano-sh/volcano v1.15.1
      installer/helm/chart/volcano/templates/{scheduler,controllers}.yaml). The chart makes no
      ServiceMonitor; ``custom.metrics_enable`` would install a Prometheus, kube-state-metrics
      and Grafana of its own (templates/prometheus.yaml, kubestatemetrics.yaml, grafana.yaml),
      so it stays off.
    - Karpenter's Service ``karpenter`` serves ``http-metrics`` (aws/karpenter-provider-aws
      v1.14.1 charts/karpenter/templates/service.yaml). Its chart's ServiceMonitor renders only
      if the CRD exists when Karpenter is installed (templates/servicemonitor.yaml checks
      ``.Capabilities``), which the first ``up`` does before the metrics stack, so this one is
      ours.
    - Trainer's manager serves ``monitoring-port`` (8443) over HTTPS with secure serving and no
      authorization filter (kubeflow/trainer v2.3.0 pkg/config/config.go ``addTo``;
      charts/kubeflow-trainer/templates/manager/service.yaml).
    - JobSet's controller serves ``https`` (8443) with controller-runtime's authentication and
      authorization filter (kubernetes-sigs/jobset v0.12.0 main.go,
      ``filters.WithAuthenticationAndAuthorization``; its Service is
      charts/jobset/templates/prometheus/manager_metrics_service.yaml, rendered always): the
      scraper presents its token and needs ``get`` on ``/metrics`` (:data:`PROMETHEUS_TOKEN_FILE`).
    """
    return [
        controller_service_monitor(
            "volcano-scheduler",
            namespace=scheduling.NAMESPACE,
            service_labels={"app": "volcano-scheduler"},
            port="metrics",
        ),
        controller_service_monitor(
            "volcano-controllers",
            namespace=scheduling.NAMESPACE,
            service_labels={"app": "volcano-controller"},
            port="metrics",
        ),
        controller_service_monitor(
            "karpenter",
            namespace=karpenter.NAMESPACE,
            service_labels={
                "app.kubernetes.io/name": "karpenter",
                "app.kubernetes.io/instance": karpenter.RELEASE,
            },
            port="http-metrics",
        ),
        controller_service_monitor(
            "kubeflow-trainer",
            namespace=trainer.NAMESPACE,
            service_labels={
                "app.kubernetes.io/name": "kubeflow-trainer",
                "app.kubernetes.io/instance": trainer.RELEASE,
                "app.kubernetes.io/component": "manager",
            },
            port="monitoring-port",
            https=True,
        ),
        controller_service_monitor(
            "jobset",
            namespace=trainer.JOBSET_NAMESPACE,
            service_labels={
                "app.kubernetes.io/name": "jobset",
                "app.kubernetes.io/instance": trainer.JOBSET_RELEASE,
                "app.kubernetes.io/component": "controller",
            },
            port="https",
            https=True,
            bearer_token=True,
        ),
    ]


def metrics_reader_rbac() -> list[dict[str, Any]]:
    """The ClusterRole and binding that let Prometheus read controllers' ``/metrics``.

    controller-runtime's ``filters.WithAuthenticationAndAuthorization`` (JobSet's metrics)
    authorizes the non-resource URL ``/metrics`` with verb ``get``
    (kubernetes-sigs/jobset v0.12.0 main.go; the chart's own ClusterRole for it,
    charts/jobset/templates/rbac/auth_proxy_client_clusterrole.yaml, is bound to JobSet's
    controller, not to a scraper).
    """
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": METRICS_READER_ROLE},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": METRICS_READER_ROLE},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": METRICS_READER_ROLE,
            },
            "subjects": [
                {
                    "kind": "ServiceAccount",
                    "name": PROMETHEUS_SERVICE_ACCOUNT,
                    "namespace": MONITORING_NAMESPACE,
                }
            ],
        },
    ]


def _object(
    manifest: dict[str, Any], opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource | k8s.apps.v1.DaemonSet | k8s.core.v1.ConfigMap:
    name = f"{manifest['metadata']['namespace']}-{manifest['metadata']['name']}"
    kind = manifest["kind"]
    metadata = typing.cast(Any, manifest["metadata"])
    if kind == "ConfigMap":
        return k8s.core.v1.ConfigMap(name, metadata=metadata, data=manifest["data"], opts=opts)
    if kind == "DaemonSet":
        spec = typing.cast(Any, manifest["spec"])
        return k8s.apps.v1.DaemonSet(name, metadata=metadata, spec=spec, opts=opts)
    return k8s.apiextensions.CustomResource(
        f"{name}-{kind.lower()}",
        api_version=manifest["apiVersion"],
        kind=kind,
        metadata=metadata,
        spec=manifest["spec"],
        opts=opts,
    )


def register_sources(
    config: PlatformConfig,
    *,
    ready: list[pulumi.Resource],
    provider: pulumi.ProviderResource,
    opts: pulumi.ResourceOptions,
    counters_csv: str | None = None,
) -> list[pulumi.Resource]:
    """Register the metrics sources the stack's pools and controllers need.

    Args:
        config: the validated stack configuration (its pools and Slurm's reservations).
        ready: what the sources wait for: the metrics stack's release (the monitoring
            namespace and the Prometheus Operator's CRDs), the node exporters' namespace
            (:data:`~components.metric_names.NODE_EXPORTERS_NAMESPACE`) and the cluster.
        provider: the Kubernetes provider of in-cluster resources.
        opts: options of the parent (the observability component).
        counters_csv: the DCGM exporter's counters file (:func:`dcgm_counters_configmap`);
            default: the fields the platform asks for
            (:func:`components.observability.metric_catalog.dcgm_counters_csv`).

    Returns:
        The registered resources, for what depends on the sources.
    """
    in_cluster = pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(provider=provider, depends_on=ready)
    )
    slurm_pools = sorted(slurm_held_nodes(config))
    created: list[pulumi.Resource] = []
    gpu_pools = exporter_pools(config.node_pools, DCGM_RELEASE)
    if gpu_pools:
        counters_csv = counters_csv or metric_catalog.dcgm_counters_csv()
        counters = _object(dcgm_counters_configmap(counters_csv), in_cluster)
        exporter = release(
            DCGM_RELEASE,
            versions.DCGM_EXPORTER_CHART,
            namespace=NODE_EXPORTERS_NAMESPACE,
            values=dcgm_values(gpu_pools, slurm_pools, counters_csv),
            opts=pulumi.ResourceOptions.merge(
                in_cluster, pulumi.ResourceOptions(depends_on=[*ready, counters])
            ),
        )
        monitor = node_service_monitor(DCGM_RELEASE, pods=DCGM_POD_LABELS, port="metrics")
        created += [counters, exporter, _object(monitor, in_cluster)]
    trainium_pools = exporter_pools(config.node_pools, NEURON_MONITOR_NAME)
    if trainium_pools:
        created += [
            _object(neuron_monitor_daemonset(trainium_pools, slurm_pools), in_cluster),
            _object(neuron_pod_monitor(), in_cluster),
        ]
    created += [_object(monitor, in_cluster) for monitor in controller_monitors()]
    role, binding = metrics_reader_rbac()
    reader = k8s.rbac.v1.ClusterRole(
        role["metadata"]["name"].replace(":", "-"),
        metadata=role["metadata"],
        rules=role["rules"],
        opts=in_cluster,
    )
    created += [
        reader,
        k8s.rbac.v1.ClusterRoleBinding(
            binding["metadata"]["name"].replace(":", "-"),
            metadata=binding["metadata"],
            role_ref=binding["roleRef"],
            subjects=binding["subjects"],
            opts=pulumi.ResourceOptions.merge(
                in_cluster, pulumi.ResourceOptions(depends_on=[*ready, reader])
            ),
        ),
    ]
    return created
