"""What mypy reads of ``pulumi_kubernetes``: the API groups the program uses, nothing else.

Like typings/pulumi_aws: the provider's ``__init__`` imports every API group for type checkers;
this ``partial`` package (py.typed) names the groups used, each still read from the installed
provider with its real types. Using a group not listed fails with ``Module has no attribute
"<group>"``: add it here. Each group's ``__init__`` imports all of its API versions too (the
alphas and betas are most of the provider): the stub of each group here names the version the
program uses, and ``apiextensions`` names ``CustomResource`` only; a new version fails the same
way, add it there (tests/test_suite_speed.py holds each stub to names the program uses).
"""

from pulumi_kubernetes import admissionregistration as admissionregistration
from pulumi_kubernetes import apiextensions as apiextensions
from pulumi_kubernetes import apps as apps
from pulumi_kubernetes import core as core
from pulumi_kubernetes import helm as helm
from pulumi_kubernetes import kustomize as kustomize
from pulumi_kubernetes import networking as networking
from pulumi_kubernetes import rbac as rbac
from pulumi_kubernetes import scheduling as scheduling
from pulumi_kubernetes import storage as storage
from pulumi_kubernetes import yaml as yaml
from pulumi_kubernetes.provider import Provider as Provider
