"""Config sections ``platform.observability`` and ``nodePools[].coldStartBudgetMinutes``.

The metrics stack (kube-prometheus-stack) serves the fleet: Prometheus sized here, Grafana
behind the platform's OIDC client where one is configured (port-forward only otherwise), and in
production an optional remote write to Amazon Managed Service for Prometheus (docs: concepts,
observability).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from pydantic import Field

from components import catalog, software
from components.config.base import CONFIG_KEY, MISSING, ConfigProblem, StrictModel
from components.config.notebooks import HttpsUrl
from components.config.teams import GroupName

DEFAULT_GANG_PENDING_ALERT_MINUTES: Final = max(catalog.COLD_START_BUDGET_MINUTES.values())
"""Default of ``gangPendingAlertMinutes``: no lower than any instance family's default
cold-start budget (components/catalog.py), since a gang on a cold pool waits unscheduled for
most of its cold start (nodes launching, booting, passing the acceptance gate) and that is the
ColdStartOverBudget alert's to judge, not GangPending's."""

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig


class GrafanaConfig(StrictModel):
    """Grafana: the dashboards as code, one folder per team."""

    enabled: bool = Field(
        default=True,
        description="Install Grafana with the platform's dashboards. Default: true.",
    )
    admin_groups: list[GroupName] = Field(
        default_factory=list,
        description="OIDC groups whose members administer Grafana: Admin in the fleet's "
        "organisation and in every team's. A team's memberGroups view its organisation (its "
        "dashboards only) and its adminGroups edit it; nobody else logs in. Used only where "
        "the oidc section is set. No group may contain ':'. Default: none.",
    )
    url: HttpsUrl | None = Field(
        default=None,
        description="Grafana's address as people reach it (https://, through TLS the "
        "organisation terminates in front of the internal load balancer). Grafana builds its "
        "login redirect from it: register <url>/login/generic_oauth with the identity provider. "
        "Required where Grafana logs in through OIDC and cluster.uiExposure.mode is "
        "internalLoadBalancer; unset, Grafana is reached by port-forward at "
        "http://localhost:3000. Default: unset.",
    )


class RemoteWriteConfig(StrictModel):
    """Remote write to Amazon Managed Service for Prometheus (AMP)."""

    enabled: bool = Field(
        default=False,
        description="Create an AMP workspace and the Pod Identity role Prometheus writes with, "
        "and send every sample there as well (long retention outside the cluster). "
        "Default: false.",
    )


class ObservabilityImagesConfig(StrictModel):
    """The images of the platform's own exporters, built from images/ and pinned by digest."""

    efa_exporter: str | None = Field(
        default=None,
        alias="efaExporter",
        description="EFA exporter of the EFA pools (images/efa-exporter: this repository's "
        "efa_exporter, which serves the EFA devices' sysfs counters). Pin by digest, as "
        "<repo>:<tag>@<digest> with the tag the recipe's build carries. Required where a pool "
        "attaches EFA.",
    )


class ObservabilityConfig(StrictModel):
    """The fleet's metrics stack, dashboards and alerts."""

    retention_days: int = Field(
        default=15,
        ge=1,
        le=365,
        description="Days Prometheus keeps samples on its volume. Default: 15.",
    )
    storage_gib: int = Field(
        default=100,
        alias="storageGiB",
        ge=10,
        le=16384,
        description="Size of Prometheus' volume (encrypted gp3, retained on delete), GiB; "
        "Prometheus also stops at 90% of it, so a full volume loses old samples, not new "
        "ones. Default: 100.",
    )
    grafana: GrafanaConfig = Field(
        default_factory=GrafanaConfig,
        description="Grafana and its dashboards. Default: on.",
    )
    remote_write: RemoteWriteConfig = Field(
        default_factory=RemoteWriteConfig,
        description="Remote write to Amazon Managed Service for Prometheus. Default: off.",
    )
    images: ObservabilityImagesConfig = Field(
        default_factory=ObservabilityImagesConfig,
        description="The images of the platform's own exporters. Default: none.",
    )
    runbooks_url: HttpsUrl | None = Field(
        default=None,
        alias="runbooksUrl",
        description="Where the platform's docs site is published (https://, the site's root). "
        "Each alert's runbook_url then links to its section, <url>/how-to/alert-runbooks/"
        "#<alert>, which Alertmanager and Grafana open; unset, it is the page's path in this "
        "repository (docs/how-to/alert-runbooks.md#<alert>), which a reader resolves by hand. "
        "Default: unset.",
    )
    gang_pending_alert_minutes: int = Field(
        default=DEFAULT_GANG_PENDING_ALERT_MINUTES,
        ge=1,
        le=1440,
        description="Minutes a gang's pod may wait unscheduled (Pending, on no node) before "
        "the GangPending alert fires, naming why (queue, quota or capacity). Default: "
        f"{DEFAULT_GANG_PENDING_ALERT_MINUTES}, the largest default cold-start budget: on a "
        "cold pool a gang's pods wait unscheduled while their nodes launch and pass the "
        "acceptance gate, which is no fault.",
    )


def observability_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Cross-field rules of the observability section.

    Args:
        config: the parsed platform.
    """
    grafana = config.observability.grafana
    if grafana.admin_groups and config.oidc.client_id is None:
        yield ConfigProblem(
            f"{CONFIG_KEY}.observability.grafana.adminGroups",
            grafana.admin_groups,
            "empty unless the oidc section is set: Grafana logs people in through the "
            "platform's OIDC client, and without one it is reached by port-forward only",
        )
    if (
        grafana.enabled
        and config.oidc.client_id is not None
        and config.cluster.ui_exposure.mode == "internalLoadBalancer"
        and grafana.url is None
    ):
        yield ConfigProblem(
            f"{CONFIG_KEY}.observability.grafana.url",
            MISSING,
            "Grafana's https:// address behind the internal load balancer: without it "
            "Grafana sends the identity provider a localhost redirect and nobody arriving "
            "through the load balancer can log in",
        )
    if grafana.enabled and config.oidc.client_id is not None:
        yield from _org_mapping_problems(config)
    yield from _efa_exporter_problems(config)


def _org_mapping_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Groups Grafana's ``org_mapping`` cannot hold: any with ``:``.

    Its fields are separated by ``:`` (grafana/grafana v13.2.0
    pkg/login/social/connectors/org_role_mapper.go, ``splitOrgMapping``), and every team's
    groups and the admin groups are mapped.
    """
    allowed = "a group without ':', which separates the fields of Grafana's org_mapping"
    for key, groups in (
        ("observability.grafana.adminGroups", config.observability.grafana.admin_groups),
        *(
            (f"teams[{index}].{field}", groups)
            for index, team in enumerate(config.teams)
            for field, groups in (
                ("memberGroups", team.member_groups),
                ("adminGroups", team.admin_groups),
            )
        ),
    ):
        for group in groups:
            if ":" in group:
                yield ConfigProblem(f"{CONFIG_KEY}.{key}", group, allowed)


def _efa_exporter_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """An EFA pool without the exporter's image, or an image of another build of the recipe."""
    where = f"{CONFIG_KEY}.observability.images.efaExporter"
    image = config.observability.images.efa_exporter
    tag = software.built_tag(software.EFA_EXPORTER_RECIPE, software.EFA_EXPORTER_RECIPE)
    pools = [
        pool.name
        for pool in config.node_pools
        # a type the catalog lacks is refused by the pools' own check
        if all(name in catalog.CATALOG for name in pool.instance_types) and pool.uses_efa
    ]
    if pools and image is None:
        yield ConfigProblem(
            where,
            MISSING,
            f"the EFA exporter image (built from images/efa-exporter, tagged :{tag}, pinned by "
            f"digest) while the pools {', '.join(pools)} attach EFA",
        )
    elif image is not None and software.reference_tag(image) != tag:
        yield ConfigProblem(
            where,
            image,
            f"a build of images/efa-exporter tagged :{tag} (this release's exporter and its "
            "pinned client library), as <repo>:<tag>@<digest>",
        )
