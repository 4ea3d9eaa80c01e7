# Only the version the program uses (typings/pulumi_kubernetes/__init__.pyi says why).
from pulumi_kubernetes.scheduling import v1 as v1
