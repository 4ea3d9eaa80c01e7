"""Documentation values in a stack file: found, named by key path, a warning and never a failure."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from synth import environment
from synth.examples import example_kind, example_values, summary
from synth.stackfile import REPOSITORY_ROOT, load_stack
from synth.yamlio import load_yaml
from tests import docs_pages


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("111122223333", "111122223333, an example account id"),
        ("arn:aws:iam::444455556666:role/deployer", "444455556666, an example account id"),
        ("123456789012.dkr.ecr.us-west-2.amazonaws.com/slurmd:1", "123456789012, an example"),
        ("203.0.113.0/24", "in 203.0.113.0/24, reserved for documentation"),
        ("198.51.100.7", "in 198.51.100.0/24, reserved for documentation"),
        ("192.0.2.128/25", "in 192.0.2.0/24, reserved for documentation"),
        ("ldaps://ldap1.corp.example.com", "ldap1.corp.example.com, a domain reserved"),
        ("ssh-ed25519 AAAA alice@example.org", "example.org, a domain reserved"),
        ("dc=corp,dc=example,dc=com", "dc=example, a domain reserved"),
        ("registry.invalid/image:1", "registry.invalid, a domain reserved"),
        ("tgw-0a1b2c3d4e5f60718", "tgw-0a1b2c3d4e5f60718, a made-up id"),
        ("cr-0b2c3d4e5f6071829", "cr-0b2c3d4e5f6071829, a made-up id"),
        ("sg-0123456789abcdef0", "sg-0123456789abcdef0, a made-up id"),
        ("i-1234567890abcdef0", "i-1234567890abcdef0, a made-up id"),
    ],
)
def test_documentation_values_are_named_with_their_reason(text: str, kind: str) -> None:
    found = example_kind(text)
    assert found is not None and found.startswith(kind), found


@pytest.mark.parametrize(
    "text",
    [
        "210987654321",  # a real-looking account id
        "1111222233334",  # an example id inside a longer number is not an account id
        "10.10.0.0/16",
        "203.0.0.0/16",  # wider than the documentation block: a real network
        "ldaps://ldap.corp.acme.com",
        "notexample.com",
        "dc=acme,dc=com",
        "us-west-2b",
        "tgw-0f3c9a7e21b44d8a1",  # a random id
        "cr-0a1b2c3d9e8f7a6b5",  # counts up for less than ten characters
    ],
)
def test_real_values_are_not_examples(text: str) -> None:
    assert example_kind(text) is None


def test_values_are_found_by_key_path_in_lists_and_maps() -> None:
    platform = {
        "accountId": "210987654321",
        "cluster": {"endpoint": {"publicAccessCidrs": ["10.0.0.0/8", "203.0.113.0/24"]}},
    }
    (found,) = example_values(platform)
    assert found.path == "platform.cluster.endpoint.publicAccessCidrs[1]"
    assert found.value == "203.0.113.0/24"


def test_numbers_count_as_their_text() -> None:
    """YAML reads an unquoted account id as a number; it is still the example account."""
    (found,) = example_values({"accountId": 111122223333, "protect": True, "maxNodes": 4})
    assert (found.path, found.value) == ("platform.accountId", "111122223333")


def test_every_made_up_id_the_deploy_page_lists_is_flagged() -> None:
    """docs/how-to/deploy.md lists prod's transit gateway and reservations as example values."""
    ids = re.findall(r"`((?:tgw|cr)-[0-9a-f]{17})`", docs_pages.page("how-to/deploy.md"))
    assert ids
    for made_up in ids:
        assert example_kind(made_up) is not None, made_up


def test_summary_names_three_and_long_names_all() -> None:
    found = example_values({"a": ["111122223333"] * 5})
    short = summary(found).splitlines()
    assert short[0].startswith("  examples: 5 documentation value(s)")
    assert [line.split(" (")[0].strip() for line in short[1:4]] == [
        "platform.a[0]",
        "platform.a[1]",
        "platform.a[2]",
    ]
    assert short[4] == "    and 2 more (--long lists them)"
    assert len(summary(found, long=True).splitlines()) == 6
    assert summary([]) == ""


def test_the_dev_stack_is_an_example_and_says_so() -> None:
    paths = {found.path for found in example_values(load_stack("dev").platform)}
    assert "platform.accountId" in paths
    assert "platform.cluster.endpoint.publicAccessCidrs[0]" in paths


def test_a_new_environment_lists_its_examples_until_they_are_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    for part in ("Pulumi.yaml", "stacks", "policies/config", ".github/workflows"):
        source = REPOSITORY_ROOT / part
        if source.is_dir():
            shutil.copytree(source, root / part)
        else:
            root.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / part)
    assert environment.main(["sandbox", "--root", str(root)]) == 0
    printed = capsys.readouterr().out
    copied = example_values(load_stack("sandbox", root).platform)
    assert copied, "the copy keeps the source's example values"
    assert f"replace the {len(copied)} example value(s)" in printed
    assert "  platform.accountId (" in printed

    stack_file = root / "stacks" / "Pulumi.sandbox.yaml"
    document = load_yaml(stack_file.read_text())
    platform = document["config"]["eks-training-platform:platform"]
    platform["accountId"] = "210987654321"
    stack_file.write_text(yaml.safe_dump(document))
    left = {found.path for found in example_values(load_stack("sandbox", root).platform)}
    assert "platform.accountId" not in left
    assert len(left) == len(copied) - 1
