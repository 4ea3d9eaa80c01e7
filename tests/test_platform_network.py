"""The platform namespaces' NetworkPolicies, through the reachability model (tests/network_model.py).

Every namespace a platform release creates is closed by default; each listener is reached by the
clients named here, one case each, and a team pod reaches none of them but the webhooks' ports,
which the API server calls from the VPC's block (components/platform_network.py says why).
"""

from __future__ import annotations

import ipaddress
from typing import Any, Final

import pytest

from components.acceptance_gate import NAMESPACE as ACCEPTANCE_NAMESPACE
from components.catalog import CATALOG
from components.platform import gated, platform_namespaces
from components.platform_network import fence_network_policy, kube_system_fences
from synth.run import StackResult
from tests.conftest import STACKS, stack_data
from tests.network_model import Address, Cluster, Pod, Source

TEAM_LABEL: Final = "trainingplatform.io/team"
NAMESPACE: Final = "kubernetes:core/v1:Namespace"
NETWORK_POLICY: Final = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
HELM_RELEASE: Final = "kubernetes:helm.sh/v3:Release"
KUBE_SYSTEM: Final = "kube-system"
"""EKS's namespace (CoreDNS, which every pod must reach): left to EKS."""


def _network(result: StackResult) -> Cluster:
    return Cluster([r.inputs for r in result.records if r.type == NETWORK_POLICY])


def _teams(result: StackResult) -> list[str]:
    return [
        r.inputs["metadata"]["name"]
        for r in result.records
        if r.type == NAMESPACE and TEAM_LABEL in r.inputs["metadata"].get("labels", {})
    ]


def _inside(result: StackResult, host: int) -> str:
    """An address of the VPC: a control plane interface's or a pod's, which share the block."""
    return str(ipaddress.IPv4Network(result.config.network.vpc_cidr)[host])


def _release_namespaces(result: StackResult) -> set[str]:
    return {r.inputs["namespace"] for r in result.records if r.type == HELM_RELEASE}


@pytest.mark.parametrize("stack", STACKS)
def test_every_platform_namespace_with_a_release_is_closed_by_default(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    # and the acceptance gate's, which its component makes (it installs no release)
    released = _release_namespaces(result) - {KUBE_SYSTEM}
    released |= {ACCEPTANCE_NAMESPACE} if gated(result.config) else set()
    # a namespace a later release adds fails here until it has its policies
    assert set(platform_namespaces(result.config)) | {"slurm"} == released
    denies = {
        r.inputs["metadata"]["namespace"]
        for r in result.records
        if r.type == NETWORK_POLICY
        and r.inputs["metadata"]["name"] == "default-deny-ingress"
        and r.inputs["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}
    }
    assert released <= denies


@pytest.mark.parametrize("stack", STACKS)
def test_platform_policies_wait_for_the_releases_that_create_their_namespaces(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    creators = {
        r.inputs["namespace"]: r.urn
        for r in result.records
        if r.type == HELM_RELEASE and r.inputs.get("createNamespace")
    }
    # or the Namespace resource a component makes for its release (JupyterHub's, with its
    # Pod Security labels)
    creators |= {
        r.inputs["metadata"]["name"]: r.urn
        for r in result.records
        if r.type == "kubernetes:core/v1:Namespace" and r.inputs["metadata"]["name"] not in creators
    }
    for namespace in platform_namespaces(result.config):
        policies = [
            r
            for r in result.records
            if r.type == NETWORK_POLICY and r.inputs["metadata"]["namespace"] == namespace
        ]
        assert policies, namespace
        for policy in policies:
            assert creators[namespace] in policy.dependencies, (namespace, policy.name)


# (case, source, target namespace, port): each allow a listener's client needs.
API_SERVER: Final = "api-server"
KEDA_OPERATOR: Final = Pod("keda", {"app": "keda-operator"})
KEDA_METRICS_APISERVER: Final = Pod("keda", {"app": "keda-operator-metrics-apiserver"})
PROMETHEUS: Final = Pod("monitoring", {"app.kubernetes.io/name": "prometheus"})
ALLOWED: Final = [
    ("api-server to volcano-admission", API_SERVER, "volcano-system", 8443),
    ("api-server to trainer-webhook", API_SERVER, "kubeflow-system", 9443),
    ("api-server to jobset-webhook", API_SERVER, "jobset-system", 9443),
    ("api-server to cert-manager-webhook", API_SERVER, "cert-manager", 10250),
    ("api-server to slurm-operator-webhook", API_SERVER, "slinky", 9443),
    ("api-server to mariadb-operator-webhook", API_SERVER, "mariadb-operator", 9443),
    ("api-server to keda-webhooks", API_SERVER, "keda", 9443),
    ("api-server to keda-metrics-apiserver", API_SERVER, "keda", 6443),
    ("api-server to prometheus-operator", API_SERVER, "monitoring", 10250),
    ("keda-operator to prometheus", KEDA_OPERATOR, "monitoring", 9090),
    ("keda-metrics-apiserver to keda-operator-grpc", KEDA_METRICS_APISERVER, "keda", 9666),
    ("prometheus to itself", PROMETHEUS, "monitoring", 9090),
    ("prometheus to prometheus-config-reloader", PROMETHEUS, "monitoring", 8080),
    ("prometheus to prometheus-operator", PROMETHEUS, "monitoring", 10250),
]
"""Listener ports not webhooks: what a team pod must never reach (and the ALLOWED ones that
are not webhooks). Ports are the charts' defaults."""
CLOSED_TO_TEAMS: Final = [
    ("prometheus", "monitoring", 9090),  # every team's Slurm metrics
    ("prometheus-config-reloader", "monitoring", 8080),
    ("keda-operator-grpc", "keda", 9666),
    ("keda-operator-metrics", "keda", 8080),
    ("volcano-scheduler-metrics", "volcano-system", 8080),
    ("trainer-metrics", "kubeflow-system", 8443),
    ("trainer-status-server", "kubeflow-system", 10443),
    ("jobset-metrics", "jobset-system", 8443),
    ("cert-manager-metrics", "cert-manager", 9402),
    ("slurm-operator-metrics", "slinky", 8080),
    ("mariadb-operator-metrics", "mariadb-operator", 8080),
]
WEBHOOK_PORTS: Final = [
    (target, port) for _, source, target, port in ALLOWED if source == API_SERVER
]


def _present(result: StackResult, namespace: str) -> bool:
    return namespace in platform_namespaces(result.config)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize(
    ("source", "namespace", "port"),
    [pytest.param(*case[1:], id=case[0]) for case in ALLOWED],
)
def test_each_platform_listener_admits_its_clients(
    synthesized: dict[str, StackResult],
    stack: str,
    source: Pod | str,
    namespace: str,
    port: int,
) -> None:
    result = synthesized[stack]
    if not _present(result, namespace):
        pytest.skip(f"{stack} has no {namespace}")
    network = _network(result)
    caller: Source = Address(_inside(result, 9)) if source == API_SERVER else source  # type: ignore[assignment]
    assert network.may_reach(caller, Pod(namespace), port)
    # and a caller of one listener gets nothing else from the namespace
    assert not network.may_reach(caller, Pod(namespace), 31337)


@pytest.mark.parametrize("stack", STACKS)
def test_a_team_pod_reaches_no_platform_listener_but_the_webhooks(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    network = _network(result)
    teams = _teams(result)
    assert teams
    checked = 0
    for team in teams:
        # A team pod is both a pod of its namespace and an address of the VPC.
        sources: list[Source] = [Pod(team, {"app": "anything"}), Address(_inside(result, 4100))]
        for listener, namespace, port in CLOSED_TO_TEAMS:
            if not _present(result, namespace):
                continue
            for source in sources:
                assert not network.may_reach(source, Pod(namespace), port), (team, listener)
                checked += 1
        for namespace, port in WEBHOOK_PORTS:
            if _present(result, namespace):
                # known and documented: the API server and pods share the VPC's block
                assert not network.may_reach(sources[0], Pod(namespace), port)
                assert network.may_reach(sources[1], Pod(namespace), port)
        # the Slurm metrics' other holder, slurmctld, is closed to teams too
        if result.config.slurm.enabled:
            slurmctld = Pod("slurm", {"app.kubernetes.io/name": "slurmctld"})
            assert not network.may_reach(sources[0], slurmctld, 6817)
    assert checked


@pytest.mark.parametrize("stack", STACKS)
def test_webhooks_are_closed_to_addresses_outside_the_vpc(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    network = _network(result)
    for namespace, port in WEBHOOK_PORTS:
        if _present(result, namespace):
            assert not network.may_reach(Address("10.200.0.7"), Pod(namespace), port)
            assert not network.may_reach(Address("192.168.1.1"), Pod(namespace), port)


# The platform's releases in kube-system, each fenced by a policy that selects exactly its pods
# (kube-system itself stays open: EKS's add-ons and CoreDNS live there). Pod labels are those
# the pinned charts render with the platform's values and release names: neuron-helm-chart
# 1.9.0 templates/_helpers.tpl (templateLabels; values scheduler.fullnameOverride
# k8s-neuron-scheduler, nameOverride neuron-scheduler, customScheduler.fullnameOverride
# my-scheduler), templates/scheduler/scheduler-custom-deployment.yaml (tier, version), and
# karpenter 1.14.1 charts/karpenter/templates/_helpers.tpl (selectorLabels).
NEURON_RELEASE: Final = "neuron-helm-chart"
NEURON_SCHEDULER_EXTENSION: Final = Pod(
    KUBE_SYSTEM,
    {
        "app.kubernetes.io/name": "neuron-scheduler",
        "app.kubernetes.io/component": "k8s-neuron-scheduler",
        "app.kubernetes.io/instance": NEURON_RELEASE,
    },
)
NEURON_SCHEDULER: Final = Pod(
    KUBE_SYSTEM,
    {
        "app.kubernetes.io/name": NEURON_RELEASE,
        "app.kubernetes.io/component": "my-scheduler",
        "app.kubernetes.io/instance": NEURON_RELEASE,
        "tier": "control-plane",
        "version": "second",
    },
)
NEURON_DEVICE_PLUGIN: Final = Pod(
    KUBE_SYSTEM,
    # values devicePlugin.nameOverride neuron-device-plugin
    {
        "app.kubernetes.io/name": "neuron-device-plugin",
        "app.kubernetes.io/instance": NEURON_RELEASE,
    },
)
KARPENTER: Final = Pod(
    KUBE_SYSTEM, {"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}
)
COREDNS: Final = Pod(KUBE_SYSTEM, {"k8s-app": "kube-dns", "eks.amazonaws.com/component": "coredns"})

# (case, target, port, its one legitimate client, the release that installs the target)
FENCED: Final = [
    ("my-scheduler to neuron-scheduler-extension", NEURON_SCHEDULER_EXTENSION, 12345,
     NEURON_SCHEDULER, NEURON_RELEASE),
    ("prometheus to karpenter-metrics", KARPENTER, 8080, PROMETHEUS, "karpenter"),
]  # fmt: skip
"""Every kube-system listener the platform installs and the client each admits. Karpenter
1.14.1 serves no webhook, so no API server case; the second scheduler serves nobody (below)."""


def _released(result: StackResult, name: str) -> bool:
    return any(r.type == HELM_RELEASE and r.inputs["name"] == name for r in result.records)


def _trainium(stack: str) -> bool:
    """Whether the stack file names a Trainium type in its pools (read from the file itself)."""
    return any(
        name in CATALOG and CATALOG[name].accelerator == "neuron"
        for pool in stack_data(stack).get("nodePools", [])
        for name in pool["instanceTypes"]
    )


def _fence_cases() -> list[Any]:
    """Stack x fenced listener; a stack without Trainium pools has no Neuron chart, so its
    Neuron case asserts that no fence of it is made (``absent``) instead of the reachability."""
    cases = []
    for stack in STACKS:
        for name, target, port, client, release in FENCED:
            absent = release == NEURON_RELEASE and not _trainium(stack)
            suffix = "-absent-no-trainium-pool" if absent else ""
            cases.append(
                pytest.param(
                    stack, target, port, client, release, absent, id=f"{stack}-{name}{suffix}"
                )
            )
    return cases


@pytest.mark.parametrize(("stack", "target", "port", "client", "release", "absent"), _fence_cases())
def test_each_kube_system_listener_admits_its_client_and_no_team_pod(
    synthesized: dict[str, StackResult],
    stack: str,
    target: Pod,
    port: int,
    client: Pod,
    release: str,
    absent: bool,
) -> None:
    result = synthesized[stack]
    assert _released(result, release) is not absent, (stack, release)
    network = _network(result)
    if absent:
        # no chart, no listener: and no policy left selecting pods that do not exist
        assert network.may_reach(Pod("any-team"), target, port)
        return
    assert network.may_reach(client, target, port)
    # the client gets that port only
    assert not network.may_reach(client, target, 31337)
    teams = _teams(result)
    assert teams
    for team in teams:
        for source in (Pod(team, {"app": "anything"}), Address(_inside(result, 4100))):
            assert not network.may_reach(source, target, port), (team, source)
    # another kube-system pod is no client either, unless it is the one named
    assert not network.may_reach(Pod(KUBE_SYSTEM, {"k8s-app": "kube-dns"}), target, port)


@pytest.mark.parametrize("stack", STACKS)
def test_the_fences_leave_the_rest_of_kube_system_open(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    network = _network(result)
    team = _teams(result)[0]
    # kube-system has no default deny: CoreDNS and the device plugins stay as EKS leaves them
    assert network.may_reach(Pod(team), COREDNS, 53, "UDP")
    assert network.may_reach(Pod(team), COREDNS, 53)
    assert network.may_reach(Address("10.200.0.7"), NEURON_DEVICE_PLUGIN, 8080)
    # the Neuron chart's second scheduler serves nobody (its probes come from the node)
    if _trainium(stack):
        assert not network.may_reach(Pod(team), NEURON_SCHEDULER, 10259)
        assert not network.may_reach(NEURON_SCHEDULER_EXTENSION, NEURON_SCHEDULER, 10259)


def test_a_stack_without_trainium_has_no_neuron_fence() -> None:
    policies = [fence_network_policy(f) for f in kube_system_fences(neuron_scheduler=False)]
    network = Cluster(policies)
    assert network.may_reach(Pod("team-a"), NEURON_SCHEDULER_EXTENSION, 12345)
    assert not network.may_reach(Pod("team-a"), KARPENTER, 8080)
    with_neuron = Cluster(
        [fence_network_policy(f) for f in kube_system_fences(neuron_scheduler=True)]
    )
    assert not with_neuron.may_reach(Pod("team-a"), NEURON_SCHEDULER_EXTENSION, 12345)
