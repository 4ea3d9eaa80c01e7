"""Who may be whom, evaluated as IAM would: Pod Identity trusts, node roles, the data key.

Every document is the synthesized one, read from each stack and evaluated with
:mod:`tests.iam_model` against the request that must pass and the ones that must not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

import pytest

from components.config import PlatformConfig, parse_platform_config
from components.iam import POD_IDENTITY_PRINCIPAL, VPC_CNI_POLICY, eks_cluster_arn
from components.storage import import_only_prefixes, team_data_policy, team_prefixes, team_role_name
from synth.engine import ResourceRecord
from synth.run import StackResult
from tests.conftest import STACKS, stack_data
from tests.iam_model import Request, allows

ROLE: Final = "aws:iam/role:Role"
ROLE_POLICY: Final = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT: Final = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ADDON: Final = "aws:eks/addon:Addon"
ASSOCIATION: Final = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
KEY: Final = "aws:kms/key:Key"
ADDON_NAMESPACE: Final = "kube-system"


@dataclass(frozen=True)
class Binding:
    """A role given to one service account through Pod Identity."""

    role: ResourceRecord
    namespace: str
    service_account: str


def _of_type(result: StackResult, typ: str) -> list[ResourceRecord]:
    return [r for r in result.records if r.type == typ]


def _role_named(result: StackResult, arn: str) -> ResourceRecord:
    """The role a (mock) role ARN names: its explicit name, or Pulumi's auto-name."""
    name = arn.rsplit("/", 1)[-1]
    (role,) = [
        r
        for r in _of_type(result, ROLE)
        if r.inputs.get("name") == name
        or (
            not r.inputs.get("name")
            and re.fullmatch(re.escape(r.name) + r"-[0-9a-f]{7}", name) is not None
        )
    ]
    return role


def _bindings(result: StackResult) -> list[Binding]:
    """Every Pod Identity association of the stack: standalone, and an add-on's."""
    bindings = [
        Binding(_role_named(result, a.inputs["roleArn"]), a.inputs["namespace"], a.inputs["serviceAccount"])
        for a in _of_type(result, ASSOCIATION)
    ]  # fmt: skip
    for addon in _of_type(result, ADDON):
        for association in addon.inputs.get("podIdentityAssociations") or []:
            role = _role_named(result, association["roleArn"])
            bindings.append(Binding(role, ADDON_NAMESPACE, association["serviceAccount"]))
    return bindings


def _trust(role: ResourceRecord) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(role.inputs["assumeRolePolicy"])
    return document


def _trusts_pod_identity(role: ResourceRecord) -> bool:
    return any(
        POD_IDENTITY_PRINCIPAL in json.dumps(s.get("Principal")) for s in _trust(role)["Statement"]
    )


def _pod_identity(action: str, cluster_arn: str, namespace: str, account: str) -> Request:
    tags = {
        "eks-cluster-arn": cluster_arn,
        "eks-cluster-name": cluster_arn.rsplit("/", 1)[-1],
        "kubernetes-namespace": namespace,
        "kubernetes-service-account": account,
        "kubernetes-pod-name": "p",
        "kubernetes-pod-uid": "u",
    }
    return Request(
        action,
        principal=("Service", POD_IDENTITY_PRINCIPAL),
        context={f"aws:RequestTag/{k}": v for k, v in tags.items()},
    )


def _config(stack: str) -> PlatformConfig:
    return parse_platform_config(stack_data(stack))


@pytest.mark.parametrize("stack", STACKS)
def test_each_pod_identity_role_trusts_only_its_own_cluster_namespace_and_account(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    config = _config(stack)
    cluster_arn = eks_cluster_arn(config.region, config.account_id, config.name)
    bindings = _bindings(result)
    by_role = {b.role.urn: b for b in bindings}
    assert len(by_role) == len(bindings), "one association per role"
    trusting = [r for r in _of_type(result, ROLE) if _trusts_pod_identity(r)]
    # every Pod Identity role is given to exactly one service account, and vice versa
    assert {r.urn for r in trusting} == set(by_role)
    namespaces = {b.namespace for b in bindings}
    assert {"kube-system", *(t.name for t in config.teams if team_prefixes(config, t.name))} <= (
        namespaces
    )
    for binding in bindings:
        trust = _trust(binding.role)
        own = (cluster_arn, binding.namespace, binding.service_account)
        for action in ("sts:AssumeRole", "sts:TagSession"):
            assert allows(trust, _pod_identity(action, *own)), (binding, action)
            attacks = {
                "another namespace": (cluster_arn, "intruder", binding.service_account),
                "another account": (cluster_arn, binding.namespace, "default"),
                "another cluster, same name, other region": (
                    eks_cluster_arn("eu-north-1", config.account_id, config.name),
                    binding.namespace,
                    binding.service_account,
                ),
                "another cluster": (
                    eks_cluster_arn(config.region, config.account_id, "other"),
                    binding.namespace,
                    binding.service_account,
                ),
            }
            for attack, tags in attacks.items():
                assert not allows(trust, _pod_identity(action, *tags)), (binding, attack)
            untagged = Request(action, principal=("Service", POD_IDENTITY_PRINCIPAL))
            assert not allows(trust, untagged), "an association with session tags disabled"
            other_service = Request(
                action,
                principal=("Service", "ec2.amazonaws.com"),
                context=_pod_identity(action, *own).context,
            )
            assert not allows(trust, other_service)


def _attached(result: StackResult, role: ResourceRecord) -> set[str]:
    return {
        a.inputs["policyArn"].rsplit("/", 1)[-1]
        for a in _of_type(result, ATTACHMENT)
        if a.property_dependencies.get("role") == [role.urn]
    }


@pytest.mark.parametrize("stack", STACKS)
def test_only_the_vpc_cni_holds_the_cni_policy_and_no_node_role_does(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    holders = [r for r in _of_type(result, ROLE) if VPC_CNI_POLICY in _attached(result, r)]
    (cni,) = [a for a in _of_type(result, ADDON) if a.inputs["addonName"] == "vpc-cni"]
    (association,) = cni.inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == "aws-node"
    role = _role_named(result, association["roleArn"])
    assert [r.urn for r in holders] == [role.urn]
    assert _attached(result, role) == {VPC_CNI_POLICY}
    node_roles = [r for r in _of_type(result, ROLE) if "ec2.amazonaws.com" in json.dumps(_trust(r))]
    assert len(node_roles) == 2, "the system node group's and Karpenter's"
    for node_role in node_roles:
        attached = _attached(result, node_role)
        assert "AmazonEKSWorkerNodePolicy" in attached
        assert VPC_CNI_POLICY not in attached
    # The CNI's role and the Pod Identity agent exist before the add-on, which the first
    # node waits for (tests/test_cluster.py).
    agent = next(
        a for a in _of_type(result, ADDON) if a.inputs["addonName"] == "eks-pod-identity-agent"
    )
    assert {agent.urn, role.urn} <= set(cni.dependencies)
    assert any(
        a.urn in cni.dependencies
        for a in _of_type(result, ATTACHMENT)
        if a.property_dependencies.get("role") == [role.urn]
    )


def _key_policy(result: StackResult, alias_suffix: str) -> dict[str, Any]:
    (key,) = [k for k in _of_type(result, KEY) if k.name.endswith(alias_suffix)]
    document: dict[str, Any] = json.loads(key.inputs["policy"])
    return document


DATA_ACTIONS: Final = ("kms:Decrypt", "kms:GenerateDataKey", "kms:Encrypt")


def _key_use(config: PlatformConfig, principal: str, action: str, service: str) -> Request:
    return Request(
        action,
        principal=("AWS", principal),
        context={
            "kms:CallerAccount": config.account_id,
            "kms:ViaService": f"{service}.{config.region}.amazonaws.com",
            "aws:PrincipalArn": principal,
        },
    )


@pytest.mark.parametrize("stack", STACKS)
def test_the_data_key_serves_this_stacks_roles_through_s3_and_fsx_only(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    config = _config(stack)
    if not config.storage.buckets and config.storage.lustre is None:
        pytest.skip("no data key without buckets or a file system")
    policy = _key_policy(result, "-data")
    account = config.account_id
    role = f"arn:aws:iam::{account}:role"
    team_roles = [
        f"{role}/{team_role_name(config.name, t.name)}"
        for t in config.teams
        if team_prefixes(config, t.name)
    ]
    # the synthesized team roles are the ones the policy names
    synthesized_names = {r.inputs.get("name") for r in _of_type(result, ROLE)}
    assert {arn.rsplit("/", 1)[-1] for arn in team_roles} <= synthesized_names
    consumers = {
        *team_roles,
        f"{role}/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
        "AWSServiceRoleForFSxS3Access_fs-0123456789abcdef0",
        f"{role}/aws-service-role/fsx.amazonaws.com/AWSServiceRoleForAmazonFSx",
        config.cluster.deployer_principal_arn,
        *config.cluster.admin_principal_arns,
    }
    for principal in consumers:
        for action in DATA_ACTIONS:
            for service in ("s3", "fsx"):
                assert allows(policy, _key_use(config, principal, action, service)), (
                    principal,
                    action,
                    service,
                )
    strangers = [
        f"{role}/some-other-workload",
        f"{role}/{config.name}-system-node-0000000",
        f"arn:aws:iam::{account}:user/someone",
    ]
    for principal in strangers:
        for action in DATA_ACTIONS:
            assert not allows(policy, _key_use(config, principal, action, "s3")), principal
    for principal in team_roles:
        direct = Request(
            "kms:Decrypt",
            principal=("AWS", principal),
            context={"kms:CallerAccount": account, "aws:PrincipalArn": principal},
        )
        assert not allows(policy, direct), "only through S3 or FSx"
        elsewhere = _key_use(config, principal, "kms:Decrypt", "ec2")
        assert not allows(policy, elsewhere)
    # the account administers the key (through IAM), as before
    root = f"arn:aws:iam::{account}:root"
    assert allows(policy, Request("kms:PutKeyPolicy", principal=("AWS", root)))


def _team_policy(result: StackResult, team: str) -> dict[str, Any]:
    (policy,) = [p for p in _of_type(result, ROLE_POLICY) if p.name == f"storage-{team}-jobs"]
    document: dict[str, Any] = json.loads(policy.inputs["policy"])
    return document


def _object(action: str, bucket: str, key: str) -> Request:
    return Request(action, resource=f"arn:aws:s3:::{bucket}/{key}")


WRITES: Final = (
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:PutObjectTagging",
    "s3:PutObjectAcl",
)


@pytest.mark.parametrize("stack", STACKS)
def test_team_roles_read_but_never_write_under_import_only_prefixes(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    config = _config(stack)
    imports = import_only_prefixes(config)
    teams = [t.name for t in config.teams if team_prefixes(config, t.name)]
    if not imports or not teams:
        pytest.skip("no import-only prefix or no team role in this stack")
    for team in teams:
        policy = _team_policy(result, team)
        for part in imports:
            own = f"{part.prefix}{team}/"
            # the datasets stay readable
            assert allows(policy, _object("s3:GetObject", part.bucket, f"{own}shard-0"))
            for action in WRITES:
                for key in (
                    f"{own}shard-0",
                    own,  # the directory object of the team's own directory
                    f"{own}sub/",
                    f"{part.prefix}other/x",
                    f"{part.prefix}x",
                ):
                    assert not allows(policy, _object(action, part.bucket, key)), (team, key)
        # writes stay allowed where the team owns a writable prefix outside them
        for part in team_prefixes(config, team):
            covered = any(
                part.bucket == i.bucket and part.prefix.startswith(i.prefix) for i in imports
            )
            assert allows(policy, _object("s3:PutObject", part.bucket, f"{part.prefix}x")) is (
                part.writable and not covered
            )


def test_a_team_access_bucket_an_association_imports_is_refused_all_the_same() -> None:
    """An explicit Deny: a teamAccess bucket whose prefix an import-only path links."""

    data = stack_data("prod")
    config = parse_platform_config(data)
    (datasets,) = [p for p in import_only_prefixes(config) if "datasets" in p.bucket]
    own = type(datasets)(datasets.bucket, f"{datasets.prefix}a/", writable=True)
    policy = team_data_policy([own], import_only_prefixes(config))
    assert not allows(policy, _object("s3:PutObject", own.bucket, f"{own.prefix}x"))
    assert allows(policy, _object("s3:GetObject", own.bucket, f"{own.prefix}x"))
    assert allows(team_data_policy([own]), _object("s3:PutObject", own.bucket, f"{own.prefix}x"))
