"""The Lustre admin client: the one instance that lays out the team directories as root.

Its address is reserved in the training subnet by the network (an ``explicit`` subnet CIDR
reservation: EC2 assigns none of it to nodes or pods, EC2 API CreateSubnetCidrReservation) and
is the file system's only no-squash NID. It boots, runs the layout script
(:mod:`components.storage.layout`) and stops.
"""

from __future__ import annotations

import re
import typing
from typing import Any, Final

import pulumi
import pulumi_aws as aws

from components.config import LustreConfig, PlatformConfig
from components.iam import IMDSV2_ONE_HOP
from components.storage.layout import admin_user_data, layout_script
from components.storage.lustre import LUSTRE_PORTS

ADMIN_IMAGE_PARAMETER: Final = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-{}"
"""The public SSM parameter of the newest Amazon Linux 2023 AMI per architecture; a launch
template may name it as ``resolve:ssm:<parameter>`` instead of an AMI id (EC2 User Guide, "Use a
Systems Manager parameter instead of an AMI ID"), so each new admin client boots the current
AMI and the stack needs no lookup at plan time."""
GRAVITON_FAMILY: Final = re.compile(r"[a-z]+[0-9]+[a-z]*g[a-z]*(?:-[a-z]+)?")
"""Graviton (arm64) families name a ``g`` after the generation: m7g, c7gn, r8gd, t4g, im4gn."""


def admin_launch_template(lustre: LustreConfig, tags: dict[str, str]) -> dict[str, Any]:
    """Launch template arguments of the admin client: the current AMI, and its tags.

    The network (private subnet, address, groups) and the hardening are the instance's own
    (:data:`ADMIN_INSTANCE_HARDENING`), where policies and scanners read them; EC2 refuses
    instance-level groups beside a template's network interface.

    Args:
        lustre: the file system's config (the admin client's instance type).
        tags: tags of the instance and its volume.
    """
    instance_type = lustre.admin_client.instance_type
    family = instance_type.split(".", maxsplit=1)[0]
    architecture = "arm64" if GRAVITON_FAMILY.fullmatch(family) else "x86_64"
    return {
        "image_id": f"resolve:ssm:{ADMIN_IMAGE_PARAMETER.format(architecture)}",
        "instance_type": instance_type,
        "update_default_version": True,
        "metadata_options": dict(IMDSV2_ONE_HOP),
        # On the template, not the instance: with a template naming its AMI by SSM parameter,
        # the provider would look up the root device of the parameter's name for an
        # instance-level root_block_device. The AMI's size, encrypted, deleted with it.
        "block_device_mappings": [
            {
                "device_name": ADMIN_ROOT_DEVICE,
                "ebs": {"encrypted": "true", "volume_type": "gp3", "delete_on_termination": "true"},
            }
        ],
        "tag_specifications": [
            {"resource_type": kind, "tags": tags} for kind in ("instance", "volume")
        ],
    }


ADMIN_ROOT_DEVICE: Final = "/dev/xvda"
"""The root device of the Amazon Linux 2023 AMIs."""
ADMIN_INSTANCE_HARDENING: Final = {
    "metadata_options": IMDSV2_ONE_HOP,
    "ebs_optimized": True,
    # One-minute metrics for the minutes it runs: a stuck layout shows in CloudWatch.
    "monitoring": True,
}
"""The admin client's IMDSv2-only metadata and detailed monitoring (its root volume is the
template's: :func:`admin_launch_template`)."""


def admin_client(
    name: str,
    *,
    config: PlatformConfig,
    lustre: LustreConfig,
    file_system: aws.fsx.LustreFileSystem,
    address: str,
    vpc_id: pulumi.Input[str],
    training_subnet_id: pulumi.Input[str],
    clients: aws.ec2.SecurityGroup,
    servers: aws.ec2.SecurityGroup,
    associations: list[pulumi.Resource],
    parent: pulumi.Resource,
) -> aws.ec2.Instance:
    """The instance that lays out the team directories as root, then stops.

    A change to the layout replaces the instance: the new one boots, runs
    :func:`~components.storage.layout.layout_script` and stops; it runs it again whenever it
    is started (:func:`~components.storage.layout.admin_user_data`). It has no role, key pair
    or inbound rule; its output is on its console.

    Args:
        name: the storage component's name, prefix of every resource's.
        config: the validated platform (cluster name, teams, tags).
        lustre: the file system's config (admin client, team roots).
        file_system: the file system it lays out.
        address: its reserved private address.
        vpc_id: VPC of its security group.
        training_subnet_id: private subnet of the training zone.
        clients: the Lustre clients' security group, which it joins.
        servers: the file system's security group, which it reaches.
        associations: what it waits for (the associations' directories exist first).
        parent: the storage component.
    """
    child = pulumi.ResourceOptions(parent=parent)
    group = aws.ec2.SecurityGroup(
        f"{name}-lustre-admin",
        description=f"Lustre admin client of {config.name}: Lustre and package downloads",
        vpc_id=vpc_id,
        egress=[
            *(
                aws.ec2.SecurityGroupEgressArgs(
                    protocol="tcp", from_port=low, to_port=high,
                    security_groups=[servers.id], description="to the Lustre file servers",
                )
                for low, high in LUSTRE_PORTS
            ),
            aws.ec2.SecurityGroupEgressArgs(
                protocol="tcp", from_port=443, to_port=443, cidr_blocks=["0.0.0.0/0"],
                description="the Lustre client package (Amazon Linux repositories)",
            ),
        ],
        tags={"Name": f"{config.name}-lustre-admin"},
        opts=child,
    )  # fmt: skip
    template = aws.ec2.LaunchTemplate(
        f"{name}-lustre-admin",
        description="Lustre admin client: Amazon Linux 2023, IMDSv2, encrypted root volume",
        **typing.cast(
            Any,
            admin_launch_template(
                lustre, {**config.required_tags, "Name": f"{config.name}-lustre-admin"}
            ),
        ),
        opts=child,
    )
    return aws.ec2.Instance(
        f"{name}-lustre-admin",
        launch_template=aws.ec2.InstanceLaunchTemplateArgs(id=template.id, version="$Latest"),
        subnet_id=training_subnet_id,
        private_ip=address,
        vpc_security_group_ids=[clients.id, group.id],
        user_data=pulumi.Output.all(file_system.dns_name, file_system.mount_name).apply(
            lambda names: admin_user_data(
                layout_script(
                    lustre,
                    [team for team in config.teams if team.gid is not None],
                    dns_name=names[0],
                    mount_name=names[1],
                )
            )
        ),
        user_data_replace_on_change=True,
        instance_initiated_shutdown_behavior="stop",
        **typing.cast(Any, ADMIN_INSTANCE_HARDENING),
        tags={"Name": f"{config.name}-lustre-admin"},
        opts=pulumi.ResourceOptions(
            parent=parent,
            # Its subnet id carries the reservation of its address
            # (components/network.py).
            depends_on=associations,
            # Its address is fixed: the old instance must go before the new one starts.
            delete_before_replace=True,
        ),
    )
