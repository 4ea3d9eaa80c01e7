"""The one schema of a stack: the structured config key ``platform``, typed and validated once.

Everything a stack can say lives in :class:`PlatformConfig`. Keys are camelCase in the stack file
(``trainingZone``) and snake_case in Python (``training_zone``). :func:`parse_platform_config`
turns raw stack data into a frozen model or raises :class:`ConfigError` holding one
:class:`ConfigProblem` per mistake, each naming the key path, the bad value and what is allowed.
Nothing is registered before this succeeds.
"""

from __future__ import annotations

import ipaddress
import json
import re
import types
import typing
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from components import catalog, offerings, software, versions
from components.catalog import cpu_architecture
from components.subnets import SubnetPlanError, plan_subnets

CONFIG_KEY: Final = "platform"
"""The structured Pulumi config key (``<project>:platform``) that holds the whole model."""

LOG_RETENTION_DAYS: Final[tuple[int, ...]] = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
"""Retention periods CloudWatch Logs accepts (PutRetentionPolicy)."""

REQUIRED_TAG_KEYS: Final = ("owner", "cost-center", "environment")
"""Tag keys every AWS resource carries (through the AWS provider's default tags)."""


# --------------------------------------------------------------------------- value types


def _pattern(regex: str, allowed: str) -> Callable[[str], str]:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise PydanticCustomError("pattern", allowed)
        return value

    return check


def _ipv4_cidr(value: str) -> str:
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError:
        raise PydanticCustomError(
            "cidr", "an IPv4 network in CIDR form with no host bits set, e.g. 10.0.0.0/16"
        ) from None
    return value


def _retention(value: int) -> int:
    if value not in LOG_RETENTION_DAYS:
        raise PydanticCustomError(
            "retention", "a CloudWatch Logs retention: " + ", ".join(map(str, LOG_RETENTION_DAYS))
        )
    return value


EnvironmentName = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"[a-z][a-z0-9-]{0,19}",
            "lower-case letters, digits and '-', starting with a letter, at most 20 characters",
        )
    ),
]
ClusterName = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"[a-z][a-z0-9-]{0,28}",
            "lower-case letters, digits and '-', starting with a letter, at most 29 characters "
            "(the system node group's name prefix, <cluster>-system-, may have 37: "
            "terraform-provider-aws node_group_name_prefix)",
        )
    ),
]
AwsRegion = Annotated[
    str,
    AfterValidator(
        _pattern(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d", "an AWS region name such as us-west-2")
    ),
]
AvailabilityZone = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d[a-z]",
            "an availability zone name such as us-west-2a",
        )
    ),
]
AccountId = Annotated[str, AfterValidator(_pattern(r"\d{12}", "a 12-digit AWS account id"))]
_SESSION_ARN: Final = re.compile(r"arn:aws[a-z-]*:sts::(\d{12}):assumed-role/([^/]+)/.+")


def _not_a_session(value: str) -> str:
    session = _SESSION_ARN.fullmatch(value)
    if session:
        account, role = session.groups()
        raise PydanticCustomError(
            "session",
            f"the IAM role's ARN, arn:aws:iam::{account}:role/<its path>/{role}, not a session "
            "(EKS refuses session ARNs; `aws iam get-role --role-name {role}` shows the path)",
            {"role": role},
        )
    return value


PrincipalArn = Annotated[
    str,
    AfterValidator(_not_a_session),
    AfterValidator(
        _pattern(
            r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/([A-Za-z0-9+=,.@_-]+/){0,20}"
            r"[A-Za-z0-9+=,.@_-]{1,64}",
            "an IAM role or user ARN, arn:aws:iam::<account>:role/<path>/<name>, the name at most "
            "64 of A-Z a-z 0-9 + = , . @ _ - (IAM roleNameType)",
        )
    ),
]
InstanceType = Annotated[
    str,
    AfterValidator(
        _pattern(r"[a-z][a-z0-9-]*\.[a-z0-9-]+", "an EC2 instance type such as m7i.xlarge")
    ),
]
VpcId = Annotated[str, AfterValidator(_pattern(r"vpc-[0-9a-f]{8,17}", "a VPC id, vpc-<hex>"))]
SubnetId = Annotated[
    str, AfterValidator(_pattern(r"subnet-[0-9a-f]{8,17}", "a subnet id, subnet-<hex>"))
]
Ipv4Cidr = Annotated[str, AfterValidator(_ipv4_cidr)]
RetentionDays = Annotated[int, AfterValidator(_retention)]
TAG_CHARACTERS: Final = re.compile(r"[\w .:/=+\-@]*")
"""Tag keys and values IAM, CloudWatch Logs and FSx accept: letters, digits, spaces and
_ . : / = + - @ (botocore iam tagKeyType/tagValueType, ``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]``)."""
MAX_EXTRA_TAGS: Final = 40
"""AWS allows 50 tags a resource; the platform's own (owner, cost-center, environment,
managed-by, Name) and Karpenter's on instances (nodepool, nodeclaim, node class, cluster,
eks-cluster-name, pool) leave 40."""
RESERVED_TAG_KEYS: Final = (
    "eks:eks-cluster-name",
    "karpenter.sh/",
    "karpenter.k8s.aws/ec2nodeclass",
    "kubernetes.io/cluster/",
)
"""Tag keys (and prefixes) Karpenter sets itself and refuses in an EC2NodeClass's tags."""


def _tag_text(value: str) -> str:
    if not TAG_CHARACTERS.fullmatch(value):
        raise PydanticCustomError(
            "tag", "letters, digits, spaces and _ . : / = + - @ (what AWS tags accept)"
        )
    return value


TagText = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_tag_text)]
TagKey = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_tag_text)]


class StrictModel(BaseModel):
    """Base of every config section: camelCase keys, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


# --------------------------------------------------------------------------- sections


class TagsConfig(StrictModel):
    """Tags on every AWS resource, applied as the AWS provider's default tags."""

    owner: TagText = Field(
        description="Team or person accountable for the platform; tag `owner`. Required."
    )
    cost_center: TagText = Field(
        description="Cost center billed for the platform; tag `cost-center`. Required."
    )
    extra: dict[TagKey, TagText] = Field(
        default_factory=dict,
        max_length=MAX_EXTRA_TAGS,
        description="Further tags for every resource, at most "
        f"{MAX_EXTRA_TAGS}. Keys must not start with `aws:`, repeat a required tag or be one "
        "Karpenter sets. Default: none.",
    )


class FlowLogsConfig(StrictModel):
    """VPC flow logs to CloudWatch Logs."""

    retention_days: RetentionDays = Field(
        default=90, description="Days CloudWatch keeps flow log records. Default: 90."
    )
    traffic_type: Literal["ALL", "ACCEPT", "REJECT"] = Field(
        default="ALL", description="Which traffic is logged. Default: ALL."
    )


class ExistingVpcConfig(StrictModel):
    """A VPC and subnets the platform uses instead of creating its own."""

    vpc_id: VpcId = Field(description="Id of the existing VPC. Required.")
    private_subnet_ids: dict[AvailabilityZone, SubnetId] = Field(
        description="Private subnet per availability zone (every zone of "
        "`network.availabilityZones`, and no other). Nodes and pods use them; they get the "
        "Karpenter discovery and internal load balancer tags. Required."
    )


class NetworkConfig(StrictModel):
    """The VPC, its subnets and where accelerated capacity lives."""

    availability_zones: list[AvailabilityZone] = Field(
        min_length=2,
        description="Zones the cluster spans (at least two, all in `region`). Required.",
    )
    training_zone: AvailabilityZone = Field(
        description="The one zone of `availabilityZones` where EFA node pools, their placement "
        "groups and the Lustre file system live; EFA traffic does not cross zones. Required."
    )
    vpc_cidr: Ipv4Cidr = Field(
        default="10.0.0.0/16",
        description="IPv4 CIDR of the VPC (of the existing VPC when `existingVpc` is set). "
        "Default: 10.0.0.0/16.",
    )
    private_subnet_prefix_length: int = Field(
        default=19,
        ge=16,
        le=22,
        description="Prefix length of each zone's private subnet. Pods take VPC addresses, so "
        "keep it large: /19 gives 8,187 addresses per zone. Default: 19.",
    )
    public_subnet_prefix_length: int = Field(
        default=24,
        ge=20,
        le=28,
        description="Prefix length of each zone's public subnet (NAT gateways and internet "
        "load balancers only). Default: 24.",
    )
    nat_gateways: Literal["single", "perZone"] = Field(
        default="perZone",
        description="`perZone` keeps egress up when a zone fails; `single` costs less. "
        "Default: perZone.",
    )
    flow_logs: FlowLogsConfig = Field(
        default_factory=FlowLogsConfig, description="VPC flow logs. Default: all traffic, 90 days."
    )
    existing_vpc: ExistingVpcConfig | None = Field(
        default=None,
        description="Use this VPC and its subnets instead of creating them. Default: create.",
    )


TransitGatewayId = Annotated[
    str, AfterValidator(_pattern(r"tgw-[0-9a-f]{8,17}", "a transit gateway id, tgw-<hex>"))
]


class DeployPathConfig(StrictModel):
    """Where `pulumi up` and kubectl reach a private API endpoint from."""

    cidrs: list[Ipv4Cidr] = Field(
        default_factory=list,
        description="Networks deployments come from: a VPN, a peered network, the subnet of a "
        "CI runner in the VPC (then the VPC's CIDR). The cluster security group admits HTTPS "
        "(443) from each. Default: none.",
    )
    transit_gateway_id: TransitGatewayId | None = Field(
        default=None,
        description="Transit gateway that carries those networks to the VPC: the stack attaches "
        "the VPC's private subnets to it and routes the networks through it. Only for a VPC the "
        "stack creates. Default: none (the routes exist already, e.g. a Client VPN endpoint in "
        "the VPC or a peering the network team owns).",
    )


class EndpointAccessConfig(StrictModel):
    """Who can reach the Kubernetes API server."""

    private_access: bool = Field(
        default=True, description="API reachable from inside the VPC. Default: true."
    )
    public_access: bool = Field(
        default=False,
        description="API reachable from the internet, only from `publicAccessCidrs`. "
        "Default: false.",
    )
    public_access_cidrs: list[Ipv4Cidr] = Field(
        default_factory=list,
        description="Networks allowed to reach the public endpoint; required when "
        "`publicAccess` is true, forbidden otherwise. Default: none.",
    )
    deploy_from: DeployPathConfig = Field(
        default_factory=DeployPathConfig,
        description="Where deployments reach the private endpoint from; required (cidrs) when "
        "the endpoint is private only, since every Kubernetes resource of the stack is applied "
        "through it. Default: none.",
    )


class SystemNodeGroupConfig(StrictModel):
    """The small managed node group that runs controllers (tainted CriticalAddonsOnly)."""

    instance_types: list[InstanceType] = Field(
        default_factory=lambda: ["m7i.xlarge"],
        min_length=1,
        max_length=20,
        description="Instance types, most preferred first; EKS takes at most 20. "
        "Default: [m7i.xlarge].",
    )
    min_size: int = Field(
        default=2,
        ge=2,
        description="Fewest nodes; at least 2 so controllers survive a zone. Default: 2.",
    )
    desired_size: int = Field(
        default=2, ge=2, description="Nodes at creation (min <= desired <= max). Default: 2."
    )
    max_size: int = Field(default=4, ge=2, le=100, description="Most nodes. Default: 4.")
    root_volume_size_gib: int = Field(
        default=50,
        alias="rootVolumeSizeGiB",
        ge=20,
        le=16384,
        description="Encrypted gp3 root volume, GiB. Default: 50.",
    )


class ClusterConfig(StrictModel):
    """The EKS control plane and its system node group."""

    kubernetes_version: str = Field(
        default=versions.DEFAULT_KUBERNETES_VERSION,
        description="EKS Kubernetes minor version; one the bill of materials pins add-ons "
        f"for ({', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)}). "
        f"Default: {versions.DEFAULT_KUBERNETES_VERSION}.",
    )
    endpoint: EndpointAccessConfig = Field(
        default_factory=EndpointAccessConfig,
        description="API server endpoint access. Default: private only.",
    )
    deployer_principal_arn: PrincipalArn = Field(
        description="The IAM role (or user) that runs `pulumi up` when the cluster is created, "
        "with its path (`aws iam get-role --role-name <name>` shows it; an "
        "assumed-role session ARN names the role after `assumed-role/`). EKS gives the "
        "cluster's creator cluster admin itself (pulumi-eks turns on "
        "bootstrapClusterCreatorAdminPermissions), so it must not be in adminPrincipalArns "
        "too. Required.",
    )
    admin_principal_arns: list[PrincipalArn] = Field(
        min_length=1,
        description="Further IAM roles or users given cluster-admin through EKS access entries "
        "(authentication mode API); not the deployer. Required, at least one.",
    )
    log_retention_days: RetentionDays = Field(
        default=90,
        description="Days CloudWatch keeps control-plane logs (api, audit, authenticator). "
        "Default: 90.",
    )
    system_node_group: SystemNodeGroupConfig = Field(
        default_factory=SystemNodeGroupConfig,
        description="Controller nodes. Default: 2 to 4 m7i.xlarge.",
    )


# --------------------------------------------------------------------------- node pools

PoolName = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"[a-z][a-z0-9-]{0,30}",
            "lower-case letters, digits and '-', starting with a letter, at most 31 characters",
        )
    ),
]
AmiAlias = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"(al2023|bottlerocket)@(latest|v\d+(\.\d+)*)",
            "an EKS AMI alias, al2023@vYYYYMMDD (@latest only outside production)",
        )
    ),
]
CapacityReservationId = Annotated[
    str, AfterValidator(_pattern(r"cr-[0-9a-f]{17}", "a capacity reservation id, cr-<17 hex>"))
]
_LABEL_KEY_REGEX: Final = (
    r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)
LabelKey = Annotated[
    str, AfterValidator(_pattern(_LABEL_KEY_REGEX, "a Kubernetes label key, [prefix/]name"))
]
LabelValue = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?",
            "a Kubernetes label value (<= 63 characters)",
        )
    ),
]

# Karpenter rejects labels in these domains on a NodePool (it owns them, or Kubernetes does).
RESTRICTED_LABEL_DOMAINS: Final = ("kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws")


DEFAULT_HUGEPAGES_GIB: Final = 5
"""2 MiB huge pages per EFA node, GiB: libfabric registers its buffers there (AWS's EKS EFA
examples request 5120Mi per pod)."""


class TaintConfig(StrictModel):
    """A Kubernetes taint added to every node of a pool."""

    key: LabelKey = Field(description="Taint key. Required.")
    value: LabelValue = Field(default="", description="Taint value. Default: empty.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        description="Taint effect. Required."
    )


class NodePoolConfig(StrictModel):
    """One accelerated Karpenter pool: a NodePool, its EC2NodeClass and placement group."""

    name: PoolName = Field(
        description="Pool name (NodePool, EC2NodeClass, placement group). Required."
    )
    instance_types: list[str] = Field(
        min_length=1,
        description="Instance types from the catalog (components/catalog.py), all with the same "
        "accelerator and EFA layout. Required.",
    )
    capacity_type: Literal["on-demand", "spot", "reserved"] = Field(
        default="on-demand",
        description="`reserved` launches only into the capacity reservations (ODCR or Capacity "
        "Block) named below. Default: on-demand.",
    )
    capacity_reservation_ids: list[CapacityReservationId] = Field(
        default_factory=list,
        description="Capacity reservations of a `reserved` pool, by id. Default: none.",
    )
    capacity_reservation_tags: dict[str, str] = Field(
        default_factory=dict,
        description="Capacity reservations of a `reserved` pool, by tags (instead of ids). "
        "Default: none.",
    )
    max_nodes: int = Field(
        ge=1,
        le=2000,
        description="Most nodes; becomes the NodePool's node and accelerator limits. Required.",
    )
    efa: bool | None = Field(
        default=None,
        description="Attach every EFA interface of the instance type. Default: true for "
        "EFA-capable types.",
    )
    placement_group: bool | None = Field(
        default=None,
        description="Launch into the pool's own cluster placement group. Default: same as `efa`. "
        "A reserved pool's reservation must have been bought into that group.",
    )
    zone: AvailabilityZone | None = Field(
        default=None,
        description="Zone of a pool that is not pinned to the training zone. EFA and placement "
        "group pools always live in `network.trainingZone`. Default: all zones (non-EFA pools).",
    )
    ami_alias: AmiAlias = Field(
        default=versions.DEFAULT_AMI_ALIAS,
        description=f"EKS AMI alias. Default: {versions.DEFAULT_AMI_ALIAS} (bill of materials).",
    )
    root_volume_size_gib: int = Field(
        default=200,
        alias="rootVolumeSizeGiB",
        ge=50,
        le=16384,
        description="Encrypted gp3 root volume (container images), GiB. Default: 200.",
    )
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Extra node labels. Default: none."
    )
    taints: list[TaintConfig] = Field(
        default_factory=list,
        description="Extra taints (the accelerator taint is always set). Default: none.",
    )
    hugepages_gib: int | None = Field(
        default=None,
        alias="hugepagesGiB",
        ge=0,
        le=64,
        description="2 MiB huge pages each node reserves at boot, GiB; every whole-node pod "
        "(Trainer runtimes, Slurm node sets) requests all of them (libfabric registers EFA "
        f"buffers there). Default: {DEFAULT_HUGEPAGES_GIB} on EFA pools, 0 otherwise.",
    )

    @property
    def hugepages(self) -> int:
        """Huge pages of each node, GiB: configured, or the EFA default."""
        if self.hugepages_gib is not None:
            return self.hugepages_gib
        return DEFAULT_HUGEPAGES_GIB if self.uses_efa else 0

    @property
    def uses_efa(self) -> bool:
        """Whether the pool attaches EFA interfaces."""
        if self.efa is not None:
            return self.efa
        return all(
            t in catalog.CATALOG and catalog.CATALOG[t].supports_efa for t in self.instance_types
        )

    @property
    def uses_placement_group(self) -> bool:
        """Whether the pool launches into its own cluster placement group."""
        return self.uses_efa if self.placement_group is None else self.placement_group

    @property
    def instance(self) -> catalog.InstanceType:
        """The catalog entry that sizes the pool (all its types share accelerators and EFA)."""
        return catalog.CATALOG[self.instance_types[0]]


_GENERAL_CAPACITY_TYPES: Final[tuple[Literal["on-demand", "spot"], ...]] = ("on-demand", "spot")


class GeneralPoolConfig(StrictModel):
    """The CPU pool for everything that is not training: controllers' helpers, notebooks, jobs."""

    max_cpu: int = Field(default=256, ge=8, description="vCPU limit of the pool. Default: 256.")
    max_memory_gib: int = Field(
        default=1024,
        alias="maxMemoryGiB",
        ge=16,
        description="Memory limit of the pool, GiB. Default: 1024.",
    )
    capacity_types: list[Literal["on-demand", "spot"]] = Field(
        default_factory=lambda: list(_GENERAL_CAPACITY_TYPES),
        min_length=1,
        description="Capacity types Karpenter may use. Default: [on-demand, spot].",
    )
    ami_alias: AmiAlias = Field(
        default=versions.DEFAULT_AMI_ALIAS,
        description=f"EKS AMI alias. Default: {versions.DEFAULT_AMI_ALIAS}.",
    )


# --------------------------------------------------------------------------- storage

LUSTRE_THROUGHPUT_PER_TIB: Final = (125, 250, 500, 1000)
"""PERSISTENT_2 throughput tiers, MB/s per TiB of storage."""
LUSTRE_FIRST_STEPS_GIB: Final = (1200, 2400)
LUSTRE_STEP_GIB: Final = 2400
MAX_DATA_REPOSITORY_ASSOCIATIONS: Final = 8
MAX_BACKUP_RETENTION_DAYS: Final = 90
DEFAULT_BACKUP_RETENTION_DAYS: Final = 7


def automatic_metadata_iops(capacity_gib: int) -> int:
    """Metadata IOPS that FSx's AUTOMATIC mode gives an SSD PERSISTENT_2 file system.

    1500 at 1200 GiB, 3000 at 2400, 6000 up to 9600, 12000 up to 45600, then 12000 per
    24000 GiB (FSx for Lustre User Guide, "Lustre metadata performance configuration"; REFERENCE
    §5), at most 192000. User-provisioned IOPS below it are refused by the FSx API. Between the
    24000 GiB steps (50400 GiB: 25200 pro rata) the floor is the next value FSx accepts for
    user-provisioned IOPS (a multiple of 12000), so config may refuse a value AWS would take
    but never accept one it refuses.
    """
    if capacity_gib <= 1200:
        return 1500
    if capacity_gib <= 2400:
        return 3000
    if capacity_gib <= 9600:
        return 6000
    if capacity_gib <= 45600:
        return 12000
    return min(12000 * -(-capacity_gib // 24000), 192000)


DataRepositoryEvent = Literal["NEW", "CHANGED", "DELETED"]
ALL_EVENTS: Final[tuple[DataRepositoryEvent, ...]] = ("NEW", "CHANGED", "DELETED")

BucketKey = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"[a-z][a-z0-9-]{0,20}",
            "lower-case letters, digits and '-', starting with a letter, at most 21 characters",
        )
    ),
]
BucketName = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]",
            "an S3 bucket name (3-63 lower-case letters, digits, '.' and '-')",
        )
    ),
]
NamespaceName = Annotated[
    str,
    AfterValidator(
        _pattern(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a Kubernetes namespace name (DNS label)")
    ),
]
FileSystemPath = Annotated[
    str, AfterValidator(_pattern(r"/[A-Za-z0-9._/-]*", "an absolute path such as /datasets"))
]
S3Prefix = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"([A-Za-z0-9._-]+/)*",
            "an S3 key prefix ending in '/', e.g. checkpoints/ (empty for the whole bucket)",
        )
    ),
]
DailyTime = Annotated[str, AfterValidator(_pattern(r"([01]\d|2[0-3]):[0-5]\d", "HH:MM (UTC)"))]
WeeklyTime = Annotated[
    str,
    AfterValidator(_pattern(r"[1-7]:([01]\d|2[0-3]):[0-5]\d", "D:HH:MM, D=1 (Monday)..7 (UTC)")),
]


class BucketConfig(StrictModel):
    """An S3 bucket for datasets, checkpoints and artifacts."""

    name: BucketKey = Field(description="Key the rest of the config refers to. Required.")
    bucket_name: BucketName | None = Field(
        default=None,
        description="Globally unique S3 name. Default: <cluster>-<name>-<accountId>.",
    )
    noncurrent_version_retention_days: int = Field(
        default=30,
        ge=1,
        le=3650,
        description="Days an overwritten or deleted object version is kept. Default: 30.",
    )


class DataRepositoryAssociationConfig(StrictModel):
    """A link between a directory of the file system and a prefix of its bucket."""

    file_system_path: FileSystemPath = Field(
        description="Directory on the file system, e.g. /checkpoints. Required."
    )
    s3_prefix: S3Prefix = Field(
        default="", description="Prefix in the file system's bucket. Default: the whole bucket."
    )
    import_events: list[DataRepositoryEvent] = Field(
        default_factory=lambda: list(ALL_EVENTS),
        description="S3 changes imported into the file system. Default: NEW, CHANGED, DELETED.",
    )
    export_events: list[DataRepositoryEvent] = Field(
        default_factory=list,
        description="File system changes exported to S3 (checkpoints: all three). Default: none.",
    )
    batch_import_metadata_on_create: bool = Field(
        default=True,
        description="List the prefix's objects when the association is created. Default: true.",
    )


class LustreConfig(StrictModel):
    """FSx for Lustre PERSISTENT_2 in the training zone, linked to one S3 bucket."""

    storage_capacity_gib: int = Field(
        alias="storageCapacityGiB",
        ge=1200,
        description="SSD capacity, GiB: 1200, 2400, then steps of 2400. Required.",
    )
    throughput_per_tib: int = Field(
        alias="throughputPerTiB",
        default=250,
        description="MB/s per TiB: 125, 250, 500 or 1000. Default: 250.",
    )
    metadata_iops: int | None = Field(
        default=None,
        ge=1500,
        description="Provisioned metadata IOPS (1500, 3000, 6000, then steps of 12000). "
        "Default: automatic, sized by FSx from capacity.",
    )
    data_compression: Literal["LZ4", "NONE"] = Field(
        default="LZ4", description="Compress data on disk. Default: LZ4."
    )
    efa_enabled: bool = Field(
        default=False,
        description="EFA-enabled file system (clients on EFA instances use it; set only at "
        "creation). Default: false.",
    )
    bucket: BucketKey = Field(
        description="Key of the bucket (storage.buckets) all associations use. Required."
    )
    associations: list[DataRepositoryAssociationConfig] = Field(
        default_factory=list,
        description="Data repository associations, at most 8, non-overlapping. Default: none.",
    )
    automatic_backup_retention_days: int | None = Field(
        default=None,
        ge=0,
        le=MAX_BACKUP_RETENTION_DAYS,
        description="Daily backups kept, days (0 turns them off). FSx cannot back up a file "
        "system linked to S3 by data repository associations, so it must be 0 with "
        "associations (S3 is the durable copy, README 'Where data and checkpoints live'). "
        f"Default: 0 with associations, {DEFAULT_BACKUP_RETENTION_DAYS} without.",
    )

    @property
    def backup_retention_days(self) -> int:
        """Daily backups kept: configured, or the default for linked or unlinked file systems."""
        if self.automatic_backup_retention_days is not None:
            return self.automatic_backup_retention_days
        return 0 if self.associations else DEFAULT_BACKUP_RETENTION_DAYS

    daily_backup_start_time: DailyTime = Field(
        default="03:00", description="Backup window start, UTC. Default: 03:00."
    )
    weekly_maintenance_start_time: WeeklyTime = Field(
        default="7:04:00", description="Maintenance window start, UTC. Default: 7:04:00."
    )
    log_level: Literal["WARN_ERROR", "WARN_ONLY", "ERROR_ONLY", "DISABLED"] = Field(
        default="WARN_ERROR",
        description="Data repository events logged to CloudWatch. Default: WARN_ERROR.",
    )
    log_retention_days: RetentionDays = Field(
        default=90, description="Days the file system's log group keeps events. Default: 90."
    )
    zone: AvailabilityZone | None = Field(
        default=None,
        description="Must be the training zone when set (EFA pools read it at full speed only "
        "from there). Default: the training zone.",
    )
    namespaces: list[NamespaceName] = Field(
        default_factory=list,
        description="Namespaces that mount it; each gets its own PersistentVolume and claim "
        "`shared-lustre`. Default: none.",
    )
    mount_options: list[str] = Field(
        default_factory=lambda: ["flock"],
        description="Lustre client mount options. Default: [flock].",
    )


class StorageConfig(StrictModel):
    """Shared storage: S3 buckets and the Lustre file system in front of one of them."""

    buckets: list[BucketConfig] = Field(default_factory=list, description="Buckets. Default: none.")
    lustre: LustreConfig | None = Field(
        default=None, description="The shared file system. Default: none."
    )


# --------------------------------------------------------------------------- teams

# System namespaces, and Volcano's own queues (root, default): a team's name is both.
RESERVED_NAMESPACES: Final = (
    "default", "root", "kube-system", "kube-public", "kube-node-lease", "volcano-system",
    "kubeflow-system", "slinky", "slurm", "cert-manager", "mariadb-operator",
)  # fmt: skip
GroupName = Annotated[str, Field(min_length=1, max_length=128)]


class AcceleratorAmounts(StrictModel):
    """An amount of accelerators, per kind."""

    gpus: int = Field(default=0, ge=0, description="NVIDIA GPUs (nvidia.com/gpu). Default: 0.")
    neuron_devices: int = Field(
        default=0, ge=0, description="Neuron devices (aws.amazon.com/neuron). Default: 0."
    )

    def resources(self) -> dict[str, int]:
        """As Kubernetes extended resources."""
        return {catalog.GPU_RESOURCE: self.gpus, catalog.NEURON_RESOURCE: self.neuron_devices}


class TeamQuotaConfig(AcceleratorAmounts):
    """Hard limits of a team namespace (ResourceQuota on requests)."""

    efa_interfaces: int = Field(
        default=0, ge=0, description="EFA interfaces (vpc.amazonaws.com/efa). Default: 0."
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
    quota: TeamQuotaConfig = Field(description="Accelerators and EFA the namespace may request.")
    queue: TeamQueueConfig = Field(
        default_factory=TeamQueueConfig, description="Volcano queue. Default: weight 1, no share."
    )
    shared_file_system: bool = Field(
        default=True,
        description="Mount the Lustre file system (claim shared-lustre) when the stack has one. "
        "Default: true.",
    )

    @property
    def capability(self) -> AcceleratorAmounts:
        """The queue's hard cap (its own, or the team's quota)."""
        return self.queue.capability or AcceleratorAmounts(
            gpus=self.quota.gpus, neuron_devices=self.quota.neuron_devices
        )


# --------------------------------------------------------------------------- trainer

ImageReference = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"[a-z0-9._\-/{}:]+(:[A-Za-z0-9._-]+|@sha256:[a-f0-9]{64})",
            "an image with a tag or digest (never :latest)",
        )
    ),
]


FLOATING_TAGS: Final = ("latest", "main", "master", "HEAD", "nightly", "edge")


def _not_latest(value: str) -> str:
    if "@" not in value and value.rsplit(":", 1)[-1] in FLOATING_TAGS:
        raise PydanticCustomError(
            "floating", "a pinned tag or digest, not :" + ", :".join(FLOATING_TAGS)
        )
    return value


PinnedImage = Annotated[ImageReference, AfterValidator(_not_latest)]


RUNTIME_IMAGE_KEYS: Final[dict[catalog.AcceleratorKind, dict[str, str]]] = {
    "nvidia": {"torch": "torch", "mpi": "mpi", "jax": "jax"},
    "neuron": {"torch": "neuron"},
}
"""Accelerator -> the frameworks its pools get runtimes of -> the ``trainer.images`` key of each:
PyTorch everywhere, MPI and JAX on GPU pools; Trainium's PyTorch runs the Neuron image."""


class TrainerImagesConfig(StrictModel):
    """Container images of the generated training runtimes (pinned).

    On GPU pools with EFA the defaults cannot use the fabric (they carry no libfabric nor
    aws-ofi-nccl): there, each key names the image ``images/training-cuda`` builds on that
    key's default, by the tag the build carries. Config checks every image against its pools'
    AMI drivers (components/software.py).
    """

    torch: PinnedImage = Field(
        default=versions.DEFAULT_TORCH_IMAGE,
        description=f"PyTorch runtimes on GPU pools. Default: {versions.DEFAULT_TORCH_IMAGE}; "
        "on EFA pools an images/training-cuda build of it.",
    )
    mpi: PinnedImage = Field(
        default=versions.DEFAULT_MPI_IMAGE,
        description="MPI runtimes (DeepSpeed, NCCL tests). Default: "
        f"{versions.DEFAULT_MPI_IMAGE}; on EFA pools an images/training-cuda build of it.",
    )
    jax: PinnedImage = Field(
        default=versions.DEFAULT_JAX_IMAGE,
        description=f"JAX runtimes on GPU pools. Default: {versions.DEFAULT_JAX_IMAGE}; on EFA "
        "pools an images/training-cuda build of it.",
    )
    neuron: PinnedImage | None = Field(
        default=None,
        description="PyTorch runtimes on Trainium pools: the image images/training-neuron "
        "builds, tagged sdk2.31.1 (AWS publishes no PyTorch training image whose runtime "
        "starts on the AMI's Neuron driver). Required when Trainer is on and a Trainium pool "
        "exists.",
    )

    def for_runtime(self, accelerator: catalog.AcceleratorKind, framework: str) -> str | None:
        """The image of ``framework``'s runtimes on pools of ``accelerator``."""
        image: str | None = getattr(self, RUNTIME_IMAGE_KEYS[accelerator][framework])
        return image


class TrainerConfig(StrictModel):
    """Kubeflow Trainer v2 and the runtimes generated from the node pools."""

    enabled: bool = Field(default=True, description="Install Kubeflow Trainer. Default: true.")
    images: TrainerImagesConfig = Field(
        default_factory=TrainerImagesConfig, description="Runtime images. Default: see keys."
    )
    legacy_training_operator: bool = Field(
        default=False,
        description="Also run the Training Operator v1.9.4 (PyTorchJob, TFJob, MPIJob v1, ...), "
        "gang-scheduled by Volcano, while teams migrate. It conflicts with a standalone MPI "
        "Operator (same MPIJob CRD name). Default: false.",
    )


# --------------------------------------------------------------------------- slurm

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
        _pattern(
            r"[a-z][a-z0-9_]{0,39}",
            "lower-case letters, digits and '_', starting with a letter, at most 40 characters "
            "(Slurm accounting uses it in table names)",
        )
    ),
]


class SlurmNodeSetConfig(StrictModel):
    """A Slurm node set on one accelerator pool: slurmd pods that each take a whole node."""

    pool: PoolName = Field(description="The `nodePools` entry the node set runs on. Required.")
    replicas: int = Field(
        default=1,
        ge=0,
        le=2000,
        description="slurmd pods, one per node; each holds its node for Slurm while it runs. "
        "Default: 1.",
    )
    image: PinnedImage | None = Field(
        default=None,
        description="slurmd image of this node set. Default: `slurm.images.slurmdGpu` or "
        "`slurm.images.slurmdNeuron`, by the pool's accelerator.",
    )


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
        default_factory=list,
        description="Networks that may reach the login load balancer (its source ranges). "
        "Default: the VPC's CIDR.",
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
    default_partition: SlurmClusterName = Field(
        default="all",
        description="Name of the default partition, which spans every node set. Default: all.",
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


class PlatformConfig(StrictModel):
    """The whole platform of one stack (config key ``platform``)."""

    environment: EnvironmentName = Field(
        description="Environment name (dev, staging, prod, ...); tag `environment` and part "
        "of resource names. Required."
    )
    region: AwsRegion = Field(description="AWS region of every resource. Required.")
    account_id: AccountId = Field(
        description="AWS account the stack deploys to; ARNs are built from it so the program "
        "never calls AWS while planning. Required."
    )
    cluster_name: ClusterName | None = Field(
        default=None,
        description="EKS cluster name, also the Karpenter discovery tag value. "
        "Default: training-<environment>.",
    )
    tags: TagsConfig = Field(description="Required and extra tags. Required.")
    protect_stateful_resources: bool = Field(
        default=False,
        description="Protect stateful resources (the cluster, KMS keys, the file system, "
        "buckets, Slurm's accounting database) from deletion. Default: false; set true in "
        "production.",
    )
    network: NetworkConfig = Field(description="VPC and zones. Required.")
    cluster: ClusterConfig = Field(description="EKS cluster. Required.")
    node_pools: list[NodePoolConfig] = Field(
        default_factory=list,
        description="Accelerated Karpenter pools (GPU and Trainium). Default: none.",
    )
    general_pool: GeneralPoolConfig = Field(
        default_factory=GeneralPoolConfig,
        description="The general-purpose CPU pool. Default: on-demand and spot, 256 vCPU.",
    )
    storage: StorageConfig = Field(
        default_factory=StorageConfig, description="S3 buckets and FSx for Lustre. Default: none."
    )
    teams: list[TeamConfig] = Field(
        default_factory=list,
        description="Teams: namespaces, quotas, access and Volcano queues. Default: none.",
    )
    trainer: TrainerConfig = Field(
        default_factory=TrainerConfig,
        description="Kubeflow Trainer v2 and its runtimes. Default: on, default images.",
    )
    slurm: SlurmConfig = Field(
        default_factory=SlurmConfig,
        description="Slurm on Kubernetes (Slinky) on the accelerator pools. Default: off.",
    )

    @property
    def name(self) -> str:
        """The cluster name, also the prefix of every AWS resource name."""
        return self.cluster_name or f"training-{self.environment}"

    @property
    def slurm_cluster_name(self) -> str:
        """The Slurm ClusterName: configured, or the EKS cluster name in Slurm's alphabet."""
        return self.slurm.cluster_name or self.name.replace("-", "_")

    def pool(self, name: str) -> NodePoolConfig | None:
        """The accelerator pool called ``name``, if there is one."""
        return next((pool for pool in self.node_pools if pool.name == name), None)

    @property
    def required_tags(self) -> dict[str, str]:
        """The tags every AWS resource carries: required ones first, then extra."""
        return {
            "owner": self.tags.owner,
            "cost-center": self.tags.cost_center,
            "environment": self.environment,
            **self.tags.extra,
        }


# --------------------------------------------------------------------------- errors

_MISSING: Final = object()


@dataclass(frozen=True)
class ConfigProblem:
    """One mistake in a stack file."""

    path: str
    """Key path from the config root, e.g. ``platform.network.trainingZone``."""
    value: Any
    """The value found there (``MISSING`` when the key is absent)."""
    allowed: str
    """What would be accepted, in words."""

    def __str__(self) -> str:
        found = "missing" if self.value is _MISSING else f"got {_show(self.value)}"
        return f"{self.path}: {found}; allowed: {self.allowed}"


class ConfigError(Exception):
    """A stack file that cannot be deployed; ``problems`` lists every mistake found."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(problem) for problem in problems))


def _show(value: Any) -> str:
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


# --------------------------------------------------------------------------- parsing


def parse_platform_config(raw: Any) -> PlatformConfig:
    """Validate raw stack data (the value of the ``platform`` key) into a :class:`PlatformConfig`.

    Raises:
        ConfigError: with every structural problem, or, when the structure is sound, every
            problem found by the cross-field rules.

    """
    if raw is None:
        raise ConfigError(
            [ConfigProblem(CONFIG_KEY, _MISSING, "a mapping with the platform settings")]
        )
    if not isinstance(raw, dict):
        raise ConfigError([ConfigProblem(CONFIG_KEY, raw, "a mapping with the platform settings")])
    try:
        config = PlatformConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError([_problem_from_pydantic(error) for error in exc.errors()]) from None
    problems = list(_cross_field_problems(config))
    if problems:
        raise ConfigError(problems)
    return config


MOVED_KEYS: Final[dict[tuple[str, ...], str]] = {
    ("trainer", "hugepagesGiB"): "no such key: huge pages are a node setting now, "
    "nodePools[].hugepagesGiB (every whole-node pod requests what its node reserves)",
    ("slurm", "hugepagesGiB"): "no such key: huge pages are a node setting now, "
    "nodePools[].hugepagesGiB (every whole-node pod requests what its node reserves)",
}
"""Keys that used to exist, with where their setting lives now."""


def _problem_from_pydantic(error: Any) -> ConfigProblem:
    loc: tuple[str | int, ...] = tuple(error["loc"])
    path = _path(loc)
    kind = error["type"]
    if kind == "missing":
        field = _field_at(loc)
        description = field.description if field and field.description else "a value"
        return ConfigProblem(path, _MISSING, description)
    if kind == "extra_forbidden":
        moved = MOVED_KEYS.get(tuple(part for part in loc if isinstance(part, str)))
        if moved is not None:
            return ConfigProblem(path, error["input"], moved)
        model = _model_at(loc[:-1])
        keys = sorted(f.alias or name for name, f in model.model_fields.items()) if model else []
        return ConfigProblem(path, error["input"], "one of the keys " + ", ".join(keys))
    message: str = error["msg"]
    allowed = message.removeprefix("Input should be ").removeprefix("Value error, ")
    if kind == PRIVATE_KEY_ERROR:
        return ConfigProblem(path, "<a private key, not repeated here>", allowed)
    return ConfigProblem(path, error["input"], allowed)


def _path(loc: tuple[str | int, ...]) -> str:
    text = CONFIG_KEY
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _unwrap(annotation: Any) -> Iterator[Any]:
    """Every class an annotation can hold (through Optional, list, dict, Annotated)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        yield from _unwrap(typing.get_args(annotation)[0])
    elif origin in (list, dict, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            yield from _unwrap(arg)
    else:
        yield annotation


def _model_at(loc: tuple[str | int, ...]) -> type[StrictModel] | None:
    model: type[StrictModel] | None = PlatformConfig
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = _by_alias(model, part)
        if field is None:
            # dict keys (zone names) sit in the loc too; stay on the dict's value model
            continue
        model = next(
            (
                t
                for t in _unwrap(field.annotation)
                if isinstance(t, type) and issubclass(t, StrictModel)
            ),
            None,
        )
    return model


def _field_at(loc: tuple[str | int, ...]) -> Any:
    model = _model_at(loc[:-1])
    last = loc[-1]
    return _by_alias(model, last) if model is not None and isinstance(last, str) else None


def _by_alias(model: type[StrictModel], key: str) -> Any:
    for name, field in model.model_fields.items():
        if key in (field.alias, name):
            return field
    return None


# --------------------------------------------------------------------------- cross-field rules


def _cross_field_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    yield from _network_problems(config)
    yield from _cluster_problems(config.cluster)
    yield from _tag_problems(config.tags)
    yield from _node_pool_problems(config)
    yield from _storage_problems(config)
    yield from _team_problems(config)
    yield from _slurm_problems(config)
    yield from _software_problems(config)


def _network_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    if config.region not in versions.EKS_IMAGE_REGISTRY_ACCOUNTS:
        yield ConfigProblem(
            f"{CONFIG_KEY}.region",
            config.region,
            "a region of the aws partition whose EKS image registry the bill of materials "
            "knows: " + ", ".join(sorted(versions.EKS_IMAGE_REGISTRY_ACCOUNTS)),
        )
    network = config.network
    zones = network.availability_zones
    base = f"{CONFIG_KEY}.network"
    deploy = config.cluster.endpoint.deploy_from
    if deploy.transit_gateway_id and network.existing_vpc is not None:
        yield ConfigProblem(
            f"{CONFIG_KEY}.cluster.endpoint.deployFrom.transitGatewayId",
            deploy.transit_gateway_id,
            "nothing with network.existingVpc: the stack does not own that VPC's route tables "
            "(route the deploy networks there yourself)",
        )
    if deploy.transit_gateway_id and not deploy.cidrs:
        yield ConfigProblem(
            f"{CONFIG_KEY}.cluster.endpoint.deployFrom.cidrs",
            [],
            "the networks to route through the transit gateway",
        )
    if _duplicates(deploy.cidrs):
        yield ConfigProblem(
            f"{CONFIG_KEY}.cluster.endpoint.deployFrom.cidrs", deploy.cidrs, "each network once"
        )
    for index, cidr in enumerate(deploy.cidrs):
        if ipaddress.IPv4Network(cidr).prefixlen == 0:
            # 443 from everywhere routable, and a route that collides with the NAT default.
            yield ConfigProblem(
                f"{CONFIG_KEY}.cluster.endpoint.deployFrom.cidrs[{index}]",
                cidr,
                "the networks deployments come from, not every address",
            )
    vpc_prefix = ipaddress.IPv4Network(network.vpc_cidr).prefixlen
    if not 16 <= vpc_prefix <= 28:
        yield ConfigProblem(
            f"{base}.vpcCidr",
            network.vpc_cidr,
            "a /16 to /28 network: the sizes EC2 CreateVpc accepts",
        )
    for index, zone in enumerate(zones):
        if not zone.startswith(config.region) or len(zone) != len(config.region) + 1:
            yield ConfigProblem(
                f"{base}.availabilityZones[{index}]", zone, f"a zone of region {config.region}"
            )
    duplicates = _duplicates(zones)
    if duplicates:
        yield ConfigProblem(f"{base}.availabilityZones", zones, "each zone once")
    if network.training_zone not in zones:
        yield ConfigProblem(
            f"{base}.trainingZone",
            network.training_zone,
            "one of the availability zones " + ", ".join(zones),
        )
    if network.existing_vpc is not None:
        given = network.existing_vpc.private_subnet_ids
        if set(given) != set(zones):
            yield ConfigProblem(
                f"{base}.existingVpc.privateSubnetIds",
                sorted(given),
                "exactly one subnet for each availability zone " + ", ".join(zones),
            )
        if len(set(given.values())) != len(given):
            yield ConfigProblem(
                f"{base}.existingVpc.privateSubnetIds", given, "a different subnet per zone"
            )
    elif not duplicates:
        try:
            plan_subnets(
                network.vpc_cidr,
                zones,
                network.private_subnet_prefix_length,
                network.public_subnet_prefix_length,
            )
        except SubnetPlanError as exc:
            yield ConfigProblem(
                f"{base}.vpcCidr",
                network.vpc_cidr,
                f"a network large enough for the subnets ({exc}); use a larger VPC CIDR or "
                "longer subnet prefix lengths",
            )


def _cluster_problems(cluster: ClusterConfig) -> Iterator[ConfigProblem]:
    base = f"{CONFIG_KEY}.cluster"
    if cluster.kubernetes_version not in versions.SUPPORTED_KUBERNETES_VERSIONS:
        yield ConfigProblem(
            f"{base}.kubernetesVersion",
            cluster.kubernetes_version,
            "one of " + ", ".join(versions.SUPPORTED_KUBERNETES_VERSIONS),
        )
    endpoint = cluster.endpoint
    if not endpoint.private_access and not endpoint.public_access:
        yield ConfigProblem(
            f"{base}.endpoint.privateAccess", False, "true when publicAccess is false"
        )
    if endpoint.public_access and not endpoint.public_access_cidrs:
        yield ConfigProblem(
            f"{base}.endpoint.publicAccessCidrs",
            [],
            "at least one CIDR when publicAccess is true (the API is never open to everyone "
            "by default)",
        )
    for index, cidr in enumerate(endpoint.public_access_cidrs):
        if _not_internet_routable(ipaddress.IPv4Network(cidr)):
            yield ConfigProblem(
                f"{base}.endpoint.publicAccessCidrs[{index}]",
                cidr,
                "a public network: EKS refuses reserved ranges there (private, shared, "
                "loopback, link-local, multicast); reach the private endpoint from those "
                "through deployFrom",
            )
    if not endpoint.public_access and endpoint.public_access_cidrs:
        yield ConfigProblem(
            f"{base}.endpoint.publicAccessCidrs",
            endpoint.public_access_cidrs,
            "none while publicAccess is false",
        )
    identities = [principal_identity(arn) for arn in cluster.admin_principal_arns]
    if len(set(identities)) < len(identities):
        yield ConfigProblem(
            f"{base}.adminPrincipalArns",
            cluster.admin_principal_arns,
            "each principal once (a role under two paths or in two cases is one principal, "
            "and a second access entry for it fails with 409)",
        )
    deployer = principal_identity(cluster.deployer_principal_arn)
    for index, arn in enumerate(cluster.admin_principal_arns):
        if principal_identity(arn) == deployer:
            yield ConfigProblem(
                f"{base}.adminPrincipalArns[{index}]",
                arn,
                "a principal other than the deployer (cluster.deployerPrincipalArn): EKS already "
                "gives the cluster's creator an access entry, and a second one for it fails "
                "with 409 ResourceInUseException (pulumi/pulumi-eks#2373)",
            )
    if not endpoint.public_access and not endpoint.deploy_from.cidrs:
        yield ConfigProblem(
            f"{base}.endpoint.deployFrom.cidrs",
            _MISSING,
            "the networks `pulumi up` runs from (a VPN, a peered network, or the VPC's CIDR for "
            "a runner inside it) when the endpoint is private only: without a way in, every "
            "Kubernetes resource of the stack times out (README, deploying a private cluster)",
        )
    group = cluster.system_node_group
    if not group.min_size <= group.desired_size <= group.max_size:
        yield ConfigProblem(
            f"{base}.systemNodeGroup.desiredSize",
            group.desired_size,
            f"between minSize ({group.min_size}) and maxSize ({group.max_size})",
        )
    if _duplicates(group.instance_types):
        yield ConfigProblem(
            f"{base}.systemNodeGroup.instanceTypes", group.instance_types, "each type once"
        )
    if len({cpu_architecture(t) for t in group.instance_types}) > 1:
        yield ConfigProblem(
            f"{base}.systemNodeGroup.instanceTypes",
            group.instance_types,
            "types of one CPU architecture (all x86_64 or all arm64): one AMI type serves them",
        )


_NOT_ROUTED_ON_THE_INTERNET: Final = tuple(
    ipaddress.IPv4Network(cidr)
    for cidr in ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
                 "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4")
)  # fmt: skip
"""Ranges no internet client comes from (RFC 6890): a public endpoint cannot admit them."""


def _not_internet_routable(network: ipaddress.IPv4Network) -> bool:
    return network.prefixlen > 0 and any(
        network.overlaps(reserved) for reserved in _NOT_ROUTED_ON_THE_INTERNET
    )


def principal_identity(arn: str) -> tuple[str, str, str]:
    """(account, kind, name) of an IAM principal ARN: a role is one role whatever its path.

    IAM role and user names are unique in an account regardless of path and of case
    (``Deployer`` and ``deployer`` cannot both exist), and an assumed-role session
    (``arn:aws:sts::<account>:assumed-role/<role>/<session>``) acts as its role.
    """
    parts = arn.split(":", 5)
    account, resource = parts[4], parts[5]
    kind, _, rest = resource.partition("/")
    if kind == "assumed-role":
        return account, "role", rest.split("/", 1)[0].lower()
    return account, kind, rest.rsplit("/", 1)[-1].lower()


def _tag_problems(tags: TagsConfig) -> Iterator[ConfigProblem]:
    for key in tags.extra:
        if key.lower().startswith("aws:"):
            yield ConfigProblem(
                f"{CONFIG_KEY}.tags.extra.{key}", key, "a key not starting with aws: (reserved)"
            )
        elif key in REQUIRED_TAG_KEYS:
            yield ConfigProblem(
                f"{CONFIG_KEY}.tags.extra.{key}",
                key,
                "a key other than " + ", ".join(REQUIRED_TAG_KEYS) + " (set those above)",
            )
        elif any(key == r or (r.endswith("/") and key.startswith(r)) for r in RESERVED_TAG_KEYS):
            yield ConfigProblem(
                f"{CONFIG_KEY}.tags.extra.{key}",
                key,
                "a key other than those Karpenter sets on nodes ("
                + ", ".join(RESERVED_TAG_KEYS)
                + "): it refuses them in an EC2NodeClass",
            )


def _node_pool_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    names = [pool.name for pool in config.node_pools]
    if _duplicates([*names, "general"]):
        yield ConfigProblem(
            f"{CONFIG_KEY}.nodePools",
            names,
            "unique pool names, none named 'general' (the CPU pool)",
        )
    for index, pool in enumerate(config.node_pools):
        yield from _pool_problems(config, pool, f"{CONFIG_KEY}.nodePools[{index}]")


def _pool_problems(
    config: PlatformConfig, pool: NodePoolConfig, base: str
) -> Iterator[ConfigProblem]:
    unknown = [t for t in pool.instance_types if t not in catalog.CATALOG]
    for name in unknown:
        position = pool.instance_types.index(name)
        yield ConfigProblem(
            f"{base}.instanceTypes[{position}]", name, "one of " + ", ".join(catalog.CATALOG)
        )
    if unknown:
        return
    if _duplicates(pool.instance_types):
        yield ConfigProblem(f"{base}.instanceTypes", pool.instance_types, "each type once")
    entries = [catalog.CATALOG[t] for t in pool.instance_types]
    if len({entry.accelerator for entry in entries}) > 1:
        yield ConfigProblem(
            f"{base}.instanceTypes",
            pool.instance_types,
            "types of one accelerator kind (NVIDIA or Neuron): one taint and plugin per pool",
        )
    if len({entry.accelerators for entry in entries}) > 1:
        yield ConfigProblem(
            f"{base}.instanceTypes",
            pool.instance_types,
            "types with the same number of accelerators per node (limits and job requests "
            "are per node)",
        )
    if pool.uses_efa:
        layouts = {entry.efa_interfaces for entry in entries}
        if len(layouts) > 1:
            yield ConfigProblem(
                f"{base}.instanceTypes",
                pool.instance_types,
                "types with the same EFA layout (one EC2NodeClass attaches one set of "
                f"interfaces); found {sorted(layouts)} EFA interfaces",
            )
        no_efa = [entry.name for entry in entries if not entry.supports_efa]
        if no_efa:
            yield ConfigProblem(
                f"{base}.efa", True, f"false: {', '.join(no_efa)} has no EFA interfaces"
            )
    if pool.hugepages and not pool.ami_alias.startswith("al2023@"):
        yield ConfigProblem(
            f"{base}.amiAlias",
            pool.ami_alias,
            "an al2023@ alias while the pool reserves huge pages (hugepagesGiB "
            f"{pool.hugepages}): its nodes reserve them through an AL2023 cloud-init script, "
            "which Karpenter cannot pass to Bottlerocket (whose user data is TOML); or "
            "hugepagesGiB: 0",
        )
    smallest = min(entry.memory_gib for entry in entries)
    if pool.hugepages * 2 > smallest:
        yield ConfigProblem(
            f"{base}.hugepagesGiB",
            pool.hugepages,
            f"at most half the memory of the pool's smallest type ({smallest // 2} GiB)",
        )
    zones = config.network.availability_zones
    if pool.zone is not None and pool.zone not in zones:
        yield ConfigProblem(
            f"{base}.zone", pool.zone, "one of the availability zones " + ", ".join(zones)
        )
    elif (
        pool.zone is not None
        and pool.zone != config.network.training_zone
        and (pool.uses_efa or pool.uses_placement_group)
    ):
        yield ConfigProblem(
            f"{base}.zone",
            pool.zone,
            f"the training zone {config.network.training_zone} (or nothing): EFA pools and "
            "placement groups live there, next to the file system",
        )
    for position, name in enumerate(pool.instance_types):
        if offerings.offered(name, pool.capacity_type, config.region) is False:
            yield ConfigProblem(
                f"{base}.capacityType",
                pool.capacity_type,
                f"a capacity type under which {name} is offered in {config.region}: Karpenter "
                "has no on-demand price for it there, so the pool would never get a node "
                f"(instanceTypes[{position}]); what exists: "
                + offerings.what_would_work(name, config.region),
            )
    reservations = bool(pool.capacity_reservation_ids or pool.capacity_reservation_tags)
    if pool.capacity_type == "reserved" and not reservations:
        yield ConfigProblem(
            f"{base}.capacityReservationIds",
            [],
            "at least one reservation id (or capacityReservationTags) for a reserved pool",
        )
    if pool.capacity_type != "reserved" and reservations:
        yield ConfigProblem(
            f"{base}.capacityType",
            pool.capacity_type,
            "reserved, since the pool names capacity reservations",
        )
    for key in pool.labels:
        domain = key.split("/", 1)[0] if "/" in key else ""
        if any(domain == d or domain.endswith("." + d) for d in RESTRICTED_LABEL_DOMAINS):
            yield ConfigProblem(
                f"{base}.labels.{key}",
                key,
                "a label outside the domains Karpenter reserves ("
                + ", ".join(RESTRICTED_LABEL_DOMAINS)
                + ")",
            )


def _storage_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    storage = config.storage
    base = f"{CONFIG_KEY}.storage"
    keys = [bucket.name for bucket in storage.buckets]
    if _duplicates(keys):
        yield ConfigProblem(f"{base}.buckets", keys, "unique bucket keys")
    names = [bucket_name(config, bucket) for bucket in storage.buckets]
    for index, name in enumerate(names):
        if len(name) > 63:
            yield ConfigProblem(
                f"{base}.buckets[{index}].bucketName",
                name,
                "at most 63 characters; the default name is too long, set bucketName",
            )
        elif (refusal := _s3_refuses(name)) is not None:
            yield ConfigProblem(f"{base}.buckets[{index}].bucketName", name, refusal)
    lustre = storage.lustre
    if lustre is None:
        return
    base = f"{base}.lustre"
    capacity = lustre.storage_capacity_gib
    if capacity not in LUSTRE_FIRST_STEPS_GIB and capacity % LUSTRE_STEP_GIB:
        yield ConfigProblem(
            f"{base}.storageCapacityGiB",
            capacity,
            f"1200, 2400, or a multiple of {LUSTRE_STEP_GIB} GiB",
        )
    if lustre.throughput_per_tib not in LUSTRE_THROUGHPUT_PER_TIB:
        yield ConfigProblem(
            f"{base}.throughputPerTiB",
            lustre.throughput_per_tib,
            "one of " + ", ".join(map(str, LUSTRE_THROUGHPUT_PER_TIB)) + " (MB/s per TiB)",
        )
    iops = lustre.metadata_iops
    if iops is not None and iops not in (1500, 3000, 6000) and (iops % 12000 or iops > 192000):
        yield ConfigProblem(
            f"{base}.metadataIops", iops, "1500, 3000, 6000, or 12000 to 192000 in steps of 12000"
        )
    elif iops is not None and iops < (floor := automatic_metadata_iops(capacity)):
        yield ConfigProblem(
            f"{base}.metadataIops",
            iops,
            f"at least {floor}, what AUTOMATIC mode gives {capacity} GiB (FSx refuses less), "
            "or leave it out for AUTOMATIC",
        )
    if lustre.associations and lustre.backup_retention_days:
        yield ConfigProblem(
            f"{base}.automaticBackupRetentionDays",
            lustre.backup_retention_days,
            "0 (or leave it out): FSx cannot back up a file system linked to S3 by data "
            "repository associations; S3, versioned, is the durable copy",
        )
    if lustre.bucket not in keys:
        yield ConfigProblem(
            f"{base}.bucket",
            lustre.bucket,
            "the key of a bucket in storage.buckets: " + ", ".join(keys),
        )
    training_zone = config.network.training_zone
    if lustre.zone is not None and lustre.zone != training_zone:
        yield ConfigProblem(
            f"{base}.zone",
            lustre.zone,
            f"the training zone {training_zone}: the file system sits beside the EFA pools",
        )
    associations = lustre.associations
    if len(associations) > MAX_DATA_REPOSITORY_ASSOCIATIONS:
        yield ConfigProblem(
            f"{base}.associations",
            len(associations),
            f"at most {MAX_DATA_REPOSITORY_ASSOCIATIONS} associations per file system",
        )
    paths = [a.file_system_path.rstrip("/") or "/" for a in associations]
    for index, path in enumerate(paths):
        for other in paths[:index]:
            if _overlaps(path, other):
                yield ConfigProblem(
                    f"{base}.associations[{index}].fileSystemPath",
                    associations[index].file_system_path,
                    f"a path that neither contains nor is inside {other} (no overlaps)",
                )
    prefixes = [a.s3_prefix for a in associations]
    for index, prefix in enumerate(prefixes):
        for other in prefixes[:index]:
            if prefix.startswith(other) or other.startswith(prefix):
                yield ConfigProblem(
                    f"{base}.associations[{index}].s3Prefix",
                    prefix,
                    f"a prefix that neither contains nor is inside {other!r}",
                )
    for index, association in enumerate(associations):
        for field_name, events in (
            ("importEvents", association.import_events),
            ("exportEvents", association.export_events),
        ):
            if _duplicates(list(events)):
                yield ConfigProblem(
                    f"{base}.associations[{index}].{field_name}", events, "each event once"
                )
    if _duplicates(lustre.namespaces):
        yield ConfigProblem(f"{base}.namespaces", lustre.namespaces, "each namespace once")


def pool_capacity(config: PlatformConfig) -> AcceleratorAmounts:
    """Most accelerators the node pools can provide at once (maxNodes x devices per node)."""
    totals = dict.fromkeys((catalog.GPU_RESOURCE, catalog.NEURON_RESOURCE), 0)
    for pool in config.node_pools:
        if all(t in catalog.CATALOG for t in pool.instance_types):
            totals[pool.instance.accelerator_resource] += (
                pool.max_nodes * pool.instance.accelerators
            )
    return AcceleratorAmounts(
        gpus=totals[catalog.GPU_RESOURCE], neuron_devices=totals[catalog.NEURON_RESOURCE]
    )


def slurm_held_nodes(config: PlatformConfig) -> dict[str, int]:
    """Pool name -> nodes its Slurm node set holds (enabled Slurm only; at most maxNodes)."""
    if not config.slurm.enabled:
        return {}
    held: dict[str, int] = {}
    for node_set in config.slurm.node_sets:
        pool = config.pool(node_set.pool)
        if pool is not None and node_set.replicas:
            # More replicas than nodes is its own error; do not let it spill into the teams'.
            held[pool.name] = min(node_set.replicas, pool.max_nodes)
    return held


def slurm_held(config: PlatformConfig) -> AcceleratorAmounts:
    """Accelerators that enabled Slurm node sets hold (replicas x devices per node)."""
    totals = dict.fromkeys((catalog.GPU_RESOURCE, catalog.NEURON_RESOURCE), 0)
    for name, nodes in slurm_held_nodes(config).items():
        pool = config.pool(name)
        if pool is not None and all(t in catalog.CATALOG for t in pool.instance_types):
            totals[pool.instance.accelerator_resource] += nodes * pool.instance.accelerators
    return AcceleratorAmounts(
        gpus=totals[catalog.GPU_RESOURCE], neuron_devices=totals[catalog.NEURON_RESOURCE]
    )


def _team_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    names = [team.name for team in config.teams]
    if _duplicates(names):
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


SHARED_ADDRESS_SPACE: Final = ipaddress.IPv4Network("100.64.0.0/10")
"""RFC 6598 space, which VPCs may use as CIDRs although it is not private in RFC 1918's sense."""


def _slurm_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    slurm = config.slurm
    base = f"{CONFIG_KEY}.slurm"
    if not slurm.enabled:
        return
    if not slurm.node_sets:
        yield ConfigProblem(f"{base}.nodeSets", [], "at least one node set when Slurm is enabled")
    if slurm.login is None:
        yield ConfigProblem(
            f"{base}.login", _MISSING, "a login set with sshAuthorizedKeys when Slurm is enabled"
        )
    if config.storage.lustre is None:
        yield ConfigProblem(
            f"{CONFIG_KEY}.storage.lustre",
            _MISSING,
            "a Lustre file system when Slurm is enabled: job scripts, inputs and outputs live "
            "on the file system every Slurm node and login pod mounts",
        )
    pools = [node_set.pool for node_set in slurm.node_sets]
    if _duplicates(pools):
        yield ConfigProblem(f"{base}.nodeSets", pools, "each pool in one node set")
    if slurm.default_partition in pools:
        yield ConfigProblem(
            f"{base}.defaultPartition",
            slurm.default_partition,
            "a name other than the node sets' own partitions (" + ", ".join(pools) + ")",
        )
    for index, cidr in enumerate(slurm.login.allowed_cidrs if slurm.login else []):
        network = ipaddress.IPv4Network(cidr, strict=False)
        private = network.is_private or network.subnet_of(SHARED_ADDRESS_SPACE)
        if network.prefixlen == 0 or not private:
            yield ConfigProblem(
                f"{base}.login.allowedCidrs[{index}]",
                cidr,
                "a private network (the VPC's, a VPN's or a peered one), never the internet: "
                "the login load balancer is internal, and only root's SSH keys stand between "
                "a source range and a root shell on every Slurm node",
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
        if node_set.replicas > pool.max_nodes:
            yield ConfigProblem(
                f"{here}.replicas",
                node_set.replicas,
                f"at most the pool's maxNodes ({pool.max_nodes}): each slurmd pod takes a node",
            )
        if node_set.image is None and all(t in catalog.CATALOG for t in pool.instance_types):
            key, image = slurm.images.for_accelerator(pool.instance.accelerator)
            if image is None:
                yield ConfigProblem(
                    f"{base}.images.{key}",
                    _MISSING,
                    f"a pinned slurmd image with the EFA libraries for pool {pool.name} "
                    "(images/slurmd/Dockerfile builds one), or nodeSets[].image",
                )


def _accelerator_pools(config: PlatformConfig) -> Iterator[tuple[int, NodePoolConfig]]:
    for index, pool in enumerate(config.node_pools):
        if all(t in catalog.CATALOG for t in pool.instance_types):
            yield index, pool


def _software_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Every image on an accelerator pool works with the drivers of the pool's AMI release."""
    releases: dict[str, software.AmiRelease] = {}
    for index, pool in _accelerator_pools(config):
        if pool.ami_alias in software.AMI_RELEASES:
            releases[pool.name] = software.AMI_RELEASES[pool.ami_alias]
        else:
            yield ConfigProblem(
                f"{CONFIG_KEY}.nodePools[{index}].amiAlias",
                pool.ami_alias,
                "a release whose drivers the bill of materials records, so its images can be "
                "checked against them: " + ", ".join(software.AMI_RELEASES)
                + " (components/software.py; add a release from the EKS AMI changelog)",
            )  # fmt: skip
    checks = _ImageChecks()
    images = config.trainer.images
    for _, pool in _accelerator_pools(config) if config.trainer.enabled else ():
        ami = releases.get(pool.name)
        if ami is None:
            continue
        accelerator = pool.instance.accelerator
        for key in RUNTIME_IMAGE_KEYS[accelerator].values():
            checks.check(
                f"{CONFIG_KEY}.trainer.images.{key}", getattr(images, key), pool,
                recipe=software.TRAINER_RECIPES[accelerator], variant=key, ami=ami,
            )  # fmt: skip
    slurm = config.slurm
    pools = {pool.name: pool for _, pool in _accelerator_pools(config)}
    for index, node_set in enumerate(slurm.node_sets if slurm.enabled else []):
        slurm_pool, ami = pools.get(node_set.pool), releases.get(node_set.pool)
        if slurm_pool is None or ami is None:
            continue
        accelerator = slurm_pool.instance.accelerator
        key, reference = slurm.images.for_accelerator(accelerator)
        where = f"{CONFIG_KEY}.slurm.images.{key}"
        if node_set.image is not None:
            where, reference = f"{CONFIG_KEY}.slurm.nodeSets[{index}].image", node_set.image
        if reference is not None:  # a missing slurmd image is reported by the Slurm rules
            checks.check(
                where, reference, slurm_pool, recipe="slurmd", variant=accelerator, ami=ami
            )
    yield from checks.problems()


class _ImageChecks:
    """Problems of the images at each key, gathered over the pools they run on: one per key."""

    def __init__(self) -> None:
        self._found: dict[str, tuple[Any, list[str]]] = {}

    def check(
        self,
        where: str,
        reference: str | None,
        pool: NodePoolConfig,
        *,
        recipe: str,
        variant: str,
        ami: software.AmiRelease,
    ) -> None:
        """Record what is wrong with ``reference`` (at config key ``where``) on ``pool``."""
        reasons = self._found.setdefault(where, (_MISSING if reference is None else reference, []))[
            1
        ]
        built = f"images/{recipe} tagged :{software.built_tag(recipe, variant)}"
        if reference is None:
            reason = (
                f"the image {built} (pin it as <repo>:<tag>@<digest>): no published PyTorch "
                "training image has a Neuron runtime that starts on the AMI's Neuron driver "
                f"{ami.neuron_driver} (pool {pool.name})"
            )
        else:
            record = software.identify(reference, recipe, variant)
            if record is None:
                reason = (
                    f"an image whose contents the bill of materials knows, for pool {pool.name}: "
                    f"a build of {built} (pin it as <repo>:<tag>@<digest>), a default image, or "
                    "one you record in components/software.py KNOWN_IMAGES"
                )
            else:
                problems = software.image_problems(
                    record, pool.instance, efa=pool.uses_efa, ami=ami
                )
                reason = (
                    f"an image that works on pool {pool.name} ({built}): " + "; ".join(problems)
                    if problems
                    else ""
                )
        if reason and reason not in reasons:
            reasons.append(reason)

    def problems(self) -> Iterator[ConfigProblem]:
        """One problem per key whose image fails on some pool."""
        for where, (value, reasons) in self._found.items():
            if reasons:
                yield ConfigProblem(where, value, "; and ".join(reasons))


def _overlaps(path: str, other: str) -> bool:
    def inside(inner: str, outer: str) -> bool:
        return outer in ("/", inner) or inner.startswith(outer + "/")

    return inside(path, other) or inside(other, path)


S3_RESERVED_PREFIXES: Final = ("xn--", "sthree-", "amzn-s3-demo-")
S3_RESERVED_SUFFIXES: Final = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def _s3_refuses(name: str) -> str | None:
    """Why S3 refuses a bucket name the basic pattern allows, or None.

    S3 user guide, "General purpose bucket naming rules".
    """
    rules = "an S3 bucket name S3 accepts"
    if ".." in name:
        return f"{rules}: no two adjacent periods"
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        pass
    else:
        return f"{rules}: not shaped like an IP address"
    if name.startswith(S3_RESERVED_PREFIXES):
        return f"{rules}: none of the reserved prefixes " + ", ".join(S3_RESERVED_PREFIXES)
    if name.endswith(S3_RESERVED_SUFFIXES):
        return f"{rules}: none of the reserved suffixes " + ", ".join(S3_RESERVED_SUFFIXES)
    return None


def bucket_name(config: PlatformConfig, bucket: BucketConfig) -> str:
    """The S3 name of a bucket: its configured name, or <cluster>-<key>-<account>."""
    return bucket.bucket_name or f"{config.name}-{bucket.name}-{config.account_id}"


def _duplicates(items: list[str]) -> set[str]:
    return {item for item, count in Counter(items).items() if count > 1}
