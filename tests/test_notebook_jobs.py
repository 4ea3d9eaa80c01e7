"""``synth jobs`` proves the notebook paths (issue 43, item 5).

Each team's profiles, as the hub's values hold them: can a user's server start, on which pool,
and how many the quota and queue hold. Each refusal is reproduced by changing one thing of the
synthesized dev view.
"""

from __future__ import annotations

import copy

from components.config.pools import GENERAL_LUSTRE_POOL, GENERAL_POOL
from components.notebooks import RELEASE, SPAWNER_ROLE, pool_profiles
from synth.jobs.model import PathReport, Stack, notebook_paths
from synth.jobs.report import table
from synth.jobs.view import StackView, name_of
from synth.run import StackResult

TEAM = "ml-dev"


def _view(result: StackResult) -> StackView:
    view = StackView.from_records(result.records)
    return StackView(copy.deepcopy(view.objects), copy.deepcopy(view.releases), view.kustomizations)


def _rows(view: StackView) -> dict[str, PathReport]:
    return {r.runtime: r for r in notebook_paths(Stack(view), TEAM, TEAM)}


def test_dev_offers_a_runnable_notebook_row_per_profile(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["dev"]
    config = result.config
    (team,) = [t for t in config.teams if t.name == TEAM]
    profiles = pool_profiles(config.node_pools, config.notebooks, team)
    rows = {r.runtime: r for r in result.jobs if r.kind == "notebook" and r.team == TEAM}
    assert set(rows) == {p.slug for p in profiles}
    for profile in profiles:
        report = rows[profile.slug]
        assert report.runnable and report.max_nodes == 1, report
        assert report.namespace == TEAM
        if profile.pool is None:
            assert report.pool in (GENERAL_POOL, GENERAL_LUSTRE_POOL)
            assert any("does not size" in reason for reason in report.reasons), report.reasons
        else:
            assert report.pool == profile.pool.name
            assert any("such server(s) at once" in r for r in report.reasons), report.reasons
    assert f"notebook:{TEAM}-cpu" in table("dev", result.jobs)


def _gpu_row(view: StackView) -> PathReport:
    (gpu,) = [r for slug, r in _rows(view).items() if not slug.endswith("-cpu")]
    return gpu


def _refused(report: PathReport, words: str) -> None:
    assert not report.runnable and report.max_nodes == 0, report
    assert any(words in reason for reason in report.reasons), report.reasons


def test_a_quota_of_no_gpus_refuses_the_gpu_server(synthesized: dict[str, StackResult]) -> None:
    view = _view(synthesized["dev"])
    assert _gpu_row(view).runnable
    for quota in view.of_kind("ResourceQuota", TEAM):
        hard = quota["spec"]["hard"]
        for key in [k for k in hard if k.endswith("nvidia.com/gpu")]:
            hard[key] = "0"
    _refused(_gpu_row(view), f"in {TEAM} allows nvidia.com/gpu 0")
    assert _rows(view)[f"{TEAM}-cpu"].runnable
    # nor does a request of 0 GPUs count, although the standing Ray cluster holds more GPUs
    # than the quota now allows: admission drops the zeros of a pod's usage (CheckRequest)
    assert any(g.namespace == TEAM for g in Stack(view).standing)
    for entry in view.releases[RELEASE]["values"]["custom"]["teamProfiles"]:
        for profile in entry["profiles"]:
            if profile["slug"] == f"{TEAM}-cpu":
                profile["kubespawner_override"]["extra_resource_guarantees"]["nvidia.com/gpu"] = "0"
    assert _rows(view)[f"{TEAM}-cpu"].runnable


def test_a_pool_without_room_refuses_the_gpu_server(synthesized: dict[str, StackResult]) -> None:
    view = _view(synthesized["dev"])
    pool = _gpu_row(view).pool
    (node_pool,) = [p for p in view.of_kind("NodePool") if name_of(p) == pool]
    node_pool["spec"]["limits"]["nodes"] = 0
    _refused(_gpu_row(view), f"NodePool {pool} allows 0 nodes")


def test_without_the_hubs_role_no_server_starts(synthesized: dict[str, StackResult]) -> None:
    view = _view(synthesized["dev"])
    assert view.values(RELEASE) is not None
    removed = [o for o in view.objects if o.get("kind") == "Role" and name_of(o) == SPAWNER_ROLE]
    assert removed
    view.objects[:] = [o for o in view.objects if not any(o is r for r in removed)]
    rows = _rows(view)
    assert rows
    for report in rows.values():
        _refused(report, f"the hub's ServiceAccount may not create pods in {TEAM} (403)")


def test_a_profile_the_tenant_pods_policy_refuses_never_starts(
    synthesized: dict[str, StackResult],
) -> None:
    """The hub's values are what it spawns: a profile tolerating every taint is refused by the
    tenant-pods policy's CEL, as the API server would refuse KubeSpawner's pod."""
    view = _view(synthesized["dev"])
    values = view.releases[RELEASE]["values"]
    (entry,) = [e for e in values["custom"]["teamProfiles"] if e["team"] == TEAM]
    (gpu,) = [p for p in entry["profiles"] if not p["slug"].endswith("-cpu")]
    gpu["kubespawner_override"]["tolerations"].append({"operator": "Exists"})
    _refused(_gpu_row(view), "admission policy trainingplatform-tenant-pods: toleration")


def test_a_memory_or_start_timeout_the_hub_refuses_stops_the_server(
    synthesized: dict[str, StackResult],
) -> None:
    """JupyterHub refuses a Kubernetes quantity as mem_limit, and gives up on a start shorter
    than a fresh node's launch and pull: neither path is runnable."""
    view = _view(synthesized["dev"])
    slug = f"{TEAM}-cpu"
    assert _rows(view)[slug].runnable
    values = view.releases[RELEASE]["values"]
    (entry,) = [e for e in values["custom"]["teamProfiles"] if e["team"] == TEAM]
    (profile,) = [p for p in entry["profiles"] if p["slug"] == slug]
    override = profile["kubespawner_override"]
    memory = override["mem_limit"]
    override["mem_limit"] = memory + "i"
    _refused(_rows(view)[slug], f"mem_limit '{memory}i' is not a memory JupyterHub takes")
    override["mem_limit"] = memory
    # Without the profile's or the values' timeout, the chart's 300 s holds.
    del override["start_timeout"]
    assert _rows(view)[slug].runnable
    del values["singleuser"]["startTimeout"]
    _refused(_rows(view)[slug], "the hub gives the server 300 s to start")
