"""``python -m acceptance sweep``: enforce the gate's deadline from outside the nodes.

The deadline otherwise runs only inside each node's own agent. A node whose agent cannot run
(its image does not pull, its settings do not load, it crash-loops) keeps the acceptance startup
taint for good, and Karpenter never gives up on it: kubernetes-sigs/karpenter v1.14.1 times out
a NodeClaim's launch and registration only (pkg/controllers/nodeclaim/lifecycle/liveness.go),
not its initialization; ``StateNode.Taints`` (pkg/controllers/state/statenode.go) leaves out
the startup taints of a node not yet initialized, so pending pods count as fitting there and no
new NodeClaim is made; and ``ValidateNodeDisruptable`` refuses an uninitialized node, so neither
consolidation nor drift removes it.

One sweep (a Deployment of one pod in ``node-acceptance``, on the general pool) lists the nodes
every minute and marks **expired** each one still holding the acceptance taint
:data:`DEFAULT_GRACE` after its deadline (creation + ``deadlineMinutes``), whatever its agent
does, with the agent's own verdict code (:func:`acceptance.agent.finish`: Event, node patch,
check pod gone, replacement under the same per-pool Lease cap). It also retries the
replacement of failed nodes that still carry the agent's ``unhealthy=acceptance`` taint, which
a node's agent does while it runs (the Lease keeps the two from taking two slots for one node).
The grace leaves a working agent the decision: it decides within one pass (15 s) of the
deadline.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final, TextIO

from acceptance.agent import (
    Verdict,
    deadline,
    failed_by_acceptance,
    finish,
    has_acceptance_taint,
    replace,
    rfc3339,
)
from acceptance.kube import Api, Object
from acceptance.settings import POOL_LABEL, Settings, settings_from_environment
from components.health_marks import RESULT_LABEL

DEFAULT_GRACE: Final = timedelta(minutes=10)
"""How long past its deadline a node may keep the acceptance taint before the sweep marks it:
ten minutes is forty of an agent's 15-second passes, and an agent restarted by its DaemonSet
is back well within it (the kubelet's crash back-off caps at five minutes)."""
DEFAULT_INTERVAL_S: Final = 60.0
"""Seconds between sweeps: one LIST of nodes a minute, small beside a deadline of minutes."""


def sweep_once(
    api: Api,
    settings: Settings,
    namespace: str,
    now: datetime,
    grace: timedelta = DEFAULT_GRACE,
) -> list[str]:
    """One sweep over every node; one line per node it acted on, for the log.

    Args:
        api: the API.
        settings: every pool's settings (the sweep's settings file lists them all).
        namespace: the gate's namespace (the Leases, the check pods).
        now: the current time (UTC).
        grace: how long past its deadline a node may keep the taint. Default
            :data:`DEFAULT_GRACE`.
    """
    done: list[str] = []
    for node in api.list_nodes():
        name = node["metadata"]["name"]
        try:
            what = _sweep_node(api, settings, node, namespace=namespace, now=now, grace=grace)
        except Exception as error:
            what = f"error: {error}"
        if what:
            done.append(f"{name}: {what}")
    return done


def _sweep_node(
    api: Api,
    settings: Settings,
    node: Object,
    *,
    namespace: str,
    now: datetime,
    grace: timedelta,
) -> str | None:
    """What the sweep did to one node, or None where it left it alone."""
    labels = node["metadata"].get("labels") or {}
    pool_name = labels.get(POOL_LABEL, "")
    pool = settings.pool(pool_name)
    if has_acceptance_taint(node):
        due = deadline(node, settings)
        if now < due + grace:
            return None
        verdict = Verdict(
            "expired",
            f"deadline {rfc3339(due)} passed {int(grace.total_seconds() // 60)} minutes "
            "ago without a verdict from the node's agent (marked by the sweep)",
        )
        return finish(
            api, node, verdict, pool_name=pool_name, pool=pool, namespace=namespace, now=now
        )
    if (
        labels.get(RESULT_LABEL) in {"failed", "expired"}
        and failed_by_acceptance(node)
        and pool.replace_failed_nodes
    ):
        return replace(api, node, pool_name=pool_name, pool=pool, namespace=namespace, now=now)
    return None


def run(
    api: Api,
    settings: Settings,
    namespace: str,
    *,
    grace: timedelta = DEFAULT_GRACE,
    interval_s: float = DEFAULT_INTERVAL_S,
    passes: int | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
    out: TextIO = sys.stdout,
) -> None:
    """Sweep every ``interval_s`` seconds, logging what each sweep did that the last did not.

    Args:
        api: the API.
        settings: every pool's settings.
        namespace: the gate's namespace.
        grace: see :func:`sweep_once`.
        interval_s: seconds between sweeps (default 60).
        passes: stop after this many (default: never).
        clock: the current time (UTC).
        sleep: waits between sweeps.
        out: the log.
    """
    last: list[str] = []
    done = 0
    while passes is None or done < passes:
        try:
            lines = sweep_once(api, settings, namespace, clock(), grace)
        except Exception as error:  # an API hiccup must not end the sweep
            lines = [f"error: {type(error).__name__}: {error}"]
        for line in lines:
            if line not in last:
                print(f"{rfc3339(clock())} {line}", file=out, flush=True)
        last = lines
        done += 1
        if passes is None or done < passes:
            sleep(interval_s)


def main(argv: Sequence[str], out: TextIO = sys.stdout, api: Api | None = None) -> int:
    """``python -m acceptance sweep [--once] [--interval S] [--grace-minutes M]``.

    Env: ``ACCEPTANCE_SETTINGS`` (a settings file listing every gated pool) and
    ``POD_NAMESPACE``.

    Args:
        argv: the arguments after ``sweep``.
        out: the log.
        api: the API (default: in-cluster credentials).
    """
    parser = argparse.ArgumentParser(prog="python -m acceptance sweep")
    parser.add_argument("--once", action="store_true", help="one sweep, then exit")
    parser.add_argument(
        "--interval", type=float, default=DEFAULT_INTERVAL_S,
        help="seconds between sweeps (default 60)",
    )  # fmt: skip
    parser.add_argument(
        "--grace-minutes", type=float, default=DEFAULT_GRACE.total_seconds() / 60,
        help="minutes past a node's deadline before the sweep marks it (default 10)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    settings = settings_from_environment("sweep", ("ACCEPTANCE_SETTINGS", "POD_NAMESPACE"), out)
    if settings is None:
        return 2
    if api is None:  # pragma: no cover - in the cluster
        from acceptance.kube import KubernetesApi  # noqa: PLC0415

        api = KubernetesApi()
    run(
        api,
        settings,
        os.environ["POD_NAMESPACE"],
        grace=timedelta(minutes=args.grace_minutes),
        interval_s=args.interval,
        passes=1 if args.once else None,
        out=out,
    )
    return 0
