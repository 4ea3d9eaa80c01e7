"""Imports go one way, and every top-level package is under a contract that says so.

``scripts/lint`` runs import-linter with the contracts in pyproject.toml: the program's layers
(synth and policies, the platform, the components, config, the facts), CI tooling kept apart,
node user data importing nothing else. A top-level package the contracts do not name is checked
by none of them, so a new one (the node-side ``acceptance/`` program, which may import only the
fact modules) fails here until it gets its contract.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from synth.stackfile import REPOSITORY_ROOT

PYPROJECT = REPOSITORY_ROOT / "pyproject.toml"
LINT = REPOSITORY_ROOT / "scripts" / "lint"
MODULE_FIELDS = ("layers", "containers", "source_modules", "forbidden_modules", "modules")
"""The fields of import-linter's contract types that name modules."""


def _import_linter() -> dict[str, Any]:
    config: dict[str, Any] = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    return config


def _top_level_packages() -> set[str]:
    """Every directory at the repository's root that is a Python package."""
    return {
        path.name
        for path in REPOSITORY_ROOT.iterdir()
        if path.is_dir() and (path / "__init__.py").is_file()
    }


def _named_top_level(contract: dict[str, Any]) -> set[str]:
    """The top-level packages a contract names, in any of its module fields."""
    named: set[str] = set()
    for field in MODULE_FIELDS:
        for entry in contract.get(field, []):
            # A layer lists siblings with ":" or "|"; "(x)" marks an optional one.
            for module in re.split(r"[:|]", entry):
                named.add(module.strip().strip("()").split(".")[0])
    return named


def test_every_top_level_package_is_analysed_and_under_a_contract() -> None:
    config = _import_linter()
    packages = _top_level_packages()
    assert {"components", "synth", "policies", "tests"} <= packages, packages
    analysed = set(config["root_packages"])
    assert packages <= analysed, (
        f"top-level packages import-linter does not analyse: {sorted(packages - analysed)}; add "
        "them to [tool.importlinter] root_packages in pyproject.toml"
    )
    contracted = set().union(*(_named_top_level(c) for c in config["contracts"]))
    assert packages <= contracted, (
        f"top-level packages no import contract names: {sorted(packages - contracted)}; give "
        "each a contract in pyproject.toml (acceptance/, for one, may import only the fact "
        "modules: components.catalog, health_marks, metric_names, versions, offerings, subnets, "
        "software)"
    )


def test_the_program_is_layered_from_synth_down_to_the_facts() -> None:
    contracts = {c["id"]: c for c in _import_linter()["contracts"]}
    top = contracts["top-level"]
    assert top["type"] == "layers"
    assert top["layers"][-2:] == ["synth : policies", "components"]
    inside = contracts["components"]
    assert inside["type"] == "layers" and inside["containers"] == ["components"]
    assert inside["exhaustive"] is True
    layers = [{m.strip() for m in re.split(r"[:|]", layer)} for layer in inside["layers"]]
    assert layers[0] == {"platform"}
    assert {"storage", "slurm", "checkpoints", "user_data", "workloads"} <= layers[1]
    assert layers[2] == {"config"}
    assert layers[3] == {
        "catalog", "health_marks", "metric_names", "versions", "offerings", "subnets", "software"
    }  # fmt: skip
    user_data = contracts["user-data"]
    assert user_data["type"] == "forbidden"
    assert user_data["source_modules"] == ["components.user_data"]
    assert "components.*" in user_data["forbidden_modules"]


def test_lint_checks_the_contracts() -> None:
    commands = [line.split("#", 1)[0].strip() for line in LINT.read_text().splitlines()]
    assert ".venv/bin/lint-imports --no-cache" in commands
