# Only what the program uses (typings/pulumi_kubernetes/__init__.pyi says why).
from pulumi_kubernetes.apiextensions.CustomResource import CustomResource as CustomResource
