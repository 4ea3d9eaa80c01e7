"""What mypy reads of ``pulumi_aws``: the service modules the program uses, nothing else.

The provider's ``__init__`` imports all of its 240 service modules for type checkers, about
3,100 files that strict mypy would otherwise analyse on every clean run (35 of the lint's 55
CPU-seconds on a clean clone; docs/development.md, Commands). This package is
``partial`` (py.typed): each module named here, and every module below it, is still read from the
installed provider with its real types, so calls are checked as before. Using a service not
listed fails with ``Module has no attribute "<service>"``: add it here. The largest services
(``ec2``, ``s3``, ``iam``, ``cloudwatch``, ``ec2transitgateway``) have a stub of their own here
that names the resources and argument types the program uses, since each service's
``__init__`` imports all of its resources too: a new one fails the same way, add it there
(tests/test_suite_speed.py holds each stub to names the program uses).
"""

from pulumi_aws import amp as amp
from pulumi_aws import cloudwatch as cloudwatch
from pulumi_aws import ec2 as ec2
from pulumi_aws import ec2transitgateway as ec2transitgateway
from pulumi_aws import efs as efs
from pulumi_aws import eks as eks
from pulumi_aws import fsx as fsx
from pulumi_aws import iam as iam
from pulumi_aws import kms as kms
from pulumi_aws import s3 as s3
from pulumi_aws import scheduler as scheduler
from pulumi_aws import sqs as sqs
from pulumi_aws import vpc as vpc
from pulumi_aws.provider import Provider as Provider
