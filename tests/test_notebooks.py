"""JupyterHub (issue 43, items 1 to 3): profiles from the pools, servers in the team's space, the
tenant rules through their CEL, instance metadata, network and the chart's schema."""

from __future__ import annotations

import copy
import ipaddress
import json
import re
import sys
import types
from pathlib import Path
from typing import Any, Final

import jsonschema
import pytest

from components import notebooks
from components.catalog import EFA_RESOURCE, GPU_RESOURCE, NEURON_RESOURCE
from components.cluster import SYSTEM_NODE_SELECTOR, SYSTEM_TOLERATION
from components.config import PlatformConfig, UiExposureConfig
from components.config.pools import AcceleratorAmounts
from components.lustre_boundary import LUSTRE_BOUNDARY_POLICY
from components.platform import lustre_pools, notebook_values, validated_config
from components.scheduling import QUEUE_ANNOTATION, SCHEDULER_NAME
from components.storage.layout import team_directories
from components.storage.model_store import TEAM_VOLUME
from components.tenancy import QUEUE_POLICY
from components.tenant_pods import TENANT_PODS_POLICY
from synth.jobs.admission import admit
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.conftest import stack_data
from tests.docs_pages import page
from tests.network_model import NAMESPACE_NAME_LABEL, Cluster, Pod
from tests.pod_shapes import make_pod
from tests.schemas import validation_errors
from tests.test_kuberay import _policy, _team_namespace
from tests.test_policies import POLICIES, _records, _run_policy
from tests.test_tenant_pods import admitted_pod_spec

NOTEBOOK_STACKS: Final = ("dev", "staging")
NODE_CLASS: Final = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NETWORK_POLICY: Final = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
ROLE: Final = "kubernetes:rbac.authorization.k8s.io/v1:Role"


def _config(stack: str) -> PlatformConfig:
    return validated_config(stack_data(stack), stack=stack)


def _schema(reference_dir: Path) -> dict[str, Any]:
    schema: dict[str, Any] = load_yaml(
        (reference_dir / "charts/jupyterhub/4.4.0/values.schema.yaml").read_text()
    )
    return schema


def _merged(defaults: Any, values: Any) -> Any:
    if isinstance(defaults, dict) and isinstance(values, dict):
        return {**defaults, **{k: _merged(defaults.get(k), v) for k, v in values.items()}}
    return values


def _chart_values(reference_dir: Path, values: dict[str, Any]) -> Any:
    defaults = load_yaml((reference_dir / "charts/jupyterhub/4.4.0/values.yaml").read_text())
    return _merged(defaults, values)


@pytest.mark.parametrize("stack", NOTEBOOK_STACKS)
def test_the_values_validate_against_the_charts_schema(stack: str, reference_dir: Path) -> None:
    schema = _schema(reference_dir)
    validator = jsonschema.validators.validator_for(schema)(schema)
    values = notebook_values(_config(stack))
    assert [e.message for e in validator.iter_errors(_chart_values(reference_dir, values))] == []
    # The schema refuses what the chart does not know: the check can fail.
    wrong = copy.deepcopy(values)
    wrong["singleuser"]["homeOnEbs"] = True
    assert list(validator.iter_errors(_chart_values(reference_dir, wrong)))


@pytest.mark.parametrize("stack", NOTEBOOK_STACKS)
def test_chart_defaults_that_break_the_platforms_rules_are_off(stack: str) -> None:
    config = _config(stack)
    values = notebook_values(config)
    scheduling = values["scheduling"]
    assert scheduling["userScheduler"]["enabled"] is False
    assert scheduling["userPlaceholder"]["enabled"] is False
    assert scheduling["userPods"]["tolerations"] == []
    assert values["prePuller"]["hook"]["enabled"] is False
    assert values["prePuller"]["continuous"]["enabled"] is False
    assert values["singleuser"]["storage"]["type"] == "none"  # no per-user EBS claim
    assert values["singleuser"]["cloudMetadata"]["blockWithIptables"] is False
    assert values["cull"] == {"enabled": True, "timeout": config.notebooks.cull_timeout_seconds,
                              "every": 600}  # fmt: skip
    assert values["proxy"]["service"]["type"] == "ClusterIP"  # no public endpoint
    assert values["hub"]["db"]["pvc"]["storageClassName"] == notebooks.STORAGE_CLASS
    # The hub may not delete claims in team namespaces: KubeSpawner must not try (403).
    verbs = {(resource, verb) for rule in notebooks.hub_team_role("t")["rules"]
             for resource in rule["resources"] for verb in rule["verbs"]}  # fmt: skip
    assert ("persistentvolumeclaims", "delete") not in verbs
    assert values["hub"]["config"]["KubeSpawner"]["delete_pvc"] is False


def test_the_authenticator_admits_the_teams_groups_only() -> None:
    config = _config("dev")
    hub_config = notebook_values(config)["hub"]["config"]
    assert hub_config["JupyterHub"]["authenticator_class"] == "generic-oauth"
    oauth = hub_config["GenericOAuthenticator"]
    groups = {g for team in config.teams for g in (*team.member_groups, *team.admin_groups)}
    assert set(oauth["allowed_groups"]) == groups and oauth["allow_all"] is False
    assert oauth["manage_groups"] is True
    assert oauth["client_id"] == config.oidc.client_id
    assert "client_secret" not in oauth  # from the Secret, never in the values


def _profiles(config: PlatformConfig, team: str) -> dict[str, notebooks.NotebookProfile]:
    (found,) = [t for t in config.teams if t.name == team]
    return {p.slug: p for p in notebooks.pool_profiles(config.node_pools, config.notebooks, found)}


def test_profiles_come_from_the_pools() -> None:
    dev = _config("dev")
    # gpu-small (g5.xlarge, one GPU, no EFA): one GPU only; trn1 has EFA and efaPools none.
    assert set(_profiles(dev, "ml-dev")) == {"ml-dev-cpu", "ml-dev-gpu-small-1"}
    staging = _config("staging")
    team = staging.teams[0].name
    made = _profiles(staging, team)
    assert set(made) == {f"{team}-cpu", f"{team}-p5-node", f"{team}-trn1-node"}
    assert made[f"{team}-trn1-node"].image == staging.notebooks.images.neuron
    none = staging.notebooks.model_copy(update={"efa_pools": "none"})
    profiles = notebooks.pool_profiles(staging.node_pools, none, staging.teams[0])
    assert [p.slug for p in profiles] == [f"{team}-cpu"]


def test_profiles_the_teams_quota_or_queue_cannot_hold_are_left_out() -> None:
    """As team_runtimes leaves out a pool's runtimes: a server that would stay Pending."""
    dev = _config("dev")
    (team,) = [t for t in dev.teams if t.name == "ml-dev"]
    # g5.48xlarge without EFA: eight GPUs, so 1 and 2 are partial and 8 a whole node
    pool = dev.node_pools[0].model_copy(update={"instance_types": ["g5.48xlarge"], "efa": False})
    assert pool.instance.accelerators == 8 and not pool.uses_efa

    def counts(gpus: int, capability: int) -> list[int]:
        shaped = team.model_copy(
            update={
                "quota": team.quota.model_copy(update={"gpus": gpus}),
                "queue": team.queue.model_copy(
                    update={"capability": AcceleratorAmounts(gpus=capability)}
                ),
            }
        )
        shapes = dev.notebooks.model_copy(update={"gpu_profiles": [1, 2, 8]})
        made = notebooks.pool_profiles([pool], shapes, shaped)
        assert made[0].slug == "ml-dev-cpu"
        return [p.devices for p in made[1:]]

    assert counts(8, 8) == [1, 2, 8]
    assert counts(8, 7) == [1, 2]  # the queue's capability holds no whole node
    assert counts(7, 8) == [1, 2]  # nor does the quota
    assert counts(8, 1) == [1]
    assert counts(1, 8) == [1]
    assert counts(0, 8) == []


def _team_pods(config: PlatformConfig) -> list[tuple[str, str, dict[str, Any]]]:
    values = notebook_values(config)
    pods = []
    for team in values["custom"][notebooks.PROFILE_CONFIG]:
        for profile in team["profiles"]:
            override = profile["kubespawner_override"]
            pods.append((team["team"], profile["slug"], override))
    return pods


def _pod_of(
    config: PlatformConfig, team_name: str, slug: str, username: str = "ada"
) -> dict[str, Any]:
    """The pod of a team's profile: the team's Lustre directories where its pool mounts them."""
    team = next(t for t in config.teams if t.name == team_name)
    profile = _profiles(config, team_name)[slug]
    lustre = config.storage.lustre
    mounted = (
        lustre is not None
        and team.shared_file_system
        and (profile.pool is None or profile.pool.name in lustre_pools(config))
    )
    directories = team_directories(lustre, team) if lustre is not None and mounted else []
    return notebooks.notebook_pod(profile, team, directories=directories,
                                  job_service_account=False, username=username)  # fmt: skip


@pytest.mark.parametrize("stack", NOTEBOOK_STACKS)
def test_every_profiles_pod_is_admitted_in_its_team_namespace(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    result = synthesized[stack]
    config = result.config
    policies = {n: _policy(result, n) for n in (TENANT_PODS_POLICY, LUSTRE_BOUNDARY_POLICY,
                                                QUEUE_POLICY)}  # fmt: skip
    judged = 0
    for team, slug, override in _team_pods(config):
        pod = _pod_of(config, team, slug)
        # The profile says to KubeSpawner what the pod builder says.
        assert {k: v for k, v in override.items() if k != "start_timeout"} == (
            notebooks.kubespawner_override(_pod_of(config, team, slug, username="{username}"))
        )
        body = make_pod(admitted_pod_spec(pod["spec"]), team)
        body["metadata"].update(labels=pod["metadata"]["labels"],
                                annotations=pod["metadata"]["annotations"])  # fmt: skip
        namespace = _team_namespace(result, team)
        for name, policy in policies.items():
            assert admit(policy, body, namespace) == (True, None), (slug, name)
        judged += 1
    assert judged >= 2


@pytest.mark.parametrize("stack", NOTEBOOK_STACKS)
def test_a_server_outside_volcano_or_its_queue_is_refused(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    result = synthesized[stack]
    config = result.config
    team, slug = next((t, s) for t, s, o in _team_pods(config)
                      if o["extra_resource_limits"])  # fmt: skip
    pod = _pod_of(config, team, slug)
    namespace = _team_namespace(result, team)
    spec = admitted_pod_spec(pod["spec"])
    spec["schedulerName"] = "default-scheduler"  # the chart's user scheduler or none
    unqueued = make_pod(spec, team)
    ok, message = admit(_policy(result, TENANT_PODS_POLICY), unqueued, namespace)
    assert not ok and message
    other_queue = make_pod(admitted_pod_spec(pod["spec"]), team)
    other_queue["metadata"]["annotations"] = {QUEUE_ANNOTATION: "someone-else"}
    assert not admit(_policy(result, QUEUE_POLICY), other_queue, namespace)[0]
    # The chart's own user-pod toleration (hub.jupyter.org/dedicated) is refused too.
    tolerant = admitted_pod_spec(pod["spec"])
    tolerant["tolerations"].append(
        {"key": "hub.jupyter.org/dedicated", "operator": "Equal", "value": "user",
         "effect": "NoSchedule"}
    )  # fmt: skip
    assert not admit(_policy(result, TENANT_PODS_POLICY), make_pod(tolerant, team), namespace)[0]


def test_a_servers_pod_is_the_teams() -> None:
    config = _config("staging")
    team = config.teams[0]
    pod = _pod_of(config, team.name, f"{team.name}-p5-node")
    spec = pod["spec"]
    assert pod["metadata"]["namespace"] == team.name
    # Neither Karpenter's consolidation nor Volcano's reclaim takes a running server (the
    # admission test above admits these annotations through the tenant rules' CEL).
    assert pod["metadata"]["annotations"] == {
        QUEUE_ANNOTATION: team.name,
        "karpenter.sh/do-not-disrupt": "true",
        "volcano.sh/preemptable": "false",
    }
    assert spec["schedulerName"] == SCHEDULER_NAME
    assert spec["securityContext"]["supplementalGroups"] == [team.gid]
    assert spec["automountServiceAccountToken"] is False
    (container,) = spec["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/models"]["name"] == TEAM_VOLUME
    assert mounts[notebooks.HOME_MOUNT] == {"name": TEAM_VOLUME, "mountPath": "/home/jovyan",
                                            "subPath": "home/ada"}  # fmt: skip
    assert any(path.startswith("/fsx") for path in mounts)
    pool = config.pool("p5")
    assert pool is not None
    limits = container["resources"]["limits"]
    assert limits[GPU_RESOURCE] == str(pool.instance.accelerators)
    assert limits[EFA_RESOURCE] == str(pool.instance.efa_interfaces)
    trn = _pod_of(config, team.name, f"{team.name}-trn1-node")["spec"]["containers"][0]
    assert NEURON_RESOURCE in trn["resources"]["limits"]
    # With the job service account only if config asks.
    asked = notebooks.notebook_pod(_profiles(config, team.name)[f"{team.name}-cpu"], team,
                                   directories=[], job_service_account=True)  # fmt: skip
    assert asked["spec"]["automountServiceAccountToken"] is True


def test_gpu_profiles_take_their_share_of_a_partial_node() -> None:
    data = stack_data("dev")
    # An eight-GPU pool without EFA: partial nodes of 1 and 2 GPUs, and no whole node.
    data["nodePools"].append(
        {"name": "gpu-wide", "instanceTypes": ["g5.48xlarge"], "efa": False, "maxNodes": 1,
         "zone": "us-west-2b"}
    )  # fmt: skip
    config = validated_config(data, stack="dev")
    made = _profiles(config, "ml-dev")
    assert {s for s in made if "gpu-wide" in s} == {"ml-dev-gpu-wide-1", "ml-dev-gpu-wide-2"}
    pool = config.pool("gpu-wide")
    assert pool is not None
    for count in (1, 2):
        pod = _pod_of(config, "ml-dev", f"ml-dev-gpu-wide-{count}")
        resources = pod["spec"]["containers"][0]["resources"]
        assert resources["requests"] == resources["limits"]
        assert resources["limits"][GPU_RESOURCE] == str(count)
        assert int(resources["limits"]["cpu"]) < pool.instance.vcpu * count // 8 + 1
        assert "dshm" not in {v["name"] for v in pod["spec"]["volumes"]}
    # A one-GPU node's one-GPU profile is the whole node.
    assert made["ml-dev-gpu-small-1"].whole_node


@pytest.mark.parametrize("stack", NOTEBOOK_STACKS)
def test_instance_metadata_is_unreachable_from_notebooks(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    result = synthesized[stack]
    for record in (r for r in result.records if r.type == NODE_CLASS):
        options = record.inputs["spec"]["metadataOptions"]
        assert options["httpPutResponseHopLimit"] == 1, record.name
        assert options["httpTokens"] == "required"
    policies = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs
        for r in result.records
        if r.type == NETWORK_POLICY
    }
    for team in result.config.teams:
        policy = policies[(team.name, notebooks.METADATA_EGRESS_POLICY)]
        spec = policy["spec"]
        assert spec["podSelector"] == {"matchLabels": notebooks.NOTEBOOK_POD_LABELS}
        assert spec["policyTypes"] == ["Egress"]
        blocks = [peer["ipBlock"] for rule in spec["egress"] for peer in rule["to"]
                  if "ipBlock" in peer]  # fmt: skip
        assert blocks == [{"cidr": "0.0.0.0/0", "except": [notebooks.INSTANCE_METADATA_CIDR]}]
        # Only notebook pods are selected: no other policy of the team limits egress.
        others = [p for (ns, name), p in policies.items() if ns == team.name
                  and "Egress" in (p["spec"].get("policyTypes") or [])]  # fmt: skip
        assert others == [policy]


@pytest.mark.parametrize("stack", NOTEBOOK_STACKS)
def test_team_namespaces_admit_the_proxy_and_hub_to_the_notebook_port(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    result = synthesized[stack]
    for team in result.config.teams:
        for ingress, labels in ((notebooks.PROXY_INGRESS, notebooks.PROXY_POD_LABELS),
                                (notebooks.HUB_INGRESS, notebooks.HUB_POD_LABELS)):  # fmt: skip
            (policy,) = [r.inputs for r in result.records if r.type == NETWORK_POLICY
                         and r.inputs["metadata"] == {**r.inputs["metadata"],
                                                      "name": ingress.name,
                                                      "namespace": team.name}]  # fmt: skip
            (rule,) = policy["spec"]["ingress"]
            assert rule["ports"] == [{"port": notebooks.NOTEBOOK_PORT, "protocol": "TCP"}]
            (peer,) = rule["from"]
            assert peer["podSelector"] == {"matchLabels": labels}
            assert peer["namespaceSelector"]["matchLabels"] == {
                "kubernetes.io/metadata.name": notebooks.NAMESPACE
            }
        role = next(r.inputs for r in result.records if r.type == ROLE
                    and r.inputs["metadata"]["namespace"] == team.name
                    and r.inputs["metadata"]["name"] == notebooks.SPAWNER_ROLE)  # fmt: skip
        resources = {res for rule in role["rules"] for res in rule["resources"]}
        assert resources == {"pods", "events"}  # no secrets, services or claims


_CHART_LABELS: Final = {"app": "jupyterhub", "release": notebooks.RELEASE}
"""``jupyterhub.matchLabels`` (4.4.0 jupyterhub/templates/_helpers.tpl): the legacy labels, and
``component`` per template."""
_PRIVATE: Final = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")


def _egress_allow_rules(chart: dict[str, Any], netpol: dict[str, Any]) -> list[dict[str, Any]]:
    """``jupyterhub.networkPolicy.renderEgressRules`` (4.4.0 templates/_helpers-netpol.tpl)."""
    allow, metadata = netpol["egressAllowRules"], f"{chart['singleuser']['cloudMetadata']['ip']}/32"
    rules: list[dict[str, Any]] = []
    dns: list[dict[str, Any]] = []
    if allow["dnsPortsCloudMetadataServer"]:
        dns.append({"ipBlock": {"cidr": metadata}})
    if allow["dnsPortsKubeSystemNamespace"]:
        dns.append({"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "kube-system"}}})
    if allow["dnsPortsPrivateIPs"]:
        dns += [{"ipBlock": {"cidr": cidr}} for cidr in _PRIVATE]
    if dns:
        rules.append({"ports": [{"port": 53, "protocol": p} for p in ("UDP", "TCP")], "to": dns})
    if allow["nonPrivateIPs"]:
        rules.append({"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [*_PRIVATE, metadata]}}]})
    if allow["privateIPs"]:
        rules.append({"to": [{"ipBlock": {"cidr": cidr}} for cidr in _PRIVATE]})
    if allow["cloudMetadataServer"]:
        rules.append({"to": [{"ipBlock": {"cidr": metadata}}]})
    return rules + list(netpol.get("egress") or [])


def _chart_policy(
    chart: dict[str, Any], component: str, netpol: dict[str, Any], ports: dict[str, int]
) -> dict[str, Any]:
    """The hub's or proxy's NetworkPolicy as 4.4.0 renders it (templates/hub/netpol.yaml,
    templates/proxy/netpol.yaml; ``interNamespaceAccessLabels: ignore``, named ports resolved
    to the containers' numbers, since the model takes numbers)."""

    def labelled(component: str) -> dict[str, Any]:
        return {"podSelector": {"matchLabels": {**_CHART_LABELS, "component": component}}}

    def access(label: str) -> list[dict[str, Any]]:
        return [
            {"podSelector": {"matchLabels": {f"hub.jupyter.org/network-access-{label}": "true"}}}
        ]

    ingress: list[dict[str, Any]] = []
    if netpol["allowedIngressPorts"]:
        ingress.append({"ports": [{"port": ports[p]} for p in netpol["allowedIngressPorts"]]})
    if component == "hub":
        ingress.append({"ports": [{"port": ports["http"]}], "from": access("hub")})
        egress = [{"to": [labelled("proxy")], "ports": [{"port": 8001}]}]
    else:
        ingress.append({"ports": [{"port": ports["http"]}], "from": access("proxy-http")})
        ingress.append({"ports": [{"port": ports["api"]}], "from": access("proxy-api")})
        egress = [{"to": [labelled("hub")], "ports": [{"port": notebooks.HUB_PORT}]}]
    egress.append({"to": [labelled("singleuser-server")], "ports": [{"port": 8888}]})
    return {
        "metadata": {"name": component, "namespace": notebooks.NAMESPACE},
        "spec": {
            "podSelector": {"matchLabels": {**_CHART_LABELS, "component": component}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress + list(netpol.get("ingress") or []),
            "egress": egress + _egress_allow_rules(chart, netpol),
        },
    }


@pytest.mark.parametrize("stack", NOTEBOOK_STACKS)
def test_the_hub_and_proxy_policies_admit_the_servers_in_team_namespaces(
    stack: str, reference_dir: Path
) -> None:
    """Issue 43: servers in team namespaces reach the hub's API, hub and proxy reach them."""
    config = _config(stack)
    chart = _chart_values(reference_dir, notebook_values(config))
    hub = _chart_policy(chart, "hub", chart["hub"]["networkPolicy"], {"http": notebooks.HUB_PORT})
    proxy = _chart_policy(
        chart, "proxy", chart["proxy"]["chp"]["networkPolicy"],
        {"http": notebooks.PROXY_PORT, "https": 8443, "api": 8001},
    )  # fmt: skip
    cluster = Cluster([hub, proxy])
    hub_pod = Pod(notebooks.NAMESPACE, {**_CHART_LABELS, "component": "hub"})
    proxy_pod = Pod(notebooks.NAMESPACE, {**_CHART_LABELS, "component": "proxy"})
    pod_ip = str(ipaddress.ip_network(config.network.vpc_cidr)[1000])
    for team in config.teams:
        # KubeSpawner's labels: component singleuser-server and the chart's common labels
        server = Pod(team.name, {**_CHART_LABELS, **notebooks.NOTEBOOK_POD_LABELS})
        assert cluster.may_reach(server, hub_pod, notebooks.HUB_PORT), team.name
        assert not cluster.may_reach(
            Pod(team.name, {"app": "trainer"}), hub_pod, notebooks.HUB_PORT
        )
        for source in (hub_pod, proxy_pod):
            assert cluster.may_send(source, server, pod_ip, notebooks.NOTEBOOK_PORT), source
    assert cluster.may_send(proxy_pod, hub_pod, pod_ip, notebooks.HUB_PORT)
    # the chart's own rules reach servers in its namespace only: the team namespaces are
    # reached through egressAllowRules, which must stay on
    narrow = copy.deepcopy(chart)
    for netpol in (narrow["hub"]["networkPolicy"], narrow["proxy"]["chp"]["networkPolicy"]):
        netpol["egressAllowRules"].update(privateIPs=False, nonPrivateIPs=False)
    narrowed = Cluster([
        _chart_policy(narrow, "hub", narrow["hub"]["networkPolicy"], {"http": 8081}),
    ])  # fmt: skip
    server = Pod(config.teams[0].name, {**_CHART_LABELS, **notebooks.NOTEBOOK_POD_LABELS})
    assert not narrowed.may_send(hub_pod, server, pod_ip, notebooks.NOTEBOOK_PORT)
    # the servers call the hub by the Service's full name: "hub" resolves in its namespace only
    connect = chart["hub"]["config"]["JupyterHub"]["hub_connect_url"]
    assert connect == f"http://hub.{notebooks.NAMESPACE}.svc.cluster.local:{notebooks.HUB_PORT}"


def test_the_hubs_namespace_admits_only_the_exposures_clients() -> None:
    forward = notebooks.client_ingress_policy(UiExposureConfig())
    assert forward["spec"]["ingress"] == []
    balancer = UiExposureConfig.model_validate(
        {"mode": "internalLoadBalancer", "clientCidrs": ["192.168.10.0/24"]}
    )
    policy = notebooks.client_ingress_policy(balancer)
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"ipBlock": {"cidr": "192.168.10.0/24"}}]
    assert rule["ports"] == [{"port": notebooks.PROXY_PORT, "protocol": "TCP"}]
    service = notebooks.access_service(balancer)
    assert service["spec"]["loadBalancerSourceRanges"] == ["192.168.10.0/24"]
    assert (
        service["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-internal"]
        == "true"
    )
    values = notebook_values(_config("dev"))
    assert values["proxy"]["chp"]["networkPolicy"]["allowedIngressPorts"] == []


class _Group:
    def __init__(self, name: str) -> None:
        self.name = name


class _Spawner:
    def __init__(self, user: Any, profile: str, active: bool = False) -> None:
        self.user, self.user_options, self.active = user, {"profile": profile}, active
        self.start_timeout = 0


class _User:
    def __init__(self, groups: list[str]) -> None:
        self.name = "ada"
        self.groups = [_Group(g) for g in groups]
        self.spawners: dict[str, _Spawner] = {}


def _hub_config(values: dict[str, Any]) -> Any:
    """Run the hub's extra config as the hub would, with the chart's config reader."""

    class _Traits:
        pass

    c = types.SimpleNamespace(KubeSpawner=_Traits())
    z2jh = types.ModuleType("z2jh")

    def get_config(key: str, default: Any = None) -> Any:
        node: Any = values
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return default if node is None else node

    z2jh.get_config = get_config  # type: ignore[attr-defined]
    sys.modules["z2jh"] = z2jh
    try:
        exec(values["hub"]["extraConfig"]["platform"], {"c": c})
    finally:
        del sys.modules["z2jh"]
    return c.KubeSpawner


def test_users_see_their_teams_profiles_and_the_accelerator_cap_holds() -> None:
    config = _config("dev")
    values = notebook_values(config)
    spawner_config = _hub_config(values)
    member = _User(list(config.teams[0].member_groups))
    slugs = [p["slug"] for p in spawner_config.profile_list(_Spawner(member, ""))]
    assert slugs == ["ml-dev-cpu", "ml-dev-gpu-small-1"]
    # A user in no team's group gets a reason, not KubeSpawner's defaults in the hub's namespace.
    # The hub's error page shows only an exception's jupyterhub_message (jupyterhub 5.5.0
    # handlers/base.py, write_error): both refusals carry theirs.
    with pytest.raises(RuntimeError, match="ada is in no team's group") as no_team:
        spawner_config.profile_list(_Spawner(_User(["strangers"]), ""))
    assert no_team.value.jupyterhub_message == str(no_team.value)  # type: ignore[attr-defined]
    # One accelerator server at a time (maxAcceleratorServersPerUser: 1); CPU ones free.
    member.spawners[""] = _Spawner(member, "ml-dev-gpu-small-1", active=True)
    spawner_config.pre_spawn_hook(_Spawner(member, "ml-dev-cpu"))
    with pytest.raises(RuntimeError, match="at most 1 accelerator servers") as capped:
        spawner_config.pre_spawn_hook(_Spawner(member, "ml-dev-gpu-small-1"))
    assert capped.value.jupyterhub_message == str(capped.value)  # type: ignore[attr-defined]
    member.spawners[""].active = False
    gpu = _Spawner(member, "ml-dev-gpu-small-1")
    spawner_config.pre_spawn_hook(gpu)
    # The hook sets the profile's start timeout before the hub reads it for its wait; the
    # default profile's where the user chose none.
    assert gpu.start_timeout == notebooks.GPU_START_TIMEOUT
    default = _Spawner(member, "")
    spawner_config.pre_spawn_hook(default)
    assert default.start_timeout == notebooks.CPU_START_TIMEOUT


def test_every_profile_sets_what_jupyterhubs_own_traits_take() -> None:
    """KubeSpawner sets each override on itself (kubespawner 7.0.0 spawner.py,
    _apply_overrides), so a value JupyterHub's trait refuses ("8Gi" as mem_limit) fails every
    start; the platform's reading of memory (synth jobs) agrees with the trait."""
    # Imported here: JupyterHub takes over a second to import, paid by this test's worker only.
    from jupyterhub.spawner import Spawner  # noqa: PLC0415
    from traitlets import TraitError  # noqa: PLC0415

    traits = Spawner.class_traits()
    seen: set[str] = set()
    for stack in NOTEBOOK_STACKS:
        values = notebook_values(_config(stack))
        spawner = Spawner()
        spawner.start_timeout = values["singleuser"]["startTimeout"]
        assert values["hub"]["consecutiveFailureLimit"] == 0
        for team in values["custom"][notebooks.PROFILE_CONFIG]:
            for profile in team["profiles"]:
                for key, value in profile["kubespawner_override"].items():
                    if key in traits:
                        setattr(spawner, key, value)
                        seen.add(key)
                for key in ("mem_limit", "mem_guarantee"):
                    value = profile["kubespawner_override"][key]
                    assert getattr(spawner, key) == notebooks.byte_specification_bytes(value)
                assert spawner.start_timeout >= notebooks.CPU_START_TIMEOUT
    assert {"mem_limit", "mem_guarantee", "start_timeout", "environment"} <= seen
    for value in ("8Gi", "8GB", "G", "lots"):
        with pytest.raises(TraitError):
            Spawner().mem_limit = value
        with pytest.raises(ValueError):
            notebooks.byte_specification_bytes(value)
    for good in ("8G", "12050M", "1.5T", "512K", 1024):
        spawner = Spawner()
        spawner.mem_limit = good
        assert spawner.mem_limit == notebooks.byte_specification_bytes(good)


HELM_RELEASE: Final = "kubernetes:helm.sh/v3:Release"


def _release_values(entries: list[dict[str, Any]]) -> dict[str, Any]:
    (release,) = [e for e in entries if e["type"] == HELM_RELEASE and e["name"] == "jupyterhub"]
    values: dict[str, Any] = release["inputs"]["values"]
    return values


def _first_profile(values: dict[str, Any]) -> dict[str, Any]:
    override: dict[str, Any] = values["custom"][notebooks.PROFILE_CONFIG][0]["profiles"][-1][
        "kubespawner_override"
    ]
    return override


def _set(path: str, value: Any) -> Any:
    def mutate(values: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = values
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return mutate


def _profile(key: str, value: Any) -> Any:
    def mutate(values: dict[str, Any]) -> None:
        _first_profile(values)[key] = value

    return mutate


def _unequal_gpu(values: dict[str, Any]) -> None:
    override = _first_profile(values)
    override["extra_resource_guarantees"] = {GPU_RESOURCE: "1"}
    override["extra_resource_limits"] = {GPU_RESOURCE: "8"}


@pytest.mark.parametrize(
    ("policy", "mutation", "words"),
    [
        ("notebooks-exposure", _set("proxy.service.type", "LoadBalancer"), "proxy.service.type"),
        ("notebooks-exposure", _set("ingress.enabled", True), "ingress.enabled"),
        ("notebooks-exposure", _set("proxy.chp.networkPolicy.allowedIngressPorts", ["http"]),
         "every source"),
        ("notebooks-authenticator", _set("hub.config.JupyterHub.authenticator_class", "dummy"),
         "lets anyone in"),
        ("notebooks-authenticator", _set("hub.config.JupyterHub", {}), "lets anyone in"),
        ("notebooks-authenticator", _set("hub.config.GenericOAuthenticator.allow_all", True),
         "outside the teams"),
        ("notebooks-authenticator", _set("hub.config.GenericOAuthenticator.allowed_groups", []),
         "allowed_groups"),
        ("notebooks-authenticator",
         _set("hub.config.GenericOAuthenticator.client_secret", "s3cret"), "Secret"),
        ("notebooks-images-pinned", _set("singleuser.image.tag", "latest"), "singleuser.image"),
        ("notebooks-images-pinned", _profile("image", "repo/notebook"), "not pinned"),
        ("notebooks-profile-resources", _profile("scheduler_name", "default-scheduler"),
         "Volcano"),
        ("notebooks-profile-resources", _profile("extra_annotations", {}), "queue"),
        ("notebooks-profile-resources", _unequal_gpu, "limits"),
        ("notebooks-profile-resources", _set("scheduling.userScheduler.enabled", True),
         "second scheduler"),
        ("notebooks-profile-resources", _set("prePuller.continuous.enabled", True), "puller"),
        ("notebooks-profile-resources", _set("singleuser.storage.type", "dynamic"), "EBS"),
        ("notebooks-profile-resources",
         _set("singleuser.cloudMetadata.blockWithIptables", True), "privileged"),
        ("notebooks-profile-resources",
         _set("scheduling.userPods.tolerations", [{"key": "hub.jupyter.org/dedicated"}]),
         "tolerations"),
    ],
)  # fmt: skip
def test_notebook_policies_refuse_each_violation(
    synthesized: dict[str, StackResult], policy: str, mutation: Any, words: str
) -> None:
    entries = _records(synthesized["staging"])
    assert _run_policy(POLICIES[policy], entries, "staging") == []
    mutation(_release_values(entries))
    findings = _run_policy(POLICIES[policy], entries, "staging")
    assert findings and all(f.enforcementLevel == "mandatory" for f in findings), policy
    assert any(words in f.message for f in findings), [f.message for f in findings]


@pytest.mark.parametrize("stack", NOTEBOOK_STACKS)
def test_the_hub_database_is_on_an_encrypted_volume_kept_where_state_is(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    result = synthesized[stack]
    (storage,) = [r.inputs for r in result.records
                  if r.type == "kubernetes:storage.k8s.io/v1:StorageClass"
                  and r.inputs["metadata"]["name"] == notebooks.STORAGE_CLASS]  # fmt: skip
    assert storage["parameters"]["encrypted"] == "true"
    assert storage["parameters"]["type"] == "gp3"
    protect = result.config.protect_stateful_resources
    # Kept in every stack, and the claim outlives the release.
    assert storage["reclaimPolicy"] == "Retain", protect
    (release,) = [r for r in result.records
                  if r.type == HELM_RELEASE and r.name == "jupyterhub"]  # fmt: skip
    assert (
        release.inputs["values"]["hub"]["db"]["pvc"]["storageClassName"]
        == storage["metadata"]["name"]
    )
    pvc = release.inputs["values"]["hub"]["db"]["pvc"]
    assert pvc["annotations"] == {"helm.sh/resource-policy": "keep"}
    # Encrypted with the stack's data key, which the EBS CSI driver's role may use for volumes.
    (key,) = [r for r in result.records
              if r.type == "aws:kms/key:Key" and r.name == "storage-data"]  # fmt: skip
    (use,) = [r for r in result.records
              if r.type == "aws:iam/rolePolicy:RolePolicy" and r.name == "notebooks-ebs-data-key"]  # fmt: skip
    assert key.urn in use.property_dependencies["policy"]
    assert any(d.endswith("-ebs-csi") for d in use.property_dependencies["role"])
    statements = json.loads(use.inputs["policy"])["Statement"]
    assert {st["Resource"] for st in statements} == {storage["parameters"]["kmsKeyId"]}
    assert storage["parameters"]["kmsKeyId"].startswith("arn:aws:kms:")
    actions = {a for st in statements for a in ([st["Action"]] if isinstance(st["Action"], str)
               else st["Action"])}  # fmt: skip
    assert {"kms:CreateGrant", "kms:Decrypt", "kms:GenerateDataKeyWithoutPlaintext"} <= actions
    # Hub and proxy on the system nodes.
    values = release.inputs["values"]
    for block in (values["hub"], values["proxy"]["chp"]):
        assert block["nodeSelector"] == SYSTEM_NODE_SELECTOR
        assert SYSTEM_TOLERATION in block["tolerations"]


def test_profile_pods_are_valid_pods(reference_dir: Path) -> None:
    """One CPU and one whole-node server of staging against the Pod schema (unknown fields
    refused), and a broken one refused, so the check can fail."""
    config = _config("staging")
    team = config.teams[0].name
    for slug in (f"{team}-cpu", f"{team}-p5-node"):
        pod = _pod_of(config, team, slug)
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {**pod["metadata"], "name": "jupyter-ada"}, "spec": pod["spec"]}  # fmt: skip
        assert validation_errors(body, "1.35", reference_dir / "crds") == [], slug
    body["spec"]["containers"][0]["homeDirectory"] = "/home/jovyan"
    assert validation_errors(body, "1.35", reference_dir / "crds") != []


def test_dummy_login_passes_the_policy_in_dev_only(synthesized: dict[str, StackResult]) -> None:
    """The config allows the dummy authenticator in dev only, and so does the policy config."""
    for stack, allowed in (("dev", True), ("staging", False)):
        entries = _records(synthesized[stack])
        _set("hub.config.JupyterHub.authenticator_class", "dummy")(_release_values(entries))
        findings = _run_policy(POLICIES["notebooks-authenticator"], entries, stack)
        assert (findings == []) is allowed, (stack, findings)


def test_the_docs_stop_servers_by_their_label_and_name_the_port_forwards_redirect() -> None:
    """Servers are owned by nothing Pulumi or Helm deletes: turning notebooks off and tearing
    down say how to stop them, by the label KubeSpawner gives them; the redirect URI the
    identity provider must accept is the port-forward's."""
    ((key, value),) = notebooks.NOTEBOOK_POD_LABELS.items()
    stop = f"kubectl delete pods -A -l {key}={value} --wait"
    assert stop in page("concepts/notebooks.md")
    assert " ".join(page("how-to/tear-down.md").replace("\n   ", " ").split()).count(stop) == 1
    how_to = page("how-to/start-a-notebook.md")
    local = re.search(r"port-forward svc/\S+ (\d+):80", how_to)
    assert local is not None
    assert f"http://localhost:{local.group(1)}/hub/oauth_callback" in how_to
