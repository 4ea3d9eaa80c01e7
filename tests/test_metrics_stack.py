"""The fleet's metrics stack (issue 45, deliver 1): the monitoring release grown into the fleet's.

Prometheus sized from config on a retained encrypted volume, kube-state-metrics and Alertmanager
on, node-exporter off, Grafana behind the platform's OIDC client (port-forward only without one)
with its dashboards in team folders and a CloudWatch datasource on a Pod Identity role, and in
prod remote write to Amazon Managed Service for Prometheus. Each test reads the synthesized
stacks (the session fixture) or builds the one component (tests/component_runs.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import jmespath
import pytest

from components.config import parse_platform_config
from components.metric_names import (
    MONITORING_NAMESPACE,
    NODE_EXPORTERS_NAMESPACE,
    PROMETHEUS_SERVICE_ACCOUNT,
)
from components.observability import grafana_orgs
from components.observability import metrics_stack as stack_values
from components.observability.dashboards import platform_dashboards
from components.observability.metrics_stack import (
    DASHBOARD_FOLDER_ANNOTATION,
    DASHBOARD_LABEL,
    FLEET_FOLDER,
    GRAFANA_OIDC_SECRET,
    GRAFANA_SERVICE_ACCOUNT,
    PROMETHEUS_STORAGE_CLASS,
    dashboard_config_map,
    dashboard_folders,
    monitoring_values,
    role_attribute_path,
)
from components.observability.stack import previous_release_urn
from components.platform_network import LISTENERS
from components.tenancy import DEFAULT_DENY_POLICY, from_namespace
from synth import engine
from synth.engine import ResourceRecord
from synth.run import StackResult
from tests import component_runs as parts
from tests.config_problems import MISSING, assert_reported
from tests.conftest import STACKS, RunComponent, stack_data

RELEASE: Final = "kubernetes:helm.sh/v3:Release"
STORAGE_CLASS: Final = "kubernetes:storage.k8s.io/v1:StorageClass"
ROLE: Final = "aws:iam/role:Role"
ROLE_POLICY: Final = "aws:iam/rolePolicy:RolePolicy"
ASSOCIATION: Final = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
WORKSPACE: Final = "aws:amp/workspace:Workspace"
CONFIG_MAP: Final = "kubernetes:core/v1:ConfigMap"
SECRET: Final = "kubernetes:core/v1:Secret"
SERVICE: Final = "kubernetes:core/v1:Service"


def _of(records: list[ResourceRecord], resource_type: str) -> list[ResourceRecord]:
    return [r for r in records if r.type == resource_type]


def _monitoring(result: StackResult) -> ResourceRecord:
    (record,) = [r for r in _of(result.records, RELEASE) if r.inputs["name"] == "monitoring"]
    return record


def _values(result: StackResult) -> dict[str, Any]:
    values: dict[str, Any] = _monitoring(result).inputs["values"]
    return values


def _mib(size: str) -> int:
    match = re.fullmatch(r"(\d+)(MB|GB)", size)
    assert match, size
    return int(match[1]) * (1024 if match[2] == "GB" else 1)


def _gib(quantity: str) -> int:
    assert quantity.endswith("Gi"), quantity
    return int(quantity[:-2])


@pytest.mark.parametrize("stack", STACKS)
def test_prometheus_keeps_what_config_says_on_a_retained_encrypted_volume(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    observability = result.config.observability
    spec = _values(result)["prometheus"]["prometheusSpec"]
    assert spec["retention"] == f"{observability.retention_days}d"
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    size = _gib(claim["resources"]["requests"]["storage"])
    assert size == observability.storage_gib
    # Prometheus stops at about 90% of the volume: old samples go, the WAL keeps room.
    assert 0.85 * size * 1024 <= _mib(spec["retentionSize"]) <= 0.9 * size * 1024
    # The class the claim names is the stack's, encrypted and retained everywhere.
    (klass,) = [
        r
        for r in _of(result.records, STORAGE_CLASS)
        if r.inputs["metadata"]["name"] == claim["storageClassName"] == PROMETHEUS_STORAGE_CLASS
    ]
    assert klass.inputs["reclaimPolicy"] == "Retain"
    assert klass.inputs["parameters"]["encrypted"] == "true"
    assert klass.inputs["parameters"]["type"] == "gp3"
    keyed = "kmsKeyId" in klass.inputs["parameters"]
    assert keyed == any(r.name == "storage-data" and r.type == "aws:kms/key:Key"
                        for r in result.records)  # fmt: skip
    assert klass.urn in _monitoring(result).dependencies
    alertmanager = _values(result)["alertmanager"]
    assert alertmanager["enabled"] is True
    assert (
        alertmanager["alertmanagerSpec"]["storage"]["volumeClaimTemplate"]["spec"][
            "storageClassName"
        ]
        == PROMETHEUS_STORAGE_CLASS
    )
    # The chart's own config stays: every alert goes to the 'null' receiver until one is added.
    assert "config" not in alertmanager


@pytest.mark.parametrize("stack", STACKS)
def test_prometheus_selects_the_platforms_monitors_and_rules_wherever_they_are(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    values = _values(synthesized[stack])
    spec = values["prometheus"]["prometheusSpec"]
    for kind in ("serviceMonitor", "podMonitor", "probe", "scrapeConfig", "rule"):
        assert spec[f"{kind}SelectorNilUsesHelmValues"] is False, kind
    # kube-state-metrics on; node-exporter off, the kubelet's cAdvisor instead.
    assert values["kubeStateMetrics"] == {"enabled": True}
    assert values["nodeExporter"] == {"enabled": False}
    assert values["kubelet"] == {"enabled": True}
    assert values["kubernetesServiceMonitors"] == {"enabled": True}
    assert values["prometheus"]["serviceAccount"]["name"] == PROMETHEUS_SERVICE_ACCOUNT


def test_the_ledgers_kube_state_metrics_values_are_merged_in() -> None:
    config = parse_platform_config(stack_data("dev"))
    extra = {
        "customResourceState": {"enabled": True, "config": {"spec": {"resources": []}}},
        "resources": {"limits": {"memory": "2Gi"}},
    }
    block = monitoring_values(config, extra_kube_state_metrics_values=extra)["kube-state-metrics"]
    assert block["customResourceState"] == extra["customResourceState"]
    # deep-merged: the ledger's limit, our requests and the system placement all stay
    assert block["resources"] == {
        "requests": stack_values.KUBE_STATE_METRICS_RESOURCES["requests"],
        "limits": {"memory": "2Gi"},
    }
    assert block["nodeSelector"] and block["tolerations"]


def test_no_pod_of_the_stack_mounts_its_token_automatically() -> None:
    """Issue 39's rule (CKV_K8S_38) on the chart's pods: the automatic mount is off for each;
    the operator, Prometheus, kube-state-metrics and Grafana's sidecars, which call the API
    server, mount the projected token where in-cluster clients read it; Alertmanager none.
    The reloader beside Prometheus and Alertmanager is bounded and probed."""
    values = monitoring_values(parse_platform_config(stack_data("dev")), oidc_secret=True)
    volume, mount = stack_values.api_token_volume(), stack_values.api_token_mount()
    operator = values["prometheusOperator"]
    prometheus = values["prometheus"]["prometheusSpec"]
    ksm, grafana = values["kube-state-metrics"], values["grafana"]
    for block in (operator, prometheus, ksm, grafana, values["alertmanager"]["alertmanagerSpec"]):
        assert block["automountServiceAccountToken"] is False
    assert (operator["extraVolumes"], operator["extraVolumeMounts"]) == ([volume], [mount])
    assert (prometheus["volumes"], prometheus["volumeMounts"]) == ([volume], [mount])
    assert (ksm["volumes"], ksm["volumeMounts"]) == ([volume], [mount])
    # The token's volume beside the organisations' ConfigMap, which the container beside
    # Grafana reads (components/observability/grafana_orgs.py): both kept.
    assert grafana["extraContainerVolumes"] == [
        volume,
        {"name": grafana_orgs.ORGS_VOLUME, "configMap": {"name": grafana_orgs.ORGS_CONFIG_MAP}},
    ]
    for sidecar in ("dashboards", "datasources"):
        assert grafana["sidecar"][sidecar]["extraMounts"] == [mount]
    assert mount["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    reloader = operator["prometheusConfigReloader"]
    assert reloader["enableProbe"] is True
    assert reloader["resources"]["limits"]["memory"] and reloader["resources"]["requests"]["cpu"]
    assert grafana["sidecar"]["resources"]["limits"]["memory"]


@contextmanager
def _aliases_seen() -> Iterator[dict[tuple[str, str], list[str]]]:
    """The alias URNs each registration carries, by (type, name): the records keep none."""
    seen: dict[tuple[str, str], list[str]] = {}
    original = engine.RecordingMonitor.RegisterResource

    def register(self: Any, request: Any) -> Any:
        urns = [a.urn for a in request.aliases if a.urn] + list(request.aliasURNs)
        seen[(request.type, request.name)] = urns
        return original(self, request)

    engine.RecordingMonitor.RegisterResource = register  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        engine.RecordingMonitor.RegisterResource = original  # type: ignore[method-assign]


def test_the_release_keeps_its_name_and_its_state_where_slurm_had_it(
    synthesized: dict[str, StackResult], run_component: RunComponent
) -> None:
    """Moving the release under Observability changes its URN; the alias names the URN it had
    under Slurm's Autoscaling (still registered, for KEDA), so an up updates it in place."""
    prod = synthesized["prod"]
    (autoscaling,) = [r for r in prod.records if r.type == "trainingplatform:index:Autoscaling"]
    qualified = autoscaling.urn.split("::")[2]
    old = autoscaling.urn.rsplit("::", 2)[0] + f"::{qualified}${RELEASE}::monitoring"
    stack, project = autoscaling.urn.split("::")[0].split(":")[-1], autoscaling.urn.split("::")[1]
    assert previous_release_urn(stack, project) == old
    release = _monitoring(prod)
    assert release.name == release.inputs["name"] == "monitoring"
    assert release.inputs["namespace"] == MONITORING_NAMESPACE
    assert release.urn != old and not any(r.urn == old for r in prod.records)
    with _aliases_seen() as seen:
        run_component(parts.observability, stack_data("prod"), "prod")
    assert seen[(RELEASE, "monitoring")] == [old]


def _model(uid: str) -> str:
    return json.dumps({"uid": uid, "title": uid, "panels": []})


def test_each_dashboard_is_a_configmap_in_its_teams_folder_or_the_fleets(
    synthesized: dict[str, StackResult],
) -> None:
    run = synthesized["dev"]
    config = run.config
    dashboards = platform_dashboards(config)
    assert {d.folder for d in dashboards} == {FLEET_FOLDER, *(t.name for t in config.teams)}
    maps = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in _of(run.records, CONFIG_MAP)
        if r.inputs["metadata"]["name"].startswith("dashboard-")
    }
    assert set(maps) == {f"dashboard-{d.uid}" for d in dashboards}
    for dashboard in dashboards:
        body = maps[f"dashboard-{dashboard.uid}"]
        assert body["metadata"]["namespace"] == MONITORING_NAMESPACE
        assert body["metadata"]["labels"] == {DASHBOARD_LABEL: "1"}
        assert body["metadata"]["annotations"] == {DASHBOARD_FOLDER_ANNOTATION: dashboard.folder}
        assert body["data"] == {f"{dashboard.uid}.json": dashboard.json()}
    sidecar = _values_of(run)["grafana"]["sidecar"]["dashboards"]
    assert sidecar["label"] == DASHBOARD_LABEL and sidecar["labelValue"] == "1"
    assert sidecar["folderAnnotation"] == DASHBOARD_FOLDER_ANNOTATION
    # Each folder is read by its organisation's provider (tests/test_grafana_orgs.py).
    assert sidecar["SCProvider"] is False
    # Only the monitoring namespace's ConfigMaps: a team cannot publish into a folder.
    assert sidecar["searchNamespace"] == [MONITORING_NAMESPACE]
    assert dashboard_folders(config.teams) == [FLEET_FOLDER, *sorted(t.name for t in config.teams)]
    with pytest.raises(ValueError, match="folder 'nobody'"):
        dashboard_config_map(("x", "nobody", _model("x")), folders=dashboard_folders(config.teams))


def _values_of(run: Any) -> dict[str, Any]:
    (release,) = [r for r in _of(run.records, RELEASE) if r.inputs["name"] == "monitoring"]
    values: dict[str, Any] = release.inputs["values"]
    return values


def test_grafana_logs_in_through_the_platforms_oidc_client_and_nothing_else(
    synthesized: dict[str, StackResult],
) -> None:
    dev = synthesized["dev"]
    grafana = _values(dev)["grafana"]
    ini = grafana["grafana.ini"]
    oauth = ini["auth.generic_oauth"]
    oidc = dev.config.oidc
    assert oauth["enabled"] is True and oauth["client_id"] == oidc.client_id
    assert (oauth["auth_url"], oauth["token_url"], oauth["api_url"]) == (
        oidc.authorize_url, oidc.token_url, oidc.userdata_url,
    )  # fmt: skip
    assert oauth["role_attribute_strict"] is True
    claims = {oidc.groups_claim: ["g"], oidc.username_claim: "someone"}
    assert jmespath.search(oauth["groups_attribute_path"], claims) == ["g"]
    assert jmespath.search(oauth["login_attribute_path"], claims) == "someone"
    assert ini["auth"]["disable_login_form"] is True
    # Basic auth stays for the sidecars' reloads (the login form is gone).
    assert "auth.basic" not in ini
    assert "server" not in ini  # port-forward: Grafana's own localhost default
    assert ini["auth.anonymous"]["enabled"] is False
    # The secret never enters the values: Grafana reads it from the Secret's environment.
    assert "client_secret" not in oauth
    assert grafana["envFromSecret"] == GRAFANA_OIDC_SECRET
    (secret,) = [
        r for r in _of(dev.records, SECRET) if r.inputs["metadata"]["name"] == GRAFANA_OIDC_SECRET
    ]
    assert secret.inputs["metadata"]["namespace"] == MONITORING_NAMESPACE
    assert list(secret.inputs["stringData"]) == ["GF_AUTH_GENERIC_OAUTH_CLIENT_SECRET"]
    assert secret.urn in _monitoring(dev).dependencies
    # Without an OIDC client (prod): no OAuth, no Secret, no Service beyond the chart's.
    prod = synthesized["prod"]
    assert prod.config.oidc.client_id is None
    prod_ini = _values(prod)["grafana"]["grafana.ini"]
    assert "auth.generic_oauth" not in prod_ini and prod_ini["auth.anonymous"]["enabled"] is False
    assert not [r for r in _of(prod.records, SECRET) if "Observability" in r.urn]
    assert not [r for r in _of(prod.records, SERVICE) if "Observability" in r.urn]


def _role_of(path: str, groups: list[str]) -> Any:
    return jmespath.search(path, {"groups": groups, "preferred_username": "someone"})


def test_only_grafanas_admins_get_a_role_outside_the_organisation_mapping() -> None:
    """The role that holds in every organisation is the admins' alone. A team member's role
    comes from org_mapping, in the team's organisation (tests/test_grafana_orgs.py): a role
    here would be what Grafana falls back to in the fleet's organisation when no mapping
    matches, so a team member gets none."""
    data = stack_data("dev")
    data.setdefault("observability", {})["grafana"] = {"adminGroups": ["grafana-admins"]}
    config = parse_platform_config(data)
    path = monitoring_values(config, oidc_secret=True)["grafana"]["grafana.ini"][
        "auth.generic_oauth"
    ]["role_attribute_path"]
    team = config.teams[0]
    assert team.member_groups and team.admin_groups
    assert _role_of(path, ["grafana-admins"]) == "Admin"
    assert _role_of(path, [team.member_groups[0], "grafana-admins"]) == "Admin"
    for groups in ([team.member_groups[0]], [team.admin_groups[0], "unrelated"], []):
        assert not _role_of(path, groups), groups
    # Without admin groups nobody gets one; a groups claim of another name is read as such.
    assert not _role_of(role_attribute_path([]), ["grafana-admins"])
    other = role_attribute_path(["a-b"], groups_claim="cognito:groups")
    assert jmespath.search(other, {"cognito:groups": ["a-b"]}) == "Admin"


def _policy(record: ResourceRecord, key: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(record.inputs[key])
    return document


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = document["Statement"]
    return found


def _identity(result: StackResult, service_account: str) -> tuple[ResourceRecord, ...]:
    (association,) = [
        r for r in _of(result.records, ASSOCIATION) if r.inputs["serviceAccount"] == service_account
    ]
    assert association.inputs["namespace"] == MONITORING_NAMESPACE
    (role,) = [r for r in _of(result.records, ROLE) if r.name == association.name]
    (policy,) = [r for r in _of(result.records, ROLE_POLICY) if r.name == association.name]
    trust = _statements(_policy(role, "assumeRolePolicy"))[0]["Condition"]["StringEquals"]
    assert trust["aws:RequestTag/kubernetes-namespace"] == MONITORING_NAMESPACE
    assert trust["aws:RequestTag/kubernetes-service-account"] == service_account
    assert association.urn in _monitoring(result).dependencies
    return role, policy


def test_grafana_reads_cloudwatch_metrics_with_a_read_only_pod_identity_role(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["prod"]
    _, policy = _identity(result, GRAFANA_SERVICE_ACCOUNT)
    actions = {
        action
        for statement in _statements(_policy(policy, "policy"))
        for action in statement["Action"]
    }
    assert actions and all(a.startswith("cloudwatch:") for a in actions), actions
    assert all(re.match(r"cloudwatch:(Get|List|Describe)", a) for a in actions), actions
    for statement in _statements(_policy(policy, "policy")):
        assert statement["Condition"] == {
            "StringEquals": {"aws:RequestedRegion": result.config.region}
        }
        if statement["Resource"] != "*":
            assert statement["Resource"].startswith(
                f"arn:aws:cloudwatch:{result.config.region}:{result.config.account_id}:alarm:"
            )
    (cloudwatch,) = _values(result)["grafana"]["additionalDataSources"]
    assert cloudwatch["type"] == "cloudwatch"
    assert cloudwatch["jsonData"] == {"authType": "default", "defaultRegion": result.config.region}
    assert _values(result)["grafana"]["serviceAccount"]["name"] == GRAFANA_SERVICE_ACCOUNT


def test_prod_writes_every_sample_to_its_own_amp_workspace_by_pod_identity(
    synthesized: dict[str, StackResult],
) -> None:
    prod = synthesized["prod"]
    assert prod.config.observability.remote_write.enabled
    (workspace,) = _of(prod.records, WORKSPACE)
    # Encrypted with the stack's data key (the one its volumes use).
    (klass,) = [r for r in _of(prod.records, STORAGE_CLASS)
                if r.inputs["metadata"]["name"] == PROMETHEUS_STORAGE_CLASS]  # fmt: skip
    assert workspace.inputs["kmsKeyArn"] == klass.inputs["parameters"]["kmsKeyId"]
    assert workspace.protect is prod.config.protect_stateful_resources
    _, policy = _identity(prod, PROMETHEUS_SERVICE_ACCOUNT)
    (statement,) = _statements(_policy(policy, "policy"))
    assert statement["Action"] == "aps:RemoteWrite"
    workspace_id = statement["Resource"].rsplit("/", 1)[-1]
    assert statement["Resource"].startswith(
        f"arn:aws:amp:{prod.config.region}:{prod.config.account_id}:workspace/"
    )
    (target,) = _values(prod)["prometheus"]["prometheusSpec"]["remoteWrite"]
    assert target["url"] == (
        f"https://aps-workspaces.{prod.config.region}.amazonaws.com/workspaces/{workspace_id}"
        "/api/v1/remote_write"
    )
    assert target["sigv4"] == {"region": prod.config.region}
    assert not {"basicAuth", "authorization", "oauth2"} & set(target)
    # Turning remote write on rolls the pods, which then get the role's credentials.
    annotations = _values(prod)["prometheus"]["prometheusSpec"]["podMetadata"]["annotations"]
    assert annotations == {stack_values.REMOTE_WRITE_ANNOTATION: "amp"}
    # Elsewhere no workspace and no remote write.
    for stack in ("dev", "staging"):
        assert not _of(synthesized[stack].records, WORKSPACE)
        spec = _values(synthesized[stack])["prometheus"]["prometheusSpec"]
        assert "remoteWrite" not in spec and "podMetadata" not in spec


def test_the_monitoring_namespace_admits_only_its_own_scrapers_and_keda() -> None:
    listeners = {listener.name: listener for listener in LISTENERS[MONITORING_NAMESPACE]}
    for name in ("grafana", "kube-state-metrics", "alertmanager"):
        assert listeners[name].clients == (MONITORING_NAMESPACE,), name
    assert listeners["grafana"].port == stack_values.GRAFANA_PORT
    assert listeners["kube-state-metrics"].port == stack_values.KUBE_STATE_METRICS_PORT
    assert listeners["alertmanager"].port == stack_values.ALERTMANAGER_PORT
    assert "node-exporter" not in listeners and not stack_values.NODE_EXPORTER_ENABLED


def test_with_the_load_balancer_grafana_is_open_to_the_client_networks_only(
    run_component: RunComponent,
) -> None:
    data = stack_data("dev")
    data["cluster"]["uiExposure"] = {
        "mode": "internalLoadBalancer",
        "clientCidrs": ["192.168.0.0/24"],
    }
    # OIDC behind the load balancer needs Grafana's address, or the login redirect is
    # localhost's.
    assert_reported(data, "platform.observability.grafana.url", MISSING, "localhost redirect")
    data["observability"]["grafana"]["url"] = "https://grafana.example.com"
    run = run_component(parts.observability, data, "dev")
    server = _values_of(run)["grafana"]["grafana.ini"]["server"]
    assert server == {"root_url": "https://grafana.example.com", "domain": "grafana.example.com"}
    (service,) = [r for r in _of(run.records, SERVICE) if "Observability" in r.urn]
    spec = service.inputs["spec"]
    assert spec["type"] == "LoadBalancer"
    assert spec["loadBalancerSourceRanges"] == ["192.168.0.0/24"]
    assert spec["selector"] == stack_values.GRAFANA_POD_LABELS
    (policy,) = [
        r
        for r in _of(run.records, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if r.inputs["metadata"]["name"] == "allow-grafana-clients"
    ]
    (rule,) = policy.inputs["spec"]["ingress"]
    assert rule["from"] == [{"ipBlock": {"cidr": "192.168.0.0/24"}}]
    assert rule["ports"] == [{"port": stack_values.GRAFANA_PORT, "protocol": "TCP"}]


def test_without_grafana_there_is_no_grafana_nor_its_role(run_component: RunComponent) -> None:
    data = stack_data("prod")
    data["observability"]["grafana"] = {"enabled": False}
    run = run_component(parts.observability, data, "prod")
    assert _values_of(run)["grafana"]["enabled"] is False
    accounts = {r.inputs["serviceAccount"] for r in _of(run.records, ASSOCIATION)}
    assert accounts == {PROMETHEUS_SERVICE_ACCOUNT}


def test_the_node_exporters_namespace_admits_them_and_only_prometheus_to_them(
    synthesized: dict[str, StackResult],
) -> None:
    """Every stack makes the exporters' namespace, enforcing privileged (warning and auditing
    baseline), before the exporters, closed by default but for Prometheus on their ports."""
    for stack in STACKS:
        records = synthesized[stack].records
        (namespace,) = [r for r in _of(records, "kubernetes:core/v1:Namespace")
                        if r.inputs["metadata"]["name"] == NODE_EXPORTERS_NAMESPACE]  # fmt: skip
        labels = namespace.inputs["metadata"]["labels"]
        version = f"v{synthesized[stack].config.cluster.kubernetes_version}"
        assert labels == {"pod-security.kubernetes.io/enforce": "privileged",
                          "pod-security.kubernetes.io/enforce-version": version,
                          "pod-security.kubernetes.io/warn": "baseline",
                          "pod-security.kubernetes.io/warn-version": version,
                          "pod-security.kubernetes.io/audit": "baseline",
                          "pod-security.kubernetes.io/audit-version": version}, stack  # fmt: skip
        exporters = [r for r in records
                     if r.type in ("kubernetes:apps/v1:DaemonSet", RELEASE)
                     and NODE_EXPORTERS_NAMESPACE in (r.inputs.get("namespace"),
                                                      r.inputs.get("metadata", {}).get("namespace"))]  # fmt: skip
        assert exporters, stack
        assert all(namespace.urn in r.dependencies for r in exporters), stack
        policies = {r.inputs["metadata"]["name"]: r.inputs["spec"]
                    for r in _of(records, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
                    if r.inputs["metadata"]["namespace"] == NODE_EXPORTERS_NAMESPACE}  # fmt: skip
        assert policies.pop(DEFAULT_DENY_POLICY)["ingress"] == [], stack
        ports = set()
        for spec in policies.values():
            (rule,) = spec["ingress"]
            assert rule["from"] == [from_namespace(MONITORING_NAMESPACE)], stack
            ports |= {port["port"] for port in rule["ports"]}
        assert ports == {9400, 8000, 9500}, stack
