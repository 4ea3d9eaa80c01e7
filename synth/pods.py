"""The pods that custom resources stand for, as the controllers that own them would create them.

Each Trainer runtime's replicated jobs, each Ray object's head, worker groups and submitter,
each Slinky login set's and node set's pod, Slurm's daemons and the accounting database,
written to ``pods/`` so that scanners and reviewers read what would run. Which controller
builds each, and from which upstream file: docs/concepts/offline-synthesis.md, "The pods behind
custom resources".
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from components.kuberay import RAY_API, RAY_POD_KINDS, ray_pod_templates
from components.slurm import (
    LOGIN_SSH_PORT,
    MARIADB_API,
    SLURM_APP_LABEL,
    SLURMCTLD_PORT,
    SLURMD_PORT,
    SLURMDBD_PORT,
    SLURMRESTD_PORT,
    chart_rendered,
)
from components.slurm import RELEASE as SLURM_RELEASE
from synth.helm_values import helm_coalesced
from synth.mariadb_pod import mariadb_pod_template

RUNTIME_KINDS: Final = ("TrainingRuntime", "ClusterTrainingRuntime")
NODE_SET_KIND: Final = "NodeSet"
MARIADB_KIND: Final = (MARIADB_API, "MariaDB")
RUNTIME_NAMESPACE: Final = "kubeflow-system"
"""Where a ClusterTrainingRuntime's pods would be shown (each job's own namespace, in truth)."""

SLURMD_CAPABILITIES: Final = ("BPF", "NET_ADMIN", "SYS_ADMIN", "SYS_NICE")
"""What the operator adds to slurmd besides ``privileged`` (worker_app.go, slurmdContainer)."""
SLURM_ETC_MOUNTS: Final = (
    {"name": "slurm-etc", "mountPath": "/etc/slurm", "readOnly": True},
    {"name": "slurm-logfile", "mountPath": "/var/log/slurm"},
)


def _pod(name: str, namespace: str, template: Mapping[str, Any], source: str) -> dict[str, Any]:
    metadata = copy.deepcopy(dict(template.get("metadata") or {}))
    annotations = {**metadata.get("annotations", {}), "trainingplatform.io/pod-of": source}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**metadata, "name": name, "namespace": namespace, "annotations": annotations},
        "spec": copy.deepcopy(dict(template.get("spec") or {})),
    }


def runtime_pods(runtime: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """One Pod per replicated job of a (Cluster)TrainingRuntime.

    Args:
        runtime: the runtime's manifest.
    """
    metadata = runtime["metadata"]
    namespace = metadata.get("namespace", RUNTIME_NAMESPACE)
    source = f"{runtime['kind']}/{namespace}/{metadata['name']}"
    jobs = ((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}
    for job in jobs.get("replicatedJobs") or []:
        template = ((job.get("template") or {}).get("spec") or {}).get("template") or {}
        yield _pod(f"{metadata['name']}-{job['name']}", namespace, template, source)


RAY_NODE_TYPE_LABEL: Final = "ray.io/node-type"
RAY_CLUSTER_LABEL: Final = "ray.io/cluster"
RAY_WAIT_RESOURCES: Final = {"cpu": "200m", "memory": "256Mi"}
"""Requests and limits of the init container KubeRay gives every worker (kuberay v1.7.0
ray-operator/controllers/ray/common/pod.go, DefaultWorkerPodTemplate)."""


def _ray_role(where: str) -> tuple[str, str]:
    """(pod name suffix, ``ray.io/node-type``) of a place :func:`ray_pod_templates` names."""
    last = where.rsplit(".", 1)[-1]
    if last.startswith("workerGroupSpecs["):
        return f"worker-{last.removeprefix('workerGroupSpecs[').removesuffix(']')}", "worker"
    if last == "headGroupSpec":
        return "head", "head"
    return "submitter", ""


def ray_pods(ray_object: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """One Pod per pod template of a RayCluster, RayJob or RayService.

    Its head, one of each worker group, and a RayJob's submitter
    (:func:`components.kuberay.ray_pod_templates`), labelled as KubeRay labels them
    (``ray.io/node-type``, ``ray.io/cluster``: ray-operator/controllers/ray/common/pod.go,
    labelPod). A worker gets the ``wait-gcs-ready`` init container KubeRay adds by default: the
    Ray container's image, security context, environment and mounts, with fixed requests
    (DefaultWorkerPodTemplate). The containers' generated commands, ports and probes are left
    out; scanners judge what the template states.

    Args:
        ray_object: the object's manifest.
    """
    kind, metadata = str(ray_object["kind"]), ray_object["metadata"]
    name, namespace = metadata["name"], metadata.get("namespace", "default")
    source = f"{kind}/{namespace}/{name}"
    for where, template in ray_pod_templates(kind, ray_object.get("spec") or {}):
        suffix, node_type = _ray_role(where)
        pod = _pod(f"{name}-{suffix}", namespace, template, source)
        if node_type:
            labels = pod["metadata"].setdefault("labels", {})
            labels.update({RAY_NODE_TYPE_LABEL: node_type, RAY_CLUSTER_LABEL: name})
        containers = pod["spec"].get("containers") or []
        if node_type == "worker" and containers:
            ray = containers[0]
            wait = {
                "name": "wait-gcs-ready",
                "image": ray.get("image"),
                "resources": {"requests": dict(RAY_WAIT_RESOURCES),
                              "limits": dict(RAY_WAIT_RESOURCES)},
            }  # fmt: skip
            for field in ("securityContext", "env", "volumeMounts"):
                if field in ray:
                    wait[field] = copy.deepcopy(ray[field])
            pod["spec"]["initContainers"] = [*pod["spec"].get("initContainers", []), wait]
        yield pod


MERGE_KEYS: Final[dict[str, str]] = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
}
"""Lists a strategic merge patch merges by key (the API types' ``patchMergeKey``).

Every other list is replaced."""


def _empty(value: Any) -> bool:
    return value in (None, "", 0, False, [], {})


def _cleaned(patch: Any) -> Any:
    """``patch`` without its empty values, as the operator removes them before merging.

    slurm-operator v1.2.1 internal/utils/structutils/kube.go, removeEmpty: ``privileged:
    false`` in a NodeSet leaves the operator's ``true`` standing.
    """
    if not isinstance(patch, Mapping):
        return patch
    out = {}
    for key, value in patch.items():
        cleaned = _cleaned(value)
        if not _empty(cleaned):
            out[key] = cleaned
    return out


def strategic_merge(base: Any, patch: Any, key: str = "") -> Any:
    """``patch`` merged over ``base`` as ``strategicpatch.StrategicMergePatch`` merges them.

    That is how the operator merges its base pod with a NodeSet's: maps recursively, keyed
    lists (:data:`MERGE_KEYS`) by their key, other lists and scalars replaced.

    Args:
        base: the operator's value.
        patch: the NodeSet's value (already :func:`_cleaned`).
        key: the field both sit under, which picks a list's merge key.
    """
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        merged = dict(base)
        for field_name, value in patch.items():
            merged[field_name] = (
                strategic_merge(base[field_name], value, field_name)
                if field_name in base
                else value
            )
        return merged
    merge_key = MERGE_KEYS.get(key)
    if merge_key and isinstance(base, list) and isinstance(patch, list):
        by_key = {entry.get(merge_key): entry for entry in patch}
        merged_list = [
            strategic_merge(entry, by_key.pop(entry.get(merge_key)), key)
            if entry.get(merge_key) in by_key
            else entry
            for entry in base
        ]
        return merged_list + [entry for entry in patch if entry.get(merge_key) in by_key]
    return copy.deepcopy(patch)


def _joined(base: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Containers as the operator joins them (structutils.MergeList: appended, not merged).

    The API server refuses a pod with two containers of one name, so such a NodeSet is an error.
    """
    joined = [*base, *extra]
    names = [str(c.get("name")) for c in joined]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"the pod would have two containers named {duplicates}")
    return joined


def node_set_pod(node_set: Mapping[str, Any]) -> dict[str, Any]:
    """The worker pod the Slinky operator creates for a NodeSet.

    Args:
        node_set: the NodeSet's manifest.

    Raises:
        ValueError: the NodeSet's containers clash with the operator's.
    """
    metadata = node_set["metadata"]
    spec = node_set.get("spec") or {}
    template = spec.get("template") or {}
    own = _cleaned(copy.deepcopy(dict(template.get("spec") or {})))

    def probe(path: str, **timing: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": "slurmd"}, **timing}

    ssh = spec.get("ssh") or {}
    ports = [{"name": "slurmd", "containerPort": SLURMD_PORT, "protocol": "TCP"}]
    mounts = [dict(m) for m in SLURM_ETC_MOUNTS]
    volumes: list[dict[str, Any]] = [
        {"name": "slurm-etc", "projected": {"sources": []}},
        {"name": "slurm-logfile", "emptyDir": {}},
    ]
    if ssh.get("enabled"):
        # worker_app.go: SSH on 22 with the NodeSet's sshd config and the sssd.conf it names.
        ports.append({"name": "ssh", "containerPort": LOGIN_SSH_PORT, "protocol": "TCP"})
        mounts += [
            {"name": "ssh-config", "mountPath": "/etc/ssh/sshd_config",
             "subPath": "sshd_config", "readOnly": True},
            {"name": "sssd-conf", "mountPath": "/etc/sssd/sssd.conf", "subPath": "sssd.conf",
             "readOnly": True},
        ]  # fmt: skip
        ssh_config = {
            "name": f"{metadata['name']}-ssh-config",
            "items": [{"key": "sshd_config", "path": "sshd_config", "mode": 0o600}],
        }
        volumes += [
            {"name": "ssh-config",
             "projected": {"defaultMode": 0o600, "sources": [{"configMap": ssh_config}]}},
            _secret_volume("sssd-conf", ssh["sssdConfRef"]["name"],
                           [(ssh["sssdConfRef"]["key"], "sssd.conf", 0o600)]),
        ]  # fmt: skip
    slurmd_base = {
        "name": "slurmd",
        "ports": ports,
        "startupProbe": probe("/livez", failureThreshold=6, periodSeconds=10),
        "livenessProbe": probe("/livez", failureThreshold=6, periodSeconds=10),
        "readinessProbe": probe("/readyz"),
        "securityContext": {
            "privileged": True,
            "capabilities": {"add": list(SLURMD_CAPABILITIES)},
        },
        "volumeMounts": mounts,
    }
    slurmd = strategic_merge(slurmd_base, _cleaned(copy.deepcopy(dict(spec.get("slurmd") or {}))))
    logfile = strategic_merge(
        _logfile_container("slurmd.log"), _cleaned(copy.deepcopy(dict(spec.get("logfile") or {})))
    )
    base_spec = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "volumes": volumes,
    }
    own_containers = list(own.pop("containers", []))
    own_init = list(own.pop("initContainers", []))
    pod_spec = strategic_merge(base_spec, own)
    pod_spec["containers"] = _joined([slurmd], own_containers)
    pod_spec["initContainers"] = _joined([logfile], own_init)
    labels = {
        **(metadata.get("labels") or {}),
        **((template.get("metadata") or {}).get("labels") or {}),
        SLURM_APP_LABEL: "slurmd",
        "app.kubernetes.io/instance": metadata["name"],
    }
    source = f"NodeSet/{metadata.get('namespace')}/{metadata['name']}"
    return _pod(
        f"{metadata['name']}-0",
        str(metadata.get("namespace")),
        {"metadata": {**(template.get("metadata") or {}), "labels": labels}, "spec": pod_spec},
        source,
    )


def chart_merged(defaults: Any, values: Any) -> Any:
    """``values`` over ``defaults`` as Sprig's ``mergeOverwrite`` merges them in the chart.

    Maps merge recursively; any other value of ``values`` replaces the default, except an
    empty one (mergo's override leaves a default standing under an empty value).

    Args:
        defaults: the chart's ``loginsetDefaults``.
        values: one ``loginsets`` entry.
    """
    if isinstance(defaults, Mapping) and isinstance(values, Mapping):
        merged = dict(copy.deepcopy(defaults))
        for key, value in values.items():
            merged[key] = chart_merged(defaults[key], value) if key in defaults else value
        return merged
    return copy.deepcopy(defaults if _empty(values) else values)


def _image(image: Any) -> str:
    """The chart's ``slurm.format-image`` (``repository@digest`` or ``repository:tag``).

    The chart refuses to render a container without an image.
    """
    if not image:
        raise ValueError("the slurm chart requires an image for every login set container")
    return chart_rendered(image)


def _chart_container(values: Mapping[str, Any], pull: str) -> dict[str, Any]:
    """A container as the chart's ``slurm.format-container`` writes it into the LoginSet."""
    container = {k: copy.deepcopy(v) for k, v in values.items() if k != "image"}
    container["image"] = _image(values.get("image"))
    container["imagePullPolicy"] = container.get("imagePullPolicy") or pull
    return container


def _secret_volume(
    name: str, secret: str, items: Sequence[tuple[str, str, int | None]]
) -> dict[str, Any]:
    projection: dict[str, Any] = {
        "name": secret,
        "items": [
            {"key": key, "path": path, **({"mode": mode} if mode is not None else {})}
            for key, path, mode in items
        ],
    }
    return {"name": name, "projected": {"defaultMode": 0o600, "sources": [{"secret": projection}]}}


SSH_HOST_KEYS: Final = tuple(
    f"ssh_host_{kind}_key{suffix}"
    for kind in ("rsa", "ed25519", "ecdsa")
    for suffix in ("", ".pub")
)
"""The host key files the operator mounts into login pods (loginbuilder, SshHost*KeyFile)."""


def _login_container(controller: str) -> dict[str, Any]:
    """The operator's login container before the LoginSet's own (loginContainer)."""
    sackd = f"--conf-server {controller}:{SLURMCTLD_PORT}"

    def mount(volume: str, path: str, file: str) -> dict[str, Any]:
        return {"name": volume, "mountPath": path, "subPath": file, "readOnly": True}

    return {
        "name": "login",
        "env": [{"name": "SACKD_OPTIONS", "value": sackd}],
        "ports": [{"name": "login", "containerPort": LOGIN_SSH_PORT, "protocol": "TCP"}],
        "readinessProbe": {"exec": {"command": ["test", "-S", "/run/slurm/sack.socket"]}},
        "volumeMounts": [
            {"name": "slurm-etc", "mountPath": "/etc/slurm", "readOnly": True},
            {"name": "sackd-dir", "mountPath": "/run/slurm"},
            *(mount("ssh-host-keys", f"/etc/ssh/{file}", file) for file in SSH_HOST_KEYS),
            mount("ssh-config", "/etc/ssh/sshd_config", "sshd_config"),
            mount("ssh-config", "/root/.ssh/authorized_keys", "authorized_keys"),
            mount("sssd-conf", "/etc/sssd/sssd.conf", "sssd.conf"),
        ],
    }


INITCONF: Final = {
    "name": "initconf",
    "env": [{"name": "SLURM_USER", "value": "slurm"}],
    "command": ["sh", "-c", "<the operator's initconf.sh>"],
    "volumeMounts": [
        {"name": "slurm-etc", "mountPath": "/mnt/etc/slurm"},
        {"name": "slurm-config", "mountPath": "/mnt/slurm", "readOnly": True},
    ],
}
"""What the operator's init container copies Slurm's config and key with (common.go)."""


def _login_volumes(name: str, full_name: str, sssd: tuple[str, str]) -> list[dict[str, Any]]:
    """The operator's login pod volumes (loginVolumes): its config, keys and sssd.conf.

    Args:
        name: the LoginSet's name (its host keys' Secret and sshd ConfigMap are named after it).
        full_name: the chart's full name (the auth key Secret's prefix).
        sssd: the Secret and key holding ``sssd.conf``.
    """
    host_keys = [(f, f, 0o644 if f.endswith(".pub") else 0o600) for f in SSH_HOST_KEYS]
    ssh_config = {
        "name": f"{name}-ssh-config",
        "items": [{"key": f, "path": f, "mode": 0o600} for f in ("sshd_config", "authorized_keys")],
    }
    return [
        {"name": "slurm-etc", "emptyDir": {"medium": "Memory"}},
        {"name": "sackd-dir", "emptyDir": {"medium": "Memory"}},
        _secret_volume(
            "slurm-config", f"{full_name}-auth-slurm", [("slurm.key", "slurm.key", None)]
        ),
        _secret_volume("ssh-host-keys", f"{name}-ssh-host-keys", host_keys),
        {
            "name": "ssh-config",
            "projected": {"defaultMode": 0o600, "sources": [{"configMap": ssh_config}]},
        },
        _secret_volume("sssd-conf", sssd[0], [(sssd[1], "sssd.conf", 0o600)]),
    ]


def _full_name(release: Mapping[str, Any]) -> str:
    """The chart's ``slurm.fullname`` (helm/slurm/templates/_helpers.tpl).

    ``fullnameOverride``, else the release's name, with ``-slurm`` unless it holds it.

    Args:
        release: the Helm release as ``helm/<release>.yaml`` has it.
    """
    override = (release.get("values") or {}).get("fullnameOverride")
    name = str(release["release"])
    return str(override) if override else (name if "slurm" in name else f"{name}-slurm")


def login_set_pods(
    release: Mapping[str, Any], chart_defaults: Mapping[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """The login pod of every LoginSet the ``slurm`` chart renders from ``release``'s values.

    Args:
        release: the Helm release as ``helm/<release>.yaml`` has it (``values``, ``namespace``).
        chart_defaults: the chart's own ``values.yaml``, whose ``loginsetDefaults`` the chart
            merges under each entry. Synthesis has no chart (default: none, so what the stack
            leaves unset is missing here); the tests pass the chart's values and show that the
            defaults add nothing the scan needs.
    """
    values = release.get("values") or {}
    chart = chart_defaults or {}
    defaults = dict(chart.get("loginsetDefaults") or {})
    namespace = str(release.get("namespace"))
    full_name = _full_name(release)
    pull = values.get("imagePullPolicy") or chart.get("imagePullPolicy", "IfNotPresent")
    # The chart names the Controller (the loginset's controllerRef) after its full name; sackd
    # fetches its config from the controller's service, <name>-controller.<namespace>
    # (common.go, ConfiglessArgs; api/v1beta1/controller_keys.go, ServiceKey is Key, which
    # appends "-controller"; ServiceFQDNShort).
    controller = f"{full_name}-controller.{namespace}"
    sssd_ref = (values.get("sssd") or {}).get("secretRef") or {}
    sssd = (sssd_ref.get("name") or f"{full_name}-sssd-conf", sssd_ref.get("key") or "sssd.conf")
    for key, entry in (values.get("loginsets") or {}).items():
        login_set = chart_merged(defaults, entry or {})
        if not login_set.get("enabled", True):
            continue
        name = f"{full_name}-login-{key}"
        own = _cleaned(copy.deepcopy(dict(login_set.get("podSpec") or {})))
        own["imagePullSecrets"] = [
            *(own.get("imagePullSecrets") or []), *(values.get("imagePullSecrets") or [])
        ]  # fmt: skip
        if not own["imagePullSecrets"]:
            del own["imagePullSecrets"]
        own_containers = list(own.pop("containers", []))
        own_init = list(own.pop("initContainers", []))
        base_spec = {
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "dnsConfig": {"searches": [f"slurm-workers-{full_name}.{namespace}.svc.cluster.local"]},
            "volumes": _login_volumes(name, full_name, sssd),
        }
        pod_spec = strategic_merge(base_spec, own)
        login, initconf = (
            strategic_merge(base, _cleaned(_chart_container(login_set.get(field) or {}, pull)))
            for base, field in ((_login_container(controller), "login"), (INITCONF, "initconf"))
        )
        pod_spec["containers"] = _joined([login], own_containers)
        pod_spec["initContainers"] = _joined([initconf], own_init)
        metadata = login_set.get("metadata") or {}
        labels = {
            **(metadata.get("labels") or {}),
            "app.kubernetes.io/part-of": "slurm",
            SLURM_APP_LABEL: "login",
            "app.kubernetes.io/instance": name,
            "app.kubernetes.io/component": "login",
        }
        annotations = {
            **(metadata.get("annotations") or {}),
            "kubectl.kubernetes.io/default-container": "login",
        }
        yield _pod(
            name,
            namespace,
            {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec},
            f"LoginSet/{namespace}/{name}",
        )


PROBES: Final = ("startupProbe", "livenessProbe", "readinessProbe")
MERGE_LISTS: Final = ("containers", "initContainers")
PROBE_HANDLERS: Final = ("exec", "httpGet", "tcpSocket", "grpc")


def operator_container(base: Mapping[str, Any], merge: Mapping[str, Any]) -> dict[str, Any]:
    """A container as Slinky's builders finish it: the custom resource's over the operator's.

    slurm-operator v1.2.1 internal/builder/common/container.go, BuildContainer: the args are
    joined (the operator's first); a probe the resource sets replaces the handler of the
    operator's (an exec probe does not keep the operator's httpGet beside it); the rest is a
    strategic merge of the resource's container without its empty values.

    Args:
        base: the operator's container.
        merge: the custom resource's container (what the chart wrote from the values).
    """
    out = copy.deepcopy(dict(base))
    args = [*(out.pop("args", None) or []), *(merge.get("args") or [])]
    for probe in PROBES:
        theirs = merge.get(probe)
        if probe in out and isinstance(theirs, Mapping):
            kept = {k: v for k, v in out[probe].items() if k not in PROBE_HANDLERS}
            out[probe] = {**kept, **{k: v for k, v in theirs.items() if k in PROBE_HANDLERS}}
    patch = _cleaned({k: copy.deepcopy(v) for k, v in merge.items() if k != "args"})
    merged: dict[str, Any] = strategic_merge(out, patch)
    if args:
        merged["args"] = args
    return merged


def operator_pod_spec(base: Mapping[str, Any], merge: Mapping[str, Any]) -> dict[str, Any]:
    """A pod spec as Slinky's builders finish it: the custom resource's over the operator's.

    slurm-operator v1.2.1 internal/builder/common/pod_template.go, BuildPodTemplate: containers
    and init containers are joined (:func:`_joined`), everything else strategically merged
    without the resource's empty values.

    Args:
        base: the operator's pod spec.
        merge: the custom resource's ``template.spec``.
    """
    own = _cleaned(copy.deepcopy(dict(merge)))
    spec = {k: copy.deepcopy(v) for k, v in base.items() if k not in MERGE_LISTS}
    joined = {key: _joined(list(base.get(key) or []), own.pop(key, [])) for key in MERGE_LISTS}
    merged: dict[str, Any] = strategic_merge(spec, own)
    merged.update({key: containers for key, containers in joined.items() if containers})
    return merged


def _secret_source(ref: tuple[str, str], path: str) -> dict[str, Any]:
    """A projected volume's source: one key of a Secret.

    Args:
        ref: the Secret's name and key.
        path: the file it becomes.
    """
    return {"secret": {"name": ref[0], "items": [{"key": ref[1], "path": path}]}}


def _key_ref(values: Mapping[str, Any], field: str, default: tuple[str, str]) -> tuple[str, str]:
    """A Secret the chart names from ``<field>.secretRef``, or its own (_slurm.tpl).

    Args:
        values: the chart's values.
        field: ``slurmKey`` or ``jwtKey``.
        default: the chart's own Secret and key.
    """
    ref = (values.get(field) or {}).get("secretRef") or {}
    return str(ref.get("name") or default[0]), str(ref.get("key") or default[1])


SLURM_UID: Final = 401
"""The ``slurm`` user of Slinky's images, as which slurmctld and slurmdbd run (common/const.go)."""
NOBODY_UID: Final = 65534
"""slurmrestd's user (restapibuilder/restapi_app.go)."""
SLURMCTLD_SPOOL: Final = "/var/spool/slurmctld"
LOG_DIR: Final = "/var/log/slurm"


def _run_as(uid: int) -> dict[str, Any]:
    """The operator's security context of a daemon: non-root, as ``uid`` and its group.

    Args:
        uid: the image's user (and group) id.
    """
    return {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid}


def _logfile_container(log_file: str) -> dict[str, Any]:
    """The operator's log sidecar, which prints what the daemon writes to ``log_file`` (a pipe).

    slurm-operator v1.2.1 internal/builder/common/common.go, LogfileContainer.

    Args:
        log_file: the daemon's log file name, under :data:`LOG_DIR`.
    """
    return {
        "name": "logfile",
        "env": [{"name": "SOCKET", "value": f"{LOG_DIR}/{log_file}"}],
        "command": ["sh", "-c", "<the operator's logfile.sh>"],
        "restartPolicy": "Always",
        "volumeMounts": [{"name": "slurm-logfile", "mountPath": LOG_DIR}],
    }


def _memory_dir(name: str) -> dict[str, Any]:
    """An emptyDir in memory, as the operator's log and pid volumes are (common.go).

    Args:
        name: the volume's name.
    """
    return {"name": name, "emptyDir": {"medium": "Memory"}}


class _Chart:
    """What the ``slurm`` chart writes into a Controller, RestApi or Accounting resource.

    slurm-operator v1.2.1 helm/slurm/templates/{controller,restapi,accounting}/*-cr.yaml: each
    component's containers through ``slurm.format-container`` (the image as one string, the
    chart-wide pull policy where the container names none) and its ``podSpec`` with the
    chart-wide pull secrets after its own and the priority class (none unless
    ``priorityClass.enabled``).
    """

    def __init__(self, release: Mapping[str, Any], chart_defaults: Mapping[str, Any]) -> None:
        """The release's values as the chart renders them.

        Args:
            release: the Helm release as ``helm/<release>.yaml`` has it.
            chart_defaults: the chart's ``values.yaml`` (empty: none).
        """
        self.values: dict[str, Any] = helm_coalesced(chart_defaults, release.get("values") or {})
        self.namespace = str(release.get("namespace"))
        self.full_name = _full_name(release)
        self.pull = self.values.get("imagePullPolicy") or "IfNotPresent"  # the chart's default

    def section(self, component: str) -> dict[str, Any]:
        """One component's values.

        Args:
            component: ``controller``, ``restapi`` or ``accounting``.
        """
        section: dict[str, Any] = self.values.get(component) or {}
        return section

    def container(self, component: str, field: str) -> dict[str, Any]:
        """One of a component's containers as the resource holds it.

        Args:
            component: ``controller``, ``restapi`` or ``accounting``.
            field: the container's values (``slurmctld``, ``logfile``...).
        """
        return _chart_container(self.section(component).get(field) or {}, self.pull)

    def pod_spec(self, component: str) -> dict[str, Any]:
        """A component's ``template.spec`` in the resource.

        Args:
            component: ``controller``, ``restapi`` or ``accounting``.
        """
        spec = copy.deepcopy(dict(self.section(component).get("podSpec") or {}))
        spec["imagePullSecrets"] = [
            *(spec.get("imagePullSecrets") or []), *(self.values.get("imagePullSecrets") or [])
        ]  # fmt: skip
        priority = self.values.get("priorityClass") or {}
        default_priority = (
            priority.get("name") or "slurm-priority-critical" if priority.get("enabled") else ""
        )
        spec["priorityClassName"] = spec.get("priorityClassName") or default_priority
        return spec

    def pod(self, name: str, component: str, app: str, spec: dict[str, Any]) -> dict[str, Any]:
        """The pod, labelled as the operator labels it (internal/builder/labels/labels.go).

        The chart puts the component's ``metadata`` on the resource and its pod template.

        Args:
            name: the pod's name.
            component: ``controller``, ``restapi`` or ``accounting`` (its component label).
            app: the daemon (its name label and default container).
            spec: the pod's spec.
        """
        metadata = self.section(component).get("metadata") or {}
        labels = {
            **(metadata.get("labels") or {}),
            "app.kubernetes.io/part-of": "slurm",
            SLURM_APP_LABEL: app,
            "app.kubernetes.io/instance": self.full_name,
            "app.kubernetes.io/component": component,
        }
        annotations = {
            **(metadata.get("annotations") or {}),
            "kubectl.kubernetes.io/default-container": app,
        }
        kind = {"controller": "Controller", "restapi": "RestApi", "accounting": "Accounting"}
        return _pod(
            name,
            self.namespace,
            {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec},
            f"{kind[component]}/{self.namespace}/{self.full_name}",
        )

    def keys(self) -> tuple[tuple[str, str], tuple[str, str]]:
        """The Secrets with Slurm's auth key and the JWT key."""
        return (
            _key_ref(self.values, "slurmKey", (f"{self.full_name}-auth-slurm", "slurm.key")),
            _key_ref(self.values, "jwtKey", (f"{self.full_name}-auth-jwt", "jwt.key")),
        )

    def jwks(self) -> list[dict[str, Any]]:
        """The JWKS ConfigMap's projection where ``jwksKeys.enabled``, else none."""
        jwks = self.values.get("jwksKeys") or {}
        if not jwks.get("enabled"):
            return []
        ref = jwks.get("configMapRef") or {}
        name, key = ref.get("name") or f"{self.full_name}-auth-jwks", ref.get("key") or "jwks.json"
        return [{"configMap": {"name": name, "items": [{"key": key, "path": "jwks.json"}]}}]


CONTROLLER_CONFIG_MAPS: Final = {
    "configFiles": "config-extra",
    "prologScripts": "prolog-scripts",
    "epilogScripts": "epilog-scripts",
    "prologSlurmctldScripts": "prolog-slurmctld-scripts",
    "epilogSlurmctldScripts": "epilog-slurmctld-scripts",
}
"""The chart's ConfigMaps a Controller names when their values are set (controller-cr.yaml,
controller/_helpers.tpl); the vendor ones (off in the chart and in every stack) are left out."""


def _controller_pod(chart: _Chart) -> dict[str, Any]:
    """The slurmctld pod (controllerbuilder/controller_app.go, controllerPodTemplate).

    Args:
        chart: the chart's view of the release.
    """
    full_name, controller = chart.full_name, chart.section("controller")
    slurm_key, jwt_key = chart.keys()
    extra = sorted(
        f"{full_name}-{suffix}" for field, suffix in CONTROLLER_CONFIG_MAPS.items()
        if chart.values.get(field)
    )  # fmt: skip
    sources = [
        {"configMap": {"name": f"{full_name}-config"}},
        _secret_source(slurm_key, "slurm.key"),
        _secret_source(jwt_key, "jwt.key"),
        *({"configMap": {"name": name}} for name in extra),
        *chart.jwks(),
    ]
    volumes = [
        {"name": "slurm-etc", "projected": {"defaultMode": 0o610, "sources": sources}},
        _memory_dir("slurm-logfile"),
        _memory_dir("run"),
        {"name": "slurm-authsocket", "emptyDir": {}},
    ]
    # controller_app.go, BuildController: the state on a claim of the StatefulSet's template
    # (which the StatefulSet controller puts first among the pod's volumes: kubernetes
    # pkg/controller/statefulset/stateful_set_utils.go, updateStorage), an existing claim
    # or an emptyDir.
    persistence = controller.get("persistence") or {}
    if persistence.get("enabled", True) and not persistence.get("existingClaim"):
        claim = {"claimName": f"statesave-{full_name}-controller-0"}
        volumes.insert(0, {"name": "statesave", "persistentVolumeClaim": claim})
    elif persistence.get("enabled", True):
        claim = {"claimName": persistence["existingClaim"]}
        volumes.append({"name": "statesave", "persistentVolumeClaim": claim})
    else:
        volumes.append({"name": "statesave", "emptyDir": {}})
    cluster_name = chart.values.get("clusterName") or f"{chart.namespace}_{full_name}"

    def probe(path: str, **timing: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": "slurmctld"}, **timing}

    slurmctld = {
        "name": "slurmctld",
        "ports": [{"name": "slurmctld", "containerPort": SLURMCTLD_PORT, "protocol": "TCP"}],
        "startupProbe": probe("/livez", failureThreshold=6, periodSeconds=10),
        "readinessProbe": probe("/readyz"),
        "livenessProbe": probe("/livez", failureThreshold=6, periodSeconds=10),
        "securityContext": _run_as(SLURM_UID),
        "volumeMounts": [
            {"name": "slurm-etc", "mountPath": "/etc/slurm", "readOnly": True},
            {"name": "run", "mountPath": "/run"},
            {"name": "statesave", "mountPath": f"{SLURMCTLD_SPOOL}/{cluster_name}"},
            {"name": "slurm-authsocket", "mountPath": "/run/slurmctld"},
            {"name": "slurm-logfile", "mountPath": LOG_DIR},
        ],
    }
    init = []
    if controller.get("inplaceReconfigure"):
        reconfigure = {
            "name": "reconfigure",
            "command": ["tini", "-g", "--", "bash", "-c", "<the operator's reconfigure.sh>"],
            "restartPolicy": "Always",
            "volumeMounts": [
                {"name": "slurm-etc", "mountPath": "/etc/slurm", "readOnly": True},
                {"name": "slurm-authsocket", "mountPath": "/run/slurmctld", "readOnly": True},
            ],
        }
        init.append(operator_container(reconfigure, chart.container("controller", "reconfigure")))
    logfile = _logfile_container("slurmctld.log")
    init.append(operator_container(logfile, chart.container("controller", "logfile")))
    base = {
        "automountServiceAccountToken": False,
        "containers": [operator_container(slurmctld, chart.container("controller", "slurmctld"))],
        "initContainers": init,
        "securityContext": {**_run_as(SLURM_UID), "fsGroup": SLURM_UID},
        "volumes": volumes,
    }
    spec = operator_pod_spec(base, chart.pod_spec("controller"))
    return chart.pod(f"{full_name}-controller-0", "controller", "slurmctld", spec)


def _restapi_pod(chart: _Chart) -> dict[str, Any]:
    """The slurmrestd pod (restapibuilder/restapi_app.go, restapiPodTemplate).

    Args:
        chart: the chart's view of the release.
    """
    full_name = chart.full_name
    slurm_key, _ = chart.keys()
    accounting = bool(chart.section("accounting").get("enabled"))
    socket = {"tcpSocket": {"port": SLURMRESTD_PORT}}
    slurmrestd = {
        "name": "slurmrestd",
        "env": [
            {"name": "SLURM_JWT", "value": "daemon"},
            {"name": "SLURMRESTD_SECURITY", "value": "disable_unshare_files,disable_unshare_sysv"},
        ],
        # Without accounting (the Controller's accountingRef), only the slurmctld plugin.
        "args": [] if accounting else ["-s", "openapi/slurmctld"],
        "ports": [{"name": "slurmrestd", "containerPort": SLURMRESTD_PORT, "protocol": "TCP"}],
        "startupProbe": {**socket, "failureThreshold": 6, "periodSeconds": 10},
        "livenessProbe": {**socket, "failureThreshold": 6, "periodSeconds": 10},
        "readinessProbe": dict(socket),
        "securityContext": _run_as(NOBODY_UID),
        "volumeMounts": [{"name": "slurm-etc", "mountPath": "/etc/slurm", "readOnly": True}],
    }
    container = operator_container(slurmrestd, chart.container("restapi", "slurmrestd"))
    # restapi_app.go, slurmrestdContainer: the address to listen on, after every other arg.
    container["args"] = [*container.get("args", []), f"0.0.0.0:{SLURMRESTD_PORT}"]
    conf = {"name": f"{full_name}-config", "items": [{"key": "slurm.conf", "path": "slurm.conf"}]}
    sources = [{"configMap": conf}, _secret_source(slurm_key, "slurm.key")]
    base = {
        "automountServiceAccountToken": False,
        "containers": [container],
        "securityContext": {**_run_as(NOBODY_UID), "fsGroup": NOBODY_UID},
        "volumes": [{"name": "slurm-etc", "projected": {"defaultMode": 0o600, "sources": sources}}],
    }
    spec = operator_pod_spec(base, chart.pod_spec("restapi"))
    return chart.pod(f"{full_name}-restapi", "restapi", "slurmrestd", spec)


def _accounting_pod(chart: _Chart) -> dict[str, Any]:
    """The slurmdbd pod (accountingbuilder/accounting_app.go, accountingPodTemplate).

    Args:
        chart: the chart's view of the release.
    """
    full_name = chart.full_name
    slurm_key, jwt_key = chart.keys()
    slurmdbd = {
        "name": "slurmdbd",
        "ports": [{"name": "slurmdbd", "containerPort": SLURMDBD_PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": SLURMDBD_PORT}},
        "securityContext": _run_as(SLURM_UID),
        "volumeMounts": [
            {"name": "slurm-etc", "mountPath": "/etc/slurm", "readOnly": True},
            {"name": "run", "mountPath": "/run"},
        ],
    }
    sources = [
        _secret_source((f"{full_name}-accounting", "slurmdbd.conf"), "slurmdbd.conf"),
        _secret_source(slurm_key, "slurm.key"),
        _secret_source(jwt_key, "jwt.key"),
        *chart.jwks(),
    ]
    base = {
        "automountServiceAccountToken": False,
        "containers": [operator_container(slurmdbd, chart.container("accounting", "slurmdbd"))],
        "securityContext": {**_run_as(SLURM_UID), "fsGroup": SLURM_UID},
        "volumes": [
            {"name": "slurm-etc", "projected": {"defaultMode": 0o600, "sources": sources}},
            _memory_dir("run"),
        ],
    }
    spec = operator_pod_spec(base, chart.pod_spec("accounting"))
    return chart.pod(f"{full_name}-accounting-0", "accounting", "slurmdbd", spec)


def slurm_service_pods(
    release: Mapping[str, Any], chart_defaults: Mapping[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """The pods of Slurm's own daemons the ``slurm`` chart renders from ``release``'s values.

    slurmctld (the Controller, unless ``controller.external``), slurmrestd (the RestApi, always)
    and slurmdbd (the Accounting, where ``accounting.enabled`` and not external), as
    slurm-operator v1.2.1 builds them: each daemon as a non-root user with its probes, its
    config and keys from the operator's Secrets and ConfigMaps, no service account token,
    merged with the chart values' container and pod spec. The operator's config hash
    annotations (of Secrets synthesis cannot read) are left out.

    Args:
        release: the Helm release as ``helm/<release>.yaml`` has it (``values``, ``namespace``).
        chart_defaults: the chart's own ``values.yaml``, under which Helm coalesces the
            release's values. Synthesis has no chart (default: none); the tests pass it and
            show that it adds nothing the scan needs.
    """
    chart = _Chart(release, chart_defaults or {})
    if not chart.section("controller").get("external"):
        yield _controller_pod(chart)
    yield _restapi_pod(chart)
    accounting = chart.section("accounting")
    if accounting.get("enabled") and not accounting.get("external"):
        yield _accounting_pod(chart)


def mariadb_pod(mariadb: Mapping[str, Any]) -> dict[str, Any]:
    """The first pod of a ``MariaDB``'s StatefulSet (:mod:`synth.mariadb_pod`).

    Args:
        mariadb: the MariaDB resource's manifest.
    """
    metadata = mariadb["metadata"]
    namespace = str(metadata.get("namespace"))
    return _pod(
        f"{metadata['name']}-0",
        namespace,
        mariadb_pod_template(mariadb),
        f"MariaDB/{namespace}/{metadata['name']}",
    )


def pods_of(
    manifests: Mapping[str, Any],
    releases: Mapping[str, Mapping[str, Any]] | None = None,
    rebuilt: Sequence[dict[str, Any]] = (),
) -> dict[str, dict[str, Any]]:
    """File name -> Pod for every pod the stack's custom resources stand for.

    Args:
        manifests: ``manifests/`` contents by file name.
        releases: ``helm/`` contents by release name (default: none); the ``slurm`` release's
            login sets are among the custom resources.
        rebuilt: pods rebuilt elsewhere to write beside them (default: none), such as the
            observability charts' (:func:`synth.chart_pods.chart_pods`).
    """
    pods: list[dict[str, Any]] = list(rebuilt)
    slurm_release = (releases or {}).get(SLURM_RELEASE)
    if slurm_release is not None:
        pods += login_set_pods(slurm_release)
        pods += slurm_service_pods(slurm_release)
    for manifest in manifests.values():
        if not isinstance(manifest, Mapping):
            continue
        if manifest.get("kind") in RUNTIME_KINDS:
            pods += runtime_pods(manifest)
        elif manifest.get("apiVersion") == RAY_API and manifest.get("kind") in RAY_POD_KINDS:
            pods += ray_pods(manifest)
        elif manifest.get("kind") == NODE_SET_KIND:
            pods.append(node_set_pod(manifest))
        elif (manifest.get("apiVersion"), manifest.get("kind")) == MARIADB_KIND:
            pods.append(mariadb_pod(manifest))
    found: dict[str, dict[str, Any]] = {}
    for pod in pods:
        name = f"Pod.{pod['metadata']['namespace']}.{pod['metadata']['name']}.yaml"
        if name in found:
            raise ValueError(f"two pods would be written to {name}")
        found[name] = pod
    return found
