"""Entry point: ``python -m acceptance decide|agent|check ...`` (:mod:`acceptance.cli`)."""

from __future__ import annotations

import sys

from acceptance.cli import main

sys.exit(main(sys.argv[1:]))
