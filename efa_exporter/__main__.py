"""``python -m efa_exporter [--sysfs DIR] [--port PORT]``: serve the EFA counters over HTTP."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server

from components.metric_names import EFA_EXPORTER_PORT
from efa_exporter.collector import EfaCollector


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """The command line: where sysfs is, and where to listen.

    Args:
        argv: the arguments after the program's name.
    """
    parser = argparse.ArgumentParser(prog="efa_exporter", description=__doc__)
    parser.add_argument(
        "--sysfs", type=Path, default=Path("/sys"),
        help="where the host's sysfs is mounted (default /sys)",
    )  # fmt: skip
    parser.add_argument(
        "--port", type=int, default=EFA_EXPORTER_PORT,
        help=f"TCP port of /metrics (default {EFA_EXPORTER_PORT})",
    )  # fmt: skip
    parser.add_argument("--address", default="0.0.0.0", help="address to listen on")
    return parser.parse_args(argv)


def registry(sysfs: Path) -> CollectorRegistry:
    """A registry with the EFA collector only (no process or platform metrics).

    Args:
        sysfs: where the host's sysfs is mounted.
    """
    found = CollectorRegistry(auto_describe=False)
    found.register(EfaCollector(sysfs))
    return found


def main(argv: Sequence[str]) -> int:
    """Serve until killed.

    Args:
        argv: the arguments after the program's name.
    """
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    arguments = parse_arguments(argv)
    server, thread = start_http_server(
        arguments.port, addr=arguments.address, registry=registry(arguments.sysfs)
    )
    logging.getLogger("efa_exporter").info(
        "serving %s on %s:%d", arguments.sysfs, arguments.address, arguments.port
    )
    try:
        thread.join()
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
