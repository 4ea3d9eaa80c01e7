"""The names of ``pulumi_aws.iam`` the program uses (../__init__.pyi says why)."""

from pulumi_aws.iam.role import Role as Role
from pulumi_aws.iam.role_policy import RolePolicy as RolePolicy
from pulumi_aws.iam.role_policy_attachment import RolePolicyAttachment as RolePolicyAttachment
