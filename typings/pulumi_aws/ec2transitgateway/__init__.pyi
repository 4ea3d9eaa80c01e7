"""The names of ``pulumi_aws.ec2transitgateway`` the program uses (../__init__.pyi says why)."""

from pulumi_aws.ec2transitgateway.vpc_attachment import VpcAttachment as VpcAttachment
