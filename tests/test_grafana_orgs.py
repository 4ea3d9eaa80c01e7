"""Grafana's organisations follow the teams (issue 45, item 6): who lands where, and what each
organisation holds.

Grafana OSS cannot give an OIDC group one folder (team sync is Enterprise); it can put the user
in organisations by group (``org_mapping``). These tests log users in through a model of
Grafana's own mapping, read the synthesized values and ConfigMaps, and run the organisations'
script against a stand-in for Grafana's HTTP API.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

import jmespath
import pytest
import yaml

from components.config import parse_platform_config
from components.observability import grafana_orgs as orgs_module
from components.observability.dashboards import platform_dashboards
from components.observability.grafana_orgs import (
    FLEET_ORG,
    PROVIDERS_PATH,
    grafana_orgs,
    orgs_config_map_data,
)
from components.observability.metrics_stack import DASHBOARD_FOLDER_ANNOTATION, monitoring_values
from synth.run import StackResult
from tests.config_problems import MISSING, assert_reported
from tests.conftest import stack_data

CONFIG_MAP: Final = "kubernetes:core/v1:ConfigMap"
RELEASE: Final = "kubernetes:helm.sh/v3:Release"
ROLES: Final = ("Viewer", "Editor", "Admin")


def _top(current: str, other: str) -> str:
    """getTopRole: the role that includes the other (Admin > Editor > Viewer)."""
    if not current:
        return other
    return current if ROLES.index(current) >= ROLES.index(other) else other


def grafana_login(oauth: Mapping[str, Any], claims: Mapping[str, Any]) -> dict[int, str] | None:
    """The organisations and roles Grafana gives a generic OAuth user, None where it refuses.

    A model of grafana/grafana v13.2.0 pkg/login/social/connectors/generic_oauth.go
    (``UserInfo``: role from ``role_attribute_path``, external orgs from
    ``org_attribute_path``, refused under ``role_attribute_strict`` when no role results) and
    org_role_mapper.go (``ParseOrgMappingSettings`` with numeric ids, ``MapOrgRoles``,
    ``getMappedOrgRoles``, ``getTopRole``, ``getDefaultOrgMapping``); org_sync.go then makes
    exactly these the user's organisations.
    """
    role = jmespath.search(oauth["role_attribute_path"], claims) or ""
    assert role in ("", *ROLES), role
    external = jmespath.search(oauth["org_attribute_path"], claims) or []
    mapping: dict[str, dict[int, str]] = {}
    for entry in json.loads(oauth["org_mapping"]):
        group, org_id, org_role = entry.split(":")
        assert org_role in ROLES  # strict: one invalid entry would empty the whole mapping
        mapping.setdefault(group, {})[int(org_id)] = org_role
    roles: dict[int, str] = {}
    for group in external:
        for org_id, org_role in mapping.get(group, {}).items():
            roles[org_id] = _top(roles.get(org_id, ""), org_role)
    if not roles:
        # getDefaultOrgMapping: organisation 1 with the direct role, or refused when strict.
        if oauth["role_attribute_strict"] and not role:
            return None
        return {1: role or "Viewer"}
    return {
        org_id: _top(role, org_role) if role else org_role for org_id, org_role in roles.items()
    }


def _two_teams() -> dict[str, Any]:
    data = stack_data("dev")
    (team,) = data["teams"]
    # No share of the pools' accelerators: dev's team has them all.
    other = {key: value for key, value in team.items() if key not in ("ray", "queue")}
    other |= {"name": "ads", "gid": team["gid"] + 1, "adminGroups": ["ads-leads"],
              "memberGroups": ["ads-engineers"]}  # fmt: skip
    data["teams"].append(other)
    data.setdefault("observability", {})["grafana"] = {"adminGroups": ["grafana-admins"]}
    return data


def _oauth(data: dict[str, Any]) -> dict[str, Any]:
    config = parse_platform_config(data)
    ini = monitoring_values(config, oidc_secret=True)["grafana"]["grafana.ini"]
    oauth: dict[str, Any] = ini["auth.generic_oauth"]
    return oauth


def test_each_teams_groups_reach_its_own_organisation_and_no_other() -> None:
    data = _two_teams()
    oauth = _oauth(data)
    config = parse_platform_config(data)
    ids = {org.name: org.id for org in grafana_orgs(config.teams)}
    # Ids follow the names: ads sorts before ml-dev.
    assert ids == {FLEET_ORG: 1, "ads": 2, "ml-dev": 3}

    def login(*groups: str) -> dict[int, str] | None:
        return grafana_login(oauth, {"groups": list(groups), "preferred_username": "someone"})

    assert login("ml-engineers") == {ids["ml-dev"]: "Viewer"}
    assert login("ml-platform-admins") == {ids["ml-dev"]: "Editor"}
    assert login("ads-engineers", "unrelated") == {ids["ads"]: "Viewer"}
    assert login("ads-leads", "ads-engineers") == {ids["ads"]: "Editor"}
    # One person in both teams is in both organisations, each with its own role.
    assert login("ml-engineers", "ads-leads") == {ids["ml-dev"]: "Viewer", ids["ads"]: "Editor"}
    # The platform's admins administer every organisation, the fleet's included.
    assert login("grafana-admins") == {1: "Admin", ids["ads"]: "Admin", ids["ml-dev"]: "Admin"}
    assert login("grafana-admins", "ml-engineers") == login("grafana-admins")
    # Nobody else logs in, and no team member reaches the fleet's organisation.
    assert login("unrelated") is None and login() is None
    for team in config.teams:
        for group in (*team.member_groups, *team.admin_groups):
            assert set(login(group) or {}) == {ids[team.name]}, group
    # A groups claim of another name is read under that name, for roles and organisations.
    data["oidc"]["groupsClaim"] = "cognito:groups"
    renamed = _oauth(data)
    claims = {"cognito:groups": ["ads-engineers"], "groups": ["ml-engineers"]}
    assert grafana_login(renamed, claims) == {ids["ads"]: "Viewer"}


def test_a_new_team_gets_its_organisation_and_a_new_grafana_pod() -> None:
    data = _two_teams()
    before = parse_platform_config(data)
    data["teams"].append({**data["teams"][1], "name": "aaa", "gid": 5100,
                          "memberGroups": ["aaa-people"], "adminGroups": []})  # fmt: skip
    after = parse_platform_config(data)
    orgs = grafana_orgs(after.teams)
    assert [(o.id, o.name) for o in orgs] == [(1, FLEET_ORG), (2, "aaa"), (3, "ads"), (4, "ml-dev")]
    # The order of the list does not matter, only the names.
    assert grafana_orgs(list(reversed(after.teams))) == orgs
    assert grafana_login(_oauth(data), {"groups": ["aaa-people"]}) == {2: "Viewer"}
    # The ids moved, so Grafana must start again on an empty database: its pod's annotation
    # (the plan's digest) changes with the plan.
    values = [monitoring_values(c, oidc_secret=True)["grafana"] for c in (before, after)]
    annotations = [v["podAnnotations"][orgs_module.PLAN_ANNOTATION] for v in values]
    assert annotations[0] != annotations[1]
    data_after = orgs_config_map_data(orgs)
    assert data_after["orgs"] == "1 Fleet\n2 aaa\n3 ads\n4 ml-dev\n"


def test_group_names_grafanas_org_mapping_cannot_hold_are_refused() -> None:
    data = _two_teams()
    data["teams"][1]["memberGroups"] = ["ads:engineers"]
    assert_reported(data, "platform.teams[1].memberGroups", "ads:engineers", "a group without ':'")


def test_with_oidc_someone_always_reaches_the_fleets_organisation() -> None:
    """With OIDC only observability.grafana.adminGroups map to organisation 1 (the login form
    is off), so a stack without one would lock everybody out of the fleet's dashboards."""
    for stack in ("dev", "staging"):
        data = stack_data(stack)
        oauth = _oauth(data)
        (admin, *_) = parse_platform_config(data).observability.grafana.admin_groups
        assert (grafana_login(oauth, {"groups": [admin]}) or {}).get(1) == "Admin", stack
    data = stack_data("dev")
    del data["observability"]["grafana"]["adminGroups"]
    assert_reported(data, "platform.observability.grafana.adminGroups", MISSING, "Fleet")
    data["observability"]["grafana"]["adminGroups"] = []
    assert_reported(data, "platform.observability.grafana.adminGroups", [], "platform's admins")
    # Without Grafana, or without OIDC (port-forward with the chart's admin), none is needed.
    data["observability"]["grafana"]["enabled"] = False
    parse_platform_config(data)
    data = stack_data("dev")
    del data["oidc"], data["observability"]["grafana"]["adminGroups"]
    data["notebooks"]["authenticator"] = "dummy"
    parse_platform_config(data)


def _release_values(run: StackResult) -> dict[str, Any]:
    (release,) = [r for r in run.records if r.type == RELEASE and r.inputs["name"] == "monitoring"]
    values: dict[str, Any] = release.inputs["values"]["grafana"]
    return values


def _plan(run: StackResult) -> dict[str, str]:
    (plan,) = [
        r for r in run.records
        if r.type == CONFIG_MAP and r.inputs["metadata"]["name"] == orgs_module.ORGS_CONFIG_MAP
    ]  # fmt: skip
    data: dict[str, str] = plan.inputs["data"]
    return data


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_each_dashboard_lands_in_its_organisations_folder(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """prod has no OIDC client: the admin (by port-forward) finds the same organisations."""
    run = synthesized[stack]
    plan = _plan(run)
    providers = {}
    for line in plan["orgs"].splitlines():
        org_id, name = line.split(" ", 1)
        (provider,) = yaml.safe_load(plan[f"provider-{org_id}.yaml"])["providers"]
        assert provider["orgId"] == int(org_id) and provider["folder"] == name
        providers[provider["options"]["path"]] = provider
    teams = {team.name for team in run.config.teams}
    for record in run.records:
        annotations = record.inputs.get("metadata", {}).get("annotations") or {}
        if record.type != CONFIG_MAP or DASHBOARD_FOLDER_ANNOTATION not in annotations:
            continue
        folder = annotations[DASHBOARD_FOLDER_ANNOTATION]
        provider = providers[f"{orgs_module.DASHBOARDS_PATH}/{folder}"]
        # A team's dashboards in its own organisation, the fleet's in organisation 1 only.
        assert (provider["orgId"] == 1) == (folder == FLEET_ORG), folder
        assert folder in teams | {FLEET_ORG}
    assert {d.folder for d in platform_dashboards(run.config)} == teams | {FLEET_ORG}
    grafana = _release_values(run)
    # The chart's own provider would read every folder into organisation 1.
    assert grafana["sidecar"]["dashboards"]["SCProvider"] is False
    assert grafana["extraEmptyDirMounts"] == [
        {"name": orgs_module.PROVIDERS_VOLUME, "mountPath": PROVIDERS_PATH}
    ]
    (container,) = yaml.safe_load(grafana["extraContainers"])
    # No probe: a failing one would make the pod unready and take every organisation offline
    # (the script never exits and says its state in its log instead).
    assert not {"readinessProbe", "livenessProbe", "startupProbe"} & set(container)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[orgs_module.PROVIDERS_VOLUME] == orgs_module.PROVIDERS_MOUNT
    context = container["securityContext"]
    assert context["allowPrivilegeEscalation"] is False and context["capabilities"]["drop"] == [
        "ALL"
    ]
    assert grafana["podAnnotations"][orgs_module.PLAN_ANNOTATION] == orgs_module.plan_digest(plan)
    ini = grafana["grafana.ini"]
    if run.config.oidc.client_id is None:
        assert "auth.generic_oauth" not in ini
    else:
        mapped = {
            int(e.split(":")[1]) for e in json.loads(ini["auth.generic_oauth"]["org_mapping"])
        }
        assert mapped <= {int(line.split()[0]) for line in plan["orgs"].splitlines()}


class _FakeGrafana(BaseHTTPRequestHandler):
    """Grafana's HTTP API as the script uses it: organisations (autoincrement ids from 1, the
    creator made a member), datasources per organisation by uid, and the dashboards' reload,
    which refuses a provider of an organisation that does not exist (Grafana's
    ``CheckOrgExists``). ``state["failures"]`` maps ``"<METHOD> <path>"`` to the failures its
    next requests meet, in order: ``locked`` (a 500, SQLite's "database is locked"), ``drop``
    (the connection closed without an answer) or ``hang`` (accepted and never answered, until
    the fake stops)."""

    state: dict[str, Any]

    def _reply(self, code: int, body: Any) -> None:
        payload = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _body(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

    def _failed(self) -> bool:
        """Whether this request meets one of the planned failures (then answered or dropped)."""
        planned = self.state.get("failures", {}).get(f"{self.command} {self.path}", [])
        if not planned:
            return False
        failure = planned.pop(0)
        if failure == "hang":
            self.state["stopped"].wait()
            self.close_connection = True
        elif failure == "drop":
            self.close_connection = True
        else:
            self._reply(500, {"message": "database is locked"})
        return True

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:
        orgs = self.state["orgs"]
        if self.path == "/api/health":
            return self._reply(200, {"database": "ok"})
        if self._failed():
            return None
        if self.path.startswith("/api/orgs/name/"):
            name = self.path.rsplit("/", 1)[1]
            found = [i for i, n in orgs.items() if n == name]
            if found:
                return self._reply(200, {"id": found[0], "name": name, "address": {}})
            return self._reply(404, {"message": "Organization not found"})
        return self._reply(404, {})

    def do_POST(self) -> None:
        state, org = self.state, int(self.headers.get("X-Grafana-Org-Id", "1"))
        if self._failed():
            return None
        if self.path == "/api/orgs":
            state["next"] += 1
            state["orgs"][state["next"]] = self._body()["name"]
            return self._reply(200, {"message": "Organization created", "orgId": state["next"]})
        if self.path == "/api/datasources":
            body = self._body()
            state["datasources"][(org, body["uid"])] = body
            return self._reply(200, {"message": "Datasource added"})
        if self.path == "/api/admin/provisioning/dashboards/reload":
            for provider in Path(state["providers"]).glob("*.yaml"):
                for entry in yaml.safe_load(provider.read_text())["providers"]:
                    if entry["orgId"] not in state["orgs"]:
                        return self._reply(500, {"message": "org not found"})
            state["reloads"] += 1
            return self._reply(200, {"message": "Dashboards config reloaded"})
        return self._reply(404, {})

    def do_PUT(self) -> None:
        state, org = self.state, int(self.headers.get("X-Grafana-Org-Id", "1"))
        if self._failed():
            return None
        if self.path == "/api/orgs/1":
            state["orgs"][1] = self._body()["name"]
            return self._reply(200, {"message": "Organization updated"})
        if self.path.startswith("/api/datasources/uid/"):
            key = (org, self.path.rsplit("/", 1)[1])
            if key not in state["datasources"]:
                return self._reply(404, {"message": "Data source not found"})
            state["datasources"][key] = self._body()
            return self._reply(200, {"message": "Datasource updated"})
        return self._reply(404, {})


@contextmanager
def _grafana(state: dict[str, Any]) -> Iterator[str]:
    state["stopped"] = threading.Event()
    handler = type("Handler", (_FakeGrafana,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        state["stopped"].set()
        server.shutdown()
        server.server_close()


READY: Final = "grafana-orgs: ready"
DEGRADED: Final = "grafana-orgs: degraded:"


def _bootstrap(url: str, plan: Path, passes: int = 1, **environment: str) -> tuple[str, str]:
    """Run the script until it has said its state ``passes`` times, or is ready; it must still
    be running then (it never exits: a stopped container would take Grafana's pod out of its
    Service). Returns its stdout and stderr."""
    out, err = plan.parent / "stdout", plan.parent / "stderr"
    env = {"PATH": "/usr/bin:/bin", "GRAFANA_URL": url, "ORGS_PLAN": str(plan),
           "PROVIDERS": str(plan.parent / "providers"), "GF_ADMIN_USER": "admin",
           "GF_ADMIN_PASSWORD": "secret", "RETRY_FIRST_SECONDS": "0", **environment}  # fmt: skip
    with out.open("w") as stdout, err.open("w") as stderr:
        # Its own session, so its sleep is stopped with it.
        script = subprocess.Popen(
            ["sh", str(plan / "bootstrap.sh")], env=env, stdout=stdout, stderr=stderr,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while READY not in (said := out.read_text()) and said.count(DEGRADED) < passes:
            assert script.poll() is None, f"it exited {script.returncode}: {err.read_text()}"
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.02)
        time.sleep(0.1)
        assert script.poll() is None, f"it exited {script.returncode}: {err.read_text()}"
    finally:
        os.killpg(script.pid, signal.SIGTERM)
        script.wait(timeout=10)
    return out.read_text(), err.read_text()


def _plan_dirs(tmp_path: Path) -> Path:
    """The plan of two teams (ads id 2, ml-dev id 3) as the container mounts it, and an empty
    providers directory beside it."""
    config = parse_platform_config(_two_teams())
    plan = tmp_path / "plan"
    plan.mkdir(parents=True)
    (tmp_path / "providers").mkdir()
    for name, text in orgs_config_map_data(grafana_orgs(config.teams)).items():
        (plan / name).write_text(text)
    return plan


def _state(plan: Path, orgs: dict[int, str], **more: Any) -> dict[str, Any]:
    return {"orgs": orgs, "next": max(orgs), "datasources": {}, "reloads": 0,
            "providers": str(plan.parent / "providers"), **more}  # fmt: skip


def _providers(plan: Path) -> list[str]:
    return sorted(p.name for p in (plan.parent / "providers").iterdir())


needs_curl = pytest.mark.skipif(
    shutil.which("curl") is None or shutil.which("sh") is None, reason="needs sh and curl"
)


@needs_curl
def test_the_script_makes_the_planned_organisations_once(tmp_path: Path) -> None:
    plan = _plan_dirs(tmp_path)
    state = _state(plan, {1: "Main Org."})
    with _grafana(state) as url:
        out, err = _bootstrap(url, plan)
        assert out.splitlines()[-1] == READY, err
        assert state["orgs"] == {1: FLEET_ORG, 2: "ads", 3: "ml-dev"}
        # Each team's organisation has its Prometheus; the fleet's keeps the chart's.
        assert set(state["datasources"]) == {(2, "prometheus"), (3, "prometheus")}
        assert _providers(plan) == ["org-1.yaml", "org-2.yaml", "org-3.yaml"]
        assert state["reloads"] == 1
        # Again (the container restarted): it finds what it made and makes nothing more.
        out, err = _bootstrap(url, plan)
        assert out.splitlines()[-1] == READY, err
        assert state["orgs"] == {1: FLEET_ORG, 2: "ads", 3: "ml-dev"} and state["next"] == 3
        assert len(state["datasources"]) == 2


@needs_curl
def test_the_script_waits_out_a_passing_failure_and_leaves_out_only_what_stays_broken(
    tmp_path: Path,
) -> None:
    """Grafana's database locked while the sidecars reload, or no answer: each is tried again,
    logged, and Grafana stays up whatever happens."""
    plan = _plan_dirs(tmp_path)
    flaky = {"POST /api/orgs": ["locked", "drop"]}  # fails twice, then succeeds
    state = _state(plan, {1: "Main Org."}, failures=flaky)
    with _grafana(state) as url:
        out, err = _bootstrap(url, plan)
    assert out.splitlines()[-1] == READY, err
    assert state["orgs"] == {1: FLEET_ORG, 2: "ads", 3: "ml-dev"} and not flaky["POST /api/orgs"]
    assert "create organisation ads: try 1 of 8: HTTP 500" in err
    assert "database is locked" in err
    assert "create organisation ads: try 2 of 8: no answer" in err
    assert _providers(plan) == ["org-1.yaml", "org-2.yaml", "org-3.yaml"]
    # A failure that outlasts the tries leaves that organisation out of this pass; the others
    # are made and served, and the state says which one is missing.
    plan = _plan_dirs(tmp_path / "again")
    broken = {"PUT /api/datasources/uid/prometheus": ["locked"] * 2}  # ads's, tried twice
    state = _state(plan, {1: "Main Org."}, failures=broken)
    with _grafana(state) as url:
        out, err = _bootstrap(url, plan, RETRY_TRIES="2")
    assert out.splitlines()[-1] == f"{DEGRADED} ads", err
    assert "could not update ads's datasource after 2 tries: HTTP 500" in err
    assert set(state["datasources"]) == {(3, "prometheus")}
    assert _providers(plan) == ["org-1.yaml", "org-3.yaml"] and state["reloads"] == 1


@needs_curl
def test_an_organisation_with_another_id_is_left_out_and_the_others_are_made(
    tmp_path: Path,
) -> None:
    """org_mapping names ids: an organisation with another id would let the wrong team in, so
    it gets no datasource and no dashboards; the fleet's and the other teams' are served."""
    plan = _plan_dirs(tmp_path)
    # ml-dev made by hand at its planned id first: ads then gets id 4, not 2.
    state = _state(plan, {1: "Main Org.", 3: "ml-dev"})
    with _grafana(state) as url:
        out, err = _bootstrap(url, plan)
    assert out.splitlines()[-1] == f"{DEGRADED} ads", err
    assert "ERROR: organisation ads has id 4, the plan says 2" in err
    assert state["orgs"] == {1: FLEET_ORG, 3: "ml-dev", 4: "ads"}
    assert set(state["datasources"]) == {(3, "prometheus")}
    assert _providers(plan) == ["org-1.yaml", "org-3.yaml"] and state["reloads"] == 1


@needs_curl
def test_a_team_that_cannot_be_made_holds_back_the_later_teams_so_the_ids_stay_the_plans(
    tmp_path: Path,
) -> None:
    """Grafana numbers organisations in the order they are made: ml-dev made while ads's
    creation fails would take ads's id 2, and ads 3 on the next pass, both with the wrong id
    until someone restarts the pod. So nothing after ads is made in that pass, and the next
    pass makes both in order."""
    plan = _plan_dirs(tmp_path)
    broken = {"POST /api/orgs": ["locked"] * 2}  # ads's creation, both of its tries
    state = _state(plan, {1: "Main Org."}, failures=broken)
    with _grafana(state) as url:
        out, err = _bootstrap(url, plan, passes=2, RETRY_TRIES="2", PASS_SECONDS="0")
    assert out.splitlines() == [f"{DEGRADED} ads ml-dev", READY], err
    assert "could not create organisation ads after 2 tries: HTTP 500" in err
    assert "organisation ml-dev not made in this pass: organisation ads, before it" in err
    assert "ERROR" not in err
    assert state["orgs"] == {1: FLEET_ORG, 2: "ads", 3: "ml-dev"}
    assert set(state["datasources"]) == {(2, "prometheus"), (3, "prometheus")}
    assert _providers(plan) == ["org-1.yaml", "org-2.yaml", "org-3.yaml"]
    assert state["reloads"] == 2


@needs_curl
def test_a_request_grafana_never_answers_is_given_up_and_tried_again(tmp_path: Path) -> None:
    """Without a bound, one request Grafana accepts and never answers would hold the script,
    and every organisation after it, for the pod's life."""
    plan = _plan_dirs(tmp_path)
    hung = {"POST /api/orgs": ["hang"]}
    state = _state(plan, {1: "Main Org."}, failures=hung)
    with _grafana(state) as url:
        out, err = _bootstrap(url, plan, REQUEST_SECONDS="0.5")
    assert out.splitlines()[-1] == READY, err
    assert "create organisation ads: try 1 of 8: no answer" in err
    assert "timed out" in err  # curl's own line: CURLE_OPERATION_TIMEDOUT
    assert state["orgs"] == {1: FLEET_ORG, 2: "ads", 3: "ml-dev"} and not hung["POST /api/orgs"]
    # Every request is bounded, the wait for Grafana's health included.
    curls = [
        line for line in orgs_module.BOOTSTRAP_SCRIPT.splitlines()
        if "curl " in line and not line.lstrip().startswith("#")
    ]  # fmt: skip
    assert len(curls) == 3 and all('--max-time "$max_time"' in line for line in curls), curls
