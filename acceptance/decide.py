"""The acceptance decision: the tools' raw output against the catalog's facts and the floors.

Pure: it takes the evidence as text (file name to content, ``None`` where a file is missing)
and returns findings; reading the directory and printing are the CLI's. Exit status: 0 accept,
1 reject (a check failed, or a required file is missing), 2 unusable (a file that is not its
tool's output, or an unknown instance type): the node cannot be judged from what it wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from acceptance import parsers
from acceptance.floors import Check, Floor, floor_for
from components.catalog import InstanceType

ACCEPT: Final = 0
REJECT: Final = 1
UNUSABLE: Final = 2

NVIDIA_SMI: Final = "nvidia-smi.csv"
FI_INFO: Final = "fi_info.txt"
ALL_REDUCE: Final = "all_reduce_perf.txt"
DCGM_DIAG: Final = "dcgmi-diag.json"
NEURON_LS: Final = "neuron-ls.json"
NCCOM_TEST: Final = "nccom-test.txt"
EVIDENCE_FILES: Final = (NVIDIA_SMI, FI_INFO, ALL_REDUCE, DCGM_DIAG, NEURON_LS, NCCOM_TEST)
"""Every file name the decision reads from the evidence directory."""

MEMORY_TOLERANCE: Final = 0.10
"""How far a GPU's reported memory may be from the catalog's figure, as a fraction. NVML reports
the framebuffer less what the driver and ECC keep: 81559 MiB on an 80 GiB H100, about 22.5 GiB
on a 24 GB A10G (6% under); a 40 GB A100 in an 80 GB slot is 50% under."""


@dataclass(frozen=True)
class Finding:
    """One check's outcome, worded "check: seen, want wanted"."""

    check: str
    seen: str
    wanted: str
    ok: bool

    def __str__(self) -> str:
        return f"{self.check}: {self.seen}, want {self.wanted}"


@dataclass
class Decision:
    """Every finding of one decision, and the exit status they make."""

    findings: list[Finding] = field(default_factory=list)
    unusable: list[str] = field(default_factory=list)
    """Why a file could not be read as its tool's output (exit 2)."""

    @property
    def status(self) -> int:
        """0 accept, 1 reject, 2 unusable evidence."""
        if self.unusable:
            return UNUSABLE
        return ACCEPT if all(f.ok for f in self.findings) else REJECT

    def add(self, check: str, seen: object, wanted: object, ok: bool) -> None:
        """Record one finding."""
        self.findings.append(Finding(check, str(seen), str(wanted), ok))


def required_files(instance: InstanceType, efa: bool | None = None) -> tuple[str, ...]:
    """The evidence files a node of this type must provide.

    GPUs: nvidia-smi and the all-reduce run; Trainium: neuron-ls and the nccom-test run;
    ``fi_info`` only where the node has EFA. DCGM's diagnostic is optional (its level is set
    in config, and level 0 means none) but judged when present.

    Args:
        instance: the catalog entry.
        efa: whether the node's pool attaches EFA (a pool may turn it off); default: whether
            the type has EFA at all.
    """
    gpu = instance.accelerator == "nvidia"
    files = (NVIDIA_SMI, ALL_REDUCE) if gpu else (NEURON_LS, NCCOM_TEST)
    with_efa = instance.supports_efa if efa is None else efa and instance.supports_efa
    return (*files, FI_INFO) if with_efa else files


def _size(size_bytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale} {unit}"
    return f"{size_bytes} B"


def _memory_range(gpus: list[parsers.Gpu]) -> str:
    if not gpus:
        return "no GPU"
    low, high = min(g.memory_mib for g in gpus), max(g.memory_mib for g in gpus)
    return f"{low} MiB" if low == high else f"{low}-{high} MiB"


def _judge_gpus(decision: Decision, instance: InstanceType, text: str) -> None:
    gpus = parsers.parse_nvidia_smi(text)
    decision.add("gpu count", len(gpus), instance.accelerators, len(gpus) == instance.accelerators)
    if not gpus:
        return  # the count says it; a model or memory finding about no GPU adds nothing
    wrong_model = [
        g for g in gpus if not parsers.gpu_model_matches(g.name, instance.accelerator_model)
    ]
    seen = ", ".join(f"{g.name} (gpu {g.index})" for g in wrong_model) or (
        gpus[0].name if gpus else "none"
    )
    decision.add("gpu model", seen, instance.accelerator_model, not wrong_model)
    expected_mib = instance.accelerator_memory_gib * 1024
    low, high = expected_mib * (1 - MEMORY_TOLERANCE), expected_mib * (1 + MEMORY_TOLERANCE)
    off = [g for g in gpus if not low <= g.memory_mib <= high]
    decision.add(
        "gpu memory",
        ", ".join(f"{g.memory_mib} MiB (gpu {g.index})" for g in off) or _memory_range(gpus),
        f"{instance.accelerator_memory_gib:g} GiB ± {MEMORY_TOLERANCE:.0%} "
        f"({low:.0f}-{high:.0f} MiB)",
        bool(gpus) and not off,
    )


def _judge_bandwidth(
    decision: Decision, name: str, result: parsers.BusBandwidth, floor: Floor
) -> None:
    decision.add(
        f"{name} bus bandwidth",
        f"{result.busbw_gbps:g} GB/s at {_size(result.size_bytes)}",
        f">= {floor.floor_gbps:g} GB/s ({floor.source})",
        result.busbw_gbps >= floor.floor_gbps,
    )
    decision.add(f"{name} run", "finished" if result.finished else "stopped before its summary",
                 "finished", result.finished)  # fmt: skip
    if result.wrong:
        decision.add(f"{name} wrong values", result.wrong, 0, False)


def _judge_dcgm(decision: Decision, text: str) -> None:
    failures = parsers.parse_dcgm_diag(text)
    seen = "; ".join(f"{f.test} failed on gpu {f.gpu} ({f.reason})" for f in failures)
    decision.add("dcgm diag", seen or "no Fail", "no Fail", not failures)


def _judge_neuron(decision: Decision, instance: InstanceType, text: str) -> None:
    devices = parsers.parse_neuron_ls(text)
    decision.add("neuron devices", len(devices), instance.accelerators,
                 len(devices) == instance.accelerators)  # fmt: skip
    cores = sum(d.cores for d in devices)
    allowed = [instance.neuron_cores]
    if instance.accelerator_model == "Trainium2":
        # The catalog counts logical cores at the default LNC=2; a node run at LNC=1 shows every
        # physical core, eight per Trainium2 device, and the LNC degree is 1 or 2:
        # https://awsdocs-neuron.readthedocs-hosted.com/en/v2.28.1/about-neuron/arch/neuron-features/logical-neuroncore-config.html
        # https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/nki/get-started/about/lnc.html
        allowed.append(instance.neuron_cores * 2)
    wanted = " or ".join(str(n) for n in allowed)
    decision.add("neuron cores", cores, wanted, cores in allowed)


def decide(
    instance: InstanceType,
    evidence: Mapping[str, str | None],
    floors: Mapping[tuple[str, Check, int], Floor],
    efa: bool | None = None,
) -> Decision:
    """Judge one node from its evidence.

    Args:
        instance: the node's catalog entry (the facts it must match).
        evidence: file name to its text; a required file absent or ``None`` is missing.
        floors: from :func:`acceptance.floors.load_floors`.
        efa: whether the node's pool attaches EFA (default: whether the type has it); a pool
            without it is not asked for ``fi_info`` output.
    """
    decision = Decision()
    required = required_files(instance, efa)
    for name in required:
        if evidence.get(name) is None:
            decision.add(f"evidence {name}", "missing", "present", False)
    judges: dict[str, Callable[[str], None]] = {
        NVIDIA_SMI: lambda text: _judge_gpus(decision, instance, text),
        DCGM_DIAG: lambda text: _judge_dcgm(decision, text),
        NEURON_LS: lambda text: _judge_neuron(decision, instance, text),
        FI_INFO: lambda text: _judge_efa(decision, instance, text),
        ALL_REDUCE: lambda text: _judge_bandwidth(
            decision, "nccl all-reduce", parsers.parse_all_reduce_perf(text),
            floor_for(floors, instance.name, "nccl-all-reduce"),
        ),
        NCCOM_TEST: lambda text: _judge_bandwidth(
            decision, "nccom all-reduce", parsers.parse_nccom_test(text),
            floor_for(floors, instance.name, "nccom-all-reduce"),
        ),
    }  # fmt: skip
    wanted = set(required) | ({DCGM_DIAG} if instance.accelerator == "nvidia" else set())
    for name, judge in judges.items():
        text = evidence.get(name)
        if name not in wanted or text is None:
            continue
        try:
            judge(text)
        except parsers.UnusableEvidence as error:
            decision.unusable.append(str(error))
    return decision


def _judge_efa(decision: Decision, instance: InstanceType, text: str) -> None:
    devices = parsers.efa_devices(text)
    decision.add("efa interfaces", len(devices), instance.efa_interfaces,
                 len(devices) == instance.efa_interfaces)  # fmt: skip
