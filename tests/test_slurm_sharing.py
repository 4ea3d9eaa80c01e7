"""Slurm as a service many teams share (issue 41, items 1 to 4), on every stack that runs Slurm.

What is checked, and where Slurm says it:

* a finite MaxTime and DefaultTime per partition, and a backfill window at least as long, so a
  partition-sized gang is reserved (SchedMD/slurm slurm-26-05-3-1
  src/plugins/sched/backfill/backfill.c: a job with no limit ends a year away; a start after
  the window gets no reservation), and a ``--time`` over MaxTime refused at sbatch;
* jobs share nodes by what they ask for (DefMemPerGPU, DefCpuPerGPU, DefMemPerCPU:
  src/plugins/select/cons_tres/job_test.c), and the autoscaler's busy nodes follow;
* each job's own ``/tmp`` and ``/dev/shm`` in its own PID namespace (namespace.yaml(5));
* PrivateData in slurm.conf and slurmdbd.conf, with the metrics still open to the scraper
  (src/common/read_config.c).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Final

import lupa.lua53
import pytest

from components.config import parse_platform_config
from components.slurm.conf import node_names
from components.slurm.directory import parse_teams_table
from components.slurm.sharing import (
    DAEMON_HEADROOM_MIB,
    DEFAULT_BACKFILL_SLOTS,
    JOB_NAMESPACE_ANNOTATION,
    backfill_window,
    neuron_device_memory_mib,
    parse_partition_line,
    slurm_minutes,
    slurm_time,
)
from components.workloads import whole_node_memory_mib
from synth.__main__ import main as synth_main
from synth.diff import diff_syntheses, load_synthesis, render, slurm_namespace_changes
from synth.jobs import slurm as jobs_slurm
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests import component_runs as parts
from tests import docs_pages
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data

NODE_SET: Final = "kubernetes:slinky.slurm.net/v1beta1:NodeSet"
RELEASE: Final = "kubernetes:helm.sh/v3:Release"
CONFIG_MAP: Final = "kubernetes:core/v1:ConfigMap"
NO_VAL: Final = 0xFFFFFFFE
INFINITE: Final = 0xFFFFFFFF
"""Slurm's NO_VAL and INFINITE (slurm.h), as src/lua/slurm_lua.c gives them to job_submit.lua."""


def _values(result: StackResult | ProgramRun) -> dict[str, Any]:
    (release,) = [r for r in result.records if r.type == RELEASE and r.inputs["name"] == "slurm"]
    values: dict[str, Any] = release.inputs["values"]
    return values


def _partitions(result: StackResult | ProgramRun) -> dict[str, dict[str, str]]:
    return {
        r.inputs["metadata"]["name"]: parse_partition_line(r.inputs["spec"]["partition"]["config"])
        for r in result.records
        if r.type == NODE_SET
    }


def _conf(result: StackResult | ProgramRun) -> dict[str, Any]:
    conf: dict[str, Any] = _values(result)["controller"]["extraConfMap"]
    return conf


def _words(value: Any) -> list[str]:
    return value if isinstance(value, list) else str(value).split(",")


# -- 1. big gangs start ----------------------------------------------------------------------


def test_slurm_times_read_as_slurm_reads_them() -> None:
    """parse_time.c's forms, and the form we write."""
    assert slurm_minutes("2-00:00:00") == 2880
    assert slurm_minutes("2-12") == 3600
    assert slurm_minutes("1-00:30") == 1470
    assert slurm_minutes("04:00:00") == 240
    assert slurm_minutes("90") == 90
    assert slurm_minutes("90:30") == 91  # seconds round up
    assert slurm_minutes("UNLIMITED") is None and slurm_minutes("infinite") is None
    with pytest.raises(ValueError, match="not a Slurm time limit"):
        slurm_minutes("2 days")
    for hours in (1, 4, 23, 24, 48, 720):
        assert slurm_minutes(slurm_time(hours)) == hours * 60


@pytest.mark.parametrize("stack", STACKS)
def test_every_partition_has_finite_limits_within_backfills_horizon(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    raw = {ns["pool"]: ns for ns in stack_data(stack)["slurm"]["nodeSets"]}
    partitions = _partitions(synthesized[stack])
    assert set(partitions) == set(raw)
    parameters = _words(_conf(synthesized[stack])["SchedulerParameters"])
    window = backfill_window(",".join(parameters))
    resolution = int(next(p for p in parameters if p.startswith("bf_resolution=")).split("=")[1])
    longest = 0
    for name, settings in partitions.items():
        maximum = slurm_minutes(settings["MaxTime"])
        default = slurm_minutes(settings["DefaultTime"])
        assert maximum is not None and default is not None, name
        assert maximum == raw[name].get("maxTimeHours", 48) * 60
        assert default <= maximum
        longest = max(longest, maximum)
    # Backfill plans two of the longest MaxTimes ahead (the running jobs, then one round of
    # higher-priority reservations), within Slurm's 30 days, keeping its default number of
    # slots in the plan; it tries a bounded number of one user's jobs per pass.
    assert window == min(2 * longest, 43200) and window >= longest
    assert window * 60 / resolution <= DEFAULT_BACKFILL_SLOTS
    assert "bf_continue" in parameters and "bf_max_job_assoc=50" in parameters


def test_a_gang_waits_for_ever_without_a_limit_or_a_horizon(
    synthesized: dict[str, StackResult],
) -> None:
    """The jobs model's reading of backfill.c: what the stack sets is what makes gangs start."""
    settings = _partitions(synthesized["prod"])["p5en"]
    window = backfill_window(",".join(_words(_conf(synthesized["prod"])["SchedulerParameters"])))
    blocking, notes = jobs_slurm.limits_reasons(settings, nodes=4, window=window, node=None,
                                                teams=[])  # fmt: skip
    assert blocking == []
    assert any("a gang of up to 4 node(s) keeps its reservation" in note for note in notes)
    # A window of one MaxTime holds the running jobs' ends only.
    blocking, notes = jobs_slurm.limits_reasons(settings, nodes=4, window=2880, node=None,
                                                teams=[])  # fmt: skip
    assert blocking == [] and any("can push its start past the window" in n for n in notes)
    unlimited = {**settings, "MaxTime": "UNLIMITED"}
    blocking, _ = jobs_slurm.limits_reasons(unlimited, nodes=4, window=window, node=None, teams=[])
    assert blocking and "backfill takes a job without a limit to end a year away" in blocking[0]
    # Slurm's default window (a day) is shorter than the 48-hour MaxTime.
    blocking, _ = jobs_slurm.limits_reasons(settings, nodes=4, window=1440, node=None, teams=[])
    assert blocking == [
        "MaxTime (48 h) is beyond backfill's horizon (bf_window 24 h): a gang of 4 node(s) can "
        "wait for ever behind other jobs, since its start is planned after the window and "
        "nothing is reserved"
    ]


def _job_submit(result: StackResult | ProgramRun) -> Any:
    runtime = lupa.lua53.LuaRuntime()
    runtime.execute(
        f"""
        slurm = {{ SUCCESS = 0, ERROR = -1, NO_VAL = {NO_VAL}, INFINITE = {INFINITE},
                   messages = {{}} }}
        function slurm.log_user(format, ...)
          table.insert(slurm.messages, string.format(format, ...))
        end
        """
    )
    runtime.execute(_values(result)["configFiles"]["job_submit.lua"])
    return runtime


def _submit(runtime: Any, **job: Any) -> tuple[int, list[str]]:
    runtime.execute("slurm.messages = {}")
    rc = runtime.globals().slurm_job_submit(runtime.table_from(job), None, 1000)
    return int(rc), list(runtime.globals().slurm.messages.values())


@pytest.mark.parametrize("stack", STACKS)
def test_a_job_longer_than_its_partitions_max_time_is_refused_at_sbatch(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Slurm would accept it and leave it pending as PartitionTimeLimit for ever."""
    runtime = _job_submit(synthesized[stack])
    for name, settings in _partitions(synthesized[stack]).items():
        longest = slurm_minutes(settings["MaxTime"])
        assert longest is not None
        assert _submit(runtime, partition=name, min_nodes=1, time_limit=longest) == (0, [])
        assert _submit(runtime, partition=name, time_limit=NO_VAL) == (0, [])  # DefaultTime
        rc, messages = _submit(runtime, partition=name, min_nodes=1, time_limit=longest + 1)
        assert (rc, messages) == (-1, [
            f"partition {name} runs jobs for at most {longest} minutes (MaxTime); the job asks "
            f"for {longest + 1} minutes"
        ])  # fmt: skip
        rc, messages = _submit(runtime, partition=name, time_limit=INFINITE)
        assert rc == -1 and messages[0].endswith("the job asks for no limit")
        # --time-min within MaxTime: Slurm runs it, cut to MaxTime (job_mgr.c, time_min)
        flexible = {"partition": name, "time_limit": longest + 60, "time_min": longest}
        assert _submit(runtime, **flexible) == (0, [])
        assert _submit(runtime, **{**flexible, "time_min": longest + 1})[0] == -1
        assert _submit(runtime, **{**flexible, "time_min": NO_VAL})[0] == -1
    # scontrol update is held to the same rule
    name, settings = next(iter(_partitions(synthesized[stack]).items()))
    longest = slurm_minutes(settings["MaxTime"])
    assert longest is not None
    record = runtime.table_from({"partition": name})
    modify = runtime.globals().slurm_job_modify
    assert int(modify(runtime.table_from({"time_limit": longest + 60}), record, None, 0)) == -1
    assert int(modify(runtime.table_from({"time_limit": longest}), record, None, 0)) == 0


def test_config_sets_each_partitions_limits(run_component: RunComponent) -> None:
    data = stack_data("prod")
    data["slurm"]["nodeSets"][1].update(maxTimeHours=168, defaultTimeHours=12, exclusiveUser=True)
    run = run_component(parts.slurm, data, "prod")
    name = data["slurm"]["nodeSets"][1]["pool"]
    settings = _partitions(run)[name]
    assert settings["MaxTime"] == "7-00:00:00" and settings["DefaultTime"] == "12:00:00"
    assert settings["ExclusiveUser"] == "YES"
    assert "ExclusiveUser" not in _partitions(run)[data["slurm"]["nodeSets"][0]["pool"]]
    parameters = _words(_conf(run)["SchedulerParameters"])
    assert "bf_window=20160" in parameters and "bf_resolution=840" in parameters
    # The teams' QOS default to the longest partition's MaxTime.
    (table,) = [r for r in run.records
                if r.type == CONFIG_MAP and r.inputs["metadata"]["name"] == "slurm-teams"]  # fmt: skip
    assert {row.max_wall_minutes for row in parse_teams_table(table.inputs["data"]["teams"])} == {
        10080
    }


def test_team_qos_limits_come_from_config(run_component: RunComponent) -> None:
    data = stack_data("prod")
    data["teams"][0]["slurm"] = {"maxWallHours": 24, "gpus": 16}
    run = run_component(parts.slurm, data, "prod")
    (table,) = [r for r in run.records
                if r.type == CONFIG_MAP and r.inputs["metadata"]["name"] == "slurm-teams"]  # fmt: skip
    rows = {row.name: row for row in parse_teams_table(table.inputs["data"]["teams"])}
    limited = rows[data["teams"][0]["name"]]
    assert (limited.max_wall_minutes, limited.grp_tres) == (1440, "gres/gpu=16,gres/neuron=-1")
    other = rows[data["teams"][1]["name"]]
    assert (other.max_wall_minutes, other.grp_tres) == (2880, "gres/gpu=-1,gres/neuron=-1")
    assert "qos" in _conf(run)["AccountingStorageEnforce"].split(",")


# -- 2. jobs share nodes by what they ask for --------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_a_one_gpu_job_takes_one_gpus_share_and_eight_share_a_node(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    config = parse_platform_config(stack_data(stack))
    partitions = _partitions(synthesized[stack])
    checked = 0
    for node_set in config.slurm.node_sets:
        pool = config.pool(node_set.pool)
        assert pool is not None
        settings = partitions[pool.name]
        instance = pool.instance
        memory = whole_node_memory_mib(pool)  # what the operator passes as POD_MEMORY
        node = jobs_slurm.SlurmNode(
            cpus=instance.vcpu,
            memory_mib=memory,
            gpus=instance.accelerators if instance.accelerator == "nvidia" else 0,
        )
        assert int(settings["DefMemPerCPU"]) * instance.vcpu <= memory - DAEMON_HEADROOM_MIB
        if not node.gpus:
            # Neuron has no per-device default: memory by CPUs, the whole node with --exclusive.
            assert "DefMemPerGPU" not in settings
            continue
        checked += 1
        # Eight defaults fill the node but leave slurmd, sshd and SSSD their headroom.
        left = memory - int(settings["DefMemPerGPU"]) * node.gpus
        assert DAEMON_HEADROOM_MIB <= left < DAEMON_HEADROOM_MIB + node.gpus
        cpus, share = jobs_slurm.allocation(settings, node, jobs_slurm.SlurmJob(gpus=1))
        assert (cpus, share) == (
            instance.vcpu // node.gpus,
            (memory - DAEMON_HEADROOM_MIB) // node.gpus,
        )
        one_gpu = jobs_slurm.SlurmJob(gpus=1)
        # What the autoscaler's demand counts once they run: allocated plus mixed nodes.
        assert jobs_slurm.busy_nodes(settings, node, [one_gpu] * node.gpus) == 1
        assert jobs_slurm.busy_nodes(settings, node, [one_gpu] * (node.gpus + 1)) == 2
        # Without the defaults each of them holds a whole node (the node's memory).
        bare = {k: v for k, v in settings.items() if not k.startswith("Def")}
        assert jobs_slurm.busy_nodes(bare, node, [one_gpu] * node.gpus) == node.gpus
        # --mem still decides when given, and a CPU-only job takes memory by its CPUs.
        assert jobs_slurm.allocation(settings, node, jobs_slurm.SlurmJob(gpus=1, memory_mib=1024))[1] == 1024  # fmt: skip
        assert jobs_slurm.allocation(settings, node, jobs_slurm.SlurmJob(cpus=4)) == (
            4, 4 * int(settings["DefMemPerCPU"])
        )  # fmt: skip
    assert checked, "no GPU node set in the stack"


# -- 3. a job's scratch is its own ------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_each_job_gets_its_own_tmp_and_shm_in_its_own_pid_namespace(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    conf = _conf(synthesized[stack])
    assert conf["NamespaceType"] == "namespace/linux"
    assert conf["PrologFlags"] == "Contain"  # the namespace plugins need the extern step
    document = load_yaml(_values(synthesized[stack])["configFiles"]["namespace.yaml"])
    defaults = document["defaults"]
    assert defaults["clone_ns_flags"] == ["CLONE_NEWPID"]
    assert defaults["auto_base_path"] is True
    config = parse_platform_config(stack_data(stack))
    by_hosts = {tuple(entry["nodes"]): entry["options"]["dir_confs"]
                for entry in document["node_confs"]}  # fmt: skip
    assert len(by_hosts) == len(config.slurm.node_sets)
    for node_set in config.slurm.node_sets:
        pool = config.pool(node_set.pool)
        assert pool is not None
        dirs = {d["path"]: d for d in by_hosts[(node_names(pool),)]}
        assert set(dirs) == {"/tmp", "/dev/shm"}
        # read_nsconf.c: a dir inside the base path is fatal for slurmd
        assert not any(path.startswith(defaults["base_path"]) for path in dirs)
        shm_gib = node_set.job_shm_gib or whole_node_memory_mib(pool) // 1024 // 2
        assert dirs["/dev/shm"] == {"path": "/dev/shm", "tmpfs": True,
                                    "options": f"size={shm_gib}g"}  # fmt: skip
        if node_set.job_tmp_gib is None:
            assert dirs["/tmp"] == {"path": "/tmp"}  # private, on the node's disk
        else:
            assert dirs["/tmp"]["options"] == f"size={node_set.job_tmp_gib}g"


def _namespace_hashes(result: StackResult | ProgramRun) -> dict[str, str]:
    return {
        r.inputs["metadata"]["name"]: r.inputs["spec"]["template"]["metadata"]["annotations"][
            JOB_NAMESPACE_ANNOTATION
        ]
        for r in result.records
        if r.type == NODE_SET
    }


def test_config_sizes_the_scratch_and_rolls_that_node_set(
    synthesized: dict[str, StackResult], run_component: RunComponent
) -> None:
    """slurmd reads namespace.yaml only at start (namespace.yaml(5)): a change rolls the pods."""
    data = stack_data("prod")
    data["slurm"]["nodeSets"][0].update(jobTmpGiB=128, jobShmGiB=64)
    run = run_component(parts.slurm, data, "prod")
    before, after = _namespace_hashes(synthesized["prod"]), _namespace_hashes(run)
    changed = data["slurm"]["nodeSets"][0]["pool"]
    assert len(before) > 1 and before[changed] != after[changed]
    assert {k: v for k, v in before.items() if k != changed} == {
        k: v for k, v in after.items() if k != changed
    }
    document = load_yaml(_values(run)["configFiles"]["namespace.yaml"])
    dirs = {d["path"]: d for d in document["node_confs"][0]["options"]["dir_confs"]}
    assert dirs["/tmp"] == {"path": "/tmp", "tmpfs": True, "options": "size=128g"}
    assert dirs["/dev/shm"]["options"] == "size=64g"


# -- 4. teams do not see each other -----------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_users_see_only_their_own_jobs_and_the_scraper_still_reads_metrics(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    values = _values(synthesized[stack])
    conf = _conf(synthesized[stack])
    private = set(_words(conf["PrivateData"]))
    assert {"jobs", "usage", "accounts", "users"} <= private
    # PrivateData closes the metrics to all but SlurmUser and root (read_config.c) unless
    # ignore_private_data, which MetricsAuthUsers would cancel.
    assert values["controller"]["metrics"]["enabled"] is True
    assert conf["MetricsParameters"] == "ignore_private_data"
    assert "MetricsAuthUsers" not in conf
    # sacct and sreport ask slurmdbd, which has its own PrivateData.
    dbd = values["accounting"]
    assert dbd["enabled"] is True
    assert {"jobs", "usage", "accounts", "users"} <= set(_words(dbd["extraConfMap"]["PrivateData"]))


# -- synth jobs -------------------------------------------------------------------------------


def test_synth_jobs_reports_a_job_longer_than_max_time(
    capsys: pytest.CaptureFixture[str], replay_synthesis: None
) -> None:
    assert synth_main(["jobs", "prod", "--hours", "48"]) == 0
    out = capsys.readouterr().out
    assert "jobs run for at most 48 h (MaxTime" in out
    assert synth_main(["jobs", "prod", "--hours", "49"]) == 1
    out = capsys.readouterr().out
    assert out.count("a job of 49 h is refused here: MaxTime is 48 h") == 3
    with pytest.raises(SystemExit):
        synth_main(["jobs", "prod", "--hours", "0"])


def test_synth_jobs_blocks_a_partition_whose_defaults_give_one_job_every_gpu(
    synthesized: dict[str, StackResult],
) -> None:
    settings = copy.deepcopy(_partitions(synthesized["prod"])["p5"])
    pool = parse_platform_config(stack_data("prod")).pool("p5")
    assert pool is not None
    node = jobs_slurm.SlurmNode(cpus=192, memory_mib=whole_node_memory_mib(pool), gpus=8)
    blocking, notes = jobs_slurm.limits_reasons(settings, nodes=2, window=2880, node=node,
                                                teams=[])  # fmt: skip
    assert not blocking and any("8 such jobs share one node" in n for n in notes)
    for key in ("DefMemPerGPU", "DefMemPerCPU", "DefCpuPerGPU"):
        settings.pop(key)
    blocking, _ = jobs_slurm.limits_reasons(settings, nodes=2, window=2880, node=node, teams=[])
    assert blocking == [
        "a job of 1 GPU without --mem gets 2 CPUs and 1885 GiB, so 8 such jobs take 8 nodes: set "
        "DefMemPerGPU (one GPU's share of the node)"
    ]


def test_the_docs_numbers_are_prods(synthesized: dict[str, StackResult]) -> None:
    """The concepts page's arithmetic is prod's synthesis, not a copy that drifts."""
    text = docs_pages.section(docs_pages.page("concepts/slurm.md"), "## One Slurm, many teams")
    partitions = _partitions(synthesized["prod"])
    p5 = partitions["p5"]
    parameters = _words(_conf(synthesized["prod"])["SchedulerParameters"])
    longest = slurm_minutes(partitions["p5en"]["MaxTime"])
    assert longest is not None
    for value in (*parameters[1:], f"`MaxTime` {longest // 60} hours"):
        assert value in text, value
    row = f"| {int(p5['DefMemPerGPU']):,} MiB ({int(p5['DefMemPerGPU']) // 1024} GiB) | " + (
        f"{p5['DefCpuPerGPU']} | {int(p5['DefMemPerCPU']):,} MiB |"
    )
    assert row in text
    assert f"{int(partitions['trn2']['DefMemPerCPU']):,} MiB |" in text
    config = parse_platform_config(stack_data("prod"))
    pool = config.pool("p5")
    assert pool is not None
    assert f"{whole_node_memory_mib(pool):,} MiB for jobs" in text
    assert f"{whole_node_memory_mib(pool) // 1024 // 2} GiB on a p5" in text
    trn2 = config.pool("trn2")
    assert trn2 is not None
    assert f"4 x\n{neuron_device_memory_mib(trn2):,} MiB" in text


# -- the first up of the namespaces, forecast -------------------------------------------------


def test_synth_diff_says_to_drain_slurm_nodes_when_job_namespaces_change(
    synthesized: dict[str, StackResult],
) -> None:
    """A running job that started without the namespaces cannot start a step once slurmd
    reloads them (src/slurmd/slurmd/req.c joins the job's namespace first): the forecast says
    so, and says nothing when only something else of the release changes."""
    old = load_synthesis(synthesized["prod"].written.directory)
    new = copy.deepcopy(old)
    values = new.helm["slurm.yaml"]["values"]
    values["controller"]["extraConfMap"]["PriorityWeightAge"] = 2000
    assert slurm_namespace_changes(old, new) == []
    assert "Slurm job namespaces" not in render("prod", Path("base"), diff_syntheses(old, new))
    values["configFiles"]["namespace.yaml"] += "# changed\n"
    del values["controller"]["extraConfMap"]["NamespaceType"]
    changes = slurm_namespace_changes(old, new)
    assert [change.split(":")[0] for change in changes] == [
        "controller.extraConfMap.NamespaceType",
        "configFiles.namespace.yaml",
    ]
    text = render("prod", Path("base"), diff_syntheses(old, new))
    assert "  Slurm job namespaces change: 2" in text
    assert "drain every Slurm node and let its jobs end before this up" in text


@pytest.mark.parametrize("stack", STACKS)
def test_a_neuron_job_without_memory_gets_its_devices_share(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Slurm has no per-device memory default but for GPUs: job_submit.lua gives a Trainium job
    that states no memory its devices' share, as DefMemPerGPU does for a GPU job."""
    config = parse_platform_config(stack_data(stack))
    runtime = _job_submit(synthesized[stack])
    trainium = [
        pool for ns in config.slurm.node_sets
        if (pool := config.pool(ns.pool)) is not None and pool.instance.accelerator == "neuron"
    ]  # fmt: skip
    assert trainium, "no Trainium node set in the stack"
    for pool in trainium:
        share = (whole_node_memory_mib(pool) - DAEMON_HEADROOM_MIB) // pool.instance.accelerators

        def submitted(partition: str = pool.name, **job: Any) -> Any:
            desc = runtime.table_from({"partition": partition, "min_nodes": 1, **job})
            assert int(runtime.globals().slurm_job_submit(desc, None, 1000)) == 0
            return desc

        assert submitted(tres_per_node="gres/neuron:4").min_mem_per_node == 4 * share
        assert submitted(tres_per_node="gres/neuron").min_mem_per_node == share
        whole = submitted(tres_per_node=f"gres/neuron:{pool.instance.accelerators}")
        assert whole.min_mem_per_node <= whole_node_memory_mib(pool)
        # What the job states itself stays: --mem, --mem-per-cpu, --exclusive, no devices.
        assert submitted(tres_per_node="gres/neuron:4", min_mem_per_node=1024).min_mem_per_node == 1024  # fmt: skip
        assert submitted(tres_per_node="gres/neuron:4", min_mem_per_cpu=512).min_mem_per_node is None  # fmt: skip
        assert submitted(tres_per_node="gres/neuron:4", shared=0).min_mem_per_node is None
        assert submitted().min_mem_per_node is None
    # GPU partitions are DefMemPerGPU's: the script leaves their jobs alone.
    gpu = next(
        ns.pool for ns in config.slurm.node_sets if ns.pool not in {p.name for p in trainium}
    )
    desc = runtime.table_from({"partition": gpu, "tres_per_node": "gres/gpu:1"})
    runtime.globals().slurm_job_submit(desc, None, 1000)
    assert desc.min_mem_per_node is None
