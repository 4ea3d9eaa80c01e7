"""The pods the observability charts render, rebuilt from the releases' values.

Synthesis has no Helm: a release is its values. The pods below are what the charts (and the
Prometheus Operator, for the Prometheus and Alertmanager custom resources the chart renders)
would run, built from the release's values over the chart's defaults, so that the scan and a
reviewer read them. Only what a scanner judges is rebuilt: containers (image, pull policy,
ports, probes, resources, security context, mounts, the environment a Secret feeds), init
containers, the pod's security context, service account and token, volumes and placement.
Generated arguments, config hashes, the chart's soft anti-affinity and labels are left out.

No chart's defaults are held here. kube-prometheus-stack's and dcgm-exporter's are read from
the reference data (:func:`chart_defaults`, :mod:`synth.reference`); without it the synthesis
writes no chart pods and says so (:func:`synth.output.write_stack`). The grafana and
kube-state-metrics subcharts' defaults are not in the reference data, so the Grafana and
kube-state-metrics pods take nothing from them: every field they need comes from the release's
values (kube-prometheus-stack's own ``grafana`` block, then ours, which state the images,
security contexts, probes and ports, components/observability/metrics_stack.py), and one the
values lack is an error naming it (:func:`_need`), except those whose subchart default is empty
or false, read as such where unset (env, extra volumes and containers, placement, the sidecars'
probes, the switches the template tests). What stays unverified is the templates' logic, read
from the charts' sources only: those pods carry :data:`UNVERIFIED_ANNOTATION` naming it.

Templates, at the pinned versions:
- prometheus-community/helm-charts kube-prometheus-stack-88.5.3
  charts/kube-prometheus-stack/templates/prometheus-operator/deployment.yaml,
  templates/prometheus/prometheus.yaml, templates/alertmanager/alertmanager.yaml;
- prometheus-operator v0.93.0 (read there; the chart runs v0.93.1, its appVersion)
  pkg/prometheus/server/statefulset.go (makeStatefulSetSpec), pkg/prometheus/common.go
  (BuildCommonVolumes, BuildConfigReloader), pkg/prometheus/promcfg.go (BuildProbes),
  pkg/alertmanager/statefulset.go (makeStatefulSetSpec), pkg/operator/config_reloader.go
  (CreateConfigReloader), pkg/operator/config.go (ContainerConfig.ResourceRequirements);
- grafana-community/helm-charts grafana-12.11.1 charts/grafana/templates/_pod.tpl;
- prometheus-community/helm-charts kube-state-metrics-8.4.0
  charts/kube-state-metrics/templates/deployment.yaml;
- NVIDIA/dcgm-exporter 4.5.3-4.8.2 deployment/templates/daemonset.yaml.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from components import versions
from components.metric_names import MONITORING_RELEASE, NODE_EXPORTERS_NAMESPACE
from components.observability.sources import DCGM_RELEASE
from synth.helm_values import helm_coalesced
from synth.reference import chart_file

POD_OF: Final = "trainingplatform.io/pod-of"
"""The annotation naming what a rebuilt pod stands for (as :mod:`synth.pods` writes it)."""
UNVERIFIED_ANNOTATION: Final = "trainingplatform.io/unverified-template"
"""The annotation of a pod whose chart the reference data lacks: the template it is rebuilt
after, read from the chart's source only, so that a reviewer of ``pods/`` reads it too."""
UNVERIFIED_TEMPLATES: Final[dict[str, str]] = {
    "grafana": "grafana 12.11.1 templates/_pod.tpl",
    "kube-state-metrics": "kube-state-metrics 8.4.0 templates/deployment.yaml",
}
"""The subcharts whose templates no reference file checks, by their key in the release."""

_DROP_ALL: Final = {"drop": ["ALL"]}

CHART_CHOSEN_IMAGES: Final = (
    "Pod.monitoring.monitoring-operator",
    "Pod.monitoring.prometheus-*-0",
    "Pod.monitoring.alertmanager-*-0",
    f"Pod.{NODE_EXPORTERS_NAMESPACE}.{DCGM_RELEASE}",
)
"""Scan ids (``Kind.namespace.name`` patterns) of the rebuilt pods whose images the charts
choose: the operator's, its config reloader's, Prometheus' and Alertmanager's are
kube-prometheus-stack's values (read from the reference data, the operator's tag its
appVersion) and the exporter's dcgm-exporter's, moved with the charts' versions. No file of
this repository names them, so no dependency bot group pins their digests
(policies/scan-waivers.yaml, their CKV_K8S_43 entry). Grafana's, its sidecars' and
kube-state-metrics' are ours (components/versions.py)."""


@dataclass(frozen=True)
class ChartDefaults:
    """What the rebuilt pods read of the charts, from the reference data."""

    stack: Mapping[str, Any]
    """kube-prometheus-stack's ``values.yaml``."""
    stack_app_version: str
    """kube-prometheus-stack's ``Chart.yaml`` ``appVersion``: the operator's and config
    reloader's image tag where ``image.tag`` is empty (templates/prometheus-operator/
    deployment.yaml)."""
    dcgm_exporter: Mapping[str, Any]
    """dcgm-exporter's ``values.yaml``."""


def chart_defaults(root: Path | None = None) -> ChartDefaults:
    """kube-prometheus-stack's and dcgm-exporter's defaults at their pins, from the reference data.

    Args:
        root: the reference directory (default: :func:`synth.reference.reference_root`).

    Raises:
        synth.reference.MissingReference: a file is not there.
    """
    chart = chart_file(versions.PROMETHEUS_STACK_CHART, "Chart.yaml", root)
    return ChartDefaults(
        stack=chart_file(versions.PROMETHEUS_STACK_CHART, "values.yaml", root),
        stack_app_version=str(chart["appVersion"]),
        dcgm_exporter=chart_file(versions.DCGM_EXPORTER_CHART, "values.yaml", root),
    )


def _need(values: Mapping[str, Any], path: str, block: str) -> Any:
    """The value at ``path`` (dotted) of a subchart's values, which must be set.

    Args:
        values: the subchart's values as the release hands them (its parent's block, ours).
        path: the key path, e.g. ``securityContext`` or ``image.repository``.
        block: the subchart's key in the release (``grafana``, ``kube-state-metrics``).

    Raises:
        ValueError: the values do not set it: its default is the subchart's, which the
            reference data lacks and this rebuild does not guess.
    """
    found: Any = values
    for key in path.split("."):
        if not isinstance(found, Mapping) or found.get(key) is None:
            raise ValueError(
                f"{block}.{path} is not set in the monitoring release's values: the {block} "
                f"subchart's default is not in the reference data, so the rebuilt pod takes "
                f"nothing from it; set it (components/observability/metrics_stack.py, citing "
                f"the subchart's values.yaml line)"
            )
        found = found[key]
    return found


def _pod(
    name: str, namespace: str, source: str, spec: dict[str, Any], unverified: str = ""
) -> dict[str, Any]:
    """A Pod manifest named for its workload, annotated with what it stands for.

    Args:
        name: the pod's name (a Deployment's or DaemonSet's own name, a StatefulSet's pod 0).
        namespace: the release's namespace.
        source: what renders it (``<kind>/<namespace>/<name>``).
        spec: the pod's spec.
        unverified: the template it follows that no reference file checks (default: none).
    """
    annotations = {POD_OF: source, **({UNVERIFIED_ANNOTATION: unverified} if unverified else {})}
    empty: tuple[Any, ...] = (None, "", [], {})
    host = ("hostNetwork", "hostPID")  # written only where true, as the templates write them
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            key: value
            for key, value in spec.items()
            if value not in empty and not (key in host and value is False)
        },
    }


def _placement(block: Mapping[str, Any]) -> dict[str, Any]:
    """``nodeSelector``, ``tolerations``, ``affinity`` and ``priorityClassName`` of a block."""
    keys = ("nodeSelector", "tolerations", "affinity", "priorityClassName")
    return {key: copy.deepcopy(block[key]) for key in keys if block.get(key)}


def _image(image: Mapping[str, Any], registry: str, default_tag: str) -> str:
    """``<registry>/<repository>:<tag>[@sha256:<sha>]`` as the charts write an image.

    Args:
        image: the ``image`` block (``registry``, ``repository``, ``tag``, ``sha``).
        registry: ``global.imageRegistry`` where set, else empty (the block's own).
        default_tag: the tag where the block names none (the chart's appVersion).
    """
    reference = f"{registry or image['registry']}/{image['repository']}"
    tag = image.get("tag") or default_tag
    reference += f":{tag}" if tag else ""
    return reference + (f"@sha256:{image['sha']}" if image.get("sha") else "")


def _reloader(name: str, stack: _Stack, mounts: list[dict[str, Any]], pull: str) -> dict[str, Any]:
    """The operator's config reloader (pkg/operator/config_reloader.go, CreateConfigReloader).

    Probed on ``/healthz`` (liveness, readiness and startup) where the chart's
    ``prometheusOperator.prometheusConfigReloader.enableProbe`` passes the operator
    ``--enable-config-reloader-probes`` (addProbes; never the init container), and given the
    resources of the operator's ``--config-reloader-*`` flags: the chart passes
    ``prometheusConfigReloader.resources``, 0 (none) where unset (deployment.yaml;
    pkg/operator/config.go, ResourceRequirements leaves a 0 out).

    Args:
        name: ``config-reloader`` or ``init-config-reloader``.
        stack: the release's values (the reloader's image, resources and probes).
        mounts: its volume mounts.
        pull: the resource's ``imagePullPolicy`` (the operator's ImagePullPolicy option).
    """
    init = name.startswith("init")
    port = 8081 if init else 8080
    reloader = stack.values["prometheusOperator"]["prometheusConfigReloader"]
    image, resources = stack.reloader_image, reloader.get("resources") or {}
    probes = {}
    if reloader.get("enableProbe") and not init:
        handler = {"httpGet": {"path": "/healthz", "port": port}}
        probes = {p: copy.deepcopy(handler) for p in ("livenessProbe", "readinessProbe",
                                                       "startupProbe")}  # fmt: skip
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": pull,
        **probes,
        "command": ["/bin/prometheus-config-reloader"],
        "ports": [{"name": "reloader-init" if port == 8081 else "reloader-web",
                   "containerPort": port, "protocol": "TCP"}],
        "resources": copy.deepcopy(dict(resources)),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": dict(_DROP_ALL),
        },
        "volumeMounts": mounts,
    }  # fmt: skip


class _Stack:
    """The ``monitoring`` release's values as kube-prometheus-stack 88.5.3 renders them."""

    def __init__(self, release: Mapping[str, Any], defaults: ChartDefaults) -> None:
        """The release's values over the chart's.

        Args:
            release: the Helm release as ``helm/<release>.yaml`` has it.
            defaults: the charts' reference values (:func:`chart_defaults`).
        """
        self.values: dict[str, Any] = helm_coalesced(defaults.stack, release.get("values") or {})
        self.app_version = defaults.stack_app_version
        self.namespace = str(release.get("namespace"))
        name = str(release["release"])
        override = self.values.get("fullnameOverride")
        chart = self.values.get("nameOverride") or "kube-prometheus-stack"
        # _helpers.tpl, kube-prometheus-stack.fullname (26 characters at most).
        full = override or (name if chart in name else f"{name}-{chart}")
        self.full_name = str(full)[:26].rstrip("-")
        self.registry = str(self.values["global"].get("imageRegistry") or "")
        operator = self.values["prometheusOperator"]
        self.reloader_image = _image(
            operator["prometheusConfigReloader"]["image"], self.registry, self.app_version
        )

    def custom_resource(self, component: str) -> str:
        """The Prometheus or Alertmanager resource's name (_helpers.tpl, ``*.crname``)."""
        if self.values.get("cleanPrometheusOperatorObjectNames"):
            return self.full_name
        return f"{self.full_name}-{component}"

    def operator_service_account(self) -> str:
        """The operator's service account (_helpers.tpl, ``operator.serviceAccountName``)."""
        account = self.values["prometheusOperator"].get("serviceAccount") or {}
        default = f"{self.full_name}-operator" if account.get("create") else "default"
        return str(account.get("name") or default)

    def service_account(self, component: str) -> str:
        """A component's service account (_helpers.tpl, ``*.serviceAccountName``)."""
        account = self.values[component].get("serviceAccount") or {}
        default = f"{self.full_name}-{component}" if account.get("create") else "default"
        return str(account.get("name") or default)


def operator_pod(stack: _Stack) -> dict[str, Any]:
    """The Prometheus Operator's pod (templates/prometheus-operator/deployment.yaml).

    Args:
        stack: the release's values.
    """
    operator = stack.values["prometheusOperator"]
    tls = bool(operator["tls"]["enabled"])
    port = (
        {"name": "https", "containerPort": operator["tls"]["internalPort"]}
        if tls
        else {"name": "http", "containerPort": 8080}
    )

    def probe(settings: Mapping[str, Any]) -> dict[str, Any]:
        handler = {"path": "/healthz", "port": port["name"], "scheme": "HTTPS" if tls else "HTTP"}
        return {"httpGet": handler, **{k: v for k, v in settings.items() if k != "enabled"}}

    container: dict[str, Any] = {
        "name": "kube-prometheus-stack",
        "image": _image(operator["image"], stack.registry, stack.app_version),
        "imagePullPolicy": operator["image"]["pullPolicy"],
        "ports": [port],
        "env": [{"name": k, "value": str(v)} for k, v in (operator.get("env") or {}).items()],
        "resources": copy.deepcopy(operator.get("resources") or {}),
        "securityContext": copy.deepcopy(operator.get("containerSecurityContext") or {}),
        "volumeMounts": [
            *([{"name": "tls-secret", "mountPath": "/cert", "readOnly": True}] if tls else []),
            *copy.deepcopy(operator.get("extraVolumeMounts") or []),
        ],
    }
    for field in ("readinessProbe", "livenessProbe"):
        if operator[field].get("enabled"):
            container[field] = probe(operator[field])
    secret = {"defaultMode": 0o644, "secretName": f"{stack.full_name}-admission"}
    spec = {
        "containers": [container],
        "volumes": [
            *([{"name": "tls-secret", "secret": secret}] if tls else []),
            *copy.deepcopy(operator.get("extraVolumes") or []),
        ],
        "securityContext": copy.deepcopy(operator.get("securityContext") or {}),
        "serviceAccountName": stack.operator_service_account(),
        "automountServiceAccountToken": operator["automountServiceAccountToken"],
        "hostNetwork": bool(operator.get("hostNetwork")),
        **_placement(operator),
    }
    name = f"{stack.full_name}-operator"
    return _pod(name, stack.namespace, f"Deployment/{stack.namespace}/{name}", spec)


def _server_containers(
    spec: Mapping[str, Any], operator_containers: list[dict[str, Any]], key: str
) -> list[dict[str, Any]]:
    """The operator's containers, the resource's merged in by name.

    pkg/k8sutil, MergePatchContainers: a strategic merge per name, new names appended. Here
    maps merge and the resource's lists replace the operator's, where the strategic merge
    would merge ``env`` and ``volumeMounts`` by key: no stack patches the operator's
    containers, so the difference shows in none of their pods.

    Args:
        spec: the Prometheus' or Alertmanager's spec (the chart's ``*Spec`` values).
        operator_containers: the operator's own containers.
        key: ``containers`` or ``initContainers``.
    """
    by_name = {c.get("name"): c for c in spec.get(key) or []}
    merged = [helm_coalesced(c, by_name.pop(c["name"], {})) for c in operator_containers]
    return merged + [copy.deepcopy(c) for c in by_name.values()]


def prometheus_pod(stack: _Stack) -> dict[str, Any]:
    """Prometheus' pod 0 as the operator builds its StatefulSet from the chart's Prometheus.

    pkg/prometheus/server/statefulset.go, makeStatefulSetSpec: the prometheus container
    (read-only root, no escalation, every capability dropped, probes on the web port), the
    config reloader as container and init container, the pod's security context, service
    account and token as the resource says (the token on unless it says false).

    Args:
        stack: the release's values.
    """
    spec = stack.values["prometheus"]["prometheusSpec"]
    name = stack.custom_resource("prometheus")
    pull = spec["image"]["pullPolicy"]
    port = spec["portName"]

    def probe(path: str, period: int, failures: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": port}, "timeoutSeconds": 3,
                "periodSeconds": period, "failureThreshold": failures}  # fmt: skip

    claim = f"prometheus-{name}-db"
    reloader_mounts = [
        {"name": "config", "mountPath": "/etc/prometheus/config"},
        {"name": "config-out", "mountPath": "/etc/prometheus/config_out"},
        {"name": "prometheus-rulefiles-0",
         "mountPath": "/etc/prometheus/rules/prometheus-rulefiles-0"},
    ]  # fmt: skip
    prometheus = {
        "name": "prometheus",
        "image": _image(spec["image"], stack.registry, ""),
        "imagePullPolicy": pull,
        "ports": [] if spec.get("listenLocal") else [
            {"name": port, "containerPort": 9090, "protocol": "TCP"}
        ],
        "startupProbe": probe("/-/ready", 15, 60),
        "readinessProbe": probe("/-/ready", 5, 3),
        "livenessProbe": probe("/-/healthy", 5, 6),
        "resources": copy.deepcopy(spec.get("resources") or {}),
        "securityContext": {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": dict(_DROP_ALL),
        },
        "volumeMounts": [
            {"name": "config-out", "mountPath": "/etc/prometheus/config_out", "readOnly": True},
            {"name": "tls-assets", "mountPath": "/etc/prometheus/certs", "readOnly": True},
            {"name": claim, "mountPath": "/prometheus", "subPath": "prometheus-db"},
            *copy.deepcopy(spec.get("volumeMounts") or []),
            {"name": "prometheus-rulefiles-0",
             "mountPath": "/etc/prometheus/rules/prometheus-rulefiles-0", "readOnly": True},
            {"name": "web-config", "mountPath": "/etc/prometheus/web_config/web-config.yaml",
             "subPath": "web-config.yaml", "readOnly": True},
        ],
    }  # fmt: skip
    reloader = _reloader("config-reloader", stack, reloader_mounts, pull)
    init = _reloader("init-config-reloader", stack, copy.deepcopy(reloader_mounts), pull)
    volumes: list[dict[str, Any]] = [
        {"name": claim, "persistentVolumeClaim": {"claimName": f"{claim}-prometheus-{name}-0"}}
    ] if spec.get("storageSpec") else [{"name": claim, "emptyDir": {}}]  # fmt: skip
    volumes += [
        {"name": "config", "secret": {"secretName": f"prometheus-{name}"}},
        {"name": "tls-assets", "projected": {"sources": []}},
        {"name": "config-out", "emptyDir": {"medium": "Memory"}},
        {"name": "prometheus-rulefiles-0",
         "configMap": {"name": f"prometheus-{name}-rulefiles-0", "optional": True}},
        {"name": "web-config", "secret": {"secretName": f"prometheus-{name}-web-config"}},
        *copy.deepcopy(spec.get("volumes") or []),
    ]  # fmt: skip
    pod_spec = {
        "containers": _server_containers(spec, [prometheus, reloader], "containers"),
        "initContainers": _server_containers(spec, [init], "initContainers"),
        "securityContext": copy.deepcopy(spec.get("securityContext") or {}),
        "serviceAccountName": stack.service_account("prometheus"),
        "automountServiceAccountToken": spec.get("automountServiceAccountToken") is not False,
        "terminationGracePeriodSeconds": 600,
        "hostNetwork": bool(spec.get("hostNetwork")),
        "volumes": volumes,
        **_placement(spec),
    }
    pod = _pod(f"prometheus-{name}-0", stack.namespace,
               f"Prometheus/{stack.namespace}/{name}", pod_spec)  # fmt: skip
    annotations = (spec.get("podMetadata") or {}).get("annotations") or {}
    pod["metadata"]["annotations"].update(annotations)
    return pod


def alertmanager_pod(stack: _Stack) -> dict[str, Any]:
    """Alertmanager's pod 0 as the operator builds its StatefulSet from the chart's Alertmanager.

    pkg/alertmanager/statefulset.go, makeStatefulSetSpec: the alertmanager container (read-only
    root, no escalation, every capability dropped, probes on the web port, its pod IP and name
    from the downward API), the config reloader as container and init container; the token
    only as the resource says (the chart renders ``automountServiceAccountToken``,
    templates/alertmanager/alertmanager.yaml).

    Args:
        stack: the release's values.
    """
    spec = stack.values["alertmanager"]["alertmanagerSpec"]
    name = stack.custom_resource("alertmanager")
    pull = spec["image"]["pullPolicy"]
    port = spec["portName"]
    claim = f"alertmanager-{name}-db"
    reloader_mounts: list[dict[str, Any]] = [
        {"name": "config-volume", "mountPath": "/etc/alertmanager/config", "readOnly": True},
        {"name": "config-out", "mountPath": "/etc/alertmanager/config_out"},
        {"name": "web-config", "mountPath": "/etc/alertmanager/web_config/web-config.yaml",
         "subPath": "web-config.yaml", "readOnly": True},
    ]  # fmt: skip
    web = [] if spec.get("listenLocal") else [
        {"name": port, "containerPort": 9093, "protocol": "TCP"}
    ]  # fmt: skip
    alertmanager = {
        "name": "alertmanager",
        "image": _image(spec["image"], stack.registry, ""),
        "imagePullPolicy": pull,
        "ports": [*web, {"name": "mesh-tcp", "containerPort": 9094, "protocol": "TCP"},
                  {"name": "mesh-udp", "containerPort": 9094, "protocol": "UDP"}],
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "resources": copy.deepcopy(spec.get("resources") or {}),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": dict(_DROP_ALL),
        },
        "volumeMounts": [
            {"name": "config-volume", "mountPath": "/etc/alertmanager/config"},
            {"name": "config-out", "mountPath": "/etc/alertmanager/config_out", "readOnly": True},
            {"name": "tls-assets", "mountPath": "/etc/alertmanager/certs", "readOnly": True},
            {"name": claim, "mountPath": "/alertmanager", "subPath": "alertmanager-db"},
            *copy.deepcopy(spec.get("volumeMounts") or []),
            reloader_mounts[2],
            {"name": "cluster-tls-config",
             "mountPath": "/etc/alertmanager/cluster_tls_config/cluster-tls-config.yaml",
             "subPath": "cluster-tls-config.yaml", "readOnly": True},
        ],
    }  # fmt: skip
    if not spec.get("listenLocal"):
        alertmanager["livenessProbe"] = {
            "httpGet": {"path": "/-/healthy", "port": port},
            "timeoutSeconds": 3, "failureThreshold": 10,
        }  # fmt: skip
        alertmanager["readinessProbe"] = {
            "httpGet": {"path": "/-/ready", "port": port},
            "initialDelaySeconds": 3, "timeoutSeconds": 3, "periodSeconds": 5,
            "failureThreshold": 10,
        }  # fmt: skip
    reloader = _reloader("config-reloader", stack, reloader_mounts, pull)
    init = _reloader("init-config-reloader", stack, copy.deepcopy(reloader_mounts[:2]), pull)
    volumes: list[dict[str, Any]] = [
        {"name": claim, "persistentVolumeClaim": {"claimName": f"{claim}-alertmanager-{name}-0"}}
    ] if spec.get("storage") else [{"name": claim, "emptyDir": {}}]  # fmt: skip
    volumes += [
        {"name": "config-volume",
         "secret": {"secretName": f"alertmanager-{name}-generated"}},
        {"name": "tls-assets", "projected": {"sources": []}},
        {"name": "config-out", "emptyDir": {"medium": "Memory"}},
        {"name": "web-config", "secret": {"secretName": f"alertmanager-{name}-web-config"}},
        {"name": "cluster-tls-config",
         "secret": {"secretName": f"alertmanager-{name}-cluster-tls-config"}},
        *copy.deepcopy(spec.get("volumes") or []),
    ]  # fmt: skip
    pod_spec: dict[str, Any] = {
        "containers": _server_containers(spec, [alertmanager, reloader], "containers"),
        "initContainers": _server_containers(spec, [init], "initContainers"),
        "securityContext": copy.deepcopy(spec.get("securityContext") or {}),
        "serviceAccountName": stack.service_account("alertmanager"),
        "terminationGracePeriodSeconds": 120,
        "volumes": volumes,
        **_placement(spec),
    }
    if spec.get("automountServiceAccountToken") is not None:
        pod_spec["automountServiceAccountToken"] = spec["automountServiceAccountToken"]
    return _pod(f"alertmanager-{name}-0", stack.namespace,
                f"Alertmanager/{stack.namespace}/{name}", pod_spec)  # fmt: skip


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def _extra_containers(text: Any) -> list[dict[str, Any]]:
    """The grafana chart's ``extraContainers``, a YAML list of containers.

    ``tpl`` renders it after Grafana's container (grafana 12.11.1 templates/_pod.tpl lines
    1545-1547).

    Args:
        text: the value (a string of YAML; empty or None for none).

    Raises:
        ValueError: the text holds a template (``{{``), which this rebuild cannot render.
    """
    if not text:
        return []
    if "{{" in str(text):
        raise ValueError(f"grafana.extraContainers holds a template, which the rebuild does not "
                         f"render: {str(text)[:80]!r}")  # fmt: skip
    containers: list[dict[str, Any]] = yaml.safe_load(str(text))
    return containers


def grafana_pod(stack: _Stack) -> dict[str, Any]:
    """Grafana's pod (grafana 12.11.1 templates/_pod.tpl) with its sidecars and extra containers.

    The dashboard and datasource sidecars where enabled (lines 735-867, 868-997), each given
    the admin user and password from the chart's Secret (``REQ_USERNAME``, ``REQ_PASSWORD``) to
    reload Grafana's provisioning; Grafana's container (lines 1246-1544), which gets them as
    ``GF_SECURITY_ADMIN_*``; then ``extraContainers`` (lines 1545-1547). Every field is the
    release's ``grafana`` values' (kube-prometheus-stack's block, then ours): :func:`_need`
    refuses one the values lack.

    Args:
        stack: the release's values.

    Raises:
        ValueError: a field the template needs is not in the values.
    """
    values = stack.values["grafana"]

    def need(path: str) -> Any:
        return copy.deepcopy(_need(values, path, "grafana"))

    # grafana.fullname: <release>-grafana (the release's name does not hold "grafana").
    full_name = f"{MONITORING_RELEASE}-grafana"
    admin = values.get("admin") or {}
    secret = admin.get("existingSecret") or full_name
    user_key = admin.get("userKey") or "admin-user"
    password_key = admin.get("passwordKey") or "admin-password"
    sidecar = values.get("sidecar") or {}
    containers: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = [{"name": "config", "configMap": {"name": full_name}}]
    mounts = [{"name": "config", "mountPath": "/etc/grafana/grafana.ini",
               "subPath": "grafana.ini"}]  # fmt: skip
    storage = {"name": "storage", "emptyDir": {}}
    if need("persistence.enabled") is True:
        storage = {"name": "storage", "persistentVolumeClaim": {"claimName": full_name}}
    volumes += [storage, {"name": "search", "emptyDir": {}}]
    mounts += [{"name": "storage", "mountPath": "/var/lib/grafana"},
               {"name": "search", "mountPath": "/var/lib/grafana-search"}]  # fmt: skip
    for kind, name, volume in (
        ("dashboards", "grafana-sc-dashboard", "sc-dashboard-volume"),
        ("datasources", "grafana-sc-datasources", "sc-datasources-volume"),
    ):
        switches = sidecar.get(kind) or {}
        if not switches.get("enabled") or switches.get(f"init{kind.capitalize()}"):
            continue
        folder = (
            need("sidecar.dashboards.folder")
            if kind == "dashboards"
            else "/etc/grafana/provisioning/datasources"
        )
        container: dict[str, Any] = {
            "name": name,
            "image": _image(need("sidecar.image"), stack.registry, need("sidecar.image.tag")),
            "imagePullPolicy": need("sidecar.imagePullPolicy"),
            "env": [_secret_env("REQ_USERNAME", secret, user_key),
                    _secret_env("REQ_PASSWORD", secret, password_key)],
            "resources": copy.deepcopy(sidecar.get("resources") or {}),
            "securityContext": need("sidecar.securityContext"),
            "volumeMounts": [
                {"name": volume, "mountPath": folder},
                *copy.deepcopy(switches.get("extraMounts") or []),
            ],
        }  # fmt: skip
        for field in ("livenessProbe", "readinessProbe"):  # the chart's default: none
            if sidecar.get(field):
                container[field] = copy.deepcopy(sidecar[field])
        containers.append(container)
        volumes.append({"name": volume, "emptyDir": {}})
        mounts.append({"name": volume, "mountPath": folder})
        # The chart's provider file, on by default (values.yaml line 1183): so it is needed.
        if kind == "dashboards" and need("sidecar.dashboards.SCProvider") is True:
            provider = {"name": f"{full_name}-config-dashboards"}
            volumes.append({"name": "sc-dashboard-provider", "configMap": provider})
            mounts.append({"name": "sc-dashboard-provider",
                           "mountPath": "/etc/grafana/provisioning/dashboards/"
                                        "sc-dashboardproviders.yaml",
                           "subPath": "provider.yaml"})  # fmt: skip
    # Lines 1394-1397 and 1736-1739: each extraEmptyDirMounts entry an emptyDir, mounted in
    # Grafana's container; lines 1744-1746: extraContainerVolumes as written, last.
    for entry in values.get("extraEmptyDirMounts") or []:
        mounts.append({"name": entry["name"], "mountPath": entry["mountPath"]})
        volumes.append({"name": entry["name"], "emptyDir": {}})
    volumes += copy.deepcopy(values.get("extraContainerVolumes") or [])
    gossip = need("gossipPortName")
    env = [_secret_env("GF_SECURITY_ADMIN_USER", secret, user_key),
           _secret_env("GF_SECURITY_ADMIN_PASSWORD", secret, password_key)]  # fmt: skip
    env += [{"name": k, "value": str(v)} for k, v in (values.get("env") or {}).items()]
    grafana: dict[str, Any] = {
        "name": "grafana",
        "image": _image(need("image"), stack.registry, need("image.tag")),
        "imagePullPolicy": need("image.pullPolicy"),
        "securityContext": need("containerSecurityContext"),
        "ports": [
            {"name": need("podPortName"), "containerPort": need("service.targetPort"),
             "protocol": "TCP"},
            {"name": f"{gossip}-tcp", "containerPort": 9094, "protocol": "TCP"},
            {"name": f"{gossip}-udp", "containerPort": 9094, "protocol": "UDP"},
            {"name": "profiling", "containerPort": 6060, "protocol": "TCP"},
        ],
        "env": env,
        "resources": copy.deepcopy(values.get("resources") or {}),
        "volumeMounts": mounts,
        "livenessProbe": need("livenessProbe"),
        "readinessProbe": need("readinessProbe"),
    }  # fmt: skip
    if values.get("envFromSecret"):
        grafana["envFrom"] = [{"secretRef": {"name": values["envFromSecret"]}}]
    account = values.get("serviceAccount") or {}
    spec = {
        # _helpers.tpl, grafana.serviceAccountName.
        "serviceAccountName": account.get("name")
        or (full_name if account.get("create") else "default"),
        "automountServiceAccountToken": need("automountServiceAccountToken"),
        "securityContext": need("securityContext"),
        "containers": [*containers, grafana, *_extra_containers(values.get("extraContainers"))],
        "volumes": volumes,
        **_placement(values),
    }
    source = f"Deployment/{stack.namespace}/{full_name}"
    return _pod(full_name, stack.namespace, source, spec, UNVERIFIED_TEMPLATES["grafana"])


def kube_state_metrics_pod(stack: _Stack) -> dict[str, Any]:
    """kube-state-metrics' pod (kube-state-metrics 8.4.0 templates/deployment.yaml).

    One container probed on ``/livez`` and ``/readyz``, the custom resource state config
    mounted where enabled; no kube-rbac-proxy (the template's branch for it is not rebuilt:
    enabling it is an error). Every field is the release's ``kube-state-metrics`` values'
    (ours): :func:`_need` refuses one they lack.

    Args:
        stack: the release's values.

    Raises:
        ValueError: a field the template needs is not in the values, or kube-rbac-proxy is on.
    """
    values = stack.values.get("kube-state-metrics") or {}

    def need(path: str) -> Any:
        return copy.deepcopy(_need(values, path, "kube-state-metrics"))

    if (values.get("kubeRBACProxy") or {}).get("enabled"):
        raise ValueError(
            "kube-state-metrics.kubeRBACProxy.enabled: not rebuilt (synth/chart_pods.py)"
        )
    full_name = f"{MONITORING_RELEASE}-kube-state-metrics"
    # _helpers.tpl, kube-state-metrics.image: the sha printed after "@" as it is written.
    image = need("image")
    reference = f"{stack.registry or need('image.registry')}/{need('image.repository')}"
    reference += f":{need('image.tag')}" + (f"@{image['sha']}" if image.get("sha") else "")

    def probe(kind: str, path: str, port: str) -> dict[str, Any]:
        # Lines 202-249: the path and port the template's, the rest the values'.
        keys = ("initialDelaySeconds", "periodSeconds", "successThreshold", "timeoutSeconds")
        timing = {k: need(f"{kind}.{k}") for k in keys}
        scheme = str(need(f"{kind}.httpGet.scheme")).upper()
        return {"failureThreshold": need(f"{kind}.failureThreshold"),
                "httpGet": {"path": path, "port": port, "scheme": scheme}, **timing}  # fmt: skip

    telemetry = (values.get("selfMonitor") or {}).get("telemetryPort") or 8081
    container: dict[str, Any] = {
        "name": "kube-state-metrics",
        "image": reference,
        "imagePullPolicy": need("image.pullPolicy"),
        # Lines 169-174: service.port, 8080 where unset, and the telemetry port.
        "ports": [{"name": "http",
                   "containerPort": (values.get("service") or {}).get("port") or 8080},
                  {"name": "metrics", "containerPort": telemetry}],
        "livenessProbe": probe("livenessProbe", "/livez", "http"),
        "readinessProbe": probe("readinessProbe", "/readyz", "metrics"),
        "resources": copy.deepcopy(values.get("resources") or {}),
        "securityContext": need("containerSecurityContext"),
    }  # fmt: skip
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if (values.get("customResourceState") or {}).get("enabled"):
        mounts.append({"name": "customresourcestate-config",
                       "mountPath": "/etc/customresourcestate", "readOnly": True})  # fmt: skip
        config = {"name": f"{full_name}-customresourcestate-config"}
        volumes.append({"name": "customresourcestate-config", "configMap": config})
    mounts += copy.deepcopy(values.get("volumeMounts") or [])
    volumes += copy.deepcopy(values.get("volumes") or [])
    if mounts:
        container["volumeMounts"] = mounts
    # Lines 51-53: the pod's securityContext less "enabled", where enabled (the default).
    context = need("securityContext")
    spec = {
        "serviceAccountName": full_name,
        "automountServiceAccountToken": need("automountServiceAccountToken"),
        "hostNetwork": bool(values.get("hostNetwork")),
        "securityContext": (
            {k: v for k, v in context.items() if k != "enabled"}
            if need("securityContext.enabled")
            else {}
        ),
        "containers": [container],
        "volumes": volumes,
        **_placement(values),
    }
    source = f"Deployment/{stack.namespace}/{full_name}"
    return _pod(
        full_name, stack.namespace, source, spec, UNVERIFIED_TEMPLATES["kube-state-metrics"]
    )


def monitoring_pods(
    release: Mapping[str, Any], defaults: ChartDefaults
) -> Iterator[dict[str, Any]]:
    """The pods kube-prometheus-stack runs for ``release``.

    The operator, Prometheus, Alertmanager, Grafana and kube-state-metrics, each where enabled.

    Args:
        release: the Helm release as ``helm/<release>.yaml`` has it.
        defaults: the charts' reference values (:func:`chart_defaults`).

    Raises:
        ValueError: a field the Grafana or kube-state-metrics template needs is not set.
    """
    stack = _Stack(release, defaults)
    values = stack.values
    if values["prometheusOperator"].get("enabled"):
        yield operator_pod(stack)
    if values["prometheus"].get("enabled"):
        yield prometheus_pod(stack)
    if values["alertmanager"].get("enabled"):
        yield alertmanager_pod(stack)
    if values["grafana"].get("enabled"):
        yield grafana_pod(stack)
    if values["kubeStateMetrics"].get("enabled"):
        yield kube_state_metrics_pod(stack)


def dcgm_exporter_pod(
    release: Mapping[str, Any], chart_defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """The DCGM exporter's pod (dcgm-exporter 4.8.2 deployment/templates/daemonset.yaml).

    ``hostPID`` and ``hostNetwork`` as set, the kubelet's pod-resources directory by hostPath
    (always), one hostPath per ``extraHostVolumes`` entry and the ``debug-dumps`` one where
    ``debugDump.enabled``, ``extraConfigMapVolumes`` as they are, the ``exporter`` container
    with the values' security context (root with SYS_ADMIN by default), the ``metrics`` port
    (``service.port``, no host port), probes on ``/health``, the token only where pod labels,
    pod UIDs or DRA need the API (``automountServiceAccountToken``). TLS and basic-auth
    volumes (Secrets) are left out.

    Args:
        release: the Helm release as ``helm/<release>.yaml`` has it.
        chart_defaults: the chart's values (:attr:`ChartDefaults.dcgm_exporter`).
    """
    values = helm_coalesced(chart_defaults, release.get("values") or {})
    namespace = str(release.get("namespace"))
    name = str(values.get("fullnameOverride") or f"{release['release']}-dcgm-exporter")
    port = values["service"]["port"]
    image = values["image"]
    kubernetes = values.get("kubernetes") or {}
    token = bool(
        (kubernetes.get("enablePodLabels") or kubernetes.get("enablePodUID"))
        and (kubernetes.get("rbac") or {}).get("create")
    ) or bool((values.get("kubernetesDRA") or {}).get("enabled"))
    debug = values.get("debugDump") or {}
    debug_volumes: list[dict[str, Any]] = (
        [{"name": "debug-dumps",
          "hostPath": {"path": debug["directory"], "type": "DirectoryOrCreate"}}]
        if debug.get("enabled") else []
    )  # fmt: skip
    health = {"path": "/health", "port": port}
    container = {
        "name": "exporter",
        "image": f"{image['repository']}:{image['tag']}",
        "imagePullPolicy": image["pullPolicy"],
        "securityContext": copy.deepcopy(values.get("securityContext") or {}),
        "env": [{"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "ports": [{"name": "metrics", "containerPort": port}],
        "volumeMounts": [
            {"name": "pod-gpu-resources", "readOnly": True,
             "mountPath": "/var/lib/kubelet/pod-resources"},
            *copy.deepcopy(values.get("extraVolumeMounts") or []),
            *({"name": "debug-dumps", "mountPath": v["hostPath"]["path"]} for v in debug_volumes),
        ],
        "livenessProbe": {"httpGet": health, **(values.get("livenessProbe") or {})},
        "readinessProbe": {"httpGet": dict(health), **(values.get("readinessProbe") or {})},
        "resources": copy.deepcopy(values.get("resources") or {}),
    }  # fmt: skip
    spec = {
        "priorityClassName": values.get("priorityClassName"),
        "hostPID": bool(values.get("hostPID")),
        "hostNetwork": bool(values.get("hostNetwork")),
        "serviceAccountName": name,
        "automountServiceAccountToken": token,
        "securityContext": copy.deepcopy(values.get("podSecurityContext") or {}),
        "volumes": [
            {"name": "pod-gpu-resources", "hostPath": {"path": values["kubeletPath"]}},
            *({"name": v["name"], "hostPath": {"path": v["hostPath"]}}
              for v in values.get("extraHostVolumes") or []),
            *copy.deepcopy(values.get("extraConfigMapVolumes") or []),
            *debug_volumes,
        ],
        "containers": [container],
        **_placement(values),
    }  # fmt: skip
    return _pod(name, namespace, f"DaemonSet/{namespace}/{name}", spec)


def chart_pods(
    releases: Mapping[str, Mapping[str, Any]], defaults: ChartDefaults | None = None
) -> list[dict[str, Any]]:
    """Every pod the observability releases run, rebuilt (none for a release not installed).

    Args:
        releases: ``helm/`` contents by release name.
        defaults: the charts' reference values (default: :func:`chart_defaults`, read only
            where a release needs them).

    Raises:
        synth.reference.MissingReference: a release needs reference data that is not there.
    """
    monitoring, dcgm = releases.get(MONITORING_RELEASE), releases.get(DCGM_RELEASE)
    if monitoring is None and dcgm is None:
        return []
    defaults = defaults or chart_defaults()
    pods: list[dict[str, Any]] = []
    if monitoring is not None:
        pods += monitoring_pods(monitoring, defaults)
    if dcgm is not None:
        pods.append(dcgm_exporter_pod(dcgm, defaults.dcgm_exporter))
    return pods
