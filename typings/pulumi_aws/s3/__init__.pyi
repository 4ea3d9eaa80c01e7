"""The names of ``pulumi_aws.s3`` the program uses (../__init__.pyi says why)."""

from pulumi_aws.s3._inputs import (
    BucketLifecycleConfigurationRuleArgsDict as BucketLifecycleConfigurationRuleArgsDict,
)
from pulumi_aws.s3._inputs import (
    BucketServerSideEncryptionConfigurationRuleArgsDict as BucketServerSideEncryptionConfigurationRuleArgsDict,  # noqa: E501
)
from pulumi_aws.s3.bucket import Bucket as Bucket
from pulumi_aws.s3.bucket_lifecycle_configuration import (
    BucketLifecycleConfiguration as BucketLifecycleConfiguration,
)
from pulumi_aws.s3.bucket_logging import BucketLogging as BucketLogging
from pulumi_aws.s3.bucket_ownership_controls import (
    BucketOwnershipControls as BucketOwnershipControls,
)
from pulumi_aws.s3.bucket_policy import BucketPolicy as BucketPolicy
from pulumi_aws.s3.bucket_public_access_block import (
    BucketPublicAccessBlock as BucketPublicAccessBlock,
)
from pulumi_aws.s3.bucket_server_side_encryption_configuration import (
    BucketServerSideEncryptionConfiguration as BucketServerSideEncryptionConfiguration,
)
from pulumi_aws.s3.bucket_versioning import BucketVersioning as BucketVersioning
