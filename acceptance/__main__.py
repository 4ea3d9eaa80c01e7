"""Entry point: ``python -m acceptance decide --instance-type T --evidence DIR``."""

from __future__ import annotations

import sys

from acceptance.cli import main

sys.exit(main(sys.argv[1:]))
