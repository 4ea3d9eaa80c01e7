"""Issue 41 item 6: ``ssh <node>`` from a login pod survives a node set scaled down and up.

What is checked here, and where upstream says it:

* Slinky's slurmd image makes new host keys at every start (SlinkyProject/containers
  schedmd/slurm/26.05/ubuntu24.04/files/usr/local/bin/slurmd-entrypoint.sh, ``ssh-keygen -A``)
  and the operator mounts none into NodeSets (slurm-operator v1.2.1
  internal/builder/workerbuilder/worker_app.go), so each node set gets its own key from the
  stack, mounted 0600 (sshd ignores a group- or world-readable key: openssh-portable V_9_6_P1
  authfile.c, ``sshkey_perm_ok``) and named by ``HostKey`` (with one, sshd offers no default
  key: servconf.c, ``fill_default_server_options``);
* ``/etc/ssh/ssh_known_hosts`` (pathnames.h, ``_PATH_SSH_SYSTEM_HOSTFILE``) lists every node
  name a node set can have, short and under the worker service
  ``slurm-workers-slurm.slurm.svc.cluster.local`` (slurm-operator v1.2.1
  internal/builder/common/common.go, SlurmClusterWorkerService), with that node set's key, and
  nothing else;
* the key is the same on every synthesis (a new key each ``up`` would churn the Secret and
  every slurmd pod) and only stacks with a directory turn node SSH on.
"""

from __future__ import annotations

import base64
from typing import Any, Final

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pulumi.runtime.mocks import MockResourceArgs

from components.slurm.host_keys import private_key_pem
from synth.engine import RANDOM_BYTES_TYPE, PlatformMocks, mock_random_bytes
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests import component_runs as parts
from tests.conftest import STACKS, RunComponent, stack_data

# Facts restated here, not imported, so that a wrong value in the program fails.
WORKER_DOMAIN: Final = "slurm-workers-slurm.slurm.svc.cluster.local"
KNOWN_HOSTS: Final = "/etc/ssh/ssh_known_hosts"
SECRET_TYPE: Final = "kubernetes:core/v1:Secret"
CONFIG_MAP_TYPE: Final = "kubernetes:core/v1:ConfigMap"
WITH_DIRECTORY: Final = ("prod", "staging")
SECRET_SIGNATURE: Final = "1b47061264138c4ac30d75fd1eb44270"
"""How a secret value reaches the mocks (pulumi's rpc.py, ``_special_secret_sig``)."""


def _revealed(value: Any) -> Any:
    if isinstance(value, dict):
        if SECRET_SIGNATURE in value.values() and "value" in value:
            return _revealed(value["value"])
        return {key: _revealed(item) for key, item in value.items()}
    return value


def _yaml(result: StackResult, kind: str, name: str) -> dict[str, Any]:
    path = result.written.directory / "manifests" / f"{kind}.slurm.{name}.yaml"
    loaded: dict[str, Any] = load_yaml(path.read_text())
    return loaded


def _node_sets(result: StackResult) -> dict[str, dict[str, Any]]:
    return {
        path.stem.split(".")[-1]: load_yaml(path.read_text())
        for path in (result.written.directory / "manifests").glob("NodeSet.slurm.*.yaml")
    }


def _pods(result: StackResult, app: str) -> list[dict[str, Any]]:
    pods = [load_yaml(p.read_text()) for p in result.written.directory.glob("pods/*.yaml")]
    return [
        pod for pod in pods
        if (pod["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == app
    ]  # fmt: skip


def _known_hosts(result: StackResult) -> dict[str, str]:
    """Host name -> the key line's ``type base64``, from the synthesized ConfigMap."""
    text = _yaml(result, "ConfigMap", "slurm-ssh-known-hosts")["data"]["ssh_known_hosts"]
    hosts: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        names, key_type, key = line.split()
        for name in names.split(","):
            assert name not in hosts, f"{name} listed twice"
            hosts[name] = f"{key_type} {key}"
    return hosts


def _openssh_public(pem: str) -> str:
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert isinstance(key.curve, ec.SECP256R1)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )


@pytest.mark.parametrize("stack", WITH_DIRECTORY)
def test_each_node_set_offers_its_own_key_from_a_root_only_file(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    node_sets = _node_sets(result)
    assert node_sets
    for pool, node_set in node_sets.items():
        spec = node_set["spec"]
        host_key_lines = [
            line for line in spec["ssh"]["extraSshdConfig"].splitlines()
            if line.split()[:1] == ["HostKey"]
        ]  # fmt: skip
        assert len(host_key_lines) == 1, pool
        path = host_key_lines[0].split()[1]
        mount = next(m for m in spec["slurmd"]["volumeMounts"] if m["mountPath"] == path)
        volume = next(v for v in spec["template"]["spec"]["volumes"] if v["name"] == mount["name"])
        secret = volume["secret"]
        assert secret["secretName"] == f"slurm-ssh-host-key-{pool}"
        (item,) = [i for i in secret["items"] if i["path"] == mount["subPath"]]
        assert item.get("mode", secret.get("defaultMode")) == 0o600
        assert secret.get("defaultMode", 0o644) & 0o077 == 0
        assert item["key"] in _yaml(result, "Secret", secret["secretName"])["stringData"]
    # One key per node set: no two node sets share a Secret.
    names = {
        v["secret"]["secretName"]
        for n in node_sets.values() for v in n["spec"]["template"]["spec"]["volumes"]
        if "secret" in v
    }  # fmt: skip
    assert len([n for n in names if n.startswith("slurm-ssh-host-key-")]) == len(node_sets)


@pytest.mark.parametrize("stack", WITH_DIRECTORY)
def test_known_hosts_lists_every_node_name_and_no_other(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    hosts = _known_hosts(result)
    expected: set[str] = set()
    for node_set in result.config.slurm.node_sets:
        pool = result.config.pool(node_set.pool)
        assert pool is not None
        for ordinal in range(pool.max_nodes):
            expected |= {f"{pool.name}-{ordinal}", f"{pool.name}-{ordinal}.{WORKER_DOMAIN}"}
    assert set(hosts) == expected
    # Every node of a node set has one key, and node sets have different ones.
    by_pool = {
        pool: {key for host, key in hosts.items() if host.rsplit("-", 1)[0] == pool}
        for pool in _node_sets(result)
    }
    assert all(len(keys) == 1 for keys in by_pool.values()), by_pool
    assert len({next(iter(keys)) for keys in by_pool.values()}) == len(by_pool)


@pytest.mark.parametrize("stack", WITH_DIRECTORY)
def test_login_and_slurmd_pods_read_known_hosts(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    pods = _pods(result, "login") + _pods(result, "slurmd")
    assert _pods(result, "login") and _pods(result, "slurmd")
    for pod in pods:
        first = pod["spec"]["containers"][0]
        mount = next(m for m in first["volumeMounts"] if m["mountPath"] == KNOWN_HOSTS)
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
        assert volume["configMap"]["name"] == "slurm-ssh-known-hosts"
        assert mount["subPath"] == "ssh_known_hosts"


def test_stacks_without_a_directory_add_nothing(synthesized: dict[str, StackResult]) -> None:
    without = [s for s in STACKS if synthesized[s].config.slurm.directory is None]
    with_slurm = [s for s in without if synthesized[s].config.slurm.enabled]
    assert with_slurm, "no stack runs Slurm without a directory"
    for stack in without:
        result = synthesized[stack]
        manifests = result.written.directory / "manifests"
        assert not list(manifests.glob("*.slurm.slurm-ssh-*.yaml")), stack
        assert not [r for r in result.records if r.type == RANDOM_BYTES_TYPE], stack
        for node_set in _node_sets(result).values():
            assert "ssh" not in node_set["spec"], stack
        for pod in _pods(result, "login") + _pods(result, "slurmd"):
            mounts = {m["mountPath"] for c in pod["spec"]["containers"] for m in c["volumeMounts"]}
            assert KNOWN_HOSTS not in mounts, stack


class _Capture:
    """The plain inputs of the Secrets and ConfigMaps a run registers (records mask secrets)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.inputs: dict[str, dict[str, Any]] = {}
        original = PlatformMocks.new_resource

        def new_resource(mocks: PlatformMocks, args: MockResourceArgs) -> Any:
            if args.typ in (SECRET_TYPE, CONFIG_MAP_TYPE):
                self.inputs[args.name] = _revealed(args.inputs)
            return original(mocks, args)

        monkeypatch.setattr(PlatformMocks, "new_resource", new_resource)


def _host_key_run(
    run_component: RunComponent, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, str], dict[str, str]]:
    """pool -> private key PEM in its Secret, host -> key in known_hosts, from a prod run."""
    capture = _Capture(monkeypatch)
    run = run_component(parts.slurm, stack_data("prod"), "prod")
    pems = {
        inputs["metadata"]["name"].removeprefix("slurm-ssh-host-key-"): inputs["stringData"][
            "ssh_host_ecdsa_key"
        ]
        for inputs in capture.inputs.values()
        if inputs["metadata"]["name"].startswith("slurm-ssh-host-key-")
    }
    assert len(run.of_type(RANDOM_BYTES_TYPE)) == len(pems) > 0
    (config_map,) = [
        i for i in capture.inputs.values() if i["metadata"]["name"] == "slurm-ssh-known-hosts"
    ]
    hosts: dict[str, str] = {}
    for line in config_map["data"]["ssh_known_hosts"].splitlines():
        if line and not line.startswith("#"):
            names, key_type, key = line.split()
            hosts |= dict.fromkeys(names.split(","), f"{key_type} {key}")
    return pems, hosts


def test_known_hosts_holds_the_public_half_of_each_secrets_key(
    run_component: RunComponent, monkeypatch: pytest.MonkeyPatch
) -> None:
    pems, hosts = _host_key_run(run_component, monkeypatch)
    for pool, pem in pems.items():
        assert pem.startswith("-----BEGIN EC PRIVATE KEY-----"), pool
        assert hosts[f"{pool}-0"] == _openssh_public(pem), pool
        assert hosts[f"{pool}-0.{WORKER_DOMAIN}"] == _openssh_public(pem), pool


def test_the_private_key_is_the_same_on_every_synthesis(
    run_component: RunComponent, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = _host_key_run(run_component, monkeypatch)
    second, _ = _host_key_run(run_component, monkeypatch)
    assert first == second
    # ... because it is a function of the seed Pulumi keeps, and of nothing else.
    for pool, pem in first.items():
        seed = mock_random_bytes(f"slurm-ssh-host-key-{pool}", 32)
        assert pem == private_key_pem(seed), pool
        assert private_key_pem(bytes(reversed(seed))) != pem


def test_a_seed_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        private_key_pem(base64.b64decode("AAAA"))
