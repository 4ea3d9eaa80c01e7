"""The tenant boundary as a cluster would enforce it.

* the queue policy's CEL, run with cel-python the way the API server runs a
  ValidatingAdmissionPolicy (tests/test_admission_policies.py, ``admit``), against the objects
  Trainer, Volcano and users create;
* the NetworkPolicies every stack synthesizes, through a reachability model written from the
  API's rules (tests/network_model.py): which pod may reach which;
* Pod Security labels, hardened runtime pods, job ServiceAccounts and access entries.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Final

import pytest

from components.config import parse_platform_config
from components.tenancy import BASELINE_CAPABILITIES
from synth.engine import ResourceRecord
from synth.jobs.admission import admit
from synth.run import StackResult
from tests.config_problems import assert_reported
from tests.conftest import STACKS, ProgramRun, stack_data
from tests.network_model import Address, Cluster, Pod
from tests.team_objects import team_runtimes
from tests.test_readme import _marked_examples

TEAM_LABEL: Final = "trainingplatform.io/team"
QUEUE_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"
QUEUE_POLICY: Final = "trainingplatform-team-queues"
POLICY: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
NAMESPACE: Final = "kubernetes:core/v1:Namespace"
NETWORK_POLICY: Final = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
SERVICE_ACCOUNT: Final = "kubernetes:core/v1:ServiceAccount"
RUNTIME: Final = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
ACCESS_ENTRY: Final = "aws:eks/accessEntry:AccessEntry"
ADDON: Final = "aws:eks/addon:Addon"
PSA: Final = "pod-security.kubernetes.io"


def _named(result: StackResult, resource_type: str, name: str) -> ResourceRecord:
    (record,) = [
        r
        for r in result.records
        if r.type == resource_type and r.inputs["metadata"]["name"] == name
    ]
    return record


def _team_namespaces(result: StackResult) -> dict[str, dict[str, Any]]:
    return {
        r.inputs["metadata"]["name"]: r.inputs
        for r in result.records
        if r.type == NAMESPACE and TEAM_LABEL in r.inputs["metadata"].get("labels", {})
    }


# --- queues: the admission policy's CEL -----------------------------------------------------


@pytest.fixture(scope="module")
def prod(synthesized: dict[str, StackResult]) -> StackResult:
    """Two teams (ml-research, ml-product), Slurm with declared login sources."""
    return synthesized["prod"]


def _namespace(result: StackResult, team: str) -> dict[str, Any]:
    return _team_namespaces(result)[team]


def _pod_group(namespace: str, queue: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": 2}
    # The CRD defaults spec.queue to "default" before admission (volcano v1.15.1
    # config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml).
    spec["queue"] = "default" if queue is None else queue
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": namespace}, "spec": spec}  # fmt: skip


def _volcano_job(namespace: str, queue: str) -> dict[str, Any]:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "job", "namespace": namespace},
            "spec": {"queue": queue, "minAvailable": 2, "tasks": []}}  # fmt: skip


def _pod(namespace: str, *, scheduler: str | None, annotations: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    metadata: dict[str, Any] = {"name": "pod", "namespace": namespace}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _trainjob(namespace: str, *patched_queues: str) -> dict[str, Any]:
    """A TrainJob of the team's runtime whose runtimePatches name these queues, in order."""
    spec: dict[str, Any] = {"runtimeRef": {"name": "torch-p5", "kind": "TrainingRuntime"}}
    if patched_queues:
        spec["runtimePatches"] = [
            {
                "manager": "user",
                "trainingRuntimeSpec": {
                    "template": {"metadata": {"annotations": {QUEUE_ANNOTATION: queue}}}
                },
            }
            for queue in patched_queues
        ] + [
            {
                "manager": "kueue",
                "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"x": "y"}}}},
            }
        ]  # a later patch that names no queue changes nothing
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "job", "namespace": namespace,
                         # Trainer v2.3.0 reads no queue from the TrainJob's own annotations
                         "annotations": {QUEUE_ANNOTATION: "ignored-by-trainer"}},
            "spec": spec}  # fmt: skip


def _pytorchjob(namespace: str, queue: str | None) -> dict[str, Any]:
    run_policy: dict[str, Any] = {}
    if queue is not None:
        run_policy["schedulingPolicy"] = {"queue": queue}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "job", "namespace": namespace},
            "spec": {"runPolicy": run_policy, "pytorchReplicaSpecs": {}}}  # fmt: skip


def _trainers_pod_group(runtime: ResourceRecord, trainjob: dict[str, Any]) -> dict[str, Any]:
    """The PodGroup Trainer's volcano plugin builds for a TrainJob of ``runtime``: queue from
    the runtime's template annotations with each runtimePatch's merged over them, in order
    (kubeflow/trainer v2.3.0 pkg/runtime/core/trainingruntime.go, newRuntimeInfo;
    pkg/runtime/framework/plugins/volcano/volcano.go, Build)."""
    annotations = dict(
        runtime.inputs["spec"]["template"].get("metadata", {}).get("annotations", {})
    )
    for patch in trainjob["spec"].get("runtimePatches", []):
        metadata = patch.get("trainingRuntimeSpec", {}).get("template", {}).get("metadata", {})
        annotations.update(metadata.get("annotations", {}))
    # without the annotation, the CRD's default queue
    spec: dict[str, Any] = {"minMember": 2, "queue": annotations.get(QUEUE_ANNOTATION, "default")}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": trainjob["metadata"]["name"],
                         "namespace": trainjob["metadata"]["namespace"]},
            "spec": spec}  # fmt: skip


@pytest.mark.parametrize("stack", STACKS)
def test_the_queue_policy_is_bound_with_deny_to_every_team_namespace(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    policy = _named(result, POLICY, QUEUE_POLICY).inputs["spec"]
    binding = _named(result, BINDING, QUEUE_POLICY)
    assert binding.inputs["spec"]["validationActions"] == ["Deny"]
    assert binding.inputs["spec"]["policyName"] == QUEUE_POLICY
    assert policy["failurePolicy"] == "Fail"
    rules = {(g, r) for rule in policy["matchConstraints"]["resourceRules"]
             for g in rule["apiGroups"] for r in rule["resources"]}  # fmt: skip
    assert {("scheduling.volcano.sh", "podgroups"), ("batch.volcano.sh", "jobs"),
            ("trainer.kubeflow.org", "trainjobs"), ("kubeflow.org", "pytorchjobs"),
            ("", "pods")} <= rules  # fmt: skip
    selector = binding.inputs["spec"]["matchResources"]["namespaceSelector"]
    assert selector == {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}
    for name, namespace in _team_namespaces(result).items():
        assert namespace["metadata"]["labels"][TEAM_LABEL] == name


def test_trainers_pod_groups_pass_for_the_teams_own_runtimes(prod: StackResult) -> None:
    policy = _named(prod, POLICY, QUEUE_POLICY).inputs["spec"]
    runtimes = team_runtimes(prod.records)
    assert runtimes
    for runtime in runtimes:
        team = runtime.inputs["metadata"]["namespace"]
        namespace = _namespace(prod, team)
        trainjob = _trainjob(team)
        assert admit(policy, trainjob, namespace) == (True, None)
        pod_group = _trainers_pod_group(runtime, trainjob)
        assert pod_group["spec"]["queue"] == team
        assert admit(policy, pod_group, namespace) == (True, None), runtime.name


@pytest.mark.parametrize(
    ("patched", "admitted"),
    [(("ml-research",), False), (("ml-product",), True),
     (("ml-research", "ml-product"), True), (("ml-product", "ml-research"), False)],
    ids=["other", "own", "other-then-own", "own-then-other"],
)  # fmt: skip
def test_a_trainjob_is_judged_by_the_queue_its_pod_group_will_get(
    prod: StackResult, patched: tuple[str, ...], admitted: bool
) -> None:
    """The last runtimePatch naming a queue wins, as in Trainer; the policy's verdict on the
    TrainJob is the one its PodGroup would get."""
    policy = _named(prod, POLICY, QUEUE_POLICY).inputs["spec"]
    namespace = _namespace(prod, "ml-product")
    runtime = next(r for r in prod.records
                   if r.type == RUNTIME and r.inputs["metadata"]["namespace"] == "ml-product")  # fmt: skip
    trainjob = _trainjob("ml-product", *patched)
    ok, message = admit(policy, trainjob, namespace)
    assert ok is admitted, message
    assert admit(policy, _trainers_pod_group(runtime, trainjob), namespace)[0] is admitted
    if not admitted:
        assert message is not None
        assert "belongs to team ml-product" in message and "not ml-research" in message


def test_status_updates_of_a_pod_group_are_not_judged(prod: StackResult) -> None:
    """Volcano writes PodGroup status with full updates: a PodGroup in default made before the
    policy keeps getting them, and a changed queue is still refused."""
    policy = _named(prod, POLICY, QUEUE_POLICY).inputs["spec"]
    namespace = _namespace(prod, "ml-research")
    old = _pod_group("ml-research", "default")
    with_status = {**old, "status": {"phase": "Running"}}
    assert admit(policy, with_status, namespace, old=old) == (True, None)
    moved = _pod_group("ml-research", "ml-product")
    assert not admit(policy, moved, namespace, old=old)[0]
    assert not admit(policy, old, namespace)[0]  # created so today: refused


@pytest.mark.parametrize(
    ("make", "admitted", "words"),
    [
        (lambda ns: _pod_group(ns, "ml-research"), True, None),
        (lambda ns: _pod_group(ns, "ml-product"), False, "not ml-product"),
        (lambda ns: _pod_group(ns, None), False, "not default"),
        (lambda ns: _volcano_job(ns, "ml-research"), True, None),
        (lambda ns: _volcano_job(ns, "ml-product"), False, "not ml-product"),
        (lambda ns: _volcano_job(ns, "default"), False, "not default"),
        # the legacy operator gives its PodGroup "default" when the job names no queue
        (lambda ns: _pytorchjob(ns, "ml-research"), True, None),
        (lambda ns: _pytorchjob(ns, "ml-product"), False, "not ml-product"),
        (lambda ns: _pytorchjob(ns, None), False, "not no queue"),
        (lambda ns: _pod(ns, scheduler=None, annotations={}), True, None),
        (lambda ns: _pod(ns, scheduler="volcano", annotations={GROUP_ANNOTATION: "job"}),
         True, None),
        (lambda ns: _pod(ns, scheduler="volcano", annotations={QUEUE_ANNOTATION: "ml-research"}),
         True, None),
        (lambda ns: _pod(ns, scheduler="volcano", annotations={QUEUE_ANNOTATION: "ml-product"}),
         False, "not ml-product"),
        (lambda ns: _pod(ns, scheduler="volcano", annotations={}), False, "not no queue"),
    ],
    ids=["podgroup-own", "podgroup-other", "podgroup-none", "job-own", "job-other",
         "job-default", "legacy-own", "legacy-other", "legacy-none", "pod-default-scheduler", "pod-in-a-gang", "pod-own-queue",
         "pod-other-queue", "pod-volcano-no-queue"],
)  # fmt: skip
def test_gangs_in_a_team_namespace_go_to_its_queue(
    prod: StackResult,
    make: Callable[[str], dict[str, Any]],
    admitted: bool,
    words: str | None,
) -> None:
    policy = _named(prod, POLICY, QUEUE_POLICY).inputs["spec"]
    ok, message = admit(policy, make("ml-research"), _namespace(prod, "ml-research"))
    assert ok is admitted, message
    if words:
        assert message is not None and words in message
        assert "set spec.queue" in message and "to ml-research" in message


# --- network isolation: the reachability model ----------------------------------------------


def _network(result: StackResult) -> Cluster:
    policies = [r.inputs for r in result.records if r.type == NETWORK_POLICY]
    labels = {name: ns["metadata"]["labels"] for name, ns in _team_namespaces(result).items()}
    return Cluster(policies, labels)


def _slurm(app: str) -> Pod:
    return Pod("slurm", {"app.kubernetes.io/name": app, "app.kubernetes.io/instance": "slurm"})


MARIADB_POD: Final = Pod(
    "slurm",
    {"app.kubernetes.io/name": "mariadb", "app.kubernetes.io/instance": "slurm-accounting-db"},
)


@pytest.mark.parametrize("stack", STACKS)
def test_a_team_pod_is_reached_only_from_its_own_namespace(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    network = _network(synthesized[stack])
    teams = list(_team_namespaces(synthesized[stack]))
    for team in teams:
        worker = Pod(team, {"jobset.sigs.k8s.io/jobset-name": "job"})
        assert network.may_reach(Pod(team, {"app": "anything"}), worker, 29500)
        for other in [*teams, "default", "kube-system", "slurm", "kubeflow-system"]:
            if other != team:
                assert not network.may_reach(Pod(other), worker, 29500), (other, team)
        assert not network.may_reach(_slurm("login"), worker, 22)
        assert not network.may_reach(Address("10.40.1.10"), worker, 29500)


def test_slurm_daemons_are_reached_only_by_the_daemons_that_talk_to_them(
    prod: StackResult,
) -> None:
    network = _network(prod)
    team = Pod("ml-research")
    operator = Pod("slinky", {"app.kubernetes.io/name": "slurm-operator"})
    mariadb_operator = Pod("mariadb-operator", {"app.kubernetes.io/name": "mariadb-operator"})
    cases = [
        # (source, target, port, allowed)
        (_slurm("slurmd"), _slurm("slurmctld"), 6817, True),
        (_slurm("login"), _slurm("slurmctld"), 6817, True),
        (_slurm("slurmrestd"), _slurm("slurmctld"), 6817, True),
        (_slurm("slurmdbd"), _slurm("slurmctld"), 6817, True),
        (team, _slurm("slurmctld"), 6817, False),
        (_slurm("slurmd"), _slurm("slurmctld"), 6818, False),
        (_slurm("slurmctld"), _slurm("slurmd"), 6818, True),
        (_slurm("slurmctld"), _slurm("slurmd"), 45021, True),  # srun inside a batch job
        (_slurm("login"), _slurm("slurmd"), 6818, True),
        (_slurm("slurmd"), _slurm("slurmd"), 40123, True),  # a job's ranks among themselves
        (_slurm("login"), _slurm("slurmd"), 40123, False),
        (team, _slurm("slurmd"), 6818, False),
        (_slurm("slurmctld"), _slurm("login"), 40123, True),  # srun's callbacks
        (_slurm("slurmd"), _slurm("login"), 40123, True),
        (team, _slurm("login"), 22, False),
        (operator, _slurm("slurmrestd"), 6820, True),
        (_slurm("slurm-health-mirror"), _slurm("slurmrestd"), 6820, True),  # drains, resumes
        (_slurm("slurm-health-mirror"), _slurm("slurmctld"), 6817, False),
        (
            Pod("ml-research", {"app.kubernetes.io/name": "slurm-health-mirror"}),
            _slurm("slurmrestd"),
            6820,
            False,
        ),
        (team, _slurm("slurmrestd"), 6820, False),
        (_slurm("slurmd"), _slurm("slurmrestd"), 6820, False),
        (_slurm("slurmctld"), _slurm("slurmdbd"), 6819, True),
        (_slurm("login"), _slurm("slurmdbd"), 6819, True),
        (_slurm("slurmd"), _slurm("slurmdbd"), 6819, False),
        (_slurm("slurmdbd"), MARIADB_POD, 3306, True),
        (mariadb_operator, MARIADB_POD, 3306, True),
        (_slurm("slurmctld"), MARIADB_POD, 3306, False),
        (_slurm("login"), MARIADB_POD, 3306, False),
        (team, MARIADB_POD, 3306, False),
        (_slurm("slurmdbd"), MARIADB_POD, 22, False),
    ]
    for source, target, port, allowed in cases:
        assert network.may_reach(source, target, port) is allowed, (source, target, port)


def test_the_login_service_admits_ssh_only_from_its_declared_sources(prod: StackResult) -> None:
    config = parse_platform_config(stack_data("prod"))
    assert config.slurm.login is not None
    declared = config.slurm.login.allowed_cidrs
    assert declared
    network = _network(prod)
    login = _slurm("login")
    for cidr in declared:
        inside = cidr.split("/")[0].rsplit(".", 1)[0] + ".7"
        assert network.may_reach(Address(inside), login, 22)
        assert not network.may_reach(Address(inside), login, 6817)
    assert not network.may_reach(Address("192.168.1.1"), login, 22)
    values = next(r for r in prod.records if r.name == "slurm" and "helm" in r.type).inputs
    service = values["values"]["loginsets"]["login"]["service"]["spec"]
    # the client's address survives the load balancer only with Local
    assert service["externalTrafficPolicy"] == "Local"
    assert service["loadBalancerSourceRanges"] == declared


def test_the_model_reads_selectors_ports_and_blocks_as_the_api_defines_them() -> None:
    """The model itself, on policies written for it: one rule at a time."""
    policy: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "a"},
        "spec": {"podSelector": {"matchExpressions": [{"key": "role", "operator": "In",
                                                        "values": ["db"]}]},
                 "ingress": [
                     {"from": [{"namespaceSelector": {"matchLabels": {"env": "x"}},
                                "podSelector": {"matchLabels": {"app": "api"}}}],
                      "ports": [{"port": 5000, "endPort": 5002}]},
                     {"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
                      "ports": [{"protocol": "UDP"}]},
                 ]},
    }  # fmt: skip
    network = Cluster([policy], {"b": {"env": "x"}})
    database = Pod("a", {"role": "db"})
    assert network.may_reach(Pod("b", {"app": "api"}), database, 5001)
    assert not network.may_reach(Pod("b", {"app": "api"}), database, 5003)
    assert not network.may_reach(Pod("b", {"app": "web"}), database, 5001)
    assert not network.may_reach(Pod("a", {"app": "api"}), database, 5001)  # a lacks env=x
    assert network.may_reach(Address("10.2.0.1"), database, 53, "UDP")
    assert not network.may_reach(Address("10.1.0.1"), database, 53, "UDP")
    assert not network.may_reach(Address("10.2.0.1"), database, 53, "TCP")
    assert network.may_reach(Pod("c"), Pod("a", {"role": "web"}), 80)  # not selected: open


# --- Pod Security, hardened runtimes, tokens, access ----------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_team_namespaces_enforce_baseline_pinned_and_warn_restricted(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    minor = parse_platform_config(stack_data(stack)).cluster.kubernetes_version
    namespaces = _team_namespaces(synthesized[stack])
    assert namespaces
    for namespace in namespaces.values():
        labels = namespace["metadata"]["labels"]
        assert labels[f"{PSA}/enforce"] == "baseline"
        assert labels[f"{PSA}/warn"] == labels[f"{PSA}/audit"] == "restricted"
        for mode in ("enforce", "warn", "audit"):
            assert labels[f"{PSA}/{mode}-version"] == f"v{minor}"
    slurm = [r for r in synthesized[stack].records
             if r.type == NAMESPACE and r.inputs["metadata"]["name"] == "slurm"]  # fmt: skip
    for record in slurm:  # slurmd manages cgroups and devices: privileged, and says so
        assert record.inputs["metadata"]["labels"][f"{PSA}/enforce"] == "privileged"


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


@pytest.mark.parametrize("stack", STACKS)
def test_every_runtime_pod_passes_baseline_and_drops_every_capability(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    runtimes = [r for r in synthesized[stack].records if r.type == RUNTIME]
    assert runtimes
    for runtime in runtimes:
        for job in runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]["spec"]
            assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            assert not pod.get("hostNetwork") and not pod.get("hostPID")
            assert not any("hostPath" in v for v in pod.get("volumes", []))
            for container in _containers(pod):
                context = container["securityContext"]
                assert context["allowPrivilegeEscalation"] is False
                assert context["capabilities"]["drop"] == ["ALL"]
                assert set(context["capabilities"].get("add", [])) <= BASELINE_CAPABILITIES
                assert not context.get("privileged")


@pytest.mark.parametrize("stack", STACKS)
def test_job_service_accounts_mount_no_token_and_runtimes_use_them(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    accounts = [r for r in synthesized[stack].records
                if r.type == SERVICE_ACCOUNT and r.inputs["metadata"]["name"] == "training-jobs"]  # fmt: skip
    assert {a.inputs["metadata"]["namespace"] for a in accounts} == set(
        _team_namespaces(synthesized[stack])
    )
    assert all(a.inputs["automountServiceAccountToken"] is False for a in accounts)
    for runtime in team_runtimes(synthesized[stack].records):
        for job in runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]["spec"]
            assert pod["serviceAccountName"] == "training-jobs"
            assert pod["automountServiceAccountToken"] is False  # the pod says so too


@pytest.mark.parametrize("stack", STACKS)
def test_the_vpc_cni_enforces_network_policies(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    (cni,) = [r for r in synthesized[stack].records
              if r.type == ADDON and r.inputs["addonName"] == "vpc-cni"]  # fmt: skip
    assert cni.inputs["configurationValues"] == '{"enableNetworkPolicy": "true"}'


def _entries(run: ProgramRun) -> dict[str, list[str]]:
    return {
        r.inputs["principalArn"]: r.inputs["kubernetesGroups"]
        for r in run.of_type(ACCESS_ENTRY)
        if "kubernetesGroups" in r.inputs
    }


def test_team_principals_get_one_entry_with_the_groups_of_every_team_they_are_in(
    run_platform: Callable[..., ProgramRun],
) -> None:
    data = stack_data("prod")
    research, product = data["teams"]
    shared = "arn:aws:iam::333344445555:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_Lead_1"
    research["adminPrincipalArns"] = [shared]
    research["memberPrincipalArns"] = []
    # the same role by another spelling (IAM names are case-insensitive, paths do not matter)
    product["memberPrincipalArns"] = [
        shared.replace("AWSReservedSSO_Lead_1", "awsreservedsso_lead_1")
    ]
    run = run_platform(data, "prod")
    entries = [r for r in run.of_type(ACCESS_ENTRY) if "kubernetesGroups" in r.inputs]
    assert len(entries) == 1
    (entry,) = entries
    assert entry.inputs["principalArn"] == shared
    assert entry.inputs["type"] == "STANDARD"
    assert entry.inputs["kubernetesGroups"] == sorted(
        [*research["adminGroups"], *product["memberGroups"]]
    )
    # no access policy: the groups' RoleBindings in each namespace are all they may do
    associations = run.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert all(a.inputs["principalArn"] != shared for a in associations)


def test_shipped_stacks_map_their_principals_to_their_groups(prod: StackResult) -> None:
    data = stack_data("prod")
    entries = {
        r.inputs["principalArn"]: r.inputs["kubernetesGroups"]
        for r in prod.records
        if r.type == ACCESS_ENTRY and "kubernetesGroups" in r.inputs
    }
    expected: dict[str, set[str]] = {}
    for team in data["teams"]:
        for key, groups in (("adminPrincipalArns", "adminGroups"),
                            ("memberPrincipalArns", "memberGroups")):  # fmt: skip
            for arn in team.get(key, []):
                expected.setdefault(arn, set()).update(team[groups])
    assert expected
    assert {arn: set(groups) for arn, groups in entries.items()} == expected


def _team_with(**fields: Any) -> dict[str, Any]:
    data = stack_data("prod")
    data["teams"][0].update(fields)
    return data


LEAD: Final = "arn:aws:iam::333344445555:role/Lead"


@pytest.mark.parametrize(
    ("fields", "key", "value", "words"),
    [
        ({"adminGroups": [], "adminPrincipalArns": [LEAD]},
         "platform.teams[0].adminGroups", [], "an access entry with no group grants nothing"),
        ({"memberPrincipalArns": ["arn:aws:iam::333344445555:role/platform-deployer"]},
         "platform.teams[0].memberPrincipalArns[0]",
         "arn:aws:iam::333344445555:role/platform-deployer", "other than the deployer"),
        ({"memberPrincipalArns": ["arn:aws:iam::333344445555:role/x/PlatformAdmin"]},
         "platform.teams[0].memberPrincipalArns[0]",
         "arn:aws:iam::333344445555:role/x/PlatformAdmin", "not a cluster admin"),
        ({"memberPrincipalArns": ["arn:aws:iam::333344445555:role/a/R",
                                  "arn:aws:iam::333344445555:role/b/r"]},
         "platform.teams[0].memberPrincipalArns",
         ["arn:aws:iam::333344445555:role/a/R", "arn:aws:iam::333344445555:role/b/r"],
         "each principal once"),
        ({"memberGroups": ["ml researchers"]}, "platform.teams[0].memberGroups[0]",
         "ml researchers", "without whitespace"),
    ],
    ids=["principals-without-groups", "deployer", "cluster-admin", "twice", "group-space"],
)  # fmt: skip
def test_bad_team_principals_are_refused_by_their_key(
    fields: dict[str, Any], key: str, value: Any, words: str
) -> None:
    assert_reported(_team_with(**copy.deepcopy(fields)), key, value, words)


def test_every_job_example_of_the_readme_is_admitted_to_its_teams_queue(
    synthesized: dict[str, StackResult],
) -> None:
    examples = _marked_examples("<!-- runs-on: STACK -->")
    assert examples
    for stack, document in examples:
        policy = _named(synthesized[stack], POLICY, QUEUE_POLICY).inputs["spec"]
        namespace = _namespace(synthesized[stack], str(document["metadata"]["namespace"]))  # type: ignore[index]
        assert admit(policy, document, namespace) == (True, None), document["kind"]
