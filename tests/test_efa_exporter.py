"""The EFA exporter (issue 45, item 2): its samples on a fixture sysfs tree, what it does when a
device goes or a file cannot be read, its image's pins, and its DaemonSet on the EFA pools."""

from __future__ import annotations

import ast
import re
import shutil
import urllib.request
from decimal import Decimal
from pathlib import Path

import pytest
from prometheus_client import generate_latest, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from components import software, workloads
from components.metric_names import (
    EFA_EXPORTER_PORT,
    EFA_METRICS,
    NODE_EXPORTERS_NAMESPACE,
    RULE_PREFIX,
)
from components.node_pools import FSX_STARTUP_TAINT, POOL_LABEL
from components.observability import efa_exporter, sources
from components.platform_network import LISTENERS
from efa_exporter.__main__ import registry
from synth.jobs.daemonsets import daemonset_overhead
from synth.jobs.karpenter import node_pools
from synth.jobs.model import Stack, all_runnable, evaluate_jobs
from synth.jobs.view import StackView
from synth.run import StackResult
from synth.stackfile import REPOSITORY_ROOT
from tests import docs_pages
from tests.config_problems import MISSING, assert_reported, problems_of
from tests.conftest import stack_data

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "efa-sysfs"
"""A sysfs root: two EFA devices (efa_0, and rdmap16s27 as rdma-core's udev rules rename
them), each with port 1, and one mlx5 device that is not EFA (its driver is mlx5_core)."""
EFA_DEVICES = ("efa_0", "rdmap16s27")
RECIPE = REPOSITORY_ROOT / "images" / "efa-exporter"

Sample = tuple[str, frozenset[tuple[str, str]], float]


def _scrape(sysfs: Path) -> set[Sample]:
    """What the exporter serves for ``sysfs``, parsed by the client library's own parser."""
    text = generate_latest(registry(sysfs)).decode()
    return {
        (sample.name, frozenset(sample.labels.items()), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _value(samples: set[Sample], name: str, **labels: str) -> float | None:
    found = [v for n, ls, v in samples if n == name and ls == frozenset(labels.items())]
    assert len(found) <= 1
    return found[0] if found else None


def _expected(sysfs: Path, devices: tuple[str, ...]) -> set[Sample]:
    """The samples the fixture's files make, read here by path, without the exporter's code."""
    expected: set[Sample] = set()
    for device in devices:
        directory = sysfs / "class" / "infiniband" / device
        for name, files in EFA_METRICS.items():
            for path in files.split():
                if path.startswith("ports/<port>/"):
                    file = directory / "ports" / "1" / path.removeprefix("ports/<port>/")
                    labels = {"device": device, "port": "1"}
                elif path.startswith("hw_counters/"):
                    file = directory / path
                    labels = {"device": device}
                    if name.endswith("_verbs_errors_total"):
                        labels["operation"] = file.name.removesuffix("_err")
                else:
                    continue
                if file.exists():  # alloc_mr_err, get_dma_mr_err: kernel verbs builds only
                    value = float(file.read_text())
                    expected.add((name, frozenset(labels.items()), value))
        expected.add((f"{RULE_PREFIX}_efa_scrape_errors", frozenset({("device", device)}), 0.0))
    expected.add((f"{RULE_PREFIX}_efa_devices", frozenset(), float(len(devices))))
    return expected


def test_the_exporter_serves_exactly_the_fixtures_counters() -> None:
    samples = _scrape(FIXTURE)
    assert samples == _expected(FIXTURE, EFA_DEVICES)
    assert {name for name, _, _ in samples} == set(EFA_METRICS)
    # Spelled out once, so the expectation above is not only the exporter's own reading.
    assert _value(samples, f"{RULE_PREFIX}_efa_tx_bytes_total", device="efa_0", port="1") == (
        1001013
    )
    assert _value(
        samples, f"{RULE_PREFIX}_efa_retransmitted_packets_total", device="rdmap16s27", port="1"
    ) == float((FIXTURE / "class/infiniband/rdmap16s27/ports/1/hw_counters/retrans_pkts")
               .read_text())  # fmt: skip
    assert not any(("device", "mlx5_0") in labels for _, labels, _ in samples)
    assert _value(samples, f"{RULE_PREFIX}_efa_devices") == 2


def test_a_vanished_device_takes_its_series_and_a_bad_file_is_an_error(tmp_path: Path) -> None:
    sysfs = tmp_path / "sys"
    shutil.copytree(FIXTURE, sysfs, symlinks=True)
    (sysfs / "class" / "infiniband" / "rdmap16s27").unlink()
    counters = sysfs / "class" / "infiniband" / "efa_0" / "ports" / "1" / "hw_counters"
    (counters / "rx_bytes").write_text("not a number\n")
    (counters / "retrans_pkts").unlink()  # a driver before efa_linux_2.17.0 has none
    (counters / "rx_drops").unlink()  # every supported driver has it: an error
    (counters / "tx_pkts").unlink()
    (counters / "tx_pkts").mkdir()  # unreadable as a file (root reads any mode)
    samples = _scrape(sysfs)
    assert not any(("device", "rdmap16s27") in labels for _, labels, _ in samples)
    assert _value(samples, f"{RULE_PREFIX}_efa_devices") == 1
    # rx_bytes (garbage), rx_drops (missing) and tx_pkts (a directory); not retrans_pkts.
    assert _value(samples, f"{RULE_PREFIX}_efa_scrape_errors", device="efa_0") == 3
    for name in ("rx_bytes", "retransmitted_packets", "tx_packets", "rx_drops"):
        assert _value(samples, f"{RULE_PREFIX}_efa_{name}_total", device="efa_0", port="1") is None
    broken = {"rx_bytes", "retrans_pkts", "tx_pkts", "rx_drops"}
    expected = {
        s for s in _expected(FIXTURE, ("efa_0",))
        if not any(s[0] == n and EFA_METRICS[n].endswith(f"/{f}") for n in EFA_METRICS
                   for f in broken)
        and s[0] != f"{RULE_PREFIX}_efa_scrape_errors"
    }  # fmt: skip
    errors: Sample = (f"{RULE_PREFIX}_efa_scrape_errors", frozenset({("device", "efa_0")}), 3.0)
    assert samples == expected | {errors}
    # No infiniband class at all (no RDMA driver loaded): no device, and no failure.
    shutil.rmtree(sysfs / "class")
    assert _scrape(sysfs) == {(f"{RULE_PREFIX}_efa_devices", frozenset(), 0.0)}


def test_the_program_serves_its_metrics_over_http() -> None:
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry(FIXTURE))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics") as answer:
            text = answer.read().decode()
    finally:
        server.shutdown()
        thread.join(5)
    assert f"{RULE_PREFIX}_efa_devices 2.0" in text.splitlines()


# -- the image ----------------------------------------------------------------------------------


def test_the_image_pins_the_tested_client_and_carries_what_the_program_imports() -> None:
    def pin(path: Path) -> str:
        (version,) = re.findall(r"^prometheus-client==(\S+)$", path.read_text(), re.MULTILINE)
        return str(version)

    assert pin(RECIPE / "requirements.txt") == pin(REPOSITORY_ROOT / "requirements-dev.txt")
    assert software.efa_exporter_client_version() == pin(RECIPE / "requirements.txt")
    dockerfile = (RECIPE / "Dockerfile").read_text()
    base = software.recipe_pins("efa-exporter")["BASE_IMAGE"]
    assert re.fullmatch(r"python:\d+\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base), base
    assert "-r /opt/efa-exporter/requirements.txt" in dockerfile
    (user,) = re.findall(r"^USER (\d+):\1$", dockerfile, re.MULTILINE)
    assert int(user) == efa_exporter.EXPORTER_UID
    # Every first-party module the package imports is copied into the image.
    copied = set(re.findall(r"^COPY --from=program (.+) /opt/efa-exporter/", dockerfile, re.M))
    sources = " ".join(copied).split()
    imported = {
        node.module
        for path in (REPOSITORY_ROOT / "efa_exporter").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
    }
    first_party = {m for m in imported if m.split(".")[0] in {"components", "efa_exporter"}}
    for module in first_party:
        as_path = module.replace(".", "/")
        assert any(as_path == s.removesuffix(".py") or as_path.startswith(s + "/")
                   or as_path == s for s in sources), module  # fmt: skip
    assert software.built_tag("efa-exporter", "efa-exporter") == (
        f"{software.program_version()}-prometheus-client{pin(RECIPE / 'requirements.txt')}"
    )


# -- config ---------------------------------------------------------------------------------------


def test_an_efa_pool_needs_the_exporters_current_build() -> None:
    data = stack_data("prod")
    del data["observability"]["images"]["efaExporter"]
    assert_reported(
        data, "platform.observability.images.efaExporter", MISSING, "images/efa-exporter"
    )
    old = "r.example/efa-exporter:0.0.9-prometheus-client0.1.0@sha256:" + "a" * 64
    data["observability"]["images"]["efaExporter"] = old
    assert_reported(data, "platform.observability.images.efaExporter", old, ":0.1.0-prometheus")
    # Without an EFA pool nothing is needed (whatever else such a stack gets wrong).
    data = stack_data("prod")
    del data["observability"]
    for pool in data["nodePools"]:
        pool["efa"] = False
    paths = {problem.path for problem in problems_of(data)}
    assert "platform.observability.images.efaExporter" not in paths


# -- the DaemonSet and its monitor ----------------------------------------------------------------


def test_the_daemonset_runs_on_the_efa_pools_only_and_whole_node_pods_still_fit(
    synthesized: dict[str, StackResult],
) -> None:
    """Karpenter counts the exporter on exactly the EFA pools' NodePools (their Slurm shares
    too), tolerating every taint they carry; every path of ``synth jobs`` stays runnable."""
    result = synthesized["prod"]
    config = result.config
    view = StackView.from_records(result.records)
    (daemonset,) = [
        o for o in view.of_kind("DaemonSet") if o["metadata"]["name"] == efa_exporter.NAME
    ]
    assert daemonset["metadata"]["namespace"] == NODE_EXPORTERS_NAMESPACE
    stack = Stack(view)
    (exporter,) = [p for p in stack.plugins
                   if p.release == f"DaemonSet {NODE_EXPORTERS_NAMESPACE}/efa-exporter"]  # fmt: skip
    efa = {pool.name for pool in config.node_pools if pool.uses_efa}
    on = {pool.name for pool in node_pools(view) if exporter.runs_on(pool)}
    assert efa and on and len(on) < len(node_pools(view)), "prod has EFA and other pools"
    pools = {name for pool in node_pools(view) if pool.name in on
             for name in pool.labels.get(POOL_LABEL, set())}  # fmt: skip
    assert pools == efa
    assert exporter.requests == {
        "cpu": Decimal(workloads.EFA_EXPORTER_CPU_MILLIS) / 1000,
        "memory": Decimal(workloads.EFA_EXPORTER_MEMORY_MIB * 2**20),
    }
    without = [p for p in stack.plugins if p is not exporter]
    for pool in node_pools(view):
        added = (
            daemonset_overhead(pool, stack.plugins)["memory"]
            - daemonset_overhead(pool, without)["memory"]
        )
        assert added == (exporter.requests["memory"] if pool.name in on else 0), pool.name
    assert all_runnable(evaluate_jobs(view))


def test_prometheus_scrapes_the_exporter_with_node_and_pool(
    synthesized: dict[str, StackResult],
) -> None:
    manifests = synthesized["prod"].written.directory / "manifests"
    # The monitor stays beside Prometheus' other monitors and selects the exporters' namespace.
    monitor = (manifests / "PodMonitor.monitoring.efa-exporter.yaml").read_text()
    spec = efa_exporter.exporter_podmonitor()
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["port"] == efa_exporter.PORT_NAME and "efa-exporter" in monitor
    pod = efa_exporter.exporter_daemonset([], image="i")["template"]["spec"]
    (container,) = pod["containers"]
    assert container["ports"] == [
        {"name": endpoint["port"], "containerPort": EFA_EXPORTER_PORT, "protocol": "TCP"}
    ]
    # Every node exporter's relabelings: node and NodePool, the exporter pod's labels dropped.
    assert endpoint["relabelings"] == sources.node_relabelings()
    targets = {r.get("targetLabel"): r.get("sourceLabels") for r in endpoint["relabelings"]}
    assert targets["node"] == ["__meta_kubernetes_pod_node_name"]
    assert targets["nodepool"] == ["__meta_kubernetes_node_label_karpenter_sh_nodepool"]
    assert spec["attachMetadata"] == {"node": True}
    assert spec["namespaceSelector"] == {"matchNames": [NODE_EXPORTERS_NAMESPACE]}
    # The exporters' namespace admits the monitoring namespace's Prometheus to the port only.
    (listener,) = [li for li in LISTENERS[NODE_EXPORTERS_NAMESPACE] if li.port == EFA_EXPORTER_PORT]
    assert listener.clients == ("monitoring",)
    assert not [li for li in LISTENERS["monitoring"] if li.port == EFA_EXPORTER_PORT]
    # As critical as the other node exporters, and tolerating the same taints (FSx's too).
    assert pod["priorityClassName"] == sources.NODE_EXPORTER_PRIORITY_CLASS
    assert pod["tolerations"] == sources.exporter_tolerations([])
    assert {"key": FSX_STARTUP_TAINT["key"], "operator": "Exists",
            "effect": "NoExecute"} in pod["tolerations"]  # fmt: skip
    # The host's sysfs, read-only; no privilege, no token.
    assert pod["volumes"] == [{"name": "sys", "hostPath": {"path": "/sys", "type": "Directory"}}]
    assert container["volumeMounts"][0]["readOnly"] is True
    assert container["args"][:2] == ["--sysfs", efa_exporter.SYSFS_MOUNT]
    assert pod["automountServiceAccountToken"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize("stack", ["dev", "staging"])
def test_every_stack_with_an_efa_pool_runs_the_exporter(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    view = StackView.from_records(result.records)
    names = {o["metadata"]["name"] for o in view.of_kind("DaemonSet")}
    assert (efa_exporter.NAME in names) == any(p.uses_efa for p in result.config.node_pools)


def test_the_concept_page_lists_every_metric_and_what_it_reads() -> None:
    text = docs_pages.section(docs_pages.page("concepts/observability.md"), "## The EFA exporter")
    for name, files in EFA_METRICS.items():
        assert f"`{name}`" in text, name
        if files.startswith(("ports/", "hw_counters/")):
            assert f"| `{name}` | `{files}` |" in text, name
