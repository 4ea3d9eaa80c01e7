"""The pods the observability charts render, rebuilt from the releases' values.

Synthesis has no Helm: a release is its values. The pods below are what the charts (and the
Prometheus Operator, for the Prometheus and Alertmanager custom resources the chart renders)
would run, built from the release's values over the chart's defaults, so that the scan and a
reviewer read them. Only what a scanner judges is rebuilt: containers (image, pull policy,
ports, probes, resources, security context, mounts, the environment a Secret feeds), init
containers, the pod's security context, service account and token, volumes and placement.
Generated arguments, config hashes, the chart's soft anti-affinity and labels are left out.

The charts' defaults are embedded (no chart at synthesis time): kube-prometheus-stack's and
dcgm-exporter's are compared with the reference copies by tests/test_pods.py; the grafana and
kube-state-metrics subcharts' are not in the reference data and are read from their mirrors only
(:data:`UNVERIFIED_DEFAULTS` lists them; the test says so on every run).

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
from typing import Any, Final

import yaml

from components.metric_names import MONITORING_RELEASE, NODE_EXPORTERS_NAMESPACE
from components.observability.sources import DCGM_RELEASE
from synth.helm_values import helm_coalesced

POD_OF: Final = "trainingplatform.io/pod-of"
"""The annotation naming what a rebuilt pod stands for (as :mod:`synth.pods` writes it)."""
UNVERIFIED_ANNOTATION: Final = "trainingplatform.io/unverified-defaults"
"""The annotation of a pod whose unset fields come from defaults no test checks (the chart's
values file named), so that a reviewer of ``pods/`` reads it too."""

_DROP_ALL: Final = {"drop": ["ALL"]}

KUBE_PROMETHEUS_STACK_DEFAULTS: Final[dict[str, Any]] = {
    "global": {"imageRegistry": "", "imagePullSecrets": []},
    "fullnameOverride": "",
    "nameOverride": "",
    "cleanPrometheusOperatorObjectNames": False,
    "prometheusOperator": {
        "enabled": True,
        "image": {
            "registry": "quay.io",
            "repository": "prometheus-operator/prometheus-operator",
            "tag": "",
            "sha": "",
            "pullPolicy": "IfNotPresent",
        },
        "prometheusConfigReloader": {
            "image": {
                "registry": "quay.io",
                "repository": "prometheus-operator/prometheus-config-reloader",
                "tag": "",
                "sha": "",
            },
            "enableProbe": False,
            "resources": {},
        },
        "tls": {"enabled": True, "internalPort": 10250},
        "admissionWebhooks": {"certManager": {"enabled": False}},
        "serviceAccount": {"create": True, "name": ""},
        "resources": {},
        "env": {"GOGC": "30"},
        "securityContext": {
            "fsGroup": 65534,
            "runAsGroup": 65534,
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containerSecurityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": _DROP_ALL,
        },
        "automountServiceAccountToken": True,
        "hostNetwork": False,
        "readinessProbe": {
            "enabled": True,
            "failureThreshold": 3,
            "initialDelaySeconds": 0,
            "periodSeconds": 10,
            "successThreshold": 1,
            "timeoutSeconds": 1,
        },
        "livenessProbe": {
            "enabled": True,
            "failureThreshold": 3,
            "initialDelaySeconds": 0,
            "periodSeconds": 10,
            "successThreshold": 1,
            "timeoutSeconds": 1,
        },
        "extraVolumes": [],
        "extraVolumeMounts": [],
        "nodeSelector": {},
        "tolerations": [],
        "affinity": {},
    },
    "prometheus": {
        "enabled": True,
        "serviceAccount": {"create": True, "name": ""},
        "prometheusSpec": {
            "image": {
                "registry": "quay.io",
                "repository": "prometheus/prometheus",
                "tag": "v3.14.0-distroless",
                "sha": "",
                "pullPolicy": "IfNotPresent",
            },
            "securityContext": {
                "runAsGroup": 2000,
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "fsGroup": 2000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "automountServiceAccountToken": True,
            "portName": "http-web",
            "listenLocal": False,
            "hostNetwork": False,
            "resources": {},
            "containers": [],
            "initContainers": [],
            "volumes": [],
            "volumeMounts": [],
            "priorityClassName": "",
            "nodeSelector": {},
            "tolerations": [],
            "podMetadata": {},
        },
    },
    "alertmanager": {
        "enabled": True,
        "serviceAccount": {"create": True, "name": ""},
        "alertmanagerSpec": {
            "image": {
                "registry": "quay.io",
                "repository": "prometheus/alertmanager",
                "tag": "v0.34.0",
                "sha": "",
                "pullPolicy": "IfNotPresent",
            },
            "securityContext": {
                "runAsGroup": 2000,
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "fsGroup": 2000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "automountServiceAccountToken": True,
            "portName": "http-web",
            "listenLocal": False,
            "resources": {},
            "containers": [],
            "initContainers": [],
            "volumes": [],
            "volumeMounts": [],
            "priorityClassName": "",
            "nodeSelector": {},
            "tolerations": [],
            "podMetadata": {},
        },
    },
    "grafana": {
        "enabled": True,
        "admin": {"existingSecret": "", "userKey": "admin-user", "passwordKey": "admin-password"},
        "serviceAccount": {"create": True, "autoMount": True},
        "sidecar": {"dashboards": {"enabled": True}, "datasources": {"enabled": True}},
    },
    "kubeStateMetrics": {"enabled": True},
}
"""What the pods rest on in kube-prometheus-stack 88.5.3 values.yaml (the chart's ``grafana``
block is its own values over the subchart's)."""
OPERATOR_APP_VERSION: Final = "v0.93.1"
"""kube-prometheus-stack 88.5.3 Chart.yaml ``appVersion``: the operator's and config
reloader's image tag where ``image.tag`` is empty (deployment.yaml)."""

GRAFANA_DEFAULTS: Final[dict[str, Any]] = {
    "image": {
        "registry": "docker.io",
        "repository": "grafana/grafana",
        "tag": "",
        "sha": "",
        "pullPolicy": "IfNotPresent",
    },
    "automountServiceAccountToken": True,
    "securityContext": {"runAsNonRoot": True, "runAsUser": 472, "runAsGroup": 472, "fsGroup": 472},
    "containerSecurityContext": {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": _DROP_ALL,
        "seccompProfile": {"type": "RuntimeDefault"},
    },
    "readinessProbe": {"httpGet": {"path": "/api/health", "port": "grafana"}},
    "livenessProbe": {
        "httpGet": {"path": "/api/health", "port": "grafana"},
        "initialDelaySeconds": 60,
        "timeoutSeconds": 30,
        "failureThreshold": 10,
    },
    "resources": {},
    "podPortName": "grafana",
    "service": {"targetPort": 3000},
    "persistence": {"enabled": False},
    "env": {},
    "envFromSecret": "",
    "extraContainerVolumes": [],
    "sidecar": {
        "image": {"registry": "quay.io", "repository": "kiwigrid/k8s-sidecar", "tag": "2.10.1",
                  "sha": ""},
        "imagePullPolicy": "IfNotPresent",
        "resources": {},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": _DROP_ALL,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "livenessProbe": {},
        "readinessProbe": {},
        "dashboards": {"enabled": False, "folder": "/tmp/dashboards", "SCProvider": True,
                       "initDashboards": False, "extraMounts": []},
        "datasources": {"enabled": False, "initDatasources": False, "extraMounts": []},
    },
    "nodeSelector": {},
    "tolerations": [],
    "affinity": {},
}  # fmt: skip
"""grafana 12.11.1 values.yaml (grafana-community/helm-charts grafana-12.11.1
charts/grafana/values.yaml), what _pod.tpl reads for the pod below. NOT in the reference data:
read from the mirror only."""
GRAFANA_APP_VERSION: Final = "13.2.0"
"""grafana 12.11.1 Chart.yaml ``appVersion``: Grafana's image tag where ``image.tag`` is empty."""

KUBE_STATE_METRICS_DEFAULTS: Final[dict[str, Any]] = {
    "image": {
        "registry": "registry.k8s.io",
        "repository": "kube-state-metrics/kube-state-metrics",
        "tag": "",
        "sha": "",
        "pullPolicy": "IfNotPresent",
    },
    "automountServiceAccountToken": True,
    "hostNetwork": False,
    "securityContext": {
        "enabled": True,
        "runAsGroup": 65534,
        "runAsUser": 65534,
        "fsGroup": 65534,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    },
    "containerSecurityContext": {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": _DROP_ALL,
    },
    "livenessProbe": {"failureThreshold": 3, "initialDelaySeconds": 5, "periodSeconds": 10,
                      "successThreshold": 1, "timeoutSeconds": 5},
    "readinessProbe": {"failureThreshold": 3, "initialDelaySeconds": 5, "periodSeconds": 10,
                       "successThreshold": 1, "timeoutSeconds": 5},
    "resources": {},
    "service": {"port": 8080},
    "selfMonitor": {"enabled": False},
    "kubeRBACProxy": {"enabled": False},
    "customResourceState": {"enabled": False, "key": "config.yaml"},
    "volumes": [],
    "volumeMounts": [],
    "nodeSelector": {},
    "tolerations": [],
    "affinity": {},
}  # fmt: skip
"""kube-state-metrics 8.4.0 values.yaml (prometheus-community/helm-charts
kube-state-metrics-8.4.0 charts/kube-state-metrics/values.yaml), what deployment.yaml reads for
the pod below. NOT in the reference data: read from the mirror only."""
KUBE_STATE_METRICS_APP_VERSION: Final = "2.20.0"
"""kube-state-metrics 8.4.0 Chart.yaml ``appVersion`` (the image tag is ``v`` + it)."""

UNVERIFIED_DEFAULTS: Final[dict[str, str]] = {
    "grafana": "grafana 12.11.1 values.yaml",
    "kube-state-metrics": "kube-state-metrics 8.4.0 values.yaml",
}
"""The subcharts whose defaults the reference data lacks: the Grafana and kube-state-metrics
pods' unset fields come from :data:`GRAFANA_DEFAULTS` and :data:`KUBE_STATE_METRICS_DEFAULTS`,
read from the charts' mirrors and checked by no test."""

DCGM_EXPORTER_DEFAULTS: Final[dict[str, Any]] = {
    "image": {
        "repository": "nvcr.io/nvidia/k8s/dcgm-exporter",
        "pullPolicy": "IfNotPresent",
        "tag": "4.5.3-4.8.2-distroless",
    },
    "hostPID": False,
    "hostNetwork": False,
    "priorityClassName": "system-node-critical",
    "podSecurityContext": {},
    "securityContext": {
        "runAsNonRoot": False,
        "runAsUser": 0,
        "capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]},
        "allowPrivilegeEscalation": False,
    },
    "resources": {
        "limits": {"cpu": "200m", "memory": "512Mi"},
        "requests": {"cpu": "100m", "memory": "128Mi"},
    },
    "service": {"port": 9400},
    "kubeletPath": "/var/lib/kubelet/pod-resources",
    "extraHostVolumes": [],
    "extraConfigMapVolumes": [
        {
            "name": "exporter-metrics-volume",
            "configMap": {
                "name": "exporter-metrics-config-map",
                "items": [{"key": "metrics", "path": "default-counters.csv"}],
            },
        }
    ],
    "extraVolumeMounts": [
        {
            "name": "exporter-metrics-volume",
            "mountPath": "/etc/dcgm-exporter/default-counters.csv",
            "subPath": "default-counters.csv",
        }
    ],
    "kubernetes": {"enablePodLabels": False, "enablePodUID": False, "rbac": {"create": True}},
    "kubernetesDRA": {"enabled": False},
    "debugDump": {
        "enabled": False,
        "directory": "/tmp/dcgm-exporter-debug",
        "retention": 24,
        "compression": True,
    },
    "livenessProbe": {"initialDelaySeconds": 45, "periodSeconds": 5},
    "readinessProbe": {"initialDelaySeconds": 45},
    "nodeSelector": {},
    "tolerations": [
        {
            "key": "node-role.kubernetes.io/control-plane",
            "operator": "Exists",
            "effect": "NoSchedule",
        }
    ],
    "affinity": {},
}
"""What the DaemonSet rests on in dcgm-exporter 4.8.2 values.yaml."""


CHART_CHOSEN_IMAGES: Final = ("Pod.monitoring.*", f"Pod.{NODE_EXPORTERS_NAMESPACE}.{DCGM_RELEASE}")
"""Scan ids (``Kind.namespace.name`` patterns) of the rebuilt pods, whose images the charts
choose: no file of this repository names them, so no dependency bot group pins their digests
(policies/scan-waivers.yaml, their CKV_K8S_43 entry)."""


def _pod(
    name: str, namespace: str, source: str, spec: dict[str, Any], unverified: str = ""
) -> dict[str, Any]:
    """A Pod manifest named for its workload, annotated with what it stands for.

    Args:
        name: the pod's name (a Deployment's or DaemonSet's own name, a StatefulSet's pod 0).
        namespace: the release's namespace.
        source: what renders it (``<kind>/<namespace>/<name>``).
        spec: the pod's spec.
        unverified: the values file of unchecked defaults it rests on (default: none).
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

    def __init__(self, release: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
        """The release's values over ``defaults``.

        Args:
            release: the Helm release as ``helm/<release>.yaml`` has it.
            defaults: the chart's values (:data:`KUBE_PROMETHEUS_STACK_DEFAULTS`).
        """
        self.values: dict[str, Any] = helm_coalesced(defaults, release.get("values") or {})
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
            operator["prometheusConfigReloader"]["image"], self.registry, OPERATOR_APP_VERSION
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
        "image": _image(operator["image"], stack.registry, OPERATOR_APP_VERSION),
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


def grafana_pod(stack: _Stack, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Grafana's pod (grafana 12.11.1 templates/_pod.tpl) with its sidecars.

    The dashboard and datasource sidecars where enabled, each given the admin user and password
    from the chart's Secret (``REQ_USERNAME``, ``REQ_PASSWORD``) to reload Grafana's
    provisioning; Grafana itself gets them as ``GF_SECURITY_ADMIN_*``.

    Args:
        stack: the release's values.
        defaults: the grafana chart's values (:data:`GRAFANA_DEFAULTS`).
    """
    values = helm_coalesced(defaults, stack.values["grafana"])
    # grafana.fullname: <release>-grafana (the release's name does not hold "grafana").
    full_name = f"{MONITORING_RELEASE}-grafana"
    admin = values.get("admin") or {}
    secret = admin.get("existingSecret") or full_name
    credentials = [
        _secret_env("GF_SECURITY_ADMIN_USER", secret, admin.get("userKey") or "admin-user"),
        _secret_env("GF_SECURITY_ADMIN_PASSWORD", secret,
                    admin.get("passwordKey") or "admin-password"),
    ]  # fmt: skip
    sidecar = values["sidecar"]
    sidecar_image = _image(sidecar["image"], stack.registry, "")
    containers: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = [{"name": "config", "configMap": {"name": full_name}}]
    mounts = [{"name": "config", "mountPath": "/etc/grafana/grafana.ini",
               "subPath": "grafana.ini"}]  # fmt: skip
    storage = {"name": "storage", "emptyDir": {}}
    if (values.get("persistence") or {}).get("enabled"):
        storage = {"name": "storage", "persistentVolumeClaim": {"claimName": full_name}}
    volumes += [storage, {"name": "search", "emptyDir": {}}]
    mounts += [{"name": "storage", "mountPath": "/var/lib/grafana"},
               {"name": "search", "mountPath": "/var/lib/grafana-search"}]  # fmt: skip
    for kind, volume, folder in (
        ("dashboards", "sc-dashboard-volume", sidecar["dashboards"].get("folder")),
        ("datasources", "sc-datasources-volume", "/etc/grafana/provisioning/datasources"),
    ):
        if not sidecar[kind].get("enabled"):
            continue
        container: dict[str, Any] = {
            "name": f"grafana-sc-{kind.removesuffix('s') if kind == 'dashboards' else kind}",
            "image": sidecar_image,
            "imagePullPolicy": sidecar["imagePullPolicy"],
            "env": copy.deepcopy(credentials),
            "resources": copy.deepcopy(sidecar.get("resources") or {}),
            "securityContext": copy.deepcopy(sidecar.get("securityContext") or {}),
            "volumeMounts": [
                {"name": volume, "mountPath": folder},
                *copy.deepcopy(sidecar[kind].get("extraMounts") or []),
            ],
        }
        for field in ("livenessProbe", "readinessProbe"):
            if sidecar.get(field):
                container[field] = copy.deepcopy(sidecar[field])
        containers.append(container)
        volumes.append({"name": volume, "emptyDir": {}})
        mounts.append({"name": volume, "mountPath": folder})
        if kind == "dashboards" and sidecar["dashboards"].get("SCProvider"):
            volumes.append(
                {
                    "name": "sc-dashboard-provider",
                    "configMap": {"name": f"{full_name}-config-dashboards"},
                }
            )
            mounts.append({"name": "sc-dashboard-provider",
                           "mountPath": "/etc/grafana/provisioning/dashboards/"
                                        "sc-dashboardproviders.yaml",
                           "subPath": "provider.yaml"})  # fmt: skip
    port = values["podPortName"]
    grafana: dict[str, Any] = {
        "name": "grafana",
        "image": _image(values["image"], stack.registry, GRAFANA_APP_VERSION),
        "imagePullPolicy": values["image"]["pullPolicy"],
        "securityContext": copy.deepcopy(values.get("containerSecurityContext") or {}),
        "ports": [
            {"name": port, "containerPort": values["service"]["targetPort"], "protocol": "TCP"},
            {"name": "gossip-tcp", "containerPort": 9094, "protocol": "TCP"},
            {"name": "gossip-udp", "containerPort": 9094, "protocol": "UDP"},
            {"name": "profiling", "containerPort": 6060, "protocol": "TCP"},
        ],
        "env": [*copy.deepcopy(credentials),
                *({"name": k, "value": str(v)} for k, v in (values.get("env") or {}).items())],
        "resources": copy.deepcopy(values.get("resources") or {}),
        "volumeMounts": mounts,
    }  # fmt: skip
    if values.get("envFromSecret"):
        grafana["envFrom"] = [{"secretRef": {"name": values["envFromSecret"]}}]
    for field in ("livenessProbe", "readinessProbe"):
        if values.get(field):
            grafana[field] = copy.deepcopy(values[field])
    # _pod.tpl lines 1394-1397 and 1736-1739: each extraEmptyDirMounts entry an emptyDir,
    # mounted in Grafana's container; lines 1744-1746: extraContainerVolumes as written, last.
    for entry in values.get("extraEmptyDirMounts") or []:
        mounts.append({"name": entry["name"], "mountPath": entry["mountPath"]})
        volumes.append({"name": entry["name"], "emptyDir": {}})
    volumes += copy.deepcopy(values.get("extraContainerVolumes") or [])
    spec = {
        "serviceAccountName": (values.get("serviceAccount") or {}).get("name") or full_name,
        "automountServiceAccountToken": values.get("automountServiceAccountToken"),
        "securityContext": copy.deepcopy(values.get("securityContext") or {}),
        "containers": [*containers, grafana, *_extra_containers(values.get("extraContainers"))],
        "volumes": volumes,
        **_placement(values),
    }
    source = f"Deployment/{stack.namespace}/{full_name}"
    return _pod(full_name, stack.namespace, source, spec, UNVERIFIED_DEFAULTS["grafana"])


def kube_state_metrics_pod(stack: _Stack, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """kube-state-metrics' pod (kube-state-metrics 8.4.0 templates/deployment.yaml).

    One container probed on ``/livez`` and ``/readyz``, the custom resource state config
    mounted where enabled; no kube-rbac-proxy (off by default).

    Args:
        stack: the release's values.
        defaults: the subchart's values (:data:`KUBE_STATE_METRICS_DEFAULTS`).
    """
    values = helm_coalesced(defaults, stack.values.get("kube-state-metrics") or {})
    full_name = f"{MONITORING_RELEASE}-kube-state-metrics"
    image = values["image"]
    reference = _image(image, stack.registry, f"v{KUBE_STATE_METRICS_APP_VERSION}")
    context = {k: v for k, v in (values.get("securityContext") or {}).items() if k != "enabled"}

    def probe(settings: Mapping[str, Any], path: str, port: str) -> dict[str, Any]:
        timing = {k: v for k, v in settings.items() if k != "httpGet"}
        return {"httpGet": {"path": path, "port": port, "scheme": "HTTP"}, **timing}

    service_port = values["service"]["port"]
    container: dict[str, Any] = {
        "name": "kube-state-metrics",
        "image": reference,
        "imagePullPolicy": image["pullPolicy"],
        "ports": [{"name": "http", "containerPort": service_port},
                  {"name": "metrics", "containerPort": 8081}],
        "livenessProbe": probe(values["livenessProbe"], "/livez", "http"),
        "readinessProbe": probe(values["readinessProbe"], "/readyz", "metrics"),
        "resources": copy.deepcopy(values.get("resources") or {}),
        "securityContext": copy.deepcopy(values.get("containerSecurityContext") or {}),
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
    spec = {
        "serviceAccountName": full_name,
        "automountServiceAccountToken": values.get("automountServiceAccountToken"),
        "hostNetwork": bool(values.get("hostNetwork")),
        "securityContext": context if (values.get("securityContext") or {}).get("enabled") else {},
        "containers": [container],
        "volumes": volumes,
        **_placement(values),
    }
    source = f"Deployment/{stack.namespace}/{full_name}"
    return _pod(full_name, stack.namespace, source, spec, UNVERIFIED_DEFAULTS["kube-state-metrics"])


def monitoring_pods(
    release: Mapping[str, Any],
    chart_defaults: Mapping[str, Any] | None = None,
    subchart_defaults: Mapping[str, Mapping[str, Any]] | None = None,
) -> Iterator[dict[str, Any]]:
    """The pods kube-prometheus-stack runs for ``release``.

    The operator, Prometheus, Alertmanager, Grafana and kube-state-metrics, each where enabled.

    Args:
        release: the Helm release as ``helm/<release>.yaml`` has it.
        chart_defaults: the chart's values (default :data:`KUBE_PROMETHEUS_STACK_DEFAULTS`;
            the tests pass the reference copy).
        subchart_defaults: the ``grafana`` and ``kube-state-metrics`` subcharts' values
            (default :data:`GRAFANA_DEFAULTS` and :data:`KUBE_STATE_METRICS_DEFAULTS`).
    """
    stack = _Stack(release, chart_defaults or KUBE_PROMETHEUS_STACK_DEFAULTS)
    subcharts = {"grafana": GRAFANA_DEFAULTS, "kube-state-metrics": KUBE_STATE_METRICS_DEFAULTS,
                 **(subchart_defaults or {})}  # fmt: skip
    values = stack.values
    if values["prometheusOperator"].get("enabled"):
        yield operator_pod(stack)
    if values["prometheus"].get("enabled"):
        yield prometheus_pod(stack)
    if values["alertmanager"].get("enabled"):
        yield alertmanager_pod(stack)
    if values["grafana"].get("enabled"):
        yield grafana_pod(stack, subcharts["grafana"])
    if values["kubeStateMetrics"].get("enabled"):
        yield kube_state_metrics_pod(stack, subcharts["kube-state-metrics"])


def dcgm_exporter_pod(
    release: Mapping[str, Any], chart_defaults: Mapping[str, Any] | None = None
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
        chart_defaults: the chart's values (default :data:`DCGM_EXPORTER_DEFAULTS`).
    """
    values = helm_coalesced(chart_defaults or DCGM_EXPORTER_DEFAULTS, release.get("values") or {})
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


def chart_pods(releases: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every pod the observability releases run, rebuilt (none for a release not installed).

    Args:
        releases: ``helm/`` contents by release name.
    """
    pods: list[dict[str, Any]] = []
    if (monitoring := releases.get(MONITORING_RELEASE)) is not None:
        pods += monitoring_pods(monitoring)
    if (dcgm := releases.get(DCGM_RELEASE)) is not None:
        pods.append(dcgm_exporter_pod(dcgm))
    return pods
