"""Runtime requirements cover what the program and the offline gate import."""

from __future__ import annotations

import ast
import re
import sys

from synth.stackfile import REPOSITORY_ROOT

# Import names of the distributions in requirements.txt.
DISTRIBUTION_MODULES = {
    "pulumi": "pulumi", "pulumi-aws": "pulumi_aws", "pulumi-eks": "pulumi_eks",
    "pulumi-kubernetes": "pulumi_kubernetes", "pulumi-random": "pulumi_random",
    "pulumi-policy": "pulumi_policy", "pydantic": "pydantic", "PyYAML": "yaml",
    "jsonschema": "jsonschema", "cryptography": "cryptography", "kubernetes": "kubernetes",
    "botocore": "botocore", "ldap3": "ldap3", "pyasn1": "pyasn1", "cel-python": "celpy",
    "grafana-foundation-sdk": "grafana_foundation_sdk",
}  # fmt: skip
FIRST_PARTY = {"components", "synth", "policies", "acceptance", "google"}  # google: with pulumi


def _runtime_modules() -> set[str]:
    names = set()
    for line in (REPOSITORY_ROOT / "requirements.txt").read_text().splitlines():
        match = re.match(r"([A-Za-z0-9_.-]+)==", line)
        if match:
            names.add(DISTRIBUTION_MODULES[match.group(1)])
    return names


SCAN_VENV_SCRIPTS = {REPOSITORY_ROOT / "synth" / "checkov_batch.py"}
"""Run by checkov's own virtualenv (requirements-scan.txt), never imported by the program."""


def test_every_import_of_the_program_is_a_runtime_requirement() -> None:
    allowed = _runtime_modules() | FIRST_PARTY | set(sys.stdlib_module_names) | {"pydantic_core"}
    scan_pins = (REPOSITORY_ROOT / "requirements-scan.txt").read_text()
    assert re.search(r"^checkov==", scan_pins, re.MULTILINE), "checkov is pinned for the scan"
    missing = set()
    for directory in ("components", "synth", "policies", "acceptance"):
        for path in (REPOSITORY_ROOT / directory).rglob("*.py"):
            if path in SCAN_VENV_SCRIPTS:
                allowed_here = set(sys.stdlib_module_names) | {"checkov"}
            else:
                allowed_here = allowed
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    roots = [alias.name.split(".")[0] for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    roots = [node.module.split(".")[0]]
                else:
                    continue
                missing |= {f"{path.name}: {root}" for root in roots if root not in allowed_here}
    assert not missing, f"imported but not in requirements.txt: {sorted(missing)}"
