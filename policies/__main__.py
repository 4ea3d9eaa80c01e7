"""Entry point of the CrossGuard pack: builds the pack and nothing else.

Constructing ``PolicyPack`` starts the analyzer server and blocks, so rules live in importable
modules (``policies.rules``) that tests and the offline gate use directly.
"""

import sys
from pathlib import Path

# The pack runs with policies/ as its working directory; the rules import the repository's
# bill of materials (components.versions), so the repository root goes on the path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack

from policies.rules import ALL_POLICIES, PACK_NAME

PolicyPack(name=PACK_NAME, enforcement_level=EnforcementLevel.MANDATORY, policies=ALL_POLICIES)
