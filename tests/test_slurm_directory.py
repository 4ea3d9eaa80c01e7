"""Issue 21 point 4: Slurm users log in as themselves, from the directory, in team accounts.

What is checked here, and where upstream says it:

* ``sssd.conf`` (sssd.conf(5), sssd-ldap(5)) is one Secret that the operator mounts into login
  pods and, with a NodeSet's SSH on, into slurmd pods (slurm-operator v1.2.1
  loginbuilder/login_app.go, workerbuilder/worker_app.go), so both resolve the same users;
* TLS is never optional, directory ids stay clear of root, slurm (401) and the workload user;
* each team's Slurm account is its directory group's members (the loop run in bash against
  stub ``getent``/``sacctmgr``), with a fair share equal to its Volcano ``deserved``;
* fair share counts: Slurm's ``PriorityWeightFairshare`` defaults to 0 (SchedMD/slurm
  slurm-26-05-3-1 src/common/read_config.c), ``AccountingStorageEnforce`` to 0 (read_config.h).
"""

from __future__ import annotations

import configparser
import copy
import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any, Final

import pytest

from components.config import parse_platform_config
from components.config.base import ConfigError
from components.config.slurm import BIND_PASSWORD_KEY, bind_password_problems
from components.slurm import SLURM_APP_LABEL
from components.slurm.directory import (
    ACCOUNTS_INTERVAL_SECONDS,
    CONFIG_HASH_ANNOTATION,
    HOME_PROLOG,
    SSSD_SECRET,
    TeamRow,
    accounts_script,
    config_hash,
    fair_shares,
    home_prolog,
    neuron_device_weight,
    sssd_conf,
    teams_table,
)
from synth.run import StackResult
from synth.stackfile import StackFile, load_stack
from synth.yamlio import load_yaml
from tests.config_problems import failures_of_the_program
from tests.conftest import stack_data

PEM = textwrap.dedent(
    """\
    -----BEGIN CERTIFICATE-----
    MIIBbTCCAROgAwIBAgIUUrajAmiDv75eTKSscFFYA3PetfQwCgYIKoZIzj0EAwIw
    LDEqMCgGA1UEAwwhRXhhbXBsZSBDb3JwIFN0YWdpbmcgRGlyZWN0b3J5IENBMB4X
    DTI2MDEwMTAwMDAwMFoXDTM1MTIzMDAwMDAwMFowLDEqMCgGA1UEAwwhRXhhbXBs
    ZSBDb3JwIFN0YWdpbmcgRGlyZWN0b3J5IENBMFkwEwYHKoZIzj0CAQYIKoZIzj0D
    """
)


def _prod_with(**directory: Any) -> dict[str, Any]:
    data = stack_data("prod")
    data["slurm"]["directory"] = {
        "uris": ["ldaps://ldap.corp.example.com"],
        "searchBase": "dc=corp,dc=example,dc=com",
        **directory,
    }
    return data


def _problems(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data)
    return str(caught.value)


def _staging_ca() -> str:
    ca: str = stack_data("staging")["slurm"]["directory"]["caCertificates"]
    return ca


# -- config ----------------------------------------------------------------------------------


def test_a_plain_ldap_uri_needs_start_tls() -> None:
    message = _problems(_prod_with(uris=["ldap://ldap.corp.example.com"]))
    assert 'platform.slurm.directory.uris[0]: got "ldap://ldap.corp.example.com"' in message
    assert "startTls" in message
    config = parse_platform_config(_prod_with(uris=["ldap://ldap.corp.example.com"],
                                              startTls=True))  # fmt: skip
    assert config.slurm.directory is not None and config.slurm.directory.start_tls


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("uris", ["https://ldap.corp.example.com"], "ldaps://host"),
        ("uris", ["ldaps://ldap.corp.example.com/dc=x"], "nothing after it"),
        ("searchBase", "corp.example.com", "distinguished name"),
        ("bindDn", "cn=a,,dc=b", "distinguished name"),
        ("loginFilter", "memberOf=cn=hpc,dc=corp", "search filter in parentheses"),
        ("loginFilter", "(&(a=b)(c=d)", "search filter in parentheses"),
        ("caCertificates", "not a certificate", "PEM certificates"),
        ("caCertificates", PEM, "PEM certificates"),  # cut short: unreadable
        ("schema", "openldap", "rfc2307"),
        ("sshPublicKeyAttribute", "ssh key", "pattern"),
    ],
)
def test_a_bad_directory_value_is_refused_by_its_key(key: str, value: Any, words: str) -> None:
    message = _problems(_prod_with(**{key: value}))
    assert f"platform.slurm.directory.{key}" in message
    assert words in message


def test_the_staging_ca_bundle_is_read() -> None:
    config = parse_platform_config(_prod_with(caCertificates=_staging_ca()))
    assert config.slurm.directory is not None and config.slurm.directory.ca_certificates


def test_a_directory_needs_accounting_and_a_gid_on_every_team() -> None:
    data = _prod_with()
    data["slurm"]["accounting"]["enabled"] = False
    # Even a team off the shared file system: with Slurm, its gid names its account's group.
    del data["teams"][1]["gid"]
    del data["teams"][1]["lustreQuotaGiB"]
    data["teams"][1]["sharedFileSystem"] = False
    message = _problems(data)
    assert "platform.slurm.accounting.enabled: got false" in message
    assert "platform.teams[1].gid: got null" in message


def test_the_bind_password_is_a_secret_config_key_of_its_own() -> None:
    config = parse_platform_config(_prod_with(bindDn="uid=sssd,dc=corp,dc=example,dc=com"))
    (missing,) = bind_password_problems(config, present=False, secret=False)
    assert missing.path == BIND_PASSWORD_KEY
    assert f"pulumi config set --secret {BIND_PASSWORD_KEY}" in missing.allowed
    (clear,) = bind_password_problems(config, present=True, secret=False)
    assert "[clear text]" in str(clear) and "must not hold the password" in str(clear)
    assert bind_password_problems(config, present=True, secret=True) == []
    anonymous = parse_platform_config(_prod_with())
    assert bind_password_problems(anonymous, present=False, secret=False) == []
    (unused,) = bind_password_problems(anonymous, present=True, secret=True)
    assert "bindDn" in unused.allowed


def _run_prod(config_changes: dict[str, Any], secret_keys: list[str]) -> list[str]:
    base = load_stack("prod")
    config = {k: v for k, v in {**base.config, **config_changes}.items() if v is not None}
    stack_file = StackFile(base.project, "prod", config, secret_keys)
    return failures_of_the_program(stack_file, region="us-east-1", account_id="333344445555")


def test_the_program_refuses_a_bind_password_in_clear_before_registering_anything() -> None:
    base = load_stack("prod")
    key = f"{base.project}:{BIND_PASSWORD_KEY}"
    assert key in base.secret_keys  # the prod stack file sets it with --secret
    (clear,) = _run_prod({key: "hunter2"}, [k for k in base.secret_keys if k != key])
    assert f"{BIND_PASSWORD_KEY}: got" in clear and "Traceback" not in clear
    (missing,) = _run_prod({key: None}, [k for k in base.secret_keys if k != key])
    assert f"{BIND_PASSWORD_KEY}: missing" in missing


# -- sssd.conf -------------------------------------------------------------------------------


def _sssd(directory: dict[str, Any], password: str | None = None) -> configparser.ConfigParser:
    config = parse_platform_config(_prod_with(**directory))
    assert config.slurm.directory is not None
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(sssd_conf(config.slurm.directory, bind_password=password))
    return parser


def test_sssd_conf_reads_the_directory_over_verified_tls() -> None:
    conf = _sssd({"uris": ["ldaps://a.example.com", "ldaps://b.example.com:636"]})
    domain = conf["domain/directory"]
    assert conf["sssd"]["domains"] == "directory"
    assert "ssh" in conf["sssd"]["services"]  # sss_ssh_authorizedkeys asks this responder
    assert domain["ldap_uri"] == "ldaps://a.example.com, ldaps://b.example.com:636"
    assert domain["ldap_tls_reqcert"] == "demand"
    assert domain["ldap_id_use_start_tls"] == "false"
    assert domain["ldap_schema"] == "rfc2307bis"
    # root, slurm (401) and the workload user (1000) never come from the directory
    assert domain["min_id"] == "1001"
    assert conf["nss"]["filter_users"] == "root,slurm"
    assert domain["access_provider"] == "permit"
    assert "ldap_default_bind_dn" not in domain and "ldap_tls_cacert" not in domain


def test_sssd_conf_binds_filters_and_trusts_the_private_ca_when_told() -> None:
    conf = _sssd(
        {"bindDn": "uid=sssd,dc=corp,dc=example,dc=com", "caCertificates": _staging_ca(),
         "loginFilter": "(memberOf=cn=hpc,dc=corp)", "schema": "ad"},
        password="p@ss %word",
    )  # fmt: skip
    domain = conf["domain/directory"]
    assert domain["ldap_default_bind_dn"] == "uid=sssd,dc=corp,dc=example,dc=com"
    assert domain["ldap_default_authtok"] == "p@ss %word"
    assert domain["ldap_default_authtok_type"] == "password"
    assert domain["ldap_tls_cacert"] == "/etc/sssd/pki/directory-ca.pem"
    assert domain["access_provider"] == "ldap"
    assert domain["ldap_access_filter"] == "(memberOf=cn=hpc,dc=corp)"
    assert domain["ldap_schema"] == "ad"


def test_a_password_that_spans_lines_is_refused() -> None:
    config = parse_platform_config(_prod_with(bindDn="uid=sssd,dc=corp"))
    assert config.slurm.directory is not None
    with pytest.raises(ValueError, match="one line"):
        sssd_conf(config.slurm.directory, bind_password="a\nid_provider = proxy")


# -- fair share ------------------------------------------------------------------------------


def test_each_teams_fair_share_is_its_volcano_deserved_share() -> None:
    config = parse_platform_config(stack_data("prod"))
    shares = fair_shares(config.teams)
    # prod: both teams deserve 96 GPUs and 64 Neuron devices, so equal shares
    assert shares == {"ml-research": 192, "ml-product": 192}
    assert neuron_device_weight(config.teams) == 1.5


@pytest.mark.parametrize(
    ("deserved", "expected"),
    [
        # same ratio in both kinds: exactly Volcano's share
        ([{"gpus": 64, "neuronDevices": 32}, {"gpus": 32, "neuronDevices": 16}], (2, 1)),
        # GPUs only
        ([{"gpus": 30}, {"gpus": 10}], (3, 1)),
        # a team with no share still gets the least Slurm gives
        ([{"gpus": 8}, {}], (8, 1)),
    ],
)
def test_fair_shares_keep_the_deserved_ratio(
    deserved: list[dict[str, int]], expected: tuple[int, int]
) -> None:
    data = stack_data("prod")
    for team, share in zip(data["teams"], deserved, strict=True):
        team["queue"] = {"deserved": share, "capability": {"gpus": 160, "neuronDevices": 128}}
        team["quota"] = {"gpus": 160, "neuronDevices": 128, "efaInterfaces": 800}
    config = parse_platform_config(data)
    first, second = fair_shares(config.teams).values()
    assert first * expected[1] == second * expected[0]


def test_prod_partitions_bill_usage_in_the_shares_units(
    synthesized: dict[str, StackResult],
) -> None:
    manifests = synthesized["prod"].written.directory / "manifests"
    configs = {
        path.stem.rsplit(".", 1)[-1]: load_yaml(path.read_text())["spec"]["partition"]
        for path in manifests.glob("NodeSet.slurm.*.yaml")
    }
    # a whole p5 (8 GPUs, 192 vCPUs) bills 8 by its CPUs too; a trn2 (16 devices) 24
    assert "TRESBillingWeights=CPU=0.0416667,GRES/gpu=1" in configs["p5"]["config"]
    assert "TRESBillingWeights=CPU=0.125,GRES/neuron=1.5" in configs["trn2"]["config"]
    release = load_yaml((synthesized["prod"].written.directory / "helm" / "slurm.yaml").read_text())
    conf = release["values"]["controller"]["extraConfMap"]
    assert conf["PriorityWeightFairshare"] > 0  # Slurm's default 0 would ignore the shares
    assert conf["PriorityFlags"] == "MAX_TRES"  # a node's CPUs and accelerators bill once
    assert conf["AccountingStorageEnforce"].split(",")[0] == "associations"


def test_dev_without_a_directory_keeps_the_charts_root_only_login(
    synthesized: dict[str, StackResult],
) -> None:
    directory = synthesized["dev"].written.directory
    values = load_yaml((directory / "helm" / "slurm.yaml").read_text())["values"]
    assert "sssd" not in values and "PriorityWeightFairshare" not in str(values)
    assert not list((directory / "manifests").glob(f"Secret.slurm.{SSSD_SECRET['name']}.yaml"))


# -- login and compute pods share identities -------------------------------------------------


@pytest.mark.parametrize("stack", ["prod", "staging"])
def test_login_and_slurmd_pods_mount_one_sssd_conf(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    directory = synthesized[stack].written.directory
    secret = load_yaml(
        (directory / "manifests" / f"Secret.slurm.{SSSD_SECRET['name']}.yaml").read_text()
    )
    assert SSSD_SECRET["key"] in secret["stringData"]
    pods = {p.name: load_yaml(p.read_text()) for p in (directory / "pods").glob("*.yaml")}
    # Users log in and run jobs here; Slurm's own daemons and its database never see them.
    users_pods = {"login", "slurmd"}
    slurm_pods = {
        name: pod for name, pod in pods.items()
        if (pod["metadata"].get("labels") or {}).get(SLURM_APP_LABEL) in users_pods
    }  # fmt: skip
    assert len(slurm_pods) >= 3
    for name, pod in slurm_pods.items():
        sources = [
            source["secret"]["name"]
            for volume in pod["spec"]["volumes"]
            if volume["name"] == "sssd-conf"
            for source in volume["projected"]["sources"]
        ]
        assert sources == [SSSD_SECRET["name"]], name
        first = pod["spec"]["containers"][0]
        assert "/etc/sssd/sssd.conf" in {m["mountPath"] for m in first["volumeMounts"]}, name
    node_sets = [
        p for p in slurm_pods.values() if p["metadata"]["labels"][SLURM_APP_LABEL] == "slurmd"
    ]
    assert node_sets and all(
        {"name": "ssh", "containerPort": 22, "protocol": "TCP"}
        in p["spec"]["containers"][0]["ports"]
        for p in node_sets
    )


def test_staging_pods_trust_the_directory_ca(synthesized: dict[str, StackResult]) -> None:
    directory = synthesized["staging"].written.directory
    config_map = load_yaml(
        (directory / "manifests" / "ConfigMap.slurm.slurm-directory-ca.yaml").read_text()
    )
    assert config_map["data"]["ca.pem"] == _staging_ca()
    for path in (directory / "pods").glob("Pod.slurm.*.yaml"):
        pod = load_yaml(path.read_text())
        for container in pod["spec"]["containers"]:
            if container["name"] in ("slurmd", "login", "accounts"):
                mounts = {m["mountPath"] for m in container["volumeMounts"]}
                assert "/etc/sssd/pki/directory-ca.pem" in mounts, (path.name, container["name"])


def test_users_ssh_keys_come_from_the_directory(synthesized: dict[str, StackResult]) -> None:
    release = load_yaml((synthesized["prod"].written.directory / "helm" / "slurm.yaml").read_text())
    login = release["values"]["loginsets"]["login"]
    assert "AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys %u" in login["extraSshdConfig"]
    assert login["rootSshAuthorizedKeys"].strip()  # administrators keep root


def test_login_may_ssh_to_slurmd(synthesized: dict[str, StackResult]) -> None:
    manifests = synthesized["prod"].written.directory / "manifests"
    policy = load_yaml((manifests / "NetworkPolicy.slurm.allow-slurmd.yaml").read_text())
    from_login = next(
        rule for rule in policy["spec"]["ingress"]
        if rule["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "login"}}}]
    )  # fmt: skip
    assert {p["port"] for p in from_login["ports"]} == {6818, 22}


# -- the accounts loop, run in bash ----------------------------------------------------------

SACCTMGR_STUB = r"""#!/usr/bin/env python3
import json, os, sys
path = os.environ["STATE"]
state = json.load(open(path))
args = [a for a in sys.argv[1:] if a not in ("-i", "-nP", "where", "set")]
state["calls"].append(" ".join(sys.argv[1:]))
words = dict(a.split("=", 1) for a in args if "=" in a)
verb, kind = args[0], args[1]
name = args[2] if len(args) > 2 and "=" not in args[2] else None
users = state["users"]
def save():
    json.dump(state, open(path, "w"))
def fail(message):
    save()
    print(message, file=sys.stderr)
    sys.exit(1)
qos = state.setdefault("qos", {})
if verb == "show" and kind == "qos" and name is not None:
    if name in qos:
        print(name)
elif verb == "show" and kind == "qos":
    for known, settings in qos.items():
        print(f"{known}|{settings.get('description', '')}")
elif verb == "add" and kind == "qos":
    qos[name] = {"description": words["description"]}
elif verb == "modify" and kind == "qos":
    if words["name"] in state.get("qos_refused", []):
        fail(" Unknown TRES")
    qos[words["name"]].update({k: v for k, v in words.items() if k != "name"})
elif verb == "delete" and kind == "qos":
    if name in state.get("qos_in_use", []):
        fail(" This QOS is in use")
    del qos[name]
elif verb == "show" and kind == "account":
    for account in state["accounts"]:
        if account == name or (name is None and words.get("organization") == "platform"):
            print(account)
elif verb == "show" and kind == "associations" and words.get("format") == "user,maxsubmit":
    for user in users.get(words["account"], []):
        print(f"{user}|{state.get('maxsubmit', {}).get(words['account'] + '/' + user, '')}")
    print("|")  # the account's own association
elif verb == "modify" and kind == "user" and "maxsubmitjobs" in words:
    key = words["account"] + "/" + words["name"]
    if words["maxsubmitjobs"] == "-1":
        state.setdefault("maxsubmit", {}).pop(key, None)
    else:
        state.setdefault("maxsubmit", {})[key] = words["maxsubmitjobs"]
elif verb == "show" and kind == "associations" and "user" in words:
    for account, members in users.items():
        if words["user"] in members:
            print(account)
elif verb == "show" and kind == "associations":
    for user in users.get(words["account"], []):
        print(user)
    print("")  # the account's own association has no user
elif verb == "add" and kind == "account":
    if words["qos"] not in qos:
        fail(f" Unknown QOS {words['qos']}")
    state["accounts"][name] = int(words["fairshare"])
    state.setdefault("account_qos", {})[name] = [words["qos"], words["defaultqos"]]
elif verb == "modify" and kind == "account":
    state["accounts"][words["name"]] = int(words["fairshare"])
    state.setdefault("account_qos", {})[words["name"]] = [words["qos"], words["defaultqos"]]
elif verb == "add" and kind == "user":
    users.setdefault(words["account"], []).append(name)
    state["default"].setdefault(name, words["account"])
elif verb == "modify" and kind == "user":
    state["default"][name] = words["defaultaccount"]
elif verb == "delete" and kind == "user":
    if name in state.get("busy", []):
        fail(" Job(s) active, cancel job(s) before remove")
    others = [a for a, m in users.items() if name in m and a != words["account"]]
    if state["default"].get(name) == words["account"] and others:
        fail(" Can't remove the default account of a user with other associations")
    users[words["account"]].remove(name)
elif verb == "delete" and kind == "account":
    if set(users.get(name, [])) & set(state.get("busy", [])):
        fail(" Job(s) active, cancel job(s) before remove")
    del state["accounts"][name]
    users.pop(name, None)
save()
"""

SQUEUE_STUB = r"""#!/usr/bin/env python3
import json, os, sys
state = json.load(open(os.environ["STATE"]))
args = sys.argv[1:]
account = args[args.index("-A") + 1]
for job, job_account, qos in state.get("pending", []):
    if job_account == account:
        print(f"{job} {qos}")
"""

SCONTROL_STUB = r"""#!/usr/bin/env python3
import json, os, sys
path = os.environ["STATE"]
state = json.load(open(path))
words = dict(a.split("=", 1) for a in sys.argv[2:])
if words["jobid"] in state.get("immovable", []):
    sys.exit(1)
for entry in state.get("pending", []):
    if entry[0] == words["jobid"]:
        entry[2] = words["qos"]
json.dump(state, open(path, "w"))
"""

GETENT_STUB = r"""#!/usr/bin/env bash
case "$1" in
  group) line="$(grep -E "^[^:]*:[^:]*:$2:" "$GROUPS_FILE")" || exit 2; echo "$line" ;;
  passwd) cat "$PASSWD_FILE" ;;
  *) exit 1 ;;
esac
"""


TEAMS: Final = [
    TeamRow("ml-research", 5001, 192, 2880, "gres/gpu=-1,gres/neuron=-1"),
    TeamRow("ml-product", 5002, 64, 1440, "gres/gpu=16,gres/neuron=-1"),
]


def _run_accounts(
    tmp_path: Path,
    groups: str,
    state: dict[str, Any],
    passwd: str = "",
    teams: list[TeamRow] | None = None,
    *,
    table: bool = True,
) -> tuple[dict[str, Any], str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stubs = {"sacctmgr": SACCTMGR_STUB, "getent": GETENT_STUB, "squeue": SQUEUE_STUB,
             "scontrol": SCONTROL_STUB,
             "sssd": "#!/bin/sh\nexit 0\n", "sleep": "#!/bin/sh\nexit 0\n"}  # fmt: skip
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "group").write_text(groups)
    (tmp_path / "passwd").write_text(passwd)
    # the sockets the loop waits for (SSSD's and sackd's) are real paths; here they never come
    state_path = tmp_path / "state.json"
    state_path.write_text(
        json.dumps({"accounts": {}, "users": {}, "default": {}, "calls": [], **state})
    )
    (tmp_path / "teams").unlink(missing_ok=True)
    if table:
        (tmp_path / "teams").write_text(teams_table(teams if teams is not None else TEAMS))
    script = accounts_script(cluster="c", interval=300)
    done = subprocess.run(
        ["bash", "-c", script],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "STATE": str(state_path),
             "TEAMS_FILE": str(tmp_path / "teams"),
             "GROUPS_FILE": str(tmp_path / "group"), "PASSWD_FILE": str(tmp_path / "passwd"),
             "ACCOUNTS_ONCE": "1"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(state_path.read_text())
    return result, done.stdout


def test_the_loop_creates_team_accounts_with_their_members(tmp_path: Path) -> None:
    groups = "research:*:5001:alice,bob\nproduct:*:5002:carol\nother:*:6000:mallory\n"
    state, log = _run_accounts(tmp_path, groups, {})
    assert state["accounts"] == {"ml-research": 192, "ml-product": 64}
    assert state["users"] == {"ml-research": ["alice", "bob"], "ml-product": ["carol"]}
    assert "ml-research: added alice" in log
    assert all(
        "cluster=c" in call for call in state["calls"] if call.startswith(("-i add account",
                                                                            "-i add user"))
    )  # fmt: skip


def test_each_team_gets_a_qos_with_its_limits_as_its_accounts_only_one(tmp_path: Path) -> None:
    """MaxWall and GrpTRES per team, refused at submission (DenyOnLimit), and the account's
    only QOS (``AccountingStorageEnforce=qos`` refuses any other: slurm.conf(5))."""
    state, _ = _run_accounts(tmp_path, "research:*:5001:alice\nproduct:*:5002:carol\n", {})
    assert state["qos"] == {
        "ml-research": {"description": "platform team ml-research", "maxwall": "2880",
                        "grptres": "gres/gpu=-1,gres/neuron=-1", "flags": "DenyOnLimit"},
        "ml-product": {"description": "platform team ml-product", "maxwall": "1440",
                       "grptres": "gres/gpu=16,gres/neuron=-1", "flags": "DenyOnLimit"},
    }  # fmt: skip
    assert state["account_qos"] == {
        "ml-research": ["ml-research", "ml-research"],
        "ml-product": ["ml-product", "ml-product"],
    }
    # A later pass with other limits sets them on the QOS that is there.
    tighter = [TEAMS[0]._replace(max_wall_minutes=600, grp_tres="gres/gpu=8,gres/neuron=-1"),
               TEAMS[1]]  # fmt: skip
    state, _ = _run_accounts(tmp_path, "research:*:5001:alice\n", state, teams=tighter)
    assert state["qos"]["ml-research"]["maxwall"] == "600"
    assert state["qos"]["ml-research"]["grptres"] == "gres/gpu=8,gres/neuron=-1"


def test_pending_jobs_under_another_qos_move_to_their_teams(tmp_path: Path) -> None:
    """Queued before the team's QOS existed (or requeued since), a job under ``normal`` would
    pend as InvalidQOS for ever once its account lists only the team's QOS."""
    before = {
        "pending": [["101", "ml-research", "normal"], ["102", "ml-research", "ml-research"],
                    ["103", "ml-product", "normal"], ["104", "ml-research", "normal"]],
        "immovable": ["104"],
    }  # fmt: skip
    state, log = _run_accounts(tmp_path, "research:*:5001:\nproduct:*:5002:\n", before)
    assert [entry[2] for entry in state["pending"]] == [
        "ml-research",
        "ml-research",
        "ml-product",
        "normal",
    ]
    assert "ml-research: pending job 101 moved to QOS ml-research" in log
    assert "pending job 102" not in log
    assert "ml-research: pending job 104 cannot take QOS ml-research (over its limits?)" in log


def test_a_qos_of_a_team_no_longer_listed_goes_and_others_stay(tmp_path: Path) -> None:
    before = {
        "qos": {"normal": {"description": "Normal QOS default"},
                "ml-old": {"description": "platform team ml-old"},
                "ml-busy": {"description": "platform team ml-busy"}},
        "qos_in_use": ["ml-busy"],
    }  # fmt: skip
    state, log = _run_accounts(tmp_path, "research:*:5001:\nproduct:*:5002:\n", before)
    assert set(state["qos"]) == {"normal", "ml-busy", "ml-research", "ml-product"}
    assert "ml-old: QOS of no team, removed" in log
    assert "ml-busy: cannot remove its QOS (in use?)" in log


def test_a_qos_that_cannot_be_set_keeps_members_in_step_but_adds_no_account(
    tmp_path: Path,
) -> None:
    """GrpTRES naming a TRES slurmctld has not registered yet: the members of an existing
    account are still kept in step; a new team gets no account without its QOS."""
    before = {"accounts": {"ml-research": 192}, "users": {"ml-research": ["alice", "bob"]},
              "qos_refused": ["ml-research", "ml-product"]}  # fmt: skip
    state, log = _run_accounts(tmp_path, "research:*:5001:alice\nproduct:*:5002:carol\n", before)
    assert state["users"]["ml-research"] == ["alice"] and "ml-research: removed bob" in log
    assert "ml-product" not in state["accounts"]
    assert "ml-product: no account until its QOS can be made" in log


def test_a_gone_teams_qos_stays_while_its_account_does(tmp_path: Path) -> None:
    before = {"accounts": {"ml-old": 10}, "users": {"ml-old": ["zed"]}, "busy": ["zed"],
              "qos": {"ml-old": {"description": "platform team ml-old"}}}  # fmt: skip
    state, _ = _run_accounts(tmp_path, "research:*:5001:\nproduct:*:5002:\n", before)
    assert "ml-old" in state["qos"], "its account is still there"
    state["busy"] = []
    state, log = _run_accounts(tmp_path, "research:*:5001:\nproduct:*:5002:\n", state)
    assert "ml-old" not in state["qos"] and "ml-old: QOS of no team, removed" in log


def test_an_unreadable_teams_table_changes_nothing(tmp_path: Path) -> None:
    before = {"accounts": {"ml-research": 192}, "users": {"ml-research": ["alice"]},
              "qos": {"ml-research": {"description": "platform team ml-research"}}}  # fmt: skip
    state, log = _run_accounts(tmp_path, "research:*:5001:\n", copy.deepcopy(before), teams=None,
                               table=False)  # fmt: skip
    assert state["accounts"] == before["accounts"] and state["users"] == before["users"]
    assert set(state["qos"]) == {"ml-research"}
    assert f"cannot read {tmp_path / 'teams'}; nothing changed" in log
    # An empty table, though, is no teams: their accounts go.
    state, _ = _run_accounts(tmp_path, "research:*:5001:\n", copy.deepcopy(before), teams=[])
    assert state["accounts"] == {} and state["qos"] == {}


def test_the_loop_follows_the_directory(tmp_path: Path) -> None:
    before = {"accounts": {"ml-research": 100, "ml-product": 64},
              "users": {"ml-research": ["alice", "bob"], "ml-product": ["carol"]}}  # fmt: skip
    groups = "research:*:5001:alice,dave\nproduct:*:5002:carol\n"
    state, log = _run_accounts(tmp_path, groups, copy.deepcopy(before))
    assert state["accounts"]["ml-research"] == 192  # share updated
    assert sorted(state["users"]["ml-research"]) == ["alice", "dave"]
    assert "ml-research: removed bob" in log and "ml-research: added dave" in log
    assert not any("ml-product" in call and ("add user" in call or "delete" in call)
                   for call in state["calls"])  # fmt: skip


def test_a_group_the_directory_cannot_answer_for_removes_nobody(tmp_path: Path) -> None:
    before = {"accounts": {"ml-research": 192, "ml-product": 64},
              "users": {"ml-research": ["alice"], "ml-product": ["carol"]}}  # fmt: skip
    state, log = _run_accounts(tmp_path, "research:*:5001:alice\n", copy.deepcopy(before))
    assert state["users"] == before["users"]
    assert "ml-product: the directory has no group 5002; users left as they are" in log


def test_a_user_with_jobs_left_submits_nothing_new_until_removed(tmp_path: Path) -> None:
    """slurmdbd keeps an association while its jobs are pending or running
    (accounting_storage_mysql.c, _check_jobs_before_remove): the leaver may submit no more
    (MaxSubmitJobs=0), and is removed on a later pass; one who rejoins first may again."""
    before = {
        "accounts": {"ml-research": 192, "ml-product": 64},
        "users": {"ml-research": ["alice", "bob"], "ml-product": []},
        "busy": ["bob"],
    }
    groups = "research:*:5001:alice\nproduct:*:5002:\n"
    state, log = _run_accounts(tmp_path, groups, copy.deepcopy(before))
    assert state["users"]["ml-research"] == ["alice", "bob"]
    assert state["maxsubmit"] == {"ml-research/bob": "0"}
    assert "ml-research: bob has jobs pending or running; no new ones, removed once" in log
    # bob rejoins before his jobs end: he may submit again
    state, log = _run_accounts(tmp_path, "research:*:5001:alice,bob\nproduct:*:5002:\n", state)
    assert state["maxsubmit"] == {} and "ml-research: bob is back; may submit again" in log
    # or his jobs end: the next pass removes him
    state["maxsubmit"] = {"ml-research/bob": "0"}
    state["busy"] = []
    state, log = _run_accounts(tmp_path, groups, state)
    assert state["users"]["ml-research"] == ["alice"] and "ml-research: removed bob" in log


def test_primary_group_members_and_mixed_case_names_are_found(tmp_path: Path) -> None:
    """A user whose primary gidNumber is the team's is a member too (the issue: "primary or
    supplemental"); sacctmgr keeps names lower-cased, so the directory's case must not flap."""
    groups = "research:*:5001:JSmith\nproduct:*:5002:\n"
    passwd = "erin:x:7001:5002::/home/erin:/bin/bash\nfrank:x:7002:6000::/home/frank:/bin/bash\n"
    before = {"accounts": {"ml-research": 192, "ml-product": 64},
              "users": {"ml-research": ["jsmith"], "ml-product": []}}  # fmt: skip
    state, log = _run_accounts(tmp_path, groups, copy.deepcopy(before), passwd)
    assert state["users"] == {"ml-research": ["jsmith"], "ml-product": ["erin"]}
    assert "removed" not in log


def test_a_user_moving_teams_leaves_the_old_one(tmp_path: Path) -> None:
    before = {"accounts": {"ml-research": 192, "ml-product": 64},
              "users": {"ml-research": ["alice"], "ml-product": []},
              "default": {"alice": "ml-research"}}  # fmt: skip
    groups = "research:*:5001:\nproduct:*:5002:alice\n"
    state, log = _run_accounts(tmp_path, groups, copy.deepcopy(before))
    assert state["users"] == {"ml-research": [], "ml-product": ["alice"]}
    assert state["default"]["alice"] == "ml-product"
    assert "ml-research: removed alice" in log


def test_an_account_of_a_team_no_longer_in_config_goes(tmp_path: Path) -> None:
    before = {"accounts": {"ml-research": 192, "ml-product": 64, "ml-old": 10},
              "users": {"ml-old": ["zed"]}}  # fmt: skip
    state, log = _run_accounts(tmp_path, "research:*:5001:\nproduct:*:5002:\n", before)
    assert set(state["accounts"]) == {"ml-research", "ml-product"}
    assert "ml-old: no longer a team, removed" in log


def test_start_tls_on_ldaps_is_refused() -> None:
    message = _problems(_prod_with(startTls=True))
    assert 'platform.slurm.directory.uris[0]: got "ldaps://ldap.corp.example.com"' in message


def test_the_home_prolog_makes_the_users_home_and_never_fails(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "install").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls\nexit 1\n')
    (bin_dir / "install").chmod(0o755)

    def run(uid: str) -> int:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_UID": uid,
               "SLURM_JOB_GID": "5001", "SLURM_JOB_USER": "alice-test-user"}  # fmt: skip
        return subprocess.run(["/bin/sh", "-c", home_prolog()], env=env, check=False,
                              timeout=30).returncode  # fmt: skip

    assert run("0") == 0 and run("1000") == 0
    assert not (tmp_path / "calls").exists()  # root and the workload user: nothing to make
    assert run("7001") == 0  # install failed: the node is not drained for it
    assert (tmp_path / "calls").read_text().split() == [
        "-d", "-o", "7001", "-g", "5001", "-m", "0700", "/home/alice-test-user"
    ]  # fmt: skip


def test_a_new_ca_or_conf_rolls_slurmd_pods_but_the_password_does_not_show() -> None:
    one = parse_platform_config(_prod_with(bindDn="uid=sssd,dc=corp")).slurm.directory
    two = parse_platform_config(
        _prod_with(bindDn="uid=sssd,dc=corp", caCertificates=_staging_ca())
    ).slurm.directory
    assert one is not None and two is not None
    assert config_hash(one) != config_hash(two)
    assert config_hash(one) == config_hash(copy.deepcopy(one))


def test_prod_job_steps_get_an_extern_step_for_ssh_and_their_homes(
    synthesized: dict[str, StackResult],
) -> None:
    directory = synthesized["prod"].written.directory
    values = load_yaml((directory / "helm" / "slurm.yaml").read_text())["values"]
    assert values["controller"]["extraConfMap"]["PrologFlags"] == "Contain"
    assert values["prologScripts"][HOME_PROLOG] == home_prolog()
    node_set = load_yaml((directory / "manifests" / "NodeSet.slurm.p5.yaml").read_text())
    assert CONFIG_HASH_ANNOTATION in node_set["spec"]["template"]["metadata"]["annotations"]


# -- group changes reach both sides within one accounts pass ---------------------------------

# SSSD 2.9.4 (Ubuntu 24.04's): entry_cache_timeout 5400 (src/confdb/confdb.c), which the
# per-type user and group timeouts default to, initgroups expiring with the user one
# (src/db/sysdb_ops.c, set_initgroups_expire_attribute); memcache_timeout 300 and
# enum_cache_timeout 120 in [nss] (src/responder/nss/nsssrv.c); enumeration every
# ldap_enumeration_refresh_timeout 300 + up to ldap_enumeration_refresh_offset 30
# (src/providers/ldap/ldap_opts.c). Slurm's GroupUpdateTime 600 (SchedMD/slurm
# slurm-26-05-3-1 src/common/read_config.h, DEFAULT_GROUP_TIME).
SSSD_DEFAULTS = {
    "entry_cache_timeout": 5400,
    "memcache_timeout": 300,
    "enum_cache_timeout": 120,
    "ldap_enumeration_refresh_timeout": 300,
    "ldap_enumeration_refresh_offset": 30,
}
SLURM_GROUP_UPDATE_DEFAULT = 600


def _seconds(conf: configparser.ConfigParser, section: str, key: str) -> int:
    return int(conf[section].get(key, str(SSSD_DEFAULTS[key])))


def _worst_entry_staleness(conf: configparser.ConfigParser) -> int:
    """A record read from the directory just before it expires, then kept in the memcache."""
    domain = conf["domain/directory"]
    entry = _seconds(conf, "domain/directory", "entry_cache_timeout")
    # Users (and so initgroups) and groups: each defaults to entry_cache_timeout.
    per_type = [int(domain.get(key, str(entry)))
                for key in ("entry_cache_user_timeout", "entry_cache_group_timeout")]  # fmt: skip
    return max(per_type) + _seconds(conf, "nss", "memcache_timeout")


def _stack_sssd(result: StackResult, *, accounts: bool) -> configparser.ConfigParser:
    assert result.config.slurm.directory is not None
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(
        sssd_conf(result.config.slurm.directory, bind_password="x", accounts=accounts)
    )
    return parser


@pytest.mark.parametrize("stack", ["prod", "staging"])
def test_a_group_change_reaches_login_and_slurmd_pods_within_one_accounts_pass(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    values = load_yaml((synthesized[stack].written.directory / "helm" / "slurm.yaml").read_text())[
        "values"
    ]
    # sackd keeps what getgrouplist() said for GroupUpdateTime, on top of SSSD's caches.
    group_update = int(
        values["controller"]["extraConfMap"].get("GroupUpdateTime", SLURM_GROUP_UPDATE_DEFAULT)
    )
    login = _stack_sssd(synthesized[stack], accounts=False)
    assert _worst_entry_staleness(login) + group_update <= ACCOUNTS_INTERVAL_SECONDS
    # A memcache that outlives the entries would keep serving what SSSD already refreshed.
    assert _seconds(login, "nss", "memcache_timeout") > 0


@pytest.mark.parametrize("stack", ["prod", "staging"])
def test_the_accounts_loop_reads_the_directory_fresher_than_it_runs(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    conf = _stack_sssd(synthesized[stack], accounts=True)
    # getent group <gid>: an entry, then the memcache.
    assert _worst_entry_staleness(conf) < ACCOUNTS_INTERVAL_SECONDS
    # getent passwd: the last enumeration, answered from the responder's enumeration cache.
    enumeration = (
        _seconds(conf, "domain/directory", "ldap_enumeration_refresh_timeout")
        + _seconds(conf, "domain/directory", "ldap_enumeration_refresh_offset")
        + _seconds(conf, "nss", "enum_cache_timeout")
    )
    assert enumeration < ACCOUNTS_INTERVAL_SECONDS
    # enum_cache_timeout is an [nss] option; a domain section's would be ignored.
    assert "enum_cache_timeout" not in conf["domain/directory"]
