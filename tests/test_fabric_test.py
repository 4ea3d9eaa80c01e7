"""The fabric test on demand and the baseline command (issue 44, item 5).

The runtime is checked as built (whole nodes, the pool's taints but not the acceptance taint,
the platform queue, the command and floor) and as ``synth jobs`` judges it on the staging stack;
the baseline command on the cited all_reduce_perf sample of tests/test_acceptance_decide.py and
on a copy of the staging stack file.
"""

from __future__ import annotations

import copy
import difflib
import io
import re
from pathlib import Path, PurePosixPath
from typing import Any

from acceptance.baseline import measure
from acceptance.cli import main as acceptance_main
from components import fabric_test, software
from components.config import PlatformConfig, parse_platform_config
from components.health_marks import ACCEPTANCE_TAINT_KEY
from components.node_pools import accelerator_taint
from components.platform import fabric_test_pools
from components.scheduling import PLATFORM_QUEUE, QUEUE_API, platform_queue_spec
from components.trainer import MPI_SSH_PORT, RUNTIME_API, RUNTIME_KIND
from components.workloads import node_resources
from synth.baseline import main as baseline_main
from synth.jobs.model import evaluate_jobs
from synth.jobs.view import StackView
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.conftest import stack_data
from tests.project_copies import PLATFORM_KEY, project_copy
from tests.team_objects import fabric_runtimes
from tests.test_acceptance_decide import ALL_REDUCE_END, ALL_REDUCE_SAMPLE, nccom_test

IMAGES = {
    "nvidia": "222233334444.dkr.ecr.us-east-2.amazonaws.com/acceptance@sha256:" + "a" * 64,
    "neuron": "222233334444.dkr.ecr.us-east-2.amazonaws.com/acceptance@sha256:" + "b" * 64,
}


def _staging(edit: Any = None) -> PlatformConfig:
    raw = copy.deepcopy(stack_data("staging"))
    raw.setdefault("acceptance", {})["images"] = dict(IMAGES)
    if edit is not None:
        edit(raw)
    return parse_platform_config(raw, stack="staging")


def _without_images(raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of a stack file's platform data that names no acceptance image (which only a
    stack without the acceptance gate may do)."""
    raw = copy.deepcopy(raw)
    raw["acceptance"] = {"enabled": False}
    return raw


def _pods(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        job["name"]: job["template"]["spec"]["template"]["spec"]
        for job in spec["template"]["spec"]["replicatedJobs"]
    }


def test_each_efa_pool_gets_a_whole_node_runtime_in_the_platform_queue() -> None:
    config = _staging()
    tested = fabric_test_pools(config)
    assert [pool.name for pool, _ in tested] == ["p5", "trn1"]
    for pool, image in tested:
        spec = fabric_test.fabric_runtime_spec(pool, image=image)
        assert spec["template"]["metadata"]["annotations"] == {
            "scheduling.volcano.sh/queue-name": PLATFORM_QUEUE
        }
        pods = _pods(spec)
        assert set(pods) == {"node", "launcher"}
        for pod in pods.values():
            (container,) = pod["containers"]
            assert container["image"] == image
            # every accelerator, EFA interface and huge page, as the teams' runtimes ask
            assert container["resources"] == node_resources(pool)
            tolerated = {t["key"] for t in pod["tolerations"]}
            assert tolerated == {accelerator_taint(pool)["key"], *(t.key for t in pool.taints)}
            assert ACCEPTANCE_TAINT_KEY not in tolerated
            assert pod["serviceAccountName"] == fabric_test.SERVICE_ACCOUNT
    p5, trn1 = (fabric_test.fabric_runtime_spec(p, image=i) for p, i in tested)
    script = _pods(p5)["launcher"]["containers"][0]["command"][-1]
    # 2 nodes x 8 GPUs, one rank each; held to the shipped two-node p5 figure
    assert "/bin/mpirun --np 16 " in script and "all_reduce_perf -b 8 -e 16G" in script
    # NCCL over the EFA plugin or not at all, and the ranks on the worker get its settings
    assert "export NCCL_NET_PLUGIN=ofi\nexport NCCL_NET=Libfabric\n" in script
    for name in ("PATH", "LD_LIBRARY_PATH", "FI_PROVIDER", "NCCL_NET_PLUGIN", "NCCL_NET"):
        assert f" -x {name} " in script, name
    assert "--nodes 2" in script and "--floor-gbps 437.8 " in script
    script = _pods(trn1)["launcher"]["containers"][0]["command"][-1]
    assert "nccom-test -r 64 -N 2 " in script and "--hosts-file /tmp/hosts" in script
    # nccom-test writes its own mpirun line: Open MPI's variable list forwards what ranks need
    (env_list,) = [line for line in script.splitlines() if "OMPI_MCA_mca_base_env_list" in line]
    assert {"PATH", "FI_PROVIDER", "NEURON_RT_ROOT_COMM_ID"} <= set(
        env_list.split("=", 1)[1].strip("'").split(";")
    )
    # No images: no runtime (the platform queue is sized from the tested pools only).
    bare = parse_platform_config(_without_images(stack_data("staging")), stack="staging")
    assert fabric_test_pools(bare) == []
    # dev's trn1 pool leaves Kubernetes one node beside Slurm's share: no 2-node test offered
    dev = copy.deepcopy(stack_data("dev"))
    dev.setdefault("acceptance", {})["images"] = dict(IMAGES)
    assert fabric_test_pools(parse_platform_config(dev, stack="dev")) == []


def test_a_measured_two_node_baseline_replaces_the_shipped_floor() -> None:
    entry = {
        "instanceType": "p5.48xlarge", "check": "nccl-all-reduce", "nodes": 2,
        "floorGbps": 401.5, "of": "16 GiB", "source": "measured: fabric-p5-1 on 2026-12-01",
    }  # fmt: skip
    config = _staging(lambda raw: raw["nodePools"][0].update(acceptance={"baselines": [entry]}))
    floor = fabric_test.pool_floor(config.node_pools[0])
    assert (floor.floor_gbps, floor.source) == (401.5, entry["source"])
    spec = fabric_test.fabric_runtime_spec(config.node_pools[0], image=IMAGES["nvidia"])
    command = _pods(spec)["launcher"]["containers"][0]["command"][-1]
    assert "--floor-gbps 401.5 " in command and "--floor-size-bytes" not in command
    # The shipped p5 floor was published at 2 GiB: the run is compared there, not at 16 GiB.
    shipped = fabric_test.pool_floor(_staging().node_pools[0])
    assert (shipped.floor_gbps, shipped.size_bytes) == (437.8, 2 << 30)
    spec = fabric_test.fabric_runtime_spec(_staging().node_pools[0], image=IMAGES["nvidia"])
    command = _pods(spec)["launcher"]["containers"][0]["command"][-1]
    assert command.endswith("--floor-gbps 437.8 --floor-source " + _quoted_source(shipped.source)
                            + f" --floor-size-bytes {2 << 30}")  # fmt: skip
    # A measured baseline records the size it was taken at, and the run is held there.
    config = _staging(lambda raw: raw["nodePools"][0].update(
        acceptance={"baselines": [{**entry, "sizeBytes": 16 << 30}]}))  # fmt: skip
    assert fabric_test.pool_floor(config.node_pools[0]).size_bytes == 16 << 30


def _quoted_source(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _with_fabric_test(result: StackResult, capability: dict[str, int]) -> StackView:
    view = StackView.from_records(result.records)
    # the stack's own fabric objects make way for these (their queue sized as asked)
    objects = [
        copy.deepcopy(o)
        for o in view.objects
        if not (
            (o["kind"] == "Queue" and o["metadata"]["name"] == PLATFORM_QUEUE)
            or (o["kind"] == "Namespace" and o["metadata"]["name"] == fabric_test.NAMESPACE)
            or o["metadata"].get("namespace") == fabric_test.NAMESPACE
        )
    ]
    config = _staging()
    objects.append(
        {
            "apiVersion": QUEUE_API,
            "kind": "Queue",
            "metadata": {"name": PLATFORM_QUEUE},
            "spec": platform_queue_spec(capability),
        }
    )
    objects.append(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": fabric_test.NAMESPACE}}
    )
    for pool, image in fabric_test_pools(config):
        objects.append(
            {
                "apiVersion": RUNTIME_API,
                "kind": RUNTIME_KIND,
                "metadata": {
                    "name": fabric_test.runtime_name(pool),
                    "namespace": fabric_test.NAMESPACE,
                },
                "spec": fabric_test.fabric_runtime_spec(pool, image=image),
            }
        )
    return StackView(objects, copy.deepcopy(view.releases), view.kustomizations)


def test_synth_jobs_lists_the_fabric_test_as_a_path_that_can_start(
    synthesized: dict[str, StackResult],
) -> None:
    config = _staging()
    capability = fabric_test.platform_queue_capability(
        [pool for pool, _ in fabric_test_pools(config)]
    )
    assert capability == {"nvidia.com/gpu": 16, "aws.amazon.com/neuron": 32}
    view = _with_fabric_test(synthesized["staging"], capability)
    reports = {r.runtime: r for r in evaluate_jobs(view) if r.kind == "fabric-test"}
    assert set(reports) == {"fabric-p5", "fabric-trn1"}
    for report in reports.values():
        assert (report.runnable, report.max_nodes, report.team) == (True, 2, PLATFORM_QUEUE)
    # A queue that holds one node's GPUs cannot start the 2-node gang: the model says so.
    view = _with_fabric_test(synthesized["staging"], {**capability, "nvidia.com/gpu": 8})
    (p5,) = [r for r in evaluate_jobs(view) if r.runtime == "fabric-p5"]
    assert not p5.runnable and p5.max_nodes < 2


def test_the_stacks_fabric_runtimes_hold_nothing_of_a_teams(
    synthesized: dict[str, StackResult],
) -> None:
    """What the team tests leave out (tests/team_objects.py) keeps rules of its own: the
    platform's account with no token and no role, no claim of any team's storage, its own
    queue, and no restart (a failed run is read, not retried)."""
    result = synthesized["staging"]
    runtimes = fabric_runtimes(result.records)
    assert sorted(r.inputs["metadata"]["name"] for r in runtimes) == ["fabric-p5", "fabric-trn1"]
    (account,) = [
        r
        for r in result.records
        if r.type == "kubernetes:core/v1:ServiceAccount"
        and r.inputs["metadata"]["namespace"] == fabric_test.NAMESPACE
    ]
    assert account.inputs["automountServiceAccountToken"] is False
    assert not [
        r
        for r in result.records
        if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"
        and r.inputs["namespace"] == fabric_test.NAMESPACE
    ]
    for runtime in runtimes:
        spec = runtime.inputs["spec"]
        annotations = spec["template"]["metadata"]["annotations"]
        assert annotations == {"scheduling.volcano.sh/queue-name": PLATFORM_QUEUE}
        jobset = spec["template"]["spec"]
        assert jobset["failurePolicy"] == {"maxRestarts": 0}
        for job in jobset["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]["spec"]
            assert pod["serviceAccountName"] == fabric_test.SERVICE_ACCOUNT
            assert not [v for v in pod.get("volumes", []) if "persistentVolumeClaim" in v]
            assert "supplementalGroups" not in pod.get("securityContext", {})


def test_the_platform_queue_lends_nothing_it_is_owed() -> None:
    spec = platform_queue_spec({"nvidia.com/gpu": 16})
    # nothing deserved or guaranteed: all it holds is borrowed, and team queues reclaim it
    assert (spec["deserved"], spec["guarantee"], spec["reclaimable"]) == (
        {},
        {"resource": {}},
        True,
    )
    assert spec["capability"] == {"nvidia.com/gpu": "16"}


FULL_RUN = ALL_REDUCE_SAMPLE + ALL_REDUCE_END


def test_baseline_reports_every_size_and_sets_the_floor_below_the_largest(tmp_path: Path) -> None:
    measurement = measure(FULL_RUN, check="nccl-all-reduce", instance_type="p5.48xlarge", nodes=2)
    sizes = [(row.size_bytes >> 30, row.busbw_gbps) for row in measurement.sizes]
    # the cited rows, each at the lower of out-of-place and in-place
    assert sizes == [(1, 436.95), (2, 442.06), (4, 464.33), (8, 478.95), (16, 487.09)]
    assert measurement.floor_gbps == 438.3  # 487.09 x 0.9, 0.1 down
    output = tmp_path / "fabric.txt"
    output.write_text(FULL_RUN)
    common = ["baseline", "--output", str(output), "--check", "nccl-all-reduce",
              "--instance-type", "p5.48xlarge"]  # fmt: skip
    out = io.StringIO()
    assert acceptance_main([*common, "--floor-gbps", "437.8"], out) == 0
    assert "pass: 2-node bus bandwidth: 487.09 GB/s at 16 GiB, want >= 437.8" in out.getvalue()
    assert acceptance_main([*common, "--floor-gbps", "500"], io.StringIO()) == 1
    # A floor taken at 2 GiB holds the run at 2 GiB (442.06), not at its largest size (487.09).
    at_2gib = [*common, "--floor-gbps", "450", "--floor-size-bytes", str(2 << 30)]
    out = io.StringIO()
    assert acceptance_main(at_2gib, out) == 1
    assert "fail: 2-node bus bandwidth: 442.06 GB/s at 2 GiB, want >= 450" in out.getvalue()
    out = io.StringIO()
    assert acceptance_main([*common, "--floor-gbps", "1", "--floor-size-bytes", "3"], out) == 2
    assert "no row at 3 B" in out.getvalue()
    output.write_text(ALL_REDUCE_SAMPLE)  # stopped before its closing lines: no floor from it
    out = io.StringIO()
    assert acceptance_main(common, out) == 2 and "did not finish" in out.getvalue()
    neuron = measure(nccom_test(busbw=120.0), check="nccom-all-reduce",
                     instance_type="trn1.32xlarge", nodes=2)  # fmt: skip
    assert [r.size_bytes for r in neuron.sizes] == [33554432, 1073741824]
    assert neuron.floor_gbps == 108.0


def test_synth_baseline_writes_one_entry_and_keeps_the_stack_file(tmp_path: Path) -> None:
    project = project_copy(tmp_path, "staging")
    path = project / "stacks" / "Pulumi.staging.yaml"
    before = path.read_text()
    output = tmp_path / "fabric.txt"
    output.write_text(FULL_RUN)
    args = ["staging", "--pool", "p5", "--output", str(output), "--check", "nccl-all-reduce",
            "--project-dir", str(project), "--write"]  # fmt: skip
    assert baseline_main([*args, "--run", "fabric-p5-1"]) == 0
    assert baseline_main([*args, "--run", "fabric-p5-2", "--margin", "0.05"]) == 0
    after = path.read_text()
    changes = [d for d in difflib.ndiff(before.splitlines(), after.splitlines()) if d[:1] in "+-"]
    # only added lines: every comment and line of the file is where it was
    assert all(d.startswith("+ ") for d in changes) and len(changes) == 3
    raw = load_yaml(after)["config"][PLATFORM_KEY]
    config = parse_platform_config(raw, stack="staging")
    (baseline,) = config.node_pools[0].acceptance.baselines
    assert (baseline.nodes, baseline.floor_gbps, baseline.size_bytes) == (2, 462.7, 16 << 30)
    assert baseline.source.startswith("measured: fabric-p5-2 on ")
    assert baseline_main(["staging", "--pool", "nope", "--output", str(output), "--check",
                          "nccl-all-reduce", "--project-dir", str(project)]) == 2  # fmt: skip


def test_the_launcher_runs_the_mpi_all_reduce_perf_the_image_installs() -> None:
    """One path, written once: the recipe's ARG, which both its COPY and the launcher read.

    The one-node check runs ``all_reduce_perf`` (no MPI) from PATH; the fabric test needs the MPI
    build, installed elsewhere so PATH keeps finding the check's.
    """
    recipe = (software.IMAGES_DIR / fabric_test.IMAGE_RECIPE / "Dockerfile").read_text()
    (path,) = re.findall(rf"^ARG {fabric_test.MPI_ALL_REDUCE_PERF_ARG}=(\S+)$", recipe, re.M)
    assert fabric_test.mpi_all_reduce_perf() == path
    # the MPI stage's binary is copied to the ARG, and the final stage checks it is there
    assert re.search(
        rf"^COPY --from=nccl-tests /src/build-mpi/all_reduce_perf \${{{fabric_test.MPI_ALL_REDUCE_PERF_ARG}}}$",
        recipe, re.M,
    )  # fmt: skip
    assert f'"${{{fabric_test.MPI_ALL_REDUCE_PERF_ARG}}}"' in recipe.split("tools=(", 1)[1]
    # off the PATH the image sets, so the check's all_reduce_perf is the one found there
    (path_line,) = re.findall(r"^ENV PATH=(\S+)", recipe, re.M)
    assert PurePosixPath(path).parent.as_posix() not in path_line.split(":")
    config = _staging()
    (p5,) = [pool for pool, _ in fabric_test_pools(config) if pool.name == "p5"]
    script = fabric_test.nccl_script(p5, fabric_test.pool_floor(p5))
    pins = software.recipe_pins(fabric_test.IMAGE_RECIPE)
    (mpirun,) = [line for line in script.splitlines() if "mpirun " in line]
    # the installation's own mpirun, by its path: Open MPI then finds orted on the worker
    assert mpirun.startswith(f"{pins['OPEN_MPI_HOME']}/bin/mpirun --np 16 ")
    assert f" {path} -b 8 " in mpirun
    assert "${OPEN_MPI_HOME}/bin" in path_line.split(":")  # nccom-test's mpirun
    # Trainer's workers serve SSH on the port the recipe gives mpiuser's sshd
    assert pins["MPI_SSH_PORT"] == str(MPI_SSH_PORT)
