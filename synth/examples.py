"""Values a stack file still carries from the documentation, to replace before a real deploy.

The stacks in this repository are examples, and ``scripts/new-environment`` copies one: its
account id, office network and directory names are the ones the documentation reserves for
examples. They synthesize (so a new environment works offline at once), but a deploy with them
would name another account, admit nobody and find no directory. ``scripts/synth`` lists them as
a warning until they are replaced; it never fails on them.

What counts as an example, each reserved for documentation by its owner:

- AWS account ids of the forms AWS's documentation writes in examples: ``123456789012`` and
  three runs of four digits each one up (``111122223333``, ``444455556666``, and so
  ``333344445555``), alone or inside an ARN or a registry address;
- IPv4 addresses and networks inside 192.0.2.0/24, 198.51.100.0/24 and 203.0.113.0/24
  (RFC 5737, TEST-NET-1 to 3);
- names under the domains ``example.com``, ``example.net``, ``example.org`` and the top-level
  ``example``, ``invalid`` and ``test`` (RFC 2606), also as LDAP DN components
  (``dc=example,dc=com``) and in e-mail addresses such as an SSH key's comment;
- AWS resource ids whose hex part counts up instead of being random, the made-up ids examples
  write (``sg-0123456789abcdef0``, ``tgw-0a1b2c3d4e5f60718``, ``cr-0b2c3d4e5f6071829``).

Numbers count as their text: YAML reads an unquoted ``accountId: 111122223333`` as one.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from components.config.base import CONFIG_KEY

DOCUMENTATION_ACCOUNTS: Final = (
    "123456789012",
    *(f"{digit}" * 4 + f"{digit + 1}" * 4 + f"{digit + 2}" * 4 for digit in range(8)),
)
"""Example AWS account ids: AWS's documentation's 123456789012, 111122223333, 444455556666,
777788889999, and the rest of that pattern (000011112222 to 777788889999)."""

DOCUMENTATION_NETWORKS: Final = tuple(
    ipaddress.IPv4Network(network)
    for network in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
)
"""RFC 5737's IPv4 blocks for documentation."""

_ACCOUNT: Final = re.compile(r"(?<!\d)(" + "|".join(DOCUMENTATION_ACCOUNTS) + r")(?!\d)")
_ADDRESS: Final = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})(?:/(\d{1,2}))?(?![\d.])")
_DOMAIN: Final = re.compile(
    r"(?i)(?<![a-z0-9-])((?:[a-z0-9-]+\.)*(?:example\.(?:com|net|org)|[a-z0-9-]+\."
    r"(?:example|invalid|test)))(?![a-z0-9.-]*[a-z0-9])"
)
_DN_DOMAIN: Final = re.compile(r"(?i)dc=example\s*,\s*dc=(?:com|net|org)\b")
_RESOURCE_ID: Final = re.compile(r"\b[a-z]+(?:-[a-z]+)*-([0-9a-f]{8,17})\b")
COUNTING_HEX: Final = (
    "0123456789abcdef" * 3,
    "1234567890abcdef" * 3,
    "".join(f"{index % 10}{(10 + index) % 16:x}" for index in range(32)),
)
"""Hex that counts up: 0123456789abcdef..., 1234567890abcdef... (AWS's i-1234567890abcdef0),
and 0a1b2c3d4e5f6071829... (a digit and a letter, each one up)."""
MADE_UP_RUN: Final = 10
"""How long a counting run in an id's hex part makes the id made up (a random 17-hex id has
such a run with a chance far below one in a billion)."""


@dataclass(frozen=True)
class ExampleValue:
    """One documentation value found in a stack file.

    Args:
        path: the key path, as config problems name it (``platform.accountId``).
        value: the value found there (for a long value, the whole string).
        kind: what makes it an example (``in 203.0.113.0/24, reserved for documentation``).
    """

    path: str
    value: str
    kind: str

    def __str__(self) -> str:
        return f"{self.path} ({self.kind})"


def example_values(platform: Any) -> list[ExampleValue]:
    """Every value of a stack's raw ``platform`` config that is a documentation example.

    Args:
        platform: the stack file's ``<project>:platform`` value, as YAML loads it.

    """
    return list(_walk(platform, CONFIG_KEY))


def _walk(value: Any, path: str) -> Iterator[ExampleValue]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")
    elif isinstance(value, str | int | float) and not isinstance(value, bool):
        kind = example_kind(str(value))
        if kind is not None:
            yield ExampleValue(path, str(value), kind)


def example_kind(text: str) -> str | None:
    """What makes ``text`` a documentation example, or None when nothing does.

    Args:
        text: one string value of the stack file.

    """
    account = _ACCOUNT.search(text)
    if account:
        return f"{account.group(1)}, an example account id of the form AWS's documentation writes"
    for match in _ADDRESS.finditer(text):
        network = _network(match.group(1), match.group(2))
        if network is not None:
            for reserved in DOCUMENTATION_NETWORKS:
                if network.subnet_of(reserved):
                    return f"in {reserved}, reserved for documentation"
    domain = _DOMAIN.search(text)
    if domain:
        return f"{domain.group(1).lower()}, a domain reserved for examples"
    if _DN_DOMAIN.search(text):
        return "dc=example, a domain reserved for examples"
    for match in _RESOURCE_ID.finditer(text):
        if _counts_up(match.group(1)):
            return f"{match.group(0)}, a made-up id (its hex counts up)"
    return None


def _counts_up(hex_part: str) -> bool:
    """True when ``hex_part`` holds a run of :data:`MADE_UP_RUN` characters that counts up."""
    return any(
        hex_part[start : start + MADE_UP_RUN] in sequence
        for start in range(len(hex_part) - MADE_UP_RUN + 1)
        for sequence in COUNTING_HEX
    )


def _network(address: str, prefix: str | None) -> ipaddress.IPv4Network | None:
    """``address[/prefix]`` as a network, or None when it is not one (``1.2.3.999``)."""
    try:
        return ipaddress.IPv4Network(f"{address}/{prefix or 32}", strict=False)
    except ValueError:
        return None


def summary(examples: list[ExampleValue], *, long: bool = False, shown: int = 3) -> str:
    """The summary's line about examples: empty when there are none.

    Args:
        examples: what :func:`example_values` found.
        long: list every one (``--long``) instead of the first ``shown``.
        shown: how many a short summary names; default 3.

    """
    if not examples:
        return ""
    head = (
        f"  examples: {len(examples)} documentation value(s) still in the stack file; replace "
        "them before a real deploy (docs: add an environment)"
    )
    listed = examples if long else examples[:shown]
    lines = [head, *(f"    {example}" for example in listed)]
    if len(listed) < len(examples):
        lines.append(f"    and {len(examples) - len(listed)} more (--long lists them)")
    return "\n".join(lines)
