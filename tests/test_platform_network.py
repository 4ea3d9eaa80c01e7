"""The platform namespaces' NetworkPolicies, through the reachability model (tests/network_model.py).

Every namespace a platform release creates is closed by default; each listener is reached by the
clients named here, one case each, and a team pod reaches none of them but the webhooks' ports,
which the API server calls from the VPC's block (components/platform_network.py says why).
"""

from __future__ import annotations

import ipaddress
from typing import Final

import pytest

from components.platform import platform_namespaces
from synth.run import StackResult
from tests.conftest import STACKS
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
    released = _release_namespaces(result) - {KUBE_SYSTEM}
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
