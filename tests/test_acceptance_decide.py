"""`python -m acceptance decide`: realistic tool output for every catalog type, good and bad.

Fixtures are built per instance type by small builders from one cited upstream sample per tool
(below, each with where it came from). What is synthetic is said beside it: the per-type device
counts, names and memory figures follow the catalog, and the bandwidth numbers of a one-node
run are the cited two-node sample scaled, not measurements.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from acceptance import parsers
from acceptance.cli import main
from acceptance.decide import (
    ACCEPT,
    ALL_REDUCE,
    DCGM_DIAG,
    FI_INFO,
    NCCOM_TEST,
    NEURON_LS,
    NVIDIA_SMI,
    REJECT,
    UNUSABLE,
    decide,
    required_files,
)
from acceptance.floors import BASELINES, NO_FIGURE, Check, Floor, floor_for, load_floors
from components.catalog import CATALOG, InstanceType
from synth.stackfile import REPOSITORY_ROOT

GPU_TYPES = sorted(n for n, t in CATALOG.items() if t.accelerator == "nvidia")
NEURON_TYPES = sorted(n for n, t in CATALOG.items() if t.accelerator == "neuron")
EFA_TYPES = sorted(n for n, t in CATALOG.items() if t.supports_efa)

# --- nvidia-smi -------------------------------------------------------------------------------
# Format: `nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader` prints
# "index, name, memory.total" with memory as "<n> MiB". The H100 name "NVIDIA H100 80GB HBM3" is
# as a real H100 run prints it (the device list of an all_reduce_perf run on H100s, e.g. the
# nccl-tests sample below and lessizzmore/create-a3mega-ztan-fork ztan-NCCL-test-result), and
# 81559 MiB is an H100 80GB's total as NVML reports it. SYNTHETIC: the other names follow NVIDIA's
# "NVIDIA <model>" naming, A100s in their SXM4 form; their memory is the catalog's GiB less 0.5%.
GPU_NAMES = {
    "H100": "NVIDIA H100 80GB HBM3",
    "A100": "NVIDIA A100-SXM4-{gib}GB",
    "H200": "NVIDIA H200",
    "B200": "NVIDIA B200",
    "A10G": "NVIDIA A10G",
    "L40S": "NVIDIA L40S",
    "L4": "NVIDIA L4",
}


def nvidia_smi(instance: InstanceType, count: int | None = None) -> str:
    """nvidia-smi CSV for a type's GPUs (``count`` of them; all by default)."""
    name = GPU_NAMES[instance.accelerator_model].format(gib=int(instance.accelerator_memory_gib))
    memory = (
        81559
        if instance.accelerator_model == "H100"
        else int(instance.accelerator_memory_gib * 1024 * 0.995)
    )
    total = instance.accelerators if count is None else count
    return "".join(f"{i}, {name}, {memory} MiB\n" for i in range(total))


# --- fi_info ----------------------------------------------------------------------------------
# Sample: `fi_info -p efa -t FI_EP_RDM` on a p4de.24xlarge, awsankur/awesome-networking (an AWS
# engineer's EFA notes that the awsome-distributed-training samples follow)
# https://github.com/awsankur/awesome-networking/blob/dab8cd48e856f12c6c532b0ea10c2062fec691dc/README.md
# section "How to verify if EFA is installed correctly?" (four blocks, domains rdmap16s27-rdm,
# rdmap32s27-rdm, rdmap144s27-rdm, rdmap160s27-rdm, version 119.0). SYNTHETIC: the builder repeats
# the block once per EFA interface with further rdmap<bus>s27 names.
FI_INFO_BLOCK = """provider: efa
    fabric: {fabric}
    domain: rdmap{bus}s27-rdm
    version: 119.0
    type: FI_EP_RDM
    protocol: FI_PROTO_EFA
"""


def fi_info(count: int, fabrics: tuple[str, ...] = ("efa",)) -> str:
    """fi_info output listing ``count`` EFA devices, each under every one of ``fabrics``."""
    return "".join(
        FI_INFO_BLOCK.format(fabric=fabric, bus=16 * (card + 1))
        for card in range(count)
        for fabric in fabrics
    )


# --- all_reduce_perf --------------------------------------------------------------------------
# Sample: the 2x p5.48xlarge all_reduce_perf run (Slurm, 8 B to 16 GiB, "0: " rank prefix) in
# aws-samples/awsome-distributed-training
# https://github.com/aws-samples/awsome-distributed-training/blob/27b7d49e944e55839324a22fe5ed9f77170d7999/micro-benchmarks/nccl-tests/README.md
# (its last rows below, verbatim), and the closing lines of the EKS run in the same file
# ("# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 52.9753").
ALL_REDUCE_SAMPLE = """\
0: #                                                              out-of-place                       in-place
0: #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
0: #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
0:   1073741824     268435456     float     sum      -1   4607.6  233.04  436.95      0   4565.6  235.18  440.96      0
0:   2147483648     536870912     float     sum      -1   9074.5  236.65  443.72      0   9108.5  235.77  442.06      0
0:   4294967296    1073741824     float     sum      -1    17286  248.46  465.87      0    17343  247.64  464.33      0
0:   8589934592    2147483648     float     sum      -1    33605  255.62  479.28      0    33628  255.44  478.95      0
0:  17179869184    4294967296     float     sum      -1    66132  259.78  487.09      0    66109  259.87  487.26      0
"""
ALL_REDUCE_END = "0: # Out of bounds values : 0 OK\n0: # Avg bus bandwidth    : 52.9753\n"


def all_reduce_perf(busbw: float | None = None, wrong: int = 0, finished: bool = True) -> str:
    """An all_reduce_perf log: the cited sample, its largest row's bus bandwidth set to ``busbw``.

    SYNTHETIC where ``busbw`` or ``wrong`` is given: a one-node run's figure is not the two-node
    sample's; the rows above the largest keep the sample's numbers.
    """
    lines = ALL_REDUCE_SAMPLE.splitlines(keepends=True)
    if busbw is not None or wrong:
        tokens = lines[-1].split()
        value = f"{busbw:.2f}" if busbw is not None else tokens[8]
        tokens[8], tokens[12] = value, value
        tokens[9], tokens[13] = str(wrong), str(wrong)
        lines[-1] = "0:  " + "  ".join(tokens[1:]) + "\n"
    return "".join(lines) + (ALL_REDUCE_END if finished else "")


# --- dcgmi diag -j ----------------------------------------------------------------------------
# Shape: NVIDIA/DCGM's schema of `dcgmi diag -j`,
# https://github.com/NVIDIA/DCGM/blob/686e1024ada28a42d10df597f15247145eef6ce2/testing/python3/dcgm_diag_schema.json
# SYNTHETIC: the test names, entity ids and warning text (no captured run is cited).
def dcgm_diag(gpus: int, fail_gpu: int | None = None) -> str:
    """A dcgmi diag JSON document; ``fail_gpu`` fails the memory test on that GPU."""

    def results(test: str) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for gpu in range(gpus):
            result: dict[str, object] = {
                "entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, "status": "Pass",
            }  # fmt: skip
            if test == "memory" and gpu == fail_gpu:
                result["status"] = "Fail"
                result["warnings"] = [{
                    "error_category": 2, "error_id": 84, "error_severity": 3,
                    "warning": f"Memory test failed on GPU {gpu}: uncorrectable ECC errors",
                }]  # fmt: skip
            out.append(result)
        return out

    def test(name: str) -> dict[str, object]:
        failed = name == "memory" and fail_gpu is not None
        return {"name": name, "results": results(name),
                "test_summary": {"status": "Fail" if failed else "Pass"}}  # fmt: skip

    return json.dumps({
        "DCGM Diagnostic": {"test_categories": [
            {"category": "Deployment", "tests": [test("software")]},
            {"category": "Hardware", "tests": [test("memory"), test("pcie")]},
        ]},
        "metadata": {"version": "4.2.3"},
    })  # fmt: skip


# --- neuron-ls --json-output ------------------------------------------------------------------
# Shape: a JSON array, one object per device with "neuron_device" and "nc_count", as read by
# aws-neuron/neuron-helm-charts
# https://github.com/aws-neuron/neuron-helm-charts/blob/8172e5e144bd49fec836619d2a41ab8cc10e83a8/charts/neuron-helm-chart/templates/tests/test-resource.yaml
# SYNTHETIC: the per-type device and core counts (the catalog's), no other fields.
def neuron_ls(instance: InstanceType, devices: int | None = None) -> str:
    """neuron-ls JSON for a Trainium type (``devices`` of them; all by default)."""
    per_device = instance.neuron_cores // instance.accelerators
    total = instance.accelerators if devices is None else devices
    return json.dumps([{"neuron_device": i, "nc_count": per_device} for i in range(total)])


# --- nccom-test -------------------------------------------------------------------------------
# Sample: `nccom-test -r 2 allr` in the Neuron documentation's NCCOM-TEST user guide,
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.29.0/tools/neuron-sys-tools/nccom-test.html
# (header, one 32 MiB row, "Avg bus bandwidth:      40.6901GB/s"). SYNTHETIC: the builder's
# larger row and its bandwidth.
NCCOM_SAMPLE = """\
     size(B)    count(elems)     type    time(us)    algbw(GB/s)    busbw(GB/s)
    33554432        33554432    uint8         768          40.69          40.69
"""


def nccom_test(busbw: float = 150.0, finished: bool = True) -> str:
    """An nccom-test log: the cited sample plus a 1 GiB row at ``busbw`` GB/s."""
    row = f"  1073741824      1073741824    uint8        7158         150.00         {busbw:.2f}\n"
    end = f"Avg bus bandwidth:      {busbw:.4f}GB/s\n" if finished else ""
    return NCCOM_SAMPLE + row + end


# --- the evidence of one node -----------------------------------------------------------------
def good_evidence(instance: InstanceType) -> dict[str, str | None]:
    """Evidence of a healthy node of this type, every file its check reads."""
    evidence: dict[str, str | None] = {}
    if instance.accelerator == "nvidia":
        evidence[NVIDIA_SMI] = nvidia_smi(instance)
        evidence[ALL_REDUCE] = all_reduce_perf()
        evidence[DCGM_DIAG] = dcgm_diag(instance.accelerators)
    else:
        evidence[NEURON_LS] = neuron_ls(instance)
        evidence[NCCOM_TEST] = nccom_test()
    if instance.supports_efa:
        evidence[FI_INFO] = fi_info(instance.efa_interfaces)
    return evidence


FLOORS = load_floors()


def failing(evidence: Mapping[str, str | None], instance: InstanceType,
            floors: Mapping[tuple[str, Check, int], Floor] = FLOORS) -> list[str]:  # fmt: skip
    decision = decide(instance, evidence, floors)
    assert not decision.unusable, decision.unusable
    return [str(f) for f in decision.findings if not f.ok]


def run_cli(tmp_path: Path, instance_type: str, evidence: Mapping[str, str | None],
            *extra: str) -> tuple[int, str]:  # fmt: skip
    for name, text in evidence.items():
        if text is not None:
            (tmp_path / name).write_text(text)
    out = io.StringIO()
    status = main(
        ["decide", "--instance-type", instance_type, "--evidence", str(tmp_path), *extra], out
    )
    return status, out.getvalue()


# --- good and bad, for every type -------------------------------------------------------------
@pytest.mark.parametrize("instance_type", sorted(CATALOG))
def test_a_healthy_node_of_every_type_is_accepted(tmp_path: Path, instance_type: str) -> None:
    status, out = run_cli(tmp_path, instance_type, good_evidence(CATALOG[instance_type]))
    assert status == ACCEPT, out
    assert out.splitlines()[-1] == f"accept: {instance_type}"
    assert all(line.startswith("pass: ") for line in out.splitlines()[:-1]), out


@pytest.mark.parametrize("instance_type", GPU_TYPES)
def test_a_missing_gpu_rejects(instance_type: str) -> None:
    instance = CATALOG[instance_type]
    evidence = {
        **good_evidence(instance),
        NVIDIA_SMI: nvidia_smi(instance, instance.accelerators - 1),
    }
    assert failing(evidence, instance) == [
        f"gpu count: {instance.accelerators - 1}, want {instance.accelerators}"
    ]


@pytest.mark.parametrize("instance_type", EFA_TYPES)
def test_a_missing_efa_interface_rejects(instance_type: str) -> None:
    instance = CATALOG[instance_type]
    evidence = {**good_evidence(instance), FI_INFO: fi_info(instance.efa_interfaces - 1)}
    assert failing(evidence, instance) == [
        f"efa interfaces: {instance.efa_interfaces - 1}, want {instance.efa_interfaces}"
    ]


@pytest.mark.parametrize("instance_type", sorted(CATALOG))
def test_bandwidth_under_the_floor_rejects(instance_type: str) -> None:
    instance = CATALOG[instance_type]
    gpu = instance.accelerator == "nvidia"
    check: Check = "nccl-all-reduce" if gpu else "nccom-all-reduce"
    floors = {(instance_type, check, 1): Floor(instance_type, check, 1, 100.0, "test", "measured")}
    evidence = {**good_evidence(instance)}
    if gpu:
        evidence[ALL_REDUCE] = all_reduce_perf(busbw=95.4)
        wanted = "nccl all-reduce bus bandwidth: 95.4 GB/s at 16 GiB, want >= 100 GB/s (measured)"
    else:
        evidence[NCCOM_TEST] = nccom_test(busbw=95.4)
        wanted = "nccom all-reduce bus bandwidth: 95.4 GB/s at 1 GiB, want >= 100 GB/s (measured)"
    assert failing(evidence, instance, floors) == [wanted]
    assert failing(good_evidence(instance), instance, floors) == []


@pytest.mark.parametrize("instance_type", GPU_TYPES)
def test_a_dcgm_failure_rejects(instance_type: str) -> None:
    instance = CATALOG[instance_type]
    gpu = instance.accelerators - 1
    evidence = {**good_evidence(instance), DCGM_DIAG: dcgm_diag(instance.accelerators, gpu)}
    assert failing(evidence, instance) == [
        f"dcgm diag: memory failed on gpu {gpu} (Memory test failed on GPU {gpu}: uncorrectable "
        "ECC errors), want no Fail"
    ]


@pytest.mark.parametrize("instance_type", NEURON_TYPES)
def test_a_missing_neuron_device_rejects(instance_type: str) -> None:
    instance = CATALOG[instance_type]
    evidence = {**good_evidence(instance), NEURON_LS: neuron_ls(instance, 15)}
    per_device = instance.neuron_cores // 16
    wanted = "64 or 128" if instance_type == "trn2.48xlarge" else str(instance.neuron_cores)
    assert failing(evidence, instance) == [
        "neuron devices: 15, want 16",
        f"neuron cores: {15 * per_device}, want {wanted}",
    ]


def test_trainium2_at_either_lnc_is_accepted_and_a_short_device_is_not() -> None:
    instance = CATALOG["trn2.48xlarge"]
    physical = json.dumps([{"neuron_device": i, "nc_count": 8} for i in range(16)])
    assert failing({**good_evidence(instance), NEURON_LS: physical}, instance) == []
    short = json.loads(physical)
    short[5]["nc_count"] = 7
    assert failing({**good_evidence(instance), NEURON_LS: json.dumps(short)}, instance) == [
        "neuron cores: 127, want 64 or 128"
    ]


UNPARSEABLE = {
    NVIDIA_SMI: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver\n",
    FI_INFO: "bash: fi_info: command not found\n",
    ALL_REDUCE: "mpirun was unable to launch the specified application\n",
    DCGM_DIAG: "Error: unable to establish a connection to the specified host: localhost\n",
    NEURON_LS: "neuron-ls: error: unrecognized arguments\n",
    NCCOM_TEST: "Traceback (most recent call last):\n",
}


@pytest.mark.parametrize("instance_type", sorted(CATALOG))
def test_an_unparseable_file_is_unusable_input(tmp_path: Path, instance_type: str) -> None:
    instance = CATALOG[instance_type]
    evidence = good_evidence(instance)
    for name in evidence:
        garbled = {**evidence, name: UNPARSEABLE[name]}
        decision = decide(instance, garbled, FLOORS)
        assert decision.status == UNUSABLE, (name, decision)
        assert name in decision.unusable[0], decision.unusable
    status, out = run_cli(tmp_path, instance_type, {**evidence, sorted(evidence)[0]: "{"})
    assert status == UNUSABLE, out
    assert "unusable: " in out


@pytest.mark.parametrize("instance_type", sorted(CATALOG))
def test_a_missing_required_file_rejects_naming_it(tmp_path: Path, instance_type: str) -> None:
    instance = CATALOG[instance_type]
    for name in required_files(instance):
        evidence = {**good_evidence(instance), name: None}
        assert failing(evidence, instance) == [f"evidence {name}: missing, want present"]
    status, out = run_cli(tmp_path, instance_type, {})
    assert status == REJECT
    for name in required_files(instance):
        assert f"fail: evidence {name}: missing, want present" in out.splitlines()


def test_which_files_each_kind_of_node_must_provide() -> None:
    assert required_files(CATALOG["p5.48xlarge"]) == (NVIDIA_SMI, ALL_REDUCE, FI_INFO)
    assert required_files(CATALOG["g5.xlarge"]) == (NVIDIA_SMI, ALL_REDUCE)
    assert required_files(CATALOG["trn2.48xlarge"]) == (NEURON_LS, NCCOM_TEST, FI_INFO)
    # A pool that turns EFA off is not asked for fi_info, and its fi_info is not judged.
    assert required_files(CATALOG["p5.48xlarge"], efa=False) == (NVIDIA_SMI, ALL_REDUCE)
    instance = CATALOG["g5.48xlarge"]
    evidence = {**good_evidence(instance), FI_INFO: fi_info(0)}
    assert decide(instance, evidence, FLOORS, efa=False).status == ACCEPT
    assert decide(instance, evidence, FLOORS).status == REJECT


def test_an_unknown_instance_type_is_unusable_and_lists_the_known(tmp_path: Path) -> None:
    status, out = run_cli(tmp_path, "p9.96xlarge", {})
    assert status == UNUSABLE
    assert "'p9.96xlarge' is not in the catalog" in out
    assert all(name in out for name in CATALOG)


# --- the parsers, against the cited samples ---------------------------------------------------
def test_all_reduce_reads_the_largest_size_of_the_cited_run() -> None:
    result = parsers.parse_all_reduce_perf(all_reduce_perf())
    # 16 GiB is the sample's largest row: out-of-place 487.09, in-place 487.26 GB/s.
    assert (result.size_bytes, result.busbw_gbps, result.wrong) == (17179869184, 487.09, 0)
    assert result.finished
    # The EKS log's rank tag parses the same.
    eks = all_reduce_perf().replace("0: ", "[1,0]<stdout>:")
    assert parsers.parse_all_reduce_perf(eks).busbw_gbps == 487.09


def test_an_all_reduce_that_stopped_or_miscounted_rejects() -> None:
    instance = CATALOG["p5.48xlarge"]
    stopped = {**good_evidence(instance), ALL_REDUCE: all_reduce_perf(finished=False)}
    assert failing(stopped, instance) == [
        "nccl all-reduce run: stopped before its summary, want finished"
    ]
    wrong = {**good_evidence(instance), ALL_REDUCE: all_reduce_perf(wrong=3)}
    assert failing(wrong, instance) == ["nccl all-reduce wrong values: 6, want 0"]
    bounds = all_reduce_perf().replace("0 OK", "2 FAILED")
    assert failing({**good_evidence(instance), ALL_REDUCE: bounds}, instance) == [
        "nccl all-reduce wrong values: 2, want 0"
    ]


def test_all_reduce_columns_are_found_by_name() -> None:
    # Without data checks #wrong is N/A; with -t timestamps a date and time end each row
    # (NVIDIA/nccl-tests src/util.cu writeBenchmarkLineBody, writeResultHeader).
    lines = all_reduce_perf().splitlines()
    lines[1] += "  timestamp"
    tokens = lines[-3].split()  # the 16 GiB row, after its "0:" rank tag
    tokens[9], tokens[13] = "N/A", "N/A"
    lines[-3] = "  ".join(tokens) + "  2026-12-06 12:00:00"
    result = parsers.parse_all_reduce_perf("\n".join(lines))
    assert (result.size_bytes, result.busbw_gbps, result.wrong) == (17179869184, 487.09, 0)


def test_nccom_test_reads_the_cited_sample() -> None:
    sample = NCCOM_SAMPLE + "Avg bus bandwidth:      40.6901GB/s\n"
    result = parsers.parse_nccom_test(sample)
    assert (result.size_bytes, result.busbw_gbps, result.finished) == (33554432, 40.69, True)


def test_efa_devices_count_once_across_fabrics() -> None:
    # libfabric 2.x lists each device under the efa and efa-direct fabrics.
    assert len(parsers.efa_devices(fi_info(32, ("efa", "efa-direct")))) == 32
    assert parsers.efa_devices("fi_getinfo: -61 (No data available)\n") == set()
    assert parsers.efa_devices("") == set()


def test_gpu_names_map_to_catalog_models() -> None:
    assert parsers.gpu_model_matches("NVIDIA H100 80GB HBM3", "H100")
    assert parsers.gpu_model_matches("NVIDIA A100-SXM4-80GB", "A100")
    assert parsers.gpu_model_matches("Tesla A10G", "A10G")
    assert not parsers.gpu_model_matches("NVIDIA L40S", "L4")
    assert not parsers.gpu_model_matches("NVIDIA H100 80GB HBM3", "H200")


def test_the_wrong_gpu_or_its_memory_rejects() -> None:
    instance = CATALOG["p4de.24xlarge"]
    small = nvidia_smi(CATALOG["p4d.24xlarge"])
    assert failing({**good_evidence(instance), NVIDIA_SMI: small}, instance) == [
        "gpu memory: "
        + ", ".join(f"40755 MiB (gpu {i})" for i in range(8))
        + ", want 80 GiB ± 10% (73728-90112 MiB)"
    ]
    p5 = CATALOG["p5.48xlarge"]
    h200 = nvidia_smi(CATALOG["p5e.48xlarge"])
    assert failing({**good_evidence(p5), NVIDIA_SMI: h200}, p5)[0].startswith(
        "gpu model: NVIDIA H200 (gpu 0)"
    )


def test_a_node_without_gpus_rejects() -> None:
    instance = CATALOG["g5.xlarge"]
    evidence = {**good_evidence(instance), NVIDIA_SMI: "No devices were found\n"}
    assert failing(evidence, instance) == ["gpu count: 0, want 1"]


def test_a_dcgm_runtime_error_rejects() -> None:
    document = json.dumps({"DCGM Diagnostic": {"runtime_error": "the GPUs are in use"}})
    assert parsers.parse_dcgm_diag(document) == [
        parsers.DiagFailure("runtime", "all", "the GPUs are in use")
    ]


def test_neuron_ls_new_format_is_refused_not_misread() -> None:
    with pytest.raises(parsers.UnusableEvidence, match=r"2\.34"):
        parsers.parse_neuron_ls(json.dumps({"instance_type": "trn2.48xlarge", "devices": []}))


# --- the floors -------------------------------------------------------------------------------
def test_every_catalog_type_has_a_one_node_floor_with_its_source() -> None:
    for name, instance in CATALOG.items():
        check = "nccl-all-reduce" if instance.accelerator == "nvidia" else "nccom-all-reduce"
        assert (name, check, 1) in FLOORS, f"{name}: no one-node {check} floor in baselines.json"
    for floor in FLOORS.values():
        assert floor.of.strip() and floor.source.strip()
        if floor.floor_gbps == 0:
            assert floor.source == NO_FIGURE
        else:
            # A non-zero floor is a cited published figure or a measurement, never made up.
            assert floor.source.startswith(("published: ", "measured")), floor
            assert floor.source.startswith("measured") or "https://" in floor.source, floor


def test_published_two_node_figures_are_the_cited_ones() -> None:
    # aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md at 27b7d49e.
    assert FLOORS[("p5.48xlarge", "nccl-all-reduce", 2)].floor_gbps == 437.8
    assert FLOORS[("p4de.24xlarge", "nccl-all-reduce", 2)].floor_gbps == 78.3
    # decide holds a node to the one-node floor, never to a two-node figure.
    assert floor_for(FLOORS, "p5.48xlarge", "nccl-all-reduce").nodes == 1


def test_a_baselines_file_replaces_the_shipped_floors(tmp_path: Path) -> None:
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps({"floors": [{
        "instance_type": "p5.48xlarge", "check": "nccl-all-reduce", "nodes": 1,
        "floor_gbps": 500, "of": "one node, 16 GiB", "source": "measured: pool gpu, 2026-12-01",
    }]}))  # fmt: skip
    evidence = good_evidence(CATALOG["p5.48xlarge"])
    status, out = run_cli(tmp_path, "p5.48xlarge", evidence, "--baselines", str(measured))
    assert status == REJECT
    assert "fail: nccl all-reduce bus bandwidth: 487.09 GB/s at 16 GiB, want >= 500 GB/s" in out


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"instance_type": None, "source": None}, "missing instance_type, source"),
        ({"check": "iperf"}, "check 'iperf' is not one of"),
        ({"floor_gbps": -1}, "floor_gbps -1 must be a number >= 0"),
        ({"source": " "}, "source is empty"),
    ],
)
def test_bad_baselines_name_the_entry_and_key(
    tmp_path: Path, patch: dict[str, object], message: str
) -> None:
    entry: dict[str, object] = {
        "instance_type": "p5.48xlarge", "check": "nccl-all-reduce", "nodes": 1,
        "floor_gbps": 1, "of": "x", "source": "measured",
    }  # fmt: skip
    entry = {k: v for k, v in {**entry, **patch}.items() if v is not None}
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"floors": [entry]}))
    with pytest.raises(ValueError, match=rf"b\.json floors\[0\]: {message}"):
        load_floors(path)


# --- it runs without Pulumi -------------------------------------------------------------------
def test_the_program_imports_without_pulumi() -> None:
    # The acceptance image has no Pulumi: refuse every pulumi import and run the command.
    code = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0].startswith('pulumi'):\n"
        "            raise ImportError('no pulumi in the acceptance image: ' + name)\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "import acceptance.cli, acceptance.decide\n"
        "print(sorted(m for m in sys.modules if m.startswith('components')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPOSITORY_ROOT, capture_output=True, text=True,
        check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['components', 'components.catalog']"
    assert BASELINES.is_file()
