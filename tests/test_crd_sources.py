"""docs/upgrades/index.md says, per release, where its CRDs come from and what a bump does to them.

Helm installs a chart's ``crds/`` directory once and never upgrades it; CRDs in templates
upgrade with the release. The table in the upgrading section has one row per chart of the bill
of materials, and what it claims about each release is checked against the synthesized stacks.
"""

from __future__ import annotations

from typing import Any

from components import versions
from synth.run import StackResult
from tests.test_deploying_docs import _section, _table_rows, _text, _ticked

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
PINS = {
    name: value for name, value in vars(versions).items() if isinstance(value, versions.HelmChart)
}


def _rows() -> list[list[str]]:
    section = _section(_text(), "## Charts")
    assert "<!-- crd-sources:" in section
    rows = [row for row in _table_rows(section) if row[0] != "Release"]
    assert rows and all(len(row) == 4 for row in rows), rows
    return rows


def _releases(synthesized: dict[str, StackResult], chart: versions.HelmChart) -> list[Any]:
    return [
        record
        for result in synthesized.values()
        for record in result.records
        if record.type == HELM_RELEASE and record.inputs["chart"] == chart.chart
    ]


def test_every_chart_of_the_bill_of_materials_has_one_row() -> None:
    pins = [_ticked(row[1]) for row in _rows()]
    assert all(len(pin) == 1 for pin in pins), pins
    named = [pin[0] for pin in pins]
    assert sorted(named) == sorted(PINS), (sorted(named), sorted(PINS))


def test_each_row_names_the_release_of_its_chart(synthesized: dict[str, StackResult]) -> None:
    for row in _rows():
        chart = PINS[_ticked(row[1])[0]]
        names = {record.name for record in _releases(synthesized, chart)}
        assert names == {_ticked(row[0])[0]}, (row[0], names)


def test_what_each_row_says_of_crds_enabled_and_crds_skipped_holds(
    synthesized: dict[str, StackResult],
) -> None:
    for release_cell, pin, source, _ in _rows():
        records = _releases(synthesized, PINS[_ticked(pin)[0]])
        for record in records:
            crds = (record.inputs.get("values") or {}).get("crds", {}).get("enabled")
            if "`crds.enabled: true`" in source:
                assert crds is True, release_cell
            if "`crds.enabled: false`" in source:
                assert crds is False, release_cell
            skipped = "skips its `crds/`" in source
            assert bool(record.inputs.get("skipCrds")) is skipped, release_cell


def test_crds_the_stack_applies_are_the_files_the_row_names(
    synthesized: dict[str, StackResult],
) -> None:
    (row,) = [row for row in _rows() if "`JOBSET_CRDS_URL`" in row[2]]
    name = next(word for word in _ticked(row[2]) if word.endswith("-crds"))
    for result in synthesized.values():
        (applied,) = [r for r in result.records if r.type == CONFIG_FILE and r.name == name]
        assert applied.inputs["file"] == versions.JOBSET_CRDS_URL
        assert f"/v{versions.JOBSET_VERSION}/" in versions.JOBSET_CRDS_URL
