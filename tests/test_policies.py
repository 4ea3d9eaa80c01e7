"""The policy pack: each policy passes real synthesized resources and catches one changed property.

Every case starts from a stack's synthesized resources, changes one thing on one resource (or the
provider, or the protect flag), and runs one policy the way the analyzer would.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import Policy

from components import kuberay, versions
from components.node_pools import LUSTRE_CLIENT_LABEL
from policies.offline import (
    PolicyConfigError,
    evaluate,
    load_policy_config,
    mandatory,
)
from policies.rules import ALL_POLICIES, tenancy
from policies.rules.governance import accepts_tags
from synth.__main__ import main as synth_main
from synth.engine import UNKNOWN, ResourceRecord
from synth.run import StackResult
from synth.stackfile import REPOSITORY_ROOT
from tests.conftest import STACKS

POLICIES = {policy.name: policy for policy in ALL_POLICIES}
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
HELM = "kubernetes:helm.sh/v3:Release"
NODE_SET = "kubernetes:slinky.slurm.net/v1beta1:NodeSet"
POOL_LABEL = "trainingplatform.io/pool"
MARIADB = "kubernetes:k8s.mariadb.com/v1alpha1:MariaDB"
Entry = dict[str, Any]
Mutation = Callable[[Entry], None]


PolicyRun = Callable[[Policy, str], list[Any]]


def _records(result: StackResult) -> list[Entry]:
    """A stack's records as JSON entries, to edit: a deep copy (by JSON, which they are)."""
    entries: list[Entry] = json.loads(json.dumps([r.to_json() for r in result.records]))
    return entries


@pytest.fixture(scope="session")
def as_synthesized(synthesized: dict[str, StackResult]) -> PolicyRun:
    """One policy's findings on a stack as synthesized, with its config: once a session.

    Many parametrized tests first show their policy passes every stack as it is; the answer
    is the same for each of their cases.
    """

    @functools.cache
    def run(policy: Policy, stack: str) -> list[Any]:
        return evaluate(synthesized[stack].records, load_policy_config(stack), policies=[policy])

    return run


def eks_cluster_entry(component: Entry) -> Entry:
    """The aws:eks/cluster:Cluster that pulumi-eks creates from its component's inputs."""
    inputs = component["inputs"]
    return {
        **component,
        "type": "aws:eks/cluster:Cluster",
        "urn": component["urn"] + "$aws:eks/cluster:Cluster::" + component["name"] + "-eksCluster",
        "name": component["name"] + "-eksCluster",
        "parent": component["urn"],
        "provider": component["providers"]["aws"],
        "providers": {},
        "custom": True,
        "inputs": {
            "name": inputs["name"],
            "version": inputs["version"],
            "vpcConfig": {
                "endpointPrivateAccess": inputs["endpointPrivateAccess"],
                "endpointPublicAccess": inputs["endpointPublicAccess"],
                **(
                    {"publicAccessCidrs": inputs["publicAccessCidrs"]}
                    if "publicAccessCidrs" in inputs
                    else {}
                ),
                "subnetIds": inputs["privateSubnetIds"],
            },
            "encryptionConfig": {
                "provider": {"keyArn": inputs["encryptionConfigKeyArn"]},
                "resources": ["secrets"],
            },
            "enabledClusterLogTypes": inputs["enabledClusterLogTypes"],
            "accessConfig": {"authenticationMode": inputs["authenticationMode"]},
        },
    }


def _run_policy(policy: Policy, entries: list[Entry], stack: str) -> list[Any]:
    records = [ResourceRecord.from_json(entry) for entry in entries]
    config = load_policy_config(stack)
    return evaluate(records, config, policies=[policy])


def _target(entries: list[Entry], resource_type: str, name_contains: str) -> Entry:
    if resource_type == "aws:eks/cluster:Cluster":
        component = _target(entries, "eks:index:Cluster", "")
        entry = eks_cluster_entry(component)
        entries.append(entry)
        return entry
    if name_contains.startswith("="):
        found = [
            e for e in entries if e["type"] == resource_type and e["name"] == name_contains[1:]
        ]
    else:
        found = [e for e in entries if e["type"] == resource_type and name_contains in e["name"]]
    assert found, f"no {resource_type} *{name_contains}*"
    return found[0]


def at(path: str, value: Any) -> Mutation:
    """Set inputs at a dotted path (list indexes as numbers; "|" separates keys with dots)."""

    def mutate(entry: Entry) -> None:
        node: Any = entry["inputs"]
        *parents, last = path.split("|" if "|" in path else ".")
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        if value is _DELETE:
            del node[last]
        else:
            node[int(last) if last.isdigit() else last] = value

    return mutate


_DELETE = object()


def unprotect(entry: Entry) -> None:
    entry["protect"] = False


def policy_json(path: str, value: Any) -> Mutation:
    """Change a field of the first statement of a JSON policy document input."""

    def mutate(entry: Entry) -> None:
        document = json.loads(entry["inputs"]["policy"])
        document["Statement"][0][path] = value
        entry["inputs"]["policy"] = json.dumps(document)

    return mutate


# (policy, stack, resource type, name fragment, mutation, words in the violation)
CASES: list[tuple[str, str, str, str, Mutation, str]] = [
    ("eks-endpoint-not-public", "prod", "eks:index:Cluster", "", at("endpointPublicAccess", True), "endpoint is public"),
    ("eks-endpoint-not-public", "prod", "eks:index:Cluster", "", at("endpointPublicAccess", _DELETE), "endpoint is public"),
    ("eks-endpoint-not-public", "dev", "eks:index:Cluster", "", at("publicAccessCidrs", ["0.0.0.0/0"]), "admits 0.0.0.0/0"),
    ("eks-endpoint-not-public", "prod", "aws:eks/cluster:Cluster", "", at("vpcConfig.endpointPublicAccess", True), "endpoint is public"),
    ("eks-secrets-encrypted", "prod", "eks:index:Cluster", "", at("encryptionConfigKeyArn", _DELETE), "not encrypted with a customer KMS key"),
    ("eks-secrets-encrypted", "prod", "eks:index:Cluster", "", at("encryptionConfigKeyArn", "arn:aws:kms:us-east-1:333344445555:alias/aws/eks"), "AWS managed"),
    ("eks-secrets-encrypted", "prod", "eks:index:Cluster", "", at("encryptionConfigKeyArn", "alias/aws/eks"), "AWS managed"),
    ("eks-secrets-encrypted", "prod", "aws:eks/cluster:Cluster", "", at("encryptionConfig.provider.keyArn", "alias/aws/eks"), "AWS managed"),
    ("eks-secrets-encrypted", "prod", "aws:eks/cluster:Cluster", "", at("encryptionConfig.resources", []), "not envelope-encrypted"),
    ("eks-control-plane-logs", "prod", "eks:index:Cluster", "", at("enabledClusterLogTypes", ["api"]), "audit, authenticator"),
    ("eks-control-plane-logs", "prod", "aws:eks/cluster:Cluster", "", at("enabledClusterLogTypes", _DELETE), "api, audit, authenticator"),
    ("eks-authentication-mode-api", "prod", "eks:index:Cluster", "", at("authenticationMode", "API_AND_CONFIG_MAP"), "API_AND_CONFIG_MAP; use API"),
    ("eks-authentication-mode-api", "prod", "aws:eks/cluster:Cluster", "", at("accessConfig", _DELETE), "CONFIG_MAP (default)"),
    ("eks-supported-version", "prod", "eks:index:Cluster", "", at("version", "1.29"), "1.29 is not supported"),
    ("eks-supported-version", "prod", "aws:eks/cluster:Cluster", "", at("version", _DELETE), "no Kubernetes version is pinned"),
    ("node-imdsv2-hop-limit-1", "prod", "aws:ec2/launchTemplate:LaunchTemplate", "", at("metadataOptions.httpTokens", "optional"), "httpTokens is 'optional'"),
    ("node-imdsv2-hop-limit-1", "prod", "aws:ec2/launchTemplate:LaunchTemplate", "", at("metadataOptions.httpPutResponseHopLimit", 2), "HopLimit is 2"),
    ("node-volumes-encrypted", "prod", "aws:ec2/launchTemplate:LaunchTemplate", "", at("blockDeviceMappings.0.ebs.encrypted", "false"), "blockDeviceMappings[0].ebs is not encrypted"),
    ("node-imdsv2-hop-limit-1", "prod", "aws:eks/nodeGroup:NodeGroup", "", at("launchTemplate", _DELETE), "no launch template"),
    ("node-volumes-encrypted", "prod", "aws:eks/nodeGroup:NodeGroup", "", at("launchTemplate", _DELETE), "diskSize volume is encrypted only if"),
    ("node-no-public-ip", "prod", "eks:index:Cluster", "", at("nodeAssociatePublicIpAddress", True), "nodeAssociatePublicIpAddress"),
    ("node-no-public-ip", "prod", "aws:ec2/eip:Eip", "", at("instance", "i-0123456789abcdef0"), "Elastic IP is attached"),
    ("node-no-public-ip", "prod", "aws:ec2/subnet:Subnet", "private", at("mapPublicIpOnLaunch", True), "public IP address"),
    ("node-no-public-ip", "prod", "aws:ec2/launchTemplate:LaunchTemplate", "", at("networkInterfaces", [{"associatePublicIpAddress": "true"}]), "networkInterfaces[0]"),
    ("iam-no-wildcard-actions", "prod", "aws:iam/rolePolicy:RolePolicy", "flow-logs", policy_json("Action", ["logs:*"]), "wildcard action 'logs:*'"),
    ("iam-no-wildcard-actions", "prod", "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "system-node", at("policyArn", "arn:aws:iam::aws:policy/AdministratorAccess"), "AdministratorAccess"),
    ("iam-no-wildcard-resources", "prod", "aws:iam/rolePolicy:RolePolicy", "secrets-key", policy_json("Resource", "*"), "on every resource"),
    ("iam-no-wildcard-resources", "prod", "aws:iam/rolePolicy:RolePolicy", "flow-logs", policy_json("Resource", "arn:aws:logs:*:*:*"), "on every resource"),
    ("iam-no-wildcard-resources", "prod", "aws:iam/rolePolicy:RolePolicy", "flow-logs", policy_json("NotResource", "arn:aws:s3:::nothing"), "every resource but NotResource"),
    ("kms-key-rotation", "prod", "aws:kms/key:Key", "", at("enableKeyRotation", False), "rotation is off"),
    ("required-tags", "prod", "aws:ec2/vpc:Vpc", "", at("tags", {"owner": ""}), "'owner'"),
    ("stateful-resources-protected", "prod", "aws:kms/key:Key", "", unprotect, "must be protected"),
    ("stateful-resources-protected", "prod", "eks:index:Cluster", "", unprotect, "must be protected"),
    ("nodepool-limits", "prod", NODE_POOL, "=pools-p5", at("spec.limits", {}), "no nodes or cpu limit"),
    ("nodepool-limits", "prod", NODE_POOL, "=pools-p5", at("spec|limits|nvidia.com/gpu", _DELETE), "no nvidia.com/gpu limit"),
    ("nodepool-limits", "prod", NODE_POOL, "=pools-trn2", at("spec|limits|aws.amazon.com/neuron", _DELETE), "no aws.amazon.com/neuron limit"),
    ("accelerator-pools-tainted", "prod", NODE_POOL, "=pools-p5", at("spec.template.spec.taints", []), "nvidia.com/gpu:NoSchedule"),
    ("accelerator-pools-tainted", "prod", NODE_POOL, "=pools-trn2", at("spec.template.spec.taints.0.effect", "PreferNoSchedule"), "aws.amazon.com/neuron:NoSchedule"),
    ("training-pools-not-disrupted-while-busy", "prod", NODE_POOL, "=pools-p5", at("spec.disruption.consolidationPolicy", "WhenEmptyOrUnderutilized"), "only be consolidated when empty"),
    ("training-pools-not-disrupted-while-busy", "prod", NODE_POOL, "=pools-p5", at("spec.template.spec.expireAfter", "720h"), "must never expire"),
    ("training-pools-not-disrupted-while-busy", "prod", NODE_POOL, "=pools-trn2", at("spec.disruption.budgets", [{"nodes": "10%"}]), "drift"),
    ("ami-alias-pinned", "prod", NODE_CLASS, "=pools-p5-class", at("spec.amiSelectorTerms", [{"alias": "al2023@latest"}]), "pin @vYYYYMMDD"),
    ("ami-alias-pinned", "prod", NODE_CLASS, "=pools-p5-class", at("spec.amiSelectorTerms", [{"name": "amazon-eks-node-al2023-x86_64-nvidia-1.35-*", "owner": "amazon"}]), "matches every future release"),
    ("ami-alias-pinned", "prod", NODE_CLASS, "=pools-p5-class", at("spec.amiSelectorTerms", [{"ssmParameter": "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/recommended/image_id"}]), "follows each release"),
    ("ami-alias-pinned", "prod", NODE_CLASS, "=pools-p5-class", at("spec.amiSelectorTerms", [{"tags": {"team": "ml-platform"}}]), "tags alone"),
    ("karpenter-interruption-queue", "prod", HELM, "=karpenter", at("values.settings.interruptionQueue", ""), "no interruption queue"),
    ("efa-pool-fabric", "prod", NODE_CLASS, "=pools-p5-class", at("spec.placementGroupSelector", _DELETE), "no placementGroupSelector"),
    ("efa-pool-fabric", "prod", NODE_CLASS, "=pools-trn2-class", at("spec.placementGroupSelector.name", "someone-elses-group"), "not a cluster placement group this stack creates"),
    ("efa-pool-fabric", "prod", NODE_POOL, "=pools-p5en", at("spec.template.spec.requirements.2.values", ["us-east-1a", "us-east-1d"]), "pin exactly one"),
    ("slurm-auth-keys-managed", "prod", HELM, "=slurm", at("values.slurmKey.create", True), "generated by the chart"),
    ("slurm-auth-keys-managed", "prod", HELM, "=slurm", at("values.jwtKey", {}), "generated by the chart"),
    ("slurm-auth-keys-managed", "prod", HELM, "=slurm", at("values.jwtKey.secretRef", {}), "names no Secret"),
    ("slurm-login-private", "prod", HELM, "=slurm", at("values.loginsets.login.service.metadata.annotations", {}), "internet-facing"),
    ("slurm-login-private", "prod", HELM, "=slurm", at("values.loginsets.login.service.spec", {}), "open to any address"),
    ("slurm-login-private", "prod", HELM, "=slurm", at("values.loginsets.login.service.spec.loadBalancerSourceRanges", ["10.40.0.0/16", "0.0.0.0/0"]), "open to any address"),
    ("slurm-login-private", "prod", HELM, "=slurm", at("values.loginsets.login.service.spec.type", "NodePort"), "port of every node"),
    ("slurm-images-pinned", "prod", HELM, "=slurm", at("values.controller.logfile", {}), "default is alpine:latest"),
    ("slurm-images-pinned", "prod", HELM, "=slurm", at("values.loginsets.login.initconf.image", {"repository": "docker.io/library/alpine", "tag": "latest"}), "not pinned"),
    ("slurm-images-pinned", "prod", HELM, "=slurm", at("values.controller.slurmctld.image", "ghcr.io/slinkyproject/slurmctld"), "not pinned"),
    ("slurm-images-pinned", "prod", NODE_SET, "nodeset-p5en", at("spec.slurmd.image", "ghcr.io/example/slurmd:main"), "not pinned"),
    ("slurm-images-pinned", "prod", MARIADB, "", at("spec.image", "docker.io/library/mariadb"), "not pinned"),
    ("slurm-node-sets-take-whole-nodes", "prod", NODE_SET, "nodeset-p5en", at("spec|slurmd|resources|requests|nvidia.com/gpu", "4"), "requests 4 nvidia.com/gpu on p5en.48xlarge, which has 8"),
    ("slurm-node-sets-take-whole-nodes", "prod", NODE_SET, "nodeset-trn2", at("spec|slurmd|resources|requests|vpc.amazonaws.com/efa", "1"), "requests 1 EFA interfaces; the pool's nodes have 16"),
    ("slurm-node-sets-take-whole-nodes", "prod", NODE_SET, "nodeset-p5", at("spec.template.spec.tolerations", []), "does not tolerate the pool's taint nvidia.com/gpu"),
    ("slurm-node-sets-take-whole-nodes", "prod", NODE_SET, "nodeset-p5", at("spec.template.spec.nodeSelector", {}), "not pinned to a node pool"),
    ("slurm-partitions-time-limited", "prod", NODE_SET, "nodeset-p5en", at("spec.partition.config", "State=UP MaxTime=UNLIMITED DefaultTime=04:00:00 DefMemPerCPU=1"), "partition p5en has no finite MaxTime (UNLIMITED)"),
    ("slurm-partitions-time-limited", "prod", NODE_SET, "nodeset-p5en", at("spec.partition.config", "State=UP DefMemPerCPU=1"), "no finite MaxTime (unset)"),
    ("slurm-partitions-time-limited", "prod", NODE_SET, "nodeset-trn2", at("spec.partition.config", "State=UP MaxTime=2-00:00:00 DefMemPerCPU=1"), "partition trn2 has no DefaultTime"),
    ("slurm-partitions-time-limited", "prod", NODE_SET, "nodeset-trn2", at("spec.partition.config", "State=UP MaxTime=1-00:00:00 DefaultTime=2-00:00:00"), "DefaultTime exceeds its MaxTime"),
    ("slurm-partitions-time-limited", "prod", HELM, "=slurm", at("values.controller.extraConfMap.SchedulerParameters", ["bf_continue"]), "beyond backfill's horizon (bf_window=1440 min in SchedulerParameters)"),
    ("slurm-partitions-time-limited", "prod", HELM, "=slurm", at("values.controller.extraConf", "SchedulerParameters=bf_window=600 # the text form wins\nPrivateData=jobs"), "beyond backfill's horizon (bf_window=600 min in"),
    ("slurm-partitions-time-limited", "prod", HELM, "=slurm", at("values.partitions", {"all": {"nodesets": ["ALL"], "config": "State=UP DefMemPerCPU=1"}}), "partition all (slurm chart partitions) has no finite MaxTime"),
    ("slurm-partitions-time-limited", "prod", HELM, "=slurm", at("values.partitions", {"all": {"nodesets": ["ALL"], "config": {"State": "UP", "MaxTime": "INFINITE"}}}), "partition all (slurm chart partitions) has no finite MaxTime"),
    ("slurm-jobs-share-nodes-by-request", "prod", NODE_SET, "nodeset-p5", at("spec.partition.config", "State=UP MaxTime=2-00:00:00 DefaultTime=04:00:00 Default=YES"), "partition p5 sets none of DefMemPerGPU, DefMemPerCPU, DefMemPerNode"),
    ("slurm-jobs-share-nodes-by-request", "prod", HELM, "=slurm", at("values.partitions", {"all": {"nodesets": ["ALL"], "config": "MaxTime=60 DefaultTime=60"}}), "partition all (slurm chart partitions) sets none of"),
    ("slurm-private-data", "prod", HELM, "=slurm", at("values.controller.extraConfMap.PrivateData", ["jobs"]), "slurm.conf's PrivateData leaves other users' account, usage data visible"),
    ("slurm-private-data", "prod", HELM, "=slurm", at("values.controller.extraConfMap.PrivateData", _DELETE), "leaves other users' account, job, usage data visible to every user"),
    ("slurm-private-data", "prod", HELM, "=slurm", at("values.controller.extraConf", "PrivateData=jobs,usage\nMetricsParameters=ignore_private_data"), "leaves other users' account data visible"),
    ("slurm-private-data", "prod", HELM, "=slurm", at("values.controller.extraConfMap.MetricsParameters", _DELETE), "need MetricsParameters=ignore_private_data"),
    ("slurm-private-data", "prod", HELM, "=slurm", at("values.controller.extraConfMap.PrivateData", "Job,Usage"), "leaves other users' account data visible"),
    ("slurm-private-data", "prod", HELM, "=slurm", at("values.controller.extraConfMap.MetricsAuthUsers", "alice"), "without MetricsAuthUsers"),
    ("slurm-private-data", "dev", HELM, "=slurm", at("values.accounting.extraConfMap", {}), "slurmdbd.conf's PrivateData leaves other users' account, job, usage data visible"),
    ("slurm-private-data", "prod", HELM, "=slurm", at("values.accounting.extraConf", "CommitDelay=1"), "slurmdbd.conf's PrivateData"),
    ("slurm-accounting-durable", "prod", MARIADB, "", at("spec.storage.ephemeral", True), "ephemeral storage"),
    ("slurm-accounting-durable", "prod", MARIADB, "", at("spec.storage.storageClassName", "gp2-legacy"), "not one this stack creates"),
    ("slurm-accounting-durable", "prod", MARIADB, "", at("spec.storage.volumeClaimTemplate", {"storageClassName": "gp2-legacy", "resources": {"requests": {"storage": "100Gi"}}}), "not one this stack creates"),
    ("slurm-accounting-durable", "prod", MARIADB, "", at("spec.rootEmptyPassword", True), "empty password"),
    ("slurm-accounting-durable", "prod", MARIADB, "", at("spec.passwordSecretKeyRef", _DELETE), "passwordSecretKeyRef names no Secret"),
    ("stateful-resources-protected", "prod", MARIADB, "", unprotect, "must be protected"),
]  # fmt: skip


def _node_set_into_chart_values(entries: list[Entry], name: str) -> tuple[Entry, Entry]:
    """Move NodeSet ``name`` into the slurm chart's ``nodesets`` values (the chart's own form)."""
    (node_set,) = [
        e for e in entries if e["type"] == NODE_SET and e["inputs"]["metadata"]["name"] == name
    ]
    entries.remove(node_set)
    spec = node_set["inputs"]["spec"]
    release = _target(entries, HELM, "=slurm")
    release["inputs"]["values"].setdefault("nodesets", {})[name] = {
        "replicas": spec["replicas"],
        "slurmd": spec["slurmd"],
        "logfile": spec["logfile"],
        "podSpec": spec["template"]["spec"],
    }
    return release, release["inputs"]["values"]["nodesets"][name]


SLURM_SET_POLICIES = ("slurm-node-sets-take-whole-nodes", "slurm-images-pinned", "queues-fit-pools")


@pytest.mark.parametrize(
    ("change", "policy", "words"),
    [
        (lambda v: v["slurmd"]["resources"]["requests"].update({"nvidia.com/gpu": "4"}),
         "slurm-node-sets-take-whole-nodes",
         "node set p5 (slurm chart values) requests 4 nvidia.com/gpu on p5.48xlarge"),
        (lambda v: v["podSpec"].update(nodeSelector={"kubernetes.io/os": "linux"}),
         "slurm-node-sets-take-whole-nodes", "not pinned to a node pool"),
        (lambda v: v.pop("logfile"), "slurm-images-pinned",
         "nodesets.p5.logfile.image is unset: the chart's default is alpine:latest"),
        (lambda v: v["slurmd"].update(image="ghcr.io/slinkyproject/slurmd:latest"),
         "slurm-images-pinned", "not pinned"),
        # On the teams' own p5 nodes, 14 replicas hold 112 GPUs of theirs.
        (lambda v: (v["podSpec"]["nodeSelector"].pop("trainingplatform.io/reserved-for"),
                    v.update(replicas=14)),
         "queues-fit-pools", "Slurm node sets on them hold 112"),
    ],
)  # fmt: skip
def test_node_sets_in_the_slurm_charts_values_are_checked(
    synthesized: dict[str, StackResult], change: Callable[[Entry], Any], policy: str, words: str
) -> None:
    entries = _records(synthesized["prod"])
    release, values = _node_set_into_chart_values(entries, "p5")
    for name in SLURM_SET_POLICIES:
        assert _run_policy(POLICIES[name], entries, "prod") == [], name
    change(values)
    findings = _run_policy(POLICIES[policy], entries, "prod")
    assert findings and any(words in f.message for f in findings), [f.message for f in findings]
    if policy != "queues-fit-pools":
        assert {f.urn for f in findings} == {release["urn"]}


def test_a_disabled_node_set_in_chart_values_is_not_checked(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["prod"])
    _, values = _node_set_into_chart_values(entries, "p5")
    values["slurmd"]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    values["enabled"] = False
    assert _run_policy(POLICIES["slurm-node-sets-take-whole-nodes"], entries, "prod") == []


@pytest.mark.parametrize(
    "chart", ["./charts/slurm-1.2.1.tgz", "oci://ghcr.io/slinkyproject/charts/slurm"]
)
def test_slurm_rules_read_the_chart_however_it_is_named(
    synthesized: dict[str, StackResult], chart: str
) -> None:
    entries = _records(synthesized["prod"])
    release = _target(entries, HELM, "=slurm")
    release["inputs"]["chart"] = chart
    release["inputs"]["values"]["slurmKey"]["create"] = True
    findings = _run_policy(POLICIES["slurm-auth-keys-managed"], entries, "prod")
    assert [f.urn for f in findings] == [release["urn"]]
    release["type"] = "kubernetes:helm.sh/v4:Chart"
    findings = _run_policy(POLICIES["slurm-auth-keys-managed"], entries, "prod")
    assert [f.urn for f in findings] == [release["urn"]]


def test_karpenter_as_a_helm_v4_chart_needs_its_queue(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    release = _target(entries, HELM, "=karpenter")
    release.update(type="kubernetes:helm.sh/v4:Chart")
    release["inputs"]["chart"] = "oci://public.ecr.aws/karpenter/karpenter"
    assert _run_policy(POLICIES["karpenter-interruption-queue"], entries, "prod") == []
    release["inputs"]["values"]["settings"].pop("interruptionQueue")
    findings = _run_policy(POLICIES["karpenter-interruption-queue"], entries, "prod")
    assert [f.urn for f in findings] == [release["urn"]]


def _login_service(ports: list[Entry], **spec: Any) -> Entry:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "login-ssh", "namespace": "slurm"},
        "spec": {"ports": ports, "selector": {"app.kubernetes.io/name": "login"}, **spec},
    }


@pytest.mark.parametrize(
    ("inputs", "words"),
    [
        (_login_service([{"port": 22}], type="LoadBalancer"), "internet-facing"),
        (_login_service([{"port": 2222, "targetPort": 22}], type="NodePort"),
         "port of every node"),
        (_login_service([{"port": 22}], type="LoadBalancer", loadBalancerSourceRanges=["::/0"]),
         "open to any address"),
    ],
)  # fmt: skip
def test_a_separate_service_publishing_ssh_is_held_to_the_login_rules(
    synthesized: dict[str, StackResult], inputs: Entry, words: str
) -> None:
    entries = _records(synthesized["prod"])
    template = _target(entries, "kubernetes:core/v1:Namespace", "")
    service = {**copy.deepcopy(template), "type": "kubernetes:core/v1:Service",
               "urn": template["urn"].rsplit("::", 1)[0].replace("Namespace", "Service")
               + "::login-ssh", "name": "login-ssh", "inputs": inputs}  # fmt: skip
    entries.append(service)
    findings = _run_policy(POLICIES["slurm-login-private"], entries, "prod")
    assert [f.urn for f in findings] and {f.urn for f in findings} == {service["urn"]}
    assert any(words in f.message for f in findings)
    service["inputs"]["spec"]["ports"] = [{"port": 443}]
    assert _run_policy(POLICIES["slurm-login-private"], entries, "prod") == []
    # A LoginSet written as the operator's resource carries its Service in spec.service.
    service.update(type="kubernetes:slinky.slurm.net/v1beta1:LoginSet")
    service["inputs"] = {"metadata": {"name": "login"},
                         "spec": {"service": {"spec": {"type": "LoadBalancer"}}}}  # fmt: skip
    findings = _run_policy(POLICIES["slurm-login-private"], entries, "prod")
    assert {f.message for f in findings} == {
        "login set login's load balancer is internet-facing (no internal scheme)",
        "login set login's SSH is open to any address (loadBalancerSourceRanges)",
    }


def test_accounting_on_an_unencrypted_class_is_caught(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    database = _target(entries, MARIADB, "")
    class_name = database["inputs"]["spec"]["storage"]["storageClassName"]
    storage_class = _target(entries, "kubernetes:storage.k8s.io/v1:StorageClass", "-" + class_name)
    policy = POLICIES["slurm-accounting-durable"]
    assert _run_policy(policy, entries, "prod") == []
    storage_class["inputs"]["parameters"]["encrypted"] = "false"
    findings = _run_policy(policy, entries, "prod")
    assert [f.urn for f in findings] == [database["urn"]]
    assert f"storage class {class_name} does not encrypt" in findings[0].message


def test_queues_must_fit_beside_the_slurm_node_pools(synthesized: dict[str, StackResult]) -> None:
    # prod's team shares use every GPU of the NodePools Volcano's pods can use (Slurm's nodes
    # are in their own NodePools), so moving one p5en node to Slurm breaks the queues' promise.
    entries = _records(synthesized["prod"])
    policy = POLICIES["queues-fit-pools"]
    assert _run_policy(policy, entries, "prod") == []
    limits = _target(entries, NODE_POOL, "=pools-p5en")["inputs"]["spec"]["limits"]
    limits["nvidia.com/gpu"] -= 8
    findings = _run_policy(policy, entries, "prod")
    assert [f.message for f in findings] == [
        "queues promise 192 nvidia.com/gpu as deserved but the NodePools Volcano's pods can use "
        "are limited to 184, of which Slurm node sets on them hold 0"
    ]


@pytest.mark.parametrize(
    ("policy", "stack", "resource_type", "name_contains", "mutation", "words"),
    [pytest.param(*case, id=f"{case[0]}-{case[2]}-{case[5][:24]}") for case in CASES],
)
def test_policy_passes_real_resource_and_catches_one_change(
    synthesized: dict[str, StackResult],
    policy: str,
    stack: str,
    resource_type: str,
    name_contains: str,
    mutation: Mutation,
    words: str,
) -> None:
    entries = _records(synthesized[stack])
    target = _target(entries, resource_type, name_contains)
    assert _run_policy(POLICIES[policy], entries, stack) == [], "unchanged resources comply"
    mutation(target)
    findings = _run_policy(POLICIES[policy], entries, stack)
    assert findings, "the changed resource must be caught"
    assert {f.urn for f in findings} == {target["urn"]}, findings
    assert any(words in f.message for f in findings), findings
    assert {f.enforcementLevel for f in findings} == {"mandatory"}


def test_a_partition_beyond_backfills_horizon_is_reported_where_the_horizon_is_set(
    synthesized: dict[str, StackResult],
) -> None:
    """A longer MaxTime on one partition needs a longer bf_window, which the slurm release sets:
    the finding names the partition and points at the release."""
    entries = _records(synthesized["prod"])
    policy = POLICIES["slurm-partitions-time-limited"]
    node_set = _target(entries, NODE_SET, "nodeset-p5en")
    spec = node_set["inputs"]["spec"]
    spec["partition"]["config"] = spec["partition"]["config"].replace(
        "MaxTime=2-00:00:00", "MaxTime=30-0"
    )
    findings = _run_policy(policy, entries, "prod")
    assert [f.urn for f in findings] == [_target(entries, HELM, "=slurm")["urn"]]
    assert "partition p5en's MaxTime (43200 min) is beyond backfill's horizon (bf_window=5760" in (
        findings[0].message
    )
    # The chart's own nodesets form is read too, and a disabled partition is not.
    spec["partition"]["enabled"] = False
    assert _run_policy(policy, entries, "prod") == []
    release, values = _node_set_into_chart_values(entries, "p5en")
    values["partition"] = {"enabled": True, "config": "State=UP MaxTime=UNLIMITED"}
    findings = _run_policy(policy, entries, "prod")
    assert [f.urn for f in findings] == [release["urn"]]
    assert "partition p5en (slurm chart nodesets) has no finite MaxTime" in findings[0].message


def test_private_data_is_read_as_slurm_reads_it(synthesized: dict[str, StackResult]) -> None:
    """Slurm finds each kind anywhere in the value (read_config.c): singular or capitalised
    spellings and ``all`` comply."""
    entries = _records(synthesized["prod"])
    release = _target(entries, HELM, "=slurm")
    values = release["inputs"]["values"]
    for spelling in ("account,job,usage", "Accounts,Jobs,Usage,Users", "all"):
        values["controller"]["extraConfMap"]["PrivateData"] = spelling
        values["accounting"]["extraConfMap"]["PrivateData"] = spelling
        assert _run_policy(POLICIES["slurm-private-data"], entries, "prod") == [], spelling


def test_a_cluster_wide_default_memory_serves_every_partition(
    synthesized: dict[str, StackResult],
) -> None:
    """The compliant alternative shape: DefMemPerCPU in slurm.conf instead of each partition."""
    entries = _records(synthesized["prod"])
    policy = POLICIES["slurm-jobs-share-nodes-by-request"]
    for node_set in (e for e in entries if e["type"] == NODE_SET):
        partition = node_set["inputs"]["spec"]["partition"]
        partition["config"] = " ".join(
            word for word in partition["config"].split() if not word.startswith("DefMem")
        )
    assert len(_run_policy(policy, entries, "prod")) == 3
    release = _target(entries, HELM, "=slurm")
    release["inputs"]["values"]["controller"]["extraConfMap"]["DefMemPerCPU"] = 4096
    assert _run_policy(policy, entries, "prod") == []


def test_efa_interfaces_must_match_the_instance_type(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    node_class = _target(entries, NODE_CLASS, "=pools-p5-class")
    # Both NodePools of the pool (its own and Slurm's) launch from that class.
    pools = [_target(entries, NODE_POOL, name) for name in ("=pools-p5", "=pools-p5-slurm")]
    interfaces = node_class["inputs"]["spec"]["networkInterfaces"]
    node_class["inputs"]["spec"]["networkInterfaces"] = interfaces[:-4]  # 4 cards left bare
    findings = _run_policy(POLICIES["efa-pool-fabric"], entries, "prod")
    assert sorted((f.urn, f.enforcementLevel) for f in findings) == sorted(
        (pool["urn"], "mandatory") for pool in pools
    )
    assert "p5.48xlarge has 32 EFA interfaces but its node class attaches 28" in findings[0].message


# The same accelerated pool, selected by each well-known label Karpenter gives instance types.
POOL_SELECTIONS = [
    {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5"]},
    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["p"]},
    {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]},
    {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["h100"]},
]


def _p5_pool_selecting(entries: list[Entry], selection: Entry | None) -> tuple[Entry, Entry]:
    """The p5 NodePool with its instance-type requirement replaced by ``selection``."""
    pool = _target(entries, NODE_POOL, "=pools-p5")
    template: Entry = pool["inputs"]["spec"]["template"]["spec"]
    template["requirements"] = [
        r for r in template["requirements"] if r["key"] != "node.kubernetes.io/instance-type"
    ] + ([selection] if selection else [])
    return pool, template


@pytest.mark.parametrize("selection", POOL_SELECTIONS, ids=lambda s: (s and s["key"]) or "none")
def test_accelerated_pools_are_recognised_however_they_select(
    synthesized: dict[str, StackResult], selection: Entry | None
) -> None:
    entries = _records(synthesized["prod"])
    pool, template = _p5_pool_selecting(entries, selection)
    checked = [
        POLICIES[name]
        for name in (
            "nodepool-limits",
            "accelerator-pools-tainted",
            "training-pools-not-disrupted-while-busy",
        )
    ]
    assert evaluate([ResourceRecord.from_json(e) for e in entries], {}, checked) == []
    del pool["inputs"]["spec"]["limits"]["nvidia.com/gpu"]
    template["taints"] = []
    template["expireAfter"] = "720h"
    findings = evaluate([ResourceRecord.from_json(e) for e in entries], {}, checked)
    assert {(f.policy, f.urn) for f in findings} == {(p.name, pool["urn"]) for p in checked}


@pytest.mark.parametrize(
    "selection",
    [{"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["m7i.large"]},
     None],  # no instance requirement: Karpenter buys whatever an accelerator pod needs
    ids=["NotIn", "none"],
)  # fmt: skip
def test_a_pool_open_to_every_type_is_held_to_every_accelerators_rules(
    synthesized: dict[str, StackResult], selection: Entry | None
) -> None:
    entries = _records(synthesized["prod"])
    _p5_pool_selecting(entries, selection)
    checked = [POLICIES["nodepool-limits"], POLICIES["accelerator-pools-tainted"]]
    findings = evaluate([ResourceRecord.from_json(e) for e in entries], {}, checked)
    assert sorted(f.message for f in findings) == [
        "accelerator nodes are not tainted aws.amazon.com/neuron:NoSchedule; any pod could land "
        "on them",
        "the NodePool has no aws.amazon.com/neuron limit",
    ]


def test_cpu_pools_are_not_held_to_accelerator_rules(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    general = _target(entries, NODE_POOL, "=pools-general")
    general["inputs"]["spec"]["template"]["spec"]["expireAfter"] = "720h"
    checked = [POLICIES["accelerator-pools-tainted"],
               POLICIES["training-pools-not-disrupted-while-busy"]]  # fmt: skip
    assert evaluate([ResourceRecord.from_json(e) for e in entries], {}, checked) == []
    # Drop its category requirement and it can buy a GPU node for a GPU pod.
    requirements = general["inputs"]["spec"]["template"]["spec"]["requirements"]
    requirements[:] = [r for r in requirements if "instance-category" not in r["key"]]
    findings = evaluate([ResourceRecord.from_json(e) for e in entries], {}, checked)
    assert {f.policy for f in findings} == {p.name for p in checked}


@pytest.mark.parametrize(
    ("policy", "spec", "words"),
    [
        ("nodepool-limits", {"limits": {"nvidia.com/gpu": "100000"}}, "spec.limits"),
        ("accelerator-pools-tainted", {"template": {"spec": {"taints": []}}},
         "spec.template.spec.taints"),
        ("training-pools-not-disrupted-while-busy",
         {"template": {"spec": {"expireAfter": "24h"}}}, "spec.template.spec.expireAfter"),
        ("training-pools-not-disrupted-while-busy",
         {"disruption": {"budgets": [{"nodes": "100%"}]}}, "spec.disruption"),
    ],
)  # fmt: skip
def test_node_pool_patches_of_guarded_fields_are_caught(
    synthesized: dict[str, StackResult], policy: str, spec: Entry, words: str
) -> None:
    entries = _records(synthesized["prod"])
    pool = _target(entries, NODE_POOL, "=pools-p5")
    patch = copy.deepcopy(pool)
    patch.update(type=NODE_POOL + "Patch", urn=pool["urn"].replace("NodePool::", "NodePoolPatch::"))
    patch["inputs"] = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                       "metadata": {"name": "p5"}, "spec": spec}  # fmt: skip
    entries.append(patch)
    findings = _run_policy(POLICIES[policy], entries, "prod")
    assert [f.urn for f in findings] == [patch["urn"]]
    assert words in findings[0].message and "NodePool p5" in findings[0].message
    # A patch of something else (its weight) is not this policy's business.
    patch["inputs"]["spec"] = {"weight": 10}
    assert _run_policy(POLICIES[policy], entries, "prod") == []


@pytest.mark.parametrize(("stack", "level"), [("staging", "advisory"), ("prod", "mandatory")])
def test_efa_capable_pool_without_efa_is_advice_outside_prod(
    synthesized: dict[str, StackResult], stack: str, level: str
) -> None:
    entries = _records(synthesized[stack])
    assert _run_policy(POLICIES["efa-capable-pools-attach-efa"], entries, stack) == []
    _target(entries, NODE_CLASS, "=pools-p5-class")["inputs"]["spec"].pop("networkInterfaces")
    pools = [_target(entries, NODE_POOL, name) for name in ("=pools-p5", "=pools-p5-slurm")]
    findings = _run_policy(POLICIES["efa-capable-pools-attach-efa"], entries, stack)
    assert sorted((f.urn, f.enforcementLevel) for f in findings) == sorted(
        (pool["urn"], level) for pool in pools
    )


def test_a_floating_ami_is_advice_not_a_block_in_dev(synthesized: dict[str, StackResult]) -> None:
    assert synthesized["dev"].findings == []
    entries = _records(synthesized["dev"])
    node_class = _target(entries, NODE_CLASS, "=pools-gpu-small-class")
    node_class["inputs"]["spec"]["amiSelectorTerms"] = [{"alias": "al2023@latest"}]
    findings = _run_policy(POLICIES["ami-alias-pinned"], entries, "dev")
    assert [(f.urn, f.enforcementLevel) for f in findings] == [(node_class["urn"], "advisory")]


def test_every_policy_has_cases() -> None:
    covered = (
        {case[0] for case in CASES}
        | {
            "helm-chart-pinned",
            "vpc-flow-logs",
            "efa-capable-pools-attach-efa",
            "buckets-hardened",
            "fsx-encrypted-customer-key",
            "efs-encrypted-customer-key",
            "efs-mount-targets-nfs-from-nodes",
            "efs-access-points-team-owned",
            "efs-file-system-policy",
            # tests/test_notebooks.py
            "notebooks-exposure",
            "notebooks-authenticator",
            "notebooks-images-pinned",
            "notebooks-profile-resources",
            "fsx-root-squashed",
            "lustre-team-volumes-isolated",
            "lustre-volumes-on-clients",
            "lustre-volumes-record-access",
            "fsx-in-training-zone",
            "fsx-lustre-ports-only",
            "queue-shares-ordered",
            "queues-fit-pools",
            "runtime-gang-scheduled",
            "runtime-requests-match-pool",
            "training-images-pinned",
            "eks-version-in-standard-support",
            "eks-version-standard-support-ending",
            "log-groups-encrypted-customer-key",
            # tests/test_lifecycle_policies.py
            "retained-resources-protected",
            "fixed-names-delete-before-replace",
            "retained-objects-in-retained-namespaces",
            "crd-releases-retained",
            # tests/test_acceptance_policies.py
            "accelerator-pools-gated",
            "acceptance-agent-tolerates-pools",
            "device-plugins-tolerate-gated-pools",
        }
        | {policy.name for policy in tenancy.POLICIES}
    )  # tests/test_tenancy_policies.py
    assert covered == set(POLICIES)


@pytest.mark.parametrize(
    ("resource_type", "inputs", "policy", "words"),
    [
        ("aws:ec2/spotInstanceRequest:SpotInstanceRequest",
         {"metadataOptions": {"httpTokens": "optional", "httpPutResponseHopLimit": 1}},
         "node-imdsv2-hop-limit-1", "httpTokens is 'optional'"),
        ("aws:ec2/launchConfiguration:LaunchConfiguration",
         {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2}},
         "node-imdsv2-hop-limit-1", "HopLimit is 2"),
        (NODE_CLASS + "Patch", {"spec": {"metadataOptions": {"httpPutResponseHopLimit": 2}}},
         "node-imdsv2-hop-limit-1", "HopLimit is 2"),
        ("aws:ec2/spotInstanceRequest:SpotInstanceRequest",
         {"rootBlockDevice": {"encrypted": False}}, "node-volumes-encrypted",
         "rootBlockDevice is not encrypted"),
        (NODE_CLASS + "Patch",
         {"spec": {"blockDeviceMappings": [{"ebs": {"volumeSize": "500Gi"}}]}},
         "node-volumes-encrypted", "spec.blockDeviceMappings[0].ebs is not encrypted"),
        ("aws:ec2/launchConfiguration:LaunchConfiguration", {"associatePublicIpAddress": True},
         "node-no-public-ip", "public IP address"),
        ("aws:ec2/eipAssociation:EipAssociation", {"networkInterfaceId": "eni-0123"},
         "node-no-public-ip", "Elastic IP is attached to an instance (networkInterfaceId)"),
    ],
)  # fmt: skip
def test_node_rules_read_every_shape_that_launches_a_node(
    synthesized: dict[str, StackResult], resource_type: str, inputs: Entry, policy: str,
    words: str,
) -> None:  # fmt: skip
    entries = _records(synthesized["prod"])
    template = _target(entries, "aws:ec2/launchTemplate:LaunchTemplate", "")
    shape = {**copy.deepcopy(template), "type": resource_type, "inputs": inputs,
             "urn": template["urn"] + "-" + resource_type.rsplit(":", 1)[-1]}  # fmt: skip
    entries.append(shape)
    findings = _run_policy(POLICIES[policy], entries, "prod")
    assert [f.urn for f in findings] == [shape["urn"]] and words in findings[0].message


def test_a_node_class_patch_of_other_fields_is_left_alone(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["prod"])
    template = _target(entries, NODE_CLASS, "=pools-p5-class")
    patch = {**copy.deepcopy(template), "type": NODE_CLASS + "Patch",
             "urn": template["urn"] + "-patch",
             "inputs": {"spec": {"tags": {"team": "ml"}}}}  # fmt: skip
    entries.append(patch)
    for name in ("node-imdsv2-hop-limit-1", "node-volumes-encrypted", "node-no-public-ip"):
        assert _run_policy(POLICIES[name], entries, "prod") == [], name


def test_provider_default_tags_or_resource_tags_satisfy_required_tags(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["prod"])
    provider = _target(entries, "pulumi:providers:aws", "")
    vpc = _target(entries, "aws:ec2/vpc:Vpc", "")
    tags = json.loads(provider["inputs"]["defaultTags"])
    del tags["tags"]["cost-center"]
    provider["inputs"]["defaultTags"] = json.dumps(tags)
    findings = _run_policy(POLICIES["required-tags"], entries, "prod")
    assert vpc["urn"] in {f.urn for f in findings}
    assert all("cost-center" in f.message for f in findings)
    untaggable = {
        e["urn"]
        for e in entries
        if e["type"] == "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
    }
    assert not untaggable & {f.urn for f in findings}, "resources without a tags input are skipped"
    vpc["inputs"]["tags"]["cost-center"] = "cc-ml-1000"
    assert vpc["urn"] not in {
        f.urn for f in _run_policy(POLICIES["required-tags"], entries, "prod")
    }


ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


@pytest.mark.parametrize(
    ("resource_type", "key", "arn"),
    [
        (ATTACHMENT, "policyArn", "arn:aws:iam::aws:policy/AmazonS3FullAccess"),
        (ATTACHMENT, "policyArn", "arn:aws:iam::aws:policy/PowerUserAccess"),
        (ATTACHMENT, "policyArn", "arn:aws:iam::aws:policy/job-function/SystemAdministrator"),
        ("aws:iam/policyAttachment:PolicyAttachment", "policyArn",
         "arn:aws:iam::aws:policy/AdministratorAccess"),
        ("aws:iam/userPolicyAttachment:UserPolicyAttachment", "policyArn",
         "arn:aws:iam::aws:policy/IAMFullAccess"),
        ("aws:iam/groupPolicyAttachment:GroupPolicyAttachment", "policyArn",
         "arn:aws:iam::aws:policy/AmazonEC2FullAccess"),
        ("aws:iam/rolePolicyAttachmentsExclusive:RolePolicyAttachmentsExclusive", "policyArns",
         ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
          "arn:aws:iam::aws:policy/AdministratorAccess"]),
        ("aws:iam/role:Role", "managedPolicyArns", ["arn:aws-cn:iam::aws:policy/AdministratorAccess"]),
    ],
)  # fmt: skip
def test_broad_managed_policies_are_caught_in_every_attachment_shape(
    synthesized: dict[str, StackResult], resource_type: str, key: str, arn: Any
) -> None:
    entries = _records(synthesized["prod"])
    attachment = copy.deepcopy(_target(entries, ATTACHMENT, "system-node"))
    attachment.update(type=resource_type, urn=attachment["urn"] + "-broad")
    attachment["inputs"] = {key: arn}
    entries.append(attachment)
    findings = _run_policy(POLICIES["iam-no-wildcard-actions"], entries, "prod")
    assert [f.urn for f in findings] == [attachment["urn"]]
    assert "allows every action" in findings[0].message


def test_narrow_managed_policies_pass(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    attached = [e["inputs"]["policyArn"] for e in entries if e["type"] == ATTACHMENT]
    assert "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy" in attached
    role = _target(entries, "aws:iam/role:Role", "system-node")
    role["inputs"]["managedPolicyArns"] = ["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"]
    assert _run_policy(POLICIES["iam-no-wildcard-actions"], entries, "prod") == []


def test_unscopable_actions_may_use_every_resource(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    target = _target(entries, "aws:iam/rolePolicy:RolePolicy", "flow-logs")
    policy_json("Action", ["ec2:DescribeInstances", "pricing:GetProducts"])(target)
    policy_json("Resource", "*")(target)
    assert _run_policy(POLICIES["iam-no-wildcard-resources"], entries, "prod") == []


def test_protection_not_required_in_dev(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["dev"])
    assert not any(e["protect"] for e in entries)
    assert _run_policy(POLICIES["stateful-resources-protected"], entries, "dev") == []


def test_flow_logs_required_for_every_vpc(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    assert _run_policy(POLICIES["vpc-flow-logs"], entries, "prod") == []
    vpc = _target(entries, "aws:ec2/vpc:Vpc", "")
    without = [e for e in entries if e["type"] != "aws:ec2/flowLog:FlowLog"]
    findings = _run_policy(POLICIES["vpc-flow-logs"], without, "prod")
    assert [(f.urn, f.enforcementLevel) for f in findings] == [(vpc["urn"], "mandatory")]


LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"


def _without_group(name: str) -> Callable[[list[Entry]], Entry]:
    """Drop the log group named ``name``; return the resource that wrote to it."""

    def change(entries: list[Entry]) -> Entry:
        (group,) = [e for e in entries if e["type"] == LOG_GROUP and name in e["inputs"]["name"]]
        entries.remove(group)
        writers = [e for e in entries if group["urn"] in e["dependencies"]
                   and e["type"] != "aws:iam/rolePolicy:RolePolicy"]  # fmt: skip
        for writer in writers:
            for key, urns in writer["propertyDependencies"].items():
                writer["propertyDependencies"][key] = [u for u in urns if u != group["urn"]]
        return writers[0] if writers else _target(entries, "eks:index:Cluster", "")

    return change


def _group_key(key: Any) -> Callable[[list[Entry]], Entry]:
    def change(entries: list[Entry]) -> Entry:
        group = _target(entries, LOG_GROUP, "flow-logs")
        at("kmsKeyId", key)(group)
        return group

    return change


def _fsx_without_destination(entries: list[Entry]) -> Entry:
    file_system = _target(entries, FILE_SYSTEM, "")
    file_system["inputs"]["logConfiguration"] = {"level": "WARN_ERROR"}
    file_system["propertyDependencies"]["logConfiguration"] = []
    return file_system


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (_group_key(_DELETE), "not encrypted with a customer managed KMS key"),
        (_group_key("alias/aws/logs"), "not encrypted with a customer managed KMS key"),
        (_without_group("/aws/eks/"), "EKS creates it without a customer key"),
        (_without_group("/aws/vpc/"), "writes to a log group this stack does not create"),
        (_without_group("/aws/fsx/"), "logs to a group this stack does not create"),
        (_fsx_without_destination, "FSx writes to /aws/fsx/lustre"),
    ],
)
def test_every_log_is_written_to_a_customer_keyed_group_of_the_stack(
    synthesized: dict[str, StackResult],
    as_synthesized: PolicyRun,
    change: Callable[[list[Entry]], Entry],
    words: str,
) -> None:
    for stack in STACKS:
        assert as_synthesized(POLICIES["log-groups-encrypted-customer-key"], stack) == []
    entries = _records(synthesized["prod"])
    culprit = change(entries)
    findings = _run_policy(POLICIES["log-groups-encrypted-customer-key"], entries, "prod")
    assert [f.urn for f in findings] == [culprit["urn"]] and words in findings[0].message


def test_flow_logs_record_all_traffic_of_every_vpc_shape(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["prod"])
    flow_log = _target(entries, "aws:ec2/flowLog:FlowLog", "")
    vpc = _target(entries, "aws:ec2/vpc:Vpc", "")
    flow_log["inputs"]["trafficType"] = "REJECT"
    findings = _run_policy(POLICIES["vpc-flow-logs"], entries, "prod")
    assert [f.urn for f in findings] == [flow_log["urn"], vpc["urn"]]
    assert "records only REJECT traffic" in findings[0].message
    flow_log["inputs"]["trafficType"] = "ALL"
    default_vpc = {**copy.deepcopy(vpc), "type": "aws:ec2/defaultVpc:DefaultVpc",
                   "urn": vpc["urn"] + "-default", "name": "default"}  # fmt: skip
    entries.append(default_vpc)
    findings = _run_policy(POLICIES["vpc-flow-logs"], entries, "prod")
    assert [f.urn for f in findings] == [default_vpc["urn"]]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK warns on importing lambda_
def test_lambda_resources_are_known_to_take_tags() -> None:
    assert accepts_tags("aws:lambda/function:Function")
    assert not accepts_tags("aws:iam/rolePolicyAttachment:RolePolicyAttachment")


@pytest.mark.parametrize(
    ("resource_type", "name", "mutation", "words"),
    [
        (NODE_CLASS, "=pools-p5-class", at("spec|tags|cost-center", _DELETE),
         "instances Karpenter launches miss required tags ['cost-center']"),
        ("aws:ec2/launchTemplate:LaunchTemplate", "", at("tagSpecifications", [
            {"resourceType": "instance", "tags": {"owner": "a", "cost-center": "b",
                                                  "environment": "prod"}}]),
         "launched volumes miss required tags ['owner', 'cost-center', 'environment']"),
    ],
)  # fmt: skip
def test_tags_reach_what_is_launched(
    synthesized: dict[str, StackResult], resource_type: str, name: str, mutation: Mutation,
    words: str,
) -> None:  # fmt: skip
    entries = _records(synthesized["prod"])
    assert _run_policy(POLICIES["required-tags"], entries, "prod") == []
    target = _target(entries, resource_type, name)
    mutation(target)
    findings = _run_policy(POLICIES["required-tags"], entries, "prod")
    assert [(f.urn, f.message) for f in findings] == [(target["urn"], words)]


def test_an_autoscaling_groups_list_of_tags_is_read(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    template = _target(entries, "aws:ec2/launchTemplate:LaunchTemplate", "")
    tags = [{"key": k, "value": v, "propagateAtLaunch": True}
            for k, v in {"owner": "a", "cost-center": "b", "environment": "prod"}.items()]  # fmt: skip
    group = {**copy.deepcopy(template), "type": "aws:autoscaling/group:Group",
             "urn": template["urn"] + "-asg", "name": "asg",
             "inputs": {"maxSize": 1, "minSize": 0, "tags": tags}}  # fmt: skip
    entries.append(group)
    assert _run_policy(POLICIES["required-tags"], entries, "prod") == []
    tags[1]["propagateAtLaunch"] = False
    findings = _run_policy(POLICIES["required-tags"], entries, "prod")
    assert [(f.urn, f.message) for f in findings] == [
        (group["urn"], "instances the group launches miss required tags ['cost-center']")
    ]


@pytest.mark.parametrize(
    ("inputs", "pinned"),
    [
        ({"files": ["https://github.com/kubernetes-sigs/jobset/releases/latest/download/manifests.yaml"]}, False),
        ({"files": ["https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml"]}, True),
        ({"file": "https://raw.githubusercontent.com/volcano-sh/volcano/master/installer/volcano-development.yaml"}, False),
        ({"file": "https://raw.githubusercontent.com/example/repo/refs/heads/dev/all.yaml"}, False),
        ({"files": ["./manifests/*.yaml"]}, True),
    ],
)  # fmt: skip
def test_manifest_urls_are_pinned(
    synthesized: dict[str, StackResult], inputs: Entry, pinned: bool
) -> None:
    entries = _records(synthesized["staging"])
    template = _target(entries, "kubernetes:kustomize/v2:Directory", "training-operator")
    kind = "ConfigGroup" if "files" in inputs else "ConfigFile"
    entries.append({**copy.deepcopy(template), "type": f"kubernetes:yaml/v2:{kind}",
                    "urn": template["urn"] + "-manifests", "inputs": inputs})  # fmt: skip
    findings = _run_policy(POLICIES["helm-chart-pinned"], entries, "staging")
    assert (findings == []) is pinned, [f.message for f in findings]


def test_eks_add_ons_pin_their_build(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    assert _run_policy(POLICIES["helm-chart-pinned"], entries, "prod") == []
    addon = _target(entries, "aws:eks/addon:Addon", "coredns")
    del addon["inputs"]["addonVersion"]
    findings = _run_policy(POLICIES["helm-chart-pinned"], entries, "prod")
    assert [f.urn for f in findings] == [addon["urn"]] and "no addonVersion" in findings[0].message


def _helm_release(version: Any) -> Entry:
    # No stack installs a Helm chart yet; this is the shape pulumi-kubernetes registers.
    return {
        "type": "kubernetes:helm.sh/v3:Release", "name": "karpenter",
        "urn": "urn:pulumi:prod::eks-training-platform::kubernetes:helm.sh/v3:Release::karpenter",
        "parent": None, "provider": None, "dependencies": [], "protect": False, "custom": True,
        "inputs": {"chart": "oci://public.ecr.aws/karpenter/karpenter", "namespace": "kube-system",
                   **({} if version is None else {"version": version})},
    }  # fmt: skip


@pytest.mark.parametrize("version", ["1.14.1", "v0.20.0", "1.2.1-rc.1"])
def test_exact_chart_versions_pass(version: str) -> None:
    assert _run_policy(POLICIES["helm-chart-pinned"], [_helm_release(version)], "prod") == []


@pytest.mark.parametrize(
    "version", [None, "", "latest", "main", "HEAD", "^1.14.0", "~1.14", ">=1.0.0", "1.x", "1.14"]
)
def test_floating_chart_versions_fail(version: Any) -> None:
    findings = _run_policy(POLICIES["helm-chart-pinned"], [_helm_release(version)], "prod")
    assert len(findings) == 1 and findings[0].enforcementLevel == "mandatory"


def test_unknown_value_is_an_advisory_note_like_the_analyzer(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["prod"])
    cluster = _target(entries, "eks:index:Cluster", "")
    cluster["inputs"]["endpointPublicAccess"] = UNKNOWN
    findings = _run_policy(POLICIES["eks-endpoint-not-public"], entries, "prod")
    assert len(findings) == 1
    assert findings[0].enforcementLevel == "advisory"
    assert "can't run policy 'eks-endpoint-not-public'" in findings[0].message
    assert "during preview" in findings[0].message


def test_every_stack_passes_its_mandatory_policies(stack_result: StackResult) -> None:
    assert mandatory(stack_result.findings) == []
    report = json.loads((stack_result.written.directory / "policy-report.json").read_text())
    assert report == [
        dict(vars(f))
        for f in sorted(stack_result.findings, key=lambda f: (f.policy, f.urn, f.message))
    ]


def test_prod_runs_every_policy_as_mandatory() -> None:
    config = load_policy_config("prod")
    assert config["all"]["enforcementLevel"] == "mandatory"
    assert {k: v for k, v in config.items() if isinstance(v, str)} == {}, "prod downgrades nothing"
    assert config["stateful-resources-protected"]["requireProtection"] is True


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_has_a_valid_policy_config(stack: str) -> None:
    config = load_policy_config(stack)
    evaluate([], config)  # raises on unknown policies, bad levels or properties


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"eks-endpoint-not-publik": "advisory"}, "unknown policies"),
        (
            {"eks-endpoint-not-publik": "advisory"},
            "('eks-endpoint-not-publik': did you mean eks-endpoint-not-public?)",
        ),
        ({"eks-endpoint-not-public": {"allowPublicEndpoint": "yes"}}, "is not of type 'boolean'"),
        ({"eks-endpoint-not-public": {"allowedCidrs": []}}, "unknown properties ['allowedCidrs']"),
        ({"all": "strict"}, "enforcement level 'strict'"),
    ],
)
def test_bad_policy_config_is_rejected(
    synthesized: dict[str, StackResult], config: dict[str, Any], words: str
) -> None:
    with pytest.raises(PolicyConfigError, match=r".*") as caught:
        evaluate(synthesized["dev"].records, config)
    assert words in str(caught.value)


def test_disabled_policy_does_not_run(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    _target(entries, "aws:kms/key:Key", "")["inputs"]["enableKeyRotation"] = False
    records = [ResourceRecord.from_json(e) for e in entries]
    assert evaluate(records, {"kms-key-rotation": "disabled"}, [POLICIES["kms-key-rotation"]]) == []
    advisory = evaluate(records, {"all": "advisory"}, [POLICIES["kms-key-rotation"]])
    assert [f.enforcementLevel for f in advisory] == ["advisory"]


def test_check_command_gates_a_modified_plan(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = _records(synthesized["prod"])
    resources = tmp_path / "resources.json"
    resources.write_text(json.dumps(entries))
    argv = ["check", str(resources), "--stack", "prod"]
    passing = synth_main(argv)
    out, err = capsys.readouterr()
    assert passing == 0, out + err
    _target(entries, "aws:kms/key:Key", "")["inputs"]["enableKeyRotation"] = False
    resources.write_text(json.dumps(entries))
    assert synth_main(argv) == 1
    assert "MANDATORY kms-key-rotation" in capsys.readouterr().out
    report = json.loads((tmp_path / "policy-report.json").read_text())
    assert [f["policy"] for f in report] == ["kms-key-rotation"]
    assert set(report[0]) == {"policy", "enforcementLevel", "urn", "message"}


def test_pack_entry_point_only_builds_the_pack() -> None:
    source = (REPOSITORY_ROOT / "policies" / "__main__.py").read_text()
    assert "PolicyPack(" in source and "def " not in source
    assert (REPOSITORY_ROOT / "policies" / "PulumiPolicy.yaml").is_file()


def test_pool_without_placement_group_needs_a_written_exception(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["prod"])
    node_class = _target(entries, NODE_CLASS, "=pools-p5-class")
    del node_class["inputs"]["spec"]["placementGroupSelector"]
    records = [ResourceRecord.from_json(e) for e in entries]
    policy = [POLICIES["efa-pool-fabric"]]
    assert [f.urn for f in evaluate(records, {}, policy)] == [node_class["urn"]]
    exempt = {"efa-pool-fabric": {"poolsWithoutPlacementGroup": ["p5"]}}
    assert evaluate(records, exempt, policy) == []


BUCKET = "aws:s3/bucket:Bucket"
FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"


def _bucket_part(entries: list[Entry], kind: str, bucket: Entry) -> Entry:
    return next(
        e
        for e in entries
        if e["type"] == f"aws:s3/{kind}"
        and bucket["urn"] in e["propertyDependencies"].get("bucket", [])
    )


@pytest.mark.parametrize(
    ("kind", "mutation", "words"),
    [
        (
            "bucketVersioning:BucketVersioning",
            at("versioningConfiguration.status", "Suspended"),
            "versioning",
        ),
        (
            "bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
            at("rules.0.applyServerSideEncryptionByDefault", {"sseAlgorithm": "AES256"}),
            "KMS",
        ),
        (
            "bucketPublicAccessBlock:BucketPublicAccessBlock",
            at("restrictPublicBuckets", False),
            "public access",
        ),
        (
            "bucketPolicy:BucketPolicy",
            at("policy", json.dumps({"Version": "2012-10-17", "Statement": []})),
            "TLS",
        ),
        ("bucketLifecycleConfiguration:BucketLifecycleConfiguration", at("rules", []), "multipart"),
    ],
)
def test_buckets_hardened(
    synthesized: dict[str, StackResult],
    as_synthesized: PolicyRun,
    kind: str,
    mutation: Mutation,
    words: str,
) -> None:
    for stack in STACKS:
        assert as_synthesized(POLICIES["buckets-hardened"], stack) == []
    entries = _records(synthesized["prod"])
    bucket = _target(entries, BUCKET, "checkpoints")
    mutation(_bucket_part(entries, kind, bucket))
    findings = _run_policy(POLICIES["buckets-hardened"], entries, "prod")
    assert [f.urn for f in findings] == [bucket["urn"]]
    assert words in findings[0].message


def test_bucket_missing_its_parts_is_caught(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["dev"])
    bucket = _target(entries, BUCKET, "=storage-data")
    bare = [e for e in entries if bucket["urn"] not in e["propertyDependencies"].get("bucket", [])]
    findings = _run_policy(POLICIES["buckets-hardened"], bare, "dev")
    own = [f for f in findings if f.urn == bucket["urn"]]
    assert len(own) == 6 and any("server access logs go nowhere" in f.message for f in own)
    # With its only source gone, the log bucket is judged as a data bucket: SSE-S3, no logs.
    assert sorted(f.message.split(": ", 1)[1] for f in findings if f not in own) == [
        "its server access logs go nowhere",
        "objects are not encrypted with a customer KMS key",
    ]


@pytest.mark.parametrize(
    "key", ["alias/aws/s3", "arn:aws:kms:us-east-1:333344445555:alias/aws/s3", _DELETE]
)
def test_bucket_under_an_aws_managed_key_is_caught(
    synthesized: dict[str, StackResult], key: Any
) -> None:
    entries = _records(synthesized["prod"])
    bucket = _target(entries, BUCKET, "checkpoints")
    kind = "bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    at("rules.0.applyServerSideEncryptionByDefault.kmsMasterKeyId", key)(
        _bucket_part(entries, kind, bucket)
    )
    findings = _run_policy(POLICIES["buckets-hardened"], entries, "prod")
    assert [f.message for f in findings] == [
        f"bucket {bucket['name']}: objects are not encrypted with a customer KMS key"
    ]


V2_TOKENS = {
    "aws:s3/bucket:Bucket": "aws:s3/bucketV2:BucketV2",
    "aws:s3/bucketVersioning:BucketVersioning": "aws:s3/bucketVersioningV2:BucketVersioningV2",
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2"
    ),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": (
        "aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2"
    ),
    "aws:s3/bucketLogging:BucketLogging": "aws:s3/bucketLoggingV2:BucketLoggingV2",
}


def test_buckets_declared_with_v2_tokens_are_read(synthesized: dict[str, StackResult]) -> None:
    """BucketV2 and the V2 settings are registrable classes in pulumi-aws 7.x: same facts."""
    entries = _records(synthesized["prod"])
    for entry in entries:
        entry["type"] = V2_TOKENS.get(entry["type"], entry["type"])
    assert _run_policy(POLICIES["buckets-hardened"], entries, "prod") == []
    bucket = _target(entries, "aws:s3/bucketV2:BucketV2", "checkpoints")
    bare = [e for e in entries if bucket["urn"] not in e["propertyDependencies"].get("bucket", [])]
    findings = _run_policy(POLICIES["buckets-hardened"], bare, "prod")
    assert len(findings) == 6 and {f.urn for f in findings} == {bucket["urn"]}


INLINE_SETTINGS: dict[str, tuple[str, Any]] = {
    # The deprecated Bucket arguments that declare the same facts as the separate resources.
    "bucketVersioning:BucketVersioning": ("versioning", {"enabled": True}),
    "bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        "serverSideEncryptionConfiguration",
        {"rule": {"applyServerSideEncryptionByDefault": {
            "sseAlgorithm": "aws:kms",
            "kmsMasterKeyId": "arn:aws:kms:us-east-1:333344445555:key/1234abcd"}}},
    ),
    "bucketLifecycleConfiguration:BucketLifecycleConfiguration": (
        "lifecycleRules", [{"enabled": True, "abortIncompleteMultipartUploadDays": 7}],
    ),
    "bucketPolicy:BucketPolicy": ("policy", None),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(INLINE_SETTINGS))
def test_bucket_settings_declared_inline_are_read(
    synthesized: dict[str, StackResult], kind: str
) -> None:
    entries = _records(synthesized["prod"])
    bucket = _target(entries, BUCKET, "checkpoints")
    separate = _bucket_part(entries, kind, bucket)
    key, value = INLINE_SETTINGS[kind]
    bucket["inputs"][key] = separate["inputs"]["policy"] if value is None else value
    # Both at once: AWS keeps one, so the policy cannot say which holds.
    findings = _run_policy(POLICIES["buckets-hardened"], entries, "prod")
    assert [f.urn for f in findings] == [bucket["urn"]]
    assert "declared 2 times" in findings[0].message and key in findings[0].message
    # Inline alone is the same fact.
    entries.remove(separate)
    assert _run_policy(POLICIES["buckets-hardened"], entries, "prod") == []
    if kind != "bucketPolicy:BucketPolicy":
        bucket["inputs"][key] = {"enabled": False} if key == "versioning" else []
        findings = _run_policy(POLICIES["buckets-hardened"], entries, "prod")
        assert [f.urn for f in findings] == [bucket["urn"]]


LOG_ENCRYPTION = "bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"


def test_the_log_bucket_must_be_sse_s3_and_must_not_log_itself(
    synthesized: dict[str, StackResult],
) -> None:
    """S3 delivers server access logs only to SSE-S3 buckets; a log bucket that logs loops."""
    entries = _records(synthesized["prod"])
    logs = _target(entries, BUCKET, "=storage-access-logs")
    encryption = _bucket_part(entries, LOG_ENCRYPTION, logs)
    data = _bucket_part(entries, LOG_ENCRYPTION, _target(entries, BUCKET, "=storage-checkpoints"))
    encryption["inputs"]["rules"] = copy.deepcopy(data["inputs"]["rules"])  # the KMS key
    logging = _bucket_part(
        entries, "bucketLogging:BucketLogging", _target(entries, BUCKET, "=storage-datasets")
    )
    itself = copy.deepcopy(logging)
    itself["urn"] += "-itself"
    itself["propertyDependencies"]["bucket"] = [logs["urn"]]
    entries.append(itself)
    findings = _run_policy(POLICIES["buckets-hardened"], entries, "prod")
    assert sorted(f.message for f in findings) == [
        f"bucket {logs['name']}: it receives server access logs and must not log itself",
        f"bucket {logs['name']}: it receives server access logs, which S3 delivers only to "
        "SSE-S3 (AES256) buckets",
    ]


def test_a_data_bucket_that_stops_logging_is_caught(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    bucket = _target(entries, BUCKET, "=storage-datasets")
    logging = _bucket_part(entries, "bucketLogging:BucketLogging", bucket)
    logging["inputs"]["targetBucket"] = ""
    findings = _run_policy(POLICIES["buckets-hardened"], entries, "prod")
    assert [f.message for f in findings] == [
        f"bucket {bucket['name']}: its server access logs go nowhere"
    ]


def test_a_second_public_access_block_is_caught(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    bucket = _target(entries, BUCKET, "checkpoints")
    block = _bucket_part(entries, "bucketPublicAccessBlock:BucketPublicAccessBlock", bucket)
    second = copy.deepcopy(block)
    second["urn"] += "-open"
    second["name"] += "-open"
    second["inputs"]["blockPublicPolicy"] = False
    entries.append(second)
    findings = _run_policy(POLICIES["buckets-hardened"], entries, "prod")
    assert [f.urn for f in findings] == [bucket["urn"]]
    assert "public access block is declared 2 times" in findings[0].message


@pytest.mark.parametrize("key", [_DELETE, "arn:aws:kms:us-east-1:333344445555:alias/aws/fsx"])
def test_fsx_encrypted_with_customer_key(synthesized: dict[str, StackResult], key: Any) -> None:
    entries = _records(synthesized["prod"])
    assert _run_policy(POLICIES["fsx-encrypted-customer-key"], entries, "prod") == []
    file_system = _target(entries, FILE_SYSTEM, "")
    at("kmsKeyId", key)(file_system)
    findings = _run_policy(POLICIES["fsx-encrypted-customer-key"], entries, "prod")
    assert [(f.urn, f.enforcementLevel) for f in findings] == [(file_system["urn"], "mandatory")]


@pytest.mark.parametrize(
    ("mutation", "words"),
    [
        (at("rootSquashConfiguration", _DELETE), "rootSquash is None"),
        (at("rootSquashConfiguration.rootSquash", "0:0"), "non-zero"),
        (at("rootSquashConfiguration.rootSquash", "65534:0"), "non-zero"),
        (at("rootSquashConfiguration.noSquashNids", ["10.40.[128-191].[0-255]@tcp"]), "range"),
        (at("rootSquashConfiguration.noSquashNids", ["10.40.128.*@tcp"]), "wildcard"),
    ],
)
def test_root_is_squashed_on_every_file_system(
    synthesized: dict[str, StackResult], as_synthesized: PolicyRun, mutation: Mutation, words: str
) -> None:
    policy = POLICIES["fsx-root-squashed"]
    for stack in STACKS:
        assert as_synthesized(policy, stack) == []
    entries = _records(synthesized["prod"])
    file_system = _target(entries, FILE_SYSTEM, "")
    mutation(file_system)
    (finding,) = _run_policy(policy, entries, "prod")
    assert finding.urn == file_system["urn"] and words in finding.message


def _team_volume(entries: list[Entry], volume_name: str) -> Entry:
    return _target(entries, "kubernetes:core/v1:PersistentVolume", f"={volume_name}")


def test_a_team_volume_mounts_only_its_own_directory(
    synthesized: dict[str, StackResult], as_synthesized: PolicyRun
) -> None:
    policy = POLICIES["lustre-team-volumes-isolated"]
    for stack in STACKS:
        assert as_synthesized(policy, stack) == []
    # the whole file system
    entries = _records(synthesized["prod"])
    volume = _team_volume(entries, "storage-pv-ml-product-lustre-checkpoints")
    attributes = volume["inputs"]["spec"]["csi"]["volumeAttributes"]
    attributes["mountname"] = attributes["mountname"].split("/")[0]
    (finding,) = _run_policy(policy, entries, "prod")
    assert finding.urn == volume["urn"] and "its own directory" in finding.message
    # another team's directory
    entries = _records(synthesized["prod"])
    volume = _team_volume(entries, "storage-pv-ml-product-lustre-checkpoints")
    attributes = volume["inputs"]["spec"]["csi"]["volumeAttributes"]
    attributes["mountname"] = attributes["mountname"].replace("ml-product", "ml-research")
    findings = _run_policy(policy, entries, "prod")
    assert volume["urn"] in {f.urn for f in findings}
    # a parent of another team's directory, named like the team
    entries = _records(synthesized["prod"])
    volume = _team_volume(entries, "storage-pv-ml-product-lustre-checkpoints")
    attributes = volume["inputs"]["spec"]["csi"]["volumeAttributes"]
    prefix = attributes["mountname"].split("/")[0]
    attributes["mountname"] = f"{prefix}/checkpoints/ml-research/ml-product"
    findings = _run_policy(policy, entries, "prod")
    assert any(
        "overlaps" in f.message and "ml-research" in f.message and "ml-product" in f.message
        for f in findings
    ), [f.message for f in findings]


def test_lustre_volumes_mount_only_on_nodes_that_can(
    synthesized: dict[str, StackResult], as_synthesized: PolicyRun
) -> None:
    policy = POLICIES["lustre-volumes-on-clients"]
    for stack in STACKS:
        assert as_synthesized(policy, stack) == []
    # a volume any node may mount: a pod lands on general, without the client group
    entries = _records(synthesized["prod"])
    volume = _team_volume(entries, "storage-pv-ml-product-lustre-checkpoints")
    del volume["inputs"]["spec"]["nodeAffinity"]
    (finding,) = _run_policy(policy, entries, "prod")
    assert finding.urn == volume["urn"] and "may mount on any node" in finding.message
    # a pool that mounts the file system without the label: no Lustre pod ever gets its nodes
    entries = _records(synthesized["prod"])
    pool = _target(entries, "kubernetes:karpenter.sh/v1:NodePool", "=pools-p5")
    pool["inputs"]["spec"]["template"]["metadata"]["labels"].pop(LUSTRE_CLIENT_LABEL)
    (finding,) = _run_policy(policy, entries, "prod")
    assert finding.urn == pool["urn"] and "ever lands" in finding.message
    # the label on a pool whose nodes cannot reach the file system
    entries = _records(synthesized["prod"])
    pool = _target(entries, "kubernetes:karpenter.sh/v1:NodePool", "=pools-general")
    pool["inputs"]["spec"]["template"]["metadata"]["labels"][LUSTRE_CLIENT_LABEL] = "true"
    (finding,) = _run_policy(policy, entries, "prod")
    assert finding.urn == pool["urn"] and "cannot reach the file system" in finding.message


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("csi.readOnly", True, "is read-only"),
        ("mountOptions", ["relatime", "flock", "ro"], "['ro']"),
        ("mountOptions", ["noatime", "flock"], "['noatime']"),
    ],
)
def test_lustre_volumes_record_access_times(
    synthesized: dict[str, StackResult],
    as_synthesized: PolicyRun,
    field: str,
    value: Any,
    words: str,
) -> None:
    policy = POLICIES["lustre-volumes-record-access"]
    for stack in STACKS:
        assert as_synthesized(policy, stack) == []
    entries = _records(synthesized["prod"])
    volume = _team_volume(entries, "storage-pv-ml-product-lustre-datasets")
    spec = volume["inputs"]["spec"]
    *parents, last = field.split(".")
    for parent in parents:
        spec = spec[parent]
    spec[last] = value
    (finding,) = _run_policy(policy, entries, "prod")
    assert finding.urn == volume["urn"] and words in finding.message


def test_two_volumes_cannot_share_a_handle(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    first = _team_volume(entries, "storage-pv-ml-product-lustre-checkpoints")
    second = _team_volume(entries, "storage-pv-ml-product-lustre-teams")
    second["inputs"]["spec"]["csi"]["volumeHandle"] = first["inputs"]["spec"]["csi"]["volumeHandle"]
    findings = _run_policy(POLICIES["lustre-team-volumes-isolated"], entries, "prod")
    assert [f.urn for f in findings] == [second["urn"]]
    assert "one volume per handle" in findings[0].message


def test_fsx_must_sit_in_the_efa_pools_zone(
    synthesized: dict[str, StackResult], as_synthesized: PolicyRun
) -> None:
    for stack in STACKS:
        assert as_synthesized(POLICIES["fsx-in-training-zone"], stack) == []
    entries = _records(synthesized["staging"])
    file_system = _target(entries, FILE_SYSTEM, "")
    elsewhere = _target(entries, "aws:ec2/subnet:Subnet", "network-private-us-east-2c")
    file_system["propertyDependencies"]["subnetIds"] = [elsewhere["urn"]]
    findings = _run_policy(POLICIES["fsx-in-training-zone"], entries, "staging")
    (moved,) = [f for f in findings if f.urn == file_system["urn"]]
    assert "us-east-2c" in moved.message and "us-east-2a" in moved.message
    # and every client pool, all in us-east-2a, is now outside the file system's zone
    assert {f.urn for f in findings} - {file_system["urn"]}


def _zone_requirement(pool: Entry) -> Entry:
    requirements: list[Entry] = pool["inputs"]["spec"]["template"]["spec"]["requirements"]
    (requirement,) = [r for r in requirements if r["key"] == "topology.kubernetes.io/zone"]
    return requirement


@pytest.mark.parametrize("shape", ["inline", "separate rule"])
def test_a_pool_that_mounts_lustre_must_stay_in_its_zone(
    synthesized: dict[str, StackResult], shape: str
) -> None:
    """Point 7 of issue 22: the zone policy covers every pool whose nodes are Lustre clients,
    however the file system's group names its clients."""
    entries = _records(synthesized["dev"])
    pool = _target(entries, NODE_POOL, "=pools-general-lustre")
    _zone_requirement(pool)["values"] = ["us-west-2a", "us-west-2b"]
    if shape == "separate rule":
        servers = _target(entries, SECURITY_GROUP, "=storage-lustre")
        clients = servers["propertyDependencies"].pop("ingress")
        servers["propertyDependencies"].pop("egress")
        entries.append(
            _rule_resource(servers, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
                           {"ipProtocol": "tcp", "fromPort": 988, "toPort": 988})
        )  # fmt: skip
        entries[-1]["propertyDependencies"]["referencedSecurityGroupId"] = clients
    findings = _run_policy(POLICIES["fsx-in-training-zone"], entries, "dev")
    assert [f.urn for f in findings] == [pool["urn"]]
    assert "us-west-2a" in findings[0].message and "general-lustre" in findings[0].message


def _client_class_and_pool(entries: list[Entry]) -> tuple[Entry, Entry, Entry]:
    node_class = _target(entries, NODE_CLASS, "=pools-general-lustre-class")
    pool = _target(entries, NODE_POOL, "=pools-general-lustre")
    clients = _target(entries, SECURITY_GROUP, "=storage-lustre-clients")
    return node_class, pool, clients


def test_a_class_selecting_the_client_group_by_tag_is_a_client_too(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["dev"])
    node_class, pool, clients = _client_class_and_pool(entries)
    spec = node_class["inputs"]["spec"]
    spec["securityGroupSelectorTerms"] = [
        t for t in spec["securityGroupSelectorTerms"] if "id" not in t
    ] + [{"tags": {"Name": clients["inputs"]["tags"]["Name"]}}]
    node_class["propertyDependencies"]["spec"] = [
        u for u in node_class["propertyDependencies"]["spec"] if u != clients["urn"]
    ]
    _zone_requirement(pool)["values"] = ["us-west-2a", "us-west-2b"]
    findings = _run_policy(POLICIES["fsx-in-training-zone"], entries, "dev")
    assert [f.urn for f in findings] == [pool["urn"]]


def test_a_client_class_whose_subnets_are_chosen_by_tag_is_held_to_the_zone(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["dev"])
    node_class, _, _ = _client_class_and_pool(entries)
    subnet = next(e for e in entries if e["type"] == "aws:ec2/subnet:Subnet"
                  and e["inputs"].get("availabilityZone") == "us-west-2a"
                  and "private" in e["name"])  # fmt: skip
    node_class["inputs"]["spec"]["subnetSelectorTerms"] = [
        {"tags": {"Name": subnet["inputs"]["tags"]["Name"]}}
    ]
    node_class["propertyDependencies"]["spec"] = [
        u for u in node_class["propertyDependencies"]["spec"]
        if not u.split("::")[-2].endswith("aws:ec2/subnet:Subnet")
    ]  # fmt: skip
    findings = _run_policy(POLICIES["fsx-in-training-zone"], entries, "dev")
    assert [f.urn for f in findings] == [node_class["urn"]]
    assert "us-west-2a" in findings[0].message


def test_a_client_pool_pinned_by_zone_id_cannot_be_checked_and_is_refused(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["dev"])
    _, pool, _ = _client_class_and_pool(entries)
    requirement = _zone_requirement(pool)
    requirement["key"] = "topology.k8s.aws/zone-id"
    requirement["values"] = ["usw2-az2"]
    findings = _run_policy(POLICIES["fsx-in-training-zone"], entries, "dev")
    assert [f.urn for f in findings] == [pool["urn"]]
    assert "zone-id" in findings[0].message


def test_a_pool_without_the_client_group_may_cross_zones(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["dev"])
    assert len(_zone_requirement(_target(entries, NODE_POOL, "=pools-general"))["values"]) > 1
    assert _run_policy(POLICIES["fsx-in-training-zone"], entries, "dev") == []


SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"


def _rule_resource(group: Entry, resource_type: str, inputs: Entry) -> Entry:
    """A separate security group rule resource attached to ``group``."""
    name = f"extra-{resource_type.rsplit(':', 1)[-1]}"
    return {
        "urn": group["urn"].rsplit("::", 1)[0].rsplit("$", 1)[0] + f"${resource_type}::{name}",
        "type": resource_type,
        "name": name,
        "custom": True,
        "inputs": {"securityGroupId": UNKNOWN, **inputs},
        "propertyDependencies": {"securityGroupId": [group["urn"]]},
        "dependencies": [group["urn"]],
        "provider": group.get("provider", ""),
        "protect": False,
    }


@pytest.mark.parametrize(
    ("resource_type", "inputs", "words"),
    [
        # Inline, as the program writes it.
        ("inline ingress", {"protocol": "tcp", "fromPort": 22, "toPort": 22, "self": True},
         "ingress opens ports [22] beyond Lustre's"),
        ("inline ingress", {"protocol": "-1", "fromPort": 0, "toPort": 0, "self": True},
         "inline ingress admits protocol -1"),
        ("inline ingress", {"protocol": "tcp", "fromPort": 988, "toPort": 988,
                            "cidrBlocks": ["0.0.0.0/0"]}, "admits address ranges ['0.0.0.0/0']"),
        ("inline egress", {"protocol": "-1", "fromPort": 0, "toPort": 0,
                           "cidrBlocks": ["0.0.0.0/0"]}, "sends to address ranges ['0.0.0.0/0']"),
        # The same facts as separate resources.
        ("aws:ec2/securityGroupRule:SecurityGroupRule",
         {"type": "ingress", "protocol": "tcp", "fromPort": 22, "toPort": 22,
          "cidrBlocks": ["0.0.0.0/0"]}, "admits address ranges ['0.0.0.0/0']"),
        ("aws:ec2/securityGroupRule:SecurityGroupRule",
         {"type": "egress", "protocol": "-1", "fromPort": 0, "toPort": 0, "self": True},
         "sends to protocol -1"),
        ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
         {"ipProtocol": "-1", "cidrIpv4": "0.0.0.0/0"}, "admits address ranges ['0.0.0.0/0']"),
        ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
         {"ipProtocol": "tcp", "fromPort": 2049, "toPort": 2049,
          "referencedSecurityGroupId": "sg-0123"}, "ingress opens ports [2049] beyond Lustre's"),
        ("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
         {"ipProtocol": "-1", "cidrIpv6": "::/0"}, "sends to address ranges ['::/0']"),
        ("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
         {"ipProtocol": "udp", "fromPort": 53, "toPort": 53, "prefixListId": "pl-0123"},
         "sends to address ranges ['pl-0123']"),
    ],
)  # fmt: skip
def test_fsx_opens_only_lustre_ports(
    synthesized: dict[str, StackResult], resource_type: str, inputs: Entry, words: str
) -> None:
    entries = _records(synthesized["prod"])
    assert _run_policy(POLICIES["fsx-lustre-ports-only"], entries, "prod") == []
    group = _target(entries, SECURITY_GROUP, "=storage-lustre")
    if resource_type.startswith("inline "):
        group["inputs"].setdefault(resource_type.split()[1], []).append(inputs)
    else:
        entries.append(_rule_resource(group, resource_type, inputs))
    findings = _run_policy(POLICIES["fsx-lustre-ports-only"], entries, "prod")
    assert findings and {f.urn for f in findings} == {group["urn"]}
    assert any(words in f.message for f in findings), [f.message for f in findings]


def test_fsx_in_a_group_the_stack_does_not_create_is_caught(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["prod"])
    file_system = _target(entries, FILE_SYSTEM, "")
    file_system["inputs"]["securityGroupIds"].append("sg-0123456789abcdef0")
    findings = _run_policy(POLICIES["fsx-lustre-ports-only"], entries, "prod")
    assert [f.urn for f in findings] == [file_system["urn"]]
    assert "this stack does not create" in findings[0].message


def test_fsx_rules_of_other_groups_are_not_its_own(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    clients = _target(entries, SECURITY_GROUP, "=storage-lustre-clients")
    entries.append(
        _rule_resource(
            clients,
            "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
            {"ipProtocol": "-1", "cidrIpv4": "0.0.0.0/0"},
        )
    )
    assert _run_policy(POLICIES["fsx-lustre-ports-only"], entries, "prod") == []


@pytest.mark.parametrize("direction", ["ingress", "egress"])
def test_fsx_missing_a_lustre_port_is_caught(
    synthesized: dict[str, StackResult], direction: str
) -> None:
    entries = _records(synthesized["prod"])
    group = _target(entries, SECURITY_GROUP, "=storage-lustre")
    group["inputs"][direction] = [r for r in group["inputs"][direction] if r["fromPort"] != 1018]
    findings = _run_policy(POLICIES["fsx-lustre-ports-only"], entries, "prod")
    assert [f.message for f in findings] == [
        f"group storage-lustre {direction} lacks Lustre ports [1018, 1019, 1020, 1021, 1022, 1023]"
    ]


def test_efa_enabled_file_system_may_take_all_traffic_from_groups_only(
    synthesized: dict[str, StackResult],
) -> None:
    """Config refuses an EFA-enabled file system for now; the policy is ready for one."""
    entries = _records(synthesized["prod"])
    _target(entries, FILE_SYSTEM, "")["inputs"]["efaEnabled"] = True
    group = _target(entries, SECURITY_GROUP, "=storage-lustre")
    clients = group["inputs"]["ingress"][0]["securityGroups"]
    for direction in ("ingress", "egress"):
        group["inputs"][direction] += [
            {"protocol": "-1", "fromPort": 0, "toPort": 0, "self": True},
            {"protocol": "-1", "fromPort": 0, "toPort": 0, "securityGroups": clients},
        ]
    assert _run_policy(POLICIES["fsx-lustre-ports-only"], entries, "prod") == []
    group["inputs"]["ingress"].append(
        {"protocol": "-1", "fromPort": 0, "toPort": 0, "cidrBlocks": ["10.0.0.0/8"]}
    )
    findings = _run_policy(POLICIES["fsx-lustre-ports-only"], entries, "prod")
    assert [f.message for f in findings] == [
        "storage-lustre inline ingress admits address ranges ['10.0.0.0/8'], not node groups"
    ]


EFS_FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"
EFS_ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"


@pytest.mark.parametrize(
    ("mutation", "words"),
    [
        (at("encrypted", False), "not encrypted at rest"),
        (at("encrypted", _DELETE), "not encrypted at rest"),
        (at("kmsKeyId", _DELETE), "customer managed KMS key"),
        (at("kmsKeyId", "arn:aws:kms:us-east-1:333344445555:alias/aws/elasticfilesystem"),
         "customer managed KMS key"),
    ],
)  # fmt: skip
def test_efs_encrypted_with_customer_key(
    synthesized: dict[str, StackResult], mutation: Mutation, words: str
) -> None:
    entries = _records(synthesized["prod"])
    policy = POLICIES["efs-encrypted-customer-key"]
    assert _run_policy(policy, entries, "prod") == []
    file_system = _target(entries, EFS_FILE_SYSTEM, "")
    mutation(file_system)
    findings = _run_policy(policy, entries, "prod")
    assert [(f.urn, f.enforcementLevel) for f in findings] == [(file_system["urn"], "mandatory")]
    assert words in findings[0].message


@pytest.mark.parametrize(
    ("resource_type", "inputs", "words"),
    [
        ("inline ingress", {"protocol": "tcp", "fromPort": 2049, "toPort": 2049,
                            "cidrBlocks": ["10.0.0.0/8"]}, "admits address ranges ['10.0.0.0/8']"),
        ("inline ingress", {"protocol": "tcp", "fromPort": 2049, "toPort": 2049, "self": True},
         "admits the mount targets' own group"),
        ("inline ingress", {"protocol": "tcp", "fromPort": 22, "toPort": 22,
                            "securityGroups": ["sg-0123456789abcdef0"]}, "not only NFS"),
        ("inline egress", {"protocol": "-1", "fromPort": 0, "toPort": 0,
                           "cidrBlocks": ["0.0.0.0/0"]}, "open connections"),
        ("aws:ec2/securityGroupRule:SecurityGroupRule",
         {"type": "ingress", "protocol": "tcp", "fromPort": 2049, "toPort": 2049,
          "cidrBlocks": ["0.0.0.0/0"]}, "admits address ranges ['0.0.0.0/0']"),
        ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
         {"ipProtocol": "-1", "referencedSecurityGroupId": "sg-0123"}, "not only NFS"),
        ("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
         {"ipProtocol": "-1", "cidrIpv4": "0.0.0.0/0"}, "open connections"),
    ],
)  # fmt: skip
def test_efs_mount_targets_admit_only_nfs_from_nodes(
    synthesized: dict[str, StackResult], resource_type: str, inputs: Entry, words: str
) -> None:
    entries = _records(synthesized["prod"])
    policy = POLICIES["efs-mount-targets-nfs-from-nodes"]
    assert _run_policy(policy, entries, "prod") == []
    group = _target(entries, SECURITY_GROUP, "=storage-models")
    if resource_type.startswith("inline "):
        group["inputs"].setdefault(resource_type.split()[1], []).append(inputs)
    else:
        entries.append(_rule_resource(group, resource_type, inputs))
    findings = _run_policy(policy, entries, "prod")
    assert findings and {f.urn for f in findings} == {group["urn"]}
    assert any(words in f.message for f in findings), [f.message for f in findings]


def test_efs_mount_target_admitting_another_stack_group_is_caught(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["prod"])
    group = _target(entries, SECURITY_GROUP, "=storage-models")
    servers = _target(entries, SECURITY_GROUP, "=storage-lustre")
    rule = _rule_resource(
        group,
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        {"ipProtocol": "tcp", "fromPort": 2049, "toPort": 2049,
         "referencedSecurityGroupId": "sg-0a1b2c3d4e5f60718"},
    )  # fmt: skip
    rule["propertyDependencies"]["referencedSecurityGroupId"] = [servers["urn"]]
    entries.append(rule)
    findings = _run_policy(POLICIES["efs-mount-targets-nfs-from-nodes"], entries, "prod")
    assert [f.message for f in findings] == [
        "storage-models admits storage-lustre, a group of this stack rather than the nodes'"
    ]


def test_efs_mount_target_in_a_group_the_stack_does_not_create_is_caught(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["prod"])
    target = _target(entries, "aws:efs/mountTarget:MountTarget", "")
    target["inputs"]["securityGroups"].append("sg-0123456789abcdef0")
    findings = _run_policy(POLICIES["efs-mount-targets-nfs-from-nodes"], entries, "prod")
    assert [f.urn for f in findings] == [target["urn"]]
    assert "this stack does not create" in findings[0].message


@pytest.mark.parametrize(
    ("name", "mutation", "words"),
    [
        ("-ml-research", at("posixUser", _DELETE), "no POSIX user"),
        ("-ml-research", at("rootDirectory.creationInfo.ownerGid", 0), "owned by gid 0"),
        ("-ml-research", at("rootDirectory.creationInfo.ownerGid", 5002), "not its own team gid"),
        ("-ml-research", at("rootDirectory.creationInfo", _DELETE), "owned by gid None"),
        ("-ml-research", at("rootDirectory.creationInfo.permissions", "0777"), "not 2770"),
        ("-ml-research", at("rootDirectory.path", "/"), "neither a team's directory"),
        ("-shared", at("rootDirectory.creationInfo.permissions", "2777"), "not 2775"),
        ("-shared", at("posixUser.gid", 1000), "readers could change the released models"),
        ("-shared-readers", at("rootDirectory.creationInfo.ownerUid", 65534), "readers could"),
        ("-shared-readers", at("posixUser.secondaryGids", [5900]), "readers could change"),
    ],
)  # fmt: skip
def test_efs_access_points_impose_a_team_owned_root(
    synthesized: dict[str, StackResult], name: str, mutation: Mutation, words: str
) -> None:
    entries = _records(synthesized["prod"])
    policy = POLICIES["efs-access-points-team-owned"]
    assert _run_policy(policy, entries, "prod") == []
    point = _target(entries, EFS_ACCESS_POINT, f"=storage-models{name}")
    mutation(point)
    findings = _run_policy(policy, entries, "prod")
    assert findings and {f.urn for f in findings} <= {
        e["urn"] for e in entries if e["type"] == EFS_ACCESS_POINT
    }
    assert any(words in f.message for f in findings), [f.message for f in findings]


def test_efs_access_points_sharing_a_gid_are_caught(synthesized: dict[str, StackResult]) -> None:
    entries = _records(synthesized["prod"])
    point = _target(entries, EFS_ACCESS_POINT, "=storage-models-ml-product")
    at("posixUser.gid", 5001)(point)
    at("rootDirectory.creationInfo.ownerGid", 5001)(point)
    findings = _run_policy(POLICIES["efs-access-points-team-owned"], entries, "prod")
    assert any("shares gid 5001" in f.message for f in findings), [f.message for f in findings]


def _no_tls_deny(policy: dict[str, Any]) -> None:
    policy["Statement"] = [s for s in policy["Statement"] if s["Effect"] != "Deny"]


def _anyone_allowed(policy: dict[str, Any]) -> None:
    policy["Statement"][1]["Principal"] = {"AWS": "*"}


def _root_granted(policy: dict[str, Any]) -> None:
    policy["Statement"][1]["Action"].append("elasticfilesystem:ClientRootAccess")


@pytest.mark.parametrize(
    ("mutation", "words"),
    [
        (_no_tls_deny, "does not deny connections without TLS"),
        (_anyone_allowed, "allows every principal"),
        (_root_granted, "grants ClientRootAccess"),
    ],
)
def test_efs_file_system_policy_denies_plain_nfs_and_anonymous_mounts(
    synthesized: dict[str, StackResult], mutation: Callable[[dict[str, Any]], None], words: str
) -> None:
    entries = _records(synthesized["prod"])
    policy = POLICIES["efs-file-system-policy"]
    assert _run_policy(policy, entries, "prod") == []
    target = _target(entries, "aws:efs/fileSystemPolicy:FileSystemPolicy", "")
    document = json.loads(target["inputs"]["policy"])
    mutation(document)
    target["inputs"]["policy"] = json.dumps(document)
    findings = _run_policy(policy, entries, "prod")
    assert [(f.urn, f.enforcementLevel) for f in findings] == [(target["urn"], "mandatory")]
    assert words in findings[0].message


def test_an_efs_file_system_without_a_policy_is_caught(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["staging"])
    file_system = _target(entries, EFS_FILE_SYSTEM, "")
    kept = [e for e in entries if e["type"] != "aws:efs/fileSystemPolicy:FileSystemPolicy"]
    assert len(kept) == len(entries) - 1
    findings = _run_policy(POLICIES["efs-file-system-policy"], kept, "staging")
    assert [f.urn for f in findings] == [file_system["urn"]]
    assert "no file system policy" in findings[0].message


QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"


@pytest.mark.parametrize(
    ("mutation", "words"),
    [
        (at("spec.weight", _DELETE), "weight is not set"),
        (at("spec.reclaimable", _DELETE), "reclaimable is not set"),
        (at("spec|guarantee|resource|nvidia.com/gpu", "200"), "guarantee 200 exceeds deserved"),
        (at("spec|deserved|nvidia.com/gpu", "500"), "exceeds capability"),
    ],
)
def test_queue_shares_ordered(
    synthesized: dict[str, StackResult], mutation: Mutation, words: str
) -> None:
    entries = _records(synthesized["prod"])
    assert _run_policy(POLICIES["queue-shares-ordered"], entries, "prod") == []
    queue = _target(entries, QUEUE, "ml-research")
    mutation(queue)
    findings = _run_policy(POLICIES["queue-shares-ordered"], entries, "prod")
    assert {f.urn for f in findings} == {queue["urn"]}
    assert any(words in f.message for f in findings)


def test_queues_fit_the_pools(
    synthesized: dict[str, StackResult], as_synthesized: PolicyRun
) -> None:
    for stack in STACKS:
        assert as_synthesized(POLICIES["queues-fit-pools"], stack) == []
    entries = _records(synthesized["prod"])
    pool = _target(entries, NODE_POOL, "=pools-p5en")
    # p5en's own NodePool without GPUs: p5's 14 nodes (112 GPUs; its other 2 are Slurm's
    # NodePool p5-slurm, which does not count) for 128 guaranteed.
    pool["inputs"]["spec"]["limits"]["nvidia.com/gpu"] = 0
    findings = _run_policy(POLICIES["queues-fit-pools"], entries, "prod")
    assert [f.message for f in findings] == [
        "queues promise 128 nvidia.com/gpu as guarantee but the NodePools Volcano's pods can use "
        "are limited to 112, of which Slurm node sets on them hold 0",
        "queues promise 192 nvidia.com/gpu as deserved but the NodePools Volcano's pods can use "
        "are limited to 112, of which Slurm node sets on them hold 0",
    ]


def test_queues_fit_the_pools_reads_slurm_pools_by_taint_and_node_caps(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _records(synthesized["prod"])
    slurm_pool = _target(entries, NODE_POOL, "=pools-p5-slurm")
    # Kept for Slurm by its taint alone: its 16 GPUs are still not the teams' capacity, so
    # without p5en's the queues' 128 guaranteed do not fit in p5's 112.
    slurm_pool["inputs"]["spec"]["template"]["metadata"]["labels"].pop(
        "trainingplatform.io/reserved-for"
    )
    assert _run_policy(POLICIES["queues-fit-pools"], entries, "prod") == []
    own = _target(entries, NODE_POOL, "=pools-p5en")["inputs"]["spec"]["limits"]
    gpus = own["nvidia.com/gpu"]
    own["nvidia.com/gpu"] = 0
    findings = _run_policy(POLICIES["queues-fit-pools"], entries, "prod")
    assert [f.message.split(" as ")[1] for f in findings] == [
        "guarantee but the NodePools Volcano's pods can use are limited to 112, of which Slurm "
        "node sets on them hold 0",
        "deserved but the NodePools Volcano's pods can use are limited to 112, of which Slurm "
        "node sets on them hold 0",
    ]
    own["nvidia.com/gpu"] = gpus
    # A GPU limit the node limit cannot reach is not capacity: 2 p5en nodes hold 16 GPUs,
    # so p5's 14 nodes (112) and those 16 keep the 128 guaranteed but not the 192 deserved.
    own["nodes"] = 2
    findings = _run_policy(POLICIES["queues-fit-pools"], entries, "prod")
    assert [f.message for f in findings] == [
        "queues promise 192 nvidia.com/gpu as deserved but the NodePools Volcano's pods can use "
        "are limited to 128, of which Slurm node sets on them hold 0",
    ]


def test_queues_fit_the_pools_counts_slurm_on_shared_pools(
    synthesized: dict[str, StackResult],
) -> None:
    """The older layout, slurmd on the pool's own NodePool: its nodes come off the teams'."""
    entries = _records(synthesized["prod"])
    for name in ("=pools-p5-slurm", "=pools-p5en-slurm"):
        _target(entries, NODE_POOL, name)["inputs"]["spec"]["limits"]["nvidia.com/gpu"] = 0
    for name in ("p5", "p5en"):
        (node_set,) = [
            e for e in entries
            if e["type"] == NODE_SET and e["inputs"]["metadata"]["name"] == name
        ]  # fmt: skip
        node_set["inputs"]["spec"]["template"]["spec"]["nodeSelector"].pop(
            "trainingplatform.io/reserved-for"
        )
    # Own NodePools: p5 14 + p5en 10 nodes = 192 GPUs, of which the node sets, as far as
    # their ScaledObjects may grow them (p5 2, p5en 4 nodes), now hold 48.
    own = _target(entries, NODE_POOL, "=pools-p5en")["inputs"]["spec"]["limits"]
    own["nvidia.com/gpu"] = 8 * 8
    findings = _run_policy(POLICIES["queues-fit-pools"], entries, "prod")
    assert [f.message for f in findings] == [
        "queues promise 192 nvidia.com/gpu as deserved but the NodePools Volcano's pods can use "
        "are limited to 176, of which Slurm node sets on them hold 48",
    ]


RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"


def _node_pod(runtime: Entry, job: str = "node") -> dict[str, Any]:
    jobs = runtime["inputs"]["spec"]["template"]["spec"]["replicatedJobs"]
    pod: dict[str, Any] = next(j for j in jobs if j["name"] == job)["template"]["spec"]["template"][
        "spec"
    ]
    return pod


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda r: _node_pod(r).pop("schedulerName"), "the default scheduler"),
        (lambda r: _node_pod(r).update(schedulerName="my-scheduler"), "scheduled by my-scheduler"),
        (lambda r: r["inputs"]["spec"].pop("podGroupPolicy"), "no podGroupPolicy"),
        (
            lambda r: r["inputs"]["spec"].update(
                podGroupPolicy={"coscheduling": {"scheduleTimeoutSeconds": 60}}
            ),
            "podGroupPolicy ['coscheduling'] needs a scheduler this platform does not run",
        ),
    ],
)
def test_runtime_gang_scheduled(
    synthesized: dict[str, StackResult], change: Callable[[Entry], Any], words: str
) -> None:
    entries = _records(synthesized["prod"])
    assert _run_policy(POLICIES["runtime-gang-scheduled"], entries, "prod") == []
    runtime = _target(entries, RUNTIME, "trainer-ml-research-torch-p5")
    change(runtime)
    findings = _run_policy(POLICIES["runtime-gang-scheduled"], entries, "prod")
    assert [f.urn for f in findings] == [runtime["urn"]] and words in findings[0].message


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            lambda p: p["containers"][0]["resources"]["requests"].update({"nvidia.com/gpu": "4"}),
            "requests 4 nvidia.com/gpu on p5.48xlarge, which has 8",
        ),
        (
            lambda p: p["containers"][0]["resources"]["requests"].update(
                {"vpc.amazonaws.com/efa": "16"}
            ),
            "requests 16 EFA interfaces; the pool's nodes have 32",
        ),
        (lambda p: p.update(tolerations=[]), "does not tolerate the pool's taint nvidia.com/gpu"),
    ],
)
def test_runtime_requests_match_pool(
    synthesized: dict[str, StackResult],
    as_synthesized: PolicyRun,
    change: Callable[[dict[str, Any]], Any],
    words: str,
) -> None:
    for stack in STACKS:
        assert as_synthesized(POLICIES["runtime-requests-match-pool"], stack) == []
    entries = _records(synthesized["prod"])
    runtime = _target(entries, RUNTIME, "trainer-ml-research-mpi-p5")
    change(_node_pod(runtime, "launcher"))
    findings = _run_policy(POLICIES["runtime-requests-match-pool"], entries, "prod")
    assert [f.urn for f in findings] == [runtime["urn"]]
    assert words in findings[0].message


def _pin_by_karpenter_label(pod: dict[str, Any]) -> None:
    pod["nodeSelector"] = {"karpenter.sh/nodepool": pod["nodeSelector"].pop(POOL_LABEL)}


def _pin_by_affinity(pod: dict[str, Any]) -> None:
    pool = pod["nodeSelector"].pop(POOL_LABEL)
    pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]}]}]}}}  # fmt: skip


@pytest.mark.parametrize("pin", [_pin_by_karpenter_label, _pin_by_affinity])
def test_runtime_pinned_any_way_is_sized_to_its_pool(
    synthesized: dict[str, StackResult], pin: Callable[[dict[str, Any]], None]
) -> None:
    entries = _records(synthesized["prod"])
    runtime = _target(entries, RUNTIME, "trainer-ml-research-torch-p5")
    pod = _node_pod(runtime)
    pin(pod)
    assert _run_policy(POLICIES["runtime-requests-match-pool"], entries, "prod") == []
    pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    findings = _run_policy(POLICIES["runtime-requests-match-pool"], entries, "prod")
    assert [f.message for f in findings] == [
        "node requests 1 nvidia.com/gpu on p5.48xlarge, which has 8"
    ]


RAY_KINDS = ("RayCluster", "RayJob", "RayService")


def _ray_entry(result: StackResult, kind: str) -> Entry:
    """A Ray object of the first team on pool p5, as :mod:`components.kuberay` builds it."""
    pool = result.config.pool("p5")
    assert pool is not None
    team = result.config.teams[0].name
    job = kuberay.ray_job(
        "standing", pool, team=team, image=versions.RAY_IMAGE, workers=2,
        entrypoint="python train.py", checkpoints=None,
    )  # fmt: skip
    cluster = job["spec"]["rayClusterSpec"]
    spec = {
        "RayCluster": cluster,
        "RayJob": job["spec"],
        "RayService": {"rayClusterConfig": cluster},
    }
    name = f"ray-{kind.lower()}"
    return {
        "type": f"kubernetes:{kuberay.RAY_API}:{kind}",
        "name": name,
        "urn": f"urn:pulumi:prod::training-platform::kubernetes:{kuberay.RAY_API}:{kind}::{name}",
        "custom": True,
        "inputs": {"apiVersion": kuberay.RAY_API, "kind": kind,
                   "metadata": {"name": "standing", "namespace": team}, "spec": spec[kind]},
    }  # fmt: skip


def _ray_pods(entry: Entry) -> list[tuple[str, dict[str, Any]]]:
    templates = kuberay.ray_pod_templates(entry["inputs"]["kind"], entry["inputs"]["spec"])
    return [(where, template["spec"]) for where, template in templates]


def _unpin_image(pod: dict[str, Any]) -> None:
    pod["containers"][0]["image"] = "rayproject/ray:latest"


def _privileged(pod: dict[str, Any]) -> None:
    pod["containers"][0]["securityContext"]["privileged"] = True


def _no_seccomp_profile(pod: dict[str, Any]) -> None:
    del pod["securityContext"]["seccompProfile"]


def _half_the_gpus(pod: dict[str, Any]) -> None:
    pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "4"


def _no_tolerations(pod: dict[str, Any]) -> None:
    pod["tolerations"] = []


# (policy, mutation of one pod template, words, whether only pods pinned to the GPU pool)
RAY_CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, bool]] = [
    ("training-images-pinned", _unpin_image, "is not pinned to a version or digest", False),
    ("runtimes-hardened", _privileged, "runs privileged", False),
    ("runtimes-hardened", _no_seccomp_profile, "no seccomp profile", False),
    ("runtime-requests-match-pool", _half_the_gpus, "requests 4 nvidia.com/gpu", True),
    ("runtime-requests-match-pool", _no_tolerations, "does not tolerate the pool's taint", True),
]


@pytest.mark.parametrize("kind", RAY_KINDS)
def test_ray_pod_templates_are_held_to_the_runtimes_rules(
    synthesized: dict[str, StackResult], as_synthesized: PolicyRun, kind: str
) -> None:
    """Every pod template of a RayCluster, RayJob and RayService (head, worker groups,
    submitter) is read by each rule that holds a runtime's pods, and the builders' pass."""
    for stack in STACKS:
        assert as_synthesized(POLICIES["training-images-pinned"], stack) == []
    entries = _records(synthesized["prod"])
    entry = _ray_entry(synthesized["prod"], kind)
    entries.append(entry)
    for policy in sorted({case[0] for case in RAY_CASES}):
        assert _run_policy(POLICIES[policy], entries, "prod") == [], policy
    places = [where for where, _ in _ray_pods(entry)]
    assert len(places) == (3 if kind == "RayJob" else 2), places
    for policy, change, words, pinned_only in RAY_CASES:
        for index, where in enumerate(places):
            if pinned_only and "workerGroupSpecs" not in where:
                continue
            changed = copy.deepcopy(entry)
            change(_ray_pods(changed)[index][1])
            findings = _run_policy(POLICIES[policy], [*entries[:-1], changed], "prod")
            assert [f.urn for f in findings] == [entry["urn"]], (policy, where)
            assert words in findings[0].message and where in findings[0].message, findings[
                0
            ].message


@pytest.mark.parametrize(
    ("directory", "pinned"),
    [
        ("https://github.com/kubeflow/trainer.git/manifests/overlays/standalone?ref=v1.9.4", True),
        ("https://github.com/kubeflow/trainer.git/manifests/overlays/standalone?ref=master", False),
        ("https://github.com/kubeflow/trainer.git/manifests/overlays/standalone", False),
        ("./manifests/local-overlay", True),
    ],
)
def test_remote_kustomizations_are_pinned(
    synthesized: dict[str, StackResult], directory: str, pinned: bool
) -> None:
    entries = _records(synthesized["staging"])
    kustomization = _target(entries, "kubernetes:kustomize/v2:Directory", "training-operator")
    assert _run_policy(POLICIES["helm-chart-pinned"], entries, "staging") == []
    kustomization["inputs"]["directory"] = directory
    findings = _run_policy(POLICIES["helm-chart-pinned"], entries, "staging")
    assert (findings == []) is pinned
    assert all(f.urn == kustomization["urn"] for f in findings)


# --------------------------------------------------------------------------- EKS's calendar


def _calendar_findings(
    entries: list[Entry], stack: str, policy: str, today: str
) -> list[tuple[str, str]]:
    config = load_policy_config(stack)
    config[policy] = {**(config.get(policy) or {}), "today": today}
    records = [ResourceRecord.from_json(entry) for entry in entries]
    return [(f.enforcementLevel, f.message) for f in evaluate(records, config, [POLICIES[policy]])]


@pytest.mark.parametrize("shape", ["eks:index:Cluster", "aws:eks/cluster:Cluster"])
@pytest.mark.parametrize(
    ("version", "today", "blocked", "warned"),
    [
        ("1.34", "2026-12-01", False, True),  # its last day but one of standard support
        ("1.34", "2026-12-02", False, True),  # the last day
        ("1.34", "2026-12-03", True, False),  # ends 2026-12-02 (EKS's calendar)
        ("1.35", "2026-12-01", False, False),  # 116 days left
        ("1.35", "2026-12-27", False, True),  # 90 days before 2027-03-27
        ("1.35", "2027-03-28", True, False),
        ("1.33", "2026-12-01", True, False),
    ],
)
def test_kubernetes_version_against_eks_standard_support(
    synthesized: dict[str, StackResult],
    shape: str,
    version: str,
    today: str,
    blocked: bool,
    warned: bool,
) -> None:
    entries = _records(synthesized["prod"])
    cluster = _target(entries, shape, "")
    entries = [e for e in entries if e["type"] in ("eks:index:Cluster", "aws:eks/cluster:Cluster")]
    for entry in entries:
        entry["inputs"]["version"] = version
    if shape == "aws:eks/cluster:Cluster":
        entries = [cluster]
    hard = _calendar_findings(entries, "prod", "eks-version-in-standard-support", today)
    soft = _calendar_findings(entries, "prod", "eks-version-standard-support-ending", today)
    assert bool(hard) is blocked, hard
    assert all(level == "mandatory" for level, _ in hard)
    assert bool(soft) is warned, soft
    assert all(level == "advisory" for level, _ in soft), (
        "advice even where prod makes all mandatory"
    )


def test_a_version_missing_from_the_calendar_is_refused(
    synthesized: dict[str, StackResult],
) -> None:
    entries = [e for e in _records(synthesized["prod"]) if e["type"] == "eks:index:Cluster"]
    entries[0]["inputs"]["version"] = "1.36"
    hard = _calendar_findings(entries, "prod", "eks-version-in-standard-support", "2026-12-01")
    assert hard and "no entry in EKS's support calendar" in hard[0][1]
