"""The cluster component under mocks: encryption, logs, endpoint, access, add-ons, nodes, wiring."""

from __future__ import annotations

import json

import pytest

from components import health_marks, versions
from components.cluster import CLUSTER_ADMIN_POLICY, api_server_endpoint
from components.config import parse_platform_config
from synth.run import StackResult
from tests import component_runs as parts
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data
from tests.kubernetes_semantics import uncovered

CLUSTER = "eks:index:Cluster"
ADDON = "aws:eks/addon:Addon"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"


@pytest.fixture(scope="module", params=STACKS)
def stack_run(
    request: pytest.FixtureRequest, synthesized: dict[str, StackResult]
) -> tuple[str, ProgramRun]:
    return request.param, ProgramRun(synthesized[request.param].records)


def test_secrets_encrypted_with_a_rotating_customer_key(stack_run: tuple[str, ProgramRun]) -> None:
    _, run = stack_run
    cluster = run.one(CLUSTER)
    key = run.one("aws:kms/key:Key", "secrets")
    assert key.inputs["enableKeyRotation"] is True
    assert key.urn in cluster.dependencies
    assert cluster.inputs["encryptionConfigKeyArn"].startswith("arn:aws:kms:")
    # the cluster role may use that key and no other
    policy = json.loads(run.one("aws:iam/rolePolicy:RolePolicy", "secrets-key").inputs["policy"])
    assert policy["Statement"][0]["Resource"] == cluster.inputs["encryptionConfigKeyArn"]


def test_control_plane_logs_with_retention(stack_run: tuple[str, ProgramRun]) -> None:
    stack, run = stack_run
    config = parse_platform_config(stack_data(stack))
    cluster = run.one(CLUSTER)
    assert sorted(cluster.inputs["enabledClusterLogTypes"]) == ["api", "audit", "authenticator"]
    group = run.one("aws:cloudwatch/logGroup:LogGroup", "control-plane")
    assert group.inputs["name"] == f"/aws/eks/{config.name}/cluster"
    assert group.inputs["retentionInDays"] == config.cluster.log_retention_days
    assert group.urn in cluster.dependencies, "log group must exist before EKS writes to it"


def test_api_authentication_and_no_default_node_group(stack_run: tuple[str, ProgramRun]) -> None:
    _, run = stack_run
    inputs = run.one(CLUSTER).inputs
    assert inputs["authenticationMode"] == "API"
    assert inputs["skipDefaultNodeGroup"] is True
    assert inputs["bootstrapSelfManagedAddons"] is False
    assert inputs["nodeAssociatePublicIpAddress"] is False


def test_pulumi_eks_makes_no_default_security_groups(stack_run: tuple[str, ProgramRun]) -> None:
    """Neither of pulumi-eks's default groups is made: the control plane gets the API's own.

    pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts (v4.3.0; 4.4.0 changed only dependencies):
    skipDefaultSecurityGroups drops its cluster group, its node group (which no node here
    would use) and the node ingress rule; clusterSecurityGroup is then the control plane's.
    """
    stack, run = stack_run
    config = parse_platform_config(stack_data(stack))
    cluster = run.one(CLUSTER)
    api = [g for g in run.of_type(SECURITY_GROUP) if g.name == f"{config.name}-api"]
    assert len(api) == 1
    assert cluster.inputs["skipDefaultSecurityGroups"] is True
    assert cluster.property_dependencies["clusterSecurityGroup"] == [api[0].urn]
    # pulumi-eks asks for a group without inline rules; its rules are separate resources.
    assert not api[0].inputs.get("ingress") and not api[0].inputs.get("egress")
    rules = run.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    api_rules = [r for r in rules if r.name.startswith(f"{config.name}-api-from-")]
    assert sorted(r.inputs["cidrIpv4"] for r in api_rules) == sorted(
        config.cluster.endpoint.deploy_from.cidrs
    )
    for rule in api_rules:
        assert rule.property_dependencies["securityGroupId"] == [api[0].urn], rule.name
        assert (rule.inputs["fromPort"], rule.inputs["toPort"]) == (443, 443)


def test_prod_admits_its_deploy_path_to_the_api_only(synthesized: dict[str, StackResult]) -> None:
    """The case above is not vacuous: prod's deploy path has CIDRs, so rules exist."""
    run = ProgramRun(synthesized["prod"].records)
    rules = run.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert [r for r in rules if "-api-from-" in r.name]


def test_no_oidc_provider_because_nothing_uses_irsa(stack_run: tuple[str, ProgramRun]) -> None:
    """Only IRSA needs the IAM OIDC provider; every role here is for a service or Pod Identity."""
    _, run = stack_run
    assert run.one(CLUSTER).inputs["createOidcProvider"] is False
    roles = run.of_type("aws:iam/role:Role")
    assert roles
    for role in roles:
        policy = json.loads(role.inputs["assumeRolePolicy"])
        for statement in policy["Statement"]:
            actions = statement["Action"]
            actions = [actions] if isinstance(actions, str) else actions
            assert "sts:AssumeRoleWithWebIdentity" not in actions, role.name
            assert "Federated" not in statement.get("Principal", {}), role.name


def test_endpoint_inputs(stack_run: tuple[str, ProgramRun]) -> None:
    stack, run = stack_run
    endpoint = parse_platform_config(stack_data(stack)).cluster.endpoint
    inputs = run.one(CLUSTER).inputs
    assert inputs["endpointPrivateAccess"] is endpoint.private_access
    assert inputs["endpointPublicAccess"] is endpoint.public_access
    assert inputs.get("publicAccessCidrs") == (endpoint.public_access_cidrs or None)


def test_prod_endpoint_is_private_only(synthesized: dict[str, StackResult]) -> None:
    inputs = ProgramRun(synthesized["prod"].records).one(CLUSTER).inputs
    assert inputs["endpointPublicAccess"] is False and "publicAccessCidrs" not in inputs
    dev = ProgramRun(synthesized["dev"].records).one(CLUSTER).inputs
    assert dev["endpointPublicAccess"] is True and dev["publicAccessCidrs"] == ["203.0.113.0/24"]


def test_access_entry_with_cluster_admin_for_each_admin(stack_run: tuple[str, ProgramRun]) -> None:
    stack, run = stack_run
    config = parse_platform_config(stack_data(stack))
    entries = [  # team principals' entries carry groups (tests/test_tenancy.py)
        e
        for e in run.of_type("aws:eks/accessEntry:AccessEntry")
        if e.inputs["type"] == "STANDARD" and "kubernetesGroups" not in e.inputs
    ]
    associations = run.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    admins = config.cluster.admin_principal_arns
    assert sorted(e.inputs["principalArn"] for e in entries) == sorted(admins)
    assert sorted(a.inputs["principalArn"] for a in associations) == sorted(admins)
    for association in associations:
        assert association.inputs["policyArn"] == CLUSTER_ADMIN_POLICY
        assert association.inputs["accessScope"] == {"type": "cluster"}
        assert association.inputs["clusterName"] == config.name


def test_addons_pinned_by_the_bill_of_materials(stack_run: tuple[str, ProgramRun]) -> None:
    stack, run = stack_run
    minor = parse_platform_config(stack_data(stack)).cluster.kubernetes_version
    pins = versions.EKS_ADDONS[minor]
    cluster_component = run.one("trainingplatform:index:Cluster").urn
    found = {
        a.inputs["addonName"]: a.inputs["addonVersion"]
        for a in run.of_type(ADDON)
        if a.parent == cluster_component
    }
    assert found == {
        "vpc-cni": pins.vpc_cni,
        "kube-proxy": pins.kube_proxy,
        "coredns": pins.coredns,
        "eks-pod-identity-agent": pins.eks_pod_identity_agent,
        "aws-ebs-csi-driver": pins.aws_ebs_csi_driver,
        "eks-node-monitoring-agent": pins.eks_node_monitoring_agent,
    }
    assert versions.addon_semver(found["vpc-cni"]) >= (1, 18, 5)


def test_addons_ordered_around_the_system_nodes(stack_run: tuple[str, ProgramRun]) -> None:
    _, run = stack_run
    node_group = run.one("aws:eks/nodeGroup:NodeGroup")
    addons = {a.inputs["addonName"]: a for a in run.of_type(ADDON)}
    for before in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent"):
        assert addons[before].urn in node_group.dependencies, before
    for after in ("coredns", "aws-ebs-csi-driver"):
        assert node_group.urn in addons[after].dependencies, after
    assert addons["eks-pod-identity-agent"].urn in addons["aws-ebs-csi-driver"].dependencies


def test_node_monitoring_agent_runs_on_every_node_whatever_its_taints(
    stack_run: tuple[str, ProgramRun],
) -> None:
    """Both the agent and its DCGM host engine tolerate the gate's taints and every pool's.

    The chart gives the DCGM host engine no toleration (aws/eks-node-monitoring-agent v1.7.0
    charts/eks-node-monitoring-agent/values.yaml): without ours it skips every tainted GPU node.
    """
    _, run = stack_run
    (addon,) = [
        a for a in run.of_type(ADDON) if a.inputs["addonName"] == "eks-node-monitoring-agent"
    ]
    configuration = json.loads(addon.inputs["configurationValues"])
    taints = [
        health_marks.ACCEPTANCE_TAINT,
        *(health_marks.unhealthy_taint(source) for source in health_marks.SOURCES),
        {"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"},
    ]
    for pool in run.of_type("kubernetes:karpenter.sh/v1:NodePool"):
        spec = pool.inputs["spec"]["template"]["spec"]
        taints += [*spec.get("taints", []), *spec.get("startupTaints", [])]
    assert len(taints) > 5, "no NodePool taints found"
    for daemon in ("nodeAgent", "dcgmAgent"):
        assert uncovered(configuration[daemon]["tolerations"], taints) == [], daemon


def test_ebs_csi_driver_uses_pod_identity(stack_run: tuple[str, ProgramRun]) -> None:
    _, run = stack_run
    addon = next(a for a in run.of_type(ADDON) if a.inputs["addonName"] == "aws-ebs-csi-driver")
    (association,) = addon.inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == "ebs-csi-controller-sa"
    role_name = association["roleArn"].rsplit("/", 1)[-1]
    (role,) = [r for r in run.of_type("aws:iam/role:Role") if role_name.startswith(f"{r.name}-")]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    attached = [
        a.inputs["policyArn"]
        for a in run.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs["role"] == role_name
    ]
    assert attached == ["arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"]


def test_system_node_group(stack_run: tuple[str, ProgramRun]) -> None:
    stack, run = stack_run
    config = parse_platform_config(stack_data(stack))
    group = run.one("aws:eks/nodeGroup:NodeGroup").inputs
    assert group["amiType"].startswith("AL2023_")
    assert group["taints"] == [
        {"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}
    ]
    assert len(group["subnetIds"]) == len(config.network.availability_zones) >= 2
    assert group["scalingConfig"]["minSize"] >= 2
    assert group["instanceTypes"] == config.cluster.system_node_group.instance_types
    assert group["version"] == config.cluster.kubernetes_version  # one up upgrades it too
    template = run.one("aws:ec2/launchTemplate:LaunchTemplate", "-system").inputs
    assert group["launchTemplate"]["id"].startswith("lt-")
    assert template["metadataOptions"]["httpTokens"] == "required"
    assert template["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (root,) = template["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] == "true" and root["ebs"]["volumeType"] == "gp3"
    assert root["ebs"]["volumeSize"] == config.cluster.system_node_group.root_volume_size_gib
    for spec in template["tagSpecifications"]:
        assert {"owner", "cost-center", "environment"} <= set(spec["tags"])


def test_kubernetes_providers_built_from_the_cluster_kubeconfig(
    stack_run: tuple[str, ProgramRun],
) -> None:
    """One provider for every in-cluster object; a second, which takes over objects that exist
    already (upsertExistingObjects), only for JobSet's CRD (tests/test_trainer.py says why) and
    the metrics stack's namespace, which Helm made on stacks that had Slurm (components/
    observability/stack.py)."""
    _, run = stack_run
    providers = run.of_type("pulumi:providers:kubernetes")
    (provider,) = [p for p in providers if "upsertExistingObjects" not in p.inputs]
    cluster = run.one(CLUSTER)
    for each in providers:
        assert each.inputs["kubeconfig"] == "[secret]"
        assert each.inputs["enableServerSideApply"] == "true"
        assert cluster.urn in each.dependencies
    in_cluster = [r for r in run.records if r.type.startswith("kubernetes:")]
    assert in_cluster, "the cluster component creates at least the default StorageClass"
    adopted = {r.name for r in in_cluster if r.provider != provider.urn}
    assert adopted - {"trainer-jobset-crds"} == {"observability-namespace"}


def test_every_aws_resource_uses_the_tagged_provider(stack_run: tuple[str, ProgramRun]) -> None:
    stack, run = stack_run
    config = parse_platform_config(stack_data(stack))
    provider = run.one("pulumi:providers:aws")
    tags = json.loads(provider.inputs["defaultTags"])["tags"]
    assert {k: tags[k] for k in ("owner", "cost-center", "environment")} == {
        "owner": config.tags.owner,
        "cost-center": config.tags.cost_center,
        "environment": stack,
    }
    assert json.loads(provider.inputs["allowedAccountIds"]) == [config.account_id]
    for record in run.records:
        if record.type.startswith("aws:"):
            assert record.provider == provider.urn, record.urn
    assert run.one(CLUSTER).providers == {"aws": provider.urn}


def test_default_storage_class_is_encrypted_gp3(stack_run: tuple[str, ProgramRun]) -> None:
    _, run = stack_run
    storage_class = run.one("kubernetes:storage.k8s.io/v1:StorageClass", "-gp3").inputs
    assert storage_class["metadata"]["annotations"] == {
        "storageclass.kubernetes.io/is-default-class": "true"
    }
    assert storage_class["parameters"]["type"] == "gp3"
    assert storage_class["parameters"]["encrypted"] == "true"
    assert storage_class["provisioner"] == "ebs.csi.aws.com"


def test_stateful_resources_protected_only_where_config_says(
    synthesized: dict[str, StackResult],
) -> None:
    for stack, expected in (("prod", True), ("dev", False), ("staging", False)):
        run = ProgramRun(synthesized[stack].records)
        assert run.one(CLUSTER).protect is expected, stack
        assert run.one("aws:kms/key:Key", "secrets").protect is expected, stack


def test_api_server_endpoint_read_from_kubeconfig() -> None:
    kubeconfig = {"clusters": [{"name": "c", "cluster": {"server": "https://x.example"}}]}
    assert api_server_endpoint(json.dumps(kubeconfig)) == "https://x.example"


def test_arm_system_nodes_get_the_arm_ami(run_component: RunComponent) -> None:
    data = stack_data("dev")
    data["cluster"]["systemNodeGroup"]["instanceTypes"] = ["m7g.large", "c7g.large"]
    group = run_component(parts.cluster, data).one("aws:eks/nodeGroup:NodeGroup").inputs
    assert group["amiType"] == "AL2023_ARM_64_STANDARD"


def test_every_key_has_an_explicit_policy(stack_run: tuple[str, ProgramRun]) -> None:
    """A key without a policy gets KMS's default, which no reviewer or scanner sees."""
    stack, run = stack_run
    account = parse_platform_config(stack_data(stack)).account_id
    keys = run.of_type("aws:kms/key:Key")
    assert keys
    for key in keys:
        policy = json.loads(key.inputs["policy"])
        statements = {s["Sid"]: s for s in policy["Statement"]}
        administer = statements["AccountAdministersTheKey"]
        assert administer["Principal"] == {"AWS": f"arn:aws:iam::{account}:root"}, key.name
