"""Pulumi entry point: the whole program is components.platform.deploy()."""

from components.platform import deploy

deploy()
