"""Karpenter: controller identity, node role, interruption handling and the two charts.

The controller's permissions are Karpenter's own for v1.14.1 (its getting-started
CloudFormation template), statement by statement, in its six policies (node lifecycle, IAM
integration, EKS integration, zonal shift, interruption, resource discovery): the
placement-group and capacity-reservation ARNs the accelerated pools need, every mutating action
scoped to this cluster's tags and no ``*`` action anywhere.
"""

from __future__ import annotations

import json
import typing
from typing import Any, Final

import pulumi
import pulumi_aws as aws

from components import versions
from components.helm import release, with_system_placement
from components.iam import (
    EKS_NODE_POLICIES,
    deny_insecure_transport,
    eks_cluster_arn,
    pod_identity_trust_policy,
    role_with_policies,
    service_trust_policy,
)

NAMESPACE: Final = "kube-system"
RELEASE: Final = "karpenter"
"""The controller's Helm release name, which its chart's pod labels carry."""
SERVICE_ACCOUNT: Final = "karpenter"
INTERRUPTION_RETENTION_SECONDS: Final = 300
INTERRUPTION_EVENTS: Final[dict[str, tuple[str, str]]] = {
    "health": ("aws.health", "AWS Health Event"),
    "spot-interruption": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    "rebalance": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    "state-change": ("aws.ec2", "EC2 Instance State-change Notification"),
    "reservation-interruption": (
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
    ),
}
"""EventBridge rules feeding the interruption queue: name -> (source, detail-type)."""


CONTROLLER_POLICY_NAMES: Final = (
    "node-lifecycle",
    "iam-integration",
    "eks-integration",
    "zonal-shift",
    "interruption",
    "resource-discovery",
)
"""The controller role's inline policies, one per upstream managed policy."""


def _ec2(region: str, resource: str, account: str = "*") -> str:
    return f"arn:aws:ec2:{region}:{account}:{resource}"


def controller_policies(
    cluster_name: str, region: str, account_id: str, node_role_arn: str, queue_arn: str
) -> dict[str, dict[str, Any]]:
    """The controller's IAM policies, by name: upstream's for v1.14.1, statement by statement.

    Karpenter's own CloudFormation template at the pinned tag (website/content/en/docs/
    getting-started/getting-started-with-karpenter/cloudformation.yaml) is the reference; a test
    compares every statement with it and lists each difference with its reason.

    Args:
        cluster_name: EKS cluster; every mutating statement is conditioned on its tags.
        region: the cluster's region; reads are limited to it.
        account_id: account of the instance profiles and the cluster.
        node_role_arn: the only role the controller may pass to EC2.
        queue_arn: the interruption queue it reads.
    """
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster_name}": "owned"}
    request_owned = {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster_name}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
    }
    launched = ["fleet/*", "instance/*", "volume/*", "network-interface/*", "launch-template/*",
                "spot-instances-request/*"]  # fmt: skip
    profile_arn = f"arn:aws:iam::{account_id}:instance-profile/*"
    region_tag = "topology.kubernetes.io/region"

    def doc(*statements: dict[str, Any]) -> dict[str, Any]:
        return {"Version": "2012-10-17", "Statement": list(statements)}

    return {
        "node-lifecycle": doc(
            {
                "Sid": "AllowScopedEC2InstanceAccessActions",
                "Effect": "Allow",
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                "Resource": [
                    f"arn:aws:ec2:{region}::image/*",
                    f"arn:aws:ec2:{region}::snapshot/*",
                    _ec2(region, "security-group/*"),
                    _ec2(region, "subnet/*"),
                    _ec2(region, "capacity-reservation/*"),
                    _ec2(region, "placement-group/*"),
                ],
            },
            {
                "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
                "Effect": "Allow",
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                "Resource": _ec2(region, "launch-template/*"),
                "Condition": {
                    "StringEquals": owned,
                    "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedEC2InstanceActionsWithTags",
                "Effect": "Allow",
                "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
                "Resource": [_ec2(region, r) for r in launched],
                "Condition": {
                    "StringEquals": request_owned,
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedResourceCreationTagging",
                "Effect": "Allow",
                "Action": ["ec2:CreateTags"],
                "Resource": [_ec2(region, r) for r in launched],
                "Condition": {
                    "StringEquals": {
                        **request_owned,
                        "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                    },
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedResourceTagging",
                "Effect": "Allow",
                "Action": ["ec2:CreateTags"],
                "Resource": _ec2(region, "instance/*"),
                "Condition": {
                    "StringEquals": owned,
                    "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                    "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                    "ForAllValues:StringEquals": {
                        "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                    },
                },
            },
            {
                "Sid": "AllowScopedDeletion",
                "Effect": "Allow",
                "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
                "Resource": [_ec2(region, "instance/*"), _ec2(region, "launch-template/*")],
                "Condition": {
                    "StringEquals": owned,
                    "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                },
            },
        ),
        "iam-integration": doc(
            {
                "Sid": "AllowPassingInstanceRole",
                "Effect": "Allow",
                "Action": ["iam:PassRole"],
                "Resource": node_role_arn,
                "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com"]}},
            },
            {
                "Sid": "AllowScopedInstanceProfileCreationActions",
                "Effect": "Allow",
                "Action": ["iam:CreateInstanceProfile"],
                "Resource": profile_arn,
                "Condition": {
                    "StringEquals": {**request_owned, f"aws:RequestTag/{region_tag}": region},
                    "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileTagActions",
                "Effect": "Allow",
                "Action": ["iam:TagInstanceProfile"],
                "Resource": profile_arn,
                "Condition": {
                    "StringEquals": {
                        **owned,
                        f"aws:ResourceTag/{region_tag}": region,
                        **request_owned,
                        f"aws:RequestTag/{region_tag}": region,
                    },
                    "StringLike": {
                        "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                        "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    },
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileActions",
                "Effect": "Allow",
                "Action": [
                    "iam:AddRoleToInstanceProfile",
                    "iam:RemoveRoleFromInstanceProfile",
                    "iam:DeleteInstanceProfile",
                ],
                "Resource": profile_arn,
                "Condition": {
                    "StringEquals": {**owned, f"aws:ResourceTag/{region_tag}": region},
                    "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
        ),
        "eks-integration": doc(
            {
                "Sid": "AllowAPIServerEndpointDiscovery",
                "Effect": "Allow",
                "Action": ["eks:DescribeCluster"],
                "Resource": f"arn:aws:eks:{region}:{account_id}:cluster/{cluster_name}",
            }
        ),
        "zonal-shift": doc(
            {
                # Karpenter avoids zones under an ARC zonal shift of the cluster.
                "Sid": "AllowZonalShiftStatusReadOnly",
                "Effect": "Allow",
                "Action": ["arc-zonal-shift:GetManagedResource"],
                "Resource": "*",
                "Condition": {
                    "StringEquals": {
                        "arc-zonal-shift:ResourceIdentifier": (
                            f"arn:aws:eks:{region}:{account_id}:cluster/{cluster_name}"
                        )
                    }
                },
            }
        ),
        "interruption": doc(
            {
                "Sid": "AllowInterruptionQueueActions",
                "Effect": "Allow",
                "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
                "Resource": queue_arn,
            }
        ),
        "resource-discovery": doc(
            {
                "Sid": "AllowRegionalReadActions",
                "Effect": "Allow",
                "Action": [
                    "ec2:DescribeCapacityReservations",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstances",
                    # Instances failing EC2 status checks are replaced (new in v1.14).
                    "ec2:DescribeInstanceStatus",
                    "ec2:DescribeInstanceTypeOfferings",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplates",
                    "ec2:DescribePlacementGroups",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSpotPriceHistory",
                    "ec2:DescribeSubnets",
                ],
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
            },
            {
                "Sid": "AllowSSMReadActions",
                "Effect": "Allow",
                "Action": ["ssm:GetParameter"],
                "Resource": f"arn:aws:ssm:{region}::parameter/aws/service/*",
            },
            {
                "Sid": "AllowPricingReadActions",
                "Effect": "Allow",
                "Action": ["pricing:GetProducts"],
                "Resource": "*",
            },
            {
                # Garbage collection of orphaned profiles lists them; IAM cannot scope the list.
                "Sid": "AllowUnscopedInstanceProfileListAction",
                "Effect": "Allow",
                "Action": ["iam:ListInstanceProfiles"],
                "Resource": "*",
            },
            {
                "Sid": "AllowInstanceProfileReadActions",
                "Effect": "Allow",
                "Action": ["iam:GetInstanceProfile"],
                "Resource": profile_arn,
            },
        ),
    }


def interruption_queue_policy(queue_arn: str) -> dict[str, Any]:
    """Queue policy: EventBridge may send; nothing may use the queue without TLS."""
    return {
        "Version": "2012-10-17",
        "Id": "KarpenterInterruptionQueue",
        "Statement": [
            {
                "Sid": "AllowEventBridge",
                "Effect": "Allow",
                "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
            },
            deny_insecure_transport("DenyHTTP", "sqs", queue_arn),
        ],
    }


def karpenter_values(
    cluster_name: str, queue_name: pulumi.Input[str], *, node_overlays: bool = False
) -> dict[str, Any]:
    """Values of the karpenter chart: this cluster, its queue, controllers on system nodes.

    Args:
        cluster_name: the EKS cluster.
        queue_name: the interruption queue.
        node_overlays: turn on the alpha ``nodeOverlay`` gate, without which Karpenter ignores
            NodeOverlays (kubernetes-sigs/karpenter v1.14.1 pkg/cloudprovider/overlay/
            cloudprovider.go): pools with huge pages need it to scale at all.
    """
    # nodeRepair (alpha): Karpenter replaces a node whose Ready condition stays False or
    # Unknown (30 minutes) or whose accelerator health conditions fail. Without it a node that
    # hangs while its instance runs keeps its pods Terminating forever, and a gang on it never
    # restarts: JobSet deletes the failed Job in the foreground and BlockingRecreate waits for
    # every pod (kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go). Karpenter
    # repairs nothing while more than 20% of a NodePool is unhealthy.
    gates = {"reservedCapacity": True, "nodeRepair": True}
    if node_overlays:
        gates["nodeOverlay"] = True
    return with_system_placement(
        versions.KARPENTER_CHART,
        {
            "replicas": 2,
            "serviceAccount": {"name": SERVICE_ACCOUNT},
            "settings": {
                "clusterName": cluster_name,
                "interruptionQueue": queue_name,
                "featureGates": gates,
            },
            "controller": {
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi"},
                    "limits": {"memory": "1Gi"},
                }
            },
        },
    )


def _policy_json(key: str) -> typing.Callable[[dict[str, dict[str, Any]]], str]:
    def render(documents: dict[str, dict[str, Any]]) -> str:
        return json.dumps(documents[key])

    return render


class Karpenter(pulumi.ComponentResource):
    """Karpenter's AWS prerequisites and its two Helm releases.

    Outputs: ``node_role_name`` (for EC2NodeClasses), ``queue_name``, ``node_access_entry``
    and ``ready`` (the resources custom resources must wait for: the CRD and controller
    releases, and the node role's access entry).
    """

    def __init__(
        self,
        name: str,
        *,
        cluster_name: str,
        region: str,
        account_id: str,
        cluster_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        node_overlays: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Create the identity, queue and charts.

        Args:
            name: prefix of child resource names.
            cluster_name: EKS cluster Karpenter manages nodes for.
            region: AWS region (ARNs and regional conditions).
            account_id: AWS account (ARNs).
            node_overlays: whether NodePools come with NodeOverlays (huge pages); turns on the
                feature gate. Default: false.
            cluster_ready: resources the controller needs first (the cluster, its system nodes
                and the Pod Identity agent).
            kubernetes_provider: provider of the Helm releases.
            opts: resource options; the AWS provider comes from here.
        """
        super().__init__("trainingplatform:index:Karpenter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        node_role = role_with_policies(
            f"{name}-node",
            trust_policy=service_trust_policy("ec2.amazonaws.com"),
            managed_policies=list(EKS_NODE_POLICIES),
            opts=child,
        )
        self.node_access_entry = aws.eks.AccessEntry(
            f"{name}-node",
            cluster_name=cluster_name,
            principal_arn=node_role.role.arn,
            type="EC2_LINUX",
            opts=pulumi.ResourceOptions(parent=self, depends_on=cluster_ready),
        )
        self.node_role_name = node_role.role.name

        queue = aws.sqs.Queue(
            f"{name}-interruption",
            name=cluster_name,
            message_retention_seconds=INTERRUPTION_RETENTION_SECONDS,
            sqs_managed_sse_enabled=True,
            opts=child,
        )
        self.queue_name = queue.name
        aws.sqs.QueuePolicy(
            f"{name}-interruption",
            queue_url=queue.url,
            policy=queue.arn.apply(lambda arn: json.dumps(interruption_queue_policy(arn))),
            opts=child,
        )
        for rule_name, (source, detail_type) in INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{rule_name}",
                description=f"{detail_type} to Karpenter's interruption queue",
                event_pattern=json.dumps({"source": [source], "detail-type": [detail_type]}),
                opts=child,
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{rule_name}",
                rule=rule.name,
                arn=queue.arn,
                target_id="KarpenterInterruptionQueue",
                opts=child,
            )

        controller_role = role_with_policies(
            f"{name}-controller",
            trust_policy=pod_identity_trust_policy(
                eks_cluster_arn(region, account_id, cluster_name), NAMESPACE, SERVICE_ACCOUNT
            ),
            managed_policies=[],
            opts=child,
        )
        documents = pulumi.Output.all(node_role.role.arn, queue.arn).apply(
            lambda arns: controller_policies(cluster_name, region, account_id, arns[0], arns[1])
        )
        controller_policy_resources = [
            aws.iam.RolePolicy(
                f"{name}-controller-{policy_name}",
                name=policy_name,
                role=controller_role.role.id,
                policy=documents.apply(_policy_json(policy_name)),
                opts=child,
            )
            for policy_name in CONTROLLER_POLICY_NAMES
        ]
        identity = aws.eks.PodIdentityAssociation(
            f"{name}-controller",
            cluster_name=cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=controller_role.role.arn,
            opts=pulumi.ResourceOptions(parent=self, depends_on=cluster_ready),
        )

        with_k8s = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=cluster_ready
        )
        crds = release(
            "karpenter-crd",
            versions.KARPENTER_CRD_CHART,
            namespace=NAMESPACE,
            values={},
            opts=with_k8s,
        )
        controller = release(
            RELEASE,
            versions.KARPENTER_CHART,
            namespace=NAMESPACE,
            values=karpenter_values(cluster_name, queue.name, node_overlays=node_overlays),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=kubernetes_provider,
                depends_on=[crds, identity, *controller_policy_resources, *cluster_ready],
            ),
        )
        # NodePools and EC2NodeClasses wait for the access entry too: a node Karpenter launches
        # joins only once its role may. On destroy they go first, so the EC2NodeClass finalizer
        # (aws/karpenter-provider-aws v1.14.1 pkg/controllers/nodeclass/controller.go,
        # finalize: it waits until no NodeClaim uses the class) drains and terminates every
        # node while the entry still lets them talk to the API.
        self.ready: list[pulumi.Resource] = [crds, controller, self.node_access_entry]
        self.register_outputs({"nodeRoleName": self.node_role_name, "queueName": self.queue_name})
