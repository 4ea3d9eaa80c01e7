"""Slurm node sets that grow with pending work: KEDA, on the fleet's Prometheus.

slurmctld serves its OpenMetrics (``MetricsType=metrics/openmetrics``, which the Slinky
operator sets when ``controller.metrics.enabled``; slurm-operator v1.2.1
internal/builder/controllerbuilder/controller_config.go) on its own port, the operator makes a
ServiceMonitor for it (controller_servicemonitor.go), the fleet's Prometheus (the metrics stack,
:mod:`components.observability`, which selects every ServiceMonitor) scrapes it, and one
KEDA ScaledObject per node set turns the partition's demand into the NodeSet's replicas through
its scale subresource (docs/usage/autoscaling.md). Karpenter then launches or removes the
nodes those slurmd pods need, within the node set's share of the pool.

Pure builders beside the component: KEDA's values, the demand query, the ScaledObject.
"""

from __future__ import annotations

import typing
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.config import NodePoolConfig, SlurmNodeSetConfig
from components.helm import release, with_system_placement
from components.metric_names import PROMETHEUS_URL

KEDA_NAMESPACE: Final = "keda"
KEDA_RELEASE: Final = "keda"
POLLING_INTERVAL_SECONDS: Final = 30
"""How often KEDA asks Prometheus (its default)."""
COOLDOWN_SECONDS: Final = 600
"""How long a node set with no demand keeps its nodes before KEDA takes it to its warm floor:
a job that follows within ten minutes finds them."""
SCALE_DOWN_STABILIZATION_SECONDS: Final = 600
"""The HPA's scale-down window: demand must stay lower this long before nodes are removed."""
PENDING_WINDOW: Final = "1m"
"""How long a job must pend (two scrapes) before it counts as demand."""
FAILURE_THRESHOLD: Final = 3
"""Failed queries in a row after which KEDA's fallback holds the current replicas."""


def keda_values() -> dict[str, Any]:
    """Values of the keda chart: every KEDA Deployment on the system nodes, operator metrics on.

    The operator's metrics (scaler errors and values, ScaledObject states) on its Service's
    ``metrics`` port with the chart's ServiceMonitor (kedacore/charts v2.20.2 keda/templates/
    manager/service.yaml and servicemonitor.yaml), which needs the metrics stack's CRDs first.
    """
    return with_system_placement(
        versions.KEDA_CHART,
        {"prometheus": {"operator": {"enabled": True, "serviceMonitor": {"enabled": True}}}},
    )


def demand_query(partition: str) -> str:
    """PromQL of the nodes a partition wants: the busy ones plus its largest pending job.

    slurmctld reports per partition the nodes allocated or partly allocated, and the most
    nodes any pending job not held needs at least (``slurm_partition_jobs_min_job_nodes_nohold``,
    Slurm metrics.html, "for Slinky or other autoscaling systems"; every series on every
    scrape, zeros included: SchedMD/slurm slurm-26-05-3-1 src/plugins/metrics/openmetrics).
    A gang of N nodes then asks for N more at once; the next one once it starts. The pending
    term is the least over :data:`PENDING_WINDOW`, so a job pending for one scheduling pass
    beside a free core adds no node. No ``or vector(0)``: missing data (a failed scrape,
    slurmctld restarting) must be an error, on which KEDA keeps the replicas
    (:func:`scaled_object_spec`), not a demand of 0 that drains every node.
    """
    selector = f'{{partition="{partition}"}}'
    return (
        f"max(slurm_partition_nodes_alloc{selector})"
        f" + max(slurm_partition_nodes_mixed{selector})"
        f" + max(min_over_time(slurm_partition_jobs_min_job_nodes_nohold{selector}"
        f"[{PENDING_WINDOW}]))"
    )


def scaled_object_spec(node_set: SlurmNodeSetConfig, pool: NodePoolConfig) -> dict[str, Any]:
    """The ScaledObject that sets a node set's replicas to its partition's demand.

    ``metricType: AverageValue`` with threshold 1: the HPA takes replicas = demand / 1
    (an external metric's average value), while ``Value`` would scale the current replicas
    by demand/threshold. Between the warm floor (``minReplicaCount``) and the node set's share
    of the pool (``maxReplicaCount``, the limit of its ``-slurm`` NodePool). With no warm
    floor, KEDA takes an idle node set to 0 (``idleReplicaCount``, only 0 is supported) after
    :data:`COOLDOWN_SECONDS`.

    Args:
        node_set: the node set (its bounds).
        pool: its pool, whose name is the NodeSet's and its partition's.
    """
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
                           "name": pool.name},
        "pollingInterval": POLLING_INTERVAL_SECONDS,
        "cooldownPeriod": COOLDOWN_SECONDS,
        "minReplicaCount": max(node_set.warm_nodes, 1),
        "maxReplicaCount": node_set.max_nodes,
        # No data is not no demand: after failed queries keep what runs.
        "fallback": {
            "failureThreshold": FAILURE_THRESHOLD,
            "replicas": node_set.max_nodes,
            "behavior": "currentReplicas",
        },
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "behavior": {
                    "scaleDown": {
                        "stabilizationWindowSeconds": SCALE_DOWN_STABILIZATION_SECONDS
                    },
                    # The HPA ignores a change within 10% of its replicas by default (kubernetes
                    # pkg/controller/podautoscaler/replica_calculator.go): above 10 nodes a
                    # pending one-node job would never scale the set up.
                    "scaleUp": {"tolerance": "0"},
                }
            }
        },
        "triggers": [
            {
                "type": "prometheus",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": PROMETHEUS_URL,
                    "query": demand_query(pool.name),
                    "threshold": "1",
                    "activationThreshold": "0",
                    "ignoreNullValues": "false",
                },
            }
        ],
    }  # fmt: skip
    if node_set.warm_nodes == 0:
        spec["idleReplicaCount"] = 0
    return spec


class Autoscaling(pulumi.ComponentResource):
    """KEDA, whose Slurm triggers query the fleet's Prometheus.

    Output: ``ready`` (what the Slurm chart and the ScaledObjects wait for: the
    ServiceMonitor and ScaledObject CRDs exist once both releases are installed).
    """

    def __init__(
        self,
        name: str,
        *,
        cluster_ready: list[pulumi.Resource],
        monitoring_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Install KEDA on the system nodes, after the metrics stack.

        Args:
            name: prefix of child resource names.
            cluster_ready: what the release waits for (the cluster and its system nodes).
            monitoring_ready: the metrics stack's release (``Observability.ready``): the
                ServiceMonitor CRD slurmctld's monitor needs and the Prometheus KEDA queries.
            kubernetes_provider: provider of the release.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:Autoscaling", name, None, opts)
        keda = release(
            KEDA_RELEASE,
            versions.KEDA_CHART,
            namespace=KEDA_NAMESPACE,
            values=keda_values(),
            create_namespace=True,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=kubernetes_provider,
                depends_on=[*cluster_ready, *monitoring_ready],
            ),
        )
        self.ready: list[pulumi.Resource] = [*monitoring_ready, keda]
        self.register_outputs({})


def scaled_object(
    name: str,
    node_set: SlurmNodeSetConfig,
    pool: NodePoolConfig,
    *,
    namespace: str,
    opts: pulumi.ResourceOptions,
) -> k8s.apiextensions.CustomResource:
    """The ScaledObject of one node set (:func:`scaled_object_spec`), beside its NodeSet."""
    return k8s.apiextensions.CustomResource(
        name,
        api_version="keda.sh/v1alpha1",
        kind="ScaledObject",
        metadata={"name": pool.name, "namespace": namespace},
        spec=typing.cast(Any, scaled_object_spec(node_set, pool)),
        opts=opts,
    )
