"""Read the EFA devices' ``hw_counters`` from sysfs, and expose them as Prometheus metrics.

Each scrape reads the tree again, so a device that disappears takes its series with it, and a
file that cannot be read or parsed is counted in ``trainingplatform_efa_scrape_errors`` for its
device instead of failing the scrape.

The layout is the kernel's RDMA core's (the EFA driver registers an ib_device named ``efa_%d``,
which rdma-core's udev rules may rename, e.g. ``rdmap16s27``: amzn/amzn-drivers efa_linux_3.1.0
kernel/linux/efa/src/efa_main.c):
``<sysfs>/class/infiniband/<device>`` links to the PCI device's ``infiniband/<device>``;
``<device>/device/driver`` links to the PCI driver, whose name tells an EFA device (``efa``,
DRV_MODULE_NAME in efa.h) from another RDMA device (``mlx5_core``); ``<device>/hw_counters/``
holds the device's counters and ``<device>/ports/<port>/hw_counters/`` each port's, one decimal
number per file (with ``lifespan``, the core's cache time in milliseconds, which is not read).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from components.metric_names import EFA_METRICS, RULE_PREFIX

LOG: Final = logging.getLogger(__name__)

EFA_DRIVER: Final = "efa"
"""The PCI driver of EFA devices (amzn/amzn-drivers efa_linux_3.1.0 kernel/linux/efa/src/efa.h
DRV_MODULE_NAME)."""
PORT_PREFIX: Final = "ports/<port>/hw_counters/"
DEVICE_PREFIX: Final = "hw_counters/"
VERBS_ERRORS: Final = f"{RULE_PREFIX}_efa_verbs_errors_total"
OPTIONAL_FILES: Final = frozenset({
    # Device counters of drivers built with kernel verbs only.
    "alloc_mr_err", "get_dma_mr_err",
    # Port counters of the device's network statistics, which drivers before efa_linux_2.17.0
    # do not publish (amzn/amzn-drivers efa_linux_2.15.0 kernel/linux/efa/src/efa_verbs.c has
    # no retrans_* and no *_remote_*_events).
    "retrans_bytes", "retrans_pkts", "retrans_timeout_events", "unresponsive_remote_events",
    "impaired_remote_conn_events",
})  # fmt: skip
"""Counter files a supported driver may lack: absent, their series are absent too, which is
not a scrape error (an error on every scrape of every older node would hide the real ones)."""
DEVICES: Final = f"{RULE_PREFIX}_efa_devices"
SCRAPE_ERRORS: Final = f"{RULE_PREFIX}_efa_scrape_errors"


def _help(name: str) -> str:
    return f"EFA hw_counters {EFA_METRICS[name]} (sysfs, per the EFA kernel driver)"


PORT_COUNTERS: Final[dict[str, str]] = {
    name: files.removeprefix(PORT_PREFIX)
    for name, files in EFA_METRICS.items()
    if files.startswith(PORT_PREFIX)
}
"""Metric -> the port's counter file it reads."""
DEVICE_COUNTERS: Final[dict[str, str]] = {
    name: files.removeprefix(DEVICE_PREFIX)
    for name, files in EFA_METRICS.items()
    if files.startswith(DEVICE_PREFIX) and name != VERBS_ERRORS
}
"""Metric -> the device's counter file it reads."""
VERBS_ERROR_FILES: Final = tuple(
    path.removeprefix(DEVICE_PREFIX) for path in EFA_METRICS[VERBS_ERRORS].split()
)


@dataclass
class DeviceCounters:
    """What one scrape read of one EFA device."""

    name: str
    ports: dict[str, dict[str, int]] = field(default_factory=dict)
    """Port number -> counter file -> value."""
    device: dict[str, int] = field(default_factory=dict)
    """Device counter file -> value."""
    errors: list[str] = field(default_factory=list)
    """The files (relative to the device) that could not be read or parsed."""


def _is_efa(device: Path) -> bool:
    try:
        return (device / "device" / "driver").readlink().name == EFA_DRIVER
    except OSError:
        return False


def _read(path: Path) -> int:
    return int(path.read_text(encoding="ascii").strip())


def _read_into(
    directory: Path, names: tuple[str, ...], into: dict[str, int], errors: list[str], where: str
) -> None:
    for name in names:
        try:
            into[name] = _read(directory / name)
        except FileNotFoundError:
            if name not in OPTIONAL_FILES:
                errors.append(f"{where}{name}")
        except (OSError, ValueError, UnicodeDecodeError):
            errors.append(f"{where}{name}")


def read_devices(sysfs: Path) -> list[DeviceCounters]:
    """Every EFA device under ``<sysfs>/class/infiniband`` with its counters, by name.

    Args:
        sysfs: where the host's sysfs is mounted (``/sys`` on the host; the DaemonSet mounts
            it at ``/host/sys``). Without ``class/infiniband`` there is no device.
    """
    root = sysfs / "class" / "infiniband"
    try:
        names = sorted(entry.name for entry in root.iterdir())
    except OSError:
        return []
    found = []
    for name in names:
        device = root / name
        if not _is_efa(device):
            continue
        read = DeviceCounters(name)
        _read_into(
            device / "hw_counters",
            (*DEVICE_COUNTERS.values(), *VERBS_ERROR_FILES),
            read.device,
            read.errors,
            "hw_counters/",
        )
        try:
            ports = sorted(entry.name for entry in (device / "ports").iterdir())
        except OSError:
            ports = []
            read.errors.append("ports")
        for port in ports:
            values: dict[str, int] = {}
            _read_into(
                device / "ports" / port / "hw_counters",
                tuple(PORT_COUNTERS.values()),
                values,
                read.errors,
                f"ports/{port}/hw_counters/",
            )
            read.ports[port] = values
        found.append(read)
    return found


def metrics(devices: list[DeviceCounters]) -> Iterator[Metric]:
    """The metric families of one scrape: a family only with the samples it has.

    Args:
        devices: what :func:`read_devices` read.
    """
    for name, file in PORT_COUNTERS.items():
        family = CounterMetricFamily(name, _help(name), labels=["device", "port"])
        for device in devices:
            for port, values in device.ports.items():
                if file in values:
                    family.add_metric([device.name, port], values[file])
        yield family
    for name, file in DEVICE_COUNTERS.items():
        family = CounterMetricFamily(name, _help(name), labels=["device"])
        for device in devices:
            if file in device.device:
                family.add_metric([device.name], device.device[file])
        yield family
    verbs = CounterMetricFamily(VERBS_ERRORS, _help(VERBS_ERRORS), labels=["device", "operation"])
    for device in devices:
        for file in VERBS_ERROR_FILES:
            if file in device.device:
                verbs.add_metric([device.name, file.removesuffix("_err")], device.device[file])
    yield verbs
    yield GaugeMetricFamily(
        DEVICES, "EFA devices on this node (RDMA devices whose driver is efa)", len(devices)
    )
    errors = GaugeMetricFamily(
        SCRAPE_ERRORS,
        "Counter files of the device that could not be read or parsed in this scrape",
        labels=["device"],
    )
    for device in devices:
        errors.add_metric([device.name], len(device.errors))
    yield errors


class EfaCollector(Collector):
    """A prometheus_client collector that reads the tree at every scrape."""

    def __init__(self, sysfs: Path) -> None:
        """Read ``sysfs`` (see :func:`read_devices`) at each collection."""
        self.sysfs = sysfs

    def collect(self) -> Iterator[Metric]:
        """Read the devices now and yield their metrics; log what could not be read."""
        devices = read_devices(self.sysfs)
        for device in devices:
            if device.errors:
                LOG.warning("%s: could not read %s", device.name, ", ".join(device.errors))
        yield from metrics(devices)
