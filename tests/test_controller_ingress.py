"""What the platform's controllers may reach in team namespaces (issue 42, item 6): the KubeRay
operator a Ray head's dashboard, Katib's controller a suggestion, nothing else; each allow named,
each proven on the synthesized policies through the reachability model."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest

from components import katib, kuberay, notebooks, versions
from components.teams import TEAM_LABEL
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.conftest import STACKS
from tests.network_model import Cluster, Pod
from tests.reference_paths import chart_dir

NETWORK_POLICY: Final = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NAMESPACE: Final = "kubernetes:core/v1:Namespace"
OPERATOR: Final = "allow-kuberay-operator"
KATIB_CONTROLLER: Final = "allow-katib-controller"
DASHBOARD: Final = 8265
"""kuberay v1.7.0 ray-operator/controllers/ray/utils/constant.go, DefaultDashboardPort."""
SUGGESTION: Final = 6789
"""kubeflow/katib v0.19.0 pkg/controller.v1beta1/consts/const.go, DefaultSuggestionPort."""
GCS: Final = 6379
"""Ray's GCS port, which the operator never calls (constant.go, DefaultGcsServerPort)."""


def _policies(result: StackResult) -> list[dict[str, Any]]:
    return [r.inputs for r in result.records if r.type == NETWORK_POLICY]


def _teams(result: StackResult) -> list[str]:
    return [
        r.inputs["metadata"]["name"]
        for r in result.records
        if r.type == NAMESPACE and TEAM_LABEL in r.inputs["metadata"].get("labels", {})
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_each_controller_reaches_its_pods_on_its_port_only_where_it_runs(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    policies = _policies(result)
    cluster = Cluster(policies)
    operator = Pod(kuberay.NAMESPACE, kuberay.OPERATOR_POD_LABELS)
    controller = Pod(katib.NAMESPACE, katib.CONTROLLER_POD_LABELS)
    impostor = Pod("ml-elsewhere", {**kuberay.OPERATOR_POD_LABELS, **katib.CONTROLLER_POD_LABELS})
    for team in _teams(result):
        named = {p["metadata"]["name"] for p in policies if p["metadata"]["namespace"] == team}
        assert (OPERATOR in named) is result.config.ray.enabled, team
        assert (KATIB_CONTROLLER in named) is result.config.katib.enabled, team
        head = Pod(team, {"ray.io/node-type": "head", "ray.io/cluster": "train"})
        worker = Pod(team, {"ray.io/node-type": "worker", "ray.io/cluster": "train"})
        suggestion = Pod(team, {"katib.kubeflow.org/suggestion": "search"})
        assert cluster.may_reach(operator, head, DASHBOARD) is result.config.ray.enabled
        assert cluster.may_reach(controller, suggestion, SUGGESTION) is result.config.katib.enabled
        # nothing more: not the GCS, not a worker, not another controller's pods or port
        assert not cluster.may_reach(operator, head, GCS)
        assert not cluster.may_reach(operator, worker, DASHBOARD)
        assert not cluster.may_reach(operator, suggestion, SUGGESTION)
        assert not cluster.may_reach(controller, head, DASHBOARD)
        # and only from the controllers' namespaces, whatever labels a pod elsewhere carries
        for target, port in ((head, DASHBOARD), (suggestion, SUGGESTION)):
            assert not cluster.may_reach(impostor, target, port)
        # the same namespace's pods reach each other (a trial's collector, Ray's workers)
        assert cluster.may_reach(worker, head, GCS)


def test_dev_and_staging_admit_both_controllers(synthesized: dict[str, StackResult]) -> None:
    """Ray and Katib are on in dev and staging, so each allow there must be present: the
    parametrized test above would pass vacuously on a stack with neither."""
    for stack in ("dev", "staging"):
        assert synthesized[stack].config.ray.enabled and synthesized[stack].config.katib.enabled


def test_the_operators_labels_are_the_charts(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """The chart labels the operator's pod with its nameOverride and the release's name
    (kuberay v1.7.0 helm-chart/kuberay-operator/templates/deployment.yaml); the selector must
    name what this stack installs."""
    values = load_yaml(
        (reference_dir / "charts" / chart_dir(versions.KUBERAY_OPERATOR_CHART) / "values.yaml")
        .read_text()
    )  # fmt: skip
    release = next(
        r for r in synthesized["dev"].records
        if r.type == "kubernetes:helm.sh/v3:Release"
        and r.inputs["chart"] == versions.KUBERAY_OPERATOR_CHART.chart
    )  # fmt: skip
    assert {
        "app.kubernetes.io/name": values["nameOverride"],
        "app.kubernetes.io/instance": release.inputs["name"],
    } == kuberay.OPERATOR_POD_LABELS
    assert "nameOverride" not in release.inputs["values"]


@pytest.mark.parametrize("stack", STACKS)
def test_nothing_stands_between_the_metrics_collector_and_the_db_manager(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """A trial's metrics collector (a sidecar in the team namespace) pushes to katib-db-manager
    in Katib's namespace on 6789: the team's policies limit ingress only, and Katib's namespace
    has none (the release's manifests carry no NetworkPolicy at v0.19.0, and the stack adds
    none there). A default deny added there must come with an allow for the collectors."""
    policies = _policies(synthesized[stack])
    assert not [p for p in policies if p["metadata"]["namespace"] == katib.NAMESPACE]
    # The one egress policy of a team namespace selects notebook servers only.
    assert all(p["spec"]["policyTypes"] == ["Ingress"]
               or p["spec"]["podSelector"] == {"matchLabels": notebooks.NOTEBOOK_POD_LABELS}
               for p in policies
               if p["metadata"]["namespace"] in _teams(synthesized[stack]))  # fmt: skip
    collector = Pod(_teams(synthesized[stack])[0], {"katib.kubeflow.org/trial": "t"})
    db_manager = Pod(katib.NAMESPACE, {katib.COMPONENT_LABEL: "db-manager"})
    assert Cluster(policies).may_reach(collector, db_manager, SUGGESTION)
