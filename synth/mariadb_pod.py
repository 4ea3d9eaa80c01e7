"""The pod mariadb-operator runs for a ``MariaDB`` resource, as its StatefulSet would create it.

Built the way mariadb-operator v26.6.0 builds a standalone server (pkg/builder/pod_builder.go,
mariadbPodTemplate; pkg/builder/container_builder.go, mariadbContainers), after the defaults
it sets on the resource (api/v1alpha1/mariadb_types.go, MariaDB.SetDefaults): TLS on unless
``tls`` says otherwise, the service account named after the resource, the root password from
its Secret. Replication and Galera (an agent container, an init container, other probes) are
not derived: such a resource is refused. The operator's config hash annotations are left out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from components.slurm import MYSQL_UID

CONFIG_DIR: Final = "/etc/mysql/conf.d"
DATA_DIR: Final = "/var/lib/mysql"
PKI_DIR: Final = "/etc/pki"
PROBE_TIMING: Final = {"initialDelaySeconds": 20, "timeoutSeconds": 5, "periodSeconds": 10}
PROBE_THRESHOLDS: Final = (
    "initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold",
    "failureThreshold",
)  # fmt: skip
PROBE_HANDLERS: Final = ("exec", "httpGet", "tcpSocket")


def _probe(own: Mapping[str, Any] | None) -> dict[str, Any]:
    """A probe of the server (container_builder.go, mariadbProbe).

    The resource's own where it names a handler; otherwise the operator's ``SELECT 1`` as root,
    with whichever of the resource's thresholds are positive.

    Args:
        own: the resource's ``livenessProbe``, ``readinessProbe`` or ``startupProbe``.
    """
    probe = dict(own or {})
    if any(probe.get(handler) for handler in PROBE_HANDLERS):
        return copy.deepcopy(probe)
    query = 'mariadb -u root -p"${MARIADB_ROOT_PASSWORD}" -e "SELECT 1;"'
    thresholds = {k: probe[k] for k in PROBE_THRESHOLDS if (probe.get(k) or 0) > 0}
    return {"exec": {"command": ["bash", "-c", query]}, **PROBE_TIMING, **thresholds}


def _env(name: str, spec: Mapping[str, Any], tls: bool) -> list[dict[str, Any]]:
    """The server's environment (container_builder.go, mariadbEnv).

    Args:
        name: the resource's name.
        spec: the resource's spec.
        tls: whether TLS is on.
    """

    def field(path: str) -> dict[str, Any]:
        return {"fieldRef": {"fieldPath": path}}

    env: list[dict[str, Any]] = [
        {"name": "MYSQL_TCP_PORT", "value": str(spec.get("port") or 3306)},
        {"name": "MARIADB_ROOT_HOST", "value": "%"},
        # The operator's own CLUSTER_NAME; its chart's clusterName default.
        {"name": "CLUSTER_NAME", "value": "cluster.local"},
        {"name": "POD_NAME", "valueFrom": field("metadata.name")},
        {"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")},
        {"name": "POD_IP", "valueFrom": field("status.podIP")},
        {"name": "MARIADB_NAME", "value": name},
    ]
    if tls:
        env.append({"name": "TLS_ENABLED", "value": "true"})
        env += [
            {"name": f"TLS_{what}_PATH", "value": f"{PKI_DIR}/{file}"}
            for what, file in (
                ("CA_CERT", "ca.crt"), ("SERVER_CERT", "server.crt"), ("SERVER_KEY", "server.key"),
                ("CLIENT_CERT", "client.crt"), ("CLIENT_KEY", "client.key"),
            )
        ]  # fmt: skip
    if spec.get("rootEmptyPassword"):
        env.append({"name": "MARIADB_ALLOW_EMPTY_ROOT_PASSWORD", "value": "yes"})
    else:
        # MariaDB.SetDefaults: a generated Secret of the operator's unless one is named.
        root = spec.get("rootPasswordSecretKeyRef") or {"name": f"{name}-root", "key": "password"}
        ref = {"name": root["name"], "key": root["key"]}
        env.append({"name": "MARIADB_ROOT_PASSWORD", "valueFrom": {"secretKeyRef": ref}})
    if spec.get("timeZone") is None:
        env.append({"name": "MYSQL_INITDB_SKIP_TZINFO", "value": "1"})
    # The resource's env replaces a variable of the same name in place, or comes after.
    at = {variable["name"]: index for index, variable in enumerate(env)}
    for variable in spec.get("env") or []:
        if variable["name"] in at:
            env[at[variable["name"]]] = copy.deepcopy(variable)
        else:
            env.append(copy.deepcopy(variable))
    return env


def _mounts(spec: Mapping[str, Any], tls: bool) -> list[dict[str, Any]]:
    """The server's volume mounts (container_builder.go, mariadbVolumeMounts).

    Args:
        spec: the resource's spec.
        tls: whether TLS is on.
    """
    return [
        {"name": "config", "mountPath": CONFIG_DIR},
        *([{"name": "pki", "mountPath": PKI_DIR}] if tls else []),
        {"name": "storage", "mountPath": DATA_DIR},
        *copy.deepcopy(spec.get("volumeMounts") or []),
    ]


def _volumes(name: str, spec: Mapping[str, Any], tls: bool) -> list[dict[str, Any]]:
    """The pod's volumes (pod_builder.go, mariadbVolumes and mariadbConfigVolume).

    The data volume is the claim of the StatefulSet's template, which the StatefulSet
    controller puts first (kubernetes pkg/controller/statefulset/stateful_set_utils.go,
    updateStorage); an ephemeral one is an emptyDir after the others.

    Args:
        name: the resource's name.
        spec: the resource's spec.
        tls: whether TLS is on.
    """

    def config_map(ref: Mapping[str, Any]) -> dict[str, Any]:
        items = [{"key": ref["key"], "path": ref["key"]}]
        return {"configMap": {"name": ref["name"], "items": items}}

    def secret(secret_name: str, items: list[tuple[str, str]]) -> dict[str, Any]:
        keys = [{"key": key, "path": path} for key, path in items]
        return {"secret": {"name": secret_name, "items": keys}}

    sources = [config_map({"name": f"{name}-config-default", "key": "0-default.cnf"})]
    # MariaDB.SetDefaults: myCnf becomes a ConfigMap of the operator's unless one is named.
    my_cnf = spec.get("myCnfConfigMapKeyRef") or (
        {"name": f"{name}-config", "key": "my.cnf"} if spec.get("myCnf") else None
    )
    if my_cnf:
        sources.append(config_map(my_cnf))
    if tls:
        sources.append(config_map({"name": f"{name}-config-tls", "key": "1-tls.cnf"}))
    volumes: list[dict[str, Any]] = [{"name": "config", "projected": {"sources": sources}}]
    if tls:
        own_tls = spec.get("tls") or {}
        client = (own_tls.get("clientCertSecretRef") or {}).get("name") or f"{name}-client-cert"
        server = (own_tls.get("serverCertSecretRef") or {}).get("name") or f"{name}-server-cert"
        pki = [
            secret(f"{name}-ca-bundle", [("ca.crt", "ca.crt")]),
            secret(client, [("tls.crt", "client.crt"), ("tls.key", "client.key")]),
            secret(server, [("tls.crt", "server.crt"), ("tls.key", "server.key")]),
        ]
        volumes.append({"name": "pki", "projected": {"sources": pki}})
    if (spec.get("storage") or {}).get("ephemeral"):
        volumes.append({"name": "storage", "emptyDir": {}})
    else:
        claim = {"claimName": f"storage-{name}-0"}
        volumes.insert(0, {"name": "storage", "persistentVolumeClaim": claim})
    volumes += copy.deepcopy(spec.get("volumes") or [])
    return volumes


def _extra_container(
    own: Mapping[str, Any], default_name: str, env: list[dict[str, Any]], spec: Mapping[str, Any]
) -> dict[str, Any]:
    """An init or sidecar container of the resource (container_builder.go, buildContainer).

    It gets the server's environment and mounts before its own, and nothing else of the
    server's (no security context).

    Args:
        own: the resource's container.
        default_name: its name where it has none (``init-0``, ``sidecar-0``).
        env: the server's environment.
        spec: the resource's spec.
    """
    container: dict[str, Any] = {
        "name": own.get("name") or default_name,
        "image": own.get("image"),
        "env": [*env, *copy.deepcopy(own.get("env") or [])],
        "volumeMounts": [*_mounts(spec, _tls(spec)), *copy.deepcopy(own.get("volumeMounts") or [])],
    }
    for key in ("imagePullPolicy", "command", "args", "resources"):
        if own.get(key):
            container[key] = copy.deepcopy(own[key])
    return container


def _tls(spec: Mapping[str, Any]) -> bool:
    """Whether TLS is on: unless ``tls`` is given without ``enabled`` (MariaDB.SetDefaults).

    Args:
        spec: the resource's spec.
    """
    return spec.get("tls") is None or bool(spec["tls"].get("enabled"))


def _server(name: str, spec: Mapping[str, Any], env: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``mariadb`` container (container_builder.go, mariadbContainers).

    Args:
        name: the resource's name.
        spec: the resource's spec.
        env: the server's environment.
    """
    container: dict[str, Any] = {"name": "mariadb", "image": spec.get("image")}
    # buildContainerWithTemplate: what the resource's container template says, as it says it.
    for key in (
        "imagePullPolicy", "command", "args", "envFrom", "securityContext", "resources",
        "lifecycle",
    ):  # fmt: skip
        if spec.get(key):
            container[key] = copy.deepcopy(spec[key])
    container["env"] = env
    container["volumeMounts"] = _mounts(spec, _tls(spec))
    container["ports"] = [{"name": "mariadb", "containerPort": spec.get("port") or 3306}]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        container[probe] = _probe(spec.get(probe))
    return container


def mariadb_pod_template(mariadb: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template mariadb-operator puts in the StatefulSet of a ``MariaDB``.

    Args:
        mariadb: the MariaDB resource's manifest.

    Raises:
        ValueError: it runs replication or Galera, whose pods are not derived here.
    """
    name = str(mariadb["metadata"]["name"])
    spec = mariadb.get("spec") or {}
    for topology in ("replication", "galera"):
        if (spec.get(topology) or {}).get("enabled"):
            raise ValueError(f"MariaDB {name}: the {topology} pods are not derived")
    env = _env(name, spec, _tls(spec))
    labels = {
        **((spec.get("inheritMetadata") or {}).get("labels") or {}),
        **((spec.get("podMetadata") or {}).get("labels") or {}),
        "app.kubernetes.io/name": "mariadb",
        "app.kubernetes.io/instance": name,
    }
    annotations = {
        **((spec.get("inheritMetadata") or {}).get("annotations") or {}),
        **((spec.get("podMetadata") or {}).get("annotations") or {}),
    }
    # securitycontext_builder.go, buildPodSecurityContextWithUserGroup: the resource's
    # podSecurityContext replaces the operator's whole.
    security = spec.get("podSecurityContext") or {
        "runAsNonRoot": True, "runAsUser": MYSQL_UID, "runAsGroup": MYSQL_UID,
        "fsGroup": MYSQL_UID,
    }  # fmt: skip
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "serviceAccountName": spec.get("serviceAccountName") or name,
        "restartPolicy": "Always",
        "containers": [
            _server(name, spec, env),
            *(
                _extra_container(own, f"sidecar-{index}", env, spec)
                for index, own in enumerate(spec.get("sidecarContainers") or [])
            ),
        ],
        "volumes": _volumes(name, spec, _tls(spec)),
        "securityContext": copy.deepcopy(security),
    }
    init = [
        _extra_container(own, f"init-{index}", env, spec)
        for index, own in enumerate(spec.get("initContainers") or [])
    ]
    if init:
        pod_spec["initContainers"] = init
    own_affinity = spec.get("affinity") or {}
    affinity = {k: v for k, v in own_affinity.items() if k != "antiAffinityEnabled"}
    if own_affinity.get("antiAffinityEnabled") and "podAntiAffinity" not in affinity:
        # AffinityConfig.SetDefaults: no two of its pods on one node.
        term = {
            "labelSelector": {"matchExpressions": [
                {"key": "app.kubernetes.io/instance", "operator": "In", "values": [name]}
            ]},
            "topologyKey": "kubernetes.io/hostname",
        }  # fmt: skip
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    if affinity:
        pod_spec["affinity"] = affinity
    for key in (
        "enableServiceLinks", "imagePullSecrets", "nodeSelector", "tolerations",
        "priorityClassName", "topologySpreadConstraints", "terminationGracePeriodSeconds",
    ):  # fmt: skip
        if spec.get(key) is not None and spec.get(key) != []:
            pod_spec[key] = copy.deepcopy(spec[key])
    metadata: dict[str, Any] = {"labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": pod_spec}
