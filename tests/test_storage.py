"""Shared storage under mocks: hardened buckets, FSx for Lustre, associations, CSI, claims, taints.

Expected values come from the stack files (``stacks/Pulumi.<stack>.yaml``) and, where a stack
leaves a setting out, from the documented default of that setting (components/config/ field
descriptions), never from synthesis output. Lustre facts come from the FSx for Lustre User Guide
(https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pytest

from components import versions
from components.acceptance_gate import NAMESPACE as ACCEPTANCE_NAMESPACE
from components.config import (
    BucketConfig,
    DataRepositoryAssociationConfig,
    LustreConfig,
    PlatformConfig,
    bucket_name,
    parse_platform_config,
)
from components.metric_names import MONITORING_NAMESPACE
from components.node_pools import LUSTRE_CLIENT_LABEL, ZONE
from components.platform import gated, lustre_pools
from components.storage import (
    LOG_DELIVERY_SERVICE,
    access_log_bucket_policy,
    association_s3_config,
    data_key_policy,
    data_key_principals,
    data_repository_path,
    lustre_egress,
    lustre_ingress,
    lustre_node_affinity,
    persistent_volume_claim_spec,
    persistent_volume_name,
    persistent_volume_spec,
    tls_only_bucket_policy,
)
from components.storage.capacity import with_release_schedules
from components.storage.model_store import TEAM_CLAIM as MODEL_STORE_CLAIM
from synth.engine import UNKNOWN, ResourceRecord
from synth.run import StackResult
from tests import component_runs as parts
from tests.config_problems import assert_reported, problems_of
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data
from tests.kubernetes_semantics import quantity
from tests.mutations import without_lustre, without_notebooks, without_slurm, without_teams
from tests.schemas import validation_errors

STORAGE = "trainingplatform:index:Storage"
BUCKET = "aws:s3/bucket:Bucket"
VERSIONING = "aws:s3/bucketVersioning:BucketVersioning"
ENCRYPTION = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
)
PUBLIC_ACCESS = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
LIFECYCLE = "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration"
OWNERSHIP = "aws:s3/bucketOwnershipControls:BucketOwnershipControls"
ACCESS_LOGS: Final = "storage-access-logs"
LOGGING: Final = "aws:s3/bucketLogging:BucketLogging"
BUCKET_PARTS: Final = (VERSIONING, ENCRYPTION, PUBLIC_ACCESS, BUCKET_POLICY, LIFECYCLE, OWNERSHIP)
KEY = "aws:kms/key:Key"
ALIAS = "aws:kms/alias:Alias"
FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"
ASSOCIATION = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SUBNET = "aws:ec2/subnet:Subnet"
VPC = "aws:ec2/vpc:Vpc"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
ADDON = "aws:eks/addon:Addon"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
VOLUME = "kubernetes:core/v1:PersistentVolume"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"

# The Lustre ports (https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html)
# and the FSx CSI driver (charts/SOURCES.md), written out here on purpose:
# importing the program's constants would let a wrong value in the program pass.
LUSTRE_PORTS: Final = frozenset({988, *range(1018, 1024)})
CSI_DRIVER: Final = "fsx.csi.aws.com"
CSI_ADDON: Final = "aws-fsx-csi-driver"
CSI_SERVICE_ACCOUNT: Final = "fsx-csi-controller-sa"
STARTUP_TAINT: Final = {"key": "fsx.csi.aws.com/agent-not-ready", "effect": "NoExecute"}
CLAIM_NAME: Final = "shared-lustre"
ALL_EVENTS: Final = ["NEW", "CHANGED", "DELETED"]

# Documented defaults (config field descriptions) for settings a stack may leave out.
DEFAULT_NONCURRENT_DAYS: Final = 30
DEFAULT_THROUGHPUT: Final = 250
DEFAULT_COMPRESSION: Final = "LZ4"
DEFAULT_BACKUP_DAYS: Final = 7
DEFAULT_LOG_LEVEL: Final = "WARN_ERROR"
DEFAULT_LOG_RETENTION: Final = 90
DEFAULT_MOUNT_OPTIONS: Final = ["relatime", "flock"]


# --------------------------------------------------------------------------- stack cases


class StackCase:
    """One synthesized stack with its raw (YAML) and parsed config."""

    def __init__(self, stack: str, run: ProgramRun) -> None:
        self.stack = stack
        self.run = run
        self.raw = stack_data(stack)
        self.config: PlatformConfig = parse_platform_config(self.raw)

    @property
    def cluster(self) -> str:
        return str(self.raw.get("clusterName") or f"training-{self.raw['environment']}")

    @property
    def buckets(self) -> list[dict[str, Any]]:
        buckets: list[dict[str, Any]] = self.raw.get("storage", {}).get("buckets", [])
        return buckets

    @property
    def lustre(self) -> dict[str, Any]:
        lustre: dict[str, Any] | None = self.raw.get("storage", {}).get("lustre")
        assert lustre is not None, f"{self.stack} has no file system"
        return lustre

    def raw_bucket(self, key: str) -> dict[str, Any]:
        (bucket,) = [b for b in self.buckets if b["name"] == key]
        return bucket

    @property
    def expected_access_log_bucket_name(self) -> str:
        """<cluster>-access-logs-<accountId> (config docs; the stack files set no override)."""
        return f"{self.cluster}-access-logs-{self.raw['accountId']}"

    def expected_bucket_name(self, key: str) -> str:
        """Configured bucketName, else <cluster>-<key>-<accountId> (config docs)."""
        raw = self.raw_bucket(key)
        return str(raw.get("bucketName") or f"{self.cluster}-{key}-{self.raw['accountId']}")


def _raw_stack_storage(stack: str) -> dict[str, Any]:
    storage: dict[str, Any] = stack_data(stack).get("storage", {})
    return storage


BUCKET_CASES = [
    (stack, bucket["name"])
    for stack in STACKS
    for bucket in _raw_stack_storage(stack).get("buckets", [])
]
LUSTRE_STACKS = [stack for stack in STACKS if _raw_stack_storage(stack).get("lustre")]


def expected_claims(raw_platform: dict[str, Any], namespace: str) -> list[tuple[str, str, str]]:
    """(claim, volume's name stem, directory under the mount name) of each claim a namespace
    gets: a team one per team root on its own directory, any other namespace the whole file
    system."""
    teams = [t["name"] for t in raw_platform.get("teams", []) if t.get("sharedFileSystem", True)]
    if namespace not in teams:
        return [(CLAIM_NAME, f"{CLAIM_NAME}-{namespace}", "")]
    lustre = parse_platform_config(raw_platform).storage.lustre
    assert lustre is not None
    return [
        (root.claim_name, f"{root.claim_name}-{namespace}", f"{root.path}/{namespace}")
        for root in lustre.team_roots
    ]


def _lustre_claims(run: Any) -> list[Any]:
    """The claims of Lustre volumes: bound to a volume by name (the stack's other claims, such
    as a database's on an EBS class, are provisioned by their class)."""
    return [
        c
        for c in run.of_type(CLAIM)
        if (c.inputs.get("spec") or {}).get("volumeName")
        and not c.inputs["metadata"]["name"].startswith(MODEL_STORE_CLAIM)
    ]


def _lustre_volumes(run: ProgramRun) -> list[ResourceRecord]:
    """The Lustre PVs (the EFS model store's are tests/test_model_store.py's)."""
    return [
        v
        for v in run.of_type(VOLUME)
        if (v.inputs.get("spec") or {}).get("csi", {}).get("driver") == CSI_DRIVER
    ]


def mounting_namespaces(raw_platform: dict[str, Any]) -> list[str]:
    """Namespaces that get a claim: storage.lustre.namespaces, teams with the file system, and
    Slurm's namespace when Slurm is on."""
    listed = (raw_platform.get("storage", {}).get("lustre") or {}).get("namespaces", [])
    teams = [t["name"] for t in raw_platform.get("teams", []) if t.get("sharedFileSystem", True)]
    slurm = ["slurm"] if raw_platform.get("slurm", {}).get("enabled") else []
    return [*listed, *teams, *slurm]


def claiming_namespaces(raw_platform: dict[str, Any]) -> list[str]:
    """:func:`mounting_namespaces` and the acceptance gate's, whose check pods prove a node of
    a pool that mounts the file system can (components/acceptance_gate.py)."""
    config = parse_platform_config(raw_platform)
    gate = [ACCEPTANCE_NAMESPACE] if gated(config) and lustre_pools(config) else []
    return [*mounting_namespaces(raw_platform), *gate]


NAMESPACE_CASES = [
    (stack, namespace)
    for stack in LUSTRE_STACKS
    for namespace in mounting_namespaces(stack_data(stack))
]


@pytest.fixture(scope="module")
def cases(synthesized: dict[str, StackResult]) -> dict[str, StackCase]:
    return {stack: StackCase(stack, ProgramRun(synthesized[stack].records)) for stack in STACKS}


@pytest.fixture(params=LUSTRE_STACKS)
def lustre_case(request: pytest.FixtureRequest, cases: dict[str, StackCase]) -> StackCase:
    return cases[request.param]


# --------------------------------------------------------------------------- helpers


def _named(run: ProgramRun, resource_type: str, name: str) -> ResourceRecord:
    found = [r for r in run.of_type(resource_type) if r.name == name]
    assert len(found) == 1, f"expected one {resource_type} named {name}: {found}"
    return found[0]


def _storage_children(run: ProgramRun, resource_type: str) -> list[ResourceRecord]:
    component = run.one(STORAGE).urn
    return [r for r in run.of_type(resource_type) if r.parent == component]


def _bucket(case: StackCase, key: str) -> ResourceRecord:
    expected = case.expected_bucket_name(key)
    found = [b for b in case.run.of_type(BUCKET) if b.inputs.get("bucket") == expected]
    assert len(found) == 1, f"expected one bucket {expected}: {found}"
    return found[0]


def _part(run: ProgramRun, resource_type: str, bucket: ResourceRecord) -> ResourceRecord:
    """The one resource of a type whose ``bucket`` input comes from ``bucket``."""
    found = [
        r
        for r in run.of_type(resource_type)
        if r.property_dependencies.get("bucket") == [bucket.urn]
    ]
    assert len(found) == 1, f"expected one {resource_type} of {bucket.name}: {found}"
    return found[0]


def _data_key(run: ProgramRun) -> ResourceRecord:
    return _named(run, KEY, "storage-data")


def _file_system(run: ProgramRun) -> ResourceRecord:
    (file_system,) = run.of_type(FILE_SYSTEM)
    return file_system


def _servers_group(run: ProgramRun) -> ResourceRecord:
    return _named(run, SECURITY_GROUP, "storage-lustre")


def _clients_group(run: ProgramRun) -> ResourceRecord:
    return _named(run, SECURITY_GROUP, "storage-lustre-clients")


def _client_group_id(run: ProgramRun) -> str:
    """The id of the client group, as the file system's group receives it.

    The ingress of the file system's group is built from the client group's output only (its
    property dependency says so), so the one group id in it is the client group's.
    """
    servers = _servers_group(run)
    assert servers.property_dependencies.get("ingress") == [_clients_group(run).urn]
    ids = {
        group_id
        for rule in servers.inputs["ingress"]
        for group_id in rule.get("securityGroups", [])
    }
    assert len(ids) == 1, ids
    group_id = ids.pop()
    assert isinstance(group_id, str) and group_id.startswith("sg-"), group_id
    return group_id


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair in a nested structure of dicts and lists."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _ports(rule: dict[str, Any]) -> set[int]:
    """Every TCP port an ingress rule admits; any other protocol fails (it admits more)."""
    assert rule["protocol"] in ("tcp", "6"), f"not TCP only: {rule}"
    low, high = int(rule["fromPort"]), int(rule["toPort"])
    assert 0 <= low <= high <= 65535, rule
    return set(range(low, high + 1))


def _manifest(record: ResourceRecord) -> dict[str, Any]:
    inputs = record.inputs
    return {key: inputs[key] for key in ("apiVersion", "kind", "metadata", "spec")}


def _association(run: ProgramRun, file_system_path: str) -> ResourceRecord:
    """The one data repository association at ``file_system_path``."""
    found = [
        a for a in run.of_type(ASSOCIATION) if a.inputs.get("fileSystemPath") == file_system_path
    ]
    assert len(found) == 1, f"expected one association at {file_system_path}: {found}"
    return found[0]


def _role_of_association(run: ProgramRun, addon: ResourceRecord) -> ResourceRecord:
    roles = {r.urn: r for r in run.of_type(ROLE)}
    urns = [u for u in addon.property_dependencies.get("podIdentityAssociations", []) if u in roles]
    assert len(urns) == 1, urns
    return roles[urns[0]]


def _csi_addons(run: ProgramRun) -> list[ResourceRecord]:
    return [a for a in run.of_type(ADDON) if a.inputs.get("addonName") == CSI_ADDON]


# --------------------------------------------------------------------------- buckets


def test_every_stack_file_configures_storage() -> None:
    # The parametrized cases below would silently shrink if the stack files lost their storage.
    assert set(LUSTRE_STACKS) == set(STACKS)
    assert {stack for stack, _ in BUCKET_CASES} == set(STACKS)
    assert {stack for stack, _ in NAMESPACE_CASES} == set(STACKS)


@pytest.mark.parametrize("stack", STACKS)
def test_one_of_each_bucket_resource_per_configured_bucket(
    cases: dict[str, StackCase], stack: str
) -> None:
    case = cases[stack]
    names = [case.expected_bucket_name(b["name"]) for b in case.buckets]
    expected = sorted([*names, case.expected_access_log_bucket_name])
    assert sorted(b.inputs["bucket"] for b in case.run.of_type(BUCKET)) == expected
    for resource_type in BUCKET_PARTS:
        assert len(case.run.of_type(resource_type)) == len(expected), resource_type
    component = case.run.one(STORAGE).urn
    for raw in case.buckets:
        bucket = _bucket(case, raw["name"])
        assert bucket.parent == component
        for resource_type in BUCKET_PARTS:
            part = _part(case.run, resource_type, bucket)
            assert part.parent == component
            assert bucket.urn in part.dependencies


@pytest.mark.parametrize(("stack", "key"), BUCKET_CASES)
def test_bucket_name_and_no_force_destroy(
    cases: dict[str, StackCase], stack: str, key: str
) -> None:
    case = cases[stack]
    bucket = _bucket(case, key)
    assert bucket.name == f"storage-{key}"
    assert bucket.inputs["forceDestroy"] is False
    assert len(bucket.inputs["bucket"]) <= 63


@pytest.mark.parametrize(("stack", "key"), BUCKET_CASES)
def test_bucket_versioning_enabled(cases: dict[str, StackCase], stack: str, key: str) -> None:
    case = cases[stack]
    versioning = _part(case.run, VERSIONING, _bucket(case, key))
    assert versioning.inputs["versioningConfiguration"]["status"] == "Enabled"


@pytest.mark.parametrize(("stack", "key"), BUCKET_CASES)
def test_bucket_encrypted_with_the_rotating_storage_key(
    cases: dict[str, StackCase], stack: str, key: str
) -> None:
    case = cases[stack]
    data_key = _data_key(case.run)
    assert data_key.inputs["enableKeyRotation"] is True
    encryption = _part(case.run, ENCRYPTION, _bucket(case, key))
    (rule,) = encryption.inputs["rules"]
    default = rule["applyServerSideEncryptionByDefault"]
    assert default["sseAlgorithm"] == "aws:kms"
    account, region = case.raw["accountId"], case.raw["region"]
    assert default["kmsMasterKeyId"].startswith(f"arn:aws:kms:{region}:{account}:key/")
    # the key ARN came from the storage data key and from nothing else
    assert encryption.property_dependencies.get("rules") == [data_key.urn]
    assert data_key.urn in encryption.dependencies


@pytest.mark.parametrize(("stack", "key"), BUCKET_CASES)
def test_bucket_public_access_blocked(cases: dict[str, StackCase], stack: str, key: str) -> None:
    case = cases[stack]
    block = _part(case.run, PUBLIC_ACCESS, _bucket(case, key)).inputs
    for flag in (
        "blockPublicAcls",
        "blockPublicPolicy",
        "ignorePublicAcls",
        "restrictPublicBuckets",
    ):
        assert block[flag] is True, flag


@pytest.mark.parametrize(("stack", "key"), BUCKET_CASES)
def test_bucket_ownership_enforced(cases: dict[str, StackCase], stack: str, key: str) -> None:
    case = cases[stack]
    ownership = _part(case.run, OWNERSHIP, _bucket(case, key)).inputs
    assert ownership["rule"]["objectOwnership"] == "BucketOwnerEnforced"


@pytest.mark.parametrize(("stack", "key"), BUCKET_CASES)
def test_bucket_policy_denies_requests_without_tls(
    cases: dict[str, StackCase], stack: str, key: str
) -> None:
    case = cases[stack]
    bucket = _bucket(case, key)
    policy_record = _part(case.run, BUCKET_POLICY, bucket)
    policy = json.loads(policy_record.inputs["policy"])
    arn = f"arn:aws:s3:::{case.expected_bucket_name(key)}"
    denials = [s for s in policy["Statement"] if s["Effect"] == "Deny"]
    assert len(denials) == 1, policy
    (deny,) = denials
    assert deny["Principal"] == "*"
    assert deny["Action"] in ("s3:*", ["s3:*"])
    assert sorted(deny["Resource"]) == sorted([arn, f"{arn}/*"])
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert not [s for s in policy["Statement"] if s["Effect"] == "Allow"], policy
    # the ARN in the policy is the bucket's own
    assert policy_record.property_dependencies.get("policy") == [bucket.urn]
    # written after public access is blocked, so the policy is never briefly public-able
    public = _part(case.run, PUBLIC_ACCESS, bucket)
    assert public.urn in policy_record.dependencies


@pytest.mark.parametrize(("stack", "key"), BUCKET_CASES)
def test_bucket_lifecycle_rules(cases: dict[str, StackCase], stack: str, key: str) -> None:
    case = cases[stack]
    bucket = _bucket(case, key)
    lifecycle = _part(case.run, LIFECYCLE, bucket)
    rules = lifecycle.inputs["rules"]
    for rule in rules:
        assert rule["status"] == "Enabled", rule
        assert rule.get("filter") == {}, f"a rule must cover the whole bucket: {rule}"
    aborts = [r for r in rules if "abortIncompleteMultipartUpload" in r]
    assert len(aborts) == 1, rules
    assert aborts[0]["abortIncompleteMultipartUpload"]["daysAfterInitiation"] >= 1
    expirations = [r for r in rules if "noncurrentVersionExpiration" in r]
    assert len(expirations) == 1, rules
    days = case.raw_bucket(key).get("noncurrentVersionRetentionDays", DEFAULT_NONCURRENT_DAYS)
    assert expirations[0]["noncurrentVersionExpiration"]["noncurrentDays"] == days
    # nothing expires current versions
    assert not [r for r in rules if "expiration" in r], rules
    # noncurrent versions exist only once versioning is on
    assert _part(case.run, VERSIONING, bucket).urn in lifecycle.dependencies


def _access_log_bucket(case: StackCase) -> ResourceRecord:
    return _named(case.run, BUCKET, ACCESS_LOGS)


@pytest.mark.parametrize(("stack", "key"), BUCKET_CASES)
def test_every_data_bucket_logs_its_requests_into_the_stacks_log_bucket(
    cases: dict[str, StackCase], stack: str, key: str
) -> None:
    case = cases[stack]
    logging = _part(case.run, LOGGING, _bucket(case, key))
    log_bucket = _access_log_bucket(case)
    assert logging.property_dependencies["targetBucket"] == [log_bucket.urn]
    assert logging.inputs["targetPrefix"] == f"{key}/"
    assert logging.inputs["targetObjectKeyFormat"] == {
        "partitionedPrefix": {"partitionDateSource": "EventTime"}
    }
    # delivery is authorized before logging is turned on
    assert _part(case.run, BUCKET_POLICY, log_bucket).urn in logging.dependencies


@pytest.mark.parametrize("stack", STACKS)
def test_the_log_bucket_takes_only_this_stacks_log_delivery_and_logs_nothing(
    cases: dict[str, StackCase], stack: str
) -> None:
    case = cases[stack]
    log_bucket = _access_log_bucket(case)
    assert log_bucket.inputs["bucket"] == case.expected_access_log_bucket_name
    (rule,) = _part(case.run, ENCRYPTION, log_bucket).inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "AES256"}
    assert not [
        r
        for r in case.run.of_type(LOGGING)
        if r.property_dependencies["bucket"] == [log_bucket.urn]
    ]
    policy = json.loads(_part(case.run, BUCKET_POLICY, log_bucket).inputs["policy"])
    (delivery,) = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    assert delivery["Principal"] == {"Service": LOG_DELIVERY_SERVICE}
    assert delivery["Condition"]["ArnLike"]["aws:SourceArn"] == sorted(
        f"arn:aws:s3:::{case.expected_bucket_name(b['name'])}" for b in case.buckets
    )
    assert delivery["Condition"]["StringEquals"]["aws:SourceAccount"] == case.raw["accountId"]
    rules = _part(case.run, LIFECYCLE, log_bucket).inputs["rules"]
    assert {"days": 365} in [r.get("expiration") for r in rules]
    assert any(r.get("abortIncompleteMultipartUpload") for r in rules)


def test_access_logs_name_and_retention_are_configurable(
    run_component: RunComponent,
) -> None:
    data = stack_data("dev")
    data["storage"]["accessLogs"] = {"bucketName": "acme-ml-access-logs", "retentionDays": 90}
    run = run_component(parts.storage, data, "dev")
    log_bucket = _named(run, BUCKET, ACCESS_LOGS)
    assert log_bucket.inputs["bucket"] == "acme-ml-access-logs"
    rules = _part(run, LIFECYCLE, log_bucket).inputs["rules"]
    assert {"days": 90} in [r.get("expiration") for r in rules]


def test_a_log_bucket_name_s3_refuses_or_a_data_bucket_has_is_reported() -> None:
    data = stack_data("dev")
    data["storage"]["accessLogs"] = {"bucketName": "xn--logs"}
    assert_reported(data, "platform.storage.accessLogs.bucketName", "xn--logs", "reserved prefixes")
    data = stack_data("dev")
    data["storage"]["accessLogs"] = {"bucketName": "same-name"}
    data["storage"]["buckets"][0]["bucketName"] = "same-name"
    assert [p.path for p in problems_of(data)] == ["platform.storage.buckets"]


def test_access_log_bucket_policy() -> None:
    policy = access_log_bucket_policy(
        "arn:aws:s3:::logs", ["arn:aws:s3:::b", "arn:aws:s3:::a"], "111122223333"
    )
    deny, allow = policy["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"]["Bool"]["aws:SecureTransport"] == "false"
    assert allow["Resource"] == "arn:aws:s3:::logs/*" and allow["Action"] == "s3:PutObject"
    assert allow["Condition"]["ArnLike"]["aws:SourceArn"] == ["arn:aws:s3:::a", "arn:aws:s3:::b"]


def test_noncurrent_retention_default_and_override(cases: dict[str, StackCase]) -> None:
    dev, prod = cases["dev"], cases["prod"]
    assert "noncurrentVersionRetentionDays" not in dev.raw_bucket("data")
    dev_rules = _part(dev.run, LIFECYCLE, _bucket(dev, "data")).inputs["rules"]
    assert {"noncurrentDays": 30} in [r.get("noncurrentVersionExpiration") for r in dev_rules]
    for key in ("datasets", "checkpoints"):
        days = prod.raw_bucket(key)["noncurrentVersionRetentionDays"]
        assert days != 30
        rules = _part(prod.run, LIFECYCLE, _bucket(prod, key)).inputs["rules"]
        assert {"noncurrentDays": days} in [r.get("noncurrentVersionExpiration") for r in rules]


@pytest.mark.parametrize("stack", STACKS)
def test_data_key_and_its_alias(cases: dict[str, StackCase], stack: str) -> None:
    case = cases[stack]
    data_key = _data_key(case.run)
    assert data_key.inputs["enableKeyRotation"] is True
    policy = json.loads(data_key.inputs["policy"])
    # the data key's own statements, and Scheduler's where the stack has release schedules
    # (tests/test_data_path.py proves those)
    assert policy == with_release_schedules(
        data_key_policy(
            case.raw["accountId"],
            case.raw["region"],
            data_key_principals(case.config),
            efs=case.config.model_store.enabled,
        ),
        case.config,
        case.config.storage.lustre,
    )
    aliases = [
        a
        for a in case.run.of_type(ALIAS)
        if a.property_dependencies.get("targetKeyId") == [data_key.urn]
    ]
    assert [a.inputs["name"] for a in aliases] == [f"alias/{case.cluster}-data"]


@pytest.mark.parametrize("stack", STACKS)
def test_stateful_storage_protected_exactly_where_the_stack_says(
    cases: dict[str, StackCase], stack: str
) -> None:
    case = cases[stack]
    protect = bool(case.raw.get("protectStatefulResources", False))
    stateful = [
        *case.run.of_type(BUCKET),
        _data_key(case.run),
        *case.run.of_type(FILE_SYSTEM),
        *case.run.of_type(ASSOCIATION),
    ]
    assert stateful
    for record in stateful:
        assert record.protect is protect, record.name


def test_only_prod_protects_storage(cases: dict[str, StackCase]) -> None:
    for stack, expected in (("prod", True), ("dev", False), ("staging", False)):
        run = cases[stack].run
        assert all(b.protect is expected for b in run.of_type(BUCKET)), stack
        assert _data_key(run).protect is expected, stack
        assert _file_system(run).protect is expected, stack
        associations = run.of_type(ASSOCIATION)
        assert associations, stack
        assert all(a.protect is expected for a in associations), stack


def test_configured_bucket_name_is_used_everywhere(
    run_component: RunComponent,
) -> None:
    data = stack_data("dev")
    data["storage"]["buckets"][0]["bucketName"] = "acme-ml-training-data"
    run = run_component(parts.storage, data, "dev")
    (bucket,) = [b for b in run.of_type(BUCKET) if b.name != ACCESS_LOGS]
    assert bucket.inputs["bucket"] == "acme-ml-training-data"
    policy = json.loads(_part(run, BUCKET_POLICY, bucket).inputs["policy"])
    assert policy["Statement"][0]["Resource"] == [
        "arn:aws:s3:::acme-ml-training-data",
        "arn:aws:s3:::acme-ml-training-data/*",
    ]
    paths = sorted(a.inputs["dataRepositoryPath"] for a in run.of_type(ASSOCIATION))
    assert paths == [
        "s3://acme-ml-training-data/checkpoints/",
        "s3://acme-ml-training-data/datasets/",
    ]


# --------------------------------------------------------------------------- file system


def test_file_system_settings(lustre_case: StackCase) -> None:
    lustre = lustre_case.lustre
    inputs = _file_system(lustre_case.run).inputs
    assert inputs["deploymentType"] == "PERSISTENT_2"
    assert inputs["storageType"] == "SSD"
    assert inputs["storageCapacity"] == lustre["storageCapacityGiB"]
    assert inputs["perUnitStorageThroughput"] == lustre.get("throughputPerTiB", DEFAULT_THROUGHPUT)
    assert inputs["fileSystemTypeVersion"] == "2.15"
    assert inputs["dataCompressionType"] == lustre.get("dataCompression", DEFAULT_COMPRESSION)
    assert inputs["efaEnabled"] is bool(lustre.get("efaEnabled", False))
    # FSx cannot back up a file system linked to S3: the default is 0 with associations
    default_backups = 0 if lustre.get("associations") else DEFAULT_BACKUP_DAYS
    assert inputs["automaticBackupRetentionDays"] == lustre.get(
        "automaticBackupRetentionDays", default_backups
    )
    # PERSISTENT_2 links S3 through associations, never through the PERSISTENT_1 fields
    for persistent_1_only in ("importPath", "exportPath", "autoImportPolicy"):
        assert persistent_1_only not in inputs


def test_metadata_configuration(lustre_case: StackCase) -> None:
    lustre = lustre_case.lustre
    metadata = _file_system(lustre_case.run).inputs["metadataConfiguration"]
    if lustre.get("metadataIops"):
        assert metadata == {"mode": "USER_PROVISIONED", "iops": lustre["metadataIops"]}
    else:
        assert metadata == {"mode": "AUTOMATIC"}


def test_prod_provisions_metadata_iops_and_dev_does_not(cases: dict[str, StackCase]) -> None:
    prod = _file_system(cases["prod"].run).inputs["metadataConfiguration"]
    assert prod == {"mode": "USER_PROVISIONED", "iops": cases["prod"].lustre["metadataIops"]}
    assert _file_system(cases["dev"].run).inputs["metadataConfiguration"] == {"mode": "AUTOMATIC"}


def test_file_system_encrypted_with_the_data_key(lustre_case: StackCase) -> None:
    run = lustre_case.run
    file_system = _file_system(run)
    data_key = _data_key(run)
    assert file_system.property_dependencies.get("kmsKeyId") == [data_key.urn]
    # the same key as the buckets behind it
    for encryption in run.of_type(ENCRYPTION):
        if encryption.name == ACCESS_LOGS:
            continue  # SSE-S3, as log delivery needs (test_access_log_bucket_*)
        (rule,) = encryption.inputs["rules"]
        key_arn = rule["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"]
        assert file_system.inputs["kmsKeyId"] == key_arn


def test_file_system_in_the_training_zone_private_subnet(lustre_case: StackCase) -> None:
    run = lustre_case.run
    zone = lustre_case.raw["network"]["trainingZone"]
    subnet = _named(run, SUBNET, f"network-private-{zone}")
    assert subnet.inputs["availabilityZone"] == zone
    file_system = _file_system(run)
    # the subnet, through the reservation of the admin client's address (components/network.py)
    carried = file_system.property_dependencies.get("subnetIds") or []
    assert subnet.urn in carried
    assert all(urn == subnet.urn or "SubnetCidrReservation" in urn for urn in carried), carried
    # pulumi-aws 7.x: one subnet id string, not a list:
    # https://github.com/pulumi/pulumi-aws/blob/v7.51.1/sdk/python/pulumi_aws/fsx/lustre_file_system.py
    subnet_id = file_system.inputs["subnetIds"]
    assert isinstance(subnet_id, str) and subnet_id.startswith("subnet-"), subnet_id


def test_file_system_logs_to_its_log_group(lustre_case: StackCase) -> None:
    run = lustre_case.run
    lustre = lustre_case.lustre
    log_group = _named(run, LOG_GROUP, "storage-lustre")
    name = log_group.inputs["name"]
    assert name.startswith("/aws/fsx/"), "FSx only writes to log groups under /aws/fsx/"
    assert log_group.inputs["retentionInDays"] == lustre.get(
        "logRetentionDays", DEFAULT_LOG_RETENTION
    )
    file_system = _file_system(run)
    logging = file_system.inputs["logConfiguration"]
    assert logging["level"] == lustre.get("logLevel", DEFAULT_LOG_LEVEL)
    assert file_system.property_dependencies.get("logConfiguration") == [log_group.urn]
    assert logging["destination"].endswith(f":log-group:{name}")


def test_file_system_uses_only_its_own_security_group(lustre_case: StackCase) -> None:
    run = lustre_case.run
    file_system = _file_system(run)
    servers = _servers_group(run)
    assert file_system.property_dependencies.get("securityGroupIds") == [servers.urn]
    assert len(file_system.inputs["securityGroupIds"]) == 1


# --------------------------------------------------------------------------- security groups


def test_lustre_group_ingress_is_exactly_the_lustre_rules(lustre_case: StackCase) -> None:
    run = lustre_case.run
    client_id = _client_group_id(run)
    ingress = _servers_group(run).inputs["ingress"]
    expected = {
        ("tcp", 988, 988, "clients"),
        ("tcp", 988, 988, "self"),
        ("tcp", 1018, 1023, "clients"),
        ("tcp", 1018, 1023, "self"),
    }
    found: list[tuple[str, int, int, str]] = []
    for rule in ingress:
        for forbidden in ("cidrBlocks", "ipv6CidrBlocks", "prefixListIds"):
            assert not rule.get(forbidden), f"{forbidden} in {rule}"
        from_clients = rule.get("securityGroups") == [client_id]
        from_self = rule.get("self") is True
        assert from_clients != from_self, f"exactly one source per rule: {rule}"
        if not from_clients:
            assert not rule.get("securityGroups"), rule
        source = "clients" if from_clients else "self"
        found.append((rule["protocol"], rule["fromPort"], rule["toPort"], source))
    assert sorted(found) == sorted(expected)


def test_lustre_group_admits_only_the_lustre_ports(lustre_case: StackCase) -> None:
    run = lustre_case.run
    client_id = _client_group_id(run)
    admitted: set[int] = set()
    from_clients: set[int] = set()
    from_self: set[int] = set()
    for rule in _servers_group(run).inputs["ingress"]:
        ports = _ports(rule)
        admitted |= ports
        if client_id in rule.get("securityGroups", []):
            from_clients |= ports
        if rule.get("self") is True:
            from_self |= ports
    assert admitted == {988, 1018, 1019, 1020, 1021, 1022, 1023}
    assert admitted == LUSTRE_PORTS
    assert from_clients == LUSTRE_PORTS, "clients must reach every Lustre port"
    assert from_self == LUSTRE_PORTS, "file servers must reach each other on every Lustre port"


def test_storage_security_groups_in_the_cluster_vpc(lustre_case: StackCase) -> None:
    run = lustre_case.run
    vpc = run.one(VPC)
    # The model store's group is tests/test_model_store.py's.
    groups = [g for g in _storage_children(run, SECURITY_GROUP) if g.name != "storage-models"]
    assert sorted(g.name for g in groups) == [
        "storage-lustre",
        "storage-lustre-admin",
        "storage-lustre-clients",
    ]
    for group in groups:
        assert group.property_dependencies.get("vpcId") == [vpc.urn], group.name


# --------------------------------------------------------------------------- associations


def test_one_association_per_configured_one(lustre_case: StackCase) -> None:
    run = lustre_case.run
    lustre = lustre_case.lustre
    configured = lustre.get("associations", [])
    assert len(run.of_type(ASSOCIATION)) == len(configured)
    file_system = _file_system(run)
    for raw in configured:
        key = raw.get("bucket", lustre.get("bucket"))
        bucket = _bucket(lustre_case, key)
        s3_name = lustre_case.expected_bucket_name(key)
        association = _association(run, raw["fileSystemPath"])
        inputs = association.inputs
        assert inputs["dataRepositoryPath"] == f"s3://{s3_name}/{raw.get('s3Prefix', '')}"
        assert inputs["batchImportMetaDataOnCreate"] is raw.get("batchImportMetadataOnCreate", True)
        assert inputs["deleteDataInFilesystem"] is False
        assert association.property_dependencies.get("fileSystemId") == [file_system.urn]
        s3 = inputs.get("s3", {})
        exports = raw.get("exportEvents", [])
        imports = raw.get("importEvents", [] if exports else ALL_EVENTS)
        if imports:
            assert s3["autoImportPolicy"]["events"] == imports
        else:
            assert "autoImportPolicy" not in s3
        if exports:
            assert s3["autoExportPolicy"]["events"] == exports
        else:
            assert "autoExportPolicy" not in s3
        # the bucket must refuse plain HTTP and encrypt with the data key before FSx writes
        for resource_type in (BUCKET_POLICY, ENCRYPTION):
            part = _part(run, resource_type, bucket)
            assert part.urn in association.dependencies, (raw["fileSystemPath"], resource_type)


@pytest.mark.parametrize("stack", STACKS)
def test_checkpoints_flow_one_way_to_s3_and_deletes_stay(
    cases: dict[str, StackCase], stack: str
) -> None:
    association = _association(cases[stack].run, "/checkpoints")
    assert association.inputs["s3"] == {"autoExportPolicy": {"events": ["NEW", "CHANGED"]}}
    assert association.inputs["dataRepositoryPath"].endswith("/checkpoints/")


@pytest.mark.parametrize("stack", STACKS)
def test_no_path_imports_what_it_exports(cases: dict[str, StackCase], stack: str) -> None:
    for association in cases[stack].run.of_type(ASSOCIATION):
        s3 = association.inputs.get("s3", {})
        imported = set(s3.get("autoImportPolicy", {}).get("events", []))
        exported = set(s3.get("autoExportPolicy", {}).get("events", []))
        assert not imported & exported, association.name


@pytest.mark.parametrize("stack", STACKS)
def test_every_data_bucket_is_linked_or_reached_by_the_team_roles(
    cases: dict[str, StackCase], stack: str
) -> None:
    """What the issue found in prod: a datasets bucket nothing on /fsx or in a pod could read."""
    run = cases[stack].run
    linked = {a.inputs["dataRepositoryPath"].split("/")[2] for a in run.of_type(ASSOCIATION)}
    reached: set[str] = set()
    for policy in run.of_type(ROLE_POLICY):
        if policy.name.endswith("-jobs"):
            for statement in json.loads(policy.inputs["policy"])["Statement"]:
                reached.add(str(statement["Resource"]).split(":::")[1].split("/")[0])
    for bucket in cases[stack].config.storage.buckets:
        s3_name = cases[stack].expected_bucket_name(bucket.name)
        assert s3_name in linked | reached, s3_name


# An association is replaced when its file system, path or S3 path changes (ForceNew in
# hashicorp/terraform-provider-aws internal/service/fsx/data_repository_association.go), and
# FSx refuses a second association on a path while the first still holds it: each association
# is named by its path, replaced delete-first, and kept where the stack protects its data.

MULTI_ASSOCIATION_STACKS: Final = [
    stack for stack in STACKS if len(_raw_stack_storage(stack)["lustre"]["associations"]) > 1
]


def _associations_by_urn(run: ProgramRun) -> dict[str, ResourceRecord]:
    return {record.urn: record for record in run.of_type(ASSOCIATION)}


def test_every_association_is_named_by_its_file_system_path(lustre_case: StackCase) -> None:
    records = lustre_case.run.of_type(ASSOCIATION)
    assert records
    for record in records:
        assert record.name == f"storage-dra{record.inputs['fileSystemPath'].rstrip('/') or '/'}"
    assert len({record.urn for record in records}) == len(records)


def test_multi_association_stacks_exist() -> None:
    # The reordering test below would silently test nothing without them.
    assert MULTI_ASSOCIATION_STACKS


@pytest.mark.parametrize("stack", MULTI_ASSOCIATION_STACKS)
def test_reordering_associations_changes_none(run_component: RunComponent, stack: str) -> None:
    data = stack_data(stack)
    before = _associations_by_urn(run_component(parts.storage, data, stack))
    data["storage"]["lustre"]["associations"].reverse()
    after = _associations_by_urn(run_component(parts.storage, data, stack))
    assert set(after) == set(before)
    for urn, record in before.items():
        assert after[urn].inputs == record.inputs, record.name
        assert after[urn].property_dependencies == record.property_dependencies, record.name


@pytest.mark.parametrize("stack", STACKS)
def test_growing_the_file_system_leaves_every_claim_unchanged(
    run_component: RunComponent, stack: str
) -> None:
    """The PV's capacity follows the file system (a PV's capacity may change); the claims'
    spec may not, so an update there would fail on the cluster."""
    data = stack_data(stack)
    before = run_component(parts.storage, data, stack)
    lustre = data["storage"]["lustre"]
    capacity = lustre["storageCapacityGiB"]
    # the next allowed SCRATCH_2/PERSISTENT_2 step: 1200 -> 2400, then +2400
    lustre["storageCapacityGiB"] = 2400 if capacity < 2400 else capacity + 2400
    lustre.pop("metadataIops", None)  # AUTOMATIC follows the capacity
    after = run_component(parts.storage, data, stack)
    claims = {c.urn: c.inputs for c in _lustre_claims(before)}
    assert claims
    assert {c.urn: c.inputs for c in _lustre_claims(after)} == claims
    grown = {v.inputs["spec"]["capacity"]["storage"] for v in _lustre_volumes(after)}
    assert grown == {f"{data['storage']['lustre']['storageCapacityGiB']}Gi"}


@pytest.mark.parametrize("stack", STACKS)
def test_a_new_prefix_replaces_the_association_in_place_and_delete_first(
    run_component: RunComponent, stack: str
) -> None:
    data = stack_data(stack)
    before = _associations_by_urn(run_component(parts.storage, data, stack))
    raw = next(a for a in data["storage"]["lustre"]["associations"]
               if a["fileSystemPath"] == "/checkpoints")  # fmt: skip
    raw["s3Prefix"] = "checkpoints-v2/"
    after = _associations_by_urn(run_component(parts.storage, data, stack))
    assert set(after) == set(before)
    (changed,) = [urn for urn in before if after[urn].inputs != before[urn].inputs]
    record = after[changed]
    assert record.inputs["fileSystemPath"] == "/checkpoints"
    assert record.inputs["dataRepositoryPath"].endswith("/checkpoints-v2/")
    assert before[changed].inputs["dataRepositoryPath"].endswith("/checkpoints/")
    # dataRepositoryPath is ForceNew: the replacement must free the path before the new one.
    assert all(r.delete_before_replace is True for r in after.values())


def test_associations_carry_the_alias_of_their_former_index_name(
    monkeypatch: pytest.MonkeyPatch, run_component: RunComponent
) -> None:
    """Stacks deployed when associations were named by position keep them: the alias maps the
    old URN to the new one, so the upgrade updates nothing instead of recreating the path."""
    seen: dict[str, list[Any]] = {}
    original = aws.fsx.DataRepositoryAssociation

    class Spy(original):  # type: ignore[misc,valid-type]
        def __init__(self, resource_name: str, *args: Any, **kwargs: Any) -> None:
            opts = kwargs.get("opts")
            seen[kwargs["file_system_path"]] = list(opts.aliases or []) if opts else []
            super().__init__(resource_name, *args, **kwargs)

    monkeypatch.setattr(aws.fsx, "DataRepositoryAssociation", Spy)
    data = stack_data("staging")
    run_component(parts.storage, data, "staging")
    paths = [a["fileSystemPath"] for a in data["storage"]["lustre"]["associations"]]
    assert list(seen) == paths
    for index, path in enumerate(paths):
        (alias,) = seen[path]
        assert isinstance(alias, pulumi.Alias)
        assert alias.name == f"storage-dra-{index}"
        # Unset (the SDK's Ellipsis): the same parent and type as the resource itself.
        unset: Any = ...
        assert alias.parent is unset and alias.type_ is unset


@pytest.mark.parametrize(
    "spelling", ["/checkpoints/", "/checkpoints//", "//checkpoints", "/./checkpoints"]
)
def test_two_spellings_of_one_path_are_refused(spelling: str) -> None:
    data = stack_data("dev")
    associations = data["storage"]["lustre"]["associations"]
    associations.append({"fileSystemPath": spelling, "s3Prefix": "elsewhere/"})
    index = len(associations) - 1
    assert_reported(
        data,
        f"platform.storage.lustre.associations[{index}].fileSystemPath",
        spelling,
        "neither contains nor is inside /checkpoints",
    )


# --------------------------------------------------------------------------- CSI driver


def test_fsx_csi_addon_pinned_with_pod_identity(lustre_case: StackCase) -> None:
    run = lustre_case.run
    minor = lustre_case.raw["cluster"]["kubernetesVersion"]
    (addon,) = _csi_addons(run)
    inputs = addon.inputs
    assert inputs["addonVersion"] == versions.EKS_ADDONS[minor].aws_fsx_csi_driver
    assert inputs["clusterName"] == lustre_case.cluster
    (association,) = inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == CSI_SERVICE_ACCOUNT
    role = _role_of_association(run, addon)
    assert association["roleArn"].rsplit("/", 1)[-1].startswith(f"{role.name}-")
    trust = json.loads(role.inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert "sts:AssumeRole" in statement["Action"] and "sts:TagSession" in statement["Action"]
    # Pod Identity works only once its agent runs
    agents = [a for a in run.of_type(ADDON) if a.inputs["addonName"] == "eks-pod-identity-agent"]
    assert len(agents) == 1
    assert agents[0].urn in addon.dependencies


# --------------------------------------------------------------------------- Kubernetes objects


@pytest.mark.parametrize(("stack", "namespace"), NAMESPACE_CASES)
def test_namespace_volume_and_claim(
    cases: dict[str, StackCase], stack: str, namespace: str
) -> None:
    case = cases[stack]
    run = case.run
    lustre = case.lustre
    namespaces = [n for n in run.of_type(NAMESPACE) if n.inputs["metadata"]["name"] == namespace]
    assert len(namespaces) == 1, namespace
    zone = parse_platform_config(case.raw).network.training_zone
    for claim_name, volume_stem, directory in expected_claims(case.raw, namespace):
        volumes = [
            v for v in _lustre_volumes(run)
            if v.inputs["spec"]["claimRef"] == {"namespace": namespace, "name": claim_name}
        ]  # fmt: skip
        assert len(volumes) == 1, volume_stem
        (volume,) = volumes
        spec = volume.inputs["spec"]
        # named after what it mounts, so a new source is a new PV its claim follows
        volume_name = volume.inputs["metadata"]["name"]
        assert volume_name == persistent_volume_name(volume_stem, spec)
        # only Lustre clients in the file system's zone may mount it
        assert spec["nodeAffinity"] == lustre_node_affinity(zone)
        assert spec["csi"]["driver"] == CSI_DRIVER
        assert spec["accessModes"] == ["ReadWriteMany"]
        assert spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert spec["storageClassName"] == ""
        assert spec["claimRef"] == {"namespace": namespace, "name": claim_name}
        assert spec["mountOptions"] == lustre.get("mountOptions", DEFAULT_MOUNT_OPTIONS)
        assert spec["capacity"] == {"storage": f"{lustre['storageCapacityGiB']}Gi"}
        file_system = _file_system(run)
        assert file_system.urn in volume.property_dependencies.get("spec", [])
        attributes = spec["csi"]["volumeAttributes"]
        assert set(attributes) == {"dnsname", "mountname"}
        for value in attributes.values():
            assert isinstance(value, str) and value and value != UNKNOWN, attributes
        # the file system's mount name, then the namespace's directory (none: all of it)
        assert "/" + attributes["mountname"].partition("/")[2] == (directory or "/")
        claims = [
            c
            for c in _lustre_claims(run)
            if c.inputs["metadata"] == {"name": claim_name, "namespace": namespace}
        ]
        assert len(claims) == 1, namespace
        (claim,) = claims
        claim_spec = claim.inputs["spec"]
        assert claim_spec["volumeName"] == volume_name
        assert claim_spec["storageClassName"] == ""
        assert claim_spec["accessModes"] == ["ReadWriteMany"]
        # A bound claim without a StorageClass cannot be resized (kubernetes pkg/apis/core/
        # validation ValidatePersistentVolumeClaimUpdate): its request is the smallest file
        # system, which the PV's capacity (the file system's) always covers.
        assert claim_spec["resources"]["requests"]["storage"] == "1200Gi"
        assert quantity(spec["capacity"]["storage"]) >= quantity("1200Gi")
        assert namespaces[0].urn in claim.dependencies
        assert volume.urn in claim.dependencies


def test_volume_handles_are_the_file_system_id_and_unique(lustre_case: StackCase) -> None:
    run = lustre_case.run
    file_system = _file_system(run)
    # associations receive the same output (the file system's id) as fileSystemId
    ids = {a.inputs["fileSystemId"] for a in run.of_type(ASSOCIATION)}
    assert len(ids) == 1
    (file_system_id,) = ids
    assert file_system_id.startswith("fs-")
    handles = []
    lustre_volumes = {v.urn for v in _lustre_volumes(run)}
    for volume in _storage_children(run, VOLUME):
        if volume.urn not in lustre_volumes:
            continue
        csi = volume.inputs["spec"]["csi"]
        mount_name = csi["volumeAttributes"]["mountname"]
        directory = mount_name.partition("/")[2]
        # a team directory's handle names it: kubelet mounts one volume per handle in a pod
        expected = f"{file_system_id}::{directory}" if directory else file_system_id
        assert csi["volumeHandle"] == expected, volume.name
        handles.append(csi["volumeHandle"])
        assert csi["volumeAttributes"]["dnsname"].startswith(f"{file_system_id}.fsx."), volume.name
        assert file_system.urn in volume.property_dependencies["spec"]
    teams = {t["name"] for t in lustre_case.raw.get("teams", [])}
    team_handles = [h for h in handles if "::" in h]
    assert len(team_handles) == len(set(team_handles)) >= len(teams)


def test_one_volume_and_claim_per_namespace(lustre_case: StackCase) -> None:
    run = lustre_case.run
    namespaces = claiming_namespaces(lustre_case.raw)
    expected = [
        claim for ns in namespaces for claim in expected_claims(lustre_case.raw, ns)
    ]  # fmt: skip
    # each name is its stem and the digest of what it mounts
    volumes = sorted(v.inputs["metadata"]["name"].rsplit("-", 1)[0] for v in _lustre_volumes(run))
    assert volumes == sorted(stem for _, stem, _ in expected)
    claims = sorted(
        (c.inputs["metadata"]["namespace"], c.inputs["metadata"]["name"])
        for c in _lustre_claims(run)
    )
    assert claims == sorted(
        (ns, claim) for ns in namespaces for claim, _, _ in expected_claims(lustre_case.raw, ns)
    )


def test_volumes_and_claims_are_valid_kubernetes(lustre_case: StackCase) -> None:
    version = lustre_case.raw["cluster"]["kubernetesVersion"]
    records = [*_lustre_volumes(lustre_case.run), *_lustre_claims(lustre_case.run)]
    assert records
    for record in records:
        manifest = _manifest(record)
        assert validation_errors(manifest, version, None) == [], record.name


def test_kubernetes_objects_wait_for_the_csi_driver(lustre_case: StackCase) -> None:
    run = lustre_case.run
    (addon,) = _csi_addons(run)
    (provider,) = [
        p for p in run.of_type("pulumi:providers:kubernetes")
        if "upsertExistingObjects" not in p.inputs
    ]  # fmt: skip
    # The metrics stack's namespace is adopted (Helm made it on stacks that had Slurm):
    # components/observability/stack.py; it holds no Lustre claim.
    namespaces = [
        r for r in run.of_type(NAMESPACE) if r.inputs["metadata"]["name"] != MONITORING_NAMESPACE
    ]
    for record in [*namespaces, *_lustre_volumes(run), *_lustre_claims(run)]:
        assert record.provider == provider.urn, record.name
    for record in [*_lustre_volumes(run), *_lustre_claims(run)]:
        assert addon.urn in record.dependencies, record.name


# --------------------------------------------------------------------------- nodes


def _mounting_pools(case: StackCase) -> set[str]:
    """The pools every stack's file system serves: its accelerator pools (each in the file
    system's zone) and the general-lustre CPU pool; not the general pool, which crosses zones."""
    return {p["name"] for p in case.raw.get("nodePools", [])} | {"general-lustre"}


def test_every_node_pool_in_the_zone_waits_for_the_fsx_agent(lustre_case: StackCase) -> None:
    pools = lustre_case.run.of_type(NODE_POOL)
    mounting = _mounting_pools(lustre_case)
    names = {p.inputs["metadata"]["name"] for p in pools}
    assert mounting <= names and "general" in names
    for pool in pools:
        name = pool.inputs["metadata"]["name"]
        owner = name.removesuffix("-slurm")
        taints = pool.inputs["spec"]["template"]["spec"].get("startupTaints", [])
        assert (STARTUP_TAINT in taints) is (owner in mounting), pool.name


def test_every_node_class_in_the_zone_selects_the_lustre_client_group(
    lustre_case: StackCase,
) -> None:
    run = lustre_case.run
    client_id = _client_group_id(run)
    clients = _clients_group(run)
    mounting = _mounting_pools(lustre_case)
    node_classes = run.of_type(NODE_CLASS)
    assert mounting | {"general"} == {c.inputs["metadata"]["name"] for c in node_classes}
    for node_class in node_classes:
        terms = node_class.inputs["spec"]["securityGroupSelectorTerms"]
        selects = node_class.inputs["metadata"]["name"] in mounting
        assert ({"id": client_id} in terms) is selects, node_class.name
        assert (clients.urn in node_class.property_dependencies["spec"]) is selects


def test_without_storage_nothing_of_it(run_platform: Callable[..., ProgramRun]) -> None:
    data = stack_data("dev")
    data["storage"] = {}
    data.pop("modelStore")
    without_notebooks(data)  # their homes live on the model store
    without_slurm(data)  # Slurm needs the file system
    run = run_platform(data, "dev")
    # a startup taint nothing removes would leave every node unusable (the acceptance
    # taint stays: the acceptance agent removes it)
    for record in run.records:
        startup = dict(_walk(record.inputs)).get("startupTaints", [])
        assert STARTUP_TAINT not in startup, record.name
    pools = run.of_type(NODE_POOL)
    assert pools, "the pools still exist"
    for resource_type in (FILE_SYSTEM, ASSOCIATION, VOLUME, BUCKET, *BUCKET_PARTS):
        assert run.of_type(resource_type) == [], resource_type
    assert _lustre_claims(run) == []
    assert _csi_addons(run) == []
    assert not [g for g in run.of_type(SECURITY_GROUP) if "lustre" in g.name]
    storage = run.one(STORAGE).urn
    assert [r.name for r in run.records if r.parent == storage] == []
    for node_class in run.of_type(NODE_CLASS):
        deps = node_class.property_dependencies.get("spec", [])
        assert not [urn for urn in deps if "storage" in urn], node_class.name


def test_buckets_without_a_file_system_add_no_taint(
    run_platform: Callable[..., ProgramRun],
) -> None:
    data = stack_data("dev")
    without_lustre(data)  # the bucket stays, reached by the team roles alone
    run = run_platform(data, "dev")
    assert sorted(b.name for b in run.of_type(BUCKET)) == [ACCESS_LOGS, "storage-data"]
    assert _data_key(run).inputs["enableKeyRotation"] is True
    for record in run.records:
        startup = dict(_walk(record.inputs)).get("startupTaints", [])
        assert STARTUP_TAINT not in startup, record.name
    for resource_type in (FILE_SYSTEM, ASSOCIATION):
        assert run.of_type(resource_type) == [], resource_type
    assert _lustre_volumes(run) == []
    assert _lustre_claims(run) == []
    assert _csi_addons(run) == []
    assert not [g for g in run.of_type(SECURITY_GROUP) if "lustre" in g.name]


# --------------------------------------------------------------------------- mutated configs


def test_non_default_lustre_settings_reach_the_resources(
    run_component: RunComponent,
) -> None:
    data = stack_data("dev")
    without_teams(data)  # only the listed namespaces mount the file system here
    without_slurm(data)
    data["storage"]["buckets"][0]["noncurrentVersionRetentionDays"] = 45
    lustre = data["storage"]["lustre"]
    lustre.update(
        {
            "storageCapacityGiB": 4800,
            "throughputPerTiB": 1000,
            "metadataIops": 12000,
            "dataCompression": "NONE",
            "logLevel": "ERROR_ONLY",
            "logRetentionDays": 30,
            "mountOptions": ["flock", "user_xattr"],
            "namespaces": ["team-a", "team-b"],
            "checkpointPath": "/results",
            "associations": [
                {
                    "fileSystemPath": "/results",
                    "s3Prefix": "results/",
                    "exportEvents": ["NEW", "CHANGED"],
                    "batchImportMetadataOnCreate": False,
                },
                {"fileSystemPath": "/reference", "s3Prefix": "reference/", "importEvents": []},
            ],
        }
    )
    run = run_component(parts.storage, data, "dev")
    inputs = _file_system(run).inputs
    assert inputs["storageCapacity"] == 4800
    assert inputs["perUnitStorageThroughput"] == 1000
    assert inputs["metadataConfiguration"] == {"mode": "USER_PROVISIONED", "iops": 12000}
    assert inputs["dataCompressionType"] == "NONE"
    assert inputs["efaEnabled"] is False
    assert inputs["automaticBackupRetentionDays"] == 0
    assert inputs["logConfiguration"]["level"] == "ERROR_ONLY"
    assert _named(run, LOG_GROUP, "storage-lustre").inputs["retentionInDays"] == 30
    rules = _named(run, LIFECYCLE, "storage-data").inputs["rules"]
    assert {"noncurrentDays": 45} in [r.get("noncurrentVersionExpiration") for r in rules]
    results = _association(run, "/results").inputs
    assert results["s3"] == {"autoExportPolicy": {"events": ["NEW", "CHANGED"]}}
    assert results["batchImportMetaDataOnCreate"] is False
    reference = _association(run, "/reference").inputs
    assert "s3" not in reference or reference["s3"] == {}
    assert reference["batchImportMetaDataOnCreate"] is True
    volumes = {v.inputs["metadata"]["name"]: v.inputs["spec"] for v in _lustre_volumes(run)}
    assert sorted(name.rsplit("-", 1)[0] for name in volumes) == [
        "shared-lustre-node-acceptance",
        "shared-lustre-team-a",
        "shared-lustre-team-b",
    ]
    for spec in volumes.values():
        assert spec["mountOptions"] == ["flock", "user_xattr"]
        assert spec["capacity"] == {"storage": "4800Gi"}
    claims = sorted(
        (c.inputs["metadata"]["namespace"], c.inputs["spec"]["volumeName"])
        for c in _lustre_claims(run)
    )
    assert [(namespace, name.rsplit("-", 1)[0]) for namespace, name in claims] == [
        ("node-acceptance", "shared-lustre-node-acceptance"),
        ("team-a", "shared-lustre-team-a"),
        ("team-b", "shared-lustre-team-b"),
    ]
    assert {name for _, name in claims} == set(volumes)


def test_an_efa_enabled_file_system_is_refused_until_clients_use_efa() -> None:
    """The decision of issue 22 point 6 (README, "The fast path"): no stack's throughput needs it,
    and the nodes' Lustre client would not use it (LNet over EFA is set up at boot, which the
    EKS AMI does not do), while turning it off later replaces the file system."""
    data = stack_data("prod")
    data["storage"]["lustre"]["efaEnabled"] = True
    assert_reported(data, "platform.storage.lustre.efaEnabled", True, "replaces the file system")


def test_an_efa_file_systems_group_takes_all_traffic_from_itself_and_clients() -> None:
    """What FSx needs of an EFA-enabled file system's group, for when clients can use one.

    FSx refuses to create an EFA-enabled file system otherwise ("Insufficient security group
    permissions to create an EFA-enabled file system. Update security group to allow all
    internal inbound and outbound traffic", FSx for Lustre guide, cannot-create-fs).
    """
    ingress = lustre_ingress("sg-clients", efa_enabled=True)
    egress = lustre_egress("sg-clients", efa_enabled=True)

    def all_traffic(rule: dict[str, Any]) -> bool:
        return str(rule["protocol"]) in ("-1", "all")

    assert any(all_traffic(r) and r.get("self") is True for r in ingress)
    assert any(all_traffic(r) and r.get("security_groups") == ["sg-clients"] for r in ingress)
    assert any(all_traffic(r) and r.get("self") is True for r in egress)
    assert any(all_traffic(r) and r.get("security_groups") == ["sg-clients"] for r in egress)
    assert not any("cidr_blocks" in r for r in (*ingress, *egress))
    plain = lustre_ingress("sg-clients")
    assert not any(all_traffic(r) for r in plain)


# --------------------------------------------------------------------------- pure builders


def test_tls_only_bucket_policy() -> None:
    policy = tls_only_bucket_policy("arn:aws:s3:::example-bucket")
    assert policy["Version"] == "2012-10-17"
    (statement,) = policy["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Principal"] == "*"
    assert statement["Action"] == "s3:*"
    assert statement["Resource"] == ["arn:aws:s3:::example-bucket", "arn:aws:s3:::example-bucket/*"]
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    other = tls_only_bucket_policy("arn:aws:s3:::other")
    assert other["Statement"][0]["Resource"] == ["arn:aws:s3:::other", "arn:aws:s3:::other/*"]


def test_data_key_policy_limits_use_to_the_account_and_its_s3_and_fsx() -> None:
    principals = ["arn:aws:iam::123456789012:role/training-dev-ml-jobs"]
    policy = data_key_policy("123456789012", "eu-west-1", principals)
    assert policy["Version"] == "2012-10-17"
    statements = policy["Statement"]
    unconditional = [s for s in statements if "Condition" not in s]
    # only the account itself (IAM decides inside it) is trusted without conditions
    for statement in unconditional:
        assert statement["Effect"] == "Allow"
        assert statement["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
    assert any(s["Action"] == "kms:*" for s in unconditional), "the account administers the key"
    conditional = [s for s in statements if "Condition" in s]
    assert len(conditional) == 1
    (use,) = conditional
    assert use["Effect"] == "Allow"
    condition = use["Condition"]
    assert set(condition) == {"StringEquals", "ArnLike"}
    assert condition["ArnLike"] == {"aws:PrincipalArn": principals}
    equals = condition["StringEquals"]
    assert equals["kms:CallerAccount"] == "123456789012"
    assert sorted(equals["kms:ViaService"]) == [
        "fsx.eu-west-1.amazonaws.com",
        "s3.eu-west-1.amazonaws.com",
    ]
    actions = use["Action"] if isinstance(use["Action"], list) else [use["Action"]]
    assert {"kms:Decrypt", "kms:GenerateDataKey*", "kms:CreateGrant"} <= set(actions)
    for administrative in ("kms:*", "kms:PutKeyPolicy", "kms:ScheduleKeyDeletion"):
        assert administrative not in actions
    for statement in statements:
        principal = statement["Principal"]
        if principal in ("*", {"AWS": "*"}):
            assert statement is use, "a wildcard principal only with account and service limits"
    other = data_key_policy("210987654321", "us-east-2", principals)
    other_equals = other["Statement"][1]["Condition"]["StringEquals"]
    assert other_equals["kms:CallerAccount"] == "210987654321"
    assert "s3.us-east-2.amazonaws.com" in other_equals["kms:ViaService"]
    assert other["Statement"][0]["Principal"] == {"AWS": "arn:aws:iam::210987654321:root"}


def test_lustre_ingress() -> None:
    rules = lustre_ingress("sg-0123456789abcdef0")
    assert len(rules) == 4
    admitted: set[int] = set()
    for rule in rules:
        assert rule["protocol"] == "tcp"
        assert not {"cidr_blocks", "ipv6_cidr_blocks", "prefix_list_ids"} & set(rule)
        admitted |= set(range(rule["from_port"], rule["to_port"] + 1))
    assert admitted == LUSTRE_PORTS
    pairs = {(r["from_port"], r["to_port"]) for r in rules}
    assert pairs == {(988, 988), (1018, 1023)}
    for low, high in pairs:
        sources = [r for r in rules if (r["from_port"], r["to_port"]) == (low, high)]
        assert sorted(
            "self" if r.get("self") is True else ",".join(r["security_groups"]) for r in sources
        ) == ["self", "sg-0123456789abcdef0"]
        for rule in sources:
            assert ("self" in rule) != ("security_groups" in rule), rule


def test_data_repository_path() -> None:
    checkpoints = DataRepositoryAssociationConfig.model_validate(
        {"fileSystemPath": "/checkpoints", "s3Prefix": "checkpoints/"}
    )
    assert data_repository_path("my-bucket", checkpoints) == "s3://my-bucket/checkpoints/"
    nested = DataRepositoryAssociationConfig.model_validate(
        {"fileSystemPath": "/runs", "s3Prefix": "team/runs/"}
    )
    assert data_repository_path("b", nested) == "s3://b/team/runs/"
    whole = DataRepositoryAssociationConfig.model_validate({"fileSystemPath": "/data"})
    assert data_repository_path("my-bucket", whole) == "s3://my-bucket/"


def test_association_s3_config() -> None:
    default = DataRepositoryAssociationConfig.model_validate({"fileSystemPath": "/data"})
    assert association_s3_config(default) == {"auto_import_policy": {"events": ALL_EVENTS}}
    checkpoints = DataRepositoryAssociationConfig.model_validate(
        {"fileSystemPath": "/checkpoints", "exportEvents": ["NEW", "CHANGED", "DELETED"]}
    )
    # a path that exports imports nothing unless told (and config refuses the same event both
    # ways): AWS warns that importing and exporting one path can overwrite either side
    assert association_s3_config(checkpoints) == {"auto_export_policy": {"events": ALL_EVENTS}}
    export_only = DataRepositoryAssociationConfig.model_validate(
        {"fileSystemPath": "/out", "importEvents": [], "exportEvents": ["NEW", "CHANGED"]}
    )
    assert association_s3_config(export_only) == {
        "auto_export_policy": {"events": ["NEW", "CHANGED"]}
    }
    neither = DataRepositoryAssociationConfig.model_validate(
        {"fileSystemPath": "/static", "importEvents": []}
    )
    assert association_s3_config(neither) == {}


def _lustre(**overrides: Any) -> LustreConfig:
    data: dict[str, Any] = {"storageCapacityGiB": 2400, "bucket": "data"}
    data.update(overrides)
    return LustreConfig.model_validate(data)


def test_persistent_volume_spec() -> None:
    spec = persistent_volume_spec(
        _lustre(mountOptions=["flock", "noatime"]),
        namespace="team-a",
        volume_handle="fs-0123456789abcdef0",
        dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        mount_name="abcdefgh",
        zone="us-east-1a",
    )
    assert spec["csi"] == {
        "driver": CSI_DRIVER,
        "volumeHandle": "fs-0123456789abcdef0",
        "volumeAttributes": {
            "dnsname": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            "mountname": "abcdefgh",
        },
    }
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["storageClassName"] == ""
    assert spec["claimRef"] == {"namespace": "team-a", "name": CLAIM_NAME}
    assert spec["mountOptions"] == ["flock", "noatime"]
    assert spec["capacity"] == {"storage": "2400Gi"}
    assert (
        persistent_volume_spec(
            _lustre(), namespace="x", volume_handle="fs-1", dns_name="d", mount_name="m",
            zone="us-east-1a",
        )["mountOptions"]
        == DEFAULT_MOUNT_OPTIONS
    )  # fmt: skip
    team = persistent_volume_spec(
        _lustre(), namespace="x", volume_handle="fs-1::datasets/x", dns_name="d",
        mount_name="m/datasets/x", zone="us-east-1a", claim_name="lustre-datasets",
    )  # fmt: skip
    assert team["claimRef"] == {"namespace": "x", "name": "lustre-datasets"}
    # never read-only: no access times go through a read-only mount
    assert "readOnly" not in team["csi"]
    # only Lustre clients of the file system's zone
    (term,) = spec["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {"key": LUSTRE_CLIENT_LABEL, "operator": "In", "values": ["true"]},
        {"key": ZONE, "operator": "In", "values": ["us-east-1a"]},
    ]
    manifest = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": persistent_volume_name("shared-lustre-team-a", spec)},
        "spec": spec,
    }
    assert validation_errors(manifest, "1.34", None) == []


def test_a_volume_is_renamed_when_what_it_mounts_changes_and_only_then() -> None:
    def spec(**changes: Any) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "namespace": "team-a", "volume_handle": "fs-1::checkpoints/team-a",
            "dns_name": "fs-1.fsx", "mount_name": "abcd/checkpoints/team-a", "zone": "us-east-1a",
            "claim_name": "lustre-checkpoints",
        }  # fmt: skip
        lustre = changes.pop("lustre", _lustre())
        return persistent_volume_spec(lustre, **{**arguments, **changes})

    stem = "lustre-checkpoints-team-a"
    name = persistent_volume_name(stem, spec())
    assert name.startswith(stem + "-") and len(name) <= 253
    assert name == persistent_volume_name(stem, spec())
    # the API server refuses a change to these (the volume source, and node affinity once set):
    # a new file system, another directory or zone is a new PV, which its claim follows
    for change in (
        {"volume_handle": "fs-2::checkpoints/team-a"},
        {"dns_name": "fs-2.fsx"},
        {"mount_name": "efgh/checkpoints/team-a"},
        {"zone": "us-east-1b"},
    ):
        assert persistent_volume_name(stem, spec(**change)) != name, change
    # capacity and mount options change in place: the same PV, the same claim
    grown = spec(lustre=_lustre(storageCapacityGiB=4800, mountOptions=["relatime"]))
    assert persistent_volume_name(stem, grown) == name


def test_persistent_volume_claim_spec() -> None:
    spec = persistent_volume_claim_spec("shared-lustre-team-a")
    assert spec["volumeName"] == "shared-lustre-team-a"
    assert spec["storageClassName"] == ""
    assert spec["accessModes"] == ["ReadWriteMany"]
    # The smallest FSx for Lustre file system (1.2 TiB): binding needs the PV's capacity to be
    # at least the request, and every file system is at least this big.
    assert spec["resources"] == {"requests": {"storage": "1200Gi"}}
    manifest = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": CLAIM_NAME, "namespace": "team-a"},
        "spec": spec,
    }
    assert validation_errors(manifest, "1.34", None) == []


def test_bucket_name_default_and_configured() -> None:
    prod = stack_data("prod")
    config = parse_platform_config(prod)
    default = BucketConfig.model_validate({"name": "datasets"})
    expected = f"{prod['clusterName']}-datasets-{prod['accountId']}"
    assert bucket_name(config, default) == expected
    named = BucketConfig.model_validate({"name": "datasets", "bucketName": "acme-datasets"})
    assert bucket_name(config, named) == "acme-datasets"
    # without clusterName the cluster is training-<environment>
    dev = stack_data("dev")
    assert "clusterName" not in dev
    expected_dev = f"training-{dev['environment']}-datasets-{dev['accountId']}"
    assert bucket_name(parse_platform_config(dev), default) == expected_dev


# --------------------------------------------------------------------------- what FSx refuses


@pytest.mark.parametrize(
    ("capacity", "automatic"),
    [(1200, 1500), (2400, 3000), (4800, 6000), (9600, 6000), (12000, 12000), (45600, 12000),
     (48000, 24000), (72000, 36000), (96000, 48000)],
)  # fmt: skip
def test_metadata_iops_floor_is_what_automatic_mode_gives(capacity: int, automatic: int) -> None:
    """FSx for Lustre User Guide, metadata performance:
    https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-metadata-performance.html
    """
    data = stack_data("dev")
    lustre = data["storage"]["lustre"]
    lustre["storageCapacityGiB"] = capacity
    below = {1500: None, 3000: 1500, 6000: 3000, 12000: 6000}.get(automatic, automatic - 12000)
    if below is not None:
        lustre["metadataIops"] = below
        problems = problems_of(data)
        assert [p.path for p in problems] == ["platform.storage.lustre.metadataIops"]
        assert f"at least {automatic}" in problems[0].allowed
        assert f"{capacity} GiB" in problems[0].allowed
    lustre["metadataIops"] = automatic
    assert parse_platform_config(data).storage.lustre is not None


def test_prod_asks_at_least_what_automatic_mode_would_give() -> None:
    lustre = stack_data("prod")["storage"]["lustre"]
    assert lustre["storageCapacityGiB"] == 48000 and lustre["metadataIops"] >= 24000


def test_backups_of_a_file_system_linked_to_s3_are_refused() -> None:
    data = stack_data("staging")
    data["storage"]["lustre"]["automaticBackupRetentionDays"] = 7
    problems = problems_of(data)
    assert [p.path for p in problems] == ["platform.storage.lustre.automaticBackupRetentionDays"]
    assert problems[0].value == 7
    assert "data repository associations" in problems[0].allowed


def test_a_file_system_without_associations_keeps_daily_backups(
    run_component: RunComponent,
) -> None:
    data = stack_data("dev")
    data["storage"]["lustre"]["associations"] = []
    data["storage"]["buckets"][0]["teamAccess"] = True  # no association reaches it now
    run = run_component(parts.storage, data, "dev")
    inputs = run.one(FILE_SYSTEM).inputs
    assert inputs["automaticBackupRetentionDays"] == DEFAULT_BACKUP_DAYS
    assert inputs["dailyAutomaticBackupStartTime"]
    data["storage"]["lustre"]["automaticBackupRetentionDays"] = 3
    assert (
        run_component(parts.storage, data, "dev")
        .one(FILE_SYSTEM)
        .inputs["automaticBackupRetentionDays"]
        == 3
    )
