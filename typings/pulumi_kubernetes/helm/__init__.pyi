# Only the version the program uses (typings/pulumi_kubernetes/__init__.pyi says why).
from pulumi_kubernetes.helm import v3 as v3
