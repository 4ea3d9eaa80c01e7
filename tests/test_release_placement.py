"""Every controller of every Helm release lands on a node that exists at install time.

Before Karpenter launches anything, the only nodes are the system node group's, tainted
``CriticalAddonsOnly``; an atomic release whose Deployment or hook Job cannot land there waits
for a node that never comes and fails the first ``up`` after 300 s. The placement keys of each
chart are found in its default ``values.yaml`` (reference data) and its subcharts in its
``Chart.yaml``, so a chart bump that adds a component fails here until the table in
``components/helm.py`` says where it runs. Where a release puts each controller is read from
the synthesized values merged over the chart's defaults the way Helm merges them (maps merged,
lists and scalars replaced), and the system nodes' labels and taints from the synthesized
system node group, not from the program's constants.
"""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components import versions
from components.helm import (
    CHART_PLACEMENT,
    ChartPlacement,
    release,
    with_system_placement,
)
from components.versions import HelmChart
from synth.engine import ResourceRecord
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.conftest import STACKS
from tests.reference_paths import chart_dir as chart_reference_dir

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
PLACEMENT_KEY = re.compile(r"nodeSelector|tolerations|\w+_ns|\w+_tolerations")
"""Keys of a chart's values that place pods: Kubernetes' own names, and Volcano's
``<component>_ns`` / ``<component>_tolerations`` (volcano v1.15.1 values.yaml ``custom``)."""
EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": ""}

CHARTS: dict[str, HelmChart] = {
    chart.chart: chart for chart in vars(versions).values() if isinstance(chart, HelmChart)
}


# -- Helm's rules, as the tests apply them ----------------------------------------------------


def helm_merge(defaults: Any, values: Any) -> Any:
    """What a chart sees: ``values`` over ``defaults``, maps merged key by key, others replaced
    (helm pkg/chartutil/coalesce.go); a null removes the default."""
    if isinstance(defaults, dict) and isinstance(values, dict):
        merged = copy.deepcopy(defaults)
        for key, value in values.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = helm_merge(defaults.get(key), value)
        return merged
    return copy.deepcopy(values)


def at(values: Any, path: tuple[str, ...] | list[str]) -> Any:
    for key in path:
        if not isinstance(values, dict) or key not in values:
            return None
        values = values[key]
    return values


def has_path(values: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(values, dict) or key not in values:
            return False
        values = values[key]
    return True


def dependency_enabled(condition: str | None, values: dict[str, Any]) -> bool:
    """Helm's dependency condition: the first of its comma-separated paths that exists decides;
    none existing leaves the dependency on (helm pkg/chartutil/dependencies.go)."""
    if not condition:
        return True
    for path in condition.split(","):
        keys = tuple(path.strip().split("."))
        if has_path(values, keys):
            return bool(at(values, keys))
    return True


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    """Kubernetes' rule (k8s.io/api core/v1 toleration.go ToleratesTaint)."""
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint["effect"]:
            continue
        if toleration.get("key") and toleration["key"] != taint["key"]:
            continue
        if not toleration.get("key") and toleration.get("operator") != "Exists":
            continue
        operator = toleration.get("operator", "Equal")
        if operator == "Exists" or toleration.get("value", "") == taint["value"]:
            return True
    return False


# -- reference data ----------------------------------------------------------------------------


@cache
def _yaml(path: Path) -> Any:
    return load_yaml(path.read_text()) or {}


def chart_dir(reference_dir: Path, chart: HelmChart) -> Path:
    directory = reference_dir / "charts" / chart_reference_dir(chart)
    assert (directory / "values.yaml").is_file(), directory
    return directory


def defaults_of(reference_dir: Path, chart: HelmChart) -> dict[str, Any]:
    found: dict[str, Any] = _yaml(chart_dir(reference_dir, chart) / "values.yaml")
    return found


def dependencies_of(reference_dir: Path, chart: HelmChart) -> list[dict[str, Any]]:
    directory = chart_dir(reference_dir, chart)
    meta = directory / "Chart.yaml"
    found: list[dict[str, Any]] = _yaml(meta).get("dependencies") or []
    return found


def placement_keys(defaults: Any, path: tuple[str, ...] = ()) -> set[tuple[tuple[str, ...], str]]:
    """(block, key) of every placement key anywhere in a chart's default values."""
    found: set[tuple[tuple[str, ...], str]] = set()
    if isinstance(defaults, dict):
        for key, value in defaults.items():
            if PLACEMENT_KEY.fullmatch(str(key)):
                found.add((path, str(key)))
            elif isinstance(value, dict):
                found |= placement_keys(value, (*path, str(key)))
    return found


def claimed_keys(placement: ChartPlacement) -> set[tuple[tuple[str, ...], str]]:
    claimed = {(c.path, k) for c in placement.system for k in (c.selector_key, c.tolerations_key)}
    claimed |= {(e.path, key) for e in placement.elsewhere for key in e.keys}
    return claimed


# -- the system nodes, from the synthesis ------------------------------------------------------


def system_nodes(result: StackResult) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Labels and taints of the system node group (the only group the stack creates)."""
    groups = [r for r in result.records if r.type == NODE_GROUP]
    assert len(groups) == 1, [g.name for g in groups]
    inputs = groups[0].inputs
    taints = [
        {"key": t["key"], "value": t.get("value", ""), "effect": EFFECTS[t["effect"]]}
        for t in inputs.get("taints", [])
    ]
    assert inputs.get("labels") and taints, inputs
    # The kubelet labels every node with its OS (k8s.io/api core/v1 well_known_labels.go,
    # kubernetes.io/os); the group's AMI type says which.
    assert inputs["amiType"].startswith("AL2023_"), inputs["amiType"]
    return {"kubernetes.io/os": "linux", **inputs["labels"]}, taints


def releases(result: StackResult) -> list[ResourceRecord]:
    found = [r for r in result.records if r.type == HELM_RELEASE]
    assert found
    return found


def chart_of(record: ResourceRecord) -> HelmChart:
    assert record.inputs["chart"] in CHARTS, record.inputs["chart"]
    return CHARTS[record.inputs["chart"]]


def placement_problems(
    chart: HelmChart,
    values: dict[str, Any],
    reference_dir: Path,
    labels: dict[str, str],
    taints: list[dict[str, str]],
    prefix: str = "",
) -> list[str]:
    """Where the chart (and each subchart Helm installs) would put a pod off the system nodes.

    Args:
        chart: the chart.
        values: what the chart sees (defaults merged with the release's values).
        reference_dir: the reference data.
        labels: the system nodes' labels.
        taints: the system nodes' taints.
        prefix: dotted key of a subchart's values in its parent (for the report).
    """
    placement = CHART_PLACEMENT.get(chart.chart)
    if placement is None:
        return [f"{prefix}{chart.chart}: no entry in CHART_PLACEMENT"]
    problems: list[str] = []
    for controller in placement.system:
        block = at(values, controller.path) or {}
        where = prefix + (".".join(controller.path) or "<top level>")
        selector = block.get(controller.selector_key) or {}
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            problems.append(
                f"{where}.{controller.selector_key} = {selector} ({controller.renders})"
            )
        tolerations = block.get(controller.tolerations_key) or []
        for taint in taints:
            if not tolerates(tolerations, taint):
                problems.append(f"{where}.{controller.tolerations_key} misses {taint['key']}")
    for entry in placement.elsewhere:
        if entry.unless is not None and at(values, entry.unless):
            problems.append(f"{prefix}{'.'.join(entry.unless)} is on: {entry.why}")
        if entry.must_be_empty:
            block = at(values, entry.path) or {}
            problems.extend(
                f"{prefix}{'.'.join((*entry.path, key))} is set"
                for key in entry.keys
                if block.get(key)
            )
    named = {subchart.name: subchart for subchart in placement.subcharts}
    for dependency in dependencies_of(reference_dir, chart):
        key = dependency.get("alias") or dependency["name"]
        if not dependency_enabled(dependency.get("condition"), values):
            continue
        if key not in named:
            problems.append(f"{prefix}{key}: subchart installed, not in CHART_PLACEMENT")
            continue
        sub = named[key].chart
        for controller in named[key].placed:
            # A subchart with no pin of its own: its blocks are checked here, under its key.
            block = at(values.get(key) or {}, controller.path) or {}
            where = f"{prefix}{key}." + (".".join(controller.path) or "<top level>")
            selector = block.get(controller.selector_key) or {}
            if not selector or any(labels.get(k) != v for k, v in selector.items()):
                problems.append(f"{where}.{controller.selector_key} = {selector}")
            tolerations = block.get(controller.tolerations_key) or []
            problems.extend(
                f"{where}.{controller.tolerations_key} misses {taint['key']}"
                for taint in taints
                if not tolerates(tolerations, taint)
            )
        if sub is not None:
            sub_values = helm_merge(defaults_of(reference_dir, sub), values.get(key) or {})
            problems.extend(
                placement_problems(sub, sub_values, reference_dir, labels, taints, f"{key}.")
            )
    return problems


# -- the tables against the charts --------------------------------------------------------------


@pytest.mark.parametrize("reference", sorted(CHART_PLACEMENT))
def test_every_placement_key_of_the_chart_is_accounted_for(
    reference: str, reference_dir: Path
) -> None:
    chart = CHARTS[reference]
    defaults = defaults_of(reference_dir, chart)
    placement = CHART_PLACEMENT[reference]
    found, claimed = placement_keys(defaults), claimed_keys(placement)
    assert found - claimed == set(), f"{reference}: placement keys with no entry"
    for block, key in claimed:
        assert has_path(defaults, (*block, key)), f"{reference}: {'.'.join((*block, key))}"
    for entry in placement.elsewhere:
        if entry.unless is not None:
            assert has_path(defaults, entry.unless), entry.unless
    names = {d.get("alias") or d["name"] for d in dependencies_of(reference_dir, chart)}
    assert {s.name for s in placement.subcharts} <= names, reference


def test_every_chart_of_the_bill_of_materials_has_a_placement_table() -> None:
    assert set(CHARTS) == set(CHART_PLACEMENT)


def test_the_key_finder_sees_every_shape() -> None:
    defaults = {
        "nodeSelector": {},
        "webhook": {"tolerations": [], "replicas": 1},
        "custom": {"default_ns": None, "admission_tolerations": None, "enabled": True},
        "image": {"repository": "x"},
    }
    assert placement_keys(defaults) == {
        ((), "nodeSelector"),
        (("webhook",), "tolerations"),
        (("custom",), "default_ns"),
        (("custom",), "admission_tolerations"),
    }


@pytest.mark.parametrize(
    ("condition", "values", "enabled"),
    [
        (None, {}, True),
        ("jobset.install", {"jobset": {"install": False}}, False),
        ("jobset.install", {"jobset": {"install": True}}, True),
        ("nfd.enabled,gfd.enabled", {"gfd": {"enabled": False}}, False),
        ("nfd.enabled,gfd.enabled", {"nfd": {"enabled": True}, "gfd": {"enabled": False}}, True),
        ("missing.key", {}, True),
    ],
)
def test_dependency_conditions_follow_helm(
    condition: str | None, values: dict[str, Any], enabled: bool
) -> None:
    assert dependency_enabled(condition, values) is enabled


def test_helm_merge_merges_maps_and_replaces_lists() -> None:
    defaults = {"a": {"b": 1, "c": [1]}, "d": 2}
    assert helm_merge(defaults, {"a": {"c": [2]}, "d": None}) == {"a": {"b": 1, "c": [2]}}


# -- the releases --------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_controller_of_every_release_runs_on_the_system_nodes(
    stack: str, synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    labels, taints = system_nodes(synthesized[stack])
    problems: list[str] = []
    for record in releases(synthesized[stack]):
        chart = chart_of(record)
        values = helm_merge(defaults_of(reference_dir, chart), record.inputs.get("values", {}))
        problems.extend(
            f"{record.name}: {problem}"
            for problem in placement_problems(chart, values, reference_dir, labels, taints)
        )
    assert problems == []


def test_the_old_trainer_values_are_refused(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """Trainer bundling JobSet with the subchart's defaults leaves JobSet's controller off the
    system nodes (kubernetes-sigs/jobset v0.12.0 charts/jobset/values.yaml: no tolerations)."""
    labels, taints = system_nodes(synthesized["dev"])
    trainer = next(r for r in releases(synthesized["dev"]) if r.name == "kubeflow-trainer")
    ours = copy.deepcopy(trainer.inputs["values"])
    ours["jobset"] = {"install": True}
    values = helm_merge(defaults_of(reference_dir, versions.TRAINER_CHART), ours)
    problems = placement_problems(versions.TRAINER_CHART, values, reference_dir, labels, taints)
    assert problems and all(p.startswith("jobset.controller.") for p in problems), problems


# -- the builder and the guard -------------------------------------------------------------------


def test_the_builder_places_every_block_and_keeps_what_was_set() -> None:
    values = {"webhook": {"tolerations": [{"key": "x", "operator": "Exists"}], "replicas": 2}}
    placed = with_system_placement(versions.CERT_MANAGER_CHART, values)
    assert values == {
        "webhook": {"tolerations": [{"key": "x", "operator": "Exists"}], "replicas": 2}
    }
    for block in ((), ("webhook",), ("cainjector",), ("startupapicheck",)):
        here = at(placed, block)
        assert here["nodeSelector"] and here["tolerations"], block
    assert placed["webhook"]["replicas"] == 2
    assert {"key": "x", "operator": "Exists"} in placed["webhook"]["tolerations"]
    assert with_system_placement(versions.CERT_MANAGER_CHART, placed) == placed


def test_the_builder_uses_the_charts_own_key_names() -> None:
    placed = with_system_placement(versions.VOLCANO_CHART, {})
    assert set(placed["custom"]) == {"default_ns", "default_tolerations"}


def test_a_release_without_system_placement_is_refused() -> None:
    with pytest.raises(ValueError, match=r"manager\.nodeSelector"):
        release(
            "kubeflow-trainer",
            versions.TRAINER_CHART,
            namespace="kubeflow-system",
            values={"crds": {"enabled": True}},
            opts=pulumi.ResourceOptions(),
        )


def test_a_chart_without_a_placement_table_is_refused() -> None:
    unknown = HelmChart("oci://example.com/charts/unknown", "1.0.0", None)
    with pytest.raises(ValueError, match="CHART_PLACEMENT"):
        release("unknown", unknown, namespace="x", values={}, opts=pulumi.ResourceOptions())
