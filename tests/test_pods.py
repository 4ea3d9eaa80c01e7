"""``pods/``: the pods custom resources stand for, written as Pods for scanners and reviewers."""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from components import kuberay, versions
from components.acceptance_gate import TOKEN_DIR
from components.config.pools import GENERAL_POOL
from components.observability import grafana_orgs
from components.platform import validated_config
from components.slurm import DATABASE_POD_LABELS
from synth.__main__ import main as synth_main
from synth.chart_pods import (
    UNVERIFIED_ANNOTATION,
    UNVERIFIED_TEMPLATES,
    chart_defaults,
    chart_pods,
    dcgm_exporter_pod,
    monitoring_pods,
)
from synth.helm_values import helm_coalesced
from synth.output import write_stack
from synth.pods import (
    chart_merged,
    login_set_pods,
    mariadb_pod,
    node_set_pod,
    operator_container,
    pods_of,
    ray_pods,
    slurm_service_pods,
)
from synth.reference import REFERENCE_ENV, MissingReference
from synth.run import StackResult
from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml
from tests.conftest import STACKS, stack_data
from tests.pod_security import refusals
from tests.schemas import validation_errors


def _written(result: StackResult, folder: str) -> dict[str, dict[str, Any]]:
    directory = result.written.directory / folder
    return {path.name: load_yaml(path.read_text()) for path in directory.glob("*.yaml")}


@pytest.mark.parametrize("stack", STACKS)
def test_every_replicated_job_and_node_set_is_written_as_a_pod(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    manifests = _written(result, "manifests")
    pods = _written(result, "pods")
    assert len(pods) == result.written.pods > 0
    runtimes = [m for m in manifests.values() if m["kind"].endswith("TrainingRuntime")]
    expected = {
        f"Pod.{r['metadata']['namespace']}.{r['metadata']['name']}-{job['name']}.yaml": job
        for r in runtimes
        for job in r["spec"]["template"]["spec"]["replicatedJobs"]
    }
    node_sets = [m for m in manifests.values() if m["kind"] == "NodeSet"]
    assert runtimes and node_sets
    # the stack's Ray objects (standing clusters), one pod per template: ray_pods' own test
    expected_ray = {
        f"Pod.{p['metadata']['namespace']}.{p['metadata']['name']}.yaml"
        for m in manifests.values()
        if m["kind"] in kuberay.RAY_POD_KINDS
        for p in ray_pods(m)
    }
    login_sets = (stack_data(stack).get("slurm") or {}).get("login")
    releases = {r["release"]: r for r in _written(result, "helm").values()}
    accounting = releases["slurm"]["values"]["accounting"]["enabled"]
    databases = [m for m in manifests.values() if m["kind"] == "MariaDB"]
    assert bool(databases) == accounting
    daemons = ["controller-0", "restapi", *(["accounting-0"] if accounting else [])]
    assert (
        set(pods)
        == set(expected)
        | {f"Pod.slurm.{n['metadata']['name']}-0.yaml" for n in node_sets}
        | ({"Pod.slurm.slurm-login-login.yaml"} if login_sets else set())
        | {f"Pod.slurm.slurm-{daemon}.yaml" for daemon in daemons}
        | {f"Pod.slurm.{d['metadata']['name']}-0.yaml" for d in databases}
        | expected_ray
        | {f"Pod.{p['metadata']['namespace']}.{p['metadata']['name']}.yaml"
           for p in _chart_pods_written(releases, result)}
    )  # fmt: skip
    for name, job in expected.items():
        template = job["template"]["spec"]["template"]
        assert pods[name]["spec"] == template["spec"], name  # as the runtime says, nothing lost
        assert pods[name]["metadata"]["annotations"]["trainingplatform.io/pod-of"]


@pytest.mark.parametrize("stack", STACKS)
def test_written_pods_pass_the_kubernetes_schema(
    synthesized: dict[str, StackResult], stack: str, reference_dir: Path
) -> None:
    version = str(stack_data(stack)["cluster"]["kubernetesVersion"])
    for name, pod in _written(synthesized[stack], "pods").items():
        assert validation_errors(pod, version, reference_dir / "crds") == [], name


def test_a_node_sets_pod_is_the_operators_privileged_worker(
    synthesized: dict[str, StackResult],
) -> None:
    """What Slinky v1.2.1 adds (worker_app.go): slurmd privileged with four capabilities, no
    service account token, its config and log volumes; the NodeSet's image, resources, mounts
    and placement kept."""
    node_set = next(m for m in _written(synthesized["prod"], "manifests").values()
                    if m["kind"] == "NodeSet")  # fmt: skip
    pod = node_set_pod(node_set)
    spec = pod["spec"]
    (slurmd,) = spec["containers"]
    assert slurmd["securityContext"]["privileged"] is True
    assert set(slurmd["securityContext"]["capabilities"]["add"]) == {
        "BPF", "NET_ADMIN", "SYS_ADMIN", "SYS_NICE"
    }  # fmt: skip
    assert slurmd["image"] == node_set["spec"]["slurmd"]["image"]
    assert slurmd["resources"] == node_set["spec"]["slurmd"]["resources"]
    mounts = {m["mountPath"] for m in slurmd["volumeMounts"]}
    assert {"/etc/slurm", "/var/log/slurm"} <= mounts
    assert {m["mountPath"] for m in node_set["spec"]["slurmd"]["volumeMounts"]} <= mounts
    assert spec["automountServiceAccountToken"] is False
    assert spec["nodeSelector"] == node_set["spec"]["template"]["spec"]["nodeSelector"]
    volumes = {v["name"] for v in spec["volumes"]}
    assert {m["name"] for m in slurmd["volumeMounts"]} <= volumes  # every mount has its volume


def ray_objects() -> dict[str, dict[str, Any]]:
    """A RayCluster, RayJob and RayService of dev's first team on its first GPU pool, built by
    :mod:`components.kuberay`."""
    config = validated_config(stack_data("dev"))
    pool = next(p for p in config.node_pools if p.instance.accelerators and p.name != GENERAL_POOL)
    team = config.teams[0].name
    job = kuberay.ray_job("train", pool, team=team, image=versions.RAY_IMAGE, workers=2,
                          entrypoint="python train.py", checkpoints=None)  # fmt: skip
    cluster = job["spec"]["rayClusterSpec"]
    metadata = {"name": "standing", "namespace": team}
    return {
        "RayCluster": {"apiVersion": kuberay.RAY_API, "kind": "RayCluster",
                       "metadata": metadata, "spec": cluster},
        "RayJob": job,
        "RayService": {"apiVersion": kuberay.RAY_API, "kind": "RayService",
                       "metadata": {**metadata, "name": "serve"},
                       "spec": {"rayClusterConfig": cluster}},
    }  # fmt: skip


def test_every_ray_pod_template_is_written_as_a_pod(reference_dir: Path) -> None:
    """Head, each worker group and a RayJob's submitter: the template's spec as it is, with
    KubeRay's labels and, on a worker, its wait-gcs-ready init container (kuberay v1.7.0
    ray-operator/controllers/ray/common/pod.go), hardened as the Ray container is."""
    objects = ray_objects()
    pods = pods_of({f"{kind}.yaml": manifest for kind, manifest in objects.items()})
    team = objects["RayJob"]["metadata"]["namespace"]
    group = objects["RayJob"]["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["groupName"]
    assert set(pods) == {
        f"Pod.{team}.{name}.yaml"
        for name in (
            "standing-head", f"standing-worker-{group}", "train-head", f"train-worker-{group}",
            "train-submitter", "serve-head", f"serve-worker-{group}",
        )
    }  # fmt: skip
    worker = pods[f"Pod.{team}.train-worker-{group}.yaml"]
    template = objects["RayJob"]["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]
    # KubeRay appends its init container to the template's (the first-step exporter)
    exporter, wait = worker["spec"]["initContainers"]
    assert (exporter["name"], wait["name"]) == ("first-step-exporter", "wait-gcs-ready")
    ray = template["spec"]["containers"][0]
    assert wait["securityContext"] == ray["securityContext"] and wait["image"] == ray["image"]
    assert {**worker["spec"], "initContainers": [exporter]} == template["spec"]
    assert worker["metadata"]["labels"]["ray.io/node-type"] == "worker"
    submitter = pods[f"Pod.{team}.train-submitter.yaml"]
    assert submitter["spec"] == objects["RayJob"]["spec"]["submitterPodTemplate"]["spec"]
    for name, pod in pods.items():  # one of each role: the RayJob's
        if ".train-" in name:
            assert validation_errors(pod, "1.35", reference_dir / "crds") == [], name


def test_two_pods_of_one_name_are_refused() -> None:
    runtime = {"kind": "TrainingRuntime", "metadata": {"name": "r", "namespace": "a"},
               "spec": {"template": {"spec": {"replicatedJobs": [
                   {"name": "node", "template": {"spec": {"template": {"spec": {}}}}}]}}}}  # fmt: skip
    with pytest.raises(ValueError, match="two pods"):
        pods_of({"one.yaml": runtime, "two.yaml": runtime})


def _prod_node_set(synthesized: dict[str, StackResult]) -> dict[str, Any]:
    return copy.deepcopy(next(m for m in _written(synthesized["prod"], "manifests").values()
                              if m["kind"] == "NodeSet"))  # fmt: skip


def test_a_node_set_cannot_unprivilege_slurmd_on_paper(
    synthesized: dict[str, StackResult],
) -> None:
    """The operator drops a NodeSet's empty and false values before it merges (structutils
    removeEmpty), so ``privileged: false`` leaves slurmd privileged, and its capabilities."""
    node_set = _prod_node_set(synthesized)
    node_set["spec"]["slurmd"]["securityContext"] = {
        "privileged": False, "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }  # fmt: skip
    (slurmd,) = node_set_pod(node_set)["spec"]["containers"]
    context = slurmd["securityContext"]
    assert context["privileged"] is True
    assert set(context["capabilities"]["add"]) == {"BPF", "NET_ADMIN", "SYS_ADMIN", "SYS_NICE"}
    assert context["capabilities"]["drop"] == ["ALL"]


def test_a_node_set_container_named_like_the_operators_is_refused(
    synthesized: dict[str, StackResult],
) -> None:
    """The operator joins containers rather than merging them: two named slurmd."""
    node_set = _prod_node_set(synthesized)
    node_set["spec"]["template"]["spec"]["containers"] = [{"name": "slurmd", "image": "x"}]
    with pytest.raises(ValueError, match="two containers named"):
        node_set_pod(node_set)


def test_mounts_merge_by_path_and_the_pod_carries_slurmds_labels(
    synthesized: dict[str, StackResult],
) -> None:
    node_set = _prod_node_set(synthesized)
    node_set["spec"]["slurmd"]["volumeMounts"].append(
        {"name": "other-etc", "mountPath": "/etc/slurm", "readOnly": True}
    )
    pod = node_set_pod(node_set)
    (slurmd,) = pod["spec"]["containers"]
    at_etc = [m for m in slurmd["volumeMounts"] if m["mountPath"] == "/etc/slurm"]
    assert [m["name"] for m in at_etc] == ["other-etc"]  # one mount per path, the NodeSet's
    labels = pod["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "slurmd"  # what allow-slurmd selects
    assert labels["app.kubernetes.io/instance"] == node_set["metadata"]["name"]


def _slurm_release(synthesized: dict[str, StackResult]) -> dict[str, Any]:
    path = synthesized["prod"].written.directory / "helm" / "slurm.yaml"
    release: dict[str, Any] = load_yaml(path.read_text())
    return release


def _chart_values(reference_dir: Path) -> dict[str, Any]:
    values = reference_dir / "charts" / "slurm" / "1.2.1" / "values.yaml"
    chart: dict[str, Any] = load_yaml(values.read_text())
    return chart


def test_the_login_pod_is_the_operators_login_container_with_the_stacks_values(
    synthesized: dict[str, StackResult],
) -> None:
    """slurm-operator v1.2.1 loginbuilder/login_app.go: sackd pointed at the controller's
    service, SSH on 22 with the host keys, sshd config, root's keys and sssd.conf mounted from
    the operator's and chart's objects; the stack's image, resources, probes and mounts kept."""
    release = _slurm_release(synthesized)
    (pod,) = login_set_pods(release)
    values = release["values"]["loginsets"]["login"]
    login, accounts = pod["spec"]["containers"]  # prod has a directory: the accounts loop
    assert accounts["name"] == "accounts" and accounts["image"] == login["image"]
    assert {m["name"] for m in accounts["volumeMounts"]} <= {
        v["name"] for v in pod["spec"]["volumes"]
    }
    image = values["login"]["image"]  # by digest (prod's login build): the chart drops the tag
    assert login["image"] == f"{image['repository']}@{image['digest']}"
    # sackd asks the controller's Service, which the operator names <controller>-controller
    sackd = {"name": "SACKD_OPTIONS", "value": "--conf-server slurm-controller.slurm:6817"}
    assert sackd in login["env"]
    mounts = {m["mountPath"]: m for m in login["volumeMounts"]}
    assert mounts["/etc/sssd/sssd.conf"]["subPath"] == "sssd.conf"
    assert mounts["/root/.ssh/authorized_keys"]["readOnly"] is True
    assert "/fsx" in mounts and "/etc/ssh/ssh_host_ed25519_key" in mounts
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert {m["name"] for m in login["volumeMounts"]} <= set(volumes)
    (sssd,) = volumes["sssd-conf"]["projected"]["sources"]
    secret_ref = (release["values"].get("sssd") or {}).get("secretRef") or {}
    # the stack's Secret where it names one (prod: a directory), else the chart's own
    assert sssd["secret"]["name"] == secret_ref.get("name", "slurm-sssd-conf")
    assert secret_ref  # prod names one
    assert login["resources"] == values["login"]["resources"]
    assert login["livenessProbe"]["tcpSocket"]["port"] == 22
    assert login["readinessProbe"]["exec"]["command"][-1] == "/run/slurm/sack.socket"
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    (initconf,) = pod["spec"]["initContainers"]
    assert initconf["name"] == "initconf" and initconf["resources"]["limits"]["memory"]


def test_the_chart_defaults_add_nothing_the_scan_needs(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """Synthesis has no chart, so the login pod is built from the stack's values alone; with
    the chart's loginsetDefaults merged under them it differs only in the default node label."""
    release = _slurm_release(synthesized)
    (alone,) = login_set_pods(release)
    (with_chart,) = login_set_pods(release, _chart_values(reference_dir))
    assert with_chart["spec"]["nodeSelector"].pop("kubernetes.io/os") == "linux"
    assert with_chart == alone


def test_chart_merging_keeps_defaults_under_empty_values() -> None:
    defaults = {"login": {"image": {"tag": "1"}, "env": [{"name": "A"}]}, "replicas": 1}
    merged = chart_merged(defaults, {"login": {"env": []}, "replicas": 3})
    assert merged == {"login": {"image": {"tag": "1"}, "env": [{"name": "A"}]}, "replicas": 3}
    assert chart_merged(defaults, {"login": {"image": {"tag": "2"}}})["login"]["image"] == {
        "tag": "2"
    }


def test_a_disabled_login_set_has_no_pod(synthesized: dict[str, StackResult]) -> None:
    release = copy.deepcopy(_slurm_release(synthesized))
    release["values"]["loginsets"]["login"]["enabled"] = False
    assert list(login_set_pods(release)) == []
    release["values"]["loginsets"] = {"a": {}, "b": {"enabled": True}}
    image = {"image": {"repository": "r", "tag": "t"}}
    defaults = {"loginsetDefaults": {"enabled": True, "login": image, "initconf": image}}
    names = [p["metadata"]["name"] for p in login_set_pods(release, defaults)]
    assert names == ["slurm-login-a", "slurm-login-b"]
    with pytest.raises(ValueError, match="requires an image"):
        list(login_set_pods(release, {"loginsetDefaults": {"login": image}}))


# -- Slurm's daemons (Controller, RestApi, Accounting) and the accounting database ------------


def _daemons(release: dict[str, Any], chart: dict[str, Any] | None = None) -> dict[str, Any]:
    return {p["metadata"]["labels"]["app.kubernetes.io/name"]: p
            for p in slurm_service_pods(release, chart)}  # fmt: skip


def _mounted(pod: dict[str, Any]) -> None:
    """Every mount of every container names one of the pod's volumes."""
    volumes = {v["name"] for v in pod["spec"]["volumes"]}
    for container in [*pod["spec"]["containers"], *pod["spec"].get("initContainers", [])]:
        assert {m["name"] for m in container.get("volumeMounts", [])} <= volumes, container["name"]


def _rendered(image: dict[str, str]) -> str:
    """What the chart runs for an image map: ``repository@digest`` when the map has a digest
    (the tag stays for people), ``repository:tag`` otherwise (slurm-operator v1.2.1
    helm/slurm/templates/_helpers.tpl, ``slurm.format-image``)."""
    if image.get("digest"):
        return f"{image['repository']}@{image['digest']}"
    return f"{image['repository']}:{image['tag']}"


def test_the_controller_pod_is_the_operators_slurmctld_with_the_stacks_values(
    synthesized: dict[str, StackResult],
) -> None:
    """slurm-operator v1.2.1 controllerbuilder/controller_app.go: slurmctld as the slurm user,
    probed on /livez and /readyz, its state on the claim at the cluster's spool, the log
    sidecar (no reconfigure sidecar: inplaceReconfigure is off); the stack's image, resources,
    hardening, scratch /tmp and seccomp kept."""
    release = _slurm_release(synthesized)
    values = release["values"]["controller"]
    pod = _daemons(release)["slurmctld"]
    assert pod["metadata"]["name"] == "slurm-controller-0"
    spec = pod["spec"]
    (slurmctld,) = spec["containers"]
    assert [c["name"] for c in spec["initContainers"]] == ["logfile"]
    assert slurmctld["image"] == _rendered(values["slurmctld"]["image"])
    assert slurmctld["resources"] == values["slurmctld"]["resources"]
    context = slurmctld["securityContext"]
    assert context["runAsUser"] == 401 and context["runAsNonRoot"] is True  # the operator's
    assert context["readOnlyRootFilesystem"] is True  # the stack's
    assert context["capabilities"] == {"drop": ["ALL"]}
    # The operator prunes false values of the resource's container (structutils.removeEmpty).
    assert values["slurmctld"]["securityContext"]["allowPrivilegeEscalation"] is False
    assert "allowPrivilegeEscalation" not in context
    mounts = {m["mountPath"]: m["name"] for m in slurmctld["volumeMounts"]}
    cluster = release["values"]["clusterName"]
    assert mounts[f"/var/spool/slurmctld/{cluster}"] == "statesave"
    assert mounts["/tmp"] == "tmp" and mounts["/etc/slurm"] == "slurm-etc"
    assert slurmctld["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "slurmctld"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["statesave"]["persistentVolumeClaim"]["claimName"] == (
        "statesave-slurm-controller-0"
    )
    _mounted(pod)
    (logfile,) = spec["initContainers"]
    assert logfile["restartPolicy"] == "Always"
    assert logfile["resources"] == values["logfile"]["resources"]
    assert logfile["image"].endswith(values["logfile"]["image"]["digest"])
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 401, "runAsGroup": 401, "fsGroup": 401,
        "seccompProfile": {"type": "RuntimeDefault"},
    }  # fmt: skip
    assert spec["nodeSelector"] == values["podSpec"]["nodeSelector"]
    assert pod["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"


def test_a_value_the_stack_sets_changes_the_controller_pod(
    synthesized: dict[str, StackResult],
) -> None:
    """The operator's merge rules (common/container.go, BuildContainer): a probe replaces the
    handler and keeps the operator's thresholds; args are joined; inplaceReconfigure adds the
    reconfigure sidecar from the values' image."""
    release = copy.deepcopy(_slurm_release(synthesized))
    controller = release["values"]["controller"]
    controller["inplaceReconfigure"] = True
    controller["slurmctld"]["livenessProbe"] = {"exec": {"command": ["true"]}}
    controller["slurmctld"]["args"] = ["-v"]
    pod = _daemons(release)["slurmctld"]
    (slurmctld,) = pod["spec"]["containers"]
    assert slurmctld["livenessProbe"] == {
        "exec": {"command": ["true"]}, "failureThreshold": 6, "periodSeconds": 10
    }  # fmt: skip
    assert slurmctld["args"] == ["-v"]
    reconfigure, logfile = pod["spec"]["initContainers"]
    assert reconfigure["name"] == "reconfigure" and logfile["name"] == "logfile"
    assert reconfigure["image"] == _rendered(controller["reconfigure"]["image"])
    controller["persistence"] = {"enabled": False}
    volumes = {v["name"]: v for v in _daemons(release)["slurmctld"]["spec"]["volumes"]}
    assert volumes["statesave"] == {"name": "statesave", "emptyDir": {}}


def test_the_restapi_and_accounting_pods_are_the_operators_with_the_stacks_values(
    synthesized: dict[str, StackResult],
) -> None:
    """restapibuilder/restapi_app.go: slurmrestd as nobody, listening on 6820 after its args,
    all plugins where accounting is on; accountingbuilder/accounting_app.go: slurmdbd as the
    slurm user with slurmdbd.conf from the operator's Secret, only a readiness probe."""
    release = _slurm_release(synthesized)
    values = release["values"]
    pods = _daemons(release)
    (slurmrestd,) = pods["slurmrestd"]["spec"]["containers"]
    assert slurmrestd["args"] == ["0.0.0.0:6820"]
    assert slurmrestd["securityContext"]["runAsUser"] == 65534
    assert slurmrestd["resources"] == values["restapi"]["slurmrestd"]["resources"]
    (slurmdbd,) = pods["slurmdbd"]["spec"]["containers"]
    assert pods["slurmdbd"]["metadata"]["name"] == "slurm-accounting-0"
    assert slurmdbd["resources"] == values["accounting"]["slurmdbd"]["resources"]
    assert slurmdbd["readinessProbe"] == {"tcpSocket": {"port": 6819}}
    assert "livenessProbe" not in slurmdbd
    (etc,) = [v for v in pods["slurmdbd"]["spec"]["volumes"] if v["name"] == "slurm-etc"]
    secrets = [s["secret"]["name"] for s in etc["projected"]["sources"]]
    assert secrets == ["slurm-accounting", *(values[k]["secretRef"]["name"]
                                             for k in ("slurmKey", "jwtKey"))]  # fmt: skip
    for pod in pods.values():
        _mounted(pod)
        assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["spec"]["automountServiceAccountToken"] is False
        (container,) = pod["spec"]["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
    release = copy.deepcopy(release)
    release["values"]["accounting"]["enabled"] = False
    pods = _daemons(release)
    assert set(pods) == {"slurmctld", "slurmrestd"}
    # Without accounting slurmrestd serves only slurmctld's plugin.
    assert pods["slurmrestd"]["spec"]["containers"][0]["args"] == [
        "-s", "openapi/slurmctld", "0.0.0.0:6820"
    ]  # fmt: skip


def test_the_chart_defaults_add_nothing_the_scan_needs_to_the_daemons(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """Coalesced with the chart's values.yaml (as Helm does), the daemons' pods differ only in
    the chart's default node label."""
    release = _slurm_release(synthesized)
    alone = _daemons(release)
    with_chart = _daemons(release, _chart_values(reference_dir))
    assert set(with_chart) == set(alone) == {"slurmctld", "slurmrestd", "slurmdbd"}
    for app, pod in with_chart.items():
        assert pod["spec"]["nodeSelector"].pop("kubernetes.io/os") == "linux", app
        assert pod == alone[app], app


def test_helm_coalescing_replaces_lists_and_drops_nulls() -> None:
    defaults = {"a": {"b": [1], "c": 1, "d": {"e": 1}}, "f": 2}
    merged = helm_coalesced(defaults, {"a": {"b": [], "c": None, "d": {"g": 2}}})
    assert merged == {"a": {"b": [], "d": {"e": 1, "g": 2}}, "f": 2}


def test_the_operator_merge_joins_args_and_replaces_probe_handlers() -> None:
    base = {"name": "x", "args": ["a"], "readinessProbe": {"httpGet": {"path": "/"},
                                                             "periodSeconds": 3}}  # fmt: skip
    merged = operator_container(
        base, {"args": ["b"], "readinessProbe": {"tcpSocket": {"port": 1}}, "env": []}
    )
    assert merged == {"name": "x", "args": ["a", "b"],
                      "readinessProbe": {"tcpSocket": {"port": 1}, "periodSeconds": 3}}  # fmt: skip


def _database(synthesized: dict[str, StackResult], stack: str = "prod") -> dict[str, Any]:
    manifests = _written(synthesized[stack], "manifests")
    return copy.deepcopy(manifests["MariaDB.slurm.slurm-accounting-db.yaml"])


def test_the_database_pod_is_mariadb_operators_with_the_stacks_values(
    synthesized: dict[str, StackResult],
) -> None:
    """mariadb-operator v26.6.0 pod_builder.go and container_builder.go: one mariadb
    container, TLS on by default, its data on the claim, the root password from the stack's
    Secret, no token; the resource's resources, security contexts, volumes and placement kept;
    labelled as the NetworkPolicy selects it."""
    mariadb = _database(synthesized)
    spec = mariadb["spec"]
    pod = pods_of({"db.yaml": mariadb})["Pod.slurm.slurm-accounting-db-0.yaml"]
    (server,) = pod["spec"]["containers"]
    assert server["name"] == "mariadb" and server["image"] == spec["image"]
    assert server["resources"] == spec["resources"]
    assert server["securityContext"] == spec["securityContext"]
    assert server["securityContext"]["allowPrivilegeEscalation"] is False  # kept, unlike Slinky
    assert pod["spec"]["securityContext"] == spec["podSecurityContext"]
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    assert mounts["/var/lib/mysql"] == "storage" and mounts["/etc/pki"] == "pki"
    assert {m["mountPath"] for m in spec["volumeMounts"]} <= set(mounts)
    env = {e["name"]: e for e in server["env"]}
    assert (
        env["MARIADB_ROOT_PASSWORD"]["valueFrom"]["secretKeyRef"]
        == (spec["rootPasswordSecretKeyRef"])
    )
    assert env["MYSQL_TCP_PORT"]["value"] == str(spec["port"])
    assert server["readinessProbe"]["exec"]["command"][0] == "bash"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["storage"]["persistentVolumeClaim"]["claimName"] == (
        "storage-slurm-accounting-db-0"
    )
    config = [s["configMap"]["name"] for s in volumes["config"]["projected"]["sources"]]
    assert "slurm-accounting-db-config" in config  # the myCnf the stack sets
    _mounted(pod)
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["serviceAccountName"] == "slurm-accounting-db"
    assert pod["spec"]["nodeSelector"] == spec["nodeSelector"]
    assert pod["metadata"]["labels"] == DATABASE_POD_LABELS
    assert pod["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"


def test_a_value_the_stack_sets_changes_the_database_pod(
    synthesized: dict[str, StackResult],
) -> None:
    """Without a podSecurityContext the operator's own (mysql, no seccomp); without TLS no
    certificates; a probe without a handler keeps the operator's query with its thresholds;
    replication is refused (its pods are not derived)."""
    mariadb = _database(synthesized)
    del mariadb["spec"]["podSecurityContext"]
    mariadb["spec"]["tls"] = {"enabled": False}
    mariadb["spec"]["livenessProbe"] = {"failureThreshold": 9, "periodSeconds": 0}
    spec = mariadb_pod(mariadb)["spec"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 999, "runAsGroup": 999, "fsGroup": 999
    }  # fmt: skip
    assert "pki" not in {v["name"] for v in spec["volumes"]}
    (server,) = spec["containers"]
    assert not [e for e in server["env"] if e["name"].startswith("TLS_")]
    assert server["livenessProbe"]["failureThreshold"] == 9
    assert server["livenessProbe"]["periodSeconds"] == 10  # a zero keeps the operator's
    mariadb["spec"]["replication"] = {"enabled": True}
    with pytest.raises(ValueError, match="replication"):
        mariadb_pod(mariadb)


# -- The observability charts' pods (synth/chart_pods.py) --------------------------------------


def _release(synthesized: dict[str, StackResult], name: str, stack: str = "prod") -> Any:
    return load_yaml((synthesized[stack].written.directory / "helm" / f"{name}.yaml").read_text())


def _chart_pods_written(releases: dict[str, Any], result: StackResult) -> list[dict[str, Any]]:
    """The chart pods a synthesis writes: none, and its note says so, without reference data."""
    try:
        return chart_pods(releases)
    except MissingReference:
        assert any("no chart pods" in note for note in result.written.notes)
        return []


def test_the_subchart_pods_take_nothing_from_the_subcharts_defaults(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """The grafana and kube-state-metrics subcharts' defaults are not in the reference data:
    what their pods run (images, security contexts, probes) is our values', and a field the
    template needs that the values lack is an error naming it, never a guess."""
    release = _release(synthesized, "monitoring")
    values = release["values"]
    defaults = chart_defaults(reference_dir)
    pods = {p["metadata"]["name"]: p for p in monitoring_pods(release, defaults)}
    grafana, ksm = pods["monitoring-grafana"], pods["monitoring-kube-state-metrics"]
    *sidecars, server, _ = grafana["spec"]["containers"]
    assert server["image"] == versions.GRAFANA_IMAGE
    assert {c["image"] for c in sidecars} == {versions.GRAFANA_SIDECAR_IMAGE}
    assert server["securityContext"] == values["grafana"]["containerSecurityContext"]
    assert grafana["spec"]["securityContext"] == values["grafana"]["securityContext"]
    assert server["livenessProbe"] == values["grafana"]["livenessProbe"]
    (exporter,) = ksm["spec"]["containers"]
    assert exporter["image"] == versions.KUBE_STATE_METRICS_IMAGE
    assert exporter["securityContext"] == values["kube-state-metrics"]["containerSecurityContext"]
    assert exporter["livenessProbe"]["httpGet"]["scheme"] == "HTTP"
    for pod, block in ((grafana, "grafana"), (ksm, "kube-state-metrics")):
        annotation = pod["metadata"]["annotations"][UNVERIFIED_ANNOTATION]
        assert annotation == UNVERIFIED_TEMPLATES[block]
    for block, path in (("grafana", ("containerSecurityContext",)),
                        ("grafana", ("sidecar", "dashboards", "SCProvider")),
                        ("kube-state-metrics", ("image", "tag"))):  # fmt: skip
        changed = copy.deepcopy(release)
        *parents, leaf = path
        functools.reduce(lambda tree, key: tree[key], parents, changed["values"][block]).pop(leaf)
        with pytest.raises(ValueError, match=re.escape(f"{block}.{'.'.join(path)} is not set")):
            list(monitoring_pods(changed, defaults))
    warnings.warn(
        "UNVERIFIED templates (their charts are not in the reference data; read from the "
        f"charts' sources only): {', '.join(UNVERIFIED_TEMPLATES.values())}",
        stacklevel=1,
    )


def test_the_chart_pods_follow_the_values_and_the_chart_defaults(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """A value the stack sets shows in the pod (resources, the reloader's probes, Alertmanager
    without a token, the exporter's placement); one it leaves unset is the chart's, read from
    the reference data (security contexts, service accounts, the operator's image); the pods
    written to pods/ are these."""
    release = _release(synthesized, "monitoring")
    values = release["values"]
    defaults = chart_defaults(reference_dir)
    chart = defaults.stack
    pods = {p["metadata"]["name"]: p for p in monitoring_pods(release, defaults)}
    written = synthesized["prod"].written.directory / "pods"
    for name, pod in pods.items():
        assert load_yaml((written / f"Pod.monitoring.{name}.yaml").read_text()) == pod, name
    assert set(pods) == {
        "monitoring-operator", "prometheus-monitoring-prometheus-0",
        "alertmanager-monitoring-alertmanager-0", "monitoring-grafana",
        "monitoring-kube-state-metrics",
    }  # fmt: skip
    for pod in pods.values():
        _mounted(pod)
    prometheus = pods["prometheus-monitoring-prometheus-0"]["spec"]
    server, reloader = prometheus["containers"]
    spec = values["prometheus"]["prometheusSpec"]
    assert server["resources"] == spec["resources"]  # set by the stack
    assert prometheus["securityContext"] == chart["prometheus"]["prometheusSpec"]["securityContext"]
    assert prometheus["serviceAccountName"] == values["prometheus"]["serviceAccount"]["name"]
    # Service discovery's token: projected into the prometheus container alone, none automatic.
    assert prometheus["automountServiceAccountToken"] is False
    token = {"name": "api-token", "mountPath": TOKEN_DIR, "readOnly": True}
    assert token in server["volumeMounts"] and token not in reloader["volumeMounts"]
    assert server["securityContext"]["readOnlyRootFilesystem"] is True  # the operator's
    reloader_values = values["prometheusOperator"]["prometheusConfigReloader"]
    assert reloader["resources"] == reloader_values["resources"]
    assert reloader["readinessProbe"] == {"httpGet": {"path": "/healthz", "port": 8080}}
    (init,) = prometheus["initContainers"]
    assert "readinessProbe" not in init and init["resources"] == reloader_values["resources"]
    assert prometheus["nodeSelector"] == spec["nodeSelector"]
    alertmanager = pods["alertmanager-monitoring-alertmanager-0"]["spec"]
    assert alertmanager["automountServiceAccountToken"] is False
    operator = pods["monitoring-operator"]["spec"]
    (container,) = operator["containers"]
    assert container["securityContext"] == chart["prometheusOperator"]["containerSecurityContext"]
    image = chart["prometheusOperator"]["image"]
    assert not image["tag"] and defaults.stack_app_version.startswith("v")
    assert container["image"] == (
        f"{image['registry']}/{image['repository']}:{defaults.stack_app_version}"
    )
    assert container["readinessProbe"]["httpGet"]["port"] == "https"  # the chart's TLS
    grafana = pods["monitoring-grafana"]
    *sidecars, server, orgs = grafana["spec"]["containers"]
    assert [c["name"] for c in sidecars] == ["grafana-sc-dashboard", "grafana-sc-datasources"]
    assert all(c["resources"] == values["grafana"]["sidecar"]["resources"] for c in sidecars)
    assert all(token in c["volumeMounts"] for c in sidecars)  # they watch ConfigMaps
    assert server["name"] == "grafana" and token not in server["volumeMounts"]
    # The organisations' container after Grafana's as the values write it (extraContainers),
    # its ConfigMap beside the token (extraContainerVolumes), and the providers' directory an
    # emptyDir mounted in Grafana's container (extraEmptyDirMounts).
    assert [orgs] == load_yaml(values["grafana"]["extraContainers"])
    volumes = {v["name"]: v for v in grafana["spec"]["volumes"]}
    assert volumes[grafana_orgs.PROVIDERS_VOLUME] == {"name": grafana_orgs.PROVIDERS_VOLUME,
                                                      "emptyDir": {}}  # fmt: skip
    assert {"name": grafana_orgs.PROVIDERS_VOLUME,
            "mountPath": grafana_orgs.PROVIDERS_PATH} in server["volumeMounts"]  # fmt: skip
    assert volumes[grafana_orgs.ORGS_VOLUME]["configMap"]["name"] == grafana_orgs.ORGS_CONFIG_MAP
    assert "sc-dashboard-provider" not in volumes  # SCProvider: false
    _mounted(grafana)
    for pod in pods.values():
        assert pod["spec"]["automountServiceAccountToken"] is False, pod["metadata"]["name"]
    # A value set wins over the chart's: no Alertmanager, the reloader without probes.
    changed = copy.deepcopy(release)
    changed["values"]["alertmanager"]["enabled"] = False
    changed["values"]["prometheusOperator"]["prometheusConfigReloader"]["enableProbe"] = False
    again = {p["metadata"]["name"]: p for p in monitoring_pods(changed, defaults)}
    assert "alertmanager-monitoring-alertmanager-0" not in again
    assert (
        "readinessProbe" not in again["prometheus-monitoring-prometheus-0"]["spec"]["containers"][1]
    )


def test_the_dcgm_exporters_pod_is_the_charts_with_the_stacks_values(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """dcgm-exporter 4.8.2 daemonset.yaml: root with SYS_ADMIN (the chart's, unset by the
    stack), the pod-resources hostPath, no token; the stack's placement, priority and
    counters file."""
    release = _release(synthesized, "dcgm-exporter")
    chart = chart_defaults(reference_dir).dcgm_exporter
    pod = dcgm_exporter_pod(release, chart)
    written = (
        synthesized["prod"].written.directory / "pods" / "Pod.monitoring-nodes.dcgm-exporter.yaml"
    )
    assert load_yaml(written.read_text()) == pod
    spec, values = pod["spec"], release["values"]
    (exporter,) = spec["containers"]
    assert exporter["securityContext"] == chart["securityContext"]
    assert exporter["image"] == f"{chart['image']['repository']}:{chart['image']['tag']}"
    assert spec["automountServiceAccountToken"] is False
    assert spec["affinity"] == values["affinity"] and spec["tolerations"] == values["tolerations"]
    assert {"name": "pod-gpu-resources",
            "hostPath": {"path": values["kubeletPath"]}} in spec["volumes"]  # fmt: skip
    counters = {m["mountPath"] for m in exporter["volumeMounts"]}
    assert values["extraVolumeMounts"][0]["mountPath"] in counters
    _mounted(pod)


def test_the_chart_pods_pass_their_namespaces_pod_security(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """The metrics stack's pods pass restricted (monitoring enforces baseline and warns
    restricted); the DCGM exporter passes only privileged, its namespace's."""
    result = synthesized["prod"]
    pods = _written(result, "pods")
    namespaces = {m["metadata"]["name"]: m["metadata"].get("labels") or {}
                  for m in _written(result, "manifests").values()
                  if m["kind"] == "Namespace"}  # fmt: skip
    rebuilt = [p for p in pods.values() if p["metadata"]["namespace"].startswith("monitoring")]
    assert len(rebuilt) == 6
    for pod in rebuilt:
        labels = namespaces[pod["metadata"]["namespace"]]
        name = pod["metadata"]["name"]
        enforce = labels["pod-security.kubernetes.io/enforce"]
        assert refusals(pod["spec"], enforce) == [], name
        if enforce == "baseline":
            assert refusals(pod["spec"], "restricted") == [], name
        else:
            assert name == "dcgm-exporter" and refusals(pod["spec"], "baseline"), name


def test_without_reference_data_the_synthesis_writes_no_chart_pods_and_says_so(
    synthesized: dict[str, StackResult],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``python -m synth dev`` with the reference data elsewhere: it still succeeds, writes the
    rest of ``pods/`` but no chart pod, and says so on one stderr line that names the missing
    file and how to get it. The session's run stands in for the program (the files are
    written again, from its records, under the empty reference directory)."""
    session = synthesized["dev"]
    releases = {r["release"]: r for r in _written(session, "helm").values()}
    rebuilt = {f"Pod.{p['metadata']['namespace']}.{p['metadata']['name']}.yaml"
               for p in _chart_pods_written(releases, session)}  # fmt: skip
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(REFERENCE_ENV, str(empty))

    def rewritten(stack: str, out: Path, root: Path = REPOSITORY_ROOT) -> StackResult:
        return dataclasses.replace(session, written=write_stack(session.records, out / stack))

    monkeypatch.setattr("synth.__main__.synthesize_stack", rewritten)
    assert synth_main(["dev", "--out", str(tmp_path / "out")]) == 0
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "chart pods" in line]
    assert line.startswith("dev: WARNING: no chart pods in pods/")
    assert str(empty / "charts") in line and "scripts/fetch-reference" in line
    written = {p.name for p in (tmp_path / "out" / "dev" / "pods").iterdir()}
    before = {p.name for p in (session.written.directory / "pods").iterdir()}
    assert rebuilt <= before and written == before - rebuilt
