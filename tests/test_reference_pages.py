"""The reference pages (docs/reference/) hold what the code generates now: configuration,
policies per stack, the synth CLI and the bill of materials."""

from __future__ import annotations

import pytest

from components.config_reference import render_reference
from policies.rules import ALL_POLICIES
from synth.__main__ import main as synth_main
from synth.reference_pages import REFERENCE_DIR, WRITE_COMMAND, GeneratedPart, parts
from synth.stackfile import REPOSITORY_ROOT, stack_names
from tests import docs_pages

PARTS = parts(synth_main)


@pytest.mark.parametrize("part", PARTS, ids=lambda part: part.page)
def test_the_page_holds_what_the_code_generates(part: GeneratedPart) -> None:
    text = (REPOSITORY_ROOT / REFERENCE_DIR / part.page).read_text()
    assert part.current(text) == part.block(), (
        f"{REFERENCE_DIR / part.page} is stale: run `{WRITE_COMMAND}`"
    )


def test_every_page_of_the_reference_is_generated() -> None:
    on_disk = sorted(path.name for path in (REPOSITORY_ROOT / REFERENCE_DIR).glob("*.md"))
    assert on_disk == sorted(part.page for part in PARTS)


def test_reference_lists_every_documented_key() -> None:
    rendered = render_reference()
    for key in (
        "platform.network.trainingZone",
        "platform.cluster.endpoint.publicAccessCidrs",
        "platform.tags.costCenter",
        "platform.cluster.systemNodeGroup.rootVolumeSizeGiB",
    ):
        assert f"`{key}`" in rendered
    assert all(row.count("|") >= 4 for row in rendered.splitlines() if row.startswith("| `"))
    assert not any(row.endswith("|  |") for row in rendered.splitlines()), "undocumented field"


def test_update_replaces_only_the_generated_part() -> None:
    (part,) = [part for part in PARTS if part.page == "configuration.md"]
    stale = f"intro\n{part.begin}\nold rows\n{part.end}\noutro\n"
    updated = part.update(stale)
    assert updated.startswith("intro\n") and updated.endswith("\noutro\n")
    assert "old rows" not in updated and "`platform.region`" in updated


def test_the_policy_page_gives_each_policy_its_level_in_each_stack() -> None:
    text = docs_pages.page("reference/policies.md")
    stacks = stack_names()
    assert f"| Policy | Checks | {' | '.join(stacks)} | What it requires |" in text
    for policy in ALL_POLICIES:
        assert f"| `{policy.name}` | " in text, policy.name
    # prod runs every policy as mandatory but the one its config keeps advisory
    row = next(line for line in text.splitlines() if line.startswith("| `ami-alias-pinned` |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert dict(zip(stacks, cells[2:], strict=False)) == {
        "dev": "advisory", "prod": "mandatory", "staging": "mandatory"
    }  # fmt: skip


def test_the_cli_page_shows_every_sub_command() -> None:
    text = docs_pages.page("reference/synth-cli.md")
    for command in ("scripts/synth", "scripts/synth diff", "scripts/synth scan",
                    "scripts/new-environment"):  # fmt: skip
        assert f"## `{command}`\n\n```text\nusage: {command} " in text, command
