"""The fleet's metrics stack: kube-prometheus-stack grown from Slurm's minimal Prometheus.

Pure builders of the release's values and of the objects beside it (docs: concepts,
observability, "The metrics stack"); :mod:`components.observability.stack` registers them.

- Prometheus keeps ``retentionDays`` of samples and stops at 90% of its volume, a claim on an
  encrypted gp3 class that retains the volume, on the system nodes; it selects every
  ServiceMonitor, PodMonitor, Probe, ScrapeConfig and PrometheusRule of the cluster.
- kube-state-metrics (the chart's subchart) exports the objects' states the cold-start ledger
  and the queue dashboards read; the ledger's extra values (custom resource state, allowlists)
  are merged in by the caller.
- The kubelet's ServiceMonitor (cAdvisor and the kubelet's own metrics) is on; node-exporter
  is not (:data:`NODE_EXPORTER_ENABLED`).
- Alertmanager runs with no receiver: the alerts are routed to ``null`` until the operator
  adds one (docs: how-to, observability).
- Grafana logs people in through the platform's OIDC client where one is configured, into the
  organisations their groups map to: the fleet's for the platform's admins, one per team for
  its members (:mod:`components.observability.grafana_orgs`). The dashboards come from
  ConfigMaps (one per dashboard), each into its organisation's folder; the fleet's
  organisation has Prometheus and CloudWatch, each team's its own Prometheus datasource.
- In production, optionally, every sample is also written to Amazon Managed Service for
  Prometheus with SigV4 (no static key: the Prometheus pods' Pod Identity role).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from components import versions
from components.acceptance_gate import TOKEN_DIR as API_TOKEN_DIR
from components.acceptance_gate import api_token_projection
from components.config import OidcConfig, PlatformConfig, TeamConfig
from components.helm import with_system_placement
from components.metric_names import (
    MONITORING_NAMESPACE,
    MONITORING_RELEASE,
    PROMETHEUS_SERVICE_ACCOUNT,
    SCRAPE_INTERVAL,
)
from components.observability.grafana_orgs import (
    DASHBOARDS_PATH,
    FLEET_ORG,
    grafana_orgs,
    grafana_orgs_values,
    org_mapping,
    org_mapping_setting,
)

PROMETHEUS_STORAGE_CLASS: Final = "monitoring-gp3"
"""The StorageClass of Prometheus' and Alertmanager's volumes: encrypted gp3 (the stack's data
key where it has one), ``Retain``. Its own, not the notebooks' (which exists only with
notebooks): the samples must outlive a deleted claim on every stack."""
RETENTION_SIZE_SHARE: Final = 0.9
"""Prometheus deletes its oldest blocks once they take this share of the volume, so a full
volume loses old samples, not new ones (the WAL and the compaction's scratch need the rest)."""

GRAFANA_SERVICE_ACCOUNT: Final = f"{MONITORING_RELEASE}-grafana"
"""Grafana's service account: the grafana chart's fullname, ``<release>-grafana``
(grafana-community/helm-charts grafana-12.11.1 charts/grafana/templates/_helpers.tpl,
``grafana.fullname``), set explicitly too; its CloudWatch role is associated with it."""
GRAFANA_POD_LABELS: Final = {
    "app.kubernetes.io/name": "grafana",
    "app.kubernetes.io/instance": MONITORING_RELEASE,
}
"""Grafana's pod labels (grafana-12.11.1 templates/_helpers.tpl, ``grafana.selectorLabels``)."""
GRAFANA_PORT: Final = 3000
"""Grafana's container port (grafana-12.11.1 values.yaml ``service.targetPort``)."""
GRAFANA_SERVICE_PORT: Final = 80
"""The chart's Service port (``service.port``): ``kubectl port-forward svc/monitoring-grafana
3000:80`` reaches Grafana at http://localhost:3000, its default ``root_url``."""
GRAFANA_OIDC_SECRET: Final = "grafana-oidc"
"""Secret holding the OIDC client's secret as Grafana's environment (``envFromSecret``)."""
GRAFANA_CLIENT_SECRET_VARIABLE: Final = "GF_AUTH_GENERIC_OAUTH_CLIENT_SECRET"
"""Grafana reads every setting from ``GF_<SECTION>_<KEY>`` too (Grafana docs, "Configure
Grafana", "Override configuration with environment variables"): the secret never enters the
release's values."""
KUBE_STATE_METRICS_PORT: Final = 8080
"""kube-state-metrics' metrics port (kube-state-metrics 8.4.0 values.yaml ``service.port``)."""
ALERTMANAGER_PORT: Final = 9093
"""Alertmanager's web port, where Prometheus sends alerts (prometheus-operator v0.93.1
pkg/alertmanager/statefulset.go)."""

DASHBOARD_LABEL: Final = "grafana_dashboard"
DASHBOARD_LABEL_VALUE: Final = "1"
"""The label Grafana's dashboard sidecar watches (kube-prometheus-stack 88.5.3 values.yaml
``grafana.sidecar.dashboards.label``/``labelValue``)."""
DASHBOARD_FOLDER_ANNOTATION: Final = "grafana_folder"
"""The annotation naming a dashboard ConfigMap's folder (grafana-12.11.1 values.yaml
``sidecar.dashboards.folderAnnotation``): the sidecar writes the dashboard into that directory,
which one organisation's provider reads (:func:`~components.observability.grafana_orgs.
dashboard_provider`)."""
FLEET_FOLDER: Final = FLEET_ORG
"""The folder of the dashboards about the whole fleet, in the fleet's organisation; every
other folder is one team's, in that team's organisation."""

PROMETHEUS_DATASOURCE_UID: Final = "prometheus"
"""The chart's Prometheus datasource (kube-prometheus-stack 88.5.3 values.yaml
``grafana.sidecar.datasources.uid``): what the dashboards name."""
CLOUDWATCH_DATASOURCE_UID: Final = "cloudwatch"
"""The CloudWatch datasource: FSx (``AWS/FSx``) and the file system's release schedules
(``AWS/Scheduler``, ``AWS/SQS`` of the failures queue) for the storage dashboard."""

NODE_EXPORTER_ENABLED: Final = False
"""node-exporter stays off. It would be one more DaemonSet on every accelerator node (it must
tolerate every taint to be useful), with the host's network, PID namespace and root filesystem
(prometheus-node-exporter 4.56.1 values.yaml ``hostNetwork``, ``hostPID``, ``hostRootFsMount``),
which the platform's pod policies refuse, and its requests would be taken from every training
pod. The kubelet's ServiceMonitor gives the dashboards what they read per node and per pod
instead: cAdvisor's ``container_cpu_usage_seconds_total``, ``container_memory_working_set_bytes``
and ``container_fs_*`` (the node's root cgroup ``id="/"`` is the host), and the kubelet's
``kubelet_volume_stats_*`` for claims, at no cost on the nodes."""

CLUSTER_TARGETS_OFF: Final = (
    "kubeApiServer",
    "kubeControllerManager",
    "coreDns",
    "kubeEtcd",
    "kubeScheduler",
    "kubeProxy",
)
"""The chart's ServiceMonitors of the cluster that stay off: EKS's control plane is not
scrapable, kube-proxy serves its metrics on the node's loopback, and nothing here reads the
API server's or CoreDNS'. The kubelet's is on (:data:`NODE_EXPORTER_ENABLED`)."""


def _requests(cpu: str, memory: str, *, memory_limit: str) -> dict[str, Any]:
    """A container's resources: CPU and memory requests, a memory limit and no CPU limit.

    Args:
        cpu: the CPU request (a Kubernetes quantity, e.g. ``100m``).
        memory: the memory request (e.g. ``256Mi``).
        memory_limit: the memory limit, the most the container may use before it is killed;
            CPU is left unlimited so a busy container is throttled by its request's share only.
    """
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory_limit}}


PROMETHEUS_RESOURCES: Final = _requests("500m", "4Gi", memory_limit="8Gi")
"""Prometheus' requests: a few hundred thousand series (kube-state-metrics, cAdvisor, DCGM on
a few hundred accelerators) need a few GiB of head block; the system nodes (m7i.xlarge, 16
GiB) hold it beside the controllers."""
KUBE_STATE_METRICS_RESOURCES: Final = _requests("100m", "256Mi", memory_limit="1Gi")
ALERTMANAGER_RESOURCES: Final = _requests("50m", "64Mi", memory_limit="256Mi")
GRAFANA_RESOURCES: Final = _requests("100m", "256Mi", memory_limit="1Gi")
OPERATOR_RESOURCES: Final = _requests("100m", "128Mi", memory_limit="512Mi")
CONFIG_RELOADER_RESOURCES: Final = _requests("10m", "50Mi", memory_limit="50Mi")
"""The config reloader beside Prometheus and Alertmanager: the operator's own defaults
(prometheus-operator v0.93.0 cmd/operator/main.go, ``defaultReloaderCPU``,
``defaultReloaderMemory``) less the CPU limit. The chart passes none unless
``prometheusOperator.prometheusConfigReloader.resources`` is set (kube-prometheus-stack 88.5.3
templates/prometheus-operator/deployment.yaml lines 101-104, ``--config-reloader-*`` flags, 0
where unset)."""
GRAFANA_SIDECAR_RESOURCES: Final = _requests("50m", "64Mi", memory_limit="256Mi")
"""Grafana's dashboard and datasource sidecars (k8s-sidecar: a Python watch of ConfigMaps), which
the chart leaves unbounded (grafana 12.11.1 values.yaml ``sidecar.resources``, its example 50m
and 50Mi; templates/_pod.tpl lines 853 and 982 copy it into the dashboard and datasource
sidecars)."""
ALERTMANAGER_STORAGE_GIB: Final = 2
"""Alertmanager's volume: its silences and notification log, a few MiB."""
ALERTMANAGER_RETENTION: Final = "120h"
"""How long Alertmanager keeps resolved alerts and expired silences (the chart's default)."""

# What the Grafana and kube-state-metrics pods run with, stated in our values rather than left
# to the subcharts' defaults, which the reference data does not hold: a chart bump cannot change
# them unseen, and the rebuilt pods (synth/chart_pods.py) read them from the values alone. Each
# names the subchart's values.yaml line it overrides (grafana-community/helm-charts
# grafana-12.11.1 charts/grafana/values.yaml; prometheus-community/helm-charts
# kube-state-metrics-8.4.0 charts/kube-state-metrics/values.yaml); the values are the charts'
# own, judged by the scan (policies/scan-waivers.yaml) and by Pod Security restricted.
PULL_POLICY: Final = "IfNotPresent"
"""The images' pull policy (grafana 12.11.1 values.yaml lines 116 and 1047; kube-state-metrics
8.4.0 values.yaml line 9): a restart never waits on the registry; the images are pinned."""
GRAFANA_POD_SECURITY_CONTEXT: Final = {
    "runAsNonRoot": True,
    "runAsUser": 472,
    "runAsGroup": 472,
    "fsGroup": 472,
}
"""Grafana's pod: the image's grafana user and group, 472 (grafana 12.11.1 values.yaml line 159,
``securityContext``); the organisations' container runs as it too."""
GRAFANA_CONTAINER_SECURITY_CONTEXT: Final = {
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""Grafana's container (grafana 12.11.1 values.yaml line 165, ``containerSecurityContext``):
restricted Pod Security but for a read-only root (policies/scan-waivers.yaml, CKV_K8S_22)."""
GRAFANA_SIDECAR_SECURITY_CONTEXT: Final = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The dashboard and datasource sidecars (grafana 12.11.1 values.yaml line 1055,
``sidecar.securityContext``); they run as the pod's user."""
GRAFANA_PORT_NAME: Final = "grafana"
"""Grafana's container port's name, which its probes name (grafana 12.11.1 values.yaml line 242,
``podPortName``)."""
GRAFANA_READINESS_PROBE: Final = {"httpGet": {"path": "/api/health", "port": GRAFANA_PORT_NAME}}
"""grafana 12.11.1 values.yaml line 90, ``readinessProbe``."""
GRAFANA_LIVENESS_PROBE: Final = {
    "httpGet": {"path": "/api/health", "port": GRAFANA_PORT_NAME},
    "initialDelaySeconds": 60,
    "timeoutSeconds": 30,
    "failureThreshold": 10,
}
"""grafana 12.11.1 values.yaml line 95, ``livenessProbe``: a minute to migrate its database."""
KUBE_STATE_METRICS_POD_SECURITY_CONTEXT: Final = {
    "enabled": True,
    "runAsGroup": 65534,
    "runAsUser": 65534,
    "fsGroup": 65534,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""kube-state-metrics' pod as nobody (kube-state-metrics 8.4.0 values.yaml line 339,
``securityContext``; ``enabled`` is the chart's switch, left out of the pod)."""
KUBE_STATE_METRICS_CONTAINER_SECURITY_CONTEXT: Final = {
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}
"""kube-state-metrics 8.4.0 values.yaml line 351, ``containerSecurityContext``."""
KUBE_STATE_METRICS_PROBE: Final = {
    "failureThreshold": 3,
    "httpGet": {"scheme": "http"},
    "initialDelaySeconds": 5,
    "periodSeconds": 10,
    "successThreshold": 1,
    "timeoutSeconds": 5,
}
"""Its liveness (``/livez``) and readiness (``/readyz``) probes' settings, the paths and ports
the template's (kube-state-metrics 8.4.0 values.yaml lines 627 and 639; templates/deployment.yaml
lines 202-249)."""

API_TOKEN_VOLUME: Final = "api-token"
"""The volume of the projected API token in the stack's pods that call the API server."""


def api_token_volume() -> dict[str, Any]:
    """The projected service account token, CA and namespace, as a pod volume.

    No pod of the platform mounts its token automatically (CKV_K8S_38, closed by issue 39):
    one that calls the API server turns the automatic mount off and mounts this where its
    clients read the in-cluster credentials (:func:`api_token_mount`), in the containers that
    call it only (:func:`components.acceptance_gate.api_token_projection`).
    """
    return {"name": API_TOKEN_VOLUME, "projected": api_token_projection()}


def api_token_mount() -> dict[str, Any]:
    """The mount of :func:`api_token_volume` where in-cluster clients read it."""
    return {"name": API_TOKEN_VOLUME, "mountPath": API_TOKEN_DIR, "readOnly": True}


def chart_image(reference: str, *, sha_prefixed: bool) -> dict[str, str]:
    """An image pin (``registry/repository:tag[@sha256:...]``) as a chart's ``image`` block.

    Args:
        reference: the pin (components/versions.py), whose first path part is its registry.
        sha_prefixed: keep ``sha256:`` in ``sha``: kube-state-metrics prints ``@<sha>``
            (kube-state-metrics 8.4.0 templates/_helpers.tpl, ``kube-state-metrics.image``),
            grafana ``@sha256:<sha>`` (grafana 12.11.1 templates/_pod.tpl line 1248).

    Raises:
        ValueError: the reference has no registry or no tag.
    """
    name, _, digest = reference.partition("@")
    registry, slash, path = name.partition("/")
    repository, colon, tag = path.rpartition(":")
    if not (slash and colon and repository and "." in registry):
        raise ValueError(f"image {reference!r}: expected registry/repository:tag[@sha256:...]")
    sha = digest if sha_prefixed else digest.removeprefix("sha256:")
    return {"registry": registry, "repository": repository, "tag": tag, "sha": sha}


DashboardSpec = tuple[str, str, str]
"""A dashboard as the dashboards lane hands it: (uid, folder, model JSON)."""


def retention_size(storage_gib: int) -> str:
    """Prometheus' ``retentionSize``: :data:`RETENTION_SIZE_SHARE` of its volume, in MiB.

    Prometheus reads the size with base-2 units, ``MB`` being MiB (prometheus/prometheus
    v3.14.0 cmd/prometheus/main.go, ``storage.tsdb.retention.size``: ``units.Base2Bytes``), and
    the operator accepts ``<number>(B|KB|MB|GB|TB|PB|EB)`` (prometheus-operator v0.93.1
    pkg/apis/monitoring/v1/types.go, ``ByteSize``).

    Args:
        storage_gib: the volume's size, GiB (``observability.storageGiB``).
    """
    return f"{int(storage_gib * 1024 * RETENTION_SIZE_SHARE)}MB"


def volume_claim_template(storage_gib: int) -> dict[str, Any]:
    """A ``storageSpec`` or ``storage`` block: a claim per replica on the retained class.

    Args:
        storage_gib: the claim's size, GiB.
    """
    return {
        "volumeClaimTemplate": {
            "spec": {
                "storageClassName": PROMETHEUS_STORAGE_CLASS,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": f"{storage_gib}Gi"}},
            }
        }
    }


def remote_write_url(region: str, workspace_id: str) -> str:
    """The remote write endpoint of an AMP workspace.

    The workspace's ``prometheusEndpoint`` is ``https://aps-workspaces.<region>.amazonaws.com/
    workspaces/<id>/`` (Amazon Managed Service for Prometheus user guide, "Ingest metrics",
    remote write URL); built from the id, which a preview knows, rather than the endpoint.

    Args:
        region: the workspace's region.
        workspace_id: its id (``ws-...``).
    """
    return (
        f"https://aps-workspaces.{region}.amazonaws.com/workspaces/{workspace_id}"
        "/api/v1/remote_write"
    )


REMOTE_WRITE_ANNOTATION: Final = "trainingplatform.io/remote-write"
"""Annotation of Prometheus' pods where remote write is on: its coming or going rolls them."""


def remote_write_spec(url: str, region: str) -> list[dict[str, Any]]:
    """``prometheusSpec.remoteWrite``: the AMP workspace, signed with SigV4 by the pod's role.

    No access key: Prometheus' SigV4 (prometheus/prometheus v3.14.0 go.mod: prometheus/sigv4
    v0.4.1 on aws-sdk-go-v2) takes the SDK's default credential chain, which reads EKS Pod
    Identity's container credentials (the agent's ``AWS_CONTAINER_CREDENTIALS_FULL_URI``).

    Args:
        url: :func:`remote_write_url`.
        region: the workspace's region.
    """
    return [
        {
            "url": url,
            "sigv4": {"region": region},
            # AMP takes at most 1,000 samples a request by default (AMP user guide, quotas).
            "queueConfig": {"maxSamplesPerSend": 1000, "maxShards": 200, "capacity": 2500},
        }
    ]


def prometheus_values(
    storage_gib: int, retention_days: int, remote_write: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """The ``prometheus`` block: retention, volume, selectors, resources, remote write.

    Every ``*SelectorNilUsesHelmValues`` is false, so Prometheus selects every ServiceMonitor,
    PodMonitor, Probe, ScrapeConfig and PrometheusRule in the cluster, not only the release's
    (kube-prometheus-stack 88.5.3 values.yaml, ``prometheus.prometheusSpec``): the exporters'
    monitors and the platform's rules come from other releases and components.

    Args:
        storage_gib: the volume's size (``observability.storageGiB``).
        retention_days: ``observability.retentionDays``.
        remote_write: :func:`remote_write_spec`, or None without remote write.
    """
    spec: dict[str, Any] = {
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
        "probeSelectorNilUsesHelmValues": False,
        "scrapeConfigSelectorNilUsesHelmValues": False,
        "ruleSelectorNilUsesHelmValues": False,
        "scrapeInterval": SCRAPE_INTERVAL,
        "retention": f"{retention_days}d",
        "retentionSize": retention_size(storage_gib),
        "storageSpec": volume_claim_template(storage_gib),
        "resources": PROMETHEUS_RESOURCES,
        # Kubernetes service discovery calls the API server: the token only in the prometheus
        # container, not the config reloader (the chart renders these three on the Prometheus,
        # templates/prometheus/prometheus.yaml lines 24, 426-432; prometheus-operator v0.93.0
        # pkg/prometheus/server/statefulset.go mounts volumeMounts in that container).
        "automountServiceAccountToken": False,
        "volumes": [api_token_volume()],
        "volumeMounts": [api_token_mount()],
    }
    if remote_write:
        spec["remoteWrite"] = remote_write
        # EKS Pod Identity hands a pod its credentials when the pod is made: turning remote
        # write on for a running Prometheus must make new pods, which a change of the pod
        # template's annotations does (the operator rolls its StatefulSet); a config reload
        # alone would sign with no credentials.
        spec["podMetadata"] = {"annotations": {REMOTE_WRITE_ANNOTATION: "amp"}}
    return {
        "serviceAccount": {"create": True, "name": PROMETHEUS_SERVICE_ACCOUNT},
        "prometheusSpec": spec,
    }


def alertmanager_values() -> dict[str, Any]:
    """The ``alertmanager`` block: on, with its volume, and the chart's ``null`` receiver.

    The chart's default configuration routes every alert to the receiver ``null``
    (kube-prometheus-stack 88.5.3 values.yaml ``alertmanager.config``): the Alertmanager
    exists, shows the firing alerts and takes silences, and notifies nobody until the
    operator adds a receiver (an AlertmanagerConfig; docs: how-to, observability).
    """
    return {
        "enabled": True,
        "alertmanagerSpec": {
            "retention": ALERTMANAGER_RETENTION,
            "storage": volume_claim_template(ALERTMANAGER_STORAGE_GIB),
            "resources": ALERTMANAGER_RESOURCES,
            # Alertmanager never calls the API server (its config comes from a Secret the
            # reloader reads as files), so no token is mounted: the chart renders this on the
            # Alertmanager (templates/alertmanager/alertmanager.yaml line 41), the operator on
            # its pods (prometheus-operator v0.93.0 pkg/alertmanager/statefulset.go).
            "automountServiceAccountToken": False,
        },
    }


def deep_merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``, maps key by key (as Helm merges values), anything else replaced.

    Args:
        base: the values of one block.
        extra: values another lane adds (kube-state-metrics' custom resource state).
    """
    merged: dict[str, Any] = dict(base)
    for key, value in extra.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merged(current, value)
        else:
            merged[key] = value
    return merged


def kube_state_metrics_values(extra: Mapping[str, Any]) -> dict[str, Any]:
    """The ``kube-state-metrics`` block: sized, with ``extra`` (the ledger's) deep-merged in.

    Args:
        extra: values the cold-start ledger adds (``customResourceState``,
            ``metricLabelsAllowlist``, ``metricAnnotationsAllowList``, RBAC for the custom
            resources), keys of kube-state-metrics 8.4.0 values.yaml.
    """
    # It lists every object it exports: the token mounted explicitly (kube-state-metrics 8.4.0
    # templates/deployment.yaml lines 45, 163-164 and 384-385 render automountServiceAccountToken,
    # volumeMounts and volumes).
    own = {
        "image": {
            **chart_image(versions.KUBE_STATE_METRICS_IMAGE, sha_prefixed=True),
            "pullPolicy": PULL_POLICY,
        },
        "securityContext": KUBE_STATE_METRICS_POD_SECURITY_CONTEXT,
        "containerSecurityContext": KUBE_STATE_METRICS_CONTAINER_SECURITY_CONTEXT,
        "livenessProbe": KUBE_STATE_METRICS_PROBE,
        "readinessProbe": KUBE_STATE_METRICS_PROBE,
        "resources": KUBE_STATE_METRICS_RESOURCES,
        "automountServiceAccountToken": False,
        "volumes": [api_token_volume()],
        "volumeMounts": [api_token_mount()],
    }
    return deep_merged(own, extra)


def role_attribute_path(admin_groups: Sequence[str], *, groups_claim: str = "groups") -> str:
    """Grafana's JMESPath from the OIDC claims to a role that holds in every organisation.

    Only the platform's admins get one, Admin. A team member's role comes from ``org_mapping``
    alone, in their team's organisation: Grafana raises each mapped organisation's role to this
    one (grafana/grafana v13.2.0 pkg/login/social/connectors/org_role_mapper.go,
    ``MapOrgRoles``), so a Viewer here would be harmless but a role here is what Grafana falls
    back to in organisation 1 when no mapping matches (``getDefaultOrgMapping``): none, so a
    user in no mapped group is refused under ``role_attribute_strict``.

    Args:
        admin_groups: ``observability.grafana.adminGroups``.
        groups_claim: the claim listing the user's groups (``oidc.groupsClaim``). Default
            ``groups``.
    """
    # A JMESPath quoted identifier: the claim may hold any character.
    any_admin = " || ".join(
        f"contains(\"{groups_claim}\"[*], '{group}')" for group in sorted(admin_groups)
    )
    return f"({any_admin}) && 'Admin' || ''" if admin_groups else "''"


def grafana_ini(
    oidc: OidcConfig | None, role_path: str, url: str | None = None, orgs: str = "[]"
) -> dict[str, Any]:
    """``grafana.ini``: generic OAuth through the platform's client, or local admin only.

    With OIDC: no login form, no anonymous access; the organisations and roles from the groups
    claim (``org_attribute_path`` reads the same claim as the groups, ``org_mapping`` maps each
    group to its organisation, :func:`~components.observability.grafana_orgs.org_mapping`), the
    admins' role everywhere (:func:`role_attribute_path`), strictly: a user no group maps
    anywhere is refused (grafana/grafana v13.2.0 pkg/login/social/connectors/generic_oauth.go,
    ``UserInfo``: "could not evaluate any valid roles"); the
    client's secret comes from the environment (:data:`GRAFANA_CLIENT_SECRET_VARIABLE`). Basic
    auth stays on for the API: the chart's dashboard and datasource sidecars reload Grafana's
    provisioning with the admin user and password (grafana chart 12.11.1 templates/_pod.tpl,
    ``REQ_USERNAME``/``REQ_PASSWORD``), and a datasource change never applies without it; the
    password stays in the chart's Secret in the monitoring namespace. With ``url``, Grafana's
    redirects and cookies use it (``server.root_url``, ``cookie_secure``).
    Without: Grafana is reached by port-forward only and the chart's generated admin password
    (its Secret ``monitoring-grafana``) logs in.

    Args:
        oidc: the ``oidc`` section where its client is set, else None.
        role_path: the role mapping.
        url: ``observability.grafana.url``, Grafana's address as people reach it; None
            (default): port-forward, ``http://localhost:3000``.
        orgs: ``org_mapping``
            (:func:`~components.observability.grafana_orgs.org_mapping_setting`). Default: none.
    """
    ini: dict[str, Any] = {
        "analytics": {"reporting_enabled": False, "check_for_updates": False},
        "auth.anonymous": {"enabled": False},
        "users": {"allow_sign_up": False},
    }
    if url is not None:
        ini["server"] = {"root_url": url, "domain": urlsplit(url).hostname}
        ini["security"] = {"cookie_secure": True}
    if oidc is None:
        return ini
    return ini | {
        "auth": {"disable_login_form": True},
        "auth.generic_oauth": {
            "enabled": True,
            "name": "Single sign-on",
            "client_id": oidc.client_id,
            "scopes": " ".join(oidc.scopes),
            "auth_url": oidc.authorize_url,
            "token_url": oidc.token_url,
            "api_url": oidc.userdata_url,
            "use_pkce": True,
            "allow_sign_up": True,
            # JMESPath quoted identifiers: a claim may be named cognito:groups.
            "login_attribute_path": f'"{oidc.username_claim}"',
            "groups_attribute_path": f'"{oidc.groups_claim}"',
            "org_attribute_path": f'"{oidc.groups_claim}"',
            "org_mapping": orgs,
            "role_attribute_path": role_path,
            "role_attribute_strict": True,
            "skip_org_role_sync": False,
        },
    }


def datasources(region: str) -> list[dict[str, Any]]:
    """Grafana's datasources beside the chart's Prometheus: CloudWatch, by Pod Identity.

    ``authType: default`` takes the AWS SDK's default credential chain (Grafana docs, AWS
    CloudWatch data source, "Authentication"), which reads the Pod Identity agent's
    credentials of :data:`GRAFANA_SERVICE_ACCOUNT`'s role.

    Args:
        region: the stack's region (FSx's and the schedules' metrics are there).
    """
    return [
        {
            "name": "CloudWatch",
            "uid": CLOUDWATCH_DATASOURCE_UID,
            "type": "cloudwatch",
            "access": "proxy",
            "editable": False,
            "jsonData": {"authType": "default", "defaultRegion": region},
        }
    ]


def grafana_values(config: PlatformConfig, *, oidc_secret: bool) -> dict[str, Any]:
    """The ``grafana`` block (the chart's subchart), or ``{"enabled": False}``.

    Dashboards come from ConfigMaps in the monitoring namespace only (not ``ALL``, the chart's
    default: a team could otherwise publish a dashboard into any folder), each in the folder
    its annotation names, which one organisation's provider reads; the chart's own provider
    (``SCProvider``) is off, as it would read every folder into organisation 1. Grafana keeps
    no volume: its organisations, dashboards, datasources and users come back from the
    ConfigMaps, the organisations' container and the identity provider.

    Args:
        config: the validated stack configuration.
        oidc_secret: the OIDC client's secret is in :data:`GRAFANA_OIDC_SECRET` (the oidc
            section is set).
    """
    grafana = config.observability.grafana
    if not grafana.enabled:
        return {"enabled": False}
    oidc = config.oidc if oidc_secret else None
    orgs = grafana_orgs(config.teams)
    orgs_values = grafana_orgs_values(orgs)
    values: dict[str, Any] = {
        "enabled": True,
        "defaultDashboardsEnabled": False,
        "serviceAccount": {"create": True, "name": GRAFANA_SERVICE_ACCOUNT},
        "image": {
            **chart_image(versions.GRAFANA_IMAGE, sha_prefixed=False),
            "pullPolicy": PULL_POLICY,
        },
        "securityContext": GRAFANA_POD_SECURITY_CONTEXT,
        "containerSecurityContext": GRAFANA_CONTAINER_SECURITY_CONTEXT,
        # Port and probes (grafana 12.11.1 values.yaml lines 242-243, 262, 90, 95).
        "podPortName": GRAFANA_PORT_NAME,
        "gossipPortName": "gossip",
        "service": {"targetPort": GRAFANA_PORT},
        "readinessProbe": GRAFANA_READINESS_PROBE,
        "livenessProbe": GRAFANA_LIVENESS_PROBE,
        # No volume: its database is the pod's (values.yaml line 489, persistence.enabled);
        # the organisations' ids rest on it (grafana_orgs.py).
        "persistence": {"enabled": False},
        "resources": GRAFANA_RESOURCES,
        "grafana.ini": grafana_ini(
            oidc,
            role_attribute_path(grafana.admin_groups, groups_claim=config.oidc.groups_claim),
            grafana.url,
            org_mapping_setting(org_mapping(config.teams, grafana.admin_groups)),
        ),
        "sidecar": {
            "image": chart_image(versions.GRAFANA_SIDECAR_IMAGE, sha_prefixed=False),
            "imagePullPolicy": PULL_POLICY,
            "securityContext": GRAFANA_SIDECAR_SECURITY_CONTEXT,
            "dashboards": {
                "enabled": True,
                # Where the organisations' providers read them (values.yaml line 1191).
                "folder": DASHBOARDS_PATH,
                "label": DASHBOARD_LABEL,
                "labelValue": DASHBOARD_LABEL_VALUE,
                "searchNamespace": [MONITORING_NAMESPACE],
                "folderAnnotation": DASHBOARD_FOLDER_ANNOTATION,
                "SCProvider": False,
                "extraMounts": [api_token_mount()],
            },
            "datasources": {
                "enabled": True,
                "uid": PROMETHEUS_DATASOURCE_UID,
                "extraMounts": [api_token_mount()],
            },
            "resources": GRAFANA_SIDECAR_RESOURCES,
        },
        # Only the sidecars call the API server (they watch ConfigMaps): the token in them,
        # not in Grafana nor the organisations' container, which calls Grafana's own API
        # (grafana 12.11.1 templates/_pod.tpl: automountServiceAccountToken line 8,
        # extraContainerVolumes as written line 1744, the sidecars' extraMounts lines 864 and
        # 993); the token's volume beside the organisations' ConfigMap.
        "automountServiceAccountToken": False,
        "additionalDataSources": datasources(config.region),
        **orgs_values,
        "extraContainerVolumes": [api_token_volume(), *orgs_values["extraContainerVolumes"]],
    }
    if oidc is not None:
        values["envFromSecret"] = GRAFANA_OIDC_SECRET
    return values


def monitoring_values(
    config: PlatformConfig,
    *,
    oidc_secret: bool = False,
    remote_write: list[dict[str, Any]] | None = None,
    extra_kube_state_metrics_values: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Values of kube-prometheus-stack: the fleet's metrics stack, every controller placed.

    Args:
        config: the validated stack configuration (``observability``, teams, oidc, region).
        oidc_secret: Grafana's OIDC secret exists (the oidc section is set). Default False.
        remote_write: :func:`remote_write_spec` where remote write is on. Default None.
        extra_kube_state_metrics_values: values the ledger adds to kube-state-metrics'
            (deep-merged). Default none.
    """
    observability = config.observability
    off = {"enabled": False}
    return with_system_placement(
        versions.PROMETHEUS_STACK_CHART,
        {
            "fullnameOverride": MONITORING_RELEASE,
            # The chart's rules assume node-exporter and the control plane's targets; the
            # platform's own PrometheusRules are what alert here.
            "defaultRules": {"create": False},
            "windowsMonitoring": dict(off),
            "nodeExporter": {"enabled": NODE_EXPORTER_ENABLED},
            "kubernetesServiceMonitors": {"enabled": True},
            "kubelet": {"enabled": True},
            **{component: dict(off) for component in CLUSTER_TARGETS_OFF},
            "kubeStateMetrics": {"enabled": True},
            "kube-state-metrics": kube_state_metrics_values(extra_kube_state_metrics_values or {}),
            "alertmanager": alertmanager_values(),
            "grafana": grafana_values(config, oidc_secret=oidc_secret),
            "prometheusOperator": {
                "resources": OPERATOR_RESOURCES,
                # It reconciles through the API server: the token mounted explicitly
                # (templates/prometheus-operator/deployment.yaml lines 236, 221 and 187).
                "automountServiceAccountToken": False,
                "extraVolumes": [api_token_volume()],
                "extraVolumeMounts": [api_token_mount()],
                # The reloader beside Prometheus and Alertmanager: bounded, and probed on its
                # /healthz (the chart's flag --enable-config-reloader-probes; prometheus-operator
                # v0.93.0 pkg/operator/config_reloader.go, addProbes).
                "prometheusConfigReloader": {
                    "enableProbe": True,
                    "resources": CONFIG_RELOADER_RESOURCES,
                },
            },
            "prometheus": prometheus_values(
                observability.storage_gib, observability.retention_days, remote_write
            ),
        },
    )


def dashboard_folders(teams: Sequence[TeamConfig]) -> list[str]:
    """The folders dashboards may go in: one per organisation, the fleet's then the teams'.

    Args:
        teams: the stack's teams.
    """
    return [org.folder for org in grafana_orgs(teams)]


def dashboard_config_map(dashboard: DashboardSpec, *, folders: Sequence[str]) -> dict[str, Any]:
    """The ConfigMap that hands one dashboard to Grafana's sidecar, in its folder.

    Args:
        dashboard: (uid, folder, model JSON).
        folders: the folders there are (:func:`dashboard_folders`).

    Raises:
        ValueError: a folder that is neither the fleet's nor a team's, or a model whose
            ``uid`` is not the dashboard's.
    """
    uid, folder, model = dashboard
    if folder not in folders:
        raise ValueError(
            f"dashboard {uid}: folder {folder!r} is none of {list(folders)} (the fleet's "
            "folder or a team's)"
        )
    if json.loads(model).get("uid") != uid:
        raise ValueError(f"dashboard {uid}: its model's uid differs")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"dashboard-{uid}",
            "namespace": MONITORING_NAMESPACE,
            "labels": {DASHBOARD_LABEL: DASHBOARD_LABEL_VALUE},
            "annotations": {DASHBOARD_FOLDER_ANNOTATION: folder},
        },
        "data": {f"{uid}.json": model},
    }


def cloudwatch_read_policy(region: str, account_id: str) -> dict[str, Any]:
    """Grafana's CloudWatch role: read metrics and alarms, in the stack's region only.

    CloudWatch's metric reads (``GetMetricData``, ``GetMetricStatistics``, ``ListMetrics``)
    and ``DescribeAlarmsForMetric`` take no resource ARN and no namespace condition (Service
    Authorization Reference, "Actions, resources, and condition keys for Amazon CloudWatch":
    ``cloudwatch:namespace`` applies to ``PutMetricData`` only), so ``*`` held to the region by
    ``aws:RequestedRegion``; ``DescribeAlarms`` and ``DescribeAlarmHistory`` take alarm ARNs,
    this account's in this region. No Logs, EC2 or tag reads: the storage dashboard reads
    metrics by their dimensions (Grafana docs, AWS CloudWatch data source, "IAM policies",
    lists those as optional).

    Args:
        region: the stack's region.
        account_id: the stack's account.
    """
    in_region = {"StringEquals": {"aws:RequestedRegion": region}}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadMetrics",
                "Effect": "Allow",
                "Action": [
                    "cloudwatch:GetMetricData",
                    "cloudwatch:GetMetricStatistics",
                    "cloudwatch:ListMetrics",
                    "cloudwatch:DescribeAlarmsForMetric",
                ],
                "Resource": "*",
                "Condition": in_region,
            },
            {
                "Sid": "ReadAlarms",
                "Effect": "Allow",
                "Action": ["cloudwatch:DescribeAlarms", "cloudwatch:DescribeAlarmHistory"],
                "Resource": f"arn:aws:cloudwatch:{region}:{account_id}:alarm:*",
                "Condition": in_region,
            },
        ],
    }


def remote_write_policy(workspace_arn: str) -> dict[str, Any]:
    """Prometheus' AMP role: ``aps:RemoteWrite`` on the stack's workspace, nothing else.

    Args:
        workspace_arn: the workspace's ARN.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "RemoteWrite",
                "Effect": "Allow",
                "Action": "aps:RemoteWrite",
                "Resource": workspace_arn,
            }
        ],
    }
