"""Team namespaces under mocks: quota, container defaults, access, job identity, claims, config.

Expected values come from the ``teams:`` sections of the stack files (``stacks/Pulumi.<stack>.yaml``)
and, where a team leaves a setting out, from the documented default of that setting (the field
descriptions of ``TeamConfig`` and friends in components/config/), written out here. Resource
names, label keys and role names are written out too: importing the program's constants would let
a wrong value in the program pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import pytest

from components import acceptance_gate, catalog, notebooks
from components.config import RESERVED_NAMESPACES, parse_platform_config
from synth.engine import ResourceRecord
from synth.run import StackResult
from tests import component_runs as parts
from tests.config_problems import MISSING, assert_reported, problems_of
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data
from tests.kubernetes_semantics import quantity
from tests.mutations import Mutation, without_lustre, without_teams
from tests.mutations import both as _both
from tests.schemas import validation_errors
from tests.team_objects import PLATFORM_NAMESPACES, is_platform_object, team_queues

TEAMS = "trainingplatform:index:Teams"
NAMESPACE = "kubernetes:core/v1:Namespace"
QUOTA = "kubernetes:core/v1:ResourceQuota"
LIMIT_RANGE = "kubernetes:core/v1:LimitRange"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
VOLUME = "kubernetes:core/v1:PersistentVolume"
QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
TEAM_OBJECT_TYPES: Final = (QUOTA, LIMIT_RANGE, SERVICE_ACCOUNT, ROLE_BINDING)

TEAM_LABEL: Final = "trainingplatform.io/team"
QUOTA_NAME: Final = "accelerators"
JOB_SERVICE_ACCOUNT: Final = "training-jobs"
JOBS_ROLE: Final = "trainingplatform:training-jobs"
KATIB_ROLE: Final = "trainingplatform:katib-experiments"
ADMIN_ROLE: Final = "admin"  # Kubernetes' built-in user-facing roles
MEMBER_ROLE: Final = "view"
MEMBER_WRITES_ROLE: Final = "trainingplatform:team-member-writes"
RBAC_GROUP: Final = "rbac.authorization.k8s.io"
CLAIM_NAME: Final = "shared-lustre"
MODEL_STORE_CLAIM: Final = "model-store"
SHARED_MODEL_STORE_CLAIM: Final = "model-store-shared"
EFS_CSI_DRIVER: Final = "efs.csi.aws.com"
GPU: Final = "nvidia.com/gpu"
NEURON: Final = "aws.amazon.com/neuron"
EFA: Final = "vpc.amazonaws.com/efa"
READ_VERBS: Final = frozenset({"get", "list", "watch"})

# Documented defaults (config field descriptions) for settings a team may leave out.
DEFAULT_QUOTA: Final = {"gpus": 0, "neuronDevices": 0, "efaInterfaces": 0}
CPU_ONLY: Final = (8, 32)
"""(vCPUs, GiB) of a team whose accelerator quota fills no node (the config description's)."""
DEFAULT_GROUPS: Final[list[str]] = []
DEFAULT_SHARED_FILE_SYSTEM: Final = True


# --------------------------------------------------------------------------- stack cases


def raw_teams(stack: str) -> list[dict[str, Any]]:
    teams: list[dict[str, Any]] = stack_data(stack).get("teams", [])
    return teams


TEAM_CASES = [(stack, team["name"]) for stack in STACKS for team in raw_teams(stack)]


def raw_team(stack: str, name: str) -> dict[str, Any]:
    (team,) = [t for t in raw_teams(stack) if t["name"] == name]
    return team


def expected_quota(team: dict[str, Any]) -> dict[str, int]:
    """The ResourceQuota's hard request limits, from the team's quota (missing kinds: 0).

    Neuron cores and ``neurondevice`` are refused (0): the device plugin's other names of the
    same devices, counted beside them they would double the budget, unlisted leave it unbounded.
    """
    quota = {**DEFAULT_QUOTA, **team["quota"]}
    return {
        f"requests.{GPU}": quota["gpus"],
        f"requests.{NEURON}": quota["neuronDevices"],
        f"requests.{NEURON}core": 0,
        f"requests.{NEURON}device": 0,
        f"requests.{EFA}": quota["efaInterfaces"],
        "pods": quota.get("pods", 1000),  # the documented default
    }


def expected_cpu_and_memory(stack: str, team: dict[str, Any]) -> tuple[int, int]:
    """The quota's requests.cpu (vCPUs) and requests.memory (bytes): the team's, or the nodes
    its accelerator quota fills of the pools' largest node per kind (config description)."""
    quota = {**DEFAULT_QUOTA, **team["quota"]}
    cpu = memory = 0
    for kind, count in (("nvidia", quota["gpus"]), ("neuron", quota["neuronDevices"])):
        nodes = [
            catalog.CATALOG[name]
            for pool in stack_data(stack).get("nodePools", [])
            for name in pool["instanceTypes"]
            if catalog.CATALOG[pool["instanceTypes"][0]].accelerator == kind
        ]
        if count and nodes:
            node = max(nodes, key=lambda t: (t.accelerators, t.vcpu, t.memory_gib))
            count_nodes = -(-count // node.accelerators)
            cpu, memory = cpu + count_nodes * node.vcpu, memory + count_nodes * node.memory_gib
    if (cpu, memory) == (0, 0):
        cpu, memory = CPU_ONLY  # no accelerator node to size by: one general node's worth
    cpu = quota.get("cpu", cpu)
    memory = quota.get("memoryGiB", memory)
    return cpu, memory * 2**30


def expected_grants(team: dict[str, Any], *, katib: bool = False) -> set[tuple[str, str]]:
    """(ClusterRole, group) pairs the team's RoleBindings must grant, and no others; ``katib``:
    the stack runs Katib (which the team's ``katib.enabled``, default true, may decline)."""
    admins = team.get("adminGroups", DEFAULT_GROUPS)
    members = team.get("memberGroups", DEFAULT_GROUPS)
    searches = katib and team.get("katib", {}).get("enabled", True)
    return (
        {(ADMIN_ROLE, group) for group in admins}
        | {(role, group) for group in members for role in (MEMBER_ROLE, MEMBER_WRITES_ROLE)}
        | {(JOBS_ROLE, group) for group in [*admins, *members]}
        | {(KATIB_ROLE, group) for group in [*admins, *members] if searches}
    )


def stack_katib(stack: str) -> bool:
    """Whether the stack file turns Katib on."""
    return bool(stack_data(stack).get("katib", {}).get("enabled", False))


def has_file_system(raw_platform: dict[str, Any]) -> bool:
    return bool(raw_platform.get("storage", {}).get("lustre"))


def model_store_claims(raw_platform: dict[str, Any]) -> list[str]:
    """A team's model store claims: its area's and the shared area's, where the store is on
    (config gives every team a gid then), whatever ``sharedFileSystem`` (Lustre's) says."""
    enabled = raw_platform.get("modelStore", {}).get("enabled", False)
    return [MODEL_STORE_CLAIM, SHARED_MODEL_STORE_CLAIM] if enabled else []


@pytest.fixture(scope="module")
def runs(synthesized: dict[str, StackResult]) -> dict[str, ProgramRun]:
    return {stack: ProgramRun(synthesized[stack].records) for stack in STACKS}


# --------------------------------------------------------------------------- helpers


def _metadata(record: ResourceRecord) -> dict[str, Any]:
    metadata: dict[str, Any] = record.inputs.get("metadata", {})
    return metadata


def _namespace(run: ProgramRun, name: str) -> ResourceRecord:
    found = [r for r in run.of_type(NAMESPACE) if _metadata(r).get("name") == name]
    assert len(found) == 1, f"expected one Namespace {name}: {found}"
    return found[0]


def _in_namespace(run: ProgramRun, resource_type: str, namespace: str) -> list[ResourceRecord]:
    return [r for r in run.of_type(resource_type) if _metadata(r).get("namespace") == namespace]


def _one_in_namespace(
    run: ProgramRun, resource_type: str, namespace: str, name: str
) -> ResourceRecord:
    found = [
        r for r in _in_namespace(run, resource_type, namespace) if _metadata(r).get("name") == name
    ]
    assert len(found) == 1, f"expected one {resource_type} {namespace}/{name}: {found}"
    return found[0]


def _team_namespaces(run: ProgramRun) -> list[ResourceRecord]:
    return [r for r in run.of_type(NAMESPACE) if TEAM_LABEL in _metadata(r).get("labels", {})]


def _jobs_role(run: ProgramRun) -> ResourceRecord:
    found = [r for r in run.of_type(CLUSTER_ROLE) if _metadata(r).get("name") == JOBS_ROLE]
    assert len(found) == 1, f"expected one ClusterRole {JOBS_ROLE}: {found}"
    return found[0]


def _grants(bindings: list[ResourceRecord]) -> set[tuple[str, str]]:
    """(ClusterRole, group) pairs granted by RoleBindings; every subject must be a group."""
    grants: set[tuple[str, str]] = set()
    for binding in bindings:
        role_ref = binding.inputs["roleRef"]
        assert role_ref["kind"] == "ClusterRole", role_ref
        assert role_ref["apiGroup"] == RBAC_GROUP, role_ref
        subjects = binding.inputs.get("subjects") or []
        assert subjects, f"RoleBinding {binding.name} binds nobody"
        for subject in subjects:
            assert subject["kind"] == "Group", subject
            assert subject["apiGroup"] == RBAC_GROUP, subject
            grants.add((role_ref["name"], subject["name"]))
    return grants


def _verbs(rules: list[dict[str, Any]], api_group: str, resource: str) -> set[str]:
    """Every verb the rules grant on ``resource`` of ``api_group`` (wildcards count)."""
    verbs: set[str] = set()
    for rule in rules:
        if (api_group in rule.get("apiGroups", []) or "*" in rule.get("apiGroups", [])) and (
            resource in rule.get("resources", []) or "*" in rule.get("resources", [])
        ):
            verbs.update(rule.get("verbs", []))
    return verbs


def _manifest(record: ResourceRecord) -> dict[str, Any]:
    """The object as Kubernetes receives it: the typed resource's inputs are its fields."""
    return dict(record.inputs)


def _dev_capacity() -> dict[str, int]:
    """Accelerators dev's pools provide to teams at most: maxNodes x devices per node, less the
    nodes Slurm node sets hold (stack + catalog)."""
    data = stack_data("dev")
    totals = {"gpus": 0, "neuronDevices": 0}
    slurm = data.get("slurm", {})
    held_nodes = {
        node_set["pool"]: node_set.get("replicas", 1)
        for node_set in (slurm.get("nodeSets", []) if slurm.get("enabled") else [])
    }
    for pool in data["nodePools"]:
        entry = catalog.CATALOG[pool["instanceTypes"][0]]
        kind = "gpus" if entry.accelerator == "nvidia" else "neuronDevices"
        totals[kind] += (pool["maxNodes"] - held_nodes.get(pool["name"], 0)) * entry.accelerators
    return totals


# --------------------------------------------------------------------------- every stack


def test_every_stack_file_has_teams() -> None:
    # the parametrized cases below would silently shrink if the stack files lost their teams
    assert {stack for stack, _ in TEAM_CASES} == set(STACKS)


@pytest.mark.parametrize("stack", STACKS)
def test_one_labelled_namespace_per_team(runs: dict[str, ProgramRun], stack: str) -> None:
    run = runs[stack]
    expected = sorted(team["name"] for team in raw_teams(stack))
    labelled = _team_namespaces(run)
    assert sorted(_metadata(r)["name"] for r in labelled) == expected
    component = run.one(TEAMS).urn
    for name in expected:
        namespace = _namespace(run, name)
        assert _metadata(namespace)["labels"][TEAM_LABEL] == name
        assert namespace.parent == component
        assert namespace.provider is not None and "kubernetes" in namespace.provider


@pytest.mark.parametrize(("stack", "team"), TEAM_CASES)
def test_resource_quota_equals_the_team_quota(
    runs: dict[str, ProgramRun], stack: str, team: str
) -> None:
    quota = _one_in_namespace(runs[stack], QUOTA, team, QUOTA_NAME)
    hard = dict(quota.inputs["spec"]["hard"])
    cpu, memory = quantity(hard.pop("requests.cpu")), quantity(hard.pop("requests.memory"))
    expected = expected_quota(raw_team(stack, team))
    assert {key: int(value) for key, value in hard.items()} == expected
    assert (int(cpu), int(memory)) == expected_cpu_and_memory(stack, raw_team(stack, team))
    assert _metadata(quota)["labels"][TEAM_LABEL] == team
    # beside it only the quota that refuses system priority classes (tests/test_tenant_pods.py)
    names = {_metadata(r)["name"] for r in _in_namespace(runs[stack], QUOTA, team)}
    assert names == {QUOTA_NAME, "no-system-priority"}


@pytest.mark.parametrize(("stack", "team"), TEAM_CASES)
def test_limit_range_gives_containers_default_requests(
    runs: dict[str, ProgramRun], stack: str, team: str
) -> None:
    (limit_range,) = _in_namespace(runs[stack], LIMIT_RANGE, team)
    limits = limit_range.inputs["spec"]["limits"]
    containers = [limit for limit in limits if limit["type"] == "Container"]
    assert len(containers) == 1, limits
    (container,) = containers
    requests = container["defaultRequest"]
    assert set(requests) >= {"cpu", "memory"}, requests
    assert all(quantity(value) > 0 for value in requests.values()), requests
    # and a floor: a container requesting nothing would count nothing against the quota
    floor = container["min"]
    assert quantity(floor["cpu"]) > 0 and quantity(floor["memory"]) > 0, floor
    assert all(quantity(floor[r]) <= quantity(requests[r]) for r in ("cpu", "memory")), container
    # the API server rejects a LimitRange whose default request exceeds its default limit
    for resource, limit in container.get("default", {}).items():
        if resource in requests:
            assert quantity(requests[resource]) <= quantity(limit), (resource, container)


@pytest.mark.parametrize(("stack", "team"), TEAM_CASES)
def test_limit_range_sets_no_default_cpu_or_memory_limit(
    runs: dict[str, ProgramRun], stack: str, team: str
) -> None:
    # LimitRanger gives every container that states no limit the LimitRange's default limit. A
    # training container that states only `limits: {nvidia.com/gpu: 8}` (the usual pattern) would
    # be capped at the default CPU and memory and OOM-killed, and one that requests more memory
    # than the default limit without stating a limit is rejected at admission ("must be less
    # than or equal to memory limit"). Defaults belong on requests only.
    (limit_range,) = _in_namespace(runs[stack], LIMIT_RANGE, team)
    for limit in limit_range.inputs["spec"]["limits"]:
        if limit["type"] == "Container":
            default = limit.get("default", {})
            assert not {"cpu", "memory"} & set(default), (
                f"{team}: default container limits {default} cap every training container that "
                "states no limit (and reject those requesting more)"
            )


@pytest.mark.parametrize(("stack", "team"), TEAM_CASES)
def test_job_service_account(runs: dict[str, ProgramRun], stack: str, team: str) -> None:
    account = _one_in_namespace(runs[stack], SERVICE_ACCOUNT, team, JOB_SERVICE_ACCOUNT)
    assert _metadata(account)["labels"][TEAM_LABEL] == team


@pytest.mark.parametrize(("stack", "team"), TEAM_CASES)
def test_role_bindings_grant_admin_edit_and_jobs_to_the_team_groups(
    runs: dict[str, ProgramRun], stack: str, team: str
) -> None:
    raw = raw_team(stack, team)
    assert raw.get("adminGroups") and raw.get("memberGroups"), "stack teams name both kinds"
    bindings = _in_namespace(runs[stack], ROLE_BINDING, team)
    # JupyterHub's spawner binding names the hub's service account, not a group: its own test
    # (tests/test_notebooks.py) holds it to pods and events.
    spawner = [b for b in bindings if _metadata(b)["name"] == notebooks.SPAWNER_ROLE]
    notebooks_on = bool(stack_data(stack).get("notebooks", {}).get("enabled", False))
    assert len(spawner) == int(notebooks_on)
    bindings = [b for b in bindings if b not in spawner]
    assert _grants(bindings) == expected_grants(raw, katib=stack_katib(stack))
    names = [_metadata(b)["name"] for b in bindings]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize("stack", STACKS)
def test_jobs_cluster_role_grants_trainjobs_and_only_reads_the_rest(
    runs: dict[str, ProgramRun], stack: str
) -> None:
    """Bound per namespace: jobs to manage, runtimes and gangs to read, no status to write."""
    role = _jobs_role(runs[stack])
    assert role.parent == runs[stack].one(TEAMS).urn
    rules = role.inputs["rules"]
    trainjobs = _verbs(rules, "trainer.kubeflow.org", "trainjobs")
    assert {"create", "delete", "get", "list"} <= trainjobs, trainjobs
    assert _verbs(rules, "trainer.kubeflow.org", "trainjobs/status") <= READ_VERBS
    runtimes = _verbs(rules, "trainer.kubeflow.org", "trainingruntimes")
    assert {"get", "list"} <= runtimes <= READ_VERBS, runtimes
    assert _verbs(rules, "scheduling.volcano.sh", "podgroups") <= READ_VERBS
    assert all("*" not in rule.get("verbs", []) for rule in rules), rules


@pytest.mark.parametrize("stack", STACKS)
def test_every_team_group_reads_cluster_runtimes_and_queues_cluster_wide(
    runs: dict[str, ProgramRun], stack: str
) -> None:
    """Cluster-scoped kinds need a ClusterRoleBinding: a RoleBinding cannot grant them, and the
    Kubeflow SDK's list_runtimes() lists ClusterTrainingRuntimes (kubeflow 0.5.0's
    TrainerClient, which the tests import)."""
    run = runs[stack]
    (role,) = [r for r in run.of_type(CLUSTER_ROLE)
               if _metadata(r)["name"] == "trainingplatform:training-catalog"]  # fmt: skip
    rules = role.inputs["rules"]
    assert {"get", "list"} <= _verbs(rules, "trainer.kubeflow.org", "clustertrainingruntimes")
    assert {"get", "list"} <= _verbs(rules, "scheduling.volcano.sh", "queues")
    for resource in ("clustertrainingruntimes", "queues"):
        group = "trainer.kubeflow.org" if resource != "queues" else "scheduling.volcano.sh"
        assert _verbs(rules, group, resource) <= READ_VERBS
    (binding,) = [r for r in run.of_type(CLUSTER_ROLE_BINDING)
                  if _metadata(r)["name"] == "trainingplatform:training-catalog"]  # fmt: skip
    assert binding.inputs["roleRef"]["name"] == "trainingplatform:training-catalog"
    groups = {s["name"] for s in binding.inputs["subjects"] if s["kind"] == "Group"}
    expected = {g for t in stack_data(stack)["teams"]
                for g in (*t.get("adminGroups", []), *t.get("memberGroups", []))}  # fmt: skip
    assert groups == expected


@pytest.mark.parametrize(("stack", "team"), TEAM_CASES)
def test_every_object_in_the_namespace_depends_on_it(
    runs: dict[str, ProgramRun], stack: str, team: str
) -> None:
    run = runs[stack]
    namespace = _namespace(run, team).urn
    inside = [r for r in run.records if _metadata(r).get("namespace") == team]
    assert {r.type for r in inside} >= set(TEAM_OBJECT_TYPES)
    for record in inside:
        assert namespace in record.dependencies, f"{record.type} {record.name}"


@pytest.mark.parametrize(("stack", "team"), TEAM_CASES)
def test_team_gets_the_shared_file_system_claim(
    runs: dict[str, ProgramRun], stack: str, team: str
) -> None:
    raw = stack_data(stack)
    wants = raw_team(stack, team).get("sharedFileSystem", DEFAULT_SHARED_FILE_SYSTEM)
    claims = [_metadata(c)["name"] for c in _in_namespace(runs[stack], CLAIM, team)]
    store = model_store_claims(raw)
    assert store, f"{stack} has the model store: the claims beside Lustre's are tested"
    if wants and has_file_system(raw):
        lustre = parse_platform_config(raw).storage.lustre
        assert lustre is not None
        assert sorted(claims) == sorted([*(root.claim_name for root in lustre.team_roots), *store])
        assert CLAIM_NAME not in claims
    else:
        assert sorted(claims) == sorted(store)


@pytest.mark.parametrize(("stack", "team"), TEAM_CASES)
def test_team_objects_pass_the_kubernetes_schemas(
    runs: dict[str, ProgramRun], stack: str, team: str
) -> None:
    run = runs[stack]
    version = stack_data(stack)["cluster"]["kubernetesVersion"]
    records = [_namespace(run, team)]
    for resource_type in TEAM_OBJECT_TYPES:
        records.extend(_in_namespace(run, resource_type, team))
    assert len(records) >= 1 + len(TEAM_OBJECT_TYPES)
    for record in records:
        assert validation_errors(_manifest(record), version, None) == [], record.name


@pytest.mark.parametrize("stack", STACKS)
def test_jobs_cluster_role_passes_the_kubernetes_schema(
    runs: dict[str, ProgramRun], stack: str
) -> None:
    version = stack_data(stack)["cluster"]["kubernetesVersion"]
    assert validation_errors(_manifest(_jobs_role(runs[stack])), version, None) == []


# --------------------------------------------------------------------------- variations


@pytest.mark.parametrize(
    ("emptied", "roles_kept"),
    [("memberGroups", {ADMIN_ROLE}), ("adminGroups", {MEMBER_ROLE, MEMBER_WRITES_ROLE})],
)
def test_no_role_binding_for_an_empty_group_list(
    run_component: RunComponent, emptied: str, roles_kept: set[str]
) -> None:
    data = stack_data("dev")
    team = data["teams"][0]
    team[emptied] = []
    run = run_component(parts.teams, data, "dev")
    bindings = _in_namespace(run, ROLE_BINDING, team["name"])
    # what remains: the kept groups' own roles, the jobs role and (dev runs Katib) Katib's
    assert len(bindings) == len(roles_kept) + 2, [b.name for b in bindings]
    assert _grants(bindings) == expected_grants(team, katib=True)
    assert {role for role, _ in _grants(bindings)} == {*roles_kept, JOBS_ROLE, KATIB_ROLE}


def test_no_role_binding_without_any_group(run_component: RunComponent) -> None:
    data = stack_data("dev")
    team = data["teams"][0]
    team["adminGroups"] = []
    team["memberGroups"] = []
    run = run_component(parts.teams, data, "dev")
    assert _in_namespace(run, ROLE_BINDING, team["name"]) == []
    # the rest of the namespace is still there
    assert _in_namespace(run, QUOTA, team["name"])


def test_a_team_stating_only_its_name_gets_the_documented_defaults(
    run_platform: Callable[..., ProgramRun],
) -> None:
    data = stack_data("dev")
    # with a Lustre file system a team needs its group as well
    data["teams"].append({"name": "ml-minimal", "gid": 5999, "quota": {}})
    run = run_platform(data, "dev")
    _namespace(run, "ml-minimal")
    hard = _one_in_namespace(run, QUOTA, "ml-minimal", QUOTA_NAME).inputs["spec"]["hard"]
    assert {key: quantity(value) for key, value in hard.items()} == {
        f"requests.{GPU}": 0,
        f"requests.{NEURON}": 0,
        f"requests.{NEURON}core": 0,
        f"requests.{NEURON}device": 0,
        f"requests.{EFA}": 0,
        # no accelerators: still CPU pods, up to the bounded default
        "requests.cpu": CPU_ONLY[0],
        "requests.memory": CPU_ONLY[1] * 2**30,
        "pods": 1000,
    }
    assert _in_namespace(run, ROLE_BINDING, "ml-minimal") == []
    _one_in_namespace(run, SERVICE_ACCOUNT, "ml-minimal", JOB_SERVICE_ACCOUNT)
    assert len(_in_namespace(run, LIMIT_RANGE, "ml-minimal")) == 1
    # sharedFileSystem defaults to true and dev has a file system: a claim per team root,
    # beside the model store's two
    lustre = parse_platform_config(data).storage.lustre
    assert lustre is not None
    assert sorted(_metadata(c)["name"] for c in _in_namespace(run, CLAIM, "ml-minimal")) == sorted(
        [*(root.claim_name for root in lustre.team_roots), *model_store_claims(data)]
    )


@pytest.mark.parametrize(
    ("quota", "cpu", "memory_gib"),
    [
        ({}, 8, 32),  # no accelerators
        ({"cpu": 0, "memoryGiB": 0}, 0, 0),  # explicitly none: no pod at all
        ({"cpu": 2}, 2, 32),
        ({"memoryGiB": 0}, 8, 0),
    ],
)
def test_a_team_without_accelerators_runs_bounded_cpu_pods(
    run_platform: Callable[..., ProgramRun], quota: dict[str, int], cpu: int, memory_gib: int
) -> None:
    """The config's default and an explicit 0 both reach the synthesized ResourceQuota."""
    data = stack_data("dev")
    data["teams"].append({"name": "ml-cpu", "gid": 5998, "quota": quota})
    config = parse_platform_config(data)
    parsed = next(team for team in config.teams if team.name == "ml-cpu").quota
    assert (parsed.cpu, parsed.memory_gib) == (quota.get("cpu"), quota.get("memoryGiB"))
    hard = _one_in_namespace(run_platform(data, "dev"), QUOTA, "ml-cpu", QUOTA_NAME).inputs["spec"][
        "hard"
    ]
    assert quantity(hard["requests.cpu"]) == cpu
    assert quantity(hard["requests.memory"]) == memory_gib * 2**30


def test_shared_file_system_false_gets_no_lustre_claim(
    run_platform: Callable[..., ProgramRun],
) -> None:
    data = stack_data("dev")
    team = data["teams"][0]
    team["sharedFileSystem"] = False
    run = run_platform(data, "dev")
    _namespace(run, team["name"])
    claims = [_metadata(c)["name"] for c in _in_namespace(run, CLAIM, team["name"])]
    assert sorted(claims) == sorted(model_store_claims(data))
    drivers = [
        v.inputs["spec"]["csi"]["driver"]
        for v in run.of_type(VOLUME)
        if v.inputs["spec"].get("claimRef", {}).get("namespace") == team["name"]
    ]
    assert drivers == [EFS_CSI_DRIVER] * len(model_store_claims(data))


def test_no_lustre_claim_without_a_file_system(run_platform: Callable[..., ProgramRun]) -> None:
    data = stack_data("dev")
    without_lustre(data)
    team = data["teams"][0]
    assert team.get("sharedFileSystem", DEFAULT_SHARED_FILE_SYSTEM)
    run = run_platform(data, "dev")
    _namespace(run, team["name"])
    # Katib's database claim is its own (an EBS volume), not the file system's; the model
    # store's are EFS, on no Lustre.
    claims = [
        (_metadata(c)["namespace"], _metadata(c)["name"])
        for c in run.of_type(CLAIM)
        if _metadata(c)["namespace"] != "katib"
    ]
    assert sorted(claims) == sorted(
        (t["name"], claim) for t in data["teams"] for claim in model_store_claims(data)
    )


def test_no_team_can_take_a_namespace_the_platform_makes_for_itself() -> None:
    assert set(PLATFORM_NAMESPACES) <= set(RESERVED_NAMESPACES)


def test_no_teams_no_team_objects(run_platform: Callable[..., ProgramRun]) -> None:
    data = stack_data("dev")
    without_teams(data)
    run = run_platform(data, "dev")
    assert _team_namespaces(run) == []
    for resource_type in TEAM_OBJECT_TYPES:
        # the platform's own namespaces (the acceptance gate's, the fabric test's) keep theirs
        found = [r for r in run.of_type(resource_type) if not is_platform_object(r)]
        assert found == [], resource_type
    assert team_queues(run.records) == []
    # Slurm's own namespace and the acceptance gate's (which checks the node mounts it) still
    # mount the file system; no team namespace does. (Katib's database claim is an EBS volume
    # in its own namespace.)
    assert {_metadata(c)["namespace"] for c in run.of_type(CLAIM)} - {"katib"} == {
        "slurm",
        acceptance_gate.NAMESPACE,
    }
    assert [r for r in run.of_type(CLUSTER_ROLE) if _metadata(r).get("name") == JOBS_ROLE] == []


def test_second_team_gets_its_own_objects(run_component: RunComponent) -> None:
    data = stack_data("dev")
    data["teams"].append(
        {
            "name": "ml-other",
            "gid": 5998,
            "adminGroups": ["other-leads"],
            "memberGroups": ["other-engineers", "other-interns"],
            "quota": {"efaInterfaces": 4},
        }
    )
    run = run_component(parts.teams, data, "dev")
    assert len(_team_namespaces(run)) == 2
    _jobs_role(run)  # one ClusterRole shared by every team
    bindings = _in_namespace(run, ROLE_BINDING, "ml-other")
    assert _grants(bindings) == expected_grants(data["teams"][1], katib=True)
    hard = _one_in_namespace(run, QUOTA, "ml-other", QUOTA_NAME).inputs["spec"]["hard"]
    assert int(hard[f"requests.{EFA}"]) == 4
    assert int(hard[f"requests.{GPU}"]) == 0


# --------------------------------------------------------------------------- bad config


def _team(**fields: Any) -> Mutation:
    """Change fields of dev's first team."""

    def mutate(data: dict[str, Any]) -> None:
        data["teams"][0].update(fields)

    return mutate


def _queue(**fields: Any) -> Mutation:
    """Change fields of dev's first team's queue."""

    def mutate(data: dict[str, Any]) -> None:
        data["teams"][0].setdefault("queue", {}).update(fields)

    return mutate


def _add_team(team: dict[str, Any]) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        data["teams"].append(team)

    return mutate


def _lustre_namespaces(*namespaces: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        data["storage"]["lustre"]["namespaces"] = list(namespaces)

    return mutate


DEV_CAPACITY = _dev_capacity()
DEV_TEAM = stack_data("dev")["teams"][0]["name"]
OVER_GUARANTEED = DEV_CAPACITY["gpus"] + 1
DEV_DESERVED_GPUS = stack_data("dev")["teams"][0]["queue"]["deserved"]["gpus"]

# (id, mutation of the dev stack, key path, the value found there, words of the allowed text)
INVALID: list[tuple[str, Mutation, str, Any, str]] = [
    ("duplicate team names",
     _add_team({"name": DEV_TEAM, "quota": {}}),
     "platform.teams", [DEV_TEAM, DEV_TEAM], "unique team names"),
    ("reserved namespace kube-system", _team(name="kube-system"),
     "platform.teams[0].name", "kube-system", "a name other than default, root, kube-system"),
    ("reserved namespace volcano-system", _team(name="volcano-system"),
     "platform.teams[0].name", "volcano-system", "volcano-system"),
    # the gate's agent may patch nodes: a team that owned its namespace could run as it
    ("reserved namespace node-acceptance", _team(name="node-acceptance"),
     "platform.teams[0].name", "node-acceptance", "node-acceptance"),
    ("guarantee above deserved",
     _queue(guarantee={"gpus": 2}, deserved={"gpus": 1, "neuronDevices": 16}),
     "platform.teams[0].queue.guarantee.gpus", 2, "at most deserved (1)"),
    ("neuron guarantee above deserved",
     _queue(guarantee={"neuronDevices": 16}, deserved={"gpus": 2, "neuronDevices": 8}),
     "platform.teams[0].queue.guarantee.neuronDevices", 16, "at most deserved (8)"),
    ("deserved above the capability",
     _queue(capability={"gpus": 1, "neuronDevices": 16}),
     "platform.teams[0].queue.deserved.gpus", DEV_DESERVED_GPUS, "at most the queue's capability (1;"),
    ("deserved above the quota without a capability",
     _team(quota={"gpus": 2, "neuronDevices": 8, "efaInterfaces": 8}),
     "platform.teams[0].queue.deserved.neuronDevices", 16, "capability (8; default: the team quota)"),
    ("total guarantee above the pools",
     _both(
         _team(quota={"gpus": DEV_CAPACITY["gpus"], "neuronDevices": 16}),
         _queue(guarantee={"gpus": DEV_CAPACITY["gpus"]},
                deserved={"gpus": DEV_CAPACITY["gpus"], "neuronDevices": 16}),
         _add_team({"name": "ml-dev-b", "quota": {"gpus": 1},
                    "queue": {"guarantee": {"gpus": 1}, "deserved": {"gpus": 1}}}),
     ),
     "platform.teams[*].queue.guarantee.gpus", OVER_GUARANTEED,
     f"at most {DEV_CAPACITY['gpus']}, what the node pools can provide"),
    ("total deserved above the pools",
     _add_team({"name": "ml-dev-b", "quota": {"neuronDevices": 16},
                "queue": {"deserved": {"neuronDevices": 16}}}),
     "platform.teams[*].queue.deserved.neuronDevices", 2 * DEV_CAPACITY["neuronDevices"],
     f"at most {DEV_CAPACITY['neuronDevices']}, what the node pools can provide"),
    ("team also a lustre namespace", _lustre_namespaces("notebooks", DEV_TEAM),
     "platform.teams[0].name", DEV_TEAM, "not also listed in storage.lustre.namespaces"),
    ("negative gpu quota", _team(quota={"gpus": -1}),
     "platform.teams[0].quota.gpus", -1, "a number of at least 0"),
    ("negative cpu quota", _team(quota={"gpus": 2, "neuronDevices": 16, "cpu": -1}),
     "platform.teams[0].quota.cpu", -1, "a number of at least 0"),
    ("negative memory quota", _team(quota={"gpus": 2, "neuronDevices": 16, "memoryGiB": -1}),
     "platform.teams[0].quota.memoryGiB", -1, "a number of at least 0"),
    ("negative efa quota", _team(quota={"gpus": 2, "neuronDevices": 16, "efaInterfaces": -8}),
     "platform.teams[0].quota.efaInterfaces", -8, "a number of at least 0"),
    ("unknown key in a queue", _queue(priority=5),
     "platform.teams[0].queue.priority", 5,
     "one of the keys capability, deserved, guarantee, reclaimable, weight"),
    ("unknown key in a team", _team(queueName="other"),
     "platform.teams[0].queueName", "other", "one of the keys adminGroups"),
    ("queue weight zero", _queue(weight=0),
     "platform.teams[0].queue.weight", 0, "a number from 1 to 65535"),
    ("queue weight above Volcano's maximum", _queue(weight=65536),
     "platform.teams[0].queue.weight", 65536, "a number from 1 to 65535"),
    ("team name not a namespace name", _team(name="ML_Dev"),
     "platform.teams[0].name", "ML_Dev", "a Kubernetes namespace name"),
    ("team without a quota", lambda data: data["teams"][0].pop("quota"),
     "platform.teams[0].quota", MISSING, "Accelerators and EFA the namespace may request"),
    ("empty group name", _team(adminGroups=[""]),
     "platform.teams[0].adminGroups[0]", "", "at least 1 character"),
]  # fmt: skip


@pytest.mark.parametrize("stack", STACKS)
def test_stack_teams_are_valid(stack: str) -> None:
    config = parse_platform_config(stack_data(stack))
    assert [team.name for team in config.teams] == [t["name"] for t in raw_teams(stack)]


@pytest.mark.parametrize(
    ("mutation", "path", "value", "allowed"),
    [pytest.param(m, p, v, a, id=i) for i, m, p, v, a in INVALID],
)
def test_invalid_team_configuration_names_key_value_and_allowed(
    mutation: Mutation, path: str, value: Any, allowed: str
) -> None:
    data = stack_data("dev")
    mutation(data)
    assert_reported(data, path, value, allowed)


def test_invalid_team_cases_are_distinct() -> None:
    cases = {(path, repr(value), allowed) for _, _, path, value, allowed in INVALID}
    assert len(cases) == len(INVALID) >= 8


def test_a_single_team_problem_is_reported_alone() -> None:
    # a mistake in one team does not drag in unrelated problems (each case above is precise)
    data = stack_data("dev")
    _queue(guarantee={"gpus": 2}, deserved={"gpus": 1, "neuronDevices": 16})(data)
    assert [p.path for p in problems_of(data)] == ["platform.teams[0].queue.guarantee.gpus"]


def test_guarantee_equal_to_deserved_and_capability_is_valid() -> None:
    data = stack_data("dev")
    _queue(
        guarantee={"gpus": 2, "neuronDevices": 16},
        deserved={"gpus": 2, "neuronDevices": 16},
        capability={"gpus": 2, "neuronDevices": 16},
    )(data)
    team = parse_platform_config(data).teams[0]
    assert team.queue.guarantee.gpus == team.queue.deserved.gpus == team.capability.gpus == 2


def test_total_shares_equal_to_the_pools_are_valid() -> None:
    data = stack_data("dev")
    _queue(
        guarantee={"gpus": DEV_CAPACITY["gpus"], "neuronDevices": DEV_CAPACITY["neuronDevices"]},
        deserved={"gpus": DEV_CAPACITY["gpus"], "neuronDevices": DEV_CAPACITY["neuronDevices"]},
    )(data)
    _team(quota={"gpus": DEV_CAPACITY["gpus"], "neuronDevices": DEV_CAPACITY["neuronDevices"]})(
        data
    )
    parse_platform_config(data)
