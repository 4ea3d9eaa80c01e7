"""Volcano under mocks: the release and its scheduler configuration, priority classes, team queues.

Volcano facts come from its sources at our pin (the capacity plugin:
https://github.com/volcano-sh/volcano/blob/v1.15.1/pkg/scheduler/plugins/capacity/capacity.go)
and the chart's published defaults in the reference
data; queue values come from the ``teams:`` sections of the stack files and, where a team leaves a
setting out, from the documented default of that setting (components/config/), written out
here rather than imported from the program.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Final

import pytest

from components import versions
from components.config import ConfigError, TeamConfig, parse_platform_config, pool_capacity
from components.scheduling import queue_spec, scheduler_config, volcano_values
from synth.engine import ResourceRecord
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests import component_runs as parts
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data
from tests.mutations import without_teams
from tests.schemas import validation_errors
from tests.team_objects import team_queues

SCHEDULING = "trainingplatform:index:Scheduling"
RELEASE = "kubernetes:helm.sh/v3:Release"
PRIORITY_CLASS = "kubernetes:scheduling.k8s.io/v1:PriorityClass"
QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"

# Volcano's pinned release and its facts, written out on purpose.
VOLCANO_REPOSITORY: Final = "https://volcano-sh.github.io/helm-charts"
VOLCANO_VERSION: Final = "1.15.1"
VOLCANO_NAMESPACE: Final = "volcano-system"
QUEUE_API: Final = "scheduling.volcano.sh/v1beta1"
SYSTEM_QUEUES: Final = ("root", "default")
CHART_VALUES: Final = "charts/volcano/1.15.1/values.yaml"
REQUIRED_ACTIONS: Final = ("enqueue", "allocate", "backfill", "reclaim")
CRITICAL_ADDONS_TAINT: Final = "CriticalAddonsOnly"
GPU: Final = "nvidia.com/gpu"
NEURON: Final = "aws.amazon.com/neuron"
ACCELERATORS: Final = (GPU, NEURON)
MAX_USER_PRIORITY: Final = 1_000_000_000  # higher values are reserved for system-* classes

# Documented defaults of a team's queue (config field descriptions).
DEFAULT_WEIGHT: Final = 1
DEFAULT_RECLAIMABLE: Final = True
TAINT_EFFECTS: Final = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}


# --------------------------------------------------------------------------- stack cases


def raw_teams(stack: str) -> list[dict[str, Any]]:
    teams: list[dict[str, Any]] = stack_data(stack).get("teams", [])
    return teams


TEAM_CASES = [(stack, team["name"]) for stack in STACKS for team in raw_teams(stack)]


def _amounts(raw: dict[str, Any]) -> dict[str, int]:
    """Accelerator amounts of the stack file (gpus, neuronDevices; missing kinds are 0)."""
    return {GPU: raw.get("gpus", 0), NEURON: raw.get("neuronDevices", 0)}


def expected_queue(team: dict[str, Any]) -> dict[str, Any]:
    """A team's queue from its stack-file entry, with the documented defaults written out."""
    queue = team.get("queue", {})
    return {
        "weight": queue.get("weight", DEFAULT_WEIGHT),
        "reclaimable": queue.get("reclaimable", DEFAULT_RECLAIMABLE),
        # capability defaults to the team's quota (its accelerator kinds)
        "capability": _amounts(queue.get("capability", team["quota"])),
        "deserved": _amounts(queue.get("deserved", {})),
        "guarantee": _amounts(queue.get("guarantee", {})),
    }


@pytest.fixture(scope="module")
def runs(synthesized: dict[str, StackResult]) -> dict[str, ProgramRun]:
    return {stack: ProgramRun(synthesized[stack].records) for stack in STACKS}


# --------------------------------------------------------------------------- helpers


def _volcano(run: ProgramRun) -> ResourceRecord:
    found = [r for r in run.of_type(RELEASE) if r.name == "volcano"]
    assert len(found) == 1, f"expected one volcano release: {found}"
    return found[0]


def _values(run: ProgramRun) -> dict[str, Any]:
    values: dict[str, Any] = _volcano(run).inputs["values"]
    return values


def _parsed_scheduler_config(values: dict[str, Any]) -> dict[str, Any]:
    text = values["custom"]["scheduler_config_override"]
    assert isinstance(text, str), "the chart takes the whole volcano-scheduler.conf as a string"
    parsed = load_yaml(text)
    assert isinstance(parsed, dict), parsed
    return parsed


def _actions(config: dict[str, Any]) -> list[str]:
    return [action.strip() for action in config["actions"].split(",")]


def _plugins(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every plugin of every tier, by name (each at most once)."""
    plugins = [plugin for tier in config["tiers"] for plugin in tier["plugins"]]
    names = [plugin["name"] for plugin in plugins]
    assert len(names) == len(set(names)), names
    return {plugin["name"]: plugin for plugin in plugins}


def _queue(run: ProgramRun, team: str) -> ResourceRecord:
    found = [r for r in run.of_type(QUEUE) if r.inputs["metadata"]["name"] == team]
    assert len(found) == 1, f"expected one Queue {team}: {found}"
    return found[0]


def _quantities(amounts: dict[str, Any]) -> dict[str, int]:
    return {name: int(str(value)) for name, value in amounts.items()}


def _shares(spec: dict[str, Any]) -> dict[str, dict[str, int]]:
    """capability, deserved and guarantee of a Queue spec as integers per accelerator.

    A resource missing from ``capability`` is unlimited to Volcano, so capability must state
    every accelerator kind; a resource missing from deserved or guarantee is zero.
    """
    capability = _quantities(spec["capability"])
    assert set(ACCELERATORS) <= set(capability), f"capability leaves a kind unlimited: {spec}"
    deserved = _quantities(spec.get("deserved", {}))
    guarantee = _quantities(spec.get("guarantee", {}).get("resource", {}))
    return {
        "capability": {name: capability[name] for name in ACCELERATORS},
        "deserved": {name: deserved.get(name, 0) for name in ACCELERATORS},
        "guarantee": {name: guarantee.get(name, 0) for name in ACCELERATORS},
    }


def _as_config(spec: dict[str, Any]) -> dict[str, Any]:
    return {"weight": spec["weight"], "reclaimable": spec["reclaimable"], **_shares(spec)}


def _manifest(record: ResourceRecord) -> dict[str, Any]:
    return dict(record.inputs)


def _version(stack: str) -> str:
    version: str = stack_data(stack)["cluster"]["kubernetesVersion"]
    return version


@cache
def _chart_defaults(reference: Path) -> dict[str, Any]:
    defaults: dict[str, Any] = load_yaml((reference / CHART_VALUES).read_text())
    return defaults


def _unknown_keys(values: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    unknown = [key for key in values if key not in defaults]
    unknown += [
        f"custom.{key}" for key in values.get("custom", {}) if key not in defaults["custom"]
    ]
    return unknown


def _check_scheduler_config(config: dict[str, Any]) -> None:
    actions = _actions(config)
    assert set(REQUIRED_ACTIONS) <= set(actions), actions
    assert actions[0] == "enqueue", "enqueue admits jobs before anything is allocated"
    assert actions.index("allocate") < actions.index("backfill"), actions
    plugins = _plugins(config)
    # gang scheduling, and absolute shares honoured by capacity, not weight-derived ones
    assert {"gang", "capacity"} <= set(plugins), sorted(plugins)
    assert "proportion" not in plugins, "proportion ignores deserved; the platform uses capacity"
    for name in ("gang", "drf"):
        assert plugins[name].get("enablePreemptable") is False, plugins[name]
    # Queues are flat, but capacity runs with hierarchy: without it a queue may use only
    # what the nodes that exist hold less every guarantee, which on a scaled-to-zero pool
    # never admits the gang whose pods would add the nodes (the capacity plugin, above).
    assert plugins["capacity"].get("enableHierarchy") is True, plugins["capacity"]


# --------------------------------------------------------------------------- the release


def test_bill_of_materials_pins_volcano() -> None:
    chart = versions.VOLCANO_CHART
    assert (chart.chart, chart.version, chart.repository) == (
        "volcano",
        VOLCANO_VERSION,
        VOLCANO_REPOSITORY,
    )


@pytest.mark.parametrize("stack", STACKS)
def test_volcano_release_pinned_in_its_namespace(runs: dict[str, ProgramRun], stack: str) -> None:
    run = runs[stack]
    release = _volcano(run)
    inputs = release.inputs
    assert inputs["chart"] == "volcano"
    assert inputs["version"] == VOLCANO_VERSION
    assert inputs["repositoryOpts"]["repo"] == VOLCANO_REPOSITORY
    assert inputs["namespace"] == VOLCANO_NAMESPACE
    # the namespace exists before Helm installs into it
    namespaces = [
        r
        for r in run.of_type("kubernetes:core/v1:Namespace")
        if r.inputs["metadata"]["name"] == VOLCANO_NAMESPACE
    ]
    assert inputs.get("createNamespace") is True or len(namespaces) == 1
    assert release.parent == run.one(SCHEDULING).urn
    assert release.provider is not None and "kubernetes" in release.provider


@pytest.mark.parametrize("stack", STACKS)
def test_volcano_waits_for_the_system_nodes(runs: dict[str, ProgramRun], stack: str) -> None:
    run = runs[stack]
    (system,) = run.of_type(NODE_GROUP)
    assert system.urn in _volcano(run).dependencies


@pytest.mark.parametrize("stack", STACKS)
def test_scheduler_config_gang_capacity_reclaim(runs: dict[str, ProgramRun], stack: str) -> None:
    _check_scheduler_config(_parsed_scheduler_config(_values(runs[stack])))


@pytest.mark.parametrize("stack", STACKS)
def test_priority_classes_promise_no_preemption_the_scheduler_cannot_do(
    runs: dict[str, ProgramRun], stack: str
) -> None:
    # Volcano schedules the training pods (schedulerName: volcano), so kube-scheduler's
    # preemption never acts for them: a class may only say PreemptLowerPriority if Volcano runs
    # its `preempt` action. The platform chose ordering only (evicting one worker kills a gang).
    run = runs[stack]
    preempting = [
        r.inputs["metadata"]["name"]
        for r in run.of_type(PRIORITY_CLASS)
        if r.inputs.get("preemptionPolicy", "PreemptLowerPriority") == "PreemptLowerPriority"
    ]
    actions = _actions(_parsed_scheduler_config(_values(run)))
    assert not preempting or "preempt" in actions, (
        f"priority classes {preempting} say PreemptLowerPriority but Volcano's actions {actions} "
        "have no preempt: a higher-priority job never evicts a lower one in its queue"
    )
    assert preempting == [], "the platform's classes order jobs and never evict"


@pytest.mark.parametrize("stack", STACKS)
def test_volcano_pods_run_on_the_system_nodes(runs: dict[str, ProgramRun], stack: str) -> None:
    run = runs[stack]
    custom = _values(run)["custom"]
    (system,) = run.of_type(NODE_GROUP)
    selector = custom["default_ns"]
    assert selector, "the controllers must be pinned to the system nodes"
    labels = system.inputs["labels"]
    assert all(labels.get(key) == value for key, value in selector.items()), (selector, labels)
    tolerations = custom["default_tolerations"]
    assert any(
        t["key"] == CRITICAL_ADDONS_TAINT and t["operator"] == "Exists" for t in tolerations
    ), tolerations
    # and every taint of the system nodes is tolerated
    for taint in system.inputs["taints"]:
        effect = TAINT_EFFECTS[taint["effect"]]
        assert any(
            t["key"] == taint["key"]
            and (
                t["operator"] == "Exists"
                or (t["operator"] == "Equal" and t.get("value") == taint.get("value"))
            )
            and t.get("effect") in (None, "", effect)
            for t in tolerations
        ), (taint, tolerations)


@pytest.mark.parametrize("stack", STACKS)
def test_every_volcano_value_is_defined_by_the_chart(
    runs: dict[str, ProgramRun], stack: str, reference_dir: Path
) -> None:
    defaults = _chart_defaults(reference_dir)
    values = _values(runs[stack])
    assert "custom" in values
    assert _unknown_keys(values, defaults) == []


def test_chart_defaults_are_the_pinned_version(reference_dir: Path) -> None:
    chart = load_yaml((reference_dir / CHART_VALUES).with_name("Chart.yaml").read_text())
    assert chart["name"] == "volcano"
    assert str(chart["version"]) == VOLCANO_VERSION
    # the walker above can fail: a key the chart does not define is reported
    defaults = _chart_defaults(reference_dir)
    assert _unknown_keys({"custom": {"scheduler_conf": "x"}, "schedulr": {}}, defaults) == [
        "schedulr",
        "custom.scheduler_conf",
    ]


# --------------------------------------------------------------------------- priority classes


@pytest.mark.parametrize("stack", STACKS)
def test_three_priority_classes_distinct_none_default(
    runs: dict[str, ProgramRun], stack: str
) -> None:
    run = runs[stack]
    classes = run.of_type(PRIORITY_CLASS)
    assert len(classes) == 3, [c.name for c in classes]
    values = [c.inputs["value"] for c in classes]
    assert len(set(values)) == 3, values
    assert all(isinstance(v, int) and 0 <= v <= MAX_USER_PRIORITY for v in values), values
    names = [c.inputs["metadata"]["name"] for c in classes]
    assert len(set(names)) == 3, names
    assert not any(name.startswith("system-") for name in names), names
    for priority_class in classes:
        assert priority_class.inputs.get("globalDefault", False) is False, priority_class.name
        assert priority_class.inputs.get("description"), priority_class.name
        assert priority_class.parent == run.one(SCHEDULING).urn


@pytest.mark.parametrize("stack", STACKS)
def test_priority_classes_pass_the_kubernetes_schema(
    runs: dict[str, ProgramRun], stack: str, reference_dir: Path
) -> None:
    for priority_class in runs[stack].of_type(PRIORITY_CLASS):
        manifest = _manifest(priority_class)
        assert validation_errors(manifest, _version(stack), reference_dir / "crds") == []


# --------------------------------------------------------------------------- queues


@pytest.mark.parametrize("stack", STACKS)
def test_one_queue_per_team(runs: dict[str, ProgramRun], stack: str) -> None:
    run = runs[stack]
    names = sorted(q.inputs["metadata"]["name"] for q in team_queues(run.records))
    assert names == sorted(team["name"] for team in raw_teams(stack))
    assert not set(names) & set(SYSTEM_QUEUES), names


@pytest.mark.parametrize(("stack", "team"), TEAM_CASES)
def test_queue_after_volcano_with_the_configured_shares(
    runs: dict[str, ProgramRun], stack: str, team: str
) -> None:
    run = runs[stack]
    queue = _queue(run, team)
    assert queue.inputs["apiVersion"] == QUEUE_API
    assert queue.inputs["kind"] == "Queue"
    assert "namespace" not in queue.inputs["metadata"], "queues are cluster-scoped"
    assert _volcano(run).urn in queue.dependencies, "the queue CRD and webhook come with Volcano"
    assert queue.parent == run.one(SCHEDULING).urn
    spec = queue.inputs["spec"]
    # set explicitly: the mutating webhook would fill them in and the next update would diff
    assert "weight" in spec and "reclaimable" in spec, spec
    (raw,) = [t for t in raw_teams(stack) if t["name"] == team]
    assert _as_config(spec) == expected_queue(raw)
    # flat: every team queue sits directly under root (what Volcano's controller would set)
    assert spec["parent"] == "root"


@pytest.mark.parametrize(("stack", "team"), TEAM_CASES)
def test_queue_guarantee_within_deserved_within_capability(
    runs: dict[str, ProgramRun], stack: str, team: str
) -> None:
    shares = _shares(_queue(runs[stack], team).inputs["spec"])
    for name in ACCELERATORS:
        assert (
            shares["guarantee"][name] <= shares["deserved"][name] <= shares["capability"][name]
        ), (name, shares)


@pytest.mark.parametrize(("stack", "team"), TEAM_CASES)
def test_queue_passes_the_volcano_crd_schema(
    runs: dict[str, ProgramRun], stack: str, team: str, reference_dir: Path
) -> None:
    manifest = _manifest(_queue(runs[stack], team))
    assert validation_errors(manifest, _version(stack), reference_dir / "crds") == []


@pytest.mark.parametrize("stack", STACKS)
def test_queue_shares_fit_the_pools(runs: dict[str, ProgramRun], stack: str) -> None:
    capacity = pool_capacity(parse_platform_config(stack_data(stack))).resources()
    queues = [_shares(q.inputs["spec"]) for q in runs[stack].of_type(QUEUE)]
    assert queues
    for share in ("guarantee", "deserved"):
        for name in ACCELERATORS:
            total = sum(queue[share][name] for queue in queues)
            assert total <= capacity[name], (share, name, total, capacity)


def test_queue_of_a_team_without_queue_settings_uses_the_defaults(
    run_component: RunComponent,
) -> None:
    data = stack_data("dev")
    data["teams"].append(
        {"name": "ml-minimal", "gid": 5999, "quota": {"gpus": 1, "efaInterfaces": 2}}
    )
    data["teams"][0]["queue"]["deserved"]["gpus"] = 1  # leave room in dev's two GPUs
    run = run_component(parts.scheduling, data, "dev")
    spec = _queue(run, "ml-minimal").inputs["spec"]
    assert _as_config(spec) == {
        "weight": 1,
        "reclaimable": True,
        "capability": {GPU: 1, NEURON: 0},
        "deserved": {GPU: 0, NEURON: 0},
        "guarantee": {GPU: 0, NEURON: 0},
    }
    assert _volcano(run).urn in _queue(run, "ml-minimal").dependencies


def test_no_teams_no_queues_but_volcano_and_classes(
    run_component: RunComponent,
) -> None:
    data = stack_data("dev")
    without_teams(data)
    run = run_component(parts.scheduling, data, "dev")
    assert run.of_type(QUEUE) == []
    _volcano(run)
    assert len(run.of_type(PRIORITY_CLASS)) == 3


@pytest.mark.parametrize("name", SYSTEM_QUEUES)
def test_a_team_cannot_take_a_system_queue_name(name: str) -> None:
    # Volcano's own queues: root (the capacity plugin's hierarchy) and default. A team's queue is named after the
    # team, so a team so named would fight Volcano over its own queue.
    data = stack_data("dev")
    data["teams"][0]["name"] = name
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data)
    assert "platform.teams[0].name" in [p.path for p in caught.value.problems]


# --------------------------------------------------------------------------- pure builders


def test_scheduler_config_builder() -> None:
    _check_scheduler_config(scheduler_config())


def test_volcano_values_builder_carries_the_scheduler_config() -> None:
    values = volcano_values()
    assert _parsed_scheduler_config(values) == scheduler_config()
    custom = values["custom"]
    assert custom["default_ns"], "controllers pinned to labelled nodes"
    assert {"key": CRITICAL_ADDONS_TAINT, "operator": "Exists"} in custom["default_tolerations"]


def test_volcano_values_builder_keys_exist_in_the_chart(reference_dir: Path) -> None:
    assert _unknown_keys(volcano_values(), _chart_defaults(reference_dir)) == []


def _team(**fields: Any) -> TeamConfig:
    data: dict[str, Any] = {"name": "team-a", "quota": {"gpus": 16, "neuronDevices": 32}}
    data.update(fields)
    return TeamConfig.model_validate(data)


def test_queue_spec_defaults() -> None:
    spec = queue_spec(_team())
    assert spec["weight"] == 1
    assert spec["reclaimable"] is True
    # Volcano's queue controller writes parent root onto a queue without one; say it first.
    assert spec["parent"] == "root"
    assert _shares(spec) == {
        "capability": {GPU: 16, NEURON: 32},
        "deserved": {GPU: 0, NEURON: 0},
        "guarantee": {GPU: 0, NEURON: 0},
    }


def test_queue_spec_from_queue_settings() -> None:
    spec = queue_spec(
        _team(
            queue={
                "weight": 7,
                "reclaimable": False,
                "guarantee": {"gpus": 4},
                "deserved": {"gpus": 8},
                "capability": {"gpus": 12},
            }
        )
    )
    assert spec["weight"] == 7
    assert spec["reclaimable"] is False
    assert _shares(spec) == {
        # an explicit capability replaces the quota; a kind it leaves out is capped at 0
        "capability": {GPU: 12, NEURON: 0},
        "deserved": {GPU: 8, NEURON: 0},
        "guarantee": {GPU: 4, NEURON: 0},
    }
    # the quota's EFA interfaces are a namespace limit, not a queue share
    assert "vpc.amazonaws.com/efa" not in str(spec)


def test_queue_spec_passes_the_volcano_crd_schema(reference_dir: Path) -> None:
    for team in (_team(), _team(queue={"weight": 65535, "deserved": {"gpus": 16}})):
        manifest = {
            "apiVersion": QUEUE_API,
            "kind": "Queue",
            "metadata": {"name": team.name},
            "spec": queue_spec(team),
        }
        assert validation_errors(manifest, "1.34", reference_dir / "crds") == []
