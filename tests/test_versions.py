"""The bill of materials: pins that are exact, consistent and new enough."""

from __future__ import annotations

import re

import pytest

from components import versions

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
        # Kubeflow Trainer 2.3 needs >= 1.31, Volcano 1.15 supports <= 1.35 (REFERENCE §1).
        assert (1, 31) <= tuple(int(part) for part in minor.split(".")) <= (1, 35)


def test_addon_semver_parses_eks_builds() -> None:
    assert versions.addon_semver("v1.20.4-eksbuild.2") == (1, 20, 4)
