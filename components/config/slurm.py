"""Config section ``platform.slurm``: Slurm on Kubernetes (components/slurm/)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from ldap3.core.exceptions import LDAPInvalidDnError, LDAPInvalidFilterError
from ldap3.operation.search import parse_filter
from ldap3.utils.dn import parse_dn
from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from components import catalog
from components.config.base import (
    CONFIG_KEY,
    MISSING,
    ConfigProblem,
    Ipv4Cidr,
    StrictModel,
    duplicates,
    matching,
    parsed_by,
)
from components.config.network import client_network_problems
from components.config.pools import AcceleratorAmounts, PoolName, mounts_lustre
from components.config.trainer import PinnedImage

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig


SSH_KEY_TYPES: Final = (
    "ssh-ed25519",
    "sk-ssh-ed25519@openssh.com",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-rsa",
)


MINIMUM_RSA_BITS: Final = 3072


PRIVATE_KEY_ERROR: Final = "ssh_private_key"
"""Error type of a pasted private key, whose value errors never repeat."""


def _ssh_public_key(value: str) -> str:
    """One OpenSSH public key line of an allowed type, parsed by ``cryptography``."""
    allowed = (
        "one OpenSSH public key on one line, without options (" + ", ".join(SSH_KEY_TYPES) + "; "
        f"RSA of at least {MINIMUM_RSA_BITS} bits), e.g. the contents of ~/.ssh/id_ed25519.pub"
    )
    if "PRIVATE KEY" in value:
        raise PydanticCustomError(
            PRIVATE_KEY_ERROR, "a PUBLIC key; this is a private key, revoke it"
        )
    line = value.strip()
    # Each entry becomes one line of root's authorized_keys: a second line would go unchecked.
    if "\n" in line or "\r" in line or line.split(" ", 1)[0] not in SSH_KEY_TYPES:
        raise PydanticCustomError("ssh_key", allowed)
    try:
        key = load_ssh_public_key(line.encode())
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise PydanticCustomError("ssh_key", allowed) from None
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < MINIMUM_RSA_BITS:
        raise PydanticCustomError("ssh_key", allowed)
    return line


SshPublicKey = Annotated[str, AfterValidator(_ssh_public_key)]


SlurmClusterName = Annotated[
    str,
    AfterValidator(
        matching(
            r"[a-z][a-z0-9_]{0,39}",
            "lower-case letters, digits and '_', starting with a letter, at most 40 characters "
            "(Slurm accounting uses it in table names)",
        )
    ),
]


DEFAULT_MAX_TIME_HOURS: Final = 48
DEFAULT_DEFAULT_TIME_HOURS: Final = 4
MAX_TIME_HOURS_LIMIT: Final = 720
"""Slurm's largest ``bf_window`` (30 days: slurm.conf(5), SchedulerParameters), which must
cover the longest MaxTime for backfill to reserve nodes for a gang."""


class SlurmNodeSetConfig(StrictModel):
    """A Slurm node set on one accelerator pool: slurmd pods that each take a whole node."""

    pool: PoolName = Field(description="The `nodePools` entry the node set runs on. Required.")
    max_nodes: int = Field(
        default=1,
        ge=1,
        le=2000,
        description="The node set's share of its pool: the most slurmd pods (one per node) it "
        "grows to while jobs wait, and the limit of the pool's Slurm NodePool (the pool's "
        "own NodePool has the rest). Default: 1.",
    )
    warm_nodes: int = Field(
        default=0,
        ge=0,
        le=2000,
        description="Nodes kept while no job waits, so a job of up to this many starts without "
        "waiting for new nodes. Default: 0 (an idle node set gives its nodes back).",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_replicas(cls, data: Any) -> Any:
        if isinstance(data, dict) and "replicas" in data:
            raise ValueError(
                "replicas is replaced by maxNodes (the node set's share of the pool, which it "
                "grows to while jobs wait) and warmNodes (what it keeps while idle)"
            )
        return data

    image: PinnedImage | None = Field(
        default=None,
        description="slurmd image of this node set. Default: `slurm.images.slurmdGpu` or "
        "`slurm.images.slurmdNeuron`, by the pool's accelerator.",
    )
    max_time_hours: int = Field(
        default=DEFAULT_MAX_TIME_HOURS,
        ge=1,
        le=MAX_TIME_HOURS_LIMIT,
        description="The partition's MaxTime, hours: the longest time limit a job may ask for "
        "(a longer `--time` is refused at sbatch). Finite, so that backfill can plan when "
        "nodes free up and reserve them for a gang; the scheduler looks twice the longest "
        f"partition's MaxTime ahead (bf_window, at most {MAX_TIME_HOURS_LIMIT} h, Slurm's "
        f"limit). Default: {DEFAULT_MAX_TIME_HOURS}.",
    )
    default_time_hours: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TIME_HOURS_LIMIT,
        description="The partition's DefaultTime, hours: the time limit of a job that gives no "
        "`--time` (it is killed when it runs out, so training jobs should give one and "
        f"checkpoint). Default: {DEFAULT_DEFAULT_TIME_HOURS}, or maxTimeHours if that is less.",
    )
    exclusive_user: bool = Field(
        default=False,
        description="ExclusiveUser=YES: a node runs jobs of one user at a time, so no two users' "
        "jobs ever share a node (every job still gets a private /tmp and /dev/shm either way). "
        "Costs idle accelerators when jobs ask for part of a node. Default: false.",
    )
    job_tmp_gib: int | None = Field(
        default=None,
        alias="jobTmpGiB",
        ge=1,
        le=4096,
        description="Size of each job's private /tmp as a memory-backed tmpfs, GiB, counted "
        "against the job's memory. Default: none, /tmp is a private directory on the node's "
        "disk (its instance storage where the type has it), removed when the job ends.",
    )
    job_shm_gib: int | None = Field(
        default=None,
        alias="jobShmGiB",
        ge=1,
        le=4096,
        description="Size of each job's private /dev/shm (tmpfs: NCCL's and the data loaders' "
        "shared memory), GiB, counted against the job's memory. Default: half of the memory "
        "a node gives its jobs.",
    )

    @property
    def default_time(self) -> int:
        """The partition's DefaultTime, hours (:attr:`default_time_hours` or its default)."""
        if self.default_time_hours is not None:
            return self.default_time_hours
        return min(DEFAULT_DEFAULT_TIME_HOURS, self.max_time_hours)


class SlurmImagesConfig(StrictModel):
    """slurmd images of the node sets: Slinky's slurmd plus the libraries the fabric needs."""

    slurmd_gpu: PinnedImage | None = Field(
        default=None,
        description="slurmd on GPU pools: Slinky slurmd of the same Slurm release on Ubuntu "
        "24.04 with the EFA user space (libfabric, Open MPI, aws-ofi-nccl), as "
        "images/slurmd/Dockerfile builds it. Required when a node set is on a GPU pool.",
    )
    slurmd_neuron: PinnedImage | None = Field(
        default=None,
        description="slurmd on Trainium pools: the same plus the Neuron runtime, collectives "
        "and tools of Neuron SDK 2.31.1 (images/slurmd/Dockerfile, ACCELERATOR=neuron). "
        "Required when a node set is on a Trainium pool.",
    )
    login: PinnedImage | None = Field(
        default=None,
        description="The login pods (and the accounts loop beside them): Slinky's login image "
        "of the same Slurm release on Ubuntu 24.04 with the GPU node sets' EFA user space and "
        "Open MPI, so what users build on the login node links against what their jobs run "
        "with (images/slurmd/Dockerfile, ROLE=login). Default: Slinky's own login image of the "
        "chart, by tag, without them.",
    )

    def for_accelerator(self, accelerator: catalog.AcceleratorKind) -> tuple[str, str | None]:
        """(config key, image) of the slurmd image for pools of ``accelerator``."""
        if accelerator == "nvidia":
            return "slurmdGpu", self.slurmd_gpu
        return "slurmdNeuron", self.slurmd_neuron


class SlurmLoginConfig(StrictModel):
    """The login set: where users run sbatch and srun, over SSH through an internal NLB."""

    replicas: int = Field(default=1, ge=1, le=10, description="Login pods. Default: 1.")
    ssh_authorized_keys: list[SshPublicKey] = Field(
        min_length=1,
        description="OpenSSH public keys allowed to log in as root. Required (at least one).",
    )
    allowed_cidrs: list[Ipv4Cidr] = Field(
        min_length=1,
        description="Networks that may reach the login load balancer (its source ranges): "
        "private ones outside the VPC's CIDR, whose addresses the pods take (so no pod reaches "
        "port 22), with a route back from the VPC: where the stack routes a transit gateway "
        "(cluster.endpoint.deployFrom.transitGatewayId), within deployFrom.cidrs; otherwise "
        "the network team routes them. Required: an empty list would leave the load balancer "
        "open to every source.",
    )
    cpu: int = Field(
        default=4,
        ge=1,
        le=64,
        description="CPUs each login pod requests (no limit: compiles and editors may burst on "
        "the general pool's idle cores). Default: 4.",
    )
    memory_gib: int = Field(
        default=16,
        alias="memoryGiB",
        ge=2,
        le=512,
        description="Memory of each login pod, GiB, requested and its limit, so one user's "
        "runaway process is killed in the pod rather than evicting other pods of the node. "
        "Default: 16.",
    )


_distinguished_name = parsed_by(
    parse_dn, LDAPInvalidDnError, "ldap_dn",
    "an LDAP distinguished name, e.g. dc=corp,dc=example,dc=com",
)  # fmt: skip
_ldap_filter = parsed_by(
    # ldap3's own filter parser (what its search() sends), without a server schema.
    lambda value: parse_filter(  # type: ignore[no-untyped-call]
        value, None, auto_escape=False, auto_encode=False, validator=None, check_names=False
    ),
    LDAPInvalidFilterError,
    "ldap_filter",
    "an LDAP search filter in parentheses, e.g. (memberOf=cn=hpc,dc=corp)",
)


def _ca_certificates(value: str) -> str:
    try:
        certificates = x509.load_pem_x509_certificates(value.encode())
    except ValueError:
        certificates = []
    if not certificates:
        raise PydanticCustomError(
            "pem_certificate", "one or more PEM certificates (-----BEGIN CERTIFICATE-----)"
        )
    return value


DistinguishedName = Annotated[str, AfterValidator(_distinguished_name)]
LdapFilter = Annotated[str, AfterValidator(_ldap_filter)]
PemCertificates = Annotated[str, AfterValidator(_ca_certificates)]
LdapUri = Annotated[
    str,
    AfterValidator(
        matching(
            r"ldaps?://[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?(:[0-9]{1,5})?",
            "ldaps://host or ldap://host, with an optional :port and nothing after it",
        )
    ),
]
BIND_PASSWORD_KEY: Final = "slurmDirectoryBindPassword"
"""The Pulumi config key (beside ``platform``) of the directory's bind password, which must be
set as a secret: ``pulumi config set --secret slurmDirectoryBindPassword``."""


class SlurmDirectoryConfig(StrictModel):
    """The LDAP or Active Directory that Slurm's login and compute pods take users from (SSSD).

    Users log in with their directory SSH keys (or password); a team's Slurm account holds the
    members of the directory group whose gidNumber is the team's ``gid``.
    """

    uris: list[LdapUri] = Field(
        min_length=1,
        max_length=8,
        description="Directory servers, tried in order (ldaps://, or ldap:// with startTls). "
        "Required.",
    )
    search_base: DistinguishedName = Field(
        description="Where users and groups are searched, e.g. dc=corp,dc=example,dc=com. Required."
    )
    directory_schema: Literal["rfc2307", "rfc2307bis", "ad"] = Field(
        default="rfc2307bis",
        alias="schema",
        description="How groups list members: rfc2307 (memberUid), rfc2307bis (member DNs) or "
        "ad. Default: rfc2307bis.",
    )
    bind_dn: DistinguishedName | None = Field(
        default=None,
        description="Read-only account SSSD binds as; its password is the secret config key "
        f"{BIND_PASSWORD_KEY}. Default: anonymous bind.",
    )
    start_tls: bool = Field(
        default=False,
        description="Upgrade ldap:// connections with StartTLS (required for ldap:// URIs: "
        "passwords never cross the network in clear). Default: false.",
    )
    ca_certificates: PemCertificates | None = Field(
        default=None,
        description="PEM certificates that sign the servers' (a private CA). Default: the "
        "images' public CAs.",
    )
    login_filter: LdapFilter | None = Field(
        default=None,
        description="LDAP filter of the users who may log in, e.g. (memberOf=cn=hpc,...). "
        "Default: every directory user (submitting jobs still takes a team's group).",
    )
    ssh_public_key_attribute: str = Field(
        default="sshPublicKey",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z][A-Za-z0-9-]*$",
        description="User attribute holding SSH public keys (OpenSSH-LPK). Default: sshPublicKey.",
    )


class SlurmAccountingConfig(StrictModel):
    """slurmdbd and its MariaDB (through mariadb-operator) for job history and fair share."""

    enabled: bool = Field(default=True, description="Run Slurm accounting. Default: true.")
    storage_gib: int = Field(
        default=20,
        alias="storageGiB",
        ge=10,
        le=16384,
        description="Encrypted gp3 volume of the database, GiB (it can grow, not shrink). "
        "Default: 20.",
    )


class SlurmConfig(StrictModel):
    """Slurm on Kubernetes with Slinky: node sets on the same pools as Kubernetes jobs."""

    @property
    def default_partition_pool(self) -> str | None:
        """The pool whose node set's partition is the default (None without node sets)."""
        if self.default_partition is not None:
            return self.default_partition
        return self.node_sets[0].pool if self.node_sets else None

    enabled: bool = Field(
        default=False,
        description="Install cert-manager, the Slinky operator and a Slurm cluster. "
        "Default: false.",
    )
    cluster_name: SlurmClusterName | None = Field(
        default=None,
        description="Slurm ClusterName (accounting keys records by it). Default: the EKS "
        "cluster name with '-' as '_'.",
    )
    node_sets: list[SlurmNodeSetConfig] = Field(
        default_factory=list,
        description="Node sets, one per pool given to Slurm; each gets its own partition. "
        "Default: none.",
    )
    default_partition: PoolName | None = Field(
        default=None,
        description="The node set (its pool's name) whose partition is the default one. Every "
        "partition is one node set's, so one job never spans pools (placement groups, EFA "
        "counts). Default: the first node set's pool.",
    )
    images: SlurmImagesConfig = Field(
        default_factory=SlurmImagesConfig,
        description="slurmd images (pinned). Default: none; see keys.",
    )
    login: SlurmLoginConfig | None = Field(
        default=None, description="The login set. Required when Slurm is enabled."
    )
    accounting: SlurmAccountingConfig = Field(
        default_factory=SlurmAccountingConfig,
        description="Accounting with MariaDB. Default: on, 20 GiB.",
    )
    directory: SlurmDirectoryConfig | None = Field(
        default=None,
        description="Users from LDAP/AD (SSSD) on login and compute pods, a Slurm account per "
        "team with the team's fair share. Default: none (only root logs in, every job runs as "
        "root).",
    )
    rest_api_replicas: int = Field(
        default=1, ge=1, le=5, description="slurmrestd pods (the REST API). Default: 1."
    )
    controller_storage_gib: int = Field(
        default=10,
        alias="controllerStorageGiB",
        ge=4,
        le=1024,
        description="slurmctld state save volume (encrypted gp3), GiB. Default: 10.",
    )


def slurm_held_nodes(config: PlatformConfig) -> dict[str, int]:
    """Pool name -> its Slurm node set's share (enabled Slurm only; at most the pool's)."""
    if not config.slurm.enabled:
        return {}
    held: dict[str, int] = {}
    for node_set in config.slurm.node_sets:
        pool = config.pool(node_set.pool)
        if pool is not None:
            # More nodes than the pool has is its own error; do not let it spill into the teams'.
            held[pool.name] = min(node_set.max_nodes, pool.max_nodes)
    return held


def slurm_held(config: PlatformConfig) -> AcceleratorAmounts:
    """Accelerators that enabled Slurm node sets may hold (their shares x devices per node)."""
    totals = dict.fromkeys((catalog.GPU_RESOURCE, catalog.NEURON_RESOURCE), 0)
    for name, nodes in slurm_held_nodes(config).items():
        pool = config.pool(name)
        if pool is not None and all(t in catalog.CATALOG for t in pool.instance_types):
            totals[pool.instance.accelerator_resource] += nodes * pool.instance.accelerators
    return AcceleratorAmounts(
        gpus=totals[catalog.GPU_RESOURCE], neuron_devices=totals[catalog.NEURON_RESOURCE]
    )


SLURM_MAX_NODE_COUNT: Final = 1024
"""``MaxNodeCount`` of the operator's slurm.conf (slurm-operator v1.2.1
internal/builder/controllerbuilder/controller_config.go): dynamic nodes past it cannot register."""


def _directory_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """A directory needs TLS and accounting (which keeps the teams' accounts)."""
    directory = config.slurm.directory
    if directory is None:
        return
    base = f"{CONFIG_KEY}.slurm"
    for index, uri in enumerate(directory.uris):
        if uri.startswith("ldaps://") and directory.start_tls:
            yield ConfigProblem(
                f"{base}.directory.uris[{index}]",
                uri,
                "ldap:// with startTls (StartTLS on a connection that is TLS already fails "
                "every lookup), or ldaps:// with startTls false",
            )
        if uri.startswith("ldap://") and not directory.start_tls:
            yield ConfigProblem(
                f"{base}.directory.uris[{index}]",
                uri,
                "ldaps://, or ldap:// with directory.startTls: true: SSSD sends the bind and "
                "users' passwords over it",
            )
    if not config.slurm.accounting.enabled:
        yield ConfigProblem(
            f"{base}.accounting.enabled",
            False,
            "true with a directory: each team's users are members of its Slurm account, "
            "which slurmdbd keeps",
        )
    # Every team has a gid already: Slurm needs Lustre, and with Lustre and Slurm each team
    # needs one (teams.py), which is what its Slurm account is read from.


def bind_password_problems(
    config: PlatformConfig, *, present: bool, secret: bool
) -> list[ConfigProblem]:
    """The directory's bind password, a config key of its own: there, and set as a secret.

    Args:
        config: the validated platform.
        present: the stack sets :data:`BIND_PASSWORD_KEY`.
        secret: it is a secret (``pulumi config set --secret``), never clear text in the file.
    """
    directory = config.slurm.directory if config.slurm.enabled else None
    command = f"pulumi config set --secret {BIND_PASSWORD_KEY}"
    if directory is None or directory.bind_dn is None:
        if present:
            return [ConfigProblem(
                BIND_PASSWORD_KEY, "[secret]",
                f"unset without {CONFIG_KEY}.slurm.directory.bindDn (nothing binds with it)",
            )]  # fmt: skip
        return []
    if not present:
        return [ConfigProblem(
            BIND_PASSWORD_KEY, MISSING, f"the password of {directory.bind_dn}, set with {command}"
        )]  # fmt: skip
    if not secret:
        return [ConfigProblem(
            BIND_PASSWORD_KEY, "[clear text]",
            f"a secret ({command}): the stack file must not hold the password in clear",
        )]  # fmt: skip
    return []


def slurm_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Cross-field problems of ``platform.slurm``."""
    slurm = config.slurm
    base = f"{CONFIG_KEY}.slurm"
    if not slurm.enabled:
        return
    if not slurm.node_sets:
        yield ConfigProblem(f"{base}.nodeSets", [], "at least one node set when Slurm is enabled")
    if slurm.login is None:
        yield ConfigProblem(
            f"{base}.login", MISSING, "a login set with sshAuthorizedKeys when Slurm is enabled"
        )
    if config.storage.lustre is None:
        yield ConfigProblem(
            f"{CONFIG_KEY}.storage.lustre",
            MISSING,
            "a Lustre file system when Slurm is enabled: job scripts, inputs and outputs live "
            "on the file system every Slurm node and login pod mounts",
        )
    pools = [node_set.pool for node_set in slurm.node_sets]
    total = sum(node_set.max_nodes for node_set in slurm.node_sets)
    if total > SLURM_MAX_NODE_COUNT:
        yield ConfigProblem(
            f"{base}.nodeSets",
            f"{total} nodes",
            f"node sets' maxNodes adding up to at most {SLURM_MAX_NODE_COUNT}: the Slinky "
            "operator sets MaxNodeCount to that, and dynamic nodes beyond it never register",
        )
    if duplicates(pools):
        yield ConfigProblem(f"{base}.nodeSets", pools, "each pool in one node set")
    if slurm.default_partition is not None and slurm.default_partition not in pools:
        yield ConfigProblem(
            f"{base}.defaultPartition",
            slurm.default_partition,
            "the pool of a node set (" + ", ".join(pools) + "): a partition spanning node sets "
            "would spread one job over placement groups",
        )
    yield from _directory_problems(config)
    yield from client_network_problems(
        config,
        f"{base}.login.allowedCidrs",
        list(slurm.login.allowed_cidrs) if slurm.login else [],
        reached="the login load balancer",
        stake="only root's SSH keys stand between a source range and a root shell on every "
        "Slurm node",
        inside="the login nodes' SSH",
    )
    known = [pool.name for pool in config.node_pools]
    for index, node_set in enumerate(slurm.node_sets):
        here = f"{base}.nodeSets[{index}]"
        pool = config.pool(node_set.pool)
        if pool is None:
            yield ConfigProblem(
                f"{here}.pool",
                node_set.pool,
                "one of the nodePools: " + (", ".join(known) or "none are configured"),
            )
            continue
        # Unknown types (whether the pool has EFA) and an unknown training zone have problems
        # of their own; this one would only repeat them.
        known_types = all(t in catalog.CATALOG for t in pool.instance_types)
        zones = config.network.availability_zones
        zone_known = config.network.training_zone in zones and pool.zone in (None, *zones)
        if (
            config.storage.lustre is not None
            and known_types
            and zone_known
            and not mounts_lustre(config, pool)
        ):
            pool_index = config.node_pools.index(pool)
            yield ConfigProblem(
                f"{CONFIG_KEY}.nodePools[{pool_index}].zone",
                pool.zone,
                f"the training zone {config.network.training_zone}: Slurm node set "
                f"{node_set.pool}'s slurmd pods mount the file system, which only pools in its "
                "zone do",
            )
        if node_set.max_nodes > pool.max_nodes:
            yield ConfigProblem(
                f"{here}.maxNodes",
                node_set.max_nodes,
                f"at most the pool's maxNodes ({pool.max_nodes}): each slurmd pod takes a node",
            )
        if node_set.default_time_hours is not None and (
            node_set.default_time_hours > node_set.max_time_hours
        ):
            yield ConfigProblem(
                f"{here}.defaultTimeHours",
                node_set.default_time_hours,
                f"at most the node set's maxTimeHours ({node_set.max_time_hours}): Slurm gives a "
                "job without --time the partition's DefaultTime, which must fit its MaxTime",
            )
        memory_gib = pool.instance.memory_gib if known_types else None
        for key, size in (("jobTmpGiB", node_set.job_tmp_gib), ("jobShmGiB", node_set.job_shm_gib)):
            if size is not None and memory_gib is not None and size >= memory_gib:
                yield ConfigProblem(
                    f"{here}.{key}",
                    size,
                    f"less than the memory of the pool's {pool.instance.name} nodes "
                    f"({memory_gib} GiB): the tmpfs is counted against the job's memory",
                )
        if node_set.warm_nodes > node_set.max_nodes:
            yield ConfigProblem(
                f"{here}.warmNodes",
                node_set.warm_nodes,
                f"at most the node set's maxNodes ({node_set.max_nodes})",
            )
        if node_set.image is None and all(t in catalog.CATALOG for t in pool.instance_types):
            key, image = slurm.images.for_accelerator(pool.instance.accelerator)
            if image is None:
                yield ConfigProblem(
                    f"{base}.images.{key}",
                    MISSING,
                    f"a pinned slurmd image with the EFA libraries for pool {pool.name} "
                    "(images/slurmd/Dockerfile builds one), or nodeSets[].image",
                )
