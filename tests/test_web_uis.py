"""The cluster's web UI exposure (``cluster.uiExposure``) and the Service it builds."""

from __future__ import annotations

from typing import Any

import pytest

from components import versions
from components.platform import validated_config
from components.web_uis import INTERNAL_LOAD_BALANCER, ui_service
from tests.config_problems import MISSING, assert_reported
from tests.conftest import stack_data
from tests.schemas import validation_errors

SELECTOR = {"app": "ui"}


def _exposure(stack: str, **exposure: Any) -> dict[str, Any]:
    data = stack_data(stack)
    data["cluster"]["uiExposure"] = exposure
    if exposure.get("mode") == "internalLoadBalancer" and "oidc" in data:
        # Grafana logs in through OIDC there too, and needs its address behind the balancer.
        data.setdefault("observability", {}).setdefault("grafana", {})["url"] = (
            "https://grafana.example.com"
        )
    return data


def _service(data: dict[str, Any]) -> dict[str, Any]:
    built = ui_service(
        validated_config(data).cluster.ui_exposure, selector=SELECTOR, port=80, target_port=8080
    )
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "ui", "namespace": "x", "annotations": built["annotations"]},
        "spec": built["spec"],
    }


def test_port_forward_is_the_default_and_builds_a_cluster_ip_service() -> None:
    data = stack_data("dev")
    data["cluster"].pop("uiExposure", None)
    service = _service(data)
    assert service["spec"]["type"] == "ClusterIP"
    assert "loadBalancerSourceRanges" not in service["spec"]
    assert service["metadata"]["annotations"] == {}
    assert service["spec"]["selector"] == SELECTOR
    assert validation_errors(service, versions.DEFAULT_KUBERNETES_VERSION, None) == []


def test_internal_load_balancer_is_internal_and_limited_to_the_clients() -> None:
    service = _service(
        _exposure("dev", mode="internalLoadBalancer", clientCidrs=["192.168.10.0/24"])
    )
    spec = service["spec"]
    assert spec["type"] == "LoadBalancer"
    assert spec["loadBalancerSourceRanges"] == ["192.168.10.0/24"]
    assert spec["externalTrafficPolicy"] == "Local"
    annotations = service["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-internal"] == "true"
    assert annotations == INTERNAL_LOAD_BALANCER
    assert validation_errors(service, versions.DEFAULT_KUBERNETES_VERSION, None) == []


def test_load_balancer_without_clients_is_refused() -> None:
    assert_reported(
        _exposure("dev", mode="internalLoadBalancer"),
        "platform.cluster.uiExposure.clientCidrs",
        MISSING,
        "open to every source",
    )


def test_clients_without_load_balancer_are_refused() -> None:
    assert_reported(
        _exposure("dev", mode="portForward", clientCidrs=["192.168.10.0/24"]),
        "platform.cluster.uiExposure.clientCidrs",
        ["192.168.10.0/24"],
        "none with mode portForward",
    )


def test_unknown_mode_is_refused_naming_the_modes() -> None:
    assert_reported(
        _exposure("dev", mode="nodePort"),
        "platform.cluster.uiExposure.mode",
        "nodePort",
        "internalLoadBalancer",
    )


@pytest.mark.parametrize(
    ("cidrs", "index", "allowed"),
    [
        (["0.0.0.0/0"], 0, "never the internet"),
        (["8.8.8.0/24"], 0, "a private network"),
        (["192.168.0.0/24", "10.10.4.0/24"], 1, "lets team pods reach"),
        (["10.0.0.0/8"], 0, "outside the VPC's 10.10.0.0/16"),
    ],
)
def test_client_networks_are_checked_as_the_slurm_login_sources_are(
    cidrs: list[str], index: int, allowed: str
) -> None:
    assert_reported(
        _exposure("dev", mode="internalLoadBalancer", clientCidrs=cidrs),
        f"platform.cluster.uiExposure.clientCidrs[{index}]",
        cidrs[index],
        allowed,
    )


def test_client_networks_need_a_route_back_where_the_stack_routes() -> None:
    """prod routes only deployFrom's networks through its transit gateway."""
    data = _exposure("prod", mode="internalLoadBalancer", clientCidrs=["10.201.0.0/16"])
    assert_reported(
        data, "platform.cluster.uiExposure.clientCidrs[0]", "10.201.0.0/16", "routes back to"
    )
    data["cluster"]["uiExposure"]["clientCidrs"] = ["10.200.8.0/24"]
    validated_config(data)
