"""The cold-start ledger's inputs: kube-state-metrics' config, and each pod's first step."""

from __future__ import annotations

import copy
import re
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from components import first_step, kuberay, trainer
from components.catalog import CATALOG
from components.config import PlatformConfig
from components.metric_names import (
    FIRST_STEP_METRIC,
    FIRST_STEP_PORT,
    MONITORING_NAMESPACE,
    NODECLAIM_CONDITION_METRIC,
    PODGROUP_CREATED_METRIC,
    PODGROUP_MIN_MEMBER_METRIC,
    PODGROUP_MIN_RESOURCES_METRIC,
    PODGROUP_PHASE_METRIC,
    PODGROUP_PHASES,
    SLURM_JOB_START_METRIC,
    SLURM_JOB_SUBMIT_METRIC,
    TRAINJOB_CONDITION_METRIC,
    TRAINJOB_SUSPENDED_METRIC,
)
from components.observability import dashboards, ledger, rules
from components.platform import team_controllers, validated_config
from components.slurm import NAMESPACE as SLURM_NAMESPACE
from components.slurm.chart import slurm_values
from components.slurm.common import SLURM_APP_LABEL
from components.slurm.conf import CONFINEMENT_CONF
from components.slurm.network_policies import slurm_network_policies
from components.slurm.node_sets import nodeset_spec
from components.slurm.sharing import SHARING_CONF
from components.tenancy import team_network_policies
from components.trainer import team_runtimes
from synth.jobs.trainer import pod_requests
from synth.stackfile import REPOSITORY_ROOT
from tests.conftest import stack_data
from tests.kubernetes_semantics import quantity
from tests.network_model import Cluster, Pod, selects
from tests.schemas import crd_schemas, validation_errors

# The Go types kube-state-metrics v2.20.0 decodes its custom resource state config into, by
# their yaml tags (kubernetes/kube-state-metrics v2.20.0 pkg/customresourcestate/config.go:
# Metrics, MetricsSpec, Resource, GroupVersionKind, Labels (inlined), Generator, Metric;
# config_metrics_types.go: MetricMeta (inlined), MetricGauge, MetricInfo, MetricStateSet).
# Its decoder keeps no unknown field (pkg/app/server.go: a plain yaml.v3 decoder), so a key
# these do not name is silently lost; this walker refuses it.
LABELS = {"commonLabels": "map", "labelsFromPath": "paths"}
META = {"labelsFromPath": "paths", "path": "list"}
GAUGE = {**META, "labelFromKey": "str", "valueFrom": "list", "nilIsZero": "bool"}
INFO = {**META, "labelFromKey": "str"}
STATE_SET = {**META, "list": "list", "labelName": "str", "valueFrom": "list"}
METRIC = {"gauge": GAUGE, "stateSet": STATE_SET, "info": INFO, "type": "str"}
GENERATOR = {**LABELS, "each": METRIC, "name": "str", "help": "str", "errorLogV": "int"}
GVK = {"group": "str", "version": "str", "kind": "str"}
RESOURCE = {
    **LABELS,
    "metricNamePrefix": "str",
    "groupVersionKind": GVK,
    "resourcePlural": "str",
    "metrics": [GENERATOR],
    "errorLogV": "int",
}
CONFIG = {"spec": {"resources": [RESOURCE]}}
METRIC_TYPES = {"gauge": "gauge", "info": "info", "stateset": "stateSet"}
"""pkg/metric/metric.go's types (configOverrides lower-cases ``type``) -> the field they read."""


def unknown_keys(value: Any, schema: Any, where: str = "") -> list[str]:
    """Every key of ``value`` the Go types of ``schema`` do not decode, by its path."""
    if isinstance(schema, list):
        return [
            problem
            for index, item in enumerate(value)
            for problem in unknown_keys(item, schema[0], f"{where}[{index}]")
        ]
    if isinstance(schema, dict):
        assert isinstance(value, dict), where
        problems = [f"{where}.{key}" for key in value if key not in schema]
        return problems + [
            problem
            for key, item in value.items()
            if key in schema
            for problem in unknown_keys(item, schema[key], f"{where}.{key}")
        ]
    kinds: dict[str, type] = {
        "str": str, "int": int, "bool": bool, "list": list, "map": dict, "paths": dict,
    }  # fmt: skip
    if not isinstance(value, kinds[schema]):
        return [f"{where}: not a {schema}"]
    if (
        isinstance(value, dict)
        and schema == "paths"
        and not all(isinstance(p, list) for p in value.values())
    ):
        return [f"{where}: a label's path is a list"]
    return []


def test_the_custom_resource_config_names_only_fields_kube_state_metrics_decodes() -> None:
    config = ledger.custom_resource_state_config()
    assert unknown_keys(config, CONFIG) == []
    for resource in config["spec"]["resources"]:
        for metric in resource["metrics"]:
            # the type's own field must be there, or the metric is refused at start
            assert METRIC_TYPES[metric["each"]["type"].lower()] in metric["each"]
    # The example config kube-state-metrics ships makes exactly this mistake (``value:``
    # for ``valueFrom:``), which nothing refuses; the walker does.
    misspelt = copy.deepcopy(config)
    gauge = misspelt["spec"]["resources"][1]["metrics"][0]["each"]["gauge"]
    gauge["value"] = gauge.pop("valueFrom")
    assert unknown_keys(misspelt, CONFIG) == [".spec.resources[1].metrics[0].each.gauge.value"]


def _schema_at(schema: dict[str, Any], path: list[str]) -> dict[str, Any] | None:
    node = schema
    for part in path:
        if node.get("type") == "array":
            node = node["items"]
        if part in node.get("properties", {}):
            node = node["properties"][part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        elif part in ("name", "namespace", "labels", "creationTimestamp") and path[0] == "metadata":
            return {"type": "string"}  # ObjectMeta: CRDs declare only ``type: object``
        else:
            return None
    return node


def _resolve(obj: Any, path: list[str]) -> Any:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_QUANTITY_SUFFIX = {"": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_QUANTITY_SUFFIX |= {f"{p}i": 1024.0**n for n, p in enumerate("KMGTPE", start=1)}


def _to_float(raw: Any) -> float:
    """toFloat64 (registry_factory.go) for what the rules read: a bool or a condition's status
    (1 for true, "True"; 0 for false, "False", "Unknown"), a number, an RFC 3339 time (Unix
    seconds), or a Kubernetes quantity ("8", "64Gi", "500m"; resource.ParseQuantity)."""
    if isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, int | float):
        return float(raw)
    if raw.lower() in ("true", "false", "unknown"):
        return float(raw.lower() == "true")
    quantity = _QUANTITY.match(raw)
    if quantity is not None:
        return float(quantity[1]) * _QUANTITY_SUFFIX[quantity[2]]
    return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()


def _kube_state_metrics_samples(
    resource: dict[str, Any], obj: dict[str, Any]
) -> list[tuple[str, dict[str, str], float]]:
    """What kube-state-metrics v2.20.0 makes of ``obj`` for a gauge over a value, list or map.

    registry_factory.go: the resource's labels from the object's root, the gauge's from each
    element of ``path`` (a map's key in ``labelFromKey``), the value from ``valueFrom`` of it
    (or the element itself) through toFloat64 (:func:`_to_float`), and the name
    ``<metricNamePrefix>_<name>``.
    """
    samples: list[tuple[str, dict[str, str], float]] = []
    base = {label: _resolve(obj, path) for label, path in resource["labelsFromPath"].items()}
    for metric in resource["metrics"]:
        name = f"{resource['metricNamePrefix']}_{metric['name']}"
        if "stateSet" in metric["each"]:  # 1 for the state the path holds, 0 for the others
            states = metric["each"]["stateSet"]
            labels = {k: str(v) for k, v in base.items() if v is not None}
            now = _resolve(obj, states["path"])
            samples.extend(
                (name, {**labels, states["labelName"]: state}, float(state == now))
                for state in states["list"]
            )
            continue
        gauge = metric["each"]["gauge"]
        found = _resolve(obj, gauge["path"])
        if found is None and gauge.get("nilIsZero"):  # compiledGauge.value: 0
            samples.append((name, {k: str(v) for k, v in base.items() if v is not None}, 0.0))
            continue
        if found is None:  # nothing at the path: no series
            continue
        if isinstance(found, dict) and "valueFrom" not in gauge:
            elements = [({gauge["labelFromKey"]: key}, value) for key, value in found.items()]
        else:
            elements = [({}, each) for each in (found if isinstance(found, list) else [found])]
        for keyed, element in elements:
            labels = {k: str(v) for k, v in base.items() if v is not None} | keyed
            for label, path in gauge.get("labelsFromPath", {}).items():
                labels[label] = _resolve(element, path)
            value = _to_float(_resolve(element, gauge.get("valueFrom", [])))
            samples.append((f"{resource['metricNamePrefix']}_{metric['name']}", labels, value))
    return samples


def test_the_ledgers_custom_resource_metrics_read_real_fields(reference_dir: Path) -> None:
    # only the three projects' CRDs: reading every CRD of the reference data takes seconds
    schemas = {
        **crd_schemas(reference_dir / "crds" / "karpenter"),
        **crd_schemas(reference_dir / "crds" / "volcano"),
        **crd_schemas(reference_dir / "crds" / "kubeflow-trainer"),
    }
    resources = ledger.custom_resource_state_config()["spec"]["resources"]
    for resource in resources:
        gvk = resource["groupVersionKind"]
        schema = schemas[(f"{gvk['group']}/{gvk['version']}", gvk["kind"])]
        paths = list(resource["labelsFromPath"].values())
        for metric in resource["metrics"]:
            gauge = metric["each"].get("gauge") or metric["each"]["stateSet"]
            paths.append(gauge["path"])
            for sub in [*gauge.get("labelsFromPath", {}).values(), gauge.get("valueFrom", [])]:
                paths.append([*gauge["path"], *sub])
        for path in paths:
            assert _schema_at(schema, path) is not None, (gvk["kind"], path)

    podgroup, nodeclaim, trainjob = resources
    created = "2026-12-06T15:00:00Z"
    gang = {"namespace": "team-a", "podgroup": "job-a", "queue": "team-a"}
    # Trainer's volcano plugin writes the gang's requests as quantity strings
    # (kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/volcano/volcano.go, Build).
    minimum = {"nvidia.com/gpu": "16", "memory": "64Gi", "cpu": "500m"}
    assert _kube_state_metrics_samples(podgroup, {
        "metadata": {"name": "job-a", "namespace": "team-a", "creationTimestamp": created},
        "spec": {"queue": "team-a", "minMember": 2, "minResources": minimum},
        "status": {"phase": "Inqueue"},
    }) == [(PODGROUP_CREATED_METRIC, gang, 1796569200.0),
           (PODGROUP_MIN_MEMBER_METRIC, gang, 2.0),
           (PODGROUP_MIN_RESOURCES_METRIC, gang | {"resource": "nvidia.com/gpu"}, 16.0),
           (PODGROUP_MIN_RESOURCES_METRIC, gang | {"resource": "memory"}, 64.0 * 2**30),
           (PODGROUP_MIN_RESOURCES_METRIC, gang | {"resource": "cpu"}, 0.5),
           *((PODGROUP_PHASE_METRIC, gang | {"phase": phase}, float(phase == "Inqueue"))
             for phase in PODGROUP_PHASES)]  # fmt: skip
    samples = _kube_state_metrics_samples(nodeclaim, {
        "metadata": {"name": "gpu-x1", "labels": {"karpenter.sh/nodepool": "gpu"}},
        "status": {"nodeName": "ip-10-0-0-1", "conditions": [
            {"type": "Launched", "status": "True", "lastTransitionTime": "2026-12-06T15:01:00Z"},
            {"type": "Initialized", "status": "Unknown",
             "lastTransitionTime": "2026-12-06T15:01:00Z"},
        ]},
    })  # fmt: skip
    assert samples[0] == (
        NODECLAIM_CONDITION_METRIC,
        {"nodeclaim": "gpu-x1", "nodepool": "gpu", "node": "ip-10-0-0-1",
         "condition": "Launched", "status": "True"},
        1796569260.0,
    )  # fmt: skip
    assert samples[1][1]["status"] == "Unknown"
    # A suspended TrainJob, and a finished one (kubeflow/trainer v2.3.0 pkg/apis/trainer/
    # v1alpha1/trainjob_types.go: spec.suspend, metav1.Condition types Suspended, Complete).
    job = {"namespace": "team-a", "trainjob": "job-a"}
    suspended = {"type": "Suspended", "status": "True", "reason": "Suspended"}
    assert _kube_state_metrics_samples(trainjob, {
        "metadata": {"name": "job-a", "namespace": "team-a"},
        "spec": {"suspend": True},
        "status": {"conditions": [suspended, {"type": "Complete", "status": "False"}]},
    }) == [(TRAINJOB_SUSPENDED_METRIC, job, 1.0),
           (TRAINJOB_CONDITION_METRIC, job | {"condition": "Suspended"}, 1.0),
           (TRAINJOB_CONDITION_METRIC, job | {"condition": "Complete"}, 0.0)]  # fmt: skip
    assert _kube_state_metrics_samples(trainjob, {
        "metadata": {"name": "job-a", "namespace": "team-a"}, "spec": {},
    }) == [(TRAINJOB_SUSPENDED_METRIC, job, 0.0)]  # fmt: skip


def test_kube_state_metrics_values_turn_on_the_state_and_may_read_it() -> None:
    values = ledger.kube_state_metrics_values()
    assert values["customResourceState"]["enabled"] is True
    kinds = {
        (r["groupVersionKind"]["group"], r["resourcePlural"])
        for r in values["customResourceState"]["config"]["spec"]["resources"]
    }
    granted = {
        (group, resource)
        for rule in values["rbac"]["extraRules"]
        if {"list", "watch"} <= set(rule["verbs"])
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    expected = {
        ("scheduling.volcano.sh", "podgroups"),
        ("karpenter.sh", "nodeclaims"),
        ("trainer.kubeflow.org", "trainjobs"),
    }
    assert kinds == granted == expected
    # --metric-annotations-allowlist / --metric-labels-allowlist: resource=[key,...]
    assert values["metricAnnotationsAllowList"] == ["pods=[scheduling.k8s.io/group-name]"]
    (nodes,) = values["metricLabelsAllowlist"]
    assert nodes.startswith("nodes=[karpenter.sh/nodepool,node.kubernetes.io/instance-type,")
    assert ledger.POD_GROUP_LABEL == "annotation_scheduling_k8s_io_group_name"
    assert ledger.NODEPOOL_LABEL == "label_karpenter_sh_nodepool"


def _run(script: str, directory: Path, env: dict[str, str]) -> str:
    text = script.replace(first_step.FIRST_STEP_DIRECTORY, str(directory))
    return subprocess.run(
        ["sh", "-c", text], env=env, check=True, capture_output=True, text=True
    ).stdout


def test_a_slurm_jobs_first_step_and_submission_reach_the_exporters_directory(
    tmp_path: Path,
) -> None:
    files = tmp_path / "first-step"
    files.mkdir()
    tools = tmp_path / "bin"
    tools.mkdir()
    squeue = tools / "squeue"
    squeue.write_text(
        '#!/bin/sh\n[ "$5" = "%V %S" ] && echo 2026-12-06T15:00:00 2026-12-06T15:20:00\n'
    )
    squeue.chmod(0o755)
    # A user's umask 077 and time zone must change neither what the exporter (nobody) can
    # read nor the submit time.
    env = {"PATH": f"{tools}:/usr/bin:/bin", "SLURM_JOB_ID": "42", "TZ": "Asia/Tokyo"}
    prolog = "\n".join(["umask 077", *first_step.slurm_task_prolog_lines(), "exit 0", ""])
    exported = dict(
        line.removeprefix("export ").split("=", 1) for line in _run(prolog, files, env).splitlines()
    )
    # slurmstepd sets everything after '=' (task.c), so the labels carry their quotes only
    assert exported[first_step.FIRST_STEP_LABELS_VARIABLE] == 'slurm_job_id="42"'
    assert (files / "job-42-submit.prom").read_text() == (
        f'{SLURM_JOB_SUBMIT_METRIC}{{slurm_job_id="42"}} 1796569200\n'
        f'{SLURM_JOB_START_METRIC}{{slurm_job_id="42"}} 1796570400\n'
    )
    helper_env = {**env, **exported}
    _run("umask 077\n" + first_step.helper_script().removeprefix("#!/bin/sh\n"), files, helper_env)
    first = (files / "job-42.prom").read_text()
    for written in ("job-42.prom", "job-42-submit.prom"):
        assert (files / written).stat().st_mode & 0o044 == 0o044, written
    assert first.startswith(f'{FIRST_STEP_METRIC}{{slurm_job_id="42"}} ')
    _run(first_step.helper_script(), files, helper_env)  # a second call keeps the first step
    assert (files / "job-42.prom").read_text() == first
    names = ["job-42-submit.prom", "job-42.lock", "job-42.prom"]  # the lock is no .prom
    assert sorted(p.name for p in files.iterdir()) == names
    _run(first_step.slurm_first_step_epilog(), files, env)
    assert list(files.iterdir()) == []


FAKE_SQUEUE = """#!/bin/sh
# squeue as slurm-26-05-3-1 prints "%V %S" (src/squeue/print.c, src/common/parse_time.c): each
# time in the local time zone, in SLURM_TIME_FORMAT (unset or "standard": %FT%T); the user's
# SQUEUE_STATES or SLURM_CLUSTERS filter the job away (src/squeue/opts.c). It counts its calls.
echo "$$" >> "$FAKE_SQUEUE_LOG"
sleep "${FAKE_SQUEUE_DELAY:-0}"
[ -z "${FAKE_SQUEUE_FAIL:-}${SQUEUE_STATES:-}${SLURM_CLUSTERS:-}" ] || exit 0
format=${SLURM_TIME_FORMAT:-standard}
[ "$format" = standard ] && format=%FT%T
[ "$5" = "%V %S" ] && echo "$(date -d @1796569200 +"$format") $(date -d @1796569800 +"$format")"
"""


def _node_with_fake_squeue(tmp_path: Path) -> tuple[Path, Path]:
    """A node's first-step directory and a PATH folder whose ``squeue`` is :data:`FAKE_SQUEUE`."""
    files = tmp_path / "first-step"
    files.mkdir()
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "squeue").write_text(FAKE_SQUEUE)
    (tools / "squeue").chmod(0o755)
    return files, tools


def test_one_squeue_per_node_whatever_the_users_environment(tmp_path: Path) -> None:
    """Tasks that start at once on a node ask slurmctld once between them; the job's start is
    the one slurmstepd gives the TaskProlog; the user's time format and squeue filters change
    nothing; a failed lookup leaves the next step to try again."""
    files, tools = _node_with_fake_squeue(tmp_path)
    calls = tmp_path / "calls"
    env = {
        "PATH": f"{tools}:/usr/bin:/bin",
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_START_TIME": "1796570400",  # slurmstepd's, from the job's credential
        "SLURM_TIME_FORMAT": "%d/%m/%Y %H:%M",  # a user's; sbatch passes it on
        "SQUEUE_STATES": "PENDING",
        "SLURM_CLUSTERS": "another",
        "TZ": "Asia/Tokyo",
        "FAKE_SQUEUE_LOG": str(calls),
    }
    prolog = "\n".join([*first_step.slurm_task_prolog_lines(), "exit 0", ""]).replace(
        first_step.FIRST_STEP_DIRECTORY, str(files)
    )

    def start_tasks(count: int, **extra: str) -> None:
        tasks = [
            subprocess.Popen(["sh", "-c", prolog], env={**env, **extra}, stdout=subprocess.PIPE)
            for _ in range(count)
        ]
        for task in tasks:
            out, _ = task.communicate(timeout=10)
            assert task.returncode == 0 and b"export " in out

    start_tasks(1, FAKE_SQUEUE_FAIL="1")  # slurmctld did not answer: no file, the lock is freed
    assert sorted(p.name for p in files.iterdir()) == []
    start_tasks(16, FAKE_SQUEUE_DELAY="0.5")  # the next step's tasks, on one node, at once
    assert len(calls.read_text().splitlines()) == 2
    assert (files / "job-42-submit.prom").read_text() == (
        f'{SLURM_JOB_SUBMIT_METRIC}{{slurm_job_id="42"}} 1796569200\n'
        f'{SLURM_JOB_START_METRIC}{{slurm_job_id="42"}} 1796570400\n'
    )
    start_tasks(4)  # a later step: the times are there, nobody asks
    assert len(calls.read_text().splitlines()) == 2
    _run(first_step.slurm_first_step_epilog(), files, env)
    assert list(files.iterdir()) == []


def test_a_requeued_slurm_job_starts_without_its_stale_first_step_files(tmp_path: Path) -> None:
    """A job killed with its slurmd gets no Epilog, and a requeued job runs again under its id
    with a new submit time (job_mgr.c): the Prolog removes its old files before its tasks, so
    the TaskProlog asks again and the first step is the new run's; other jobs' files stay. A
    slurmd pod that starts clears what dead jobs left, before the exporter serves it."""
    files, tools = _node_with_fake_squeue(tmp_path)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "SLURM_JOB_ID": "42",
           "FAKE_SQUEUE_LOG": str(tmp_path / "calls")}  # fmt: skip
    stale = f'{SLURM_JOB_SUBMIT_METRIC}{{slurm_job_id="42"}} 1\n'
    (files / "job-42-submit.prom").write_text(stale)
    (files / "job-42.prom").write_text(f'{FIRST_STEP_METRIC}{{slurm_job_id="42"}} 2\n')
    (files / "job-42.lock").mkdir()
    (files / "job-42.prom.77").write_text("half")  # a writer killed before its rename
    (files / "job-42-submit.prom.88").write_text("half")
    others = ["job-4.prom", "job-420-submit.prom", "job-420.prom", "job-43.lock"]
    for name in others:
        (files / name).mkdir() if name.endswith(".lock") else (files / name).write_text("x\n")
    config = validated_config(stack_data("dev"))
    prologs = slurm_values(config)["prologScripts"]  # every stack's, directory or not
    assert prologs[first_step.FIRST_STEP_PROLOG] == first_step.slurm_first_step_prolog()
    _run(first_step.slurm_first_step_prolog(), files, env)
    assert sorted(p.name for p in files.iterdir()) == others
    for job_id in ("", "4*", "../42"):  # never outside its own names
        _run(first_step.slurm_first_step_prolog(), files, {**env, "SLURM_JOB_ID": job_id})
    assert sorted(p.name for p in files.iterdir()) == others
    prolog = "\n".join([*first_step.slurm_task_prolog_lines(), "exit 0", ""])
    exported = dict(
        line.removeprefix("export ").split("=", 1) for line in _run(prolog, files, env).splitlines()
    )
    _run(first_step.helper_script(), files, {**env, **exported})
    submitted = (files / "job-42-submit.prom").read_text()
    assert submitted.startswith(f'{SLURM_JOB_SUBMIT_METRIC}{{slurm_job_id="42"}} 1796569200\n')
    assert not (files / "job-42.prom").read_text().endswith(" 2\n")
    # the pod's next start: its clearing init container comes before the exporter
    (files / ".hidden.prom").write_text("x\n")
    node_set = config.slurm.node_sets[0]
    pool = config.pool(node_set.pool)
    assert pool is not None
    spec = nodeset_spec(node_set, pool, image="slurmd", shared_file_system=False)
    clear, exporter = spec["template"]["spec"]["initContainers"]
    assert exporter["name"] == first_step.FIRST_STEP_CONTAINER
    assert "restartPolicy" not in clear and first_step.first_step_mount() in clear["volumeMounts"]
    assert clear["command"][:2] == ["/bin/sh", "-c"]
    _run(clear["command"][2], files, env)
    assert list(files.iterdir()) == []


def test_a_slow_slurmctld_holds_a_steps_launch_for_seconds_only(tmp_path: Path) -> None:
    """slurmstepd waits for the TaskProlog without a limit (task.c, _run_script_and_set_env)
    and starts the task after it: a squeue that hangs is stopped, the lookup fails and frees
    the lock, and the next step asks again."""
    files = tmp_path / "first-step"
    files.mkdir()
    tools = tmp_path / "bin"
    tools.mkdir()
    squeue = tools / "squeue"
    squeue.write_text("#!/bin/sh\nexec sleep 60\n")  # slurmctld does not answer
    squeue.chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "SLURM_JOB_ID": "42", "SLURM_JOB_START_TIME": "1",
           "FAKE_SQUEUE_LOG": str(tmp_path / "calls")}  # fmt: skip
    default = "\n".join(first_step.slurm_task_prolog_lines())
    assert f"timeout -k 2 {first_step.SQUEUE_TIMEOUT_SECONDS} squeue " in default
    hanging = "\n".join([*first_step.slurm_task_prolog_lines(squeue_timeout_s=1), "exit 0", ""])
    started = time.monotonic()
    out = _run(hanging, files, env)
    assert time.monotonic() - started < 5
    assert "export " in out
    assert list(files.iterdir()) == []  # no times, and the lock is free
    squeue.write_text(FAKE_SQUEUE)  # it answers again: the next step writes the times
    _run(default + "\nexit 0\n", files, env)
    assert sorted(p.name for p in files.iterdir()) == ["job-42-submit.prom", "job-42.lock"]


def test_a_slurmd_pods_first_step_directory_holds_every_job_its_node_can_run(
    tmp_path: Path,
) -> None:
    """The kubelet evicts a pod whose emptyDir passes its sizeLimit, and counts allocated
    blocks, not bytes (kubernetes/kubernetes pkg/volume/util/fs/fs_unix.go, DiskUsage): what
    one job leaves on a node (its files and lock, as the scripts write them) times the most
    jobs a node of the catalog runs must fit the slurmd pods' directory, with room; a
    training pod's stays small."""
    files, tools = _node_with_fake_squeue(tmp_path)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "SLURM_JOB_ID": "42",
           "FAKE_SQUEUE_LOG": str(tmp_path / "calls")}  # fmt: skip
    prolog = "\n".join([*first_step.slurm_task_prolog_lines(), "exit 0", ""])
    exported = dict(
        line.removeprefix("export ").split("=", 1) for line in _run(prolog, files, env).splitlines()
    )
    _run(first_step.helper_script(), files, {**env, **exported})
    entries = list(files.iterdir())
    assert len(entries) == 3  # first step, submit, lock
    # ext4 and xfs give a one-line file or an empty directory one 4 KiB block
    per_job = sum(max(4096, entry.stat().st_blocks * 512) for entry in entries)
    node_jobs = max(entry.vcpu for entry in CATALOG.values())  # CR_Core_Memory: 1 per CPU
    config = validated_config(stack_data("dev"))
    for runtime, (template, _) in _training_pod_templates(config).items():
        volume = next(
            v for v in template["spec"]["volumes"] if v["name"] == first_step.FIRST_STEP_VOLUME
        )
        limit = quantity(volume["emptyDir"]["sizeLimit"])
        if runtime == "slurmd":
            # twice: the temporary names before each rename, the directory's own blocks
            assert limit >= 2 * per_job * node_jobs, limit
        else:
            assert limit == 1024 * 1024, runtime


def _template_labels(template: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = template.get("metadata", {}).get("labels", {})
    return labels


def _training_pod_templates(
    config: PlatformConfig,
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Runtime -> (pod template, its training container) of Trainer, Ray and Slurm."""
    team = config.teams[0]
    pool, framework = team_runtimes(team, config.node_pools)[0]
    spec = trainer.runtime_spec(
        framework, pool, trainer=config.trainer, queue=team.name, checkpoints=None
    )
    (job,) = spec["template"]["spec"]["replicatedJobs"]
    cluster = kuberay.ray_cluster_spec("RayJob", kuberay.ray_job(
        "job", pool, team=team.name, image="ray", workers=1, entrypoint="python train.py",
        checkpoints=None,
    )["spec"])  # fmt: skip
    node_set = config.slurm.node_sets[0]
    slurm_pool = config.pool(node_set.pool)
    assert slurm_pool is not None
    slurmd = nodeset_spec(node_set, slurm_pool, image="slurmd", shared_file_system=False)
    templates = {
        "trainer": job["template"]["spec"]["template"],
        "ray head": cluster["headGroupSpec"]["template"],
        "ray worker": cluster["workerGroupSpecs"][0]["template"],
    }
    found = {name: (t, t["spec"]["containers"][0]) for name, t in templates.items()}
    # the operator merges the NodeSet's slurmd section into the pod's slurmd container
    return {**found, "slurmd": (slurmd["template"], slurmd["slurmd"])}


def test_every_training_pod_serves_its_first_step_to_the_pod_monitor() -> None:
    config = validated_config(stack_data("dev"))
    for runtime, (template, writer) in _training_pod_templates(config).items():
        monitor = (
            ledger.slurm_first_step_pod_monitor()
            if runtime == "slurmd"
            else ledger.first_step_pod_monitor()
        )
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        assert selects(monitor["spec"]["selector"], _template_labels(template)), runtime
        spec = template["spec"]
        (exporter,) = [
            c for c in spec["initContainers"] if c["name"] == first_step.FIRST_STEP_CONTAINER
        ]
        # a native sidecar, the first: it serves before the rest start, and a Job's pod still
        # completes when training does (a slurmd pod first clears dead jobs' files)
        first = 1 if runtime == "slurmd" else 0
        assert spec["initContainers"][first] is exporter and exporter["restartPolicy"] == "Always"
        assert {"name": endpoint["port"], "containerPort": FIRST_STEP_PORT} in exporter["ports"]
        volume = next(v for v in spec["volumes"] if v["name"] == first_step.FIRST_STEP_VOLUME)
        assert "emptyDir" in volume, runtime
        assert first_step.first_step_mount() in writer["volumeMounts"], runtime
        if runtime != "slurmd":  # a Slurm job's file is its own: the TaskProlog names it
            variable = {
                "name": first_step.FIRST_STEP_FILE_VARIABLE,
                "value": first_step.FIRST_STEP_FILE,
            }
            assert variable in writer["env"], runtime


def _relabel(rules: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, str] | None:
    """Labels after ``keep``, ``drop`` and ``labelkeep`` rules (Prometheus anchors regexes)."""
    for rule in rules:
        pattern = re.compile(f"(?:{rule['regex']})")
        if rule["action"] in {"keep", "drop"}:
            value = ";".join(labels.get(name, "") for name in rule["sourceLabels"])
            if bool(pattern.fullmatch(value)) != (rule["action"] == "keep"):
                return None
        elif rule["action"] == "labelkeep":
            labels = {k: v for k, v in labels.items() if pattern.fullmatch(k)}
        else:
            raise NotImplementedError(rule["action"])
    return labels


def test_the_first_step_monitors_keep_only_first_steps(reference_dir: Path) -> None:
    """A team's container writes the exporter's file: of what it serves only the first-step
    names survive, with the target's labels and the Slurm job id, and each scrape is bounded
    with room above the most labels a kept sample can have."""
    crds = reference_dir / "crds" / "prometheus-operator" / "v0.93.1"
    monitors = ledger.ledger_manifests()
    assert [m["metadata"]["name"] for m in monitors] == ["first-step", "first-step-slurm"]
    jobs: list[str] = []
    for monitor in monitors:
        assert validation_errors(monitor, "1.33", crds) == []
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        relabel = endpoint["metricRelabelings"]
        job = f"{MONITORING_NAMESPACE}/{monitor['metadata']['name']}"
        target = {"namespace": "team-a", "pod": "p", "container": "first-step-exporter",
                  "job": job, "endpoint": "first-step", "instance": "10.0.0.1:9501"}  # fmt: skip
        spoofs = [
            {"__name__": NODECLAIM_CONDITION_METRIC, "node": "n3", "nodepool": "p5"},
            {"__name__": "DCGM_FI_DEV_XID_ERRORS", "Hostname": "victim"},
            {"__name__": "trainingplatform_efa_devices", "node": "victim"},
        ]
        for spoof in spoofs:
            assert _relabel(relabel, {**target, **spoof}) is None, spoof
        faked = {"__name__": FIRST_STEP_METRIC, "node": "n3", "podgroup": "other",
                 "Hostname": "x", "exported_namespace": "team-b", "slurm_job_id": "42"}  # fmt: skip
        kept = _relabel(relabel, {**target, **faked})
        assert kept == {**target, "__name__": FIRST_STEP_METRIC, "slurm_job_id": "42"}
        for kept_name in (SLURM_JOB_SUBMIT_METRIC, SLURM_JOB_START_METRIC):
            assert _relabel(relabel, {**target, "__name__": kept_name}) is not None
        # Prometheus counts __name__ (prometheus v3.14.0 scrape/scrape.go, verifyLabelLimits);
        # a sample at the limit would fail the scrape whole
        assert monitor["spec"]["labelLimit"] > len(kept)
        jobs.append(job)
    # what the rules read a pod's first step and a Slurm job's from (<namespace>/<name>)
    assert jobs == [ledger.FIRST_STEP_JOB, ledger.FIRST_STEP_SLURM_JOB]


def test_slurm_nodes_have_a_first_step_monitor_sized_for_their_jobs() -> None:
    """A slurmd pod serves three samples per job on its node, and with cores and memory
    consumable (CR_Core_Memory, no oversubscription) a node runs up to one job per CPU: its
    scrape must hold that many on the catalog's largest node, or it fails whole and every job
    of the node leaves the ledger. Training pods keep their tight limit, and neither monitor
    scrapes the other's pods."""
    assert CONFINEMENT_CONF["SelectTypeParameters"] == "CR_Core_Memory"
    assert "OverSubscribe" not in SHARING_CONF
    training, slurm = ledger.first_step_pod_monitor(), ledger.slurm_first_step_pod_monitor()
    per_job = len((FIRST_STEP_METRIC, SLURM_JOB_SUBMIT_METRIC, SLURM_JOB_START_METRIC))
    for entry in CATALOG.values():
        assert slurm["spec"]["sampleLimit"] >= per_job * entry.vcpu, entry.name
    assert training["spec"]["sampleLimit"] <= 100
    assert slurm["spec"]["namespaceSelector"] == {"matchNames": [SLURM_NAMESPACE]}
    assert training["spec"]["namespaceSelector"] == {"any": True}
    (endpoint,) = training["spec"]["podMetricsEndpoints"]
    for namespace, scraped in ((SLURM_NAMESPACE, False), ("team-a", True)):
        target = {"__meta_kubernetes_namespace": namespace}
        assert (_relabel(endpoint["relabelings"], target) is not None) == scraped, namespace


PROMETHEUS = Pod(
    MONITORING_NAMESPACE,
    {
        "app.kubernetes.io/name": "prometheus",
        "operator.prometheus.io/name": first_step.PROMETHEUS_NAME,
        "prometheus": first_step.PROMETHEUS_NAME,
    },
)


def test_only_prometheus_reaches_the_first_step_port_of_team_and_slurm_pods() -> None:
    config = validated_config(stack_data("dev"))
    team, other = config.teams[0].name, "other-team"
    policies = [
        *team_network_policies(team, labels={}, controllers=team_controllers(config)[team]),
        *team_network_policies(other, labels={}, controllers=team_controllers(config)[team]),
        *slurm_network_policies(["203.0.113.0/24"]),
    ]
    cluster = Cluster(policies)
    templates = _training_pod_templates(config)
    trainer_pod = Pod(team, _template_labels(templates["trainer"][0]))
    slurmd = Pod(SLURM_NAMESPACE, {**_template_labels(templates["slurmd"][0]),
                                   SLURM_APP_LABEL: "slurmd"})  # fmt: skip
    for target in (trainer_pod, slurmd):
        assert cluster.may_reach(PROMETHEUS, target, FIRST_STEP_PORT), target
        # to that port only
        assert not cluster.may_reach(PROMETHEUS, target, FIRST_STEP_PORT + 1), target
        refused = {
            "another team's pod": Pod(other, {}),
            "another platform pod": Pod(
                MONITORING_NAMESPACE, {"app.kubernetes.io/name": "grafana"}
            ),
            "Prometheus's labels elsewhere": Pod(other, dict(PROMETHEUS.labels)),
        }
        for who, source in refused.items():
            assert not cluster.may_reach(source, target, FIRST_STEP_PORT), (who, target)
    # a team pod without the exporter's label is not opened to Prometheus
    assert not cluster.may_reach(PROMETHEUS, Pod(team, {}), FIRST_STEP_PORT)


def test_synth_jobs_counts_the_exporter_as_kubernetes_does() -> None:
    # PodRequests (kubernetes pkg/api/v1/resource/helpers.go): a sidecar adds to the
    # containers' sum, and an init container after it runs beside it.
    pod = {
        "initContainers": [
            first_step.first_step_sidecar(),
            {"name": "wait", "resources": {"requests": {"memory": "64Mi"}}},
        ],
        "containers": [{"name": "node", "resources": {"requests": {"memory": "100Mi"}}}],
    }
    assert pod_requests(pod, {})["memory"] == 132 * 1024 * 1024
    pod["initContainers"][1]["resources"]["requests"]["memory"] = "200Mi"
    assert pod_requests(pod, {})["memory"] == 232 * 1024 * 1024


def test_the_training_images_carry_the_helper_the_builder_writes() -> None:
    helper = REPOSITORY_ROOT / "images" / "checkpoint" / first_step.FIRST_STEP_COMMAND
    assert helper.read_text() == first_step.helper_script()  # regenerate it from the builder
    for recipe in ("training-cuda", "training-neuron"):  # the Ray images build on these
        dockerfile = (REPOSITORY_ROOT / "images" / recipe / "Dockerfile").read_text()
        assert f"COPY --from=checkpoint --chmod=0755 {first_step.FIRST_STEP_COMMAND} " in dockerfile


def test_kube_state_metrics_copies_every_label_the_rules_and_dashboards_join_on() -> None:
    """The alerts and panels join on node labels and the pods' group annotation; the one
    allowlist kube-state-metrics gets (the ledger's values) must carry each, or those series
    have no such label and the joins return nothing."""
    values = ledger.kube_state_metrics_values()
    (nodes,) = values["metricLabelsAllowlist"]
    (pods,) = values["metricAnnotationsAllowList"]
    needed_labels = {*rules.NODE_LABELS, *dashboards.KSM_NODE_LABELS_ALLOWLIST}
    assert nodes == f"nodes=[{','.join(ledger.NODE_LABELS)}]"
    assert needed_labels <= set(ledger.NODE_LABELS)
    needed_annotations = {*rules.POD_ANNOTATIONS, *dashboards.KSM_POD_ANNOTATIONS_ALLOWLIST}
    assert pods == f"pods=[{ledger.POD_GROUP_ANNOTATION}]"
    assert needed_annotations == {ledger.POD_GROUP_ANNOTATION}
