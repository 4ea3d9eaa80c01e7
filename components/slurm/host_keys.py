"""SSH host keys of the Slurm nodes: one per node set, the same on every pod and every up.

Slinky's slurmd image makes new host keys at every start (SlinkyProject/containers
schedmd/slurm/26.05/ubuntu24.04/files/usr/local/bin/slurmd-entrypoint.sh: ``ssh-keygen -A``),
and the operator gives NodeSets no persistent ones (slurm-operator v1.2.1
internal/builder/workerbuilder/worker_app.go mounts only ``sshd_config`` and ``sssd.conf``), so
a node set scaled down and up would come back under the same node names with new keys, which
the login pod's ``known_hosts`` refuses. Each node set gets one ECDSA P-256 key, derived from a
``RandomBytes`` seed that Pulumi keeps, mounted into every slurmd pod of the node set and named
in its ``sshd_config``; a system-wide ``/etc/ssh/ssh_known_hosts`` lists every node name the
node set can have with that key. How and why: docs/concepts/slurm.md, "SSH to nodes".
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from components.config.pools import NodePoolConfig
from components.slurm.common import CONTROLLER_NAME, NAMESPACE

SEED_BYTES: Final = 32
"""Bytes of the seed a node set's key is derived from (P-256's private scalar is 32)."""
HOST_KEY_DIR: Final = "/etc/ssh/nodeset"
HOST_KEY_PATH: Final = f"{HOST_KEY_DIR}/ssh_host_ecdsa_key"
"""Where slurmd pods see their node set's key. Not one of sshd's default paths, which
``ssh-keygen -A`` fills at start; sshd reads only the ``HostKey`` lines once there is one
(openssh-portable V_9_6_P1 servconf.c, ``fill_default_server_options``)."""
HOST_KEY_FILE: Final = "ssh_host_ecdsa_key"
"""The key's name in its Secret."""
KNOWN_HOSTS_PATH: Final = "/etc/ssh/ssh_known_hosts"
"""The SSH client's system-wide known hosts (openssh-portable V_9_6_P1 pathnames.h,
``_PATH_SSH_SYSTEM_HOSTFILE``; readconf.c reads it when ``GlobalKnownHostsFile`` is unset)."""
KNOWN_HOSTS_CONFIG_MAP: Final = "slurm-ssh-known-hosts"
KNOWN_HOSTS_KEY: Final = "ssh_known_hosts"
WORKER_DOMAIN: Final = f"slurm-workers-{CONTROLLER_NAME}.{NAMESPACE}.svc.cluster.local"
"""The worker Service's domain: slurmd pods' subdomain, and the login and slurmd pods' DNS
search list (slurm-operator v1.2.1 internal/builder/common/common.go,
SlurmClusterWorkerService; loginbuilder/login_app.go and workerbuilder/worker_app.go,
``DNSConfig``), so ``ssh p5-0`` and ``ssh p5-0.<domain>`` reach the same node."""
HOST_KEY_VOLUME: Final = "ssh-host-key"
KNOWN_HOSTS_VOLUME: Final = "ssh-known-hosts"


def host_key_secret_name(pool: str) -> str:
    """The Secret with the host key of the node set of ``pool``."""
    return f"slurm-ssh-host-key-{pool}"


def private_key_pem(seed: bytes) -> str:
    """The node set's private host key: ECDSA P-256 from ``seed``, as PEM (SEC 1).

    Deterministic: one seed, one file, byte for byte (a PEM of a SEC 1 key holds nothing
    else; OpenSSH's own private key format holds a random check value, so each writing would
    differ and the Secret and pods would churn on every up). sshd reads PEM keys through
    OpenSSL (openssh-portable V_9_6_P1 sshkey.c, ``sshkey_parse_private_fileblob_type`` falls
    back to ``sshkey_parse_private_pem_fileblob``) and derives the public key from it
    (sshd.c, ``sshkey_from_private``), so no ``.pub`` file is needed.

    Args:
        seed: :data:`SEED_BYTES` random bytes (the node set's ``RandomBytes``).

    Raises:
        ValueError: the seed is not :data:`SEED_BYTES` long.
    """
    if len(seed) != SEED_BYTES:
        raise ValueError(f"a host key seed has {SEED_BYTES} bytes, not {len(seed)}")
    curve = ec.SECP256R1()
    # A scalar in [1, n-1], n the group order (SEC 2: P-256's n).
    order = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
    scalar = int.from_bytes(hashlib.sha256(seed).digest(), "big") % (order - 1) + 1
    key = ec.derive_private_key(scalar, curve)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def public_key(pem: str) -> str:
    """The OpenSSH public key (``ecdsa-sha2-nistp256 AAAA...``) of a :func:`private_key_pem`."""
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )


def node_host_names(pool: NodePoolConfig) -> list[str]:
    """Every name a node of the pool's node set can be reached by from a login or slurmd pod.

    ``<pool>-0`` .. ``<pool>-<maxNodes-1>`` (the operator appends the pod's ordinal to the
    hostname; :func:`components.slurm.conf.node_names`), each also under :data:`WORKER_DOMAIN`.
    The SSH client looks the name up as the user typed it, and not the address
    (``CheckHostIP`` is off by default: openssh-portable V_9_6_P1 readconf.c).
    """
    names = [f"{pool.name}-{ordinal}" for ordinal in range(pool.max_nodes)]
    return [host for name in names for host in (name, f"{name}.{WORKER_DOMAIN}")]


def known_hosts(keys: Mapping[str, tuple[NodePoolConfig, str]]) -> str:
    """``/etc/ssh/ssh_known_hosts``: every node of every node set, with its node set's key.

    One line per node (sshd(8), "SSH_KNOWN_HOSTS FILE FORMAT"), its short name and FQDN.

    Args:
        keys: node set -> (its pool, its OpenSSH public key).
    """
    lines = ["# Generated by the training platform (components/slurm/host_keys.py)."]
    for _, (pool, key) in sorted(keys.items()):
        names = node_host_names(pool)
        pairs = zip(names[::2], names[1::2], strict=True)
        lines += [f"{short},{fqdn} {key}" for short, fqdn in pairs]
    return "\n".join(lines) + "\n"


def sshd_host_key_config() -> str:
    """The NodeSet's ``extraSshdConfig`` line that makes sshd offer only the node set's key."""
    return f"HostKey {HOST_KEY_PATH}\n"


def host_key_mount() -> dict[str, Any]:
    """The node set's key at :data:`HOST_KEY_PATH` in the slurmd container."""
    return {"name": HOST_KEY_VOLUME, "mountPath": HOST_KEY_PATH, "subPath": HOST_KEY_FILE,
            "readOnly": True}  # fmt: skip


def host_key_volume(pool: str) -> dict[str, Any]:
    """The Secret behind :func:`host_key_mount`: root's only, as sshd wants.

    sshd ignores a key file its owner's group or others may read (openssh-portable V_9_6_P1
    authfile.c, ``sshkey_perm_ok``).
    """
    return {
        "name": HOST_KEY_VOLUME,
        "secret": {
            "secretName": host_key_secret_name(pool),
            "defaultMode": 0o600,
            "items": [{"key": HOST_KEY_FILE, "path": HOST_KEY_FILE, "mode": 0o600}],
        },
    }


def known_hosts_mount() -> dict[str, Any]:
    """:data:`KNOWN_HOSTS_PATH` in a login or slurmd container.

    A ``subPath`` file: a running pod keeps the list it started with (docs: restart the login
    pods after raising a node set's ``maxNodes``).
    """
    return {"name": KNOWN_HOSTS_VOLUME, "mountPath": KNOWN_HOSTS_PATH,
            "subPath": KNOWN_HOSTS_KEY, "readOnly": True}  # fmt: skip


def known_hosts_volume() -> dict[str, Any]:
    """The ConfigMap behind :func:`known_hosts_mount`, readable by every user (ssh reads it)."""
    return {
        "name": KNOWN_HOSTS_VOLUME,
        "configMap": {"name": KNOWN_HOSTS_CONFIG_MAP, "defaultMode": 0o444},
    }


def host_key_objects(
    name: str,
    pools: Sequence[NodePoolConfig],
    *,
    parent: pulumi.Resource,
    opts: pulumi.ResourceOptions,
) -> list[pulumi.Resource]:
    """Per node set a seed and the Secret with its key; one ConfigMap with ``known_hosts``.

    Rotate a node set's key by replacing its seed (``pulumi up --replace`` on the
    ``RandomBytes``): the Secret, ``known_hosts`` and, once restarted, the pods follow.

    Args:
        name: the Slurm component's name, prefix of the objects' names.
        pools: the node sets' pools.
        parent: the Slurm component, parent of the seeds. The seeds are not protected:
            losing one costs a new key (a rotation), nothing a user's data depends on.
        opts: options of the Secrets and the ConfigMap (parent, provider, what they wait for).
    """
    made: list[pulumi.Resource] = []
    public: dict[str, pulumi.Output[str]] = {}
    by_name = {pool.name: pool for pool in pools}
    for pool in pools:
        seed = random.RandomBytes(
            f"{name}-ssh-host-key-{pool.name}",
            length=SEED_BYTES,
            opts=pulumi.ResourceOptions(parent=parent),
        )
        pem: pulumi.Output[str] = seed.base64.apply(_pem_of_seed)
        private: pulumi.Output[str] = pulumi.Output.secret(pem)
        made.append(
            k8s.core.v1.Secret(
                f"{name}-ssh-host-key-{pool.name}",
                metadata={"name": host_key_secret_name(pool.name), "namespace": NAMESPACE},
                type="Opaque",
                string_data={HOST_KEY_FILE: private},
                opts=opts,
            )
        )
        # The public key is no secret; unsecret() keeps it readable in the ConfigMap.
        public[pool.name] = pulumi.Output.unsecret(pem.apply(public_key))
    if public:
        made.append(
            k8s.core.v1.ConfigMap(
                f"{name}-ssh-known-hosts",
                metadata={"name": KNOWN_HOSTS_CONFIG_MAP, "namespace": NAMESPACE},
                data={
                    KNOWN_HOSTS_KEY: pulumi.Output.all(**public).apply(
                        lambda keys: known_hosts(
                            {pool: (by_name[pool], key) for pool, key in keys.items()}
                        )
                    )
                },
                opts=opts,
            )
        )
    return made


def _pem_of_seed(encoded: str) -> str:
    return private_key_pem(base64.b64decode(encoded))
