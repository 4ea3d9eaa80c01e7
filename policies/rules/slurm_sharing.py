"""Slurm shared by teams: bounded time limits, node sharing by request, private data.

Partitions have finite time limits within backfill's horizon, jobs share nodes by what they
ask for, and other users' data is private while the autoscaler's metrics stay readable.

Each partition can be declared three ways, and each is checked: a NodeSet's
``spec.partition`` (the stack's own form), the slurm chart's ``nodesets.<name>.partition`` and
its ``partitions.<name>``. slurm.conf lines come from the chart's ``controller.extraConf`` (a
text that, when set, takes precedence) or ``controller.extraConfMap``, slurmdbd.conf's from
``accounting.extraConf`` or ``accounting.extraConfMap`` (slurm chart 1.2.1 values.yaml).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import PolicyResource, StackValidationArgs, StackValidationPolicy

from components.slurm.sharing import (
    MEMORY_DEFAULTS,
    METRICS_PARAMETERS,
    backfill_window,
    conf_settings,
    parse_partition_line,
    slurm_minutes,
)

from .common import (
    MANDATORY,
    ReportViolation,
    ResourceValidationArgs,
    resource_policy,
)
from .slurm import NODE_SET, slurm_chart_values

REQUIRED_PRIVATE = ("account", "job", "usage")
"""What other teams must not see: their jobs with command lines, their usage, their accounts.
Slurm finds each word anywhere in the value, case-insensitively, and ``all`` covers every one
(SchedMD/slurm slurm-26-05-3-1 src/common/read_config.c, PrivateData)."""


def _hidden_missing(value: str) -> list[str]:
    """What of :data:`REQUIRED_PRIVATE` a ``PrivateData`` value leaves visible."""
    text = value.lower()
    if "all" in text:
        return []
    return [kind for kind in REQUIRED_PRIVATE if kind not in text]


def partitions(resources: list[PolicyResource]) -> Iterator[tuple[str, dict[str, str], str]]:
    """(name, settings, URN) of every enabled partition the stack declares, in any form."""
    for resource in resources:
        if resource.resource_type == NODE_SET:
            spec = resource.props.get("spec") or {}
            partition = spec.get("partition") or {}
            if partition.get("enabled", True) is not False:
                name = str((resource.props.get("metadata") or {}).get("name"))
                yield name, _settings(partition.get("config")), resource.urn
            continue
        values = slurm_chart_values(resource)
        if values is None:
            continue
        for name, node_set in (values.get("nodesets") or {}).items():
            partition = (node_set or {}).get("partition") or {}
            if (node_set or {}).get("enabled", True) is not False and partition.get(
                "enabled", True
            ) is not False:
                yield (
                    f"{name} (slurm chart nodesets)",
                    _settings(partition.get("config")),
                    (resource.urn),
                )
        for name, partition in (values.get("partitions") or {}).items():
            if (partition or {}).get("enabled", True) is not False:
                yield (
                    f"{name} (slurm chart partitions)",
                    _settings((partition or {}).get("config")),
                    resource.urn,
                )


def _settings(config: Any) -> dict[str, str]:
    """A partition's settings, from its line or a map (the chart allows both)."""
    if isinstance(config, Mapping):
        return {str(k): str(v) for k, v in config.items()}
    return parse_partition_line(str(config or ""))


def _minutes(text: str | None) -> int | None:
    """Minutes of a time limit; None when unlimited or absent (Slurm's default is UNLIMITED)."""
    if text is None:
        return None
    try:
        return slurm_minutes(text)
    except ValueError:
        return None


def _controller(resources: list[PolicyResource]) -> tuple[dict[str, str], str | None]:
    """slurm.conf's extra settings and the URN of the release that sets them (none: empty)."""
    for resource in resources:
        values = slurm_chart_values(resource)
        if values is not None:
            return conf_settings(values.get("controller") or {}), resource.urn
    return {}, None


def _check_time_limits(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    found = list(partitions(resources))
    if not found:
        return
    controller, release = _controller(resources)
    window = backfill_window(controller.get("schedulerparameters", ""))
    for name, settings, urn in found:
        maximum = _minutes(settings.get("MaxTime"))
        if maximum is None:
            report(
                f"partition {name} has no finite MaxTime ({settings.get('MaxTime', 'unset')}): "
                "backfill takes a job without a limit to end a year away, so a gang waiting "
                "for those nodes is never reserved and other jobs keep taking them",
                urn,
            )
            continue
        default = _minutes(settings.get("DefaultTime"))
        if default is None:
            report(
                f"partition {name} has no DefaultTime: a job without --time is given MaxTime, "
                "and backfill plans every such job to run that long",
                urn,
            )
        elif default > maximum:
            report(f"partition {name}'s DefaultTime exceeds its MaxTime", urn)
        if maximum > window:
            # Reported where the horizon is set: the longest partition decides bf_window.
            report(
                f"partition {name}'s MaxTime ({maximum} min) is beyond backfill's horizon "
                f"(bf_window={window} min in SchedulerParameters): a gang the size of the "
                "partition is planned to start after the window and gets no reservation",
                release or urn,
            )


def _check_node_sharing(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    controller, _ = _controller(resources)
    cluster_wide = any(key.lower() in controller for key in MEMORY_DEFAULTS)
    for name, settings, urn in partitions(resources):
        if not cluster_wide and not any(settings.get(key) for key in MEMORY_DEFAULTS):
            report(
                f"partition {name} sets none of {', '.join(MEMORY_DEFAULTS)} (nor does "
                "slurm.conf): a job without --mem is given the node's whole memory and holds "
                "every GPU on it",
                urn,
            )


def _check_private_data(args: ResourceValidationArgs, report: ReportViolation) -> None:
    values = slurm_chart_values(args)
    if values is None:
        return
    controller = conf_settings(values.get("controller") or {})
    private = controller.get("privatedata", "")
    missing = _hidden_missing(private)
    if missing:
        report(
            "slurm.conf's PrivateData leaves other users' " + ", ".join(missing) + " data visible "
            "to every user",
            None,
        )
    metrics = (values.get("controller") or {}).get("metrics") or {}
    if metrics.get("enabled") and private.strip():
        parameters = {w.strip() for w in controller.get("metricsparameters", "").split(",")}
        if METRICS_PARAMETERS not in parameters or controller.get("metricsauthusers"):
            report(
                f"slurmctld's metrics need MetricsParameters={METRICS_PARAMETERS} without "
                "MetricsAuthUsers: with PrivateData they want a JWT the autoscaler's "
                "Prometheus does not have, and the node sets stop following the queue",
                None,
            )
    accounting = values.get("accounting") or {}
    if accounting.get("enabled"):
        missing = _hidden_missing(conf_settings(accounting).get("privatedata", ""))
        if missing:
            report(
                "slurmdbd.conf's PrivateData leaves other users' "
                + ", ".join(missing)
                + " data visible through sacct and sreport",
                None,
            )


POLICIES = [
    StackValidationPolicy(
        name="slurm-partitions-time-limited",
        description="Every Slurm partition has a finite MaxTime and a DefaultTime within it, "
        "and backfill looks at least that far ahead (bf_window): otherwise a gang the size of "
        "its partition waits for ever behind other teams' small jobs.",
        validate=_check_time_limits,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="slurm-jobs-share-nodes-by-request",
        description="Every Slurm partition (or slurm.conf) gives jobs a default memory "
        "(DefMemPerGPU, DefMemPerCPU or DefMemPerNode): without one, a job that asks for one "
        "GPU and no --mem takes the node's whole memory and with it every GPU.",
        validate=_check_node_sharing,
        enforcement_level=MANDATORY,
    ),
    resource_policy(
        "slurm-private-data",
        "Slurm hides other users' jobs, usage and accounts (PrivateData in slurm.conf and "
        "slurmdbd.conf), with MetricsParameters=ignore_private_data so the autoscaler's "
        "metrics stay readable.",
        _check_private_data,
    ),
]
