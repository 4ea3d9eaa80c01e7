"""``pods/``: the pods custom resources stand for, written as Pods for scanners and reviewers."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from synth.pods import chart_merged, login_set_pods, node_set_pod, pods_of
from synth.run import StackResult
from tests.conftest import STACKS, stack_data
from tests.schemas import validation_errors


def _written(result: StackResult, folder: str) -> dict[str, dict[str, Any]]:
    directory = result.written.directory / folder
    return {path.name: yaml.safe_load(path.read_text()) for path in directory.glob("*.yaml")}


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
    login_sets = (stack_data(stack).get("slurm") or {}).get("login")
    assert set(pods) == set(expected) | {
        f"Pod.slurm.{n['metadata']['name']}-0.yaml" for n in node_sets
    } | ({"Pod.slurm.slurm-login-login.yaml"} if login_sets else set())
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
    release: dict[str, Any] = yaml.safe_load(path.read_text())
    return release


def _chart_values(reference_dir: Path) -> dict[str, Any]:
    values = reference_dir / "charts" / "slurm" / "1.2.1" / "values.yaml"
    chart: dict[str, Any] = yaml.safe_load(values.read_text())
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
    assert login["image"] == "{repository}:{tag}".format(**values["login"]["image"])
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
