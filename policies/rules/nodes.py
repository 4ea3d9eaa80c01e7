"""Node launch configuration: instance metadata, volume encryption and public addresses.

Covers every way this platform (or a change to it) can launch a node: EC2 launch templates (the
system node group), managed node groups without one, plain and spot instances, launch
configurations, and Karpenter EC2NodeClasses and their patches (accelerator pools).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .common import ReportViolation, ResourceValidationArgs, is_true, resource_policy

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
# Resources that launch instances from the same instance-level arguments as Instance.
INSTANCE_SHAPES = (
    INSTANCE,
    "aws:ec2/spotInstanceRequest:SpotInstanceRequest",
    "aws:ec2/launchConfiguration:LaunchConfiguration",
)
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_CLASS_PATCH = NODE_CLASS + "Patch"
ELASTIC_IPS = {
    "aws:ec2/eip:Eip": ("instance", "networkInterface"),
    "aws:ec2/eipAssociation:EipAssociation": ("instanceId", "networkInterfaceId"),
}
EKS_COMPONENT = "eks:index:Cluster"
SUBNET = "aws:ec2/subnet:Subnet"


def _metadata_options(args: ResourceValidationArgs) -> tuple[str, Mapping[str, Any], bool] | None:
    """(path, options, absent-means-compliant) of the resource's instance metadata settings."""
    if args.resource_type in (LAUNCH_TEMPLATE, *INSTANCE_SHAPES):
        return "metadataOptions", args.props.get("metadataOptions") or {}, False
    if args.resource_type == NODE_CLASS:
        # Karpenter defaults to httpTokens=required and a hop limit of 1.
        spec = args.props.get("spec") or {}
        return "spec.metadataOptions", spec.get("metadataOptions") or {}, True
    if args.resource_type == NODE_CLASS_PATCH:
        # A patch changes only what it sets; what it leaves out stays as the class has it.
        options = (args.props.get("spec") or {}).get("metadataOptions")
        return ("spec.metadataOptions", options, True) if options is not None else None
    return None


def _default_launch_template(args: ResourceValidationArgs) -> bool:
    """A managed node group without a launch template of its own: EKS generates one."""
    return args.resource_type == NODE_GROUP and not args.props.get("launchTemplate")


def _check_imds(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if _default_launch_template(args):
        report(
            "the node group has no launch template: the one EKS generates allows IMDSv1 with a "
            "hop limit of 2, so pods can read the node role's credentials",
            None,
        )
    found = _metadata_options(args)
    if found is None:
        return
    path, options, defaults_comply = found
    tokens = options.get("httpTokens", "required" if defaults_comply else None)
    hops = options.get("httpPutResponseHopLimit", 1 if defaults_comply else None)
    if tokens != "required":
        report(f"{path}.httpTokens is {tokens!r}; IMDSv2 needs 'required'", None)
    if hops != 1:
        report(
            f"{path}.httpPutResponseHopLimit is {hops!r}; 1 keeps pods from reaching the node's "
            "instance credentials",
            None,
        )


def _volumes(args: ResourceValidationArgs) -> Iterator[tuple[str, Mapping[str, Any]]]:
    props = args.props
    if args.resource_type == LAUNCH_TEMPLATE:
        for index, mapping in enumerate(props.get("blockDeviceMappings") or []):
            if mapping.get("ebs") is not None:
                yield f"blockDeviceMappings[{index}].ebs", mapping["ebs"]
    elif args.resource_type in INSTANCE_SHAPES:
        # Launched from a template and not overriding it, the root volume is the template's,
        # which this policy checks on the template itself.
        if props.get("rootBlockDevice") or not props.get("launchTemplate"):
            yield "rootBlockDevice", props.get("rootBlockDevice") or {}
        for index, device in enumerate(props.get("ebsBlockDevices") or []):
            yield f"ebsBlockDevices[{index}]", device
    elif args.resource_type in (NODE_CLASS, NODE_CLASS_PATCH):
        for index, mapping in enumerate((props.get("spec") or {}).get("blockDeviceMappings") or []):
            yield f"spec.blockDeviceMappings[{index}].ebs", mapping.get("ebs") or {}
    elif args.resource_type == "aws:ebs/volume:Volume":
        yield "volume", props


def _check_volumes(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if _default_launch_template(args):
        report(
            "the node group has no launch template: its diskSize volume is encrypted only if "
            "the account encrypts EBS by default",
            None,
        )
    for path, volume in _volumes(args):
        if not is_true(volume.get("encrypted")):
            report(f"{path} is not encrypted", None)


def _check_public_ips(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = args.props
    if args.resource_type == LAUNCH_TEMPLATE:
        for index, interface in enumerate(props.get("networkInterfaces") or []):
            if is_true(interface.get("associatePublicIpAddress")):
                report(f"networkInterfaces[{index}] associates a public IP address", None)
    elif args.resource_type in INSTANCE_SHAPES:
        if is_true(props.get("associatePublicIpAddress")):
            report("the instance gets a public IP address", None)
    elif args.resource_type in (NODE_CLASS, NODE_CLASS_PATCH):
        if is_true((props.get("spec") or {}).get("associatePublicIPAddress")):
            report("spec.associatePublicIPAddress is true", None)
    elif args.resource_type in ELASTIC_IPS:
        # An Elastic IP on an instance or its interface is a public address too (the NAT
        # gateways' allocations name neither).
        attached = [key for key in ELASTIC_IPS[args.resource_type] if props.get(key)]
        if attached:
            report(f"an Elastic IP is attached to an instance ({attached[0]})", None)
    elif args.resource_type == EKS_COMPONENT:
        # pulumi-eks gives its node groups public IPs unless told otherwise.
        if props.get("nodeAssociatePublicIpAddress") is not False:
            report("nodeAssociatePublicIpAddress must be false", None)
    elif args.resource_type == SUBNET and is_true(props.get("mapPublicIpOnLaunch")):
        report("the subnet gives every instance launched in it a public IP address", None)


POLICIES = [
    resource_policy(
        "node-imdsv2-hop-limit-1",
        "Nodes must require IMDSv2 with a response hop limit of 1, so a pod cannot read the "
        "node role's credentials from the instance metadata service.",
        _check_imds,
    ),
    resource_policy(
        "node-volumes-encrypted",
        "Every node volume must be encrypted: training data, checkpoints and container layers "
        "land on them.",
        _check_volumes,
    ),
    resource_policy(
        "node-no-public-ip",
        "Nodes must not get public IP addresses; they reach the internet through NAT and are "
        "reached only from inside the VPC.",
        _check_public_ips,
    ),
]
