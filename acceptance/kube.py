"""The few Kubernetes API calls the agent makes, behind a Protocol so tests use a fake.

Objects travel as plain dicts in the API's own (camelCase) form. A missing object is ``None``;
a write that lost a race raises :class:`Conflict` (HTTP 409: a stale resourceVersion or a name
already taken; HTTP 422 from a failed JSON-patch ``test``), and the agent re-reads and decides
again. Any other 422 is the API server refusing the object as invalid: :class:`Invalid`, an error
the agent logs, never taken for "exists already".
"""

from __future__ import annotations

from typing import Any, Protocol

Object = dict[str, Any]

NODECLAIM_GROUP = "karpenter.sh"
NODECLAIM_VERSION = "v1"
NODECLAIM_PLURAL = "nodeclaims"


class Conflict(Exception):
    """The write lost a race, or a JSON-patch ``test`` did not hold: re-read and retry."""


class Invalid(Exception):
    """The API server refused the object (HTTP 422 other than a failed JSON-patch ``test``)."""


PATCH_TEST_FAILED = "testing value"
"""How the API server's 422 for a failed JSON-patch ``test`` reads: kubernetes/apiserver
pkg/endpoints/handlers/patch.go answers ``StatusUnprocessableEntity`` with the error of
gopkg.in/evanphx/json-patch.v4 ``Patch.test``, "testing value <path> failed: test failed"."""


class Api(Protocol):
    """What the agent needs from the API server."""

    def get_node(self, name: str) -> Object | None:
        """The Node, or ``None``."""
        ...

    def list_nodes(self) -> list[Object]:
        """Every Node (the sweep's one read)."""
        ...

    def patch_node(self, name: str, patch: list[Object]) -> None:
        """Apply a JSON patch (RFC 6902) to the Node; :class:`Conflict` if a ``test`` fails."""
        ...

    def get_pod(self, namespace: str, name: str) -> Object | None:
        """The Pod, or ``None``."""
        ...

    def create_pod(self, namespace: str, pod: Object) -> None:
        """Create a Pod; :class:`Conflict` if the name is taken."""
        ...

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete a Pod (nothing if it is gone)."""
        ...

    def create_event(self, namespace: str, event: Object) -> None:
        """Create a core/v1 Event; :class:`Conflict` if the name is taken."""
        ...

    def list_nodeclaims(self) -> list[Object]:
        """Every karpenter.sh/v1 NodeClaim."""
        ...

    def delete_nodeclaim(self, name: str) -> None:
        """Delete a NodeClaim (nothing if it is gone)."""
        ...

    def get_lease(self, namespace: str, name: str) -> Object | None:
        """The coordination.k8s.io/v1 Lease, or ``None``."""
        ...

    def create_lease(self, namespace: str, lease: Object) -> None:
        """Create a Lease; :class:`Conflict` if another agent created it first."""
        ...

    def replace_lease(self, namespace: str, lease: Object) -> None:
        """Replace a Lease at its ``metadata.resourceVersion``; :class:`Conflict` if stale."""
        ...


class KubernetesApi:
    """:class:`Api` over the ``kubernetes`` client, in-cluster credentials."""

    def __init__(self) -> None:  # pragma: no cover - in the cluster only
        """Load the pod's service-account credentials."""
        from kubernetes import client, config  # noqa: PLC0415 (only in the cluster)

        config.load_incluster_config()
        self._client = client.ApiClient()
        self._core = client.CoreV1Api(self._client)
        self._custom = client.CustomObjectsApi(self._client)
        self._coordination = client.CoordinationV1Api(self._client)

    def _plain(self, value: Any) -> Object:
        plain: Object = self._client.sanitize_for_serialization(value)
        return plain

    @staticmethod
    def _status(error: Exception) -> int | None:
        status = getattr(error, "status", None)
        return status if isinstance(status, int) else None

    def _read(self, call: Any, *args: Any) -> Object | None:
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        try:
            return self._plain(call(*args))
        except ApiException as error:
            if self._status(error) == 404:
                return None
            raise

    def _write(self, call: Any, *args: Any, missing_ok: bool = False) -> None:
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        try:
            call(*args)
        except ApiException as error:
            status = self._status(error)
            if status == 409:  # a stale resourceVersion or a taken name
                raise Conflict(str(error.reason)) from error
            if status == 422:
                body = str(getattr(error, "body", "") or "")
                if PATCH_TEST_FAILED in body.lower():
                    raise Conflict(body) from error
                raise Invalid(body or str(error.reason)) from error
            if status == 404 and missing_ok:
                return
            raise

    def get_node(self, name: str) -> Object | None:  # noqa: D102
        return self._read(self._core.read_node, name)

    def list_nodes(self) -> list[Object]:  # noqa: D102
        return list(self._plain(self._core.list_node()).get("items", []))

    def patch_node(self, name: str, patch: list[Object]) -> None:  # noqa: D102
        # A list body is sent as application/json-patch+json by the client.
        self._write(self._core.patch_node, name, patch)

    def get_pod(self, namespace: str, name: str) -> Object | None:  # noqa: D102
        return self._read(self._core.read_namespaced_pod, name, namespace)

    def create_pod(self, namespace: str, pod: Object) -> None:  # noqa: D102
        self._write(self._core.create_namespaced_pod, namespace, pod)

    def delete_pod(self, namespace: str, name: str) -> None:  # noqa: D102
        self._write(self._core.delete_namespaced_pod, name, namespace, missing_ok=True)

    def create_event(self, namespace: str, event: Object) -> None:  # noqa: D102
        self._write(self._core.create_namespaced_event, namespace, event)

    def list_nodeclaims(self) -> list[Object]:  # noqa: D102
        listed = self._custom.list_cluster_custom_object(
            NODECLAIM_GROUP, NODECLAIM_VERSION, NODECLAIM_PLURAL
        )
        return list(listed.get("items", []))

    def delete_nodeclaim(self, name: str) -> None:  # noqa: D102
        self._write(
            self._custom.delete_cluster_custom_object,
            NODECLAIM_GROUP, NODECLAIM_VERSION, NODECLAIM_PLURAL, name, missing_ok=True,
        )  # fmt: skip

    def get_lease(self, namespace: str, name: str) -> Object | None:  # noqa: D102
        return self._read(self._coordination.read_namespaced_lease, name, namespace)

    def create_lease(self, namespace: str, lease: Object) -> None:  # noqa: D102
        self._write(self._coordination.create_namespaced_lease, namespace, lease)

    def replace_lease(self, namespace: str, lease: Object) -> None:  # noqa: D102
        self._write(
            self._coordination.replace_namespaced_lease,
            lease["metadata"]["name"], namespace, lease,
        )  # fmt: skip
