"""The per-team Katib switch: ``teams[].katib.enabled`` (issue 42, item 5)."""

from __future__ import annotations

from typing import Any

from components.config import parse_platform_config
from components.katib import CONTROLLER_INGRESS, METRICS_COLLECTOR_INJECTION
from components.kuberay import OPERATOR_INGRESS as KUBERAY_OPERATOR_INGRESS
from components.teams import JOB_RULES, JOBS_CLUSTER_ROLE, KATIB_CLUSTER_ROLE, KATIB_RULES
from synth.engine import ResourceRecord
from tests import component_runs as parts
from tests.config_problems import assert_reported
from tests.conftest import RunComponent, stack_data

ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
KATIB_KINDS = {"experiments", "suggestions", "trials"}


def _roles_bound(records: list[ResourceRecord], team: str) -> set[str]:
    return {
        r.inputs["roleRef"]["name"]
        for r in records
        if r.type == ROLE_BINDING and r.inputs["metadata"]["namespace"] == team
    }


def _labels(records: list[ResourceRecord], team: str) -> dict[str, str]:
    (namespace,) = [
        r for r in records if r.type == NAMESPACE and r.inputs["metadata"]["name"] == team
    ]
    labels: dict[str, str] = namespace.inputs["metadata"]["labels"]
    return labels


def _with_second_team(katib: dict[str, Any] | None) -> dict[str, Any]:
    data = stack_data("dev")
    other: dict[str, Any] = {
        "name": "ml-other", "gid": 5998, "adminGroups": ["other-leads"],
        "memberGroups": ["other-engineers"], "quota": {},
    }  # fmt: skip
    if katib is not None:
        other["katib"] = katib
    data["teams"].append(other)
    return data


def test_a_team_left_out_of_katib_gets_no_experiment_rbac(run_component: RunComponent) -> None:
    run = run_component(parts.teams, _with_second_team({"enabled": False}), "dev")
    records = run.records
    # the team that keeps the default searches; the one left out does not
    assert KATIB_CLUSTER_ROLE in _roles_bound(records, "ml-dev")
    assert KATIB_CLUSTER_ROLE not in _roles_bound(records, "ml-other")
    assert JOBS_CLUSTER_ROLE in _roles_bound(records, "ml-other")
    # and no trial gets Katib's metrics collector there
    assert METRICS_COLLECTOR_INJECTION.items() <= _labels(records, "ml-dev").items()
    assert not METRICS_COLLECTOR_INJECTION.items() <= _labels(records, "ml-other").items()
    # nor does Katib's controller reach its pods (it runs no suggestion there)
    allows = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"])
        for r in records
        if r.type == NETWORK_POLICY
    }
    assert (("ml-dev", CONTROLLER_INGRESS.name)) in allows
    assert (("ml-other", CONTROLLER_INGRESS.name)) not in allows
    assert ("ml-other", KUBERAY_OPERATOR_INGRESS.name) in allows  # Ray is every team's


def test_katib_rbac_is_its_own_role_and_only_where_katib_runs(
    run_component: RunComponent,
) -> None:
    # The jobs role every team gets carries none of Katib's kinds...
    assert not any(KATIB_KINDS & set(rule["resources"]) for rule in JOB_RULES)
    assert {k for rule in KATIB_RULES for k in rule["resources"]} >= KATIB_KINDS
    on = run_component(parts.teams, _with_second_team(None), "dev").records
    (role,) = [r for r in on if r.type == CLUSTER_ROLE
               and r.inputs["metadata"]["name"] == KATIB_CLUSTER_ROLE]  # fmt: skip
    assert role.inputs["rules"] == KATIB_RULES
    assert KATIB_CLUSTER_ROLE in _roles_bound(on, "ml-other")  # the default: true
    # ...and a stack without Katib has neither the role nor a binding of it
    data = _with_second_team(None)
    data["katib"]["enabled"] = False
    off = run_component(parts.teams, data, "dev").records
    assert not [r for r in off if r.type == CLUSTER_ROLE
                and r.inputs["metadata"]["name"] == KATIB_CLUSTER_ROLE]  # fmt: skip
    assert KATIB_CLUSTER_ROLE not in _roles_bound(off, "ml-dev")


def test_a_team_cannot_ask_for_katib_the_stack_does_not_run() -> None:
    data = _with_second_team({"enabled": True})
    data["katib"]["enabled"] = False
    assert_reported(data, "platform.teams[1].katib.enabled", True, "katib.enabled is false")
    data["teams"][1]["katib"] = {"enabled": False}
    parse_platform_config(data)
