"""Slurm on Kubernetes (Slinky) under mocks: node sets, GRES, placement, chart values, accounting.

Expected values come from the stack files (``stacks/Pulumi.<stack>.yaml``), the instance catalog
(components/catalog.py), the bill of materials (components/versions.py), the upstream CRD schemas
and chart defaults in the reference data and, where a stack leaves a setting out, the documented
default of that setting (components/config/ field descriptions), written out here. Facts about
the cluster the platform builds around Slurm (the pools' taints, the Trainer runtimes' mount of
the shared file system) are read from the synthesized NodePools and runtimes, never from the
program's constants: importing those would let a wrong value in the program pass. Slinky facts: its
installation guide at our pin, https://github.com/SlinkyProject/slurm-operator/blob/v1.2.1/docs/installation.md
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, Final

import jsonschema
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ed25519, rsa
from cryptography.utils import CryptographyDeprecationWarning

from components import versions
from components.config import parse_platform_config
from components.platform import validated_config
from synth.engine import SECRET_MARK, ResourceRecord
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests import component_runs as parts
from tests.config_problems import MISSING, assert_reported, problems_of
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data
from tests.kubernetes_semantics import quantity, uncovered
from tests.mutations import Mutation, delete_at, set_at
from tests.reference_paths import chart_dir
from tests.schemas import validation_errors
from tests.stack_pools import GPU, NEURON, StackPool

RELEASE: Final = "kubernetes:helm.sh/v3:Release"
NODE_SET: Final = "kubernetes:slinky.slurm.net/v1beta1:NodeSet"
MARIADB: Final = "kubernetes:k8s.mariadb.com/v1alpha1:MariaDB"
NODE_POOL: Final = "kubernetes:karpenter.sh/v1:NodePool"
RUNTIME: Final = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
SECRET: Final = "kubernetes:core/v1:Secret"
NAMESPACE: Final = "kubernetes:core/v1:Namespace"
CLAIM: Final = "kubernetes:core/v1:PersistentVolumeClaim"
STORAGE_CLASS: Final = "kubernetes:storage.k8s.io/v1:StorageClass"
STATE_CLASS: Final = "slurm-retained"
PRIORITY_CLASS: Final = "kubernetes:scheduling.k8s.io/v1:PriorityClass"
RANDOM_PASSWORD: Final = "random:index/randomPassword:RandomPassword"

# Slinky's pinned release and the reference data's directories.
SLURM_NAMESPACE: Final = "slurm"
SLINKY_API: Final = "slinky.slurm.net/v1beta1"
SLINKY_CRDS: Final = ("crds", "slinky-slurm-operator", "v1.2.1")
MARIADB_CRDS: Final = ("crds", "mariadb-operator", "v26.6.0")
SLURM_RELEASE: Final = "slurm"
SLINKY_RELEASES: Final = ("cert-manager", "slurm-operator-crds", "slurm-operator", SLURM_RELEASE)
ACCOUNTING_RELEASES: Final = ("mariadb-operator-crds", "mariadb-operator")
FLOATING_TAGS: Final = frozenset(
    {"latest", "main", "master", "HEAD", "head", "nightly", "edge", "dev", "stable"}
)
# The platform's own names (README: node pools, storage, Slurm).
POOL_LABEL: Final = "trainingplatform.io/pool"
CLAIM_NAME: Final = "shared-lustre"
SHARED_MOUNT: Final = "/fsx"
FSX_STARTUP_TAINT: Final = "fsx.csi.aws.com/agent-not-ready"
EFA: Final = "vpc.amazonaws.com/efa"
HUGE_PAGES: Final = "hugepages-2Mi"
GRES_NAME: Final = {"nvidia": "gpu", "neuron": "neuron"}
"""Slurm's GRES name per accelerator maker (Slurm gres.conf: ``gpu``; Neuron devices by name)."""
INTERNAL_LB_ANNOTATIONS: Final = {
    "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
    "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
}
# Documented defaults (config field descriptions) of settings a stack may leave out.
DEFAULT_HUGEPAGES_GIB: Final = 5
DEFAULT_LOGIN_REPLICAS: Final = 1
DEFAULT_ACCOUNTING_STORAGE_GIB: Final = 20
DEFAULT_CONTROLLER_STORAGE_GIB: Final = 10
DEFAULT_REST_API_REPLICAS: Final = 1
DEFAULT_DATABASE_PORT: Final = 3306  # MariaDB CRD: spec.port defaults to 3306


# --------------------------------------------------------------------------- expectations


class Pool(StackPool):
    """A pool with what Slurm makes of it."""

    @property
    def gres(self) -> str:
        return GRES_NAME[self.instance.accelerator]

    @property
    def node_names(self) -> set[str]:
        """Slurm node names the pool's node set can have: ``<pool>-<ordinal>`` (Slinky appends
        the pod ordinal to the template hostname), one per pool node."""
        return {f"{self.name}-{ordinal}" for ordinal in range(self.max_nodes)}


def raw_slurm(stack: str) -> dict[str, Any]:
    slurm: dict[str, Any] = stack_data(stack).get("slurm", {})
    return slurm


def raw_node_sets(stack: str) -> list[dict[str, Any]]:
    node_sets: list[dict[str, Any]] = raw_slurm(stack).get("nodeSets", [])
    return node_sets


def stack_pool(stack: str, name: str) -> Pool:
    (pool,) = [Pool(raw) for raw in stack_data(stack)["nodePools"] if raw["name"] == name]
    return pool


def accounting_enabled(stack: str) -> bool:
    """``slurm.accounting.enabled``; documented default true."""
    return bool(raw_slurm(stack).get("accounting", {}).get("enabled", True))


ACCOUNTING_STACKS: Final = [stack for stack in STACKS if accounting_enabled(stack)]
NODE_SET_CASES: Final = [(stack, ns["pool"]) for stack in STACKS for ns in raw_node_sets(stack)]


class StackCase:
    """One synthesized stack with its raw (YAML) config."""

    def __init__(self, stack: str, result: StackResult) -> None:
        self.stack = stack
        self.run = ProgramRun(result.records)
        self.raw = stack_data(stack)
        self.slurm: dict[str, Any] = self.raw["slurm"]

    @property
    def kubernetes_version(self) -> str:
        return str(
            self.raw["cluster"].get("kubernetesVersion", versions.DEFAULT_KUBERNETES_VERSION)
        )

    @property
    def login(self) -> dict[str, Any]:
        login: dict[str, Any] = self.slurm["login"]
        return login

    @property
    def accounting(self) -> dict[str, Any]:
        accounting: dict[str, Any] = self.slurm.get("accounting", {})
        return accounting


@pytest.fixture(scope="module")
def cases(synthesized: dict[str, StackResult]) -> dict[str, StackCase]:
    return {stack: StackCase(stack, synthesized[stack]) for stack in STACKS}


@pytest.fixture(params=STACKS)
def case(request: pytest.FixtureRequest, cases: dict[str, StackCase]) -> StackCase:
    return cases[request.param]


@pytest.fixture(params=ACCOUNTING_STACKS)
def accounting_case(request: pytest.FixtureRequest, cases: dict[str, StackCase]) -> StackCase:
    return cases[request.param]


class NodeSetCase:
    """One expected node set: its stack, config entry, pool and the recorded NodeSet."""

    def __init__(self, stack: StackCase, pool: str) -> None:
        self.stack = stack
        (self.raw,) = [ns for ns in stack.slurm["nodeSets"] if ns["pool"] == pool]
        self.pool = stack_pool(stack.stack, pool)
        self.record = _node_set(stack.run, pool)
        self.spec: dict[str, Any] = self.record.inputs["spec"]

    @property
    def pod_spec(self) -> dict[str, Any]:
        pod: dict[str, Any] = self.spec["template"]["spec"]
        return pod

    @property
    def slurmd(self) -> dict[str, Any]:
        slurmd: dict[str, Any] = self.spec["slurmd"]
        return slurmd


@pytest.fixture(params=NODE_SET_CASES, ids=lambda c: f"{c[0]}:{c[1]}")
def node_set(request: pytest.FixtureRequest, cases: dict[str, StackCase]) -> NodeSetCase:
    stack, pool = request.param
    return NodeSetCase(cases[stack], pool)


# --------------------------------------------------------------------------- helpers


def _metadata(record: ResourceRecord) -> dict[str, Any]:
    metadata: dict[str, Any] = record.inputs.get("metadata", {})
    return metadata


def _release(run: ProgramRun, name: str) -> ResourceRecord:
    found = [r for r in run.of_type(RELEASE) if r.name == name]
    assert len(found) == 1, f"expected one release {name}: {found}"
    return found[0]


def _values(run: ProgramRun, release: str) -> dict[str, Any]:
    values: dict[str, Any] = _release(run, release).inputs["values"]
    return values


def _named(
    run: ProgramRun, resource_type: str, name: str, namespace: str | None = None
) -> ResourceRecord:
    found = [
        r
        for r in run.of_type(resource_type)
        if _metadata(r).get("name") == name and _metadata(r).get("namespace") == namespace
    ]
    assert len(found) == 1, f"expected one {resource_type} {namespace}/{name}: {found}"
    return found[0]


def _node_set(run: ProgramRun, pool: str) -> ResourceRecord:
    return _named(run, NODE_SET, pool, SLURM_NAMESPACE)


def _node_pool(run: ProgramRun, pool: str) -> dict[str, Any]:
    spec: dict[str, Any] = _named(run, NODE_POOL, pool).inputs["spec"]
    return spec


def _database(run: ProgramRun) -> ResourceRecord:
    (database,) = run.of_type(MARIADB)
    return database


def _login_set(case: StackCase) -> dict[str, Any]:
    login_sets = _values(case.run, SLURM_RELEASE)["loginsets"]
    assert len(login_sets) == 1, login_sets
    (login,) = login_sets.values()
    assert login.get("enabled", True), "the chart's loginsetDefaults enable every login set"
    result: dict[str, Any] = login
    return result


def _depends_on(run: ProgramRun, record: ResourceRecord) -> set[str]:
    """Every URN the record waits for, directly or through what it depends on."""
    seen: set[str] = set()
    pending = list(record.dependencies)
    while pending:
        urn = pending.pop()
        if urn not in seen:
            seen.add(urn)
            pending.extend(run.by_urn(urn).dependencies)
    return seen


def _manifest(record: ResourceRecord) -> dict[str, Any]:
    return {key: record.inputs[key] for key in ("apiVersion", "kind", "metadata", "spec")}


def _image_text(image: Any) -> str:
    """A chart image (string, or ``{repository, tag, digest}``) as a reference string."""
    if isinstance(image, str):
        return image
    text = str(image["repository"])
    if image.get("tag"):
        text += f":{image['tag']}"
    if image.get("digest"):
        text += f"@{image['digest']}"
    return text


def _pod(name: str, spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": SLURM_NAMESPACE},
        "spec": {**spec, "containers": [container]},
    }


def _slurmd_pod(node_set: NodeSetCase) -> dict[str, Any]:
    """The pod Slinky makes of a NodeSet: template.spec plus the ``slurmd`` container."""
    slurmd = node_set.slurmd
    container = {
        "name": "slurmd",
        "image": slurmd["image"],
        "resources": slurmd["resources"],
        "volumeMounts": slurmd["volumeMounts"],
    }
    return _pod(f"{node_set.pool.name}-0", node_set.pod_spec, container)


def _login_pod(login: dict[str, Any]) -> dict[str, Any]:
    container = {
        "name": "login",
        "image": _image_text(login["login"]["image"]),
        "volumeMounts": login["login"].get("volumeMounts", []),
    }
    return _pod("login-0", login["podSpec"], container)


def _unmounted(pod: dict[str, Any]) -> list[str]:
    """Volume mounts of the pod's containers that name no volume of the pod."""
    volumes = {volume["name"] for volume in pod["spec"].get("volumes", [])}
    return [
        mount["name"]
        for container in pod["spec"]["containers"]
        for mount in container.get("volumeMounts", [])
        if mount["name"] not in volumes
    ]


def _claim_mounts(pod_spec: dict[str, Any], mounts: list[dict[str, Any]]) -> list[str]:
    """Where ``mounts`` put the pod's volume of the ``shared-lustre`` claim."""
    claims = [
        volume["name"]
        for volume in pod_spec.get("volumes", [])
        if volume.get("persistentVolumeClaim", {}).get("claimName") == CLAIM_NAME
    ]
    assert len(claims) == 1, pod_spec.get("volumes")
    return [mount["mountPath"] for mount in mounts if mount["name"] == claims[0]]


def _runtime_shared_mounts(run: ProgramRun) -> dict[str, str]:
    """Where the Trainer runtimes' training containers mount their team's claims: mount path
    -> the directory of the file system it shows (from the PV's mount name)."""
    directories = {
        (v.inputs["spec"]["claimRef"]["namespace"], v.inputs["spec"]["claimRef"]["name"]): "/"
        + v.inputs["spec"]["csi"]["volumeAttributes"]["mountname"].partition("/")[2]
        for v in run.of_type("kubernetes:core/v1:PersistentVolume")
        if v.inputs["spec"]["csi"]["driver"] == "fsx.csi.aws.com"
    }
    paths: dict[str, str] = {}
    for runtime in run.of_type(RUNTIME):
        namespace = runtime.inputs["metadata"]["namespace"]
        for job in runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]["spec"]
            claims = {
                v["name"]: v["persistentVolumeClaim"]["claimName"]
                for v in pod.get("volumes", [])
                if "persistentVolumeClaim" in v
            }
            for container in pod["containers"]:
                for mount in container.get("volumeMounts", []):
                    if (namespace, claims.get(mount["name"])) in directories:
                        paths[mount["mountPath"]] = directories[namespace, claims[mount["name"]]]
    return paths


def _conf_items(line: str) -> dict[str, str]:
    """``Key=Value`` words of a Slurm configuration line."""
    return dict(word.split("=", 1) for word in line.split() if "=" in word)


def _hostlist(text: str) -> set[str]:
    """Expand a Slurm hostlist: ``a-[0-2,5],b-0`` -> a-0, a-1, a-2, a-5, b-0."""
    names: set[str] = set()
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", text):
        match = re.fullmatch(r"([^\[]*)(?:\[([^\]]*)\])?", part)
        assert match, text
        prefix, ranges = match.groups()
        if ranges is None:
            names.add(prefix)
            continue
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            names.update(f"{prefix}{n}" for n in range(int(low), int(high or low) + 1))
    return names


def _gres_lines(values: dict[str, Any]) -> list[dict[str, str]]:
    text: str = values["configFiles"]["gres.conf"]
    return [
        _conf_items(line)
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _covers(line: dict[str, str], node: str) -> bool:
    """Whether a gres.conf line applies to a node (no NodeName: every node)."""
    return "NodeName" not in line or node in _hostlist(line["NodeName"])


def _images(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every image setting under ``node``: ``image`` keys and ``{repository, ...}`` mappings."""
    if isinstance(node, dict):
        if "repository" in node:
            yield path, node
            return
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            if key == "image" and isinstance(value, str):
                yield here, value
            else:
                yield from _images(value, here)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _images(item, f"{path}[{index}]")


def _unpinned(image: Any) -> str | None:
    """Why an image setting is not pinned (a floating or missing tag), or None."""
    if isinstance(image, dict):
        if image.get("digest"):
            return None
        tag = str(image.get("tag") or "")
    else:
        if "@sha256:" in image:
            return None
        last = str(image).rsplit("/", 1)[-1]
        tag = last.rsplit(":", 1)[1] if ":" in last else ""
    if not tag:
        return "no tag (Docker and Helm charts fall back to a floating default)"
    if tag in FLOATING_TAGS:
        return f"floating tag {tag}"
    return None


def _at(node: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _merged(defaults: Any, values: Any) -> Any:
    """Helm's merge of user values over chart defaults (maps merge, everything else replaces)."""
    if isinstance(defaults, dict) and isinstance(values, dict):
        merged = dict(defaults)
        for key, value in values.items():
            merged[key] = _merged(defaults.get(key), value)
        return merged
    return values


@cache
def _chart_defaults(reference_dir: Path, chart_dir: str) -> dict[str, Any]:
    defaults: dict[str, Any] = load_yaml(
        (reference_dir / "charts" / chart_dir / "values.yaml").read_text()
    )
    return defaults


def _secret_values(run: ProgramRun, name: str) -> tuple[ResourceRecord, dict[str, Any]]:
    secret = _named(run, SECRET, name, SLURM_NAMESPACE)
    data: dict[str, Any] = secret.inputs.get("stringData", {})
    return secret, data


def _assert_random_secret(run: ProgramRun, name: str, keys: set[str]) -> None:
    """The Secret exists in the slurm namespace with ``keys``, each a RandomPassword's secret
    result: never plain text in the program or the state."""
    secret, data = _secret_values(run, name)
    assert keys <= set(data), (name, sorted(data))
    for key in keys:
        assert data[key] == SECRET_MARK, f"{name}.{key} is not a secret value"
    sources = secret.property_dependencies.get("stringData", [])
    assert len(sources) >= len(keys), (name, sources)
    assert {run.by_urn(urn).type for urn in sources} == {RANDOM_PASSWORD}, sources


def _openssh(key: Any, comment: str = "") -> str:
    line: str = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return f"{line} {comment}".strip()


@cache
def _rsa_key(bits: int) -> str:
    return _openssh(rsa.generate_private_key(public_exponent=65537, key_size=bits), "rsa@test")


@cache
def _ed25519_key() -> str:
    return _openssh(ed25519.Ed25519PrivateKey.generate(), "ed@test")


@cache
def _private_key() -> str:
    return (
        ed25519.Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
        .decode()
    )


@cache
def _dsa_key() -> str:
    # cryptography warns that SSH DSA support is going; the test only needs one such key line.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CryptographyDeprecationWarning)
        return _openssh(dsa.generate_private_key(key_size=1024), "dsa@test")


def _second_line_key() -> str:
    """A valid key with a second, unchecked authorized_keys line smuggled after it."""
    return f'{_ed25519_key()}\ncommand="/bin/sh" {_rsa_key(1024)}'


# --------------------------------------------------------------------------- the stacks


def test_every_stack_runs_slurm_on_gpu_neuron_efa_and_plain_pools() -> None:
    """The parametrized cases below would silently shrink if the stacks lost their node sets."""
    assert {stack for stack, _ in NODE_SET_CASES} == set(STACKS)
    for stack in STACKS:
        assert raw_slurm(stack).get("enabled") is True, stack
    pools = [stack_pool(stack, pool) for stack, pool in NODE_SET_CASES]
    assert {pool.gpu for pool in pools} == {True, False}, "GPU and Trainium node sets"
    assert {pool.efa for pool in pools} == {True, False}, "EFA and non-EFA node sets"


# --------------------------------------------------------------------------- node sets


def test_the_log_sidecar_of_every_node_set_is_confined(case: StackCase) -> None:
    """slurmd is privileged by design; the operator's logfile sidecar beside it need not be:
    the NodeSet's ``logfile`` is merged into it as a container (slurm-operator v1.2.1
    common.go, LogfileContainer), and pod-level seccomp reaches it (a privileged slurmd always
    runs unconfined)."""
    for record in case.run.of_type(NODE_SET):
        spec = record.inputs["spec"]
        context = spec["logfile"]["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]
        assert context["readOnlyRootFilesystem"] is True
        assert spec["logfile"]["resources"]["limits"]["memory"]
        pod_context = spec["template"]["spec"]["securityContext"]
        assert pod_context["seccompProfile"] == {"type": "RuntimeDefault"}


def test_one_node_set_per_configured_pool(case: StackCase) -> None:
    records = case.run.of_type(NODE_SET)
    expected = sorted(ns["pool"] for ns in case.slurm["nodeSets"])
    assert sorted(_metadata(r)["name"] for r in records) == expected
    for record in records:
        assert record.inputs["apiVersion"] == SLINKY_API
        assert record.inputs["kind"] == "NodeSet"
        assert _metadata(record)["namespace"] == SLURM_NAMESPACE
        assert _metadata(record)["labels"][POOL_LABEL] == _metadata(record)["name"]


def test_node_set_validates_against_the_slinky_crd(
    node_set: NodeSetCase, reference_dir: Path
) -> None:
    crds = reference_dir.joinpath(*SLINKY_CRDS)
    manifest = _manifest(node_set.record)
    assert validation_errors(manifest, node_set.stack.kubernetes_version, crds) == []


def test_node_set_pod_validates_as_core_kubernetes(node_set: NodeSetCase) -> None:
    """``template.spec`` and ``slurmd`` are preserve-unknown-fields in the CRD: the Kubernetes
    schema is the only check of what Slinky puts into the pod."""
    pod = _slurmd_pod(node_set)
    assert validation_errors(pod, node_set.stack.kubernetes_version, None) == []
    assert pod["spec"]["containers"][0]["volumeMounts"], "slurmd mounts /dev/shm and Lustre"
    assert _unmounted(pod) == []


def test_node_set_pod_with_a_misspelt_field_fails_validation(node_set: NodeSetCase) -> None:
    """The check above is strict: a field Kubernetes does not know is reported."""
    pod = _slurmd_pod(node_set)
    pod["spec"]["nodeSelecter"] = pod["spec"].pop("nodeSelector")
    assert validation_errors(pod, node_set.stack.kubernetes_version, None) != []


def test_node_set_replicas_partition_and_controller(node_set: NodeSetCase) -> None:
    spec = node_set.spec
    # created at its warm floor; KEDA owns the count afterwards, so an up leaves it alone
    assert spec["replicas"] == node_set.raw.get("warmNodes", 0)
    assert "spec.replicas" in node_set.record.ignore_changes
    assert spec["partition"]["enabled"] is True
    # The chart names its Controller after fullnameOverride (else the release name).
    values = _values(node_set.stack.run, SLURM_RELEASE)
    assert spec["controllerRef"]["name"] == values.get("fullnameOverride", SLURM_RELEASE)
    assert spec.get("workloadDisruptionProtection", True) is True


def test_node_set_image_comes_from_config(node_set: NodeSetCase) -> None:
    images = node_set.stack.slurm["images"]
    default = images["slurmdGpu"] if node_set.pool.gpu else images["slurmdNeuron"]
    assert node_set.slurmd["image"] == node_set.raw.get("image", default)


# --------------------------------------------------------------------------- per-node requests


def test_slurmd_requests_every_accelerator_and_efa_interface(node_set: NodeSetCase) -> None:
    pool = node_set.pool
    requests = node_set.slurmd["resources"]["requests"]
    for entry in pool.entries:  # every instance type of the pool
        assert quantity(requests[pool.accelerator_resource]) == entry.accelerators, entry.name
        if pool.efa:
            assert entry.efa_interfaces > 0
            assert quantity(requests[EFA]) == entry.efa_interfaces, entry.name
        else:
            assert quantity(requests.get(EFA, 0)) == 0, entry.name
    other = NEURON if pool.gpu else GPU
    assert other not in requests


def test_slurmd_requests_equal_limits_memory_included(
    node_set: NodeSetCase,
) -> None:
    """The pod's memory limit is its request, and Slurm schedules only what the pod may use:
    a job over its --mem is killed by its own cgroup, never the pod with every job on it."""
    resources = node_set.slurmd["resources"]
    requests, limits = resources["requests"], resources.get("limits", {})
    extended = [name for name in requests if "/" in name or name.startswith("hugepages-")]
    assert node_set.pool.accelerator_resource in extended
    for name in [*extended, "memory"]:
        assert name in limits, name
        assert quantity(limits[name]) == quantity(requests[name]), name
    # no RealMemory: the image's entrypoint sets MemSpecLimit to the host's memory less the
    # pod's limit (POD_MEMORY), so jobs get exactly the limit; a RealMemory below the host's
    # would take that share twice
    assert "RealMemory" not in _conf_items(node_set.spec["extraConf"])


def test_huge_pages_only_on_efa_pools(node_set: NodeSetCase) -> None:
    requests = node_set.slurmd["resources"]["requests"]
    if node_set.pool.efa:
        gib = node_set.stack.slurm.get("hugepagesGiB", DEFAULT_HUGEPAGES_GIB)
        assert quantity(requests[HUGE_PAGES]) == gib * 2**30
        # Kubernetes requires a memory (or CPU) request beside huge pages.
        assert quantity(requests["memory"]) > 0
    else:
        assert HUGE_PAGES not in requests
        assert HUGE_PAGES not in node_set.slurmd["resources"].get("limits", {})


# --------------------------------------------------------------------------- GRES


def test_node_set_declares_its_gres(node_set: NodeSetCase) -> None:
    items = _conf_items(node_set.spec["extraConf"])
    assert items["Gres"] == f"{node_set.pool.gres}:{node_set.pool.instance.accelerators}"


def test_gres_types_are_the_gres_in_use(case: StackCase) -> None:
    in_use = {stack_pool(case.stack, ns["pool"]).gres for ns in case.slurm["nodeSets"]}
    conf = _values(case.run, SLURM_RELEASE)["controller"]["extraConfMap"]
    assert set(conf["GresTypes"]) == in_use
    assert len(conf["GresTypes"]) == len(in_use)
    if case.accounting.get("enabled", True):
        tracked = set(conf["AccountingStorageTRES"])
        assert {f"gres/{gres}" for gres in in_use} <= tracked


def test_gres_conf_has_a_line_for_every_node_of_every_node_set(case: StackCase) -> None:
    lines = _gres_lines(_values(case.run, SLURM_RELEASE))
    nvidia = [line for line in lines if line.get("AutoDetect") == "nvidia"]
    neuron = [line for line in lines if line.get("Name") == "neuron"]
    assert nvidia or neuron
    for node_set in case.slurm["nodeSets"]:
        pool = stack_pool(case.stack, node_set["pool"])
        own, other = (nvidia, neuron) if pool.gpu else (neuron, nvidia)
        for node in sorted(pool.node_names):
            assert [line for line in own if _covers(line, node)], (pool.name, node)
            assert [line for line in other if _covers(line, node)] == [], (pool.name, node)
        if not pool.gpu:
            devices = {f"/dev/neuron{i}" for i in range(pool.instance.accelerators)}
            for line in neuron:
                if _covers(line, f"{pool.name}-0"):
                    assert _hostlist(line["File"]) == devices, line
                    assert line.get("AutoDetect") != "nvidia", line


def test_hostlist_expansion() -> None:
    assert _hostlist("trn1-[0-2]") == {"trn1-0", "trn1-1", "trn1-2"}
    assert _hostlist("p5-0") == {"p5-0"}
    assert _hostlist("a-[0-1,4],b-3") == {"a-0", "a-1", "a-4", "b-3"}
    assert _hostlist("/dev/neuron[0-15]") == {f"/dev/neuron{i}" for i in range(16)}


# --------------------------------------------------------------------------- placement


def test_node_set_selects_its_pools_slurm_nodes_and_tolerates_their_taints(
    node_set: NodeSetCase,
) -> None:
    """slurmd runs on the pool's NodePool kept for Slurm, never on the one Volcano's gangs use
    (two schedulers would race for one node; README, sharing pools)."""
    slurm_spec = _node_pool(node_set.stack.run, f"{node_set.pool.name}-slurm")
    own_spec = _node_pool(node_set.stack.run, node_set.pool.name)
    selector = node_set.pod_spec["nodeSelector"]
    assert selector[POOL_LABEL] == node_set.pool.name
    slurm_labels = slurm_spec["template"]["metadata"]["labels"]
    assert {k: slurm_labels.get(k) for k in selector} == selector, "selects Slurm's nodes"
    own_labels = own_spec["template"]["metadata"]["labels"]
    assert {k: own_labels.get(k) for k in selector} != selector, "never the gangs' nodes"
    taints = slurm_spec["template"]["spec"].get("taints", [])
    assert {"key": "trainingplatform.io/reserved-for", "value": "slurm",
            "effect": "NoSchedule"} in taints  # fmt: skip
    assert uncovered(node_set.pod_spec.get("tolerations", []), taints) == []


def test_node_set_waits_for_the_fsx_startup_taint(node_set: NodeSetCase) -> None:
    pool_spec = _node_pool(node_set.stack.run, node_set.pool.name)
    startup = pool_spec["template"]["spec"].get("startupTaints", [])
    fsx = [taint for taint in startup if taint["key"] == FSX_STARTUP_TAINT]
    assert fsx, "the pool's nodes start tainted until the Lustre client is ready"
    tolerations = node_set.pod_spec.get("tolerations", [])
    assert uncovered(tolerations, fsx) == fsx


def test_node_set_tolerates_an_extra_pool_taint(run_platform: Callable[..., ProgramRun]) -> None:
    taint = {"key": "example.com/reserved-for", "value": "slurm", "effect": "NoExecute"}
    data = stack_data("dev")
    pool = data["slurm"]["nodeSets"][0]["pool"]
    (raw_pool,) = [p for p in data["nodePools"] if p["name"] == pool]
    raw_pool["taints"] = [taint]
    run = run_platform(data, "dev")
    taints = _node_pool(run, pool)["template"]["spec"]["taints"]
    assert taint in taints
    tolerations = _node_set(run, pool).inputs["spec"]["template"]["spec"]["tolerations"]
    assert uncovered(tolerations, taints) == []
    assert uncovered([], [taint]) == [taint]


# --------------------------------------------------------------------------- shared file system


def test_node_sets_and_login_mount_lustre_where_trainer_runtimes_do(case: StackCase) -> None:
    """A file has one path everywhere: Slurm mounts the whole file system at /fsx, and each
    team directory a runtime mounts sits at /fsx plus its path on the file system."""
    runtime_paths = _runtime_shared_mounts(case.run)
    assert runtime_paths
    for mount_path, directory in runtime_paths.items():
        assert mount_path == f"{SHARED_MOUNT}{directory}", mount_path
    for node_set in case.slurm["nodeSets"]:
        spec = _node_set(case.run, node_set["pool"]).inputs["spec"]
        paths = _claim_mounts(spec["template"]["spec"], spec["slurmd"]["volumeMounts"])
        assert paths == [SHARED_MOUNT], node_set["pool"]
    login = _login_set(case)
    paths = _claim_mounts(login["podSpec"], login["login"]["volumeMounts"])
    assert paths == [SHARED_MOUNT]


def test_node_sets_and_login_mount_the_model_store_at_models(case: StackCase) -> None:
    """Slurm's model store claim (the whole EFS file system) sits at /models on every slurmd
    and login pod, where team runtimes see their own area."""
    assert case.raw["modelStore"]["enabled"]

    def model_mounts(pod_spec: dict[str, Any], mounts: list[dict[str, Any]]) -> list[str]:
        names = [
            volume["name"]
            for volume in pod_spec.get("volumes", [])
            if volume.get("persistentVolumeClaim", {}).get("claimName") == "model-store"
        ]
        return [mount["mountPath"] for mount in mounts if mount["name"] in names]

    for node_set in case.slurm["nodeSets"]:
        spec = _node_set(case.run, node_set["pool"]).inputs["spec"]
        assert model_mounts(spec["template"]["spec"], spec["slurmd"]["volumeMounts"]) == [
            "/models"
        ], node_set["pool"]
    login = _login_set(case)
    assert model_mounts(login["podSpec"], login["login"]["volumeMounts"]) == ["/models"]
    claim = _named(case.run, CLAIM, "model-store", SLURM_NAMESPACE)
    assert "ReadWriteMany" in claim.inputs["spec"]["accessModes"]


def test_slurm_namespace_has_the_shared_claim(case: StackCase) -> None:
    claim = _named(case.run, CLAIM, CLAIM_NAME, SLURM_NAMESPACE)
    assert "ReadWriteMany" in claim.inputs["spec"]["accessModes"]


# --------------------------------------------------------------------------- chart values


@pytest.mark.parametrize("key", ["slurmKey", "jwtKey"])
def test_auth_keys_are_random_secrets_made_by_the_program(case: StackCase, key: str) -> None:
    setting = _values(case.run, SLURM_RELEASE)[key]
    assert setting["create"] is False, "the chart would regenerate it on every update"
    ref = setting["secretRef"]
    _assert_random_secret(case.run, ref["name"], {ref["key"]})


def _default_partitions(run: ProgramRun) -> list[str]:
    """Node sets whose partition is marked the default."""
    return [
        record.inputs["metadata"]["name"]
        for record in run.of_type(NODE_SET)
        if "Default=YES" in record.inputs["spec"]["partition"]["config"].split()
    ]


def test_every_partition_is_one_node_set_and_one_is_the_default(
    case: StackCase, reference_dir: Path
) -> None:
    """A partition spanning node sets would put one job on two placement groups (and EFA
    counts); the chart's spanning partitions are all off."""
    defaults = _chart_defaults(reference_dir, chart_dir(versions.SLURM_CHART))
    values = _values(case.run, SLURM_RELEASE)
    partitions = _merged(defaults["partitions"], values["partitions"])
    assert [name for name, p in partitions.items() if p.get("enabled")] == []
    for node_set in case.slurm["nodeSets"]:
        partition = _node_set(case.run, node_set["pool"]).inputs["spec"]["partition"]
        assert partition["enabled"] is True, node_set["pool"]
    first = case.slurm["nodeSets"][0]["pool"]
    assert _default_partitions(case.run) == [case.slurm.get("defaultPartition", first)]


def test_the_default_partition_can_be_another_node_sets(
    run_component: RunComponent,
) -> None:
    data = stack_data("prod")
    data["slurm"]["defaultPartition"] = data["slurm"]["nodeSets"][1]["pool"]
    run = run_component(parts.slurm, data, "prod")
    assert _default_partitions(run) == [data["slurm"]["nodeSets"][1]["pool"]]


def _topology(case: StackCase) -> list[dict[str, Any]]:
    document = load_yaml(_values(case.run, SLURM_RELEASE)["configFiles"]["topology.yaml"])
    assert isinstance(document, list)
    return document


def test_topology_puts_each_node_set_under_its_own_switch_with_no_common_parent(
    case: StackCase,
) -> None:
    (topology,) = _topology(case)
    assert topology["cluster_default"] is True
    switches = topology["tree"]["switches"]
    # no switch has children: Slurm's tree topology allocates a job below one switch only
    assert all("children" not in switch for switch in switches)
    by_switch = {switch["switch"]: _hostlist(switch["nodes"]) for switch in switches}
    pools = [node_set["pool"] for node_set in case.slurm["nodeSets"]]
    assert sorted(by_switch) == sorted(pools)
    for pool in pools:
        names = by_switch[pool]
        assert names and all(name.rsplit("-", 1)[0] == pool for name in names), pool
    # the slurmd nodes are named <pool>-<ordinal>, so each falls under its own switch
    for node_set in case.slurm["nodeSets"]:
        template = _node_set(case.run, node_set["pool"]).inputs["spec"]["template"]["spec"]
        assert template["hostname"] == f"{node_set['pool']}-"


def test_slurm_nodes_carry_their_switch_in_the_topology_annotation(case: StackCase) -> None:
    (topology,) = _topology(case)
    switches = {switch["switch"] for switch in topology["tree"]["switches"]}
    for node_set in case.slurm["nodeSets"]:
        pool = node_set["pool"]
        (node_pool,) = [
            r for r in case.run.of_type("kubernetes:karpenter.sh/v1:NodePool")
            if r.inputs["metadata"]["name"] == f"{pool}-slurm"
        ]  # fmt: skip
        annotations = node_pool.inputs["spec"]["template"]["metadata"]["annotations"]
        name, _, unit = annotations["topology.slinky.slurm.net/spec"].partition(":")
        assert name == topology["topology"] and unit == pool and unit in switches


def test_jobs_are_confined_and_refused_when_no_partition_can_hold_them(case: StackCase) -> None:
    conf = _values(case.run, SLURM_RELEASE)["controller"]["extraConfMap"]
    # Slurm's own check would refuse every job of a partition scaled to zero (job_mgr.c
    # _part_access_check compares with the partition's nodes now): job_submit.lua instead
    assert "EnforcePartLimits" not in conf
    assert conf["JobSubmitPlugins"] == "lua"
    assert conf["TaskPlugin"] == ["task/cgroup", "task/affinity"]
    assert conf["ProctrackType"] == "proctrack/cgroup"
    assert conf["MpiDefault"] == "pmix"
    assert conf["SelectTypeParameters"] == "CR_Core_Memory"
    # a job keeps slurmd's (raised) locked-memory limit, which EFA needs
    assert conf["PropagateResourceLimitsExcept"] == "MEMLOCK"
    cgroup = dict(
        line.split("=", 1)
        for line in _values(case.run, SLURM_RELEASE)["configFiles"]["cgroup.conf"].splitlines()
        if line and not line.startswith("#")
    )
    for key in ("ConstrainCores", "ConstrainDevices", "ConstrainRAMSpace"):
        assert cgroup[key] == "yes", key
    assert cgroup["CgroupPlugin"] == "cgroup/v2"


def test_cluster_name_and_service_sizes_come_from_config(case: StackCase) -> None:
    values = _values(case.run, SLURM_RELEASE)
    eks_name = case.raw.get("clusterName", f"training-{case.raw['environment']}")
    assert values["clusterName"] == case.slurm.get("clusterName", eks_name.replace("-", "_"))
    assert values["restapi"]["replicas"] == case.slurm.get(
        "restApiReplicas", DEFAULT_REST_API_REPLICAS
    )
    gib = case.slurm.get("controllerStorageGiB", DEFAULT_CONTROLLER_STORAGE_GIB)
    persistence = values["controller"]["persistence"]
    assert persistence.get("enabled", True) is True
    assert quantity(persistence["resources"]["requests"]["storage"]) == gib * 2**30


def test_login_set_keys_and_replicas_come_from_config(case: StackCase) -> None:
    login = _login_set(case)
    lines = [line for line in login["rootSshAuthorizedKeys"].splitlines() if line.strip()]
    assert lines == [key.strip() for key in case.login["sshAuthorizedKeys"]]
    assert login["replicas"] == case.login.get("replicas", DEFAULT_LOGIN_REPLICAS)


def test_login_service_is_an_internal_load_balancer(case: StackCase) -> None:
    service = _login_set(case)["service"]
    assert service["spec"]["type"] == "LoadBalancer"
    annotations = service["metadata"]["annotations"]
    assert {k: annotations.get(k) for k in INTERNAL_LB_ANNOTATIONS} == INTERNAL_LB_ANNOTATIONS
    # Exactly the configured sources: an empty list would open the balancer to every source.
    assert service["spec"]["loadBalancerSourceRanges"] == case.login["allowedCidrs"]


def test_login_sources_are_required() -> None:
    """With no sources the NLB would accept anyone, and a VPC default would admit every pod."""
    data = stack_data("dev")
    del data["slurm"]["login"]["allowedCidrs"]
    assert_reported(data, "platform.slurm.login.allowedCidrs", MISSING, "open to every source")


def test_login_sources_the_stack_routes_no_reply_to_are_refused() -> None:
    """prod routes only deployFrom's networks through its transit gateway: the login balancer
    keeps the client's address, so a source outside them never gets a reply."""
    data = stack_data("prod")
    routed = data["cluster"]["endpoint"]["deployFrom"]
    assert routed["transitGatewayId"] and routed["cidrs"] == ["10.200.0.0/16"]
    data["slurm"]["login"]["allowedCidrs"] = ["10.200.8.0/24", "10.201.0.0/16"]
    assert_reported(data, "platform.slurm.login.allowedCidrs[1]", "10.201.0.0/16", "routes back to")
    data["slurm"]["login"]["allowedCidrs"] = ["10.200.8.0/24"]  # within the routed network
    validated_config(data)
    # without a transit gateway of the stack's the network team routes them: not judged
    dev = stack_data("dev")
    assert "transitGatewayId" not in dev["cluster"]["endpoint"].get("deployFrom", {})
    dev["slurm"]["login"]["allowedCidrs"] = ["10.201.0.0/16"]
    validated_config(dev)


def test_login_pod_and_service_validate_as_core_kubernetes(case: StackCase) -> None:
    login = _login_set(case)
    pod = _login_pod(login)
    assert validation_errors(pod, case.kubernetes_version, None) == []
    assert _unmounted(pod) == []
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "slurm-login",
            "namespace": SLURM_NAMESPACE,
            **login["service"]["metadata"],
        },
        "spec": {**login["service"]["spec"], "ports": [{"name": "ssh", "port": 22}]},
    }
    assert validation_errors(service, case.kubernetes_version, None) == []


def test_no_floating_image_anywhere(case: StackCase) -> None:
    sources: dict[str, Any] = {
        f"release {name}": _values(case.run, name)
        for name in (SLURM_RELEASE, "cert-manager", "slurm-operator", "mariadb-operator")
    }
    for record in [*case.run.of_type(NODE_SET), *case.run.of_type(MARIADB)]:
        sources[f"{record.type.rsplit(':', 1)[-1]} {record.name}"] = record.inputs["spec"]
    found = {source: list(_images(node)) for source, node in sources.items()}
    assert found[f"release {SLURM_RELEASE}"], "the walk finds the slurm chart's images"
    for record in [*case.run.of_type(NODE_SET), *case.run.of_type(MARIADB)]:
        assert found[f"{record.type.rsplit(':', 1)[-1]} {record.name}"], record.name
    unpinned = [
        f"{source}: {path} = {image!r} ({reason})"
        for source, images in found.items()
        for path, image in images
        if (reason := _unpinned(image))
    ]
    assert unpinned == []


def test_chart_default_floating_images_are_overridden(case: StackCase, reference_dir: Path) -> None:
    """The slurm chart's sidecars default to alpine:latest: every one the cluster runs is set."""
    defaults = _chart_defaults(reference_dir, chart_dir(versions.SLURM_CHART))
    floating = [path for path, image in _images(defaults) if _unpinned(image)]
    assert floating, "the chart defaults still contain floating images (else drop this test)"
    values = _values(case.run, SLURM_RELEASE)
    node_sets = [r.inputs["spec"] for r in case.run.of_type(NODE_SET)]
    unset: list[str] = []
    for path in floating:
        block, _, rest = path.partition(".")
        if block == "loginsetDefaults":
            targets = [(f"loginsets.{k}.{rest}", v) for k, v in values["loginsets"].items()]
            settings = [(name, _at(login, rest)) for name, login in targets]
        elif block == "nodesetDefaults":
            settings = [
                (f"NodeSet {i}.{rest}", _at(spec, rest)) for i, spec in enumerate(node_sets)
            ]
            settings += [
                (f"nodesets.{k}.{rest}", _at(v, rest))
                for k, v in values.get("nodesets", {}).items()
            ]
        else:
            settings = [(path, _at(values, path))]
        unset += [
            f"{name}: {image!r}" for name, image in settings if image is None or _unpinned(image)
        ]
    assert unset == []


# --------------------------------------------------------------------------- accounting


def test_accounting_database_validates_against_the_mariadb_crd(
    accounting_case: StackCase, reference_dir: Path
) -> None:
    crds = reference_dir.joinpath(*MARIADB_CRDS)
    database = _database(accounting_case.run)
    assert _metadata(database)["namespace"] == SLURM_NAMESPACE
    assert validation_errors(_manifest(database), accounting_case.kubernetes_version, crds) == []


def test_state_volumes_are_encrypted_and_retained_only_where_protected(
    accounting_case: StackCase,
) -> None:
    """Retained where protected; elsewhere they go with the stack (its volumes are deleted).

    The database's claim follows its StatefulSet (mariadb-operator v26.6.0
    pkg/builder/statefulset_builder.go passes pvcRetentionPolicy through); slurmctld's claim
    has no policy (Slinky v1.2.1 controller_app.go) and goes with the namespace; each volume
    then follows its class's reclaim policy.
    """
    protected = bool(accounting_case.raw.get("protectStatefulResources", False))
    kept = "Retain" if protected else "Delete"
    spec = _database(accounting_case.run).inputs["spec"]
    gib = accounting_case.accounting.get("storageGiB", DEFAULT_ACCOUNTING_STORAGE_GIB)
    assert quantity(spec["storage"]["size"]) == gib * 2**30
    assert spec["storage"]["pvcRetentionPolicy"] == {"whenDeleted": kept, "whenScaled": kept}
    persistence = _values(accounting_case.run, SLURM_RELEASE)["controller"]["persistence"]
    for class_name in (spec["storage"]["storageClassName"], persistence["storageClassName"]):
        storage_class = _named(accounting_case.run, STORAGE_CLASS, class_name)
        assert storage_class.inputs["parameters"]["encrypted"] == "true", class_name
        assert storage_class.inputs["reclaimPolicy"] == kept, class_name


def test_protection_switches_the_state_volumes_retention(
    run_component: RunComponent,
) -> None:
    """The same stack keeps its state volumes once protected, and lets them go unprotected."""
    for protect in (True, False):
        data = stack_data("dev")
        data["protectStatefulResources"] = protect
        run = run_component(parts.slurm, data, "dev")
        kept = "Retain" if protect else "Delete"
        database = _database(run)
        assert database.retain_on_delete is protect
        assert database.inputs["spec"]["storage"]["pvcRetentionPolicy"]["whenDeleted"] == kept
        class_name = database.inputs["spec"]["storage"]["storageClassName"]
        state_class = _named(run, STORAGE_CLASS, class_name)
        assert state_class.inputs["reclaimPolicy"] == kept
        # the API server refuses a changed reclaimPolicy: the toggle replaces the class, old first
        assert "reclaimPolicy" in state_class.replace_on_changes
        assert state_class.delete_before_replace is True


def test_teardown_docs_state_where_state_volumes_outlive_the_stack(
    cases: dict[str, StackCase],
) -> None:
    """docs/how-to/tear-down.md names the stacks whose Slurm state volumes a destroy leaves."""
    kept = sorted(
        stack
        for stack, case in cases.items()
        if _named(case.run, STORAGE_CLASS, STATE_CLASS).inputs["reclaimPolicy"] == "Retain"
    )
    assert kept == sorted(s for s in STACKS if stack_data(s).get("protectStatefulResources"))
    doc = " ".join(
        (Path(__file__).parents[1] / "docs" / "how-to" / "tear-down.md").read_text().split()
    )
    (bullet,) = re.findall(
        r"\*\*EBS volumes of the `slurm-retained` StorageClass\*\*.*? - \*\*", doc
    )
    assert kept == ["prod"] and "in prod only" in bullet
    assert "`reclaimPolicy: Retain`" in bullet and "`reclaimPolicy: Delete`" in bullet


def test_database_passwords_come_from_a_program_secret(accounting_case: StackCase) -> None:
    spec = _database(accounting_case.run).inputs["spec"]
    refs = [spec["rootPasswordSecretKeyRef"], spec["passwordSecretKeyRef"]]
    for name in {ref["name"] for ref in refs}:
        _assert_random_secret(
            accounting_case.run, name, {ref["key"] for ref in refs if ref["name"] == name}
        )


def test_slurmdbd_connects_to_the_database(accounting_case: StackCase) -> None:
    database = _database(accounting_case.run)
    spec = database.inputs["spec"]
    accounting = _values(accounting_case.run, SLURM_RELEASE)["accounting"]
    assert accounting["enabled"] is True
    storage = accounting["storageConfig"]
    assert storage["host"] == _metadata(database)["name"], "the operator's Service"
    assert storage["port"] == spec.get("port", DEFAULT_DATABASE_PORT)
    assert storage["database"] == spec["database"]
    assert storage["username"] == spec["username"]
    assert storage["passwordKeyRef"] == spec["passwordSecretKeyRef"]


def test_database_is_protected_exactly_where_stateful_resources_are(
    accounting_case: StackCase,
) -> None:
    expected = bool(accounting_case.raw.get("protectStatefulResources", False))
    assert _database(accounting_case.run).protect is expected


def test_accounting_and_protection_cases_exist() -> None:
    assert {"dev", "prod"} <= set(ACCOUNTING_STACKS)
    assert stack_data("prod").get("protectStatefulResources") is True
    assert not stack_data("dev").get("protectStatefulResources", False)


def test_accounting_disabled_installs_no_database(run_component: RunComponent) -> None:
    data = stack_data("dev")
    data["slurm"]["accounting"] = {"enabled": False}
    run = run_component(parts.slurm, data, "dev")
    assert run.of_type(MARIADB) == []
    assert [r.name for r in run.of_type(RELEASE) if r.name in ACCOUNTING_RELEASES] == []
    values = _values(run, SLURM_RELEASE)
    assert values["accounting"]["enabled"] is False
    assert "AccountingStorageTRES" not in values["controller"]["extraConfMap"]
    # Slurm itself is still there.
    assert run.of_type(NODE_SET)


# --------------------------------------------------------------------------- cert-manager


def test_cert_manager_values_match_the_chart_schema(case: StackCase, reference_dir: Path) -> None:
    path = reference_dir / "charts" / chart_dir(versions.CERT_MANAGER_CHART)
    schema = json.loads((path / "values.schema.json").read_text())
    release = _release(case.run, "cert-manager")
    assert release.inputs["version"] == versions.CERT_MANAGER_CHART.version
    values = release.inputs["values"]
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert [error.message for error in validator.iter_errors(values)] == []
    assert values["crds"]["enabled"] is True
    # The schema is strict: a misspelt key is reported.
    assert list(validator.iter_errors({**values, "crd": {"enabled": True}}))


# --------------------------------------------------------------------------- install order


def test_operator_after_cert_manager_and_crds(case: StackCase) -> None:
    after = _depends_on(case.run, _release(case.run, "slurm-operator"))
    for name in ("cert-manager", "slurm-operator-crds"):
        assert _release(case.run, name).urn in after, name


def test_mariadb_operator_after_its_crds_and_database_after_the_operator(
    accounting_case: StackCase,
) -> None:
    run = accounting_case.run
    assert _release(run, "mariadb-operator-crds").urn in _depends_on(
        run, _release(run, "mariadb-operator")
    )
    assert _release(run, "mariadb-operator").urn in _depends_on(run, _database(run))


def test_the_database_namespace_is_retained_where_the_database_is(
    accounting_case: StackCase,
) -> None:
    """Deleting a namespace deletes a retained database in it: the namespace is retained too."""
    run = accounting_case.run
    database, namespace = _database(run), _named(run, NAMESPACE, SLURM_NAMESPACE)
    assert database.inputs["metadata"]["namespace"] == SLURM_NAMESPACE
    assert (namespace.retain_on_delete, namespace.protect) == (
        database.retain_on_delete,
        database.protect,
    )
    protected = bool(accounting_case.raw.get("protectStatefulResources", False))
    assert namespace.retain_on_delete is protected


def test_finalized_objects_go_before_their_operators(case: StackCase) -> None:
    """A destroy deletes what an operator's finalizers hold while the operator still runs.

    Pulumi deletes a resource only after everything that depends on it, and pulumi-kubernetes
    deletes with foreground propagation unless ``pulumi.com/deletionPropagationPolicy`` says
    otherwise, waiting until the object is gone (v4.34.2 provider/pkg/metadata/overrides.go,
    DeletionPropagation; provider/pkg/await/await.go, Deletion). The MariaDB's own User,
    Database and Grant carry mariadb-operator's finalizers and the MariaDB as their controller
    owner (v26.6.0 pkg/builder/sql_builder.go, BuildUser): foreground deletion waits for them,
    so the operator must still run. NodeSets carry Slinky's reservation finalizer (v1.2.1
    internal/controller/nodeset/nodeset_sync.go, syncFinalizers).
    """
    run = case.run
    finalized = [(record, "slurm-operator") for record in run.of_type(NODE_SET)] + [
        (record, "mariadb-operator") for record in run.of_type(MARIADB)
    ]
    assert finalized, "nothing finalized in a Slurm stack?"
    for record, operator in finalized:
        assert _release(run, operator).urn in _depends_on(run, record), record.name
        annotations = record.inputs["metadata"].get("annotations", {})
        policy = annotations.get("pulumi.com/deletionPropagationPolicy", "foreground")
        assert policy.lower() == "foreground", record.name
    if accounting_enabled(case.stack):
        namespace = _named(run, NAMESPACE, SLURM_NAMESPACE)
        assert namespace.urn in _depends_on(run, _database(run))


def test_slurm_chart_after_operator_secrets_and_database(case: StackCase) -> None:
    run = case.run
    slurm = _release(run, SLURM_RELEASE)
    after = _depends_on(run, slurm)
    values = slurm.inputs["values"]
    assert _release(run, "slurm-operator").urn in after
    secrets = [values["slurmKey"]["secretRef"]["name"], values["jwtKey"]["secretRef"]["name"]]
    if accounting_enabled(case.stack):
        assert _database(run).urn in after
        secrets.append(values["accounting"]["storageConfig"]["passwordKeyRef"]["name"])
    for name in secrets:
        assert _named(run, SECRET, name, SLURM_NAMESPACE).urn in after, name
    namespace = _named(run, NAMESPACE, SLURM_NAMESPACE)
    assert namespace.urn in after


def test_node_set_after_chart_claim_and_priority_class(node_set: NodeSetCase) -> None:
    run = node_set.stack.run
    after = _depends_on(run, node_set.record)
    assert _release(run, SLURM_RELEASE).urn in after
    assert _named(run, CLAIM, CLAIM_NAME, SLURM_NAMESPACE).urn in after
    priority_class = node_set.pod_spec["priorityClassName"]
    assert _named(run, PRIORITY_CLASS, priority_class).urn in after


# --------------------------------------------------------------------------- disabled


@pytest.mark.parametrize(
    "mutation",
    [set_at("slurm.enabled", False), delete_at("slurm")],
    ids=["enabled-false", "section-removed"],
)
def test_disabled_slurm_installs_nothing(
    run_platform: Callable[..., ProgramRun], mutation: Mutation
) -> None:
    data = stack_data("dev")
    mutation(data)
    run = run_platform(data, "dev")
    names = {r.name for r in run.of_type(RELEASE)}
    assert names.isdisjoint({*SLINKY_RELEASES, *ACCOUNTING_RELEASES}), names
    assert run.of_type(NODE_SET) == []
    assert run.of_type(MARIADB) == []
    assert [r for r in run.of_type(NAMESPACE) if _metadata(r).get("name") == SLURM_NAMESPACE] == []
    assert [r for r in run.records if _metadata(r).get("namespace") == SLURM_NAMESPACE] == []
    # (Katib's database password is Katib's.)
    assert [r.name for r in run.of_type(RANDOM_PASSWORD) if not r.name.startswith("katib-")] == []
    # The rest of the platform is untouched.
    assert run.of_type(RUNTIME)


# --------------------------------------------------------------------------- config errors


def _dev_gpu_capacity() -> int:
    """GPUs dev's pools provide at most (maxNodes x GPUs per node; stack + catalog)."""
    pools = [Pool(raw) for raw in stack_data("dev")["nodePools"]]
    return sum(p.max_nodes * p.instance.accelerators for p in pools if p.gpu)


def _dev_slurm_gpu_set() -> tuple[int, int]:
    """(index, GPUs per node) of dev's first GPU node set."""
    for index, node_set in enumerate(raw_node_sets("dev")):
        pool = stack_pool("dev", node_set["pool"])
        if pool.gpu:
            return index, pool.instance.accelerators
    raise AssertionError("dev has a GPU node set")


def _teams_take_every_gpu(slurm_replicas: int) -> Mutation:
    """dev's team deserves every GPU the pools have; the GPU node set holds some nodes."""
    capacity = _dev_gpu_capacity()
    index, _ = _dev_slurm_gpu_set()

    def mutate(data: dict[str, Any]) -> None:
        team = data["teams"][0]
        team["quota"]["gpus"] = capacity
        team.setdefault("queue", {}).setdefault("deserved", {})["gpus"] = capacity
        data["slurm"]["nodeSets"][index]["maxNodes"] = slurm_replicas

    return mutate


def _node_set_field(index: int, **fields: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        data["slurm"]["nodeSets"][index].update(fields)

    return mutate


def _add_node_set(node_set: dict[str, Any]) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        data["slurm"]["nodeSets"].append(node_set)

    return mutate


"""The problem reports the key as missing."""

DEV_POOLS: Final = [ns["pool"] for ns in raw_node_sets("dev")]
DEV_TRN_INDEX: Final = next(
    i for i, ns in enumerate(raw_node_sets("dev")) if not stack_pool("dev", ns["pool"]).gpu
)
DEV_TRN_POOL: Final = stack_pool("dev", DEV_POOLS[DEV_TRN_INDEX])
DEV_GPU_INDEX, DEV_GPUS_PER_NODE = _dev_slurm_gpu_set()
FLOATING_IMAGE: Final = "111122223333.dkr.ecr.us-west-2.amazonaws.com/slurmd-efa:latest"
KEYS: Final = "slurm.login.sshAuthorizedKeys"

# (id, mutation of the dev stack, key path, the value found there, words of the allowed text)
INVALID: list[tuple[str, Mutation, str, Any, str]] = [
    ("node set on an unknown pool", _node_set_field(0, pool="gpu-huge"),
     "platform.slurm.nodeSets[0].pool", "gpu-huge",
     "one of the nodePools: " + ", ".join(p["name"] for p in stack_data("dev")["nodePools"])),
    ("duplicate pool", _add_node_set({"pool": DEV_TRN_POOL.name}),
     "platform.slurm.nodeSets", [*DEV_POOLS, DEV_TRN_POOL.name], "each pool in one node set"),
    ("share above the pool", _node_set_field(DEV_TRN_INDEX, maxNodes=DEV_TRN_POOL.max_nodes + 1),
     f"platform.slurm.nodeSets[{DEV_TRN_INDEX}].maxNodes", DEV_TRN_POOL.max_nodes + 1,
     f"at most the pool's maxNodes ({DEV_TRN_POOL.max_nodes})"),
    ("warm above the share", _node_set_field(DEV_TRN_INDEX, maxNodes=1, warmNodes=2),
     f"platform.slurm.nodeSets[{DEV_TRN_INDEX}].warmNodes", 2, "at most the node set's maxNodes"),
    ("gpu node set without a gpu image", delete_at("slurm.images.slurmdGpu"),
     "platform.slurm.images.slurmdGpu", MISSING, f"pool {DEV_POOLS[DEV_GPU_INDEX]}"),
    ("neuron node set without a neuron image", delete_at("slurm.images.slurmdNeuron"),
     "platform.slurm.images.slurmdNeuron", MISSING, f"pool {DEV_TRN_POOL.name}"),
    ("floating slurmd image", set_at("slurm.images.slurmdGpu", FLOATING_IMAGE),
     "platform.slurm.images.slurmdGpu", FLOATING_IMAGE, "not :latest"),
    ("floating node set image", _node_set_field(0, image="ghcr.io/acme/slurmd:main"),
     "platform.slurm.nodeSets[0].image", "ghcr.io/acme/slurmd:main", ":main"),
    ("enabled without node sets", set_at("slurm.nodeSets", []),
     "platform.slurm.nodeSets", [], "at least one node set when Slurm is enabled"),
    ("enabled without login", delete_at("slurm.login"),
     "platform.slurm.login", MISSING, "a login set with sshAuthorizedKeys"),
    ("login without keys", set_at(KEYS, []),
     "platform.slurm.login.sshAuthorizedKeys", [], "at least 1 item"),
    ("private key pasted", set_at(KEYS, [_private_key()]),
     "platform.slurm.login.sshAuthorizedKeys[0]", "<a private key, not repeated here>",
     "a PUBLIC key"),
    ("malformed key", set_at(KEYS, ["ssh-ed25519 not-a-key bob@example.com"]),
     "platform.slurm.login.sshAuthorizedKeys[0]", "ssh-ed25519 not-a-key bob@example.com",
     "one OpenSSH public key on one line"),
    ("second key line smuggled in one entry", set_at(KEYS, [_second_line_key()]),
     "platform.slurm.login.sshAuthorizedKeys[0]", _second_line_key(),
     "one OpenSSH public key on one line"),
    ("DSA key", set_at(KEYS, [_dsa_key()]),
     "platform.slurm.login.sshAuthorizedKeys[0]", _dsa_key(), "ssh-ed25519"),
    ("key with authorized_keys options", set_at(KEYS, [f'from="0.0.0.0/0" {_ed25519_key()}']),
     "platform.slurm.login.sshAuthorizedKeys[0]", f'from="0.0.0.0/0" {_ed25519_key()}',
     "without options"),
    ("rsa key of 2048 bits", set_at(KEYS, [_rsa_key(2048)]),
     "platform.slurm.login.sshAuthorizedKeys[0]", _rsa_key(2048), "RSA of at least 3072 bits"),
    ("lustre removed", delete_at("storage.lustre"),
     "platform.storage.lustre", MISSING, "a Lustre file system when Slurm is enabled"),
    ("default partition not a node set's", set_at("slurm.defaultPartition", "all"),
     "platform.slurm.defaultPartition", "all", "the pool of a node set"),
    ("cluster name with a hyphen", set_at("slurm.clusterName", "ml-dev"),
     "platform.slurm.clusterName", "ml-dev", "lower-case letters, digits and '_'"),
    ("cluster name in upper case", set_at("slurm.clusterName", "MLDev"),
     "platform.slurm.clusterName", "MLDev", "lower-case letters, digits and '_'"),
    ("teams deserve gpus slurm holds", _teams_take_every_gpu(1),
     "platform.teams[*].queue.deserved.gpus", _dev_gpu_capacity(),
     f"at most {_dev_gpu_capacity() - DEV_GPUS_PER_NODE}, what the node pools can provide "
     "(maxNodes x accelerators per node) beyond the nodes Slurm node sets hold"),
    ("unknown key under slurm", set_at("slurm.partitions", {"debug": {}}),
     "platform.slurm.partitions", {"debug": {}}, "one of the keys accounting, clusterName"),
]  # fmt: skip


@pytest.mark.parametrize("stack", STACKS)
def test_stack_slurm_sections_are_valid(stack: str) -> None:
    config = parse_platform_config(stack_data(stack))
    assert config.slurm.enabled
    assert [ns.pool for ns in config.slurm.node_sets] == [ns["pool"] for ns in raw_node_sets(stack)]


@pytest.mark.parametrize(
    ("mutation", "path", "value", "allowed"),
    [pytest.param(m, p, v, a, id=i) for i, m, p, v, a in INVALID],
)
def test_invalid_slurm_configuration_names_key_value_and_allowed(
    mutation: Mutation, path: str, value: Any, allowed: str
) -> None:
    data = stack_data("dev")
    mutation(data)
    assert_reported(data, path, value, allowed)


def test_a_pasted_private_key_is_never_repeated_in_the_error() -> None:
    data = stack_data("dev")
    set_at(KEYS, [_private_key()])(data)
    text = "\n".join(str(problem) for problem in problems_of(data))
    body = _private_key().splitlines()[1]
    assert "PRIVATE KEY" not in text and body[:20] not in text


def test_invalid_slurm_cases_are_distinct() -> None:
    cases = {(path, allowed, repr(value)) for _, _, path, value, allowed in INVALID}
    assert len(cases) == len(INVALID) >= 15


def test_slurm_held_gpus_only_fit_when_slurm_holds_none() -> None:
    """The invalid case above is the boundary: without the GPU node set the same shares fit
    exactly, so the error comes from the nodes Slurm's share holds."""
    data = stack_data("dev")
    _teams_take_every_gpu(1)(data)
    del data["slurm"]["nodeSets"][DEV_GPU_INDEX]
    config = parse_platform_config(data)
    assert config.teams[0].queue.deserved.gpus == _dev_gpu_capacity()
    data = stack_data("dev")
    _teams_take_every_gpu(1)(data)
    problems = problems_of(data)
    assert [p.path for p in problems] == ["platform.teams[*].queue.deserved.gpus"]
    assert "Slurm" in problems[0].allowed


@pytest.mark.parametrize("key", ["rsa-4096", "ed25519"])
def test_valid_public_keys_are_accepted(key: str) -> None:
    line = _rsa_key(4096) if key == "rsa-4096" else _ed25519_key()
    data = stack_data("dev")
    set_at(KEYS, [line])(data)
    login = parse_platform_config(data).slurm.login
    assert login is not None
    assert login.ssh_authorized_keys == [line]
