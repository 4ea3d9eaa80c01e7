"""Helm releases of upstream charts at the versions of the bill of materials.

Releases use ``helm.v3.Release``, which runs real Helm against the cluster: hooks run and
``lookup`` sees live objects, as the charts' authors test them (Volcano and Kubeflow Trainer
depend on hooks). ``helm.v4.Chart`` would render client-side and silently skip both.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.versions import HelmChart


def release(
    name: str,
    chart: HelmChart,
    *,
    namespace: str,
    values: dict[str, Any],
    opts: pulumi.ResourceOptions,
    create_namespace: bool = False,
) -> k8s.helm.v3.Release:
    """Install one pinned chart.

    Args:
        name: Helm release name (also the Pulumi resource name); fixed so upgrades find it.
        chart: chart, version and repository from :mod:`components.versions`.
        namespace: namespace of the release.
        values: chart values; only keys the chart's default values define.
        opts: resource options (parent, Kubernetes provider, dependencies).
        create_namespace: let Helm create the namespace. Default false.
    """
    return k8s.helm.v3.Release(
        name,
        name=name,
        chart=chart.chart,
        version=chart.version,
        repository_opts=(
            k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository) if chart.repository else None
        ),
        namespace=namespace,
        create_namespace=create_namespace,
        values=values,
        atomic=True,
        cleanup_on_fail=True,
        opts=opts,
    )
