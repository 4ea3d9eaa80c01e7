"""A component built alone (tests/component_runs.py) registers what the whole program does.

Component tests build one component instead of the program; this holds every part to the
program's synthesis of every stack, so a change to how ``TrainingPlatform`` wires a component
that its part does not follow fails here instead of leaving those tests checking another wiring.
"""

from __future__ import annotations

import pytest

from synth.engine import ResourceRecord
from synth.run import StackResult
from tests.component_runs import PARTS, PLATFORM_TYPE, STAND_IN_TYPE
from tests.conftest import STACKS, RunComponent, stack_data

OPTIONS = (
    "parent",
    "custom",
    "protect",
    "retain_on_delete",
    "delete_before_replace",
    "replace_on_changes",
    "ignore_changes",
)

CASES = [
    pytest.param(stack, name, id=f"{stack}-{name}")
    for stack in STACKS
    for name in PARTS
    if name not in ("Slurm", "Katib")
    or stack_data(stack).get(name.lower(), {}).get("enabled", False)
]


@pytest.mark.parametrize(("stack", "component"), CASES)
def test_a_component_built_alone_is_the_programs(
    run_component: RunComponent,
    synthesized: dict[str, StackResult],
    stack: str,
    component: str,
) -> None:
    run = run_component(PARTS[component], stack_data(stack), stack)
    whole = {record.urn: record for record in synthesized[stack].records}
    (parent,) = [r for r in run.records if r.type == PLATFORM_TYPE]
    # The parent and the stand-ins; the AWS provider is the program's and is compared.
    scaffold = {
        r.urn: r
        for r in run.records
        if r is parent
        or r.type == STAND_IN_TYPE
        or (r.type == "pulumi:providers:kubernetes" and r.parent == parent.urn)
    }
    built = {r.urn: r for r in run.records if r.urn not in scaffold}
    (root,) = [r for r in built.values() if r.type == f"trainingplatform:index:{component}"]
    under = {urn for urn in whole if f"${root.type}$" in urn}
    assert under, "the program registers nothing under the component"
    assert set(built) >= under | {root.urn}
    assert set(built) <= set(whole), "a resource the program does not register"
    for urn, record in built.items():
        expected = whole[urn]
        assert record.inputs == expected.inputs, record.name
        for option in OPTIONS:
            assert getattr(record, option) == getattr(expected, option), (record.name, option)
        # Stand-ins are no resources of the program; every other dependency is the program's.
        assert set(record.dependencies) - set(scaffold) <= set(expected.dependencies), record.name
        assert _provider_type(record, {**scaffold, **built}) == _provider_type(expected, whole), (
            record.name
        )
        if record.provider not in scaffold:
            assert record.provider == expected.provider, record.name


def _provider_type(record: ResourceRecord, records: dict[str, ResourceRecord]) -> str | None:
    """The type of the record's provider (the stand-in Kubernetes providers' URNs differ)."""
    return None if record.provider is None else records[record.provider].type
