"""Offline synthesis of the Pulumi program (see synth/__main__.py)."""

from typing import Final

COMMANDS: Final[dict[str, str]] = {
    "reference": "'reference [--write [DIR]]' prints the configuration reference (or rewrites "
    "the generated pages in docs/reference/)",
    "check": "'check <resources.json> --stack NAME' runs the policy pack over a plan",
    "jobs": "'jobs <stack>' says what each team's jobs can get",
    "diff": "'diff <stack> --base DIR' shows what changed against an earlier synthesis",
    "scan": "'scan <stack>... | --all' runs checkov over what the stacks run; every finding "
    "must be waived",
    "baseline": "'baseline <stack> --pool P --output FILE --check C [--write]' turns a fabric "
    "test's output into the pool's measured floor in the stack file",
}
"""``python -m synth``'s sub-commands, each with its usage and what it does (``--help`` lists
them all from here); no stack may be named like one (synth/environment.py)."""
