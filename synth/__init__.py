"""Offline synthesis of the Pulumi program (see synth/__main__.py)."""

from typing import Final

COMMANDS: Final = ("reference", "check", "jobs", "diff", "scan")
"""``python -m synth``'s sub-commands; no stack may be named like one (synth/environment.py)."""
