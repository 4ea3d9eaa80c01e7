"""Karpenter: the controller's IAM policies (pure) and its AWS and Helm resources under mocks.

Expectations come from Karpenter's own v1.14 getting-started prerequisites, its CloudFormation
template (https://github.com/aws/karpenter-provider-aws/blob/v1.14.1/website/content/en/v1.14/getting-started/getting-started-with-karpenter/cloudformation.yaml),
not from what the component happens to produce.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import versions
from components.config import PlatformConfig, parse_platform_config
from components.karpenter import controller_policies
from synth.engine import ResourceRecord
from synth.run import StackResult
from tests.conftest import STACKS, ProgramRun, stack_data

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
QUEUE = "aws:sqs/queue:Queue"
QUEUE_POLICY = "aws:sqs/queuePolicy:QueuePolicy"
EVENT_RULE = "aws:cloudwatch/eventRule:EventRule"
EVENT_TARGET = "aws:cloudwatch/eventTarget:EventTarget"
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"

# The controller policies of upstream v1.14.1 (cloudformation.yaml, above): the getting-started
# guide's five plus zonal shift.
POLICY_NAMES = {
    "node-lifecycle",
    "iam-integration",
    "eks-integration",
    "zonal-shift",
    "interruption",
    "resource-discovery",
}
# Our policy -> upstream's ManagedPolicy of the same statements (cloudformation.yaml, v1.14.1).
UPSTREAM_POLICIES = {
    "node-lifecycle": "NodeLifecyclePolicy",
    "iam-integration": "IAMIntegrationPolicy",
    "eks-integration": "EKSIntegrationPolicy",
    "zonal-shift": "ZonalShiftPolicy",
    "interruption": "InterruptionPolicy",
    "resource-discovery": "ResourceDiscoveryPolicy",
}
# Every way a statement may differ from upstream's, with why: (policy, Sid, field) -> reason.
ALLOWED_DIFFERENCES = {
    ("iam-integration", "AllowPassingInstanceRole", "Condition"): (
        "upstream also passes the role to ec2.amazonaws.com.cn; the platform builds aws "
        "partition ARNs only"
    ),
}
# The template's KarpenterNodeRole: managed policies of the Karpenter node role, less
# AmazonEKS_CNI_Policy, which the VPC CNI's own Pod Identity role holds (components/iam.py).
NODE_MANAGED_POLICIES = {
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
}
# The template's interruption rules: the queue's EventBridge rules (detail-type -> event source).
INTERRUPTION_EVENTS = {
    "AWS Health Event": "aws.health",
    "EC2 Spot Instance Interruption Warning": "aws.ec2",
    "EC2 Instance Rebalance Recommendation": "aws.ec2",
    "EC2 Instance State-change Notification": "aws.ec2",
    "EC2 Capacity Reservation Instance Interruption Warning": "aws.ec2",
}

EC2_MUTATIONS = (
    "ec2:RunInstances",
    "ec2:CreateFleet",
    "ec2:CreateLaunchTemplate",
    "ec2:CreateTags",
    "ec2:TerminateInstances",
    "ec2:DeleteLaunchTemplate",
)
READ_ONLY_ON_EVERYTHING = (
    "ec2:Describe*",
    "pricing:GetProducts",
    "iam:ListInstanceProfiles",
    "arc-zonal-shift:GetManagedResource",
)
"""The only action patterns that may be granted on ``"Resource": "*"``."""
LAUNCH_INPUT_TYPES = (
    "image",
    "snapshot",
    "security-group",
    "subnet",
    "capacity-reservation",
    "placement-group",
)
"""EC2 resources a launch uses but does not create: allowed without a cluster-tag condition."""

# Inputs of the pure builder: deliberately unlike any stack, so nothing can be hard-coded.
CLUSTER_NAME = "unit-cluster"
REGION = "eu-west-3"
ACCOUNT_ID = "444455556666"
NODE_ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/unit-cluster-karpenter-node"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:unit-cluster"


# -- helpers ---------------------------------------------------------------------------------


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _grants(statement: dict[str, Any], action: str) -> bool:
    """Whether the statement's Action (IAM wildcards, case-insensitive) covers ``action``."""
    return any(
        fnmatch.fnmatchcase(action.lower(), pattern.lower())
        for pattern in _listed(statement.get("Action", []))
    )


def _covers(statement: dict[str, Any], arn: str) -> bool:
    """Whether the statement's Resource (IAM wildcards) covers ``arn``."""
    return any(fnmatch.fnmatchcase(arn, pattern) for pattern in _listed(statement["Resource"]))


def _allow_statements(documents: dict[str, dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for document in documents.values():
        for statement in document["Statement"]:
            if statement["Effect"] == "Allow":
                yield statement


def _cluster_tag_condition(statement: dict[str, Any], cluster_name: str) -> bool:
    """The statement requires the cluster's ``kubernetes.io/cluster/<name>: owned`` tag.

    Only a plain ``StringEquals`` counts: ``...IfExists`` would let untagged resources through.
    """
    equals = statement.get("Condition", {}).get("StringEquals", {})
    return any(
        equals.get(f"aws:{kind}/kubernetes.io/cluster/{cluster_name}") == "owned"
        for kind in ("ResourceTag", "RequestTag")
    )


def _policies() -> dict[str, dict[str, Any]]:
    return controller_policies(CLUSTER_NAME, REGION, ACCOUNT_ID, NODE_ROLE_ARN, QUEUE_ARN)


# -- the pure builder ------------------------------------------------------------------------


def _upstream_policies(reference_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Upstream's controller policies with the template's variables filled in for our cluster."""

    class Loader(yaml.SafeLoader):
        pass

    def tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return {suffix: loader.construct_scalar(node)}
        if isinstance(node, yaml.SequenceNode):
            return {suffix: loader.construct_sequence(node, deep=True)}
        assert isinstance(node, yaml.MappingNode)
        return {suffix: loader.construct_mapping(node, deep=True)}

    Loader.add_multi_constructor("!", tagged)
    path = reference_dir / "aws" / f"karpenter-v{versions.KARPENTER_VERSION}-cloudformation.yaml"
    template = yaml.load(path.read_text(), Loader=Loader)
    variables = {
        "AWS::Partition": "aws",
        "AWS::Region": REGION,
        "AWS::AccountId": ACCOUNT_ID,
        "ClusterName": CLUSTER_NAME,
        "KarpenterNodeRole.Arn": NODE_ROLE_ARN,
        "KarpenterInterruptionQueue.Arn": QUEUE_ARN,
    }
    found = {}
    for name, resource in template["Resources"].items():
        if resource["Type"] != "AWS::IAM::ManagedPolicy":
            continue
        text = resource["Properties"]["PolicyDocument"]["Sub"]
        filled = re.sub(r"\$\{([^}]+)\}", lambda m: variables[m.group(1)], text)
        found[name] = json.loads(filled)["Statement"]
    return found


def _normalized(value: Any) -> Any:
    """A policy field with one-element lists as their element and lists in sorted order."""
    if isinstance(value, list):
        items = [_normalized(v) for v in value]
        return items[0] if len(items) == 1 else sorted(items, key=json.dumps)
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items()}
    return value


def test_controller_policies_are_upstreams_statement_by_statement(reference_dir: Path) -> None:
    """Karpenter's own template at the pinned version (cloudformation.yaml), action by action."""
    upstream = _upstream_policies(reference_dir)
    assert sorted(upstream) == sorted(UPSTREAM_POLICIES.values()), "upstream added a policy"
    ours = _policies()
    unexplained = []
    for name, upstream_name in UPSTREAM_POLICIES.items():
        theirs = {st["Sid"]: st for st in upstream[upstream_name]}
        mine = {st["Sid"]: st for st in ours[name]["Statement"]}
        assert sorted(mine) == sorted(theirs), (name, sorted(mine), sorted(theirs))
        for sid, statement in theirs.items():
            for field in ("Effect", "Action", "Resource", "Condition"):
                if _normalized(statement.get(field)) == _normalized(mine[sid].get(field)):
                    continue
                if (name, sid, field) not in ALLOWED_DIFFERENCES:
                    unexplained.append(
                        (name, sid, field, statement.get(field), mine[sid].get(field))
                    )
    assert unexplained == []
    assert _actions(ours) == _actions({n: {"Statement": s} for n, s in upstream.items()})


def _actions(documents: dict[str, dict[str, Any]]) -> set[str]:
    return {a for d in documents.values() for st in d["Statement"] for a in _listed(st["Action"])}


def test_the_allowed_differences_still_differ(reference_dir: Path) -> None:
    """A listed difference upstream has since closed is stale: drop it from the list."""
    upstream = _upstream_policies(reference_dir)
    ours = _policies()
    for (name, sid, field), reason in ALLOWED_DIFFERENCES.items():
        assert reason
        (theirs,) = [st for st in upstream[UPSTREAM_POLICIES[name]] if st["Sid"] == sid]
        (mine,) = [st for st in ours[name]["Statement"] if st["Sid"] == sid]
        assert _normalized(theirs.get(field)) != _normalized(mine.get(field)), (name, sid)


def test_named_policy_documents() -> None:
    documents = _policies()
    assert set(documents) == POLICY_NAMES
    for name, document in documents.items():
        assert document["Version"] == "2012-10-17", name
        assert document["Statement"], name
        for statement in document["Statement"]:
            assert statement["Effect"] in {"Allow", "Deny"}, (name, statement)
            assert "Action" in statement and "Resource" in statement, (name, statement)


def test_no_allow_grants_every_action_of_a_service() -> None:
    for statement in _allow_statements(_policies()):
        assert "NotAction" not in statement and "NotResource" not in statement, statement
        for action in _listed(statement["Action"]):
            assert action != "*", statement
            assert not action.endswith(":*"), statement


def test_only_reads_are_granted_on_every_resource() -> None:
    unscoped = [s for s in _allow_statements(_policies()) if "*" in _listed(s["Resource"])]
    assert unscoped, "discovery needs ec2:Describe* and pricing:GetProducts on '*'"
    for statement in unscoped:
        for action in _listed(statement["Action"]):
            assert any(
                fnmatch.fnmatchcase(action.lower(), allowed.lower())
                for allowed in READ_ONLY_ON_EVERYTHING
            ), f"{action} on '*' in {statement.get('Sid')}"


def test_ec2_mutations_are_limited_to_launch_inputs_or_the_cluster_tag() -> None:
    launch_input = re.compile(rf"arn:aws:ec2:{REGION}:[^:]*:({'|'.join(LAUNCH_INPUT_TYPES)})/.+")
    granted: set[str] = set()
    for statement in _allow_statements(_policies()):
        mutations = [a for a in EC2_MUTATIONS if _grants(statement, a)]
        if not mutations:
            continue
        granted.update(mutations)
        if all(launch_input.fullmatch(r) for r in _listed(statement["Resource"])):
            continue
        assert _cluster_tag_condition(statement, CLUSTER_NAME), (
            f"{statement.get('Sid')}: {mutations} on {statement['Resource']} without a "
            f"kubernetes.io/cluster/{CLUSTER_NAME} condition"
        )
    # Otherwise the loop above proves nothing.
    assert granted == set(EC2_MUTATIONS)


def test_other_clusters_tags_do_not_satisfy_the_conditions() -> None:
    documents = controller_policies("other-cluster", REGION, ACCOUNT_ID, NODE_ROLE_ARN, QUEUE_ARN)
    tagged = [s for s in _allow_statements(documents) if "Condition" in s]
    assert tagged
    assert not any(_cluster_tag_condition(s, CLUSTER_NAME) for s in tagged)
    text = json.dumps(documents)
    assert f"kubernetes.io/cluster/{CLUSTER_NAME}" not in text
    assert f":cluster/{CLUSTER_NAME}" not in text


def test_pass_role_only_on_the_node_role() -> None:
    passing = [s for s in _allow_statements(_policies()) if _grants(s, "iam:PassRole")]
    assert passing
    for statement in passing:
        assert _listed(statement["Resource"]) == [NODE_ROLE_ARN], statement


@pytest.mark.parametrize("action", ["ec2:RunInstances", "ec2:CreateFleet"])
def test_launches_may_use_placement_groups_and_capacity_reservations(action: str) -> None:
    statements = [s for s in _allow_statements(_policies()) if _grants(s, action)]
    for resource in (
        f"arn:aws:ec2:{REGION}:{ACCOUNT_ID}:placement-group/unit-cluster-p5",
        f"arn:aws:ec2:{REGION}:{ACCOUNT_ID}:capacity-reservation/cr-0a1b2c3d4e5f60718",
    ):
        assert any(_covers(s, resource) for s in statements), f"{action} on {resource}"


@pytest.mark.parametrize(
    "action",
    [
        "ec2:DescribePlacementGroups",
        "ec2:DescribeCapacityReservations",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeSubnets",
        "pricing:GetProducts",
    ],
)
def test_discovery_reads_are_allowed(action: str) -> None:
    assert any(_grants(s, action) for s in _allow_statements(_policies())), action


def test_ami_parameters_are_readable() -> None:
    parameter = (
        f"arn:aws:ssm:{REGION}::parameter/aws/service/eks/optimized-ami/1.34/"
        "amazon-linux-2023/x86_64/nvidia/recommended/image_id"
    )
    readers = [s for s in _allow_statements(_policies()) if _grants(s, "ssm:GetParameter")]
    assert any(_covers(s, parameter) for s in readers)


def test_describe_cluster_only_on_this_cluster() -> None:
    describing = [s for s in _allow_statements(_policies()) if _grants(s, "eks:DescribeCluster")]
    assert describing
    expected = f"arn:aws:eks:{REGION}:{ACCOUNT_ID}:cluster/{CLUSTER_NAME}"
    for statement in describing:
        assert _listed(statement["Resource"]) == [expected], statement


def test_queue_actions_only_on_the_interruption_queue() -> None:
    statements = list(_allow_statements(_policies()))
    queue_statements = [
        s for s in statements if any(a.lower().startswith("sqs:") for a in _listed(s["Action"]))
    ]
    assert queue_statements
    for statement in queue_statements:
        assert _listed(statement["Resource"]) == [QUEUE_ARN], statement
    for action in ("sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"):
        assert any(_grants(s, action) for s in queue_statements), action


# -- under mocks -----------------------------------------------------------------------------


class KarpenterRun:
    """One stack's Karpenter component: its children, by type, plus the stack's config."""

    def __init__(self, stack: str, run: ProgramRun) -> None:
        self.stack = stack
        self.run = run
        self.config: PlatformConfig = parse_platform_config(stack_data(stack))
        component = run.one("trainingplatform:index:Karpenter")
        self.children = [r for r in run.records if r.parent == component.urn]

    def of_type(self, resource_type: str) -> list[ResourceRecord]:
        return [r for r in self.children if r.type == resource_type]

    def only(self, resource_type: str) -> ResourceRecord:
        found = self.of_type(resource_type)
        assert len(found) == 1, f"expected one {resource_type}: {[r.name for r in found]}"
        return found[0]

    def release(self, name: str) -> ResourceRecord:
        found = [r for r in self.of_type(HELM_RELEASE) if r.inputs.get("name") == name]
        assert len(found) == 1, f"expected one Helm release {name!r}"
        return found[0]

    def by_urn(self, urn: str) -> ResourceRecord:
        return self.run.by_urn(urn)

    def source_of(self, record: ResourceRecord, key: str) -> ResourceRecord:
        """The one resource an input of ``record`` was computed from."""
        urns = record.property_dependencies.get(key, [])
        assert len(urns) == 1, f"{record.name}.{key} comes from {urns}"
        return self.by_urn(urns[0])

    def queue_arn(self) -> str:
        """The queue's ARN as the program passes it on (every event target's ``arn``)."""
        queue = self.only(QUEUE)
        targets = self.of_type(EVENT_TARGET)
        assert targets
        arns = {str(t.inputs["arn"]) for t in targets}
        assert len(arns) == 1, arns
        assert all(self.source_of(t, "arn").urn == queue.urn for t in targets)
        return arns.pop()

    def node_role(self) -> ResourceRecord:
        entry = self.only(ACCESS_ENTRY)
        role = self.source_of(entry, "principalArn")
        assert role.type == ROLE
        return role

    def controller_role(self) -> ResourceRecord:
        association = self.only(POD_IDENTITY)
        role = self.source_of(association, "roleArn")
        assert role.type == ROLE
        return role


@pytest.fixture(scope="module", params=STACKS)
def karpenter(request: pytest.FixtureRequest, synthesized: dict[str, StackResult]) -> KarpenterRun:
    return KarpenterRun(request.param, ProgramRun(synthesized[request.param].records))


def test_interruption_queue_retention_and_encryption(karpenter: KarpenterRun) -> None:
    queue = karpenter.only(QUEUE)
    assert queue.inputs["messageRetentionSeconds"] == 300
    assert queue.inputs["sqsManagedSseEnabled"] is True


def test_queue_policy_is_attached_to_the_interruption_queue(karpenter: KarpenterRun) -> None:
    # The policy's queueUrl is the queue's ``url`` output. A plan where it is missing cannot show
    # which queue the TLS-only policy protects.
    queue_policy = karpenter.only(QUEUE_POLICY)
    assert "queueUrl" in queue_policy.inputs, (
        "queueUrl missing from the recorded plan: the mocks return no `url` for "
        "aws:sqs/queue:Queue, so every input built from it is dropped"
    )
    assert karpenter.source_of(queue_policy, "queueUrl").urn == karpenter.only(QUEUE).urn


def test_queue_policy_lets_eventbridge_send_and_denies_plain_http(karpenter: KarpenterRun) -> None:
    queue_policy = karpenter.only(QUEUE_POLICY)
    queue_arn = karpenter.queue_arn()
    statements = json.loads(queue_policy.inputs["policy"])["Statement"]
    denies = [
        s
        for s in statements
        if s["Effect"] == "Deny"
        and s["Principal"] in ("*", {"AWS": "*"})
        and "sqs:*" in _listed(s["Action"])
        and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
    ]
    assert len(denies) == 1, statements
    assert _listed(denies[0]["Resource"]) == [queue_arn]
    sends = [
        s
        for s in statements
        if s["Effect"] == "Allow"
        and "events.amazonaws.com" in _listed(s["Principal"]["Service"])
        and _grants(s, "sqs:SendMessage")
    ]
    assert sends and all(_listed(s["Resource"]) == [queue_arn] for s in sends)


def test_five_interruption_rules_each_into_the_queue(karpenter: KarpenterRun) -> None:
    rules = karpenter.of_type(EVENT_RULE)
    assert len(rules) == 5
    patterns: dict[str, list[str]] = {}
    for rule in rules:
        pattern = json.loads(rule.inputs["eventPattern"])
        (detail_type,) = pattern["detail-type"]
        patterns[detail_type] = pattern["source"]
    assert patterns == {detail: [source] for detail, source in INTERRUPTION_EVENTS.items()}

    queue = karpenter.only(QUEUE)
    targets = karpenter.of_type(EVENT_TARGET)
    for rule in rules:
        into = [t for t in targets if t.property_dependencies.get("rule") == [rule.urn]]
        assert len(into) == 1, f"{rule.name} has {len(into)} targets"
        assert karpenter.source_of(into[0], "arn").urn == queue.urn


def test_controller_identity_through_pod_identity(karpenter: KarpenterRun) -> None:
    association = karpenter.only(POD_IDENTITY)
    assert association.inputs["namespace"] == "kube-system"
    assert association.inputs["serviceAccount"] == "karpenter"
    assert association.inputs["clusterName"] == karpenter.config.name
    trust = json.loads(karpenter.controller_role().inputs["assumeRolePolicy"])
    trusted = [
        s
        for s in trust["Statement"]
        if s["Effect"] == "Allow"
        and _listed(s["Principal"].get("Service")) == ["pods.eks.amazonaws.com"]
    ]
    assert len(trusted) == 1, trust
    assert {"sts:AssumeRole", "sts:TagSession"} <= set(_listed(trusted[0]["Action"]))


def test_chart_service_account_is_the_associated_one(karpenter: KarpenterRun) -> None:
    association = karpenter.only(POD_IDENTITY)
    controller = karpenter.release("karpenter")
    account = controller.inputs["values"].get("serviceAccount", {}).get("name") or "karpenter"
    assert account == association.inputs["serviceAccount"]
    assert controller.inputs["namespace"] == association.inputs["namespace"]


def test_six_inline_policies_on_the_controller_role(karpenter: KarpenterRun) -> None:
    controller_role = karpenter.controller_role()
    attached = [
        p
        for p in karpenter.run.of_type(ROLE_POLICY)
        if p.property_dependencies.get("role") == [controller_role.urn]
    ]
    assert len(attached) == 6
    assert {p.inputs["name"] for p in attached} == POLICY_NAMES
    assert not [
        a
        for a in karpenter.run.of_type(ATTACHMENT)
        if a.property_dependencies.get("role") == [controller_role.urn]
    ], "the controller gets its six scoped policies and no managed ones"
    # Each is the builder's document for this cluster, node role and queue.
    config = karpenter.config
    node_role_arn = karpenter.only(ACCESS_ENTRY).inputs["principalArn"]
    expected = controller_policies(
        config.name, config.region, config.account_id, node_role_arn, karpenter.queue_arn()
    )
    for policy in attached:
        assert json.loads(policy.inputs["policy"]) == expected[policy.inputs["name"]]


def test_node_role_has_an_ec2_linux_access_entry_and_the_node_policies(
    karpenter: KarpenterRun,
) -> None:
    entry = karpenter.only(ACCESS_ENTRY)
    assert entry.inputs["type"] == "EC2_LINUX"
    assert entry.inputs["clusterName"] == karpenter.config.name
    node_role = karpenter.node_role()
    trust = json.loads(node_role.inputs["assumeRolePolicy"])
    assert [_listed(s["Principal"]["Service"]) for s in trust["Statement"]] == [
        ["ec2.amazonaws.com"]
    ]
    attached = {
        a.inputs["policyArn"]
        for a in karpenter.run.of_type(ATTACHMENT)
        if a.property_dependencies.get("role") == [node_role.urn]
    }
    assert attached == {f"arn:aws:iam::aws:policy/{name}" for name in NODE_MANAGED_POLICIES}


@pytest.mark.parametrize(
    ("release_name", "chart"),
    [
        ("karpenter-crd", "oci://public.ecr.aws/karpenter/karpenter-crd"),
        ("karpenter", "oci://public.ecr.aws/karpenter/karpenter"),
    ],
)
def test_charts_from_the_karpenter_oci_registry(
    karpenter: KarpenterRun, release_name: str, chart: str
) -> None:
    release = karpenter.release(release_name)
    assert release.inputs["chart"] == chart
    assert release.inputs["version"] == versions.KARPENTER_VERSION
    assert release.inputs["namespace"] == "kube-system"
    assert "repositoryOpts" not in release.inputs, "OCI charts take no repository"


def test_controller_release_waits_for_crds_identity_and_permissions(
    karpenter: KarpenterRun,
) -> None:
    controller = karpenter.release("karpenter")
    assert karpenter.release("karpenter-crd").urn in controller.dependencies
    assert karpenter.only(POD_IDENTITY).urn in controller.dependencies
    for policy in karpenter.of_type(ROLE_POLICY):
        assert policy.urn in controller.dependencies, policy.name


def test_controller_values_name_the_cluster_and_the_queue(karpenter: KarpenterRun) -> None:
    controller = karpenter.release("karpenter")
    queue = karpenter.only(QUEUE)
    settings = controller.inputs["values"]["settings"]
    assert settings["clusterName"] == karpenter.config.name
    assert settings["interruptionQueue"] == queue.inputs["name"]
    assert queue.urn in controller.property_dependencies["values"], "the queue's name output"


def test_controller_runs_on_system_nodes(karpenter: KarpenterRun) -> None:
    selector = karpenter.release("karpenter").inputs["values"]["nodeSelector"]
    labels = karpenter.run.one("aws:eks/nodeGroup:NodeGroup").inputs["labels"]
    assert selector, "the controller must not run on nodes it manages"
    assert selector.items() <= labels.items()


def test_every_helm_release_uses_the_kubernetes_provider(karpenter: KarpenterRun) -> None:
    releases = karpenter.run.of_type(HELM_RELEASE)
    assert len(releases) >= 2
    for release in releases:
        assert release.provider, release.name
        assert karpenter.by_urn(release.provider).type == KUBERNETES_PROVIDER, release.name
