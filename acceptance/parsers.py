"""Parsers of the checking tools' raw output: text in, plain values out, nothing else.

Each parser takes the whole text one tool wrote and returns what the decision needs, or raises
:class:`UnusableEvidence` when the text is not that tool's output (the decision then exits 2:
it cannot judge the node from it). Output that parses but shows a broken node (no devices, a
run that stopped early) is returned as such, so the decision rejects it with a reason.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from typing import Any, Final


class UnusableEvidence(ValueError):
    """A file of evidence that is not the output of the tool it is named after."""


@dataclass(frozen=True)
class Gpu:
    """One line of ``nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader``."""

    index: int
    name: str
    """Product name as NVML reports it, e.g. ``NVIDIA H100 80GB HBM3``."""
    memory_mib: int
    """Total framebuffer memory, MiB."""


NO_GPUS: Final = "No devices were found"
"""What ``nvidia-smi`` prints when the driver sees no GPU (a node with none is rejected)."""


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """The GPUs in ``nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader``.

    Each line is ``index, name, memory`` with memory as ``81559 MiB`` (or a bare number with
    ``nounits``). An empty output or nvidia-smi's "No devices were found" is no GPUs.

    Args:
        text: the whole output.

    Raises:
        UnusableEvidence: a line that is not ``index, name, memory``.
    """
    if NO_GPUS in text:
        return []
    gpus = []
    for number, row in enumerate(csv.reader(io.StringIO(text), skipinitialspace=True), 1):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 3:
            raise UnusableEvidence(
                f"nvidia-smi.csv line {number}: {', '.join(row)!r} is not 'index, name, "
                "memory.total' (run nvidia-smi --query-gpu=index,name,memory.total "
                "--format=csv,noheader)"
            )
        index, name, memory = (field.strip() for field in row)
        match = re.fullmatch(r"(\d+)(?:\s*MiB)?", memory)
        if not index.isdigit() or match is None:
            raise UnusableEvidence(
                f"nvidia-smi.csv line {number}: index {index!r} or memory.total {memory!r} is "
                "not a number (MiB)"
            )
        gpus.append(Gpu(int(index), name, int(match.group(1))))
    return gpus


def gpu_model_matches(name: str, model: str) -> bool:
    """Whether an NVML product name is of a catalog model, e.g. ``NVIDIA H100 80GB HBM3``, H100.

    The model must appear as a whole token: ``NVIDIA L40S`` is not an ``L4``, and
    ``NVIDIA A100-SXM4-80GB`` is an ``A100``. Case does not matter.

    Args:
        name: the name nvidia-smi printed.
        model: the catalog's ``accelerator_model``.
    """
    pattern = rf"(?<![A-Z0-9]){re.escape(model.upper())}(?![A-Z0-9])"
    return re.search(pattern, name.upper()) is not None


def efa_devices(text: str) -> set[str]:
    """The EFA devices libfabric offers in ``fi_info -p efa -t FI_EP_RDM`` output.

    ``fi_info`` prints one block per (fabric, domain) with ``provider:``, ``fabric:`` and
    ``domain:`` lines. The EFA provider names a domain after the verbs device plus an endpoint
    suffix, ``rdmap16s27-rdm`` for RDM (``-dgrm`` for datagram): ofiwg/libfabric
    https://github.com/ofiwg/libfabric/blob/02b363acb8b2fa6c2c5fc22f03f2426a8ec3201e/prov/efa/src/efa_prov_info.c
    (efa_prov_info_set_domain_attr). Newer libfabric lists each device under two fabrics
    (``efa`` and ``efa-direct``), so devices are counted once each, by domain name less suffix.

    Args:
        text: the whole output.

    Raises:
        UnusableEvidence: text that has no ``provider:`` block and is neither empty nor
            fi_info's "No data available" answer (both mean no EFA device: an empty set).
    """
    devices: set[str] = set()
    provider = ""
    blocks = 0
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if key == "provider":
            provider = value
            blocks += 1
        elif key == "domain" and provider == "efa":
            devices.add(re.sub(r"-(rdm|dgrm)$", "", value))
    # fi_info finding no EFA device prints nothing on stdout ("fi_getinfo: -61 (No data
    # available)" goes to stderr): no devices, not an unreadable file.
    if blocks == 0 and text.strip() and "No data available" not in text:
        raise UnusableEvidence(
            "fi_info.txt has no 'provider:' block (run fi_info -p efa -t FI_EP_RDM)"
        )
    return devices


@dataclass(frozen=True)
class BusBandwidth:
    """A collective benchmark's result at its largest message size."""

    size_bytes: int
    """The largest message size the run measured, bytes."""
    busbw_gbps: float
    """Bus bandwidth there, GB/s (the lower of out-of-place and in-place where both exist)."""
    wrong: int
    """Values that failed the benchmark's check: the rows' ``#wrong`` summed, or the run's "Out
    of bounds values" where that is more (0 where not checked)."""
    finished: bool
    """Whether the run printed its closing ``Avg bus bandwidth`` line."""


# mpirun and srun put a rank tag before each line: "0: ", "[1,0]<stdout>:".
_RANK_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<\w+>:|\d+:)")


def _strip_rank(line: str) -> str:
    return _RANK_PREFIX.sub("", line, count=1).strip()


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def parse_all_reduce_perf(text: str) -> BusBandwidth:
    """The bus bandwidth of an nccl-tests ``all_reduce_perf`` run at its largest size.

    nccl-tests prints a table whose header names the columns (``size count type redop root
    time algbw busbw #wrong`` for out-of-place, then ``time algbw busbw #wrong`` in-place, an
    optional ``timestamp`` last; ``#wrong`` is ``N/A`` without data checks; older releases have
    no ``root`` and an ``error`` column), one row per size, then ``# Out of bounds values : N
    OK|FAILED`` and ``# Avg bus bandwidth : N``: NVIDIA/nccl-tests
    https://github.com/NVIDIA/nccl-tests/blob/cfa8a9674b467b8e200775a62b09ff11d4c363ac/src/util.cu
    (writeResultHeader, writeBenchmarkLineBody, writeResultFooter) and the sample runs in
    aws-samples/awsome-distributed-training
    https://github.com/aws-samples/awsome-distributed-training/blob/27b7d49e944e55839324a22fe5ed9f77170d7999/micro-benchmarks/nccl-tests/README.md

    Args:
        text: the whole output, rank prefixes (``0:``, ``[1,0]<stdout>:``) allowed.

    Raises:
        UnusableEvidence: no header with ``busbw`` columns, or no data row under it.
    """
    columns: list[str] = []
    rows: list[list[str]] = []
    finished = False
    out_of_bounds = 0
    for raw in text.splitlines():
        line = _strip_rank(raw)
        if line.startswith("#"):
            tokens = line.lstrip("#").split()
            if "busbw" in tokens and "size" in tokens:
                columns = tokens
            if re.match(r"#\s*Avg bus bandwidth\s*:", line):
                finished = True
            bounds = re.match(r"#\s*Out of bounds values\s*:\s*(\d+)", line)
            out_of_bounds = int(bounds.group(1)) if bounds else out_of_bounds
            continue
        tokens = line.split()
        # A timestamp column is one header word and two row words (date, time).
        if columns and len(tokens) >= len(columns) and tokens[0].isdigit():
            rows.append(tokens)
    if not columns or not rows:
        raise UnusableEvidence(
            "all_reduce_perf.txt has no nccl-tests table (a '# size ... busbw' header and rows)"
        )
    busbw_at = [i for i, name in enumerate(columns) if name == "busbw"]
    wrong_at = [i for i, name in enumerate(columns) if name == "#wrong"]
    largest = max(rows, key=lambda row: int(row[0]))
    values = [v for v in (_number(largest[i]) for i in busbw_at) if v is not None]
    if not values:
        raise UnusableEvidence(
            f"all_reduce_perf.txt: the {largest[0]} B row has no bus bandwidth number"
        )
    wrong = 0
    for row in rows:
        for i in wrong_at:
            count = _number(row[i])
            wrong += int(count) if count is not None else 0
    return BusBandwidth(int(largest[0]), min(values), max(wrong, out_of_bounds), finished)


def parse_nccom_test(text: str) -> BusBandwidth:
    """The bus bandwidth of an ``nccom-test`` all-reduce at its largest size.

    nccom-test prints ``size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s)``, one row
    per size, then ``Avg bus bandwidth: 40.6901GB/s``: the Neuron documentation's NCCOM-TEST
    user guide, https://awsdocs-neuron.readthedocs-hosted.com/en/v2.29.0/tools/neuron-sys-tools/nccom-test.html
    (newer releases split the time column into ``time:avg(us)`` and others; the columns are
    found by name).

    Args:
        text: the whole output.

    Raises:
        UnusableEvidence: no header with ``size(B)`` and ``busbw(GB/s)``, or no row.
    """
    columns: list[str] = []
    rows: list[list[str]] = []
    finished = False
    for raw in text.splitlines():
        line = _strip_rank(raw)
        tokens = line.split()
        if "size(B)" in tokens and "busbw(GB/s)" in tokens:
            columns = tokens
        elif line.startswith("Avg bus bandwidth"):
            finished = True
        elif columns and len(tokens) == len(columns) and tokens[0].isdigit():
            rows.append(tokens)
    if not columns or not rows:
        raise UnusableEvidence(
            "nccom-test.txt has no nccom-test table (a 'size(B) ... busbw(GB/s)' header and rows)"
        )
    size_at = columns.index("size(B)")
    busbw_at = columns.index("busbw(GB/s)")
    largest = max(rows, key=lambda row: int(row[size_at]))
    busbw = _number(largest[busbw_at])
    if busbw is None:
        raise UnusableEvidence(f"nccom-test.txt: the {largest[size_at]} B row has no busbw")
    return BusBandwidth(int(largest[size_at]), busbw, 0, finished)


@dataclass(frozen=True)
class DiagFailure:
    """One failed DCGM diagnostic: which test, on which GPU, and what it said."""

    test: str
    gpu: str
    """The entity (GPU index) the result is about, or ``all`` for a test-level result."""
    reason: str


# DCGM 4 names the top object "DCGM Diagnostic"; DCGM 3 called it "DCGM GPU Diagnostic".
_DIAG_KEYS: Final = ("DCGM Diagnostic", "DCGM GPU Diagnostic")


def _diag_reason(result: dict[str, Any]) -> str:
    warnings = result.get("warnings") or []
    texts = [str(w.get("warning", "")) for w in warnings if isinstance(w, dict)]
    return "; ".join(t for t in texts if t) or "no reason given"


def parse_dcgm_diag(text: str) -> list[DiagFailure]:
    """The failed tests of a ``dcgmi diag -j`` run (an empty list when every test passed).

    Shape: ``{"DCGM Diagnostic": {"test_categories": [{"category", "tests": [{"name",
    "results": [{"entity_id", "status", "warnings": [{"warning"}]}], "test_summary":
    {"status"}}]}], "runtime_error"?}}``: NVIDIA/DCGM
    https://github.com/NVIDIA/DCGM/blob/686e1024ada28a42d10df597f15247145eef6ce2/testing/python3/dcgm_diag_schema.json
    A ``runtime_error`` (the diagnostic could not run) is a failure of its own.

    Args:
        text: the whole JSON document.

    Raises:
        UnusableEvidence: not JSON, or no ``DCGM Diagnostic`` object.
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise UnusableEvidence(f"dcgmi-diag.json is not JSON: {error}") from None
    diag = next(
        (document[k] for k in _DIAG_KEYS if isinstance(document, dict) and k in document), None
    )
    if not isinstance(diag, dict):
        raise UnusableEvidence(
            "dcgmi-diag.json has no 'DCGM Diagnostic' object (run dcgmi diag -r LEVEL -j)"
        )
    failures = []
    if diag.get("runtime_error"):
        failures.append(DiagFailure("runtime", "all", str(diag["runtime_error"])))
    for category in diag.get("test_categories", []):
        for test in category.get("tests", []):
            name = str(test.get("name", "?"))
            failed = [r for r in test.get("results", []) if r.get("status") == "Fail"]
            failures += [
                DiagFailure(name, str(r.get("entity_id", r.get("gpu_id", "?"))), _diag_reason(r))
                for r in failed
            ]
            summary = test.get("test_summary") or {}
            if not failed and summary.get("status") == "Fail":
                failures.append(DiagFailure(name, "all", "test summary Fail"))
    return failures


@dataclass(frozen=True)
class NeuronDevice:
    """One Neuron device as ``neuron-ls --json-output`` lists it."""

    index: int
    cores: int
    """NeuronCores the device offers (``nc_count``)."""


def parse_neuron_ls(text: str) -> list[NeuronDevice]:
    """The Neuron devices in ``neuron-ls --json-output`` (``-j``) output.

    The output is a JSON array with one object per device, each with ``neuron_device`` (its
    index) and ``nc_count`` (its NeuronCores). Upstream readers of that shape:
    aws-neuron/neuron-helm-charts
    https://github.com/aws-neuron/neuron-helm-charts/blob/8172e5e144bd49fec836619d2a41ab8cc10e83a8/charts/neuron-helm-chart/templates/tests/test-resource.yaml
    (``jq '. | length'``, ``.[0].nc_count``) and Ray's Neuron accelerator manager (sums
    ``nc_count``). Neuron 2.34 replaces ``-j`` with ``--output-format json``, a different
    shape (an object with instance fields): that is refused here until it is read.

    Args:
        text: the whole JSON document.

    Raises:
        UnusableEvidence: not JSON, not a list of device objects with ``nc_count``.
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise UnusableEvidence(f"neuron-ls.json is not JSON: {error}") from None
    if not isinstance(document, list):
        raise UnusableEvidence(
            "neuron-ls.json is not the list of devices neuron-ls --json-output prints (Neuron "
            "2.34's --output-format json is not read yet)"
        )
    devices = []
    for position, entry in enumerate(document):
        if not isinstance(entry, dict) or not isinstance(entry.get("nc_count"), int):
            raise UnusableEvidence(f"neuron-ls.json device {position} has no integer nc_count")
        devices.append(NeuronDevice(int(entry.get("neuron_device", position)), entry["nc_count"]))
    return devices
