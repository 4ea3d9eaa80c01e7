"""Grafana's organisations follow the teams: one per team, its dashboards and datasource in it.

Pure builders (docs: concepts, observability, "Grafana"); the metrics stack puts them in the
release's values and :mod:`components.observability.stack` registers the ConfigMap.

Grafana OSS has no file-provisioned way to say "OIDC group X may open folder X": folder
permissions by group need team sync, which Grafana documents as an Enterprise and Cloud feature
(Grafana docs, "Configure Team Sync"). What OSS has is organisations and, in generic OAuth,
``org_attribute_path`` and ``org_mapping``, which put a user in each organisation one of their
groups maps to and take them out of every other at each login (grafana/grafana v13.2.0
pkg/login/social/connectors/org_role_mapper.go, ``MapOrgRoles``;
pkg/services/authn/authnimpl/sync/org_sync.go, ``SyncOrgRolesHook``). An organisation is
Grafana's unit of isolation: dashboards, folders, datasources and members are each one
organisation's. So:

- organisation 1 (Grafana's own, renamed :data:`FLEET_ORG`) holds the fleet's dashboards, and
  only the platform's admins are in it;
- each team has an organisation named after it, with its dashboards and a Prometheus
  datasource; its member groups view it, its admin groups edit it, the platform's admins
  administer it, and nobody else is in it.

Nothing provisions an organisation: Grafana's provisioning reads datasources, plugins,
dashboards and alerting, and refuses a datasource or dashboard provider whose ``orgId`` does not
exist (grafana/grafana v13.2.0 pkg/services/provisioning/dashboards/config_reader.go,
``CheckOrgExists``), which stops Grafana's provisioning at start. ``org_mapping`` names an
organisation by id or by name, and a name is resolved once, when the OAuth connector is built at
Grafana's start (org_role_mapper.go, ``ParseOrgMappingSettings``, called from
pkg/login/social/connectors/social_base.go ``newSocialBase``); with ``role_attribute_strict`` one
unknown name empties the whole mapping. The organisations are therefore made by a small
container in Grafana's pod (:func:`bootstrap_container`) once Grafana answers, by id:

- Grafana keeps no volume, so each pod starts from an empty database with organisation 1, and
  the container creates the teams' organisations in the order of their names: the team sorted
  ``n``-th gets id ``n + 1`` (:func:`grafana_orgs`), the id ``org_mapping`` names. It checks
  every id it gets against that plan and, loudly, leaves an organisation with any other id
  without datasource and dashboards, while the rest are served. Grafana gives a new
  organisation the id after the highest, so once one team's organisation could not be looked
  up or made, or has another id, the container makes no later team's in that pass (those that
  exist are still served) and the next pass goes on from there: a passing failure of one team
  does not shift every later team's id.
- A change of the teams changes the plan, whose digest is an annotation of Grafana's pods
  (:func:`plan_digest`): Grafana restarts on an empty database and the ids are again the plan's.
  A restart of Grafana's container alone keeps the pod's database, organisations included.
- Only then does the container write each organisation's dashboard provider (Grafana's own
  dashboard providers directory is an empty volume it fills) and create its datasource through
  the HTTP API, and ask Grafana to reload its dashboards.
- It never stops: the pod is Ready only while each of its containers runs, so a container that
  exited would take Grafana's Service, every organisation, away for one organisation's fault.
  A request that may succeed later is tried again; what stays broken is logged and named in
  its state line, and tried again on the next pass.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml

from components import versions
from components.config import TeamConfig
from components.metric_names import MONITORING_NAMESPACE, MONITORING_RELEASE, PROMETHEUS_URL

FLEET_ORG_ID: Final = 1
"""Grafana's first organisation, which Grafana creates itself on an empty database."""
FLEET_ORG: Final = "Fleet"
"""Organisation 1's name, and the folder of the fleet's dashboards in it."""
VIEWER: Final = "Viewer"
EDITOR: Final = "Editor"
ADMIN: Final = "Admin"
"""Grafana's basic roles (grafana/grafana v13.2.0 pkg/services/org/model.go, ``RoleType``)."""

ORGS_CONFIG_MAP: Final = "grafana-orgs"
"""The ConfigMap holding the plan, each organisation's provider and datasource, and the script."""
ORGS_VOLUME: Final = "grafana-orgs"
PROVIDERS_VOLUME: Final = "dashboard-providers"
PLAN_PATH: Final = "/etc/grafana-orgs"
"""Where the bootstrap container reads the ConfigMap."""
PROVIDERS_PATH: Final = "/etc/grafana/provisioning/dashboards"
"""Grafana's dashboard providers directory (``GF_PATHS_PROVISIONING`` + ``/dashboards``,
grafana-community/helm-charts grafana-12.11.1 charts/grafana/templates/_pod.tpl): an empty
volume here, which only the bootstrap container writes (the chart's own provider file is off,
``sidecar.dashboards.SCProvider: false``)."""
PROVIDERS_MOUNT: Final = "/providers"
"""The same volume in the bootstrap container."""
DASHBOARDS_PATH: Final = "/tmp/dashboards"
"""Where the chart's dashboard sidecar writes the dashboards' ConfigMaps, one directory per
``grafana_folder`` annotation (grafana-12.11.1 values.yaml ``sidecar.dashboards.folder``)."""
ADMIN_SECRET: Final = f"{MONITORING_RELEASE}-grafana"
"""The chart's Secret with Grafana's admin user and password (grafana-12.11.1
templates/secret.yaml, keys ``admin-user`` and ``admin-password``), which the chart's own
sidecars reload Grafana's provisioning with."""
PROMETHEUS_DATASOURCE: Final = "prometheus"
"""The uid the dashboards name; a datasource's uid is unique per organisation, so each team's
organisation has its own ``prometheus``."""
PLAN_ANNOTATION: Final = "trainingplatform.io/grafana-orgs"
"""Grafana's pod annotation: the plan's digest (:func:`plan_digest`)."""
RELOAD_SECONDS: Final = 30
"""How often a provider rereads its directory (``updateIntervalSeconds``); the sidecar also
asks Grafana to reload whenever a dashboard's ConfigMap changes."""


@dataclass(frozen=True)
class GrafanaOrg:
    """One Grafana organisation of the plan.

    Attributes:
        id: its id: 1 for the fleet's, then one per team in the order of the teams' names.
        name: its name: :data:`FLEET_ORG` or the team's.
        folder: the folder its dashboards go in, which is also the ``grafana_folder``
            annotation of their ConfigMaps and the sidecar's directory for them.
        team: the team's name, None for the fleet's.
    """

    id: int
    name: str
    folder: str
    team: str | None


def grafana_orgs(teams: Sequence[TeamConfig]) -> list[GrafanaOrg]:
    """The organisations: the fleet's (id 1), then one per team, ids in the order of the names.

    Team names are namespace names (lowercase), so none is :data:`FLEET_ORG`.

    Args:
        teams: the stack's teams, in any order (the ids follow the names, not the list).
    """
    names = sorted(team.name for team in teams)
    return [
        GrafanaOrg(FLEET_ORG_ID, FLEET_ORG, FLEET_ORG, None),
        *(GrafanaOrg(FLEET_ORG_ID + 1 + n, name, name, name) for n, name in enumerate(names)),
    ]


def org_mapping(
    teams: Sequence[TeamConfig], admin_groups: Sequence[str]
) -> list[tuple[str, int, str]]:
    """(group, organisation id, role): whom each organisation lets in, and as what.

    A team's member groups view its organisation and its admin groups edit it (they may explore
    and draft dashboards; the provisioned ones stay as the ConfigMaps say); the platform's admin
    groups administer every organisation. A user in several groups gets, per organisation, the
    highest role any of them maps to (org_role_mapper.go, ``getMappedOrgRoles``).

    Args:
        teams: the stack's teams.
        admin_groups: ``observability.grafana.adminGroups``.

    Raises:
        ValueError: a group with ``:``, which separates ``org_mapping``'s fields
            (org_role_mapper.go, ``splitOrgMapping``).
    """
    ids = {org.team: org.id for org in grafana_orgs(teams)}
    entries: list[tuple[str, int, str]] = []
    for team in sorted(teams, key=lambda t: t.name):
        entries += [(group, ids[team.name], VIEWER) for group in team.member_groups]
        entries += [(group, ids[team.name], EDITOR) for group in team.admin_groups]
    entries += [(group, org.id, ADMIN) for group in admin_groups for org in grafana_orgs(teams)]
    for group, _, _ in entries:
        if ":" in group:
            raise ValueError(
                f"group {group!r}: Grafana's org_mapping separates its fields with ':', so a "
                "group of a team or of observability.grafana.adminGroups may not contain one"
            )
    return entries


def org_mapping_setting(entries: Sequence[tuple[str, int, str]]) -> str:
    """``auth.generic_oauth.org_mapping`` as Grafana reads it: a JSON list of ``group:id:role``.

    Grafana splits the setting with ``util.SplitString``, which takes a JSON list whole
    (grafana/grafana v13.2.0 pkg/util/strings.go), so a group needs no other quoting.

    Args:
        entries: :func:`org_mapping`.
    """
    return json.dumps([f"{group}:{org_id}:{role}" for group, org_id, role in entries])


def dashboard_provider(org: GrafanaOrg) -> dict[str, Any]:
    """One organisation's dashboard provider: the sidecar's directory of its folder, in its org.

    A provider takes its dashboards into ``folder`` of ``orgId``; nobody edits them in
    Grafana (``allowUiUpdates: false``), and a ConfigMap deleted takes its dashboard with it.

    Args:
        org: the organisation.
    """
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": f"org-{org.id}",
                "orgId": org.id,
                "folder": org.folder,
                "type": "file",
                "disableDeletion": False,
                "allowUiUpdates": False,
                "updateIntervalSeconds": RELOAD_SECONDS,
                "options": {"path": f"{DASHBOARDS_PATH}/{org.folder}"},
            }
        ],
    }


def team_datasource() -> dict[str, Any]:
    """A team organisation's Prometheus, as the HTTP API takes it: the fleet's Prometheus.

    The same one the chart provisions in organisation 1 (kube-prometheus-stack 88.5.3
    templates/grafana/configmaps-datasources.yaml): every organisation queries the same
    Prometheus, so organisations separate dashboards and people, not data.
    """
    return {
        "name": "Prometheus",
        "uid": PROMETHEUS_DATASOURCE,
        "type": "prometheus",
        "access": "proxy",
        "url": f"{PROMETHEUS_URL}/",
        "isDefault": True,
        "jsonData": {"httpMethod": "POST", "timeInterval": "30s"},
    }


def plan_lines(orgs: Sequence[GrafanaOrg]) -> str:
    """The plan the script reads: ``<id> <name>`` per organisation, in id order.

    Args:
        orgs: :func:`grafana_orgs`.
    """
    return "".join(f"{org.id} {org.name}\n" for org in sorted(orgs, key=lambda o: o.id))


BOOTSTRAP_SCRIPT: Final = r"""#!/bin/sh
# Creates Grafana's team organisations with the ids of the plan, then their datasources and
# dashboard providers (components/observability/grafana_orgs.py). Idempotent: run again, it
# finds what it made. Grafana's HTTP API: /api/orgs, /api/datasources, /api/admin/provisioning.
# It never exits: a container of Grafana's pod that stops takes the pod out of its Service, and
# every organisation with it. What it cannot do it logs and leaves out, and says its state:
# "grafana-orgs: ready", or "grafana-orgs: degraded: <organisations>" and another pass later.
set -u
api="${GRAFANA_URL:-http://localhost:3000}"
plan="${ORGS_PLAN:-/etc/grafana-orgs}"
providers="${PROVIDERS:-/providers}"
auth="${GF_ADMIN_USER}:${GF_ADMIN_PASSWORD}"
tries="${RETRY_TRIES:-8}"
first_delay="${RETRY_FIRST_SECONDS:-1}"
max_delay="${RETRY_MAX_SECONDS:-30}"
pass_delay="${PASS_SECONDS:-300}"
# Each request's bound in seconds, connecting included (curl --max-time): without one a request
# Grafana accepts and never answers would hold the script, and every organisation, forever.
max_time="${REQUEST_SECONDS:-30}"

log() { echo "grafana-orgs: $*" >&2; }
status() { printf '%s\n' "$1" | tail -n 1; }
# said ANSWER: the answer on one line.
said() {
  if [ "$(status "$1")" = 000 ]; then
    echo "no answer"
  else
    echo "HTTP $(status "$1") $(printf '%s\n' "$1" | sed '$d' | tr '\n' ' ')"
  fi
}

# call METHOD PATH ORG [BODY-FILE]: prints the body, then the status on the last line (000:
# no answer, or none within max_time seconds).
call() {
  if [ -n "${4:-}" ]; then
    curl -sS --max-time "$max_time" -u "$auth" -X "$1" -H "X-Grafana-Org-Id: $3" \
      -H 'Content-Type: application/json' --data-binary "@$4" -w '\n%{http_code}' "$api$2"
  else
    curl -sS --max-time "$max_time" -u "$auth" -X "$1" -H "X-Grafana-Org-Id: $3" \
      -w '\n%{http_code}' "$api$2"
  fi
}

# request WHAT METHOD PATH ORG [BODY-FILE]: call, and again while the failure may pass (no
# answer in time, 429, a 5xx such as SQLite's "database is locked" while the sidecars reload),
# each logged, first_delay seconds later, doubling up to max_delay, tries times in all. Prints
# the last answer as call does; fails when the tries are spent.
request() {
  what=$1
  shift
  try=1
  delay=$first_delay
  while :; do
    answer=$(call "$@")
    case "$(status "$answer")" in
      000 | 429 | 5??) ;;
      *)
        printf '%s\n' "$answer"
        return 0
        ;;
    esac
    if [ "$try" -ge "$tries" ]; then
      log "could not $what after $try tries: $(said "$answer")"
      return 1
    fi
    log "$what: try $try of $tries: $(said "$answer"); again in ${delay}s"
    sleep "$delay"
    try=$((try + 1))
    delay=$((delay * 2))
    [ "$delay" -le "$max_delay" ] || delay=$max_delay
  done
}

# ok WHAT METHOD PATH ORG [BODY-FILE]: request, which must answer 200; prints the answer.
ok() {
  answer=$(request "$@") || return 1
  if [ "$(status "$answer")" != 200 ]; then
    log "could not $1: $(said "$answer")"
    return 1
  fi
  printf '%s\n' "$answer"
}

# hold NAME: no organisation is made after NAME's in this pass. Grafana numbers organisations
# in the order they are made (the next id after the highest), so one made while an earlier
# team's is missing or misnumbered would take that team's id, and every later team's id would
# shift with it. The first such team is kept; the next pass starts again from it.
hold() { [ -n "$held" ] || held=$1; }

# team ID NAME: the team's organisation with id ID (made if missing, unless an earlier team's
# is not as planned in this pass: see hold) and its Prometheus datasource; fails, logged, where
# either is not so.
team() {
  out=$(request "look up organisation $2" GET "/api/orgs/name/$2" 1) || {
    hold "$2"
    return 1
  }
  case "$(status "$out")" in
    200) got=$(printf '%s\n' "$out" | sed -n 's/^{ *"id": *\([0-9]*\).*/\1/p') ;;
    404)
      if [ -n "$held" ]; then
        log "organisation $2 not made in this pass: organisation $held, before it in the" \
          "plan, is not made as planned, and $2 would take its id"
        return 1
      fi
      out=$(ok "create organisation $2" POST /api/orgs 1 "$plan/org-$1.json") || {
        hold "$2"
        return 1
      }
      got=$(printf '%s\n' "$out" | sed -n 's/.*"orgId": *\([0-9]*\).*/\1/p')
      ;;
    *)
      log "could not look up organisation $2: $(said "$out")"
      hold "$2"
      return 1
      ;;
  esac
  if [ "$got" != "$1" ]; then
    log "ERROR: organisation $2 has id ${got:-unknown}, the plan says $1: org_mapping would" \
      "let the wrong team in, so it gets no datasource and no dashboards; restart the" \
      "Grafana pod (its database is empty at start)"
    hold "$2"
    return 1
  fi
  out=$(request "update $2's datasource" PUT /api/datasources/uid/prometheus "$1" \
    "$plan/datasource.json") || return 1
  case "$(status "$out")" in
    200) ;;
    404) ok "add $2's datasource" POST /api/datasources "$1" "$plan/datasource.json" >/dev/null ;;
    *)
      log "could not update $2's datasource: $(said "$out")"
      return 1
      ;;
  esac
}

# pass: one run over the plan, in the order of the ids; sets degraded to what it could not
# make, empty when all is made.
pass() {
  degraded=""
  held=""
  while read -r id name; do
    [ -n "$id" ] || continue
    if [ "$id" = 1 ]; then
      # Organisation 1 is there whatever its name: its dashboards are served either way.
      ok "name organisation 1 $name" PUT /api/orgs/1 1 "$plan/org-1.json" >/dev/null ||
        degraded="$degraded $name"
    elif ! team "$id" "$name"; then
      degraded="$degraded $name"
      continue
    fi
    cp "$plan/provider-$id.yaml" "$providers/org-$id.yaml" || degraded="$degraded $name"
  done <"$plan/orgs"
  ok "reload the dashboards" POST /api/admin/provisioning/dashboards/reload 1 >/dev/null ||
    degraded="$degraded dashboards-reload"
}

log "waiting for Grafana at $api"
until curl -fsS --max-time "$max_time" "$api/api/health" >/dev/null 2>&1; do sleep 2; done
while :; do
  pass
  [ -n "$degraded" ] || break
  echo "grafana-orgs: degraded:$degraded"
  sleep "$pass_delay"
done
echo "grafana-orgs: ready"
while :; do sleep 3600; done
"""
"""The bootstrap container's script (POSIX sh and curl, the image's). It runs beside Grafana
for the pod's life: a Kubernetes Job would run once, while Grafana's organisations live in the
pod's empty database and must be made again by every new pod.

It never exits, and the container has no probe: a container that stops (CrashLoopBackOff) or
fails a readiness probe makes the pod unready, and an unready pod is no endpoint of Grafana's
Service, which would take every organisation offline for one's fault. Instead:

- every request, the wait for Grafana's health included, is given 30 seconds
  (``REQUEST_SECONDS``) with curl's ``--max-time``, which bounds the whole transfer,
  connecting included, and accepts decimals (curl/curl curl-8_21_0
  docs/cmdline-opts/max-time.md; curl then fails with ``CURLE_OPERATION_TIMEDOUT``,
  docs/libcurl/libcurl-errors.md, and ``%{http_code}`` is ``000``, no answer): a request
  Grafana accepts and never answers would otherwise hold the script, and the organisations
  after it, forever;
- a request without an answer, or answered 429 or 5xx (SQLite's "database is locked" while
  the chart's sidecars reload Grafana's provisioning), is tried again after 1, 2, 4, ... up to
  30 seconds, 8 times in all (``RETRY_TRIES``, ``RETRY_FIRST_SECONDS``,
  ``RETRY_MAX_SECONDS``), each failure logged;
- an organisation it cannot make as planned (its id is not the plan's, or a request failed
  for good) gets neither datasource nor dashboard provider, the others are made, and the pass
  ends with ``grafana-orgs: degraded: <organisations>`` on its standard output; it runs the
  whole pass again 5 minutes later (``PASS_SECONDS``), and says ``grafana-orgs: ready`` once
  everything is made. Organisation 1 always exists, so its dashboards are served even where
  its renaming failed;
- after the first team whose organisation could not be looked up or made, or has another id,
  it makes no organisation in that pass: a new organisation's id is the ``org`` table's
  autoincrement ``id`` (grafana/grafana pkg/services/sqlstore/migrations/org_mig.go, "create org
  table", read at
  https://github.com/grafana/grafana/blob/02a89c752b49a1be4ca9bc08f0f13a6883491b5c/pkg/services/sqlstore/migrations/org_mig.go),
  so one made then would take the earlier team's id and shift every later team's. Later
  teams whose organisations exist with their planned ids are still served; the missing ones
  are named in the degraded line, and the next pass makes them in order.

What it relies on in Grafana's HTTP API (grafana/grafana v13.2.0): ``POST /api/orgs`` makes the
caller a member of the new organisation and answers its ``orgId`` (pkg/api/org.go,
``CreateOrg``), so the admin may then act in it with the ``X-Grafana-Org-Id`` header, which
every authenticated request may carry (pkg/services/authn/authnimpl/service.go,
``orgIDFromHeader``); ``PUT /api/datasources/uid/<uid>`` answers 404 for a datasource the
organisation lacks (pkg/api/datasources.go, ``UpdateDataSourceByUID``), which it then creates;
``/api/admin/provisioning/dashboards/reload`` is what the chart's dashboard sidecar calls too
(grafana-12.11.1 templates/_pod.tpl, ``REQ_URL``)."""


def orgs_config_map_data(orgs: Sequence[GrafanaOrg]) -> dict[str, str]:
    """The ConfigMap's files: the plan, each organisation's body and provider, the datasource.

    Args:
        orgs: :func:`grafana_orgs`.
    """
    data = {
        "bootstrap.sh": BOOTSTRAP_SCRIPT,
        "orgs": plan_lines(orgs),
        "datasource.json": json.dumps(team_datasource(), sort_keys=True),
    }
    for org in orgs:
        data[f"org-{org.id}.json"] = json.dumps({"name": org.name})
        data[f"provider-{org.id}.yaml"] = yaml.safe_dump(dashboard_provider(org), sort_keys=False)
    return data


def plan_digest(data: dict[str, str]) -> str:
    """A digest of the ConfigMap's files: Grafana's pod annotation, so a new plan is a new pod.

    Args:
        data: :func:`orgs_config_map_data`.
    """
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def orgs_config_map(orgs: Sequence[GrafanaOrg]) -> dict[str, Any]:
    """The ConfigMap the bootstrap container reads.

    Args:
        orgs: :func:`grafana_orgs`.
    """
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": ORGS_CONFIG_MAP, "namespace": MONITORING_NAMESPACE},
        "data": orgs_config_map_data(orgs),
    }


def bootstrap_container() -> dict[str, Any]:
    """The container beside Grafana that makes the organisations (:data:`BOOTSTRAP_SCRIPT`).

    It reaches Grafana on the pod's loopback with the chart's admin Secret, as the chart's
    sidecars do; it runs as the pod's user (the chart's ``securityContext``, uid 472), with
    nothing added: no privilege escalation, every capability dropped, the runtime's seccomp
    profile and a read-only root file system (restricted Pod Security).
    """
    env = [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": ADMIN_SECRET, "key": key}}}
        for name, key in (("GF_ADMIN_USER", "admin-user"), ("GF_ADMIN_PASSWORD", "admin-password"))
    ]
    return {
        "name": "grafana-orgs",
        "image": versions.GRAFANA_ORGS_IMAGE,
        "command": ["/bin/sh", f"{PLAN_PATH}/bootstrap.sh"],
        "env": env,
        "volumeMounts": [
            {"name": ORGS_VOLUME, "mountPath": PLAN_PATH, "readOnly": True},
            {"name": PROVIDERS_VOLUME, "mountPath": PROVIDERS_MOUNT},
        ],
        "resources": {
            "requests": {"cpu": "10m", "memory": "16Mi"},
            "limits": {"memory": "64Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def grafana_orgs_values(orgs: Sequence[GrafanaOrg]) -> dict[str, Any]:
    """What the ``grafana`` block adds for the organisations: the container, its volumes.

    The chart renders ``extraContainers`` as a template string (grafana-12.11.1
    templates/_pod.tpl), so the container is YAML text; the script and plan live in the
    ConfigMap, not in the template, so no ``{{`` of theirs reaches Helm's template engine.

    Args:
        orgs: :func:`grafana_orgs`.
    """
    return {
        "extraContainers": yaml.safe_dump([bootstrap_container()], sort_keys=False),
        "extraContainerVolumes": [
            {"name": ORGS_VOLUME, "configMap": {"name": ORGS_CONFIG_MAP}},
        ],
        "extraEmptyDirMounts": [{"name": PROVIDERS_VOLUME, "mountPath": PROVIDERS_PATH}],
        "podAnnotations": {PLAN_ANNOTATION: plan_digest(orgs_config_map_data(orgs))},
    }
