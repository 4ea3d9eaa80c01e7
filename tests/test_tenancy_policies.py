"""The tenancy policies: each passes every synthesized stack and catches what it is about."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from components import kuberay
from components.tenancy import team_network_policies
from policies.rules import tenancy
from synth.run import StackResult
from tests.conftest import STACKS
from tests.test_policies import POLICIES, Entry, _records, _run_policy

TEAM_LABEL = "trainingplatform.io/team"
NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
TENANCY = tuple(policy.name for policy in tenancy.POLICIES)
Edit = Callable[[list[Entry]], None]


def _team_namespace(entries: list[Entry]) -> Entry:
    return next(
        e
        for e in entries
        if e["type"] == NAMESPACE and TEAM_LABEL in e["inputs"]["metadata"].get("labels", {})
    )


def _labels(entries: list[Entry]) -> dict[str, str]:
    labels: dict[str, str] = _team_namespace(entries)["inputs"]["metadata"]["labels"]
    return labels


def _first_container(entries: list[Entry]) -> dict[str, Any]:
    runtime = next(e for e in entries if e["type"] == RUNTIME)
    job = runtime["inputs"]["spec"]["template"]["spec"]["replicatedJobs"][0]
    container: dict[str, Any] = job["template"]["spec"]["template"]["spec"]["containers"][0]
    return container


def _first_pod(entries: list[Entry]) -> dict[str, Any]:
    runtime = next(e for e in entries if e["type"] == RUNTIME)
    job = runtime["inputs"]["spec"]["template"]["spec"]["replicatedJobs"][0]
    pod: dict[str, Any] = job["template"]["spec"]["template"]["spec"]
    return pod


def _drop(entries: list[Entry], keep: Callable[[Entry], bool]) -> None:
    entries[:] = [e for e in entries if keep(e)]


def _without_default_deny(entries: list[Entry]) -> None:
    team = _team_namespace(entries)["inputs"]["metadata"]["name"]
    _drop(entries, lambda e: not (e["type"] == NETWORK_POLICY
                                  and e["inputs"]["metadata"]["namespace"] == team
                                  and e["inputs"]["metadata"]["name"] == "default-deny-ingress"))  # fmt: skip


def _opened_to_other_namespaces(entries: list[Entry]) -> None:
    team = _team_namespace(entries)["inputs"]["metadata"]["name"]
    policy = next(e for e in entries if e["type"] == NETWORK_POLICY
                  and e["inputs"]["metadata"]["namespace"] == team
                  and e["inputs"]["metadata"]["name"] == "allow-same-namespace")  # fmt: skip
    policy["inputs"]["spec"]["ingress"] = [{"from": [{"namespaceSelector": {}}]}]


def _controller_on_every_port(entries: list[Entry]) -> None:
    """The KubeRay operator's allow (as dev and staging have it), widened to every port."""
    team = _team_namespace(entries)["inputs"]["metadata"]["name"]
    same = next(e for e in entries if e["type"] == NETWORK_POLICY
                and e["inputs"]["metadata"]["namespace"] == team
                and e["inputs"]["metadata"]["name"] == "allow-same-namespace")  # fmt: skip
    *_, allow = team_network_policies(team, labels={}, controllers=[kuberay.OPERATOR_INGRESS])
    del allow["spec"]["ingress"][0]["ports"]
    entries.append({**json.loads(json.dumps(same)), "urn": same["urn"] + "-operator",
                    "inputs": allow})  # fmt: skip


def _cni_config(value: Any) -> Edit:
    def edit(entries: list[Entry]) -> None:
        cni = next(e for e in entries if e["type"] == "aws:eks/addon:Addon"
                   and e["inputs"]["addonName"] == "vpc-cni")  # fmt: skip
        if value is None:
            cni["inputs"].pop("configurationValues")
        else:
            cni["inputs"]["configurationValues"] = json.dumps(value)

    return edit


def _binding_warns(entries: list[Entry]) -> None:
    binding = next(e for e in entries if e["type"] == BINDING
                   and e["inputs"]["metadata"]["name"] == "trainingplatform-team-queues")  # fmt: skip
    binding["inputs"]["spec"]["validationActions"] = ["Warn"]


def _policy_ignores_jobs(entries: list[Entry]) -> None:
    policy = next(e for e in entries if e["type"] == POLICY
                  and e["inputs"]["metadata"]["name"] == "trainingplatform-team-queues")  # fmt: skip
    rules = policy["inputs"]["spec"]["matchConstraints"]["resourceRules"]
    rules[:] = [r for r in rules if r["apiGroups"] != ["batch.volcano.sh"]]


def _policy_fails_open(entries: list[Entry]) -> None:
    policy = next(e for e in entries if e["type"] == POLICY
                  and e["inputs"]["metadata"]["name"] == "trainingplatform-team-queues")  # fmt: skip
    policy["inputs"]["spec"]["failurePolicy"] = "Ignore"


def _token_mounted(entries: list[Entry]) -> None:
    account = next(e for e in entries if e["type"] == "kubernetes:core/v1:ServiceAccount"
                   and e["inputs"]["metadata"]["name"] == "training-jobs")  # fmt: skip
    del account["inputs"]["automountServiceAccountToken"]


def _set_label(key: str, value: str | None) -> Edit:
    def edit(entries: list[Entry]) -> None:
        labels = _labels(entries)
        if value is None:
            labels.pop(key)
        else:
            labels[key] = value

    return edit


def _container_context(key: str, value: Any) -> Edit:
    def edit(entries: list[Entry]) -> None:
        context = _first_container(entries)["securityContext"]
        if value is None:
            context.pop(key)
        else:
            context[key] = value

    return edit


def _no_seccomp(entries: list[Entry]) -> None:
    del _first_pod(entries)["securityContext"]["seccompProfile"]


def _slurm_namespace_unlabelled(entries: list[Entry]) -> None:
    slurm = next(e for e in entries if e["type"] == NAMESPACE
                 and e["inputs"]["metadata"]["name"] == "slurm")  # fmt: skip
    slurm["inputs"]["metadata"]["labels"] = {}


PSA = "pod-security.kubernetes.io"
# (policy, edit, words in the violation)
CASES: list[tuple[str, Edit, str]] = [
    ("namespaces-pod-security", _set_label(f"{PSA}/enforce", "privileged"), "privileged or host-network pod"),
    ("namespaces-pod-security", _set_label(f"{PSA}/enforce", None), "enforces no Pod Security level"),
    ("namespaces-pod-security", _set_label(f"{PSA}/enforce-version", "latest"), "does not pin enforce-version"),
    ("namespaces-pod-security", _set_label(f"{PSA}/warn", "baseline"), "does not warn restricted"),
    ("namespaces-pod-security", _set_label(f"{PSA}/audit", None), "does not audit restricted"),
    ("namespaces-pod-security", _slurm_namespace_unlabelled, "namespace slurm enforces no"),
    ("runtimes-hardened", _container_context("allowPrivilegeEscalation", None), "allowPrivilegeEscalation is not false"),
    ("runtimes-hardened", _container_context("capabilities", {"drop": ["NET_RAW"]}), "does not drop every capability"),
    ("runtimes-hardened", _container_context("privileged", True), "runs privileged"),
    ("runtimes-hardened", _no_seccomp, "no seccomp profile"),
    ("network-policies-enforced", _cni_config(None), "never enforced"),
    ("network-policies-enforced", _cni_config({"enableNetworkPolicy": "false"}), "never enforced"),
    ("namespaces-network-policy", _without_default_deny, "no default-deny NetworkPolicy"),
    ("namespaces-network-policy", _opened_to_other_namespaces, "admits pods or addresses outside it"),
    ("namespaces-network-policy", _controller_on_every_port, "admits pods or addresses outside it"),
    ("queue-ownership-enforced", lambda es: _drop(es, lambda e: e["type"] != BINDING or "queues" not in e["name"]), "any team's share"),
    ("queue-ownership-enforced", _binding_warns, "any team's share"),
    ("queue-ownership-enforced", _policy_ignores_jobs, "any team's share"),
    ("queue-ownership-enforced", _policy_fails_open, "any team's share"),
    ("job-service-account-no-token", _token_mounted, "mounts an API token"),
]  # fmt: skip


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy", TENANCY)
def test_every_stack_passes_the_tenancy_policies(
    synthesized: dict[str, StackResult], stack: str, policy: str
) -> None:
    assert _run_policy(POLICIES[policy], _records(synthesized[stack]), stack) == []


@pytest.mark.parametrize(("policy", "edit", "words"), CASES)
def test_each_tenancy_policy_catches_its_violation(
    synthesized: dict[str, StackResult], policy: str, edit: Edit, words: str
) -> None:
    entries = _records(synthesized["prod"])
    edit(entries)
    violations = _run_policy(POLICIES[policy], entries, "prod")
    assert violations, f"{policy} found nothing"
    assert any(words in v.message for v in violations), [v.message for v in violations]


def test_every_tenancy_policy_has_a_violating_case() -> None:
    assert len(TENANCY) == 6
    assert {case[0] for case in CASES} == set(TENANCY)
    assert set(TENANCY) <= set(POLICIES)
