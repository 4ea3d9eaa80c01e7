"""The bill of materials: pins that are exact, consistent and new enough."""

from __future__ import annotations

import re

import pytest

from components import versions
from synth.stackfile import REPOSITORY_ROOT

EKSBUILD = re.compile(r"v\d+\.\d+\.\d+-eksbuild\.\d+")


@pytest.mark.parametrize("minor", versions.SUPPORTED_KUBERNETES_VERSIONS)
def test_addon_pins_are_exact_eks_builds(minor: str) -> None:
    pins = versions.EKS_ADDONS[minor]
    for value in vars(pins).values():
        assert EKSBUILD.fullmatch(value), value


@pytest.mark.parametrize("minor", versions.SUPPORTED_KUBERNETES_VERSIONS)
def test_kube_proxy_matches_the_control_plane_minor(minor: str) -> None:
    major, kube_minor, _ = versions.addon_semver(versions.EKS_ADDONS[minor].kube_proxy)
    assert f"{major}.{kube_minor}" == minor


@pytest.mark.parametrize("minor", versions.SUPPORTED_KUBERNETES_VERSIONS)
def test_vpc_cni_supports_explicit_efa_interfaces(minor: str) -> None:
    cni = versions.addon_semver(versions.EKS_ADDONS[minor].vpc_cni)
    assert cni >= versions.MINIMUM_VPC_CNI_VERSION


def test_default_version_is_supported_and_in_trainer_range() -> None:
    assert versions.DEFAULT_KUBERNETES_VERSION in versions.SUPPORTED_KUBERNETES_VERSIONS
    for minor in versions.SUPPORTED_KUBERNETES_VERSIONS:
        # Kubeflow Trainer 2.3 needs >= 1.31 (its installation guide); Volcano 1.15 supports <= 1.35:
        # https://github.com/volcano-sh/volcano/blob/v1.15.1/README.md (Kubernetes compatibility).
        assert (1, 31) <= tuple(int(part) for part in minor.split(".")) <= (1, 35)


def test_addon_semver_parses_eks_builds() -> None:
    assert versions.addon_semver("v1.20.4-eksbuild.2") == (1, 20, 4)


DIGEST_PINNED_DEFAULTS = {
    "DEFAULT_TORCH_IMAGE": versions.DEFAULT_TORCH_IMAGE,
    "SIDECAR_IMAGE": versions.SIDECAR_IMAGE,
}
"""Images the platform chooses whose digests have been read from their registries (the MPI and
JAX defaults and Slinky's own images are still by tag: policies/scan-waivers.yaml says why)."""


@pytest.mark.parametrize("name", sorted(DIGEST_PINNED_DEFAULTS))
def test_platform_defaults_are_pinned_by_digest_and_keep_their_tag(name: str) -> None:
    reference = DIGEST_PINNED_DEFAULTS[name]
    # repository:tag@sha256:<64 hex>: the digest decides what is pulled (containerd ignores
    # the tag when both are given), the tag tells people what it is.
    assert re.fullmatch(r"[a-z0-9./_-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}", reference), name


RELEASES_OF_SEVERAL_CHARTS = {
    "Karpenter": (versions.KARPENTER_CRD_CHART, versions.KARPENTER_CHART),
    "Slinky": (
        versions.SLURM_OPERATOR_CRDS_CHART,
        versions.SLURM_OPERATOR_CHART,
        versions.SLURM_CHART,
    ),
    "mariadb-operator": (versions.MARIADB_OPERATOR_CRDS_CHART, versions.MARIADB_OPERATOR_CHART),
}
"""Upstream releases that ship several charts: each chart's version is its own literal (the
dependency bot rewrites literals), and the bot's group for the project moves them together."""


@pytest.mark.parametrize("project", sorted(RELEASES_OF_SEVERAL_CHARTS))
def test_the_charts_of_one_release_share_its_version(project: str) -> None:
    charts = RELEASES_OF_SEVERAL_CHARTS[project]
    assert len({chart.version for chart in charts}) == 1, [(c.chart, c.version) for c in charts]


def test_trainers_runtime_image_is_tagged_with_trainers_release() -> None:
    # Trainer publishes its runtime images with each release; the bot's Trainer group moves the
    # chart and the image together, and this refuses one without the other.
    tag = versions.DEFAULT_MPI_IMAGE.split("@")[0].rpartition(":")[2]
    assert tag == f"v{versions.TRAINER_CHART.version}"


def test_every_image_pin_is_one_literal_the_bot_can_rewrite() -> None:
    # repository:tag or repository:tag@sha256:<64 hex>, written whole in versions.py (no
    # f-string, no concatenation), which is what renovate.json's image manager matches.
    source = (REPOSITORY_ROOT / "components" / "versions.py").read_text()
    images = [v for k, v in vars(versions).items() if k.endswith("_IMAGE") and isinstance(v, str)]
    images += [
        image
        for name, table in vars(versions).items()
        if name.endswith("_IMAGES") and isinstance(table, dict)
        for image in table.values()
    ]
    assert len(images) >= 10
    for image in images:
        assert re.fullmatch(r"[a-z0-9./_-]+:[A-Za-z0-9._-]+(@sha256:[0-9a-f]{64})?", image), image
        assert f'"{image}"' in source, f"{image} is not written as one literal"
