"""The Lustre boundary (issue 39, item 10): no team pod may bind a port below 1024, from which
the file servers trust whatever uid and groups a client claims. Proven on each stack's
synthesized ValidatingAdmissionPolicy with its own CEL (``admit``, cel-python): each attack
refused in every shape that makes pods, and the stacks' runtimes and a hardened pod admitted."""

from __future__ import annotations

import base64
import copy
import email
import tomllib
from collections.abc import Callable
from typing import Any, Final

import pytest

from components.lustre_boundary import LUSTRE_BOUNDARY_POLICY
from synth.jobs.admission import admit
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.conftest import STACKS
from tests.pod_shapes import make_pod, trainjob, workload_shapes
from tests.test_admission_policies import BINDING
from tests.test_readme import _marked_examples
from tests.test_tenancy import _namespace
from tests.test_tenant_api import _binding, _in_team, _policy, _team

HARDENED: Final = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _pod_spec(**container: Any) -> dict[str, Any]:
    main: dict[str, Any] = {
        "name": "main",
        "image": "x",
        "securityContext": copy.deepcopy(HARDENED),
    }
    main.update(container)
    return {
        "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "supplementalGroups": [5001]},
        "containers": [main],
    }


def _root_default() -> dict[str, Any]:
    """A root container with the runtime's default capabilities (NET_BIND_SERVICE among them)."""
    spec = _pod_spec()
    del spec["containers"][0]["securityContext"]
    del spec["securityContext"]
    return spec


def _adds_bind() -> dict[str, Any]:
    spec = _pod_spec()
    spec["containers"][0]["securityContext"]["capabilities"]["add"] = ["NET_BIND_SERVICE"]
    return spec


def _drops_other() -> dict[str, Any]:
    spec = _pod_spec()
    spec["containers"][0]["securityContext"]["capabilities"]["drop"] = ["NET_RAW"]
    return spec


def _sysctl(value: str, name: str = "net.ipv4.ip_unprivileged_port_start") -> dict[str, Any]:
    spec = _pod_spec()
    spec["securityContext"]["sysctls"] = [{"name": name, "value": value}]
    return spec


def _init_keeps() -> dict[str, Any]:
    spec = _pod_spec()
    spec["initContainers"] = [{"name": "fetch", "image": "x"}]
    return spec


def _host_network() -> dict[str, Any]:
    spec = _pod_spec()
    spec["hostNetwork"] = True
    return spec


ATTACKS: Final[dict[str, Callable[[], dict[str, Any]]]] = {
    "root-with-default-capabilities": _root_default,
    "adds-net-bind-service": _adds_bind,
    "drops-only-net-raw": _drops_other,
    "sysctl-zero": lambda: _sysctl("0"),
    "sysctl-1023": lambda: _sysctl("1023"),
    "sysctl-slash-separated": lambda: _sysctl("0", "net/ipv4/ip_unprivileged_port_start"),
    "init-container-keeps-it": _init_keeps,
    "host-network": _host_network,
}


@pytest.mark.parametrize("stack", STACKS)
def test_the_policy_is_bound_to_team_namespaces(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    policy = _policy(result, LUSTRE_BOUNDARY_POLICY)
    binding = _binding(result, LUSTRE_BOUNDARY_POLICY)
    assert binding["validationActions"] == ["Deny"]
    assert binding["matchResources"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "trainingplatform.io/team", "operator": "Exists"}]
    }
    assert policy["failurePolicy"] == "Fail"
    rules = {
        (group, resource): set(rule["operations"])
        for rule in policy["matchConstraints"]["resourceRules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    for key in [
        ("", "pods"),
        ("", "pods/ephemeralcontainers"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("jobset.x-k8s.io", "jobsets"),
        ("trainer.kubeflow.org", "trainjobs"),
        ("kubeflow.org", "pytorchjobs"),
        ("batch.volcano.sh", "jobs"),
    ]:
        assert rules[key] == {"CREATE", "UPDATE"}, key
    assert any(r.type == BINDING for r in result.records)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_no_team_pod_may_bind_a_privileged_port(
    synthesized: dict[str, StackResult], stack: str, attack: str
) -> None:
    result = synthesized[stack]
    policy, namespace, name = _in_team(result, LUSTRE_BOUNDARY_POLICY)
    for kind, obj in workload_shapes(ATTACKS[attack](), name).items():
        ok, message = admit(policy, obj, namespace)
        assert not ok, (attack, kind)
        assert message and "Lustre" in message and "NET_BIND_SERVICE" in message
    # the legitimate spec in every shape is admitted, and a change to the attack refused
    for kind, obj in workload_shapes(_pod_spec(), name).items():
        assert admit(policy, obj, namespace) == (True, None), kind
        attacked = workload_shapes(ATTACKS[attack](), name)[kind]
        assert not admit(policy, attacked, namespace, old=obj)[0], (attack, kind)


@pytest.mark.parametrize("stack", STACKS)
def test_ephemeral_containers_are_judged_too(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """``kubectl debug`` adds an ephemeral container with an UPDATE of the running pod."""
    result = synthesized[stack]
    policy = _policy(result, LUSTRE_BOUNDARY_POLICY)
    namespace, _, _ = _team(result)
    running = make_pod(_pod_spec(), namespace["metadata"]["name"])
    debugged = copy.deepcopy(running)
    debugged["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox"}]
    ok, message = admit(policy, debugged, namespace, old=running)
    assert not ok and message
    debugged["spec"]["ephemeralContainers"][0]["securityContext"] = copy.deepcopy(HARDENED)
    assert admit(policy, debugged, namespace, old=running) == (True, None)
    # a status-only update of a pod made before the policy is not judged
    legacy = make_pod(_root_default(), namespace["metadata"]["name"])
    relabelled = copy.deepcopy(legacy)
    relabelled["metadata"]["labels"] = {"x": "y"}
    assert admit(policy, relabelled, namespace, old=legacy) == (True, None)


@pytest.mark.parametrize("stack", STACKS)
def test_trainjob_patches_may_not_reopen_the_ports(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """A patch merges into the runtime's hardened containers: it is judged on what it says."""
    result = synthesized[stack]
    policy, namespace, name = _in_team(result, LUSTRE_BOUNDARY_POLICY)
    assert admit(policy, trainjob(None, name), namespace) == (True, None)
    # a patch that names a container without a security context keeps the runtime's
    plain = {"containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]}
    assert admit(policy, trainjob(plain, name), namespace) == (True, None)
    # adding a capability on baseline's list (not NET_BIND_SERVICE) stays allowed
    chown = {
        "containers": [
            {
                "name": "node",
                "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}},
            }
        ]
    }
    assert admit(policy, trainjob(chown, name), namespace) == (True, None)
    attacks: dict[str, dict[str, Any]] = {
        "add": {
            "containers": [
                {"name": "node", "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}
            ]
        },
        "drop-replaced": {
            "containers": [{"name": "node", "securityContext": {"capabilities": {"drop": []}}}]
        },
        "sysctl": {
            "securityContext": {
                "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]
            }
        },
    }
    for what, patch in attacks.items():
        ok, message = admit(policy, trainjob(patch, name), namespace)
        assert not ok and message, what
        assert not admit(policy, trainjob(patch, name), namespace, old=trainjob(None, name))[0]


@pytest.mark.parametrize("stack", STACKS)
def test_the_stacks_own_runtimes_and_a_raised_sysctl_pass(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    policy, namespace, name = _in_team(result, LUSTRE_BOUNDARY_POLICY)
    runtimes = [
        r
        for r in result.records
        if r.inputs.get("kind") in {"TrainingRuntime", "ClusterTrainingRuntime"}
    ]
    assert runtimes
    for record in runtimes:
        for job in record.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            pod = make_pod(job["template"]["spec"]["template"]["spec"], name)
            assert admit(policy, pod, namespace) == (True, None), (record.name, job["name"])
    # setting the sysctl at or above the kernel's default keeps the ports closed
    for value in ("1024", "2048"):
        assert admit(policy, make_pod(_sysctl(value), name), namespace) == (True, None)
    # dropping just NET_BIND_SERVICE is enough; other sysctls are not this policy's business
    only = _pod_spec()
    only["containers"][0]["securityContext"]["capabilities"] = {"drop": ["NET_BIND_SERVICE"]}
    only["securityContext"]["sysctls"] = [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]
    assert admit(policy, make_pod(only, name), namespace) == (True, None)


def test_every_job_example_of_the_docs_is_admitted(synthesized: dict[str, StackResult]) -> None:
    """The how-to pages' jobs run as written: their pods keep the privileged ports closed."""
    examples = _marked_examples("<!-- runs-on: STACK -->")
    assert examples
    for stack, document in examples:
        result = synthesized[stack]
        policy = _policy(result, LUSTRE_BOUNDARY_POLICY)
        namespace = _namespace(result, str(document["metadata"]["namespace"]))  # type: ignore[index]
        assert admit(policy, document, namespace) == (True, None), document["kind"]


# ------------------------------------------------------------------ every node keeps the ports

NODE_CLASS: Final = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
LAUNCH_TEMPLATE: Final = "aws:ec2/launchTemplate:LaunchTemplate"


def _keeps_privileged_ports(user_data: str, *, bottlerocket: bool) -> bool:
    """Whether a node's user data turns containerd's unprivileged ports off, read as the node
    reads it: Bottlerocket's TOML settings, or the NodeConfig part nodeadm merges (AL2023)."""
    if bottlerocket:
        settings = tomllib.loads(user_data)["settings"]["container-runtime"]
        return settings.get("enable-unprivileged-ports") is False
    message = email.message_from_string(user_data)
    for part in message.walk():
        if part.get_content_type() == "application/node.eks.aws":
            config = load_yaml(str(part.get_payload()))["spec"]["containerd"]["config"]
            runtime = tomllib.loads(config)["plugins"]["io.containerd.cri.v1.runtime"]
            return runtime.get("enable_unprivileged_ports") is False
    return False


@pytest.mark.parametrize("stack", STACKS)
def test_every_node_of_the_stack_keeps_privileged_ports_for_root(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Every EC2NodeClass (accelerated, general and general-lustre, whose pods mount Lustre) and
    the system node group's launch template: no node lets a pod bind a port below 1024."""
    records = synthesized[stack].records
    classes = [r for r in records if r.type == NODE_CLASS]
    assert {r.inputs["metadata"]["name"] for r in classes} >= {"general", "general-lustre"}
    for record in classes:
        spec = record.inputs["spec"]
        alias = spec["amiSelectorTerms"][0]["alias"]
        assert _keeps_privileged_ports(
            spec.get("userData", ""), bottlerocket=alias.startswith("bottlerocket@")
        ), record.inputs["metadata"]["name"]
    # the system node group's (the file system's admin client runs no pods)
    (template,) = [r for r in records if r.type == LAUNCH_TEMPLATE and r.name.endswith("-system")]
    decoded = base64.b64decode(template.inputs["userData"]).decode()
    assert _keeps_privileged_ports(decoded, bottlerocket=False)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("spelling", ["all", "All", "net_bind_service", "Net_Bind_Service"])
def test_a_drop_is_read_in_any_case(
    synthesized: dict[str, StackResult], stack: str, spelling: str
) -> None:
    """containerd upper-cases a dropped name before it compares (``ALL`` too): ``drop: [all]``
    drops every capability and is admitted in every shape, on creation and on update."""
    result = synthesized[stack]
    policy, namespace, name = _in_team(result, LUSTRE_BOUNDARY_POLICY)
    lower = _pod_spec()
    lower["containers"][0]["securityContext"]["capabilities"]["drop"] = [spelling]
    for kind, obj in workload_shapes(lower, name).items():
        assert admit(policy, obj, namespace) == (True, None), kind
        old = workload_shapes(_pod_spec(), name)[kind]
        assert admit(policy, obj, namespace, old=old) == (True, None), kind
    patch = {
        "containers": [{"name": "node", "securityContext": {"capabilities": {"drop": [spelling]}}}]
    }
    assert admit(policy, trainjob(patch, name), namespace) == (True, None)
    # another capability, in whatever case, still leaves the container NET_BIND_SERVICE
    other = "net_raw" if spelling.islower() else "Net_Raw"
    lower["containers"][0]["securityContext"]["capabilities"]["drop"] = [other]
    for kind, obj in workload_shapes(lower, name).items():
        assert not admit(policy, obj, namespace)[0], kind
