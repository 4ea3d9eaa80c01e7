"""How people reach the platform's web UIs: one Service shape from ``cluster.uiExposure``.

Katib's UI uses it today; notebooks and Grafana are meant to reuse :func:`ui_service` rather
than choose their own exposure (docs/concepts/web-uis.md).
"""

from __future__ import annotations

from typing import Any, Final

from components.config import UiExposureConfig

INTERNAL_LOAD_BALANCER: Final = {
    "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
    "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
    "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
    "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes": (
        "preserve_client_ip.enabled=true"
    ),
}
"""An internal NLB in the private subnets, whichever controller (EKS's built-in service
controller or the AWS Load Balancer Controller) handles the Service. Either keeps the client's
address, which ``loadBalancerSourceRanges`` and NetworkPolicies filter: the built-in one's
instance targets always do (with ``externalTrafficPolicy: Local``), the AWS Load Balancer
Controller's IP targets only with ``preserve_client_ip`` on."""


def ui_service(
    exposure: UiExposureConfig, *, selector: dict[str, str], port: int, target_port: int | str
) -> dict[str, Any]:
    """A web UI Service's ``metadata.annotations`` and ``spec``, as ``cluster.uiExposure`` says.

    Args:
        exposure: the validated ``cluster.uiExposure`` (client networks present with the load
            balancer, absent without).
        selector: the UI pods' labels.
        port: the Service's port (the one ``kubectl port-forward svc/<name> <port>`` or the
            load balancer's listener uses).
        target_port: the UI container's port, number or name.

    Returns:
        ``{"annotations": ..., "spec": ...}``: a ClusterIP Service without annotations for
        ``portForward``; for ``internalLoadBalancer`` an internal NLB open only to
        ``clientCidrs`` and keeping the client's address.
    """
    ports = [{"name": "http", "port": port, "targetPort": target_port, "protocol": "TCP"}]
    if exposure.mode == "portForward":
        spec = {"type": "ClusterIP", "selector": selector, "ports": ports}
        return {"annotations": {}, "spec": spec}
    return {
        "annotations": dict(INTERNAL_LOAD_BALANCER),
        "spec": {
            "type": "LoadBalancer",
            "selector": selector,
            "ports": ports,
            "loadBalancerSourceRanges": list(exposure.client_cidrs),
            # With Cluster, kube-proxy would SNAT the client to a node's address.
            "externalTrafficPolicy": "Local",
        },
    }
