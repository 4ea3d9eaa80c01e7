"""Config section ``platform.teams``: namespaces, quotas and Volcano queues (teams.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Final

from pydantic import AfterValidator, Field

from components import catalog
from components.config.base import (
    CONFIG_KEY,
    ConfigProblem,
    PrincipalArn,
    StrictModel,
    duplicates,
    matching,
)
from components.config.cluster import principal_identity
from components.config.katib import TeamKatibConfig
from components.config.pools import AcceleratorAmounts, pool_capacity
from components.config.ray import TeamRayConfig
from components.config.slurm import MAX_TIME_HOURS_LIMIT, slurm_held
from components.config.storage import NamespaceName

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig


# System namespaces, and Volcano's own queues (root, default) and the platform's (platform,
# fabric-test: the fabric test's queue and namespace): a team's name is both.
RESERVED_NAMESPACES: Final = (
    "default", "root", "kube-system", "kube-public", "kube-node-lease", "volcano-system",
    "kubeflow-system", "slinky", "slurm", "cert-manager", "mariadb-operator", "kuberay-system",
    "platform", "fabric-test", "node-acceptance",
)  # fmt: skip


GroupName = Annotated[
    str,
    Field(min_length=1, max_length=128),
    AfterValidator(matching(r"\S+", "a Kubernetes group name without whitespace")),
]


ServiceAccountName = Annotated[
    str,
    Field(max_length=253),
    AfterValidator(
        matching(
            r"(?!default$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?",
            "a ServiceAccount name (DNS subdomain) other than default, which every pod that "
            "names no account runs as",
        )
    ),
]


CPU_ONLY_VCPUS: Final = 8
"""Default ``requests.cpu`` of a team whose accelerator quota fills no node: one mid-size
general-purpose node's worth (m-class ``2xlarge``), room for notebooks, data preparation and a
small CPU job, while a team's CPU pods still cannot fill the general pool that every team
shares."""
CPU_ONLY_MEMORY_GIB: Final = 32
"""Default ``requests.memory`` (GiB) of such a team: the same node's memory (4 GiB a vCPU)."""


DEFAULT_TEAM_PODS: Final = 1000
"""Default ``pods`` of a team's quota: well above a gang on every node of the largest pool plus
notebooks and CPU jobs, and small enough that one team cannot take a zone's addresses."""


class TeamQuotaConfig(AcceleratorAmounts):
    """Hard limits of a team namespace (ResourceQuota on requests)."""

    efa_interfaces: int = Field(
        default=0, ge=0, description="EFA interfaces (vpc.amazonaws.com/efa). Default: 0."
    )
    cpu: int | None = Field(
        default=None,
        ge=0,
        description="vCPUs the namespace's pods may request (requests.cpu), so CPU-only pods "
        "cannot fill accelerator nodes. Default: the vCPUs of the nodes the accelerator quota "
        "fills (per accelerator kind: the quota over the accelerators of the pools' largest "
        f"node of that kind, rounded up, times its vCPUs); {CPU_ONLY_VCPUS} for a team whose "
        "accelerator quota fills no node (none asked, or no pool of that kind), one "
        "general-purpose node's worth for notebooks and CPU jobs. 0: no CPU at all, so only "
        "pods that state a zero request run (the LimitRange gives others a default request).",
    )
    pods: int = Field(
        default=DEFAULT_TEAM_PODS,
        ge=1,
        le=100000,
        description="Pods the namespace may hold at once (pods), whatever they request: each "
        "takes an address of the VPC's subnets and a slot of a node's pod limit. Default: "
        f"{DEFAULT_TEAM_PODS}.",
    )
    memory_gib: int | None = Field(
        alias="memoryGiB",
        default=None,
        ge=0,
        description="Memory the namespace's pods may request (requests.memory), GiB. Default: "
        "the memory of the nodes the accelerator quota fills, as for cpu; "
        f"{CPU_ONLY_MEMORY_GIB} for a team whose accelerator quota fills no node. 0: no "
        "memory at all, as for cpu.",
    )


class TeamQueueConfig(StrictModel):
    """The team's Volcano queue: its share of the cluster's accelerators."""

    weight: int = Field(
        default=1, ge=1, le=65535, description="Relative share when queues compete. Default: 1."
    )
    reclaimable: bool = Field(
        default=True,
        description="Others may reclaim what the queue uses beyond its deserved share. "
        "Default: true.",
    )
    guarantee: AcceleratorAmounts = Field(
        default_factory=AcceleratorAmounts,
        description="Reserved for the team even when idle (guarantee <= deserved). Default: 0.",
    )
    deserved: AcceleratorAmounts = Field(
        default_factory=AcceleratorAmounts,
        description="Fair share, reclaimable from others (deserved <= capability). Default: 0.",
    )
    capability: AcceleratorAmounts | None = Field(
        default=None, description="Hard cap of the queue. Default: the team's quota."
    )


WORKLOAD_GID: Final = 1000
"""The group every runtime pod runs as (its user's, ``mpiuser`` of Trainer's MPI images): a team
directory owned by it would be open to every team."""
MIN_TEAM_GID: Final = 1001
"""Below: system groups and :data:`WORKLOAD_GID`."""
MAX_TEAM_GID: Final = 2**31 - 1
"""Kubernetes' bound on a pod's supplemental groups (core/v1 validation: int64 within int32)."""


class TeamSlurmConfig(StrictModel):
    """The team's Slurm QOS (``slurm.directory`` makes one per team, named after it)."""

    max_wall_hours: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TIME_HOURS_LIMIT,
        description="The QOS's MaxWall, hours: the longest time limit the team's jobs may ask "
        "for in any partition (a longer `--time` is refused at sbatch). Default: the longest "
        "partition's maxTimeHours.",
    )
    gpus: int | None = Field(
        default=None,
        ge=0,
        description="The most GPUs the team's running Slurm jobs hold together (the QOS's "
        "GrpTRES gres/gpu): more wait, a single job asking for more is refused. Default: no "
        "limit (fair share alone orders the teams).",
    )
    neuron_devices: int | None = Field(
        default=None,
        ge=0,
        description="The same for Neuron devices (GrpTRES gres/neuron). Default: no limit.",
    )


class TeamConfig(StrictModel):
    """A team: its namespace, quota, access, queue and storage claim."""

    name: NamespaceName = Field(description="Team name: namespace and queue name. Required.")
    admin_groups: list[GroupName] = Field(
        default_factory=list,
        description="Kubernetes groups (from access entries) with admin in the namespace. "
        "Default: none.",
    )
    member_groups: list[GroupName] = Field(
        default_factory=list,
        description="Kubernetes groups that run jobs in the namespace. Default: none.",
    )
    admin_principal_arns: list[PrincipalArn] = Field(
        default_factory=list,
        description="IAM roles or users (an IAM Identity Center permission set is the role "
        "AWSReservedSSO_<set>_<suffix> it creates in each account) whose EKS access entry puts "
        "them in adminGroups. A principal in several teams gets one entry with every team's "
        "groups. Default: none.",
    )
    member_principal_arns: list[PrincipalArn] = Field(
        default_factory=list,
        description="IAM roles or users whose access entry puts them in memberGroups. "
        "Default: none.",
    )
    allow_internal_load_balancers: bool = Field(
        default=False,
        description="Let the team's Services be type LoadBalancer when internal: annotated "
        'service.beta.kubernetes.io/aws-load-balancer-internal: "true" and '
        "service.beta.kubernetes.io/aws-load-balancer-scheme: internal, with no "
        "loadBalancerClass (an NLB in the private subnets, reachable from the VPC). "
        "Internet-facing load balancers, NodePorts and externalIPs are refused whatever this "
        "says. Default: false (ClusterIP Services only).",
    )
    quota: TeamQuotaConfig = Field(description="Accelerators and EFA the namespace may request.")
    queue: TeamQueueConfig = Field(
        default_factory=TeamQueueConfig, description="Volcano queue. Default: weight 1, no share."
    )
    shared_file_system: bool = Field(
        default=True,
        description="Mount the team's directories of the Lustre file system when the stack has "
        "one. Default: true.",
    )
    gid: int | None = Field(
        default=None,
        ge=MIN_TEAM_GID,
        le=MAX_TEAM_GID,
        description=f"The team's POSIX group: its directories on the shared file system are "
        f"owned by it (setgid, mode 2770, or 2750 where teams only read), its pods carry it as "
        f"a supplemental group, and its Slurm users must have it (docs: concepts, data and "
        f"checkpoints, 'Team isolation'). "
        f"{MIN_TEAM_GID} to {MAX_TEAM_GID}, not {WORKLOAD_GID} (every pod's own group) nor the "
        "root squash gid. Required with a Lustre file system.",
    )
    unqueued_service_accounts: list[ServiceAccountName] = Field(
        default_factory=list,
        description="ServiceAccounts of the team's namespace whose pods may request "
        "accelerators or EFA without being scheduled by Volcano (outside the team's queue, "
        "bounded only by its quota). Any member can run a pod as any account of the namespace, "
        "so listing one opens this to the whole team. Default: none.",
    )
    slurm: TeamSlurmConfig | None = Field(
        default=None,
        description="Limits of the team's Slurm QOS (with slurm.directory, which keeps a Slurm "
        "account and QOS per team). Default: MaxWall the longest partition's MaxTime, no "
        "accelerator limit.",
    )
    lustre_quota_gib: int | None = Field(
        alias="lustreQuotaGiB",
        default=None,
        ge=1,
        description="Hard limit of the team's data on the shared file system, GiB: a Lustre "
        "project quota over all its directories (project id = gid). Default: no limit (usage "
        "is still counted: lfs quota -p <gid> /fsx).",
    )

    ray: TeamRayConfig = Field(
        default_factory=TeamRayConfig,
        description="The team's Ray switches (with ray.enabled). Default: see keys.",
    )
    katib: TeamKatibConfig = Field(
        default_factory=TeamKatibConfig,
        description="The team's Katib switch (with katib.enabled). Default: see keys.",
    )

    @property
    def capability(self) -> AcceleratorAmounts:
        """The queue's hard cap (its own, or the team's quota)."""
        return self.queue.capability or AcceleratorAmounts(
            gpus=self.quota.gpus, neuron_devices=self.quota.neuron_devices
        )


def _group_problems(config: PlatformConfig, team: TeamConfig, base: str) -> Iterator[ConfigProblem]:
    """A team on the shared file system needs a gid of its own, not the squashed root's."""
    lustre = config.storage.lustre
    if lustre is None:
        return
    if team.gid is None:
        if team.shared_file_system or config.slurm.enabled:
            yield ConfigProblem(
                f"{base}.gid",
                None,
                f"the team's POSIX group id ({MIN_TEAM_GID} to {MAX_TEAM_GID}): its directories "
                "on the Lustre file system belong to it (docs: concepts, data and checkpoints, "
                "'Team isolation')",
            )
        return
    others = [other.name for other in config.teams if other.gid == team.gid]
    if len(others) > 1:
        yield ConfigProblem(
            f"{base}.gid", team.gid, f"a gid no other team has ({', '.join(others)} share it)"
        )
    if team.gid == lustre.root_squash_ids[1]:
        yield ConfigProblem(
            f"{base}.gid",
            team.gid,
            f"a gid other than storage.lustre.rootSquash's ({lustre.root_squash}): a squashed "
            "root would own the team's files",
        )


def team_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Cross-field problems of ``platform.teams``, their shares against the pools."""
    names = [team.name for team in config.teams]
    if duplicates(names):
        yield ConfigProblem(f"{CONFIG_KEY}.teams", names, "unique team names")
    lustre_namespaces = config.storage.lustre.namespaces if config.storage.lustre else []
    fields = (("gpus", "gpus"), ("neuronDevices", "neuron_devices"))
    for index, team in enumerate(config.teams):
        base = f"{CONFIG_KEY}.teams[{index}]"
        if team.name in RESERVED_NAMESPACES:
            yield ConfigProblem(
                f"{base}.name", team.name, "a name other than " + ", ".join(RESERVED_NAMESPACES)
            )
        if team.name in lustre_namespaces:
            yield ConfigProblem(
                f"{base}.name",
                team.name,
                "a namespace not also listed in storage.lustre.namespaces (teams get their claim "
                "through sharedFileSystem)",
            )
        yield from _access_problems(config, team, base)
        yield from _group_problems(config, team, base)
        if team.slurm is not None and (not config.slurm.enabled or config.slurm.directory is None):
            yield ConfigProblem(
                f"{base}.slurm",
                team.slurm.model_dump(by_alias=True, exclude_none=True),
                "unset unless slurm.enabled and slurm.directory are set: a team's QOS comes "
                "with its Slurm account, which only the directory gives",
            )
        queue = team.queue
        for key, attribute in fields:
            guarantee = getattr(queue.guarantee, attribute)
            deserved = getattr(queue.deserved, attribute)
            capability = getattr(team.capability, attribute)
            if guarantee > deserved:
                yield ConfigProblem(
                    f"{base}.queue.guarantee.{key}", guarantee, f"at most deserved ({deserved})"
                )
            if deserved > capability:
                yield ConfigProblem(
                    f"{base}.queue.deserved.{key}",
                    deserved,
                    f"at most the queue's capability ({capability}; default: the team quota)",
                )
    if any(not all(t in catalog.CATALOG for t in p.instance_types) for p in config.node_pools):
        # A pool of unknown types counts for nothing below; its own problem says why, and
        # every share would otherwise look too large as a consequence.
        return
    capacity = pool_capacity(config)
    held = slurm_held(config)
    for key, attribute in fields:
        available = getattr(capacity, attribute) - getattr(held, attribute)
        for share in ("guarantee", "deserved"):
            total = sum(getattr(getattr(team.queue, share), attribute) for team in config.teams)
            if total > available:
                yield ConfigProblem(
                    f"{CONFIG_KEY}.teams[*].queue.{share}.{key}",
                    total,
                    f"at most {available}, what the node pools can provide (maxNodes x "
                    "accelerators per node) beyond the nodes Slurm node sets hold; raise "
                    "maxNodes or lower the teams' shares",
                )


def _access_problems(
    config: PlatformConfig, team: TeamConfig, base: str
) -> Iterator[ConfigProblem]:
    """A team's principals map to groups it has, and none is the cluster's admin or deployer."""
    cluster = config.cluster
    deployer = principal_identity(cluster.deployer_principal_arn)
    admins = {principal_identity(arn) for arn in cluster.admin_principal_arns}
    for key, arns, groups, groups_key in (
        ("adminPrincipalArns", team.admin_principal_arns, team.admin_groups, "adminGroups"),
        ("memberPrincipalArns", team.member_principal_arns, team.member_groups, "memberGroups"),
    ):
        if arns and not groups:
            yield ConfigProblem(
                f"{base}.{groups_key}",
                groups,
                f"at least one group: the principals in {key} are given this team's "
                f"{groups_key}, and an access entry with no group grants nothing",
            )
        identities = [principal_identity(arn) for arn in arns]
        if duplicates([":".join(identity) for identity in identities]):
            yield ConfigProblem(
                f"{base}.{key}", arns, "each principal once (a role is one role whatever its path)"
            )
        for index, arn in enumerate(arns):
            identity = principal_identity(arn)
            if identity == deployer:
                yield ConfigProblem(
                    f"{base}.{key}[{index}]",
                    arn,
                    "a principal other than the deployer (cluster.deployerPrincipalArn): EKS "
                    "creates the creator's access entry itself, and the stack cannot add groups "
                    "to it",
                )
            elif identity in admins:
                yield ConfigProblem(
                    f"{base}.{key}[{index}]",
                    arn,
                    "a principal that is not a cluster admin (cluster.adminPrincipalArns): "
                    "cluster-admin already reaches every namespace",
                )
