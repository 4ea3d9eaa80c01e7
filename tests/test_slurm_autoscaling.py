"""Slurm node sets grow with pending work and shrink when idle (issue 21, point 1).

KEDA scales each NodeSet through its scale subresource from slurmctld's own metrics, scraped
by a minimal Prometheus; Karpenter then launches the nodes, within the node set's share of
the pool (its ``-slurm`` NodePool), which is what the teams' capacity leaves to Slurm.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

import lupa.lua53
import pytest

from components.config import parse_platform_config
from components.metric_names import MONITORING_NAMESPACE, PROMETHEUS_PORT, PROMETHEUS_URL
from components.slurm import SLURMCTLD_PORT
from components.slurm.autoscaling import demand_query
from components.slurm.sharing import parse_partition_line, slurm_minutes
from synth.run import StackResult
from tests import component_runs as parts
from tests import docs_pages
from tests.config_problems import assert_reported, problems_of
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data
from tests.kubernetes_semantics import quantity

NODE_SET: Final = "kubernetes:slinky.slurm.net/v1beta1:NodeSet"
SCALED_OBJECT: Final = "kubernetes:keda.sh/v1alpha1:ScaledObject"
NODE_POOL: Final = "kubernetes:karpenter.sh/v1:NodePool"
RELEASE: Final = "kubernetes:helm.sh/v3:Release"
NETWORK_POLICY: Final = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def _of(result: StackResult | ProgramRun, resource_type: str) -> list[Any]:
    return [r for r in result.records if r.type == resource_type]


def _named(records: list[Any], name: str) -> Any:
    (record,) = [r for r in records if r.inputs["metadata"]["name"] == name]
    return record


def _release(result: StackResult | ProgramRun, name: str) -> Any:
    (record,) = [r for r in _of(result, RELEASE) if r.inputs["name"] == name]
    return record


@pytest.mark.parametrize("stack", STACKS)
def test_every_node_set_has_a_scaler_bounded_by_its_share_of_the_pool(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    raw = stack_data(stack)
    scalers = _of(result, SCALED_OBJECT)
    assert len(scalers) == len(raw["slurm"]["nodeSets"])
    for node_set in raw["slurm"]["nodeSets"]:
        pool = node_set["pool"]
        scaler = _named(scalers, pool)
        spec = scaler.inputs["spec"]
        target = _named(_of(result, NODE_SET), pool)
        assert spec["scaleTargetRef"] == {
            "apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "name": pool,
        }  # fmt: skip
        assert scaler.inputs["metadata"]["namespace"] == target.inputs["metadata"]["namespace"]
        # never more slurmd pods than Slurm's NodePool may have nodes: the teams keep the rest
        slurm_pool = _named(_of(result, NODE_POOL), f"{pool}-slurm")
        assert spec["maxReplicaCount"] == node_set.get("maxNodes", 1)
        assert spec["maxReplicaCount"] == slurm_pool.inputs["spec"]["limits"]["nodes"]
        assert target.urn in scaler.dependencies


def test_an_idle_node_set_gives_its_nodes_back_unless_it_keeps_warm_ones(
    run_component: RunComponent,
) -> None:
    data = stack_data("prod")
    run = run_component(parts.slurm, data, "prod")
    cold = _named(_of(run, SCALED_OBJECT), "p5en").inputs["spec"]
    assert cold["idleReplicaCount"] == 0 and cold["minReplicaCount"] == 1
    (index,) = [i for i, s in enumerate(data["slurm"]["nodeSets"]) if s["pool"] == "p5en"]
    data["slurm"]["nodeSets"][index]["warmNodes"] = 2
    warm_run = run_component(parts.slurm, data, "prod")
    warm = _named(_of(warm_run, SCALED_OBJECT), "p5en").inputs["spec"]
    assert "idleReplicaCount" not in warm and warm["minReplicaCount"] == 2
    # the NodeSet starts at its floor; KEDA owns the count from then on
    node_set = _named(_of(warm_run, NODE_SET), "p5en")
    assert node_set.inputs["spec"]["replicas"] == 2
    assert "spec.replicas" in node_set.ignore_changes


def _hpa_replicas(metric_type: str, value: float, threshold: float, current: int) -> int:
    """What the HPA asks for from one external metric (kubernetes pkg/controller/podautoscaler
    replica_calculator.go: AverageValue divides the metric by the target per pod; Value scales
    the current replicas by metric/target)."""
    if metric_type == "AverageValue":
        return math.ceil(value / threshold)
    return math.ceil(current * value / threshold)


def test_a_four_node_job_asks_for_four_nodes_at_once(synthesized: dict[str, StackResult]) -> None:
    """The trigger's value is the partition's demand in nodes, and AverageValue with threshold
    1 makes it the replica count; Value would only scale what runs (one node stays one)."""
    scaler = _named(_of(synthesized["prod"], SCALED_OBJECT), "p5en")
    (trigger,) = scaler.inputs["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    threshold = float(trigger["metadata"]["threshold"])
    # whatever runs now, the HPA asks for the demand: busy nodes plus the pending job's
    for current, busy in ((1, 0), (2, 2), (3, 1)):
        demand = busy + 4
        assert _hpa_replicas(trigger["metricType"], demand, threshold, current) == demand


def test_the_demand_is_busy_nodes_plus_the_largest_pending_job(
    synthesized: dict[str, StackResult],
) -> None:
    scaler = _named(_of(synthesized["prod"], SCALED_OBJECT), "p5en")
    (trigger,) = scaler.inputs["spec"]["triggers"]
    query = trigger["metadata"]["query"]
    assert query == demand_query("p5en")
    for metric in (
        "slurm_partition_nodes_alloc",
        "slurm_partition_nodes_mixed",
        "slurm_partition_jobs_min_job_nodes_nohold",
    ):
        assert f'{metric}{{partition="p5en"}}' in query
    # missing data is an error, on which KEDA keeps the replicas, never a demand of 0
    assert "vector(0)" not in query
    assert trigger["metadata"]["ignoreNullValues"] == "false"
    fallback = scaler.inputs["spec"]["fallback"]
    assert fallback["behavior"] == "currentReplicas" and fallback["failureThreshold"] >= 1
    # a job pending for one scheduling pass adds no node
    assert "min_over_time(slurm_partition_jobs_min_job_nodes_nohold" in query
    assert trigger["metadata"]["serverAddress"] == PROMETHEUS_URL
    assert PROMETHEUS_URL.endswith(f".{MONITORING_NAMESPACE}.svc:{PROMETHEUS_PORT}")


def test_slurmctld_serves_metrics_that_prometheus_may_scrape(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["prod"]
    values = _release(result, "slurm").inputs["values"]
    assert values["controller"]["metrics"] == {"enabled": True, "serviceMonitor": {"enabled": True}}
    # the operator makes the ServiceMonitor: its CRD (monitoring) must exist first
    monitoring = _release(result, "monitoring")
    assert monitoring.urn in _release(result, "slurm").dependencies
    prometheus = monitoring.inputs["values"]["prometheus"]["prometheusSpec"]
    assert prometheus["serviceMonitorSelectorNilUsesHelmValues"] is False
    policy = _named(_of(result, NETWORK_POLICY), "allow-slurmctld").inputs["spec"]
    admitted = [
        rule for rule in policy["ingress"]
        if any(
            peer.get("namespaceSelector", {}).get("matchLabels", {}).get(
                "kubernetes.io/metadata.name"
            ) == MONITORING_NAMESPACE
            for peer in rule["from"]
        )
    ]  # fmt: skip
    assert [rule["ports"] for rule in admitted] == [[{"protocol": "TCP", "port": SLURMCTLD_PORT}]]


def test_keda_waits_for_the_fleets_prometheus(synthesized: dict[str, StackResult]) -> None:
    """The monitoring release is the metrics stack's now (components/observability): Slurm's
    autoscaling installs KEDA only, after it, and its ScaledObjects wait for both."""
    result = synthesized["prod"]
    monitoring = _release(result, "monitoring")
    assert "trainingplatform:index:Observability$" in monitoring.urn
    assert "trainingplatform:index:Autoscaling$" not in monitoring.urn
    keda = _release(result, "keda")
    assert keda.inputs["namespace"] == "keda"
    assert monitoring.urn in keda.dependencies
    for scaler in _of(result, SCALED_OBJECT):
        assert {monitoring.urn, keda.urn} <= set(scaler.dependencies)


def test_a_stack_file_with_replicas_is_told_what_replaced_them() -> None:
    data = stack_data("dev")
    data["slurm"]["nodeSets"][0]["replicas"] = 1
    problems = problems_of(data)
    assert any("replaced by maxNodes" in p.allowed for p in problems), [str(p) for p in problems]


def test_node_sets_cannot_outgrow_slurms_node_count() -> None:
    data = stack_data("prod")
    for node_set in data["slurm"]["nodeSets"]:
        node_set["maxNodes"] = 400
    assert_reported(data, "platform.slurm.nodeSets", "1200 nodes", "at most 1024")


def test_the_default_partition_may_be_a_pool_with_a_hyphen() -> None:
    data = stack_data("dev")
    data["slurm"]["defaultPartition"] = "gpu-small"
    assert parse_platform_config(data).slurm.default_partition_pool == "gpu-small"


def test_warm_nodes_cannot_exceed_the_share() -> None:
    data = stack_data("dev")
    data["slurm"]["nodeSets"][0].update(maxNodes=1, warmNodes=2)
    assert_reported(data, "platform.slurm.nodeSets[0].warmNodes", 2, "at most the node set's")
    data["slurm"]["nodeSets"][0]["warmNodes"] = 1
    assert parse_platform_config(data).slurm.node_sets[0].warm_nodes == 1


NO_VAL: Final = 0xFFFFFFFE
"""Slurm's NO_VAL (slurm.h), which a job that names no node count carries."""


def _job_submit(result: StackResult) -> Any:
    """The stack's job_submit.lua loaded in Lua 5.3 with the ``slurm`` table Slurm gives it
    (src/lua/slurm_lua.c: SUCCESS, ERROR, NO_VAL, log_user formatting its arguments)."""
    runtime = lupa.lua53.LuaRuntime()
    runtime.execute(
        f"""
        slurm = {{ SUCCESS = 0, ERROR = -1, NO_VAL = {NO_VAL}, messages = {{}} }}
        function slurm.log_user(format, ...)
          table.insert(slurm.messages, string.format(format, ...))
        end
        """
    )
    script = _release(result, "slurm").inputs["values"]["configFiles"]["job_submit.lua"]
    runtime.execute(script)
    return runtime


def _submit(runtime: Any, **job: Any) -> tuple[int, list[str]]:
    runtime.execute("slurm.messages = {}")
    desc = runtime.table_from(job)
    rc = runtime.globals().slurm_job_submit(desc, None, 1000)
    return int(rc), list(runtime.globals().slurm.messages.values())


def test_a_job_no_node_set_can_hold_is_refused_at_submission(
    synthesized: dict[str, StackResult],
) -> None:
    runtime = _job_submit(synthesized["prod"])
    raw = stack_data("prod")
    shares = {s["pool"]: s.get("maxNodes", 1) for s in raw["slurm"]["nodeSets"]}
    for partition, most in shares.items():
        assert _submit(runtime, partition=partition, min_nodes=most) == (0, [])
        rc, messages = _submit(runtime, partition=partition, min_nodes=most + 1)
        assert rc == -1
        assert messages == [
            f"partition {partition} grows to at most {most} nodes; the job asks for {most + 1}"
        ]
    # a job naming no partition goes to the default one (the first node set's)
    first = raw["slurm"]["nodeSets"][0]["pool"]
    assert _submit(runtime, min_nodes=shares[first] + 1)[0] == -1
    assert _submit(runtime, min_nodes=shares[first])[0] == 0
    # a job without a node count, or to a partition the platform does not know, is Slurm's
    assert _submit(runtime, partition="p5en", min_nodes=NO_VAL)[0] == 0
    assert _submit(runtime, partition="debug", min_nodes=100)[0] == 0
    # several partitions: Slurm runs it in any that can hold it
    assert _submit(runtime, partition="p5en,p5", min_nodes=3)[0] == 0
    assert _submit(runtime, partition="p5en,p5", min_nodes=5)[0] == -1
    # scontrol update is held to the same rule
    record = runtime.table_from({"partition": "p5en"})
    modify = runtime.globals().slurm_job_modify
    assert int(modify(runtime.table_from({"min_nodes": 5}), record, None, 0)) == -1
    assert int(modify(runtime.table_from({"min_nodes": 4}), record, None, 0)) == 0


# ----------------------------------------------------------------------------- docs examples

EXAMPLE = re.compile(r"<!-- slurm-example: (\w+) -->\n```bash\n(.*?)```", re.DOTALL)
SHORT_OPTIONS: Final = {"-p": "partition", "-N": "nodes", "-n": "ntasks", "-c": "cpus-per-task",
                        "-t": "time"}  # fmt: skip
MEMORY_UNITS: Final = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def _options(words: list[str]) -> dict[str, str]:
    """``--key=value``, ``--key value`` and ``-p value`` of an sbatch or srun line."""
    found: dict[str, str] = {}
    index = 0
    while index < len(words):
        word = words[index]
        if word.startswith("--") and "=" in word:
            key, value = word[2:].split("=", 1)
            found[key] = value
        elif word in SHORT_OPTIONS and index + 1 < len(words):
            found[SHORT_OPTIONS[word]] = words[index + 1]
            index += 1
        elif word.startswith("--") and word[2:] in ("exclusive",):
            found[word[2:]] = ""
        elif not word.startswith("-"):
            break
        index += 1
    return found


def _examples() -> list[tuple[str, dict[str, str]]]:
    """(stack, job options) of every sbatch script and srun line of the docs' examples."""
    jobs = []
    for stack, block in EXAMPLE.findall(docs_pages.all_pages()):
        sbatch = {}
        for line in block.splitlines():
            if line.startswith("#SBATCH "):
                sbatch.update(_options(line.split()[1:]))
            elif line.strip().startswith("srun ") and "$SLURM" not in line:
                jobs.append((stack, _options(line.split("#")[0].split()[1:])))
        if sbatch:
            jobs.append((stack, sbatch))
    return jobs


def test_every_slurm_example_of_the_docs_is_checked() -> None:
    text = docs_pages.all_pages()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    with_jobs = [b for b in blocks if "#SBATCH" in b or re.search(r"^srun ", b, re.MULTILINE)]
    assert len(with_jobs) == len(EXAMPLE.findall(text)) >= 2
    assert {stack for stack, _ in _examples()} <= set(STACKS)


@pytest.mark.parametrize(("stack", "job"), _examples(), ids=lambda v: str(v)[:40])
def test_every_slurm_example_names_a_partition_that_can_hold_it(
    synthesized: dict[str, StackResult], stack: str, job: dict[str, str]
) -> None:
    result = synthesized[stack]
    config = result.config
    partition = job.get("partition") or config.slurm.default_partition_pool
    node_set = _named(_of(result, NODE_SET), str(partition))
    scaler = _named(_of(result, SCALED_OBJECT), str(partition))
    conf = dict(
        word.split("=", 1) for word in node_set.inputs["spec"]["extraConf"].split() if "=" in word
    )
    limits = node_set.inputs["spec"]["slurmd"]["resources"]["limits"]
    assert int(job.get("nodes", 1)) <= scaler.inputs["spec"]["maxReplicaCount"], job
    if "gres" in job:
        name, _, count = job["gres"].partition(":")
        have, _, have_count = conf["Gres"].partition(":")
        assert name == have and int(count) <= int(have_count), (job, conf["Gres"])
    pool = config.pool(str(partition))
    assert pool is not None
    cpus = int(job.get("ntasks-per-node", 1)) * int(job.get("cpus-per-task", 1))
    assert cpus <= pool.instance.vcpu, job
    if "mem" in job:
        # jobs get the pod's memory limit (the entrypoint's MemSpecLimit keeps the rest)
        unit = job["mem"][-1]
        mib = float(job["mem"][:-1]) * MEMORY_UNITS[unit]
        assert mib <= quantity(limits["memory"]) / 2**20, (job["mem"], limits["memory"])
    # A --time over the partition's MaxTime is refused at sbatch (job_submit.lua).
    longest = slurm_minutes(
        parse_partition_line(node_set.inputs["spec"]["partition"]["config"])["MaxTime"]
    )
    assert longest is not None
    if "time" in job:
        asked = slurm_minutes(job["time"])
        assert asked is not None and asked <= longest, (job["time"], longest)
    else:
        assert int(job.get("nodes", 1)) == 1, f"a multi-node example gives --time: {job}"
