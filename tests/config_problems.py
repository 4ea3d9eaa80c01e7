"""Assertions on configuration errors: one line each, naming the key, the value and what is allowed."""

from __future__ import annotations

import json
from typing import Any, Final

import pulumi
import pytest

from components.config import ConfigError, ConfigProblem
from components.platform import deploy, validated_config
from synth.engine import synthesize
from synth.stackfile import StackFile

MISSING: Final = object()
"""The expected value of a problem about a key that is absent."""


def problems_of(data: dict[str, Any]) -> list[ConfigProblem]:
    """Every problem of a stack's (mutated) ``platform`` data; it must be invalid."""
    with pytest.raises(ConfigError) as caught:
        validated_config(data)
    return caught.value.problems


def assert_reported(data: dict[str, Any], path: str, value: Any, allowed: str) -> None:
    """``data`` is refused with a one-line problem at ``path`` that shows ``value`` (or says the
    key is missing) and whose allowed text contains ``allowed``."""
    problems = problems_of(data)
    matching = [p for p in problems if p.path == path]
    assert matching, f"no problem at {path}: {[str(p) for p in problems]}"
    assert any(allowed in p.allowed for p in matching), [str(p) for p in matching]
    for problem in problems:
        text = str(problem)
        assert "\n" not in text and f"allowed: {problem.allowed}" in text, text
    for problem in matching:
        text = str(problem)
        assert text.startswith(f"{path}: ")
        if value is MISSING:
            assert ": missing;" in text, text
        else:
            assert problem.value == value, text
            assert f"got {json.dumps(value, sort_keys=True)[:60]}" in text, text


def failures_of_the_program(
    stack_file: StackFile, *, region: str = "us-west-2", account_id: str = "111122223333"
) -> list[str]:
    """Run the program on ``stack_file``: the one config error it raises, after registering
    nothing."""
    failures: list[str] = []

    def program() -> None:
        try:
            deploy()
        except pulumi.RunError as exc:
            failures.append(str(exc))

    run = synthesize(stack_file, program, region=region, account_id=account_id)
    assert run.records == []
    assert len(failures) == 1
    return failures
