"""Helm releases of upstream charts at the versions of the bill of materials.

Releases use ``helm.v3.Release``, which runs real Helm against the cluster: hooks run and
``lookup`` sees live objects, as the charts' authors test them (Volcano and Kubeflow Trainer
depend on hooks). ``helm.v4.Chart`` would render client-side and silently skip both.

Every release is atomic, so Helm waits until each Deployment, StatefulSet and hook Job it renders
is ready, for at most the release's timeout (300 s by default). A controller that cannot land on
a node that exists then fails the first ``up``: the system node group is the only capacity before
Karpenter launches any, and it is tainted ``CriticalAddonsOnly``. So every chart's controllers
are placed there (:data:`CHART_PLACEMENT`, one table per chart with the template each value
reaches, :func:`with_system_placement`), and :func:`release` refuses values that miss one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.cluster import SYSTEM_NODE_SELECTOR, SYSTEM_TOLERATION
from components.versions import HelmChart


@dataclass(frozen=True)
class SystemController:
    """A block of a chart's values that places controllers (Deployments, Jobs) it renders."""

    path: tuple[str, ...]
    """Where the block sits in the values; ``()`` is the top level."""
    renders: str
    """The workloads the block reaches and the chart template that reads it (for reviewers)."""
    selector_key: str = "nodeSelector"
    """Key of the block's node selector (Volcano's is ``default_ns``)."""
    tolerations_key: str = "tolerations"
    """Key of the block's tolerations (Volcano's is ``default_tolerations``)."""


@dataclass(frozen=True)
class ElsewherePlacement:
    """Placement keys of a chart's values that do not place a system controller, and why."""

    path: tuple[str, ...]
    """The block holding the keys; ``()`` is the top level."""
    keys: tuple[str, ...]
    """The placement keys (node selectors, tolerations) of that block this entry accounts for."""
    why: str
    """Why no system placement is needed there: a DaemonSet on the accelerator nodes, pods
    made by an operator from custom resources Helm does not wait for, a fallback..."""
    unless: tuple[str, ...] | None = None
    """A boolean value path that must stay false (in the chart's defaults merged with ours):
    while it is, the chart renders nothing from this block. None: renders whatever we set."""
    must_be_empty: bool = False
    """The keys must stay unset: they override a block that is placed (Volcano's per-component
    keys fall back to ``default_*`` only while empty)."""


@dataclass(frozen=True)
class Subchart:
    """A dependency of a chart (``Chart.yaml``), for when its condition lets Helm install it."""

    name: str
    """The dependency's alias or name: the key of its values in the parent's."""
    chart: HelmChart | None
    """The chart whose :data:`CHART_PLACEMENT` entry applies under that key; None when the
    subchart renders no workload, or has no pin of its own (then :attr:`placed`)."""
    why: str
    """What the subchart is, and how the platform uses it."""
    placed: tuple[SystemController, ...] = ()
    """Controllers of a subchart that has no pin of its own (``chart`` None, its defaults not in
    the reference data): their blocks, relative to the subchart's values, are placed on the
    system nodes like the parent's own (:func:`system_controllers`). Each cites the subchart's
    template at the version the parent's ``Chart.yaml`` names."""


@dataclass(frozen=True)
class ChartPlacement:
    """Every placement block of one chart's values, accounted for."""

    system: tuple[SystemController, ...] = ()
    elsewhere: tuple[ElsewherePlacement, ...] = field(default_factory=tuple)
    subcharts: tuple[Subchart, ...] = field(default_factory=tuple)


_DAEMONSET: Final = "a DaemonSet of the accelerator nodes; the device plugin values place it"

CHART_PLACEMENT: Final[dict[str, ChartPlacement]] = {
    # CRD-only charts render no workload.
    versions.KARPENTER_CRD_CHART.chart: ChartPlacement(),
    versions.SLURM_OPERATOR_CRDS_CHART.chart: ChartPlacement(),
    versions.MARIADB_OPERATOR_CRDS_CHART.chart: ChartPlacement(),
    # aws/karpenter-provider-aws v1.14.1 charts/karpenter/templates/deployment.yaml.
    versions.KARPENTER_CHART.chart: ChartPlacement(
        system=(SystemController((), "Deployment karpenter (templates/deployment.yaml)"),)
    ),
    # volcano-sh/volcano v1.15.1 installer/helm/chart/volcano/templates/{admission-init,
    # admission,controllers,scheduler,agent_scheduler}.yaml: each component takes
    # `or .Values.custom.<component>_tolerations .Values.custom.default_tolerations` (and _ns).
    versions.VOLCANO_CHART.chart: ChartPlacement(
        system=(
            SystemController(
                ("custom",),
                "Deployments admission, controllers, scheduler (and agent-scheduler) and the "
                "pre-install Job admission-init (templates/admission-init.yaml)",
                selector_key="default_ns",
                tolerations_key="default_tolerations",
            ),
        ),
        elsewhere=(
            ElsewherePlacement(
                ("custom",),
                (
                    "admission_ns",
                    "admission_tolerations",
                    "controller_ns",
                    "controller_tolerations",
                    "scheduler_ns",
                    "scheduler_tolerations",
                ),
                "per-component overrides of default_ns/default_tolerations, used only if set",
                must_be_empty=True,
            ),
            ElsewherePlacement(
                ("custom",),
                ("agent_ns", "agent_tolerations"),
                "the colocation agent DaemonSet (templates/agent.yaml)",
                unless=("custom", "colocation_enable"),
            ),
            ElsewherePlacement(
                ("custom",),
                ("kube_state_metrics_ns",),
                "the metrics stack (templates/kubestatemetrics.yaml, prometheus.yaml)",
                unless=("custom", "metrics_enable"),
            ),
        ),
        subcharts=(
            Subchart("jobflow", None, "JobFlow and JobTemplate CRDs only (charts/jobflow)"),
        ),
    ),
    # kubeflow/trainer v2.3.0 charts/kubeflow-trainer/templates/manager/deployment.yaml and
    # templates/runtimes/{installer,cleanup}-job.yaml (hooks, rendered once a runtime is on).
    versions.TRAINER_CHART.chart: ChartPlacement(
        system=(
            SystemController(("manager",), "Deployment of the manager (manager/deployment.yaml)"),
            SystemController(
                ("runtimes", "installer"),
                "hook Jobs of the built-in runtimes (runtimes/installer-job.yaml, "
                "cleanup-job.yaml)",
            ),
        ),
        # Chart.yaml: jobset (condition jobset.install), lws (dataCache.enabled first).
        subcharts=(
            Subchart(
                "jobset",
                versions.JOBSET_CHART,
                "JobSet bundled with Trainer; the platform installs it as its own release",
            ),
            Subchart("lws", None, "LeaderWorkerSet for the data cache, which stays off"),
        ),
    ),
    # ray-project/kuberay v1.7.0 helm-chart/kuberay-operator/templates/deployment.yaml: the
    # operator's one Deployment reads the top-level nodeSelector, affinity and tolerations.
    # jupyterhub/zero-to-jupyterhub-k8s 4.4.0 jupyterhub/templates/{hub,proxy}/deployment.yaml
    # and files/hub/jupyterhub_config.py (user pods' tolerations).
    versions.JUPYTERHUB_CHART.chart: ChartPlacement(
        system=(
            SystemController(("hub",), "Deployment of the hub (hub/deployment.yaml)"),
            SystemController(("proxy", "chp"), "Deployment of the proxy (proxy/deployment.yaml)"),
        ),
        elsewhere=(
            ElsewherePlacement(
                ("proxy", "traefik"),
                ("nodeSelector", "tolerations"),
                "the autohttps Deployment, rendered only with proxy.https (off)",
                unless=("proxy", "https", "enabled"),
            ),
            ElsewherePlacement(
                ("singleuser",),
                ("nodeSelector",),
                "user servers: each profile places its pod on its pool (components/notebooks.py)",
            ),
            ElsewherePlacement(
                ("scheduling", "userScheduler"),
                ("nodeSelector", "tolerations"),
                "the user scheduler, off: servers are Volcano's",
                unless=("scheduling", "userScheduler", "enabled"),
            ),
            ElsewherePlacement(
                ("scheduling", "corePods"),
                ("tolerations",),
                "tolerations added to the hub's and proxy's own, which carry the system one",
                must_be_empty=True,
            ),
            ElsewherePlacement(
                ("scheduling", "userPods"),
                ("tolerations",),
                "tolerations of every user pod: none beyond each profile's pool's (the tenant "
                "pods policy refuses others)",
                must_be_empty=True,
            ),
            ElsewherePlacement(
                ("prePuller", "hook"),
                ("nodeSelector", "tolerations"),
                "the image puller hook, off",
                unless=("prePuller", "hook", "enabled"),
            ),
        ),
    ),
    versions.KUBERAY_OPERATOR_CHART.chart: ChartPlacement(
        system=(SystemController((), "Deployment of the operator (deployment.yaml)"),)
    ),
    # kubernetes-sigs/jobset v0.12.0 charts/jobset/templates/controller/deployment.yaml.
    versions.JOBSET_CHART.chart: ChartPlacement(
        system=(
            SystemController(
                ("controller",), "Deployment of the controller (controller/deployment.yaml)"
            ),
        )
    ),
    # cert-manager/cert-manager v1.21.1 deploy/charts/cert-manager/templates/{deployment,
    # webhook-deployment,cainjector-deployment,startupapicheck-job}.yaml.
    versions.CERT_MANAGER_CHART.chart: ChartPlacement(
        system=(
            SystemController((), "Deployment of the controller (deployment.yaml)"),
            SystemController(("webhook",), "Deployment of the webhook (webhook-deployment.yaml)"),
            SystemController(
                ("cainjector",), "Deployment of the CA injector (cainjector-deployment.yaml)"
            ),
            SystemController(
                ("startupapicheck",), "post-install Job startupapicheck (startupapicheck-job.yaml)"
            ),
        ),
        elsewhere=(
            ElsewherePlacement(
                ("global",),
                ("nodeSelector",),
                "merged under every component's own nodeSelector, which is set",
            ),
        ),
    ),
    # SlinkyProject/slurm-operator v1.2.1 helm/slurm-operator/templates/{operator,webhook}/
    # deployment.yaml.
    # Every block that places a KEDA Deployment: the operator, the metrics API server and the
    # admission webhooks, with the top-level keys they fall back to.
    versions.KEDA_CHART.chart: ChartPlacement(
        system=(
            SystemController((), "fallback of every KEDA Deployment"),
            SystemController(("operator",), "Deployment of the operator"),
            SystemController(("metricsServer",), "Deployment of the metrics API server"),
            SystemController(("webhooks",), "Deployment of the admission webhooks"),
        )
    ),
    versions.PROMETHEUS_STACK_CHART.chart: ChartPlacement(
        system=(
            SystemController(("prometheusOperator",), "Deployment of the Prometheus Operator"),
            SystemController(
                ("prometheusOperator", "admissionWebhooks", "patch"),
                "hook Jobs that make and patch the webhook's certificate",
            ),
            SystemController(
                ("prometheusOperator", "admissionWebhooks", "deployment"),
                "the optional separate webhook Deployment",
            ),
            SystemController(
                ("prometheus", "prometheusSpec"),
                "the Prometheus custom resource, whose StatefulSet the operator makes",
            ),
            SystemController(("crds", "upgradeJob"), "the optional CRD upgrade Job"),
            SystemController(
                ("alertmanager", "alertmanagerSpec"),
                "the Alertmanager custom resource, whose StatefulSet the operator makes",
            ),
        ),
        elsewhere=(
            ElsewherePlacement(
                ("thanosRuler", "thanosRulerSpec"),
                ("nodeSelector", "tolerations"),
                "Thanos Ruler stays off",
                unless=("thanosRuler", "enabled"),
            ),
        ),
        # Chart.yaml at 88.5.3: kube-state-metrics 8.4.0, prometheus-node-exporter 4.56.1,
        # grafana 12.11.1 (grafana-community), prometheus-windows-exporter 0.12.*. The node
        # and Windows exporters stay off (components/observability/metrics_stack.py): turned
        # on, they would fail the placement check unlisted.
        subcharts=(
            Subchart("crds", None, "the Prometheus Operator's CRDs (ServiceMonitor for slurmctld)"),
            Subchart(
                "kube-state-metrics",
                None,
                "the objects' states for the dashboards, alerts and cold-start ledger",
                placed=(
                    SystemController(
                        (),
                        "Deployment kube-state-metrics (prometheus-community/helm-charts "
                        "kube-state-metrics-8.4.0 charts/kube-state-metrics/templates/"
                        "deployment.yaml: nodeSelector, tolerations)",
                    ),
                ),
            ),
            Subchart(
                "grafana",
                None,
                "Grafana, where observability.grafana.enabled",
                placed=(
                    SystemController(
                        (),
                        "Deployment grafana (grafana-community/helm-charts grafana-12.11.1 "
                        "charts/grafana/templates/_pod.tpl: nodeSelector, tolerations; the "
                        "image renderer and test pod stay off)",
                    ),
                ),
            ),
        ),
    ),
    versions.SLURM_OPERATOR_CHART.chart: ChartPlacement(
        system=(
            SystemController(
                ("operator",), "Deployment of the operator (operator/deployment.yaml)"
            ),
            SystemController(("webhook",), "Deployment of the webhook (webhook/deployment.yaml)"),
        )
    ),
    # helm/slurm/templates at v1.2.1 render only Slinky custom resources (Controller, RestApi,
    # Accounting, LoginSet, NodeSet), ConfigMaps, Secrets and a PodDisruptionBudget: the operator
    # makes their pods, and Helm's wait (helm pkg/kube/ready.go) waits for none of those kinds.
    versions.SLURM_CHART.chart: ChartPlacement(
        elsewhere=tuple(
            ElsewherePlacement(
                (block, "podSpec"),
                ("nodeSelector", "tolerations"),
                "pods the Slinky operator makes from a custom resource (general pool or the "
                "node set's pool); the release does not wait for them",
            )
            for block in (
                "controller",
                "restapi",
                "accounting",
                "loginsetDefaults",
                "nodesetDefaults",
            )
        )
    ),
    # mariadb-operator/mariadb-operator v26.6.0 deploy/charts/mariadb-operator/templates/
    # {operator,webhook,cert-controller}/deployment.yaml.
    versions.MARIADB_OPERATOR_CHART.chart: ChartPlacement(
        system=(
            SystemController((), "Deployment of the operator (operator/deployment.yaml)"),
            SystemController(("webhook",), "Deployment of the webhook (webhook/deployment.yaml)"),
            SystemController(
                ("certController",),
                "Deployment of the webhook's certificate controller (cert-controller/...)",
            ),
        )
    ),
    # NVIDIA/k8s-device-plugin v0.20.0 deployments/helm/nvidia-device-plugin: the plugin is a
    # DaemonSet; node-feature-discovery (a Deployment among others) is a subchart under the
    # condition `nfd.enabled,gfd.enabled` (Chart.yaml), off while gfd.enabled is false.
    versions.NVIDIA_DEVICE_PLUGIN_CHART.chart: ChartPlacement(
        elsewhere=(
            ElsewherePlacement((), ("nodeSelector", "tolerations"), _DAEMONSET),
            ElsewherePlacement(
                ("nfd", "worker"),
                ("tolerations",),
                "the NFD subchart",
                unless=("gfd", "enabled"),
            ),
        )
    ),
    # aws/eks-charts stable/aws-efa-k8s-device-plugin: one DaemonSet.
    versions.EFA_DEVICE_PLUGIN_CHART.chart: ChartPlacement(
        elsewhere=(ElsewherePlacement((), ("nodeSelector", "tolerations"), _DAEMONSET),)
    ),
    # NVIDIA/dcgm-exporter 4.5.3-4.8.2 deployment/templates: one DaemonSet, no controller.
    versions.DCGM_EXPORTER_CHART.chart: ChartPlacement(
        elsewhere=(
            ElsewherePlacement(
                (),
                ("nodeSelector", "tolerations"),
                "a DaemonSet of the accelerator nodes (the GPU pools'); "
                "components/observability/sources.py places it (node affinity on their "
                "NodePools, their taints tolerated)",
            ),
        )
    ),
    # aws-neuron/neuron-helm-charts 1.9.0 (values.yaml; chart templates not in the reference
    # data): the scheduler extension and its second kube-scheduler are Deployments.
    versions.NEURON_CHART.chart: ChartPlacement(
        system=(
            SystemController(("scheduler",), "Deployment of the Neuron scheduler extension"),
            SystemController(
                ("scheduler", "customScheduler"), "Deployment of the second kube-scheduler"
            ),
        ),
        elsewhere=(
            ElsewherePlacement(("devicePlugin",), ("nodeSelector", "tolerations"), _DAEMONSET),
            ElsewherePlacement(
                ("npd",),
                ("nodeSelector", "tolerations"),
                "node problem detector DaemonSet",
                unless=("npd", "enabled"),
            ),
            ElsewherePlacement(
                ("draDriver",),
                ("nodeSelector", "tolerations"),
                "the DRA driver",
                unless=("draDriver", "enabled"),
            ),
            ElsewherePlacement(
                ("ultraserverOperator",),
                ("nodeSelector", "tolerations"),
                "the UltraServer operator",
                unless=("ultraserverOperator", "enabled"),
            ),
            ElsewherePlacement(
                ("scheduler", "defaultScheduler"),
                ("nodeSelector", "tolerations"),
                "reconfiguring a self-managed control plane's scheduler (not EKS)",
                unless=("scheduler", "defaultScheduler", "enabled"),
            ),
        ),
    ),
}
"""Every chart the platform installs, by its ``chart`` reference: the blocks of its values that
place controllers (each set to the system nodes) and the other placement keys it has."""


def chart_placement(chart: HelmChart) -> ChartPlacement:
    """The placement table of a chart; a chart without one is a programming error."""
    try:
        return CHART_PLACEMENT[chart.chart]
    except KeyError:
        raise ValueError(
            f"chart {chart.chart} has no entry in components.helm.CHART_PLACEMENT: say where "
            "each controller it renders runs before installing it"
        ) from None


def system_controllers(chart: HelmChart) -> list[SystemController]:
    """Every controller block of ``chart``: its own, and its unpinned subcharts' under their key.

    Args:
        chart: the chart, whose :data:`CHART_PLACEMENT` entry names the blocks.
    """
    placement = chart_placement(chart)
    return [
        *placement.system,
        *(
            SystemController(
                (subchart.name, *controller.path),
                controller.renders,
                controller.selector_key,
                controller.tolerations_key,
            )
            for subchart in placement.subcharts
            for controller in subchart.placed
        ),
    ]


def system_placement(
    controller: SystemController,
) -> dict[str, Any]:
    """The selector and toleration of the system node group, under one block's keys."""
    return {
        controller.selector_key: dict(SYSTEM_NODE_SELECTOR),
        controller.tolerations_key: [dict(SYSTEM_TOLERATION)],
    }


def _copy_structure(value: Any) -> Any:
    """Maps and lists copied, leaves (strings, Pulumi outputs) shared: outputs do not deep-copy."""
    if isinstance(value, Mapping):
        return {key: _copy_structure(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_structure(item) for item in value]
    return value


def with_system_placement(chart: HelmChart, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with every controller block of ``chart`` on the system nodes.

    The system selector is merged into a selector the values already set (so a block may add
    labels), the system toleration added to tolerations they set (Helm replaces lists).

    Args:
        chart: the chart, whose :data:`CHART_PLACEMENT` entry names the blocks.
        values: the release's own values (not changed).
    """
    merged: dict[str, Any] = _copy_structure(values)
    for controller in system_controllers(chart):
        block = merged
        for key in controller.path:
            block = block.setdefault(key, {})
        placement = system_placement(controller)
        selector = {**(block.get(controller.selector_key) or {})}
        selector.update(placement[controller.selector_key])
        block[controller.selector_key] = selector
        tolerations = list(block.get(controller.tolerations_key) or [])
        for toleration in placement[controller.tolerations_key]:
            if toleration not in tolerations:
                tolerations.append(toleration)
        block[controller.tolerations_key] = tolerations
    return merged


def missing_system_placement(chart: HelmChart, values: Mapping[str, Any]) -> list[str]:
    """Dotted paths of ``chart``'s controller blocks whose values lack the system placement."""
    missing: list[str] = []
    for controller in system_controllers(chart):
        block: Any = values
        for key in controller.path:
            block = block.get(key) if isinstance(block, Mapping) else None
        block = block if isinstance(block, Mapping) else {}
        selector = block.get(controller.selector_key) or {}
        tolerations = block.get(controller.tolerations_key) or []
        placement = system_placement(controller)
        here = ".".join(controller.path) or "<top level>"
        if any(selector.get(k) != v for k, v in placement[controller.selector_key].items()):
            missing.append(f"{here}.{controller.selector_key}")
        if any(t not in tolerations for t in placement[controller.tolerations_key]):
            missing.append(f"{here}.{controller.tolerations_key}")
    return missing


def release(
    name: str,
    chart: HelmChart,
    *,
    namespace: str,
    values: dict[str, Any],
    opts: pulumi.ResourceOptions,
    create_namespace: bool = False,
    skip_crds: bool = False,
) -> k8s.helm.v3.Release:
    """Install one pinned chart.

    Args:
        name: Helm release name (also the Pulumi resource name); fixed so upgrades find it.
        chart: chart, version and repository from :mod:`components.versions`.
        namespace: namespace of the release.
        values: chart values; only keys the chart's default values define, and every
            controller block of :data:`CHART_PLACEMENT` on the system nodes
            (:func:`with_system_placement`).
        opts: resource options (parent, Kubernetes provider, dependencies).
        create_namespace: let Helm create the namespace. Default false.
        skip_crds: leave the chart's ``crds/`` directory alone, for CRDs the stack applies as
            resources of its own (so they upgrade). Default false.

    Raises:
        ValueError: when a controller block of the chart is not on the system nodes.
    """
    missing = missing_system_placement(chart, values)
    if missing:
        raise ValueError(
            f"release {name}: controllers of {chart.chart} not placed on the system nodes: "
            + ", ".join(missing)
        )
    return k8s.helm.v3.Release(
        name,
        name=name,
        chart=chart.chart,
        version=chart.version,
        repository_opts=(
            k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository) if chart.repository else None
        ),
        namespace=namespace,
        create_namespace=create_namespace,
        values=values,
        atomic=True,
        cleanup_on_fail=True,
        skip_crds=skip_crds or None,
        opts=opts,
    )
