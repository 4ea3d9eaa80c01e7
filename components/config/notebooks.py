"""Config sections ``platform.notebooks`` (JupyterHub) and ``platform.oidc`` (single sign-on).

``oidc`` is the platform's one OpenID Connect client setting: JupyterHub logs people in through
it (the generic OAuth authenticator) and Grafana is meant to reuse it. Team membership comes
from the token's groups claim, matched against the teams' ``memberGroups`` and ``adminGroups``
(docs/concepts/notebooks.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Final, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from components import catalog, versions
from components.config.base import CONFIG_KEY, MISSING, ConfigProblem, StrictModel

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig

OIDC_CLIENT_SECRET_KEY: Final = "oidcClientSecret"
"""The stack's secret config key holding the OIDC client's secret (``pulumi config set
--secret oidcClientSecret``): never in the stack file in clear."""
DUMMY_ENVIRONMENTS: Final = ("dev",)
"""Where ``notebooks.authenticator: dummy`` is allowed: a dummy authenticator lets anyone in
with any name, so only a development stack reached by port-forward may use it."""
MIN_CULL_TIMEOUT_SECONDS: Final = 600
"""Shorter than the chart's cull interval (``cull.every: 600``, jupyterhub/zero-to-jupyterhub-k8s
4.4.0 jupyterhub/values.yaml) would cull by surprise between two checks."""
MAX_CULL_TIMEOUT_SECONDS: Final = 7 * 24 * 3600


def _https_url(value: str) -> str:
    if not value.startswith("https://") or len(value) <= len("https://") or " " in value:
        raise PydanticCustomError("https_url", "an https:// URL")
    return value


HttpsUrl = Annotated[str, AfterValidator(_https_url)]


class OidcConfig(StrictModel):
    """The platform's OpenID Connect client: JupyterHub today, Grafana later."""

    authorize_url: HttpsUrl | None = Field(
        default=None,
        alias="authorizeUrl",
        description="The identity provider's authorization endpoint (its discovery document's "
        "authorization_endpoint). Required where notebooks use OIDC.",
    )
    token_url: HttpsUrl | None = Field(
        default=None,
        alias="tokenUrl",
        description="The token endpoint (token_endpoint). Required where notebooks use OIDC.",
    )
    userdata_url: HttpsUrl | None = Field(
        default=None,
        alias="userdataUrl",
        description="The userinfo endpoint (userinfo_endpoint), whose answer carries the "
        "username and groups claims. Required where notebooks use OIDC.",
    )
    client_id: str | None = Field(
        default=None,
        alias="clientId",
        min_length=1,
        max_length=255,
        description="The client's id at the identity provider. Its secret is the stack secret "
        f"`{OIDC_CLIENT_SECRET_KEY}`. Required where notebooks use OIDC.",
    )
    username_claim: str = Field(
        default="preferred_username",
        alias="usernameClaim",
        min_length=1,
        description="Claim whose value is the user's name in JupyterHub (and the name of the "
        "home directory). Default: preferred_username.",
    )
    groups_claim: str = Field(
        default="groups",
        alias="groupsClaim",
        min_length=1,
        description="Claim listing the user's groups; a user whose groups include a team's "
        "memberGroups or adminGroups gets that team's profiles, and nobody else logs in. "
        "Default: groups.",
    )
    scopes: list[str] = Field(
        default_factory=lambda: ["openid", "profile", "email", "groups"],
        min_length=1,
        description="Scopes the client asks for; must include openid. "
        "Default: openid, profile, email, groups.",
    )
    hub_admin_groups: list[str] = Field(
        default_factory=list,
        alias="hubAdminGroups",
        description="Groups whose members are JupyterHub admins (they can open any user's "
        "server). Default: none.",
    )


class NotebookImagesConfig(StrictModel):
    """The notebook images, built from images/notebook on the training images."""

    cuda: str | None = Field(
        default=None,
        description="Notebook image of the CPU and GPU profiles: images/notebook built on "
        f"{versions.NOTEBOOK_CUDA_BASE_IMAGE.split('@', 1)[0]} (the PyTorch runtime's image, so "
        "the same CUDA) with JupyterHub "
        f"{versions.NOTEBOOK_JUPYTERHUB_VERSION}. Pin by tag or digest. Required with "
        "notebooks.enabled.",
    )
    neuron: str | None = Field(
        default=None,
        description="Notebook image of the Trainium profiles: images/notebook built on the "
        "images/training-neuron build (the same Neuron SDK). Required where a Trainium pool "
        "gets notebook profiles. Default: none.",
    )


class NotebooksConfig(StrictModel):
    """JupyterHub: each user's server in their team's namespace, queue and storage."""

    enabled: bool = Field(
        default=False,
        description=f"Install JupyterHub (chart {versions.JUPYTERHUB_CHART.version}) with a "
        "profile per team and pool. Needs modelStore.enabled (home directories live there) "
        "and teams with a gid. Default: false.",
    )
    authenticator: Literal["oidc", "dummy"] = Field(
        default="oidc",
        description="`oidc`: the generic OAuth authenticator with the `oidc` section. `dummy`: "
        f"any name logs in, allowed only in {', '.join(DUMMY_ENVIRONMENTS)}. Default: oidc.",
    )
    cull_timeout_seconds: int = Field(
        default=3600,
        alias="cullTimeoutSeconds",
        ge=MIN_CULL_TIMEOUT_SECONDS,
        le=MAX_CULL_TIMEOUT_SECONDS,
        description="Stop a server idle this long (the chart's cull.timeout), seconds; culling "
        "is always on. Default: 3600 (the chart's).",
    )
    gpu_profiles: list[Annotated[int, Field(ge=1, le=4)]] = Field(
        default_factory=lambda: [1, 2],
        alias="gpuProfiles",
        description="GPU counts of the partial-node profiles on pools without EFA (a count "
        "the pool's instance does not exceed). Default: 1 and 2.",
    )
    efa_pools: Literal["wholeNode", "none"] = Field(
        default="none",
        alias="efaPools",
        description="Profiles on EFA pools: `wholeNode` (every device and EFA interface of the "
        "node, as a job's pod) or `none`. Default: none.",
    )
    max_accelerator_servers_per_user: int = Field(
        default=1,
        alias="maxAcceleratorServersPerUser",
        ge=0,
        le=4,
        description="Accelerator servers one user may run at once (named servers; CPU servers "
        "do not count). 0 offers CPU profiles only. Default: 1.",
    )
    job_service_account: bool = Field(
        default=False,
        alias="jobServiceAccount",
        description="Run servers as the team's job service account (its AWS role, a token "
        "mounted). Default: false: no account token in notebook pods.",
    )
    hub_database_storage_gib: int = Field(
        default=1,
        alias="hubDatabaseStorageGiB",
        ge=1,
        le=100,
        description="The hub's SQLite volume (encrypted gp3, retained in every stack: its "
        "claim and volume outlive the release), GiB. Default: 1 (the chart's).",
    )
    images: NotebookImagesConfig = Field(
        default_factory=NotebookImagesConfig,
        description="Notebook images (images/notebook). Default: none.",
    )


def notebooks_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Cross-field problems of ``platform.notebooks`` and ``platform.oidc``.

    Args:
        config: the parsed platform.
    """
    notebooks = config.notebooks
    base = f"{CONFIG_KEY}.notebooks"
    if not notebooks.enabled:
        return
    if not config.model_store.enabled:
        yield ConfigProblem(
            f"{base}.enabled",
            True,
            "false while modelStore.enabled is false: home directories live on the model store",
        )
    if notebooks.authenticator == "dummy" and config.environment not in DUMMY_ENVIRONMENTS:
        yield ConfigProblem(
            f"{base}.authenticator",
            "dummy",
            f"oidc outside {', '.join(DUMMY_ENVIRONMENTS)}: a dummy authenticator lets anyone in",
        )
    if notebooks.authenticator == "oidc":
        for key in ("authorize_url", "token_url", "userdata_url", "client_id"):
            if getattr(config.oidc, key) is None:
                alias = OidcConfig.model_fields[key].alias or key
                yield ConfigProblem(
                    f"{CONFIG_KEY}.oidc.{alias}", None, "set: notebooks log in through OIDC"
                )
        if "openid" not in config.oidc.scopes:
            yield ConfigProblem(
                f"{CONFIG_KEY}.oidc.scopes", config.oidc.scopes, "a list that includes openid"
            )
    if notebooks.images.cuda is None:
        yield ConfigProblem(
            f"{base}.images.cuda", None, "the CUDA notebook image (images/notebook)"
        )
    neuron_pools = [
        pool.name
        for pool in config.node_pools
        # An unknown instance type is node_pool_problems' to report.
        if all(t in catalog.CATALOG for t in pool.instance_types)
        and pool.instance.accelerator == "neuron"
        and (not pool.uses_efa or notebooks.efa_pools == "wholeNode")
    ]
    if neuron_pools and notebooks.images.neuron is None:
        yield ConfigProblem(
            f"{base}.images.neuron",
            None,
            f"the Neuron notebook image (images/notebook): pools {', '.join(neuron_pools)} get "
            "Trainium profiles",
        )
    for index, team in enumerate(config.teams):
        if team.gid is None:
            yield ConfigProblem(
                f"{CONFIG_KEY}.teams[{index}].gid",
                None,
                "a gid: notebook servers run with the team's group on its storage",
            )


def oidc_client_secret_problems(
    config: PlatformConfig, *, present: bool, secret: bool
) -> list[ConfigProblem]:
    """The OIDC client's secret, a config key of its own: there, and set as a secret.

    Refused at preview where notebooks log in through OIDC without it: the chart's hub needs
    ``OAUTH_CLIENT_SECRET`` from its Secret to start, and the release, installed atomically,
    would be rolled back after its wait, failing the update. Grafana logs in through the same
    client wherever the oidc section is set (components/observability/metrics_stack.py), and
    without the secret it would silently fall back to its local admin.

    Args:
        config: the validated platform.
        present: the stack sets :data:`OIDC_CLIENT_SECRET_KEY`.
        secret: it is a secret (``pulumi config set --secret``), never clear text in the file.
    """
    notebooks = config.notebooks
    hub = notebooks.enabled and notebooks.authenticator == "oidc"
    grafana = config.observability.grafana.enabled and config.oidc.client_id is not None
    if not hub and not grafana:
        return []
    command = f"pulumi config set --secret {OIDC_CLIENT_SECRET_KEY}"
    if not present:
        return [ConfigProblem(
            OIDC_CLIENT_SECRET_KEY, MISSING,
            f"the secret of OIDC client {config.oidc.client_id}, set with {command}",
        )]  # fmt: skip
    if not secret:
        return [ConfigProblem(
            OIDC_CLIENT_SECRET_KEY, "[clear text]",
            f"a secret ({command}): the stack file must not hold it in clear",
        )]  # fmt: skip
    return []
