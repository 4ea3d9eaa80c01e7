"""Slurm users from the directory: SSSD on login and compute pods, team accounts, fair share.

Builders beside :class:`components.slurm.Slurm`, which registers what they describe
(:func:`directory_objects`: the Secret with ``sssd.conf`` and the CA ConfigMap). How identities,
accounts and fair share work, upstream file by upstream file: docs/concepts/slurm.md, "How
identities and accounts work".
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import pulumi
import pulumi_kubernetes as k8s

from components.catalog import GPU_RESOURCE
from components.config.pools import NodePoolConfig
from components.config.slurm import SlurmDirectoryConfig
from components.config.teams import MIN_TEAM_GID, TeamConfig
from components.slurm.common import NAMESPACE

SSSD_SECRET: Final = {"name": "slurm-directory-sssd", "key": "sssd.conf"}
"""The Secret with ``sssd.conf`` the stack makes (the chart's ``sssd.secretRef``). Not the
chart's own ``slurm-sssd-conf``, which the chart makes while no ``secretRef`` is set: one name
for both would stop an up that adds or removes the directory (Helm and Pulumi would each
create the object the other owns)."""
ACCOUNTS_SSSD_KEY: Final = "accounts-sssd.conf"
"""The accounts loop's own ``sssd.conf`` in the same Secret: it enumerates users (to find those
whose primary group is a team's) and caches for a minute, which login and slurmd pods need not."""
CA_CONFIG_MAP: Final = "slurm-directory-ca"
CA_PATH: Final = "/etc/sssd/pki/directory-ca.pem"
"""Where login and slurmd pods see the directory's CA certificates (``ldap_tls_cacert``)."""
SSS_NSS_SOCKET: Final = "/var/lib/sss/pipes/nss"
"""SSSD's NSS responder socket (sssd(8)): there once ``getent`` can ask SSSD."""
SACKD_PATH: Final = "/run/slurm"
"""sackd's socket and the config it fetches (login_app.go, SackdDir): Slurm clients use both."""
DOMAIN: Final = "directory"
SSH_KEYS_COMMAND: Final = (
    "AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys %u\nAuthorizedKeysCommandUser nobody\n"
)
"""sshd reads a user's public keys from the directory through SSSD (sss_ssh_authorizedkeys(1));
root's keys stay in its authorized_keys file (SSSD filters root)."""
LOGIN_DROPPED_CAPABILITIES: Final = ("NET_RAW", "MKNOD")
"""What login-side containers drop: sshd and SSSD need root's others (setuid, chown, chroot)."""
ACCOUNTS_INTERVAL_SECONDS: Final = 300
"""How often team membership is copied from the directory into Slurm's accounts."""
GROUP_UPDATE_SECONDS: Final = 60
"""Slurm's ``GroupUpdateTime``: how long a Slurm daemon keeps a user's groups from
``getgrouplist()`` (SchedMD/slurm slurm-26-05-3-1 src/common/group_cache.c, ``expiration``;
default 600: src/common/read_config.h ``DEFAULT_GROUP_TIME``). With ``use_client_ids`` the login
pod's sackd looks a submitter's groups up through it (src/plugins/auth/slurm/sack.c ->
src/plugins/auth/common/auth_common.c -> src/common/identity.c ``fetch_identity``)."""
MEMCACHE_SECONDS: Final = 60
"""``memcache_timeout`` of login and slurmd pods: how long SSSD's fast in-memory cache (the
``getpwnam``/``getgrgid``/``initgroups`` answers the NSS client reads without asking the
responder) keeps a record. SSSD 2.9.4 src/responder/nss/nsssrv.c: default 300."""
ENTRY_CACHE_SECONDS: Final = ACCOUNTS_INTERVAL_SECONDS - GROUP_UPDATE_SECONDS - MEMCACHE_SECONDS
"""``entry_cache_timeout`` of login and slurmd pods (users, groups and, through the user
timeout, initgroups: SSSD 2.9.4 src/confdb/confdb.c, default 5400; src/db/sysdb_ops.c
``set_initgroups_expire_attribute``). A record read from the directory just before it expires
is copied into the in-memory cache for all of :data:`MEMCACHE_SECONDS`, and sackd keeps the
result for :data:`GROUP_UPDATE_SECONDS`, so the login side is at worst the sum of the three
stale: :data:`ACCOUNTS_INTERVAL_SECONDS`."""
ACCOUNTS_CACHE_SECONDS: Final = 60
"""The accounts loop's own SSSD: worst-case staleness of what ``getent`` tells it."""
ACCOUNTS_MEMCACHE_SECONDS: Final = 15
"""Its in-memory cache; its entries keep the rest of :data:`ACCOUNTS_CACHE_SECONDS`."""
ACCOUNTS_ENUMERATION_SECONDS: Final = ACCOUNTS_CACHE_SECONDS // 2
"""Its enumeration (``getent passwd``, for users whose primary group is a team's) is the
back end's periodic copy of the directory (``ldap_enumeration_refresh_timeout``, default 300,
plus up to ``ldap_enumeration_refresh_offset``, default 30: SSSD 2.9.4
src/providers/ldap/ldap_opts.c) that the NSS responder answers from for ``enum_cache_timeout``
(an ``[nss]`` option, default 120: src/responder/nss/nsssrv.c, nss_enum.c): half each."""
if ENTRY_CACHE_SECONDS <= 0 or ACCOUNTS_MEMCACHE_SECONDS >= ACCOUNTS_CACHE_SECONDS:
    raise ValueError("the SSSD cache budgets do not fit the accounts interval")
TEAMS_CONFIG_MAP: Final = {"name": "slurm-teams", "key": "teams"}
"""The teams the accounts loop keeps (:func:`teams_table`), mounted as a directory so that a
change reaches the running loop (a ``subPath`` mount would never refresh)."""
TEAMS_DIR: Final = "/etc/trainingplatform/slurm-teams"
TEAMS_FILE: Final = f"{TEAMS_DIR}/{TEAMS_CONFIG_MAP['key']}"
ENFORCE: Final = "associations,limits,qos,safe"
"""``AccountingStorageEnforce``: a user submits only under an account they belong to, with a
QOS that account has (``qos``: otherwise ``--qos=normal`` would escape the team's MaxWall
and GrpTRES), within the limits of both (slurm.conf(5), AccountingStorageEnforce)."""
PRIORITY_CONF: Final = {
    "GroupUpdateTime": GROUP_UPDATE_SECONDS,
    "PriorityType": "priority/multifactor",
    # A job's billing on a node is its largest TRES there (accelerators, or CPUs weighed so a
    # whole node's CPUs bill as its accelerators: billing_weights), so a CPU-only job on an
    # accelerator node is not free.
    "PriorityFlags": "MAX_TRES",
    "PriorityWeightFairshare": 10000,
    "PriorityWeightAge": 1000,
    "PriorityDecayHalfLife": "7-0",
    "AccountingStorageEnforce": ENFORCE,
}
"""Fair share decides the order of pending jobs, age breaks ties slowly; usage halves weekly;
Slurm's daemons (sackd above all) keep a user's groups :data:`GROUP_UPDATE_SECONDS`. (Each
job's extern step, which pam_slurm_adopt needs, comes with ``PrologFlags=Contain`` of
:data:`components.slurm.sharing.SHARING_CONF`.)"""


def _ini_value(text: str, key: str) -> str:
    if "\n" in text or "\r" in text:
        raise ValueError(f"sssd.conf {key} must be one line")
    return text


def sssd_conf(
    directory: SlurmDirectoryConfig, *, bind_password: str | None, accounts: bool = False
) -> str:
    """``sssd.conf`` for login and slurmd pods (sssd.conf(5), sssd-ldap(5)).

    ``min_id`` also drops a user whose *primary* gidNumber is below it (sssd's LDAP provider
    checks both: src/providers/ldap/sdap_async_users.c), so directories whose users' primary
    group is a system group (``users``, 100) need their team group as the primary one.

    Args:
        directory: the validated ``slurm.directory``.
        bind_password: the bind DN's password (from the secret config key), None for an
            anonymous bind.
        accounts: the accounts loop's variant: enumerate users, and keep nothing longer than
            :data:`ACCOUNTS_CACHE_SECONDS` (login and slurmd pods keep entries up to
            :data:`ENTRY_CACHE_SECONDS`; SSSD's default is 90 minutes). Default False.

    Raises:
        ValueError: the password spans lines (sssd.conf holds one value per line).
    """
    domain = {
        "id_provider": "ldap",
        "auth_provider": "ldap",
        "chpass_provider": "none",
        "ldap_uri": ", ".join(directory.uris),
        "ldap_search_base": directory.search_base,
        "ldap_schema": directory.directory_schema,
        "ldap_id_use_start_tls": "true" if directory.start_tls else "false",
        "ldap_tls_reqcert": "demand",
        "ldap_user_ssh_public_key": directory.ssh_public_key_attribute,
        # No directory id may be root's, slurm's (401) or the workload user's (1000).
        "min_id": str(MIN_TEAM_GID),
        "cache_credentials": "true",
        "enumerate": "true" if accounts else "false",
        # Homes are the login pod's own (pam_mkhomedir): root squash on /fsx stops root from
        # making one there for the user. Durable work goes under /fsx/teams/<team>.
        "override_homedir": "/home/%u",
        "default_shell": "/bin/bash",
    }
    nss = {"filter_users": "root,slurm", "filter_groups": "root,slurm"}
    # Bounded, so that a team's gid and its Slurm account come and go together (docs/concepts/
    # slurm.md, "When a group change takes effect"). The per-type timeouts (user, group)
    # default to entry_cache_timeout, initgroups follows the user one (SSSD 2.9.4
    # src/confdb/confdb.c, src/db/sysdb_ops.c). refresh_expired_interval (default 0, off)
    # only refreshes entries early, so it never makes them staler; left off.
    if accounts:
        memcache = ACCOUNTS_MEMCACHE_SECONDS
        domain["entry_cache_timeout"] = str(ACCOUNTS_CACHE_SECONDS - memcache)
        domain["ldap_enumeration_refresh_timeout"] = str(ACCOUNTS_ENUMERATION_SECONDS)
        domain["ldap_enumeration_refresh_offset"] = "0"
        nss["enum_cache_timeout"] = str(ACCOUNTS_CACHE_SECONDS - ACCOUNTS_ENUMERATION_SECONDS)
    else:
        memcache = MEMCACHE_SECONDS
        domain["entry_cache_timeout"] = str(ENTRY_CACHE_SECONDS)
    nss["memcache_timeout"] = str(memcache)
    if directory.directory_schema == "ad":
        domain["case_sensitive"] = "false"
    if directory.ca_certificates is not None:
        domain["ldap_tls_cacert"] = CA_PATH
    if directory.login_filter is not None:
        domain["access_provider"] = "ldap"
        domain["ldap_access_order"] = "filter"
        domain["ldap_access_filter"] = directory.login_filter
    else:
        domain["access_provider"] = "permit"
    if directory.bind_dn is not None:
        if bind_password is None:
            raise ValueError("a bind DN needs its password")
        domain["ldap_default_bind_dn"] = directory.bind_dn
        domain["ldap_default_authtok_type"] = "password"
        domain["ldap_default_authtok"] = _ini_value(bind_password, "ldap_default_authtok")
    sections: dict[str, dict[str, str]] = {
        "sssd": {"services": "nss, pam, ssh", "domains": DOMAIN},
        "nss": nss,
        "pam": {},
        "ssh": {},
        f"domain/{DOMAIN}": domain,
    }
    lines = ["# Generated by the training platform (components/slurm_directory.py)."]
    for section, options in sections.items():
        lines += ["", f"[{section}]", *(f"{key} = {value}" for key, value in options.items())]
    return "\n".join(lines) + "\n"


CONFIG_HASH_ANNOTATION: Final = "trainingplatform.io/directory-config"


def config_hash(directory: SlurmDirectoryConfig) -> dict[str, str]:
    """Pod template annotations that change with ``sssd.conf`` and the CA certificates.

    The operator rolls login pods when their ``sssd.conf`` Secret changes, but not slurmd pods
    (the NodeSet's revision is its spec; its Secret handler watches only the auth keys:
    slurm-operator v1.2.1 internal/controller/nodeset/eventhandler/eventhandler_secret.go),
    nor either for the CA ConfigMap; a ``subPath`` file never refreshes in a running pod. The
    hash covers everything but the bind password (a hash of it would let anyone who reads the
    NodeSet test guesses): after rotating only the password, restart the slurmd pods
    (docs/concepts/slurm.md).
    """
    placeholder = "<bindPassword>" if directory.bind_dn is not None else None
    text = sssd_conf(directory, bind_password=placeholder) + (directory.ca_certificates or "")
    return {CONFIG_HASH_ANNOTATION: hashlib.sha256(text.encode()).hexdigest()[:16]}


def _deserved_totals(teams: Sequence[TeamConfig]) -> tuple[int, int]:
    return (
        sum(team.queue.deserved.gpus for team in teams),
        sum(team.queue.deserved.neuron_devices for team in teams),
    )


def neuron_device_weight(teams: Sequence[TeamConfig]) -> float:
    """What one Neuron device counts for, in GPUs, when shares and usage meet on one scale.

    The teams' deserved GPUs over their deserved Neuron devices, so that all deserved Neuron
    devices weigh as much as all deserved GPUs; 1 when either kind is deserved by nobody.
    """
    gpus, neuron_devices = _deserved_totals(teams)
    if gpus == 0 or neuron_devices == 0:
        return 1.0
    return gpus / neuron_devices


def fair_shares(teams: Sequence[TeamConfig]) -> dict[str, int]:
    """Team -> its Slurm account's ``Fairshare``: its Volcano ``deserved``, in GPU units.

    Volcano's capacity plugin divides each accelerator kind by ``deserved`` (issue 14's
    queues); Slurm has one number per account, so a team's share is its deserved GPUs plus its
    deserved Neuron devices at :func:`neuron_device_weight`. Teams whose deserved ratio is
    the same in both kinds get exactly their Volcano share; a team deserving nothing gets 1,
    the least Slurm gives (0 would mean no share at all).
    """
    weight = neuron_device_weight(teams)
    return {
        team.name: max(
            1, round(team.queue.deserved.gpus + team.queue.deserved.neuron_devices * weight)
        )
        for team in teams
    }


def billing_weights(pool: NodePoolConfig, gres: str, teams: Sequence[TeamConfig]) -> str:
    """A partition's ``TRESBillingWeights``: usage in the units :func:`fair_shares` uses.

    Accelerators bill their weight each; CPUs so that a whole node's CPUs bill as its
    accelerators (with ``MAX_TRES`` a job bills its largest TRES per node, so a node is never
    billed twice and a CPU-only job on it is not free).

    Args:
        pool: the node set's pool (GPU or Trainium).
        gres: its GRES name (``gpu`` or ``neuron``).
        teams: every team, whose deserved shares fix the Neuron device's weight.
    """
    gpu = pool.instance.accelerator_resource == GPU_RESOURCE
    weight = 1.0 if gpu else neuron_device_weight(teams)
    # With PriorityFlags=MAX_TRES a node's CPUs together bill what its accelerators bill.
    cpu = weight * pool.instance.accelerators / pool.instance.vcpu
    return f"CPU={cpu:.6g},GRES/{gres}={weight:g}"


class TeamRow(NamedTuple):
    """One team as the accounts loop reads it from :data:`TEAMS_CONFIG_MAP`."""

    name: str
    """The team: its Slurm account and QOS are named after it."""
    gid: int
    """The directory group whose members are the account's users."""
    fairshare: int
    """The account's ``Fairshare`` (:func:`fair_shares`)."""
    max_wall_minutes: int
    """The QOS's ``MaxWall``."""
    grp_tres: str
    """The QOS's ``GrpTRES``: ``gres/<name>=<count>`` per GRES of the stack, -1 for no limit."""


def team_rows(
    teams: Sequence[TeamConfig], *, gres_types: Sequence[str], longest_hours: int
) -> list[TeamRow]:
    """Each team with a gid as the accounts loop keeps it: account, members, QOS limits.

    Args:
        teams: every team (those without a gid have no Slurm account).
        gres_types: the GRES of the stack's node sets (``gpu``, ``neuron``): GrpTRES may name
            only TRES that accounting tracks (``AccountingStorageTRES``).
        longest_hours: the longest partition's MaxTime, hours: the QOS's MaxWall unless the
            team's ``slurm.maxWallHours`` says less.
    """
    shares = fair_shares(teams)
    rows = []
    for team in teams:
        if team.gid is None:  # config validation requires one with a directory
            continue
        limits = team.slurm
        wall = (limits.max_wall_hours if limits else None) or longest_hours
        counts = {
            "gpu": limits.gpus if limits else None,
            "neuron": limits.neuron_devices if limits else None,
        }
        tres = ",".join(
            f"gres/{gres}={-1 if counts.get(gres) is None else counts[gres]}"
            for gres in sorted(gres_types)
        )
        rows.append(TeamRow(team.name, team.gid, shares[team.name], wall * 60, tres))
    return rows


def teams_table(rows: Sequence[TeamRow]) -> str:
    """:data:`TEAMS_CONFIG_MAP`'s data: one line per team, fields separated by spaces."""
    return "".join(
        f"{row.name} {row.gid} {row.fairshare} {row.max_wall_minutes} {row.grp_tres}\n"
        for row in sorted(rows)
    )


def parse_teams_table(text: str) -> list[TeamRow]:
    """The rows of a :func:`teams_table` (what the jobs model reads back)."""
    rows = []
    for line in text.splitlines():
        if line.strip():
            name, gid, share, wall, tres = line.split()
            rows.append(TeamRow(name, int(gid), int(share), int(wall), tres))
    return rows


def accounts_script(*, cluster: str, interval: int, teams_file: str = TEAMS_FILE) -> str:
    """The loop that keeps each team's Slurm account, QOS and users in step with the directory.

    Every ``interval`` seconds it reads the teams (:func:`teams_table`, from
    :data:`TEAMS_CONFIG_MAP`: a changed team list reaches it without restarting the login
    pods) and, for each team: makes its QOS (or sets it) with the team's ``MaxWall`` and
    ``GrpTRES`` and ``Flags=DenyOnLimit``, so a job over either is refused at submission
    instead of pending for ever (sacctmgr(1), QOS flags); creates its account (or sets its
    ``Fairshare``) with that QOS as its only and default one, which its users inherit
    (``AccountingStorageEnforce=qos`` then refuses any other QOS: :data:`ENFORCE`); adds as
    users of it the members of the directory group with the team's gid and the users whose
    primary group it is, and removes users no longer either. slurmdbd keeps the association
    of a user with jobs pending or running (SchedMD/slurm slurm-26-05-3-1
    src/plugins/accounting_storage/mysql/accounting_storage_mysql.c,
    _check_jobs_before_remove: jobs not ended and below JOB_COMPLETE); such a user
    gets ``MaxSubmitJobs=0`` there, so they submit nothing new under the team while the loop
    retries each pass, and the limit goes again if they rejoin first. A pending job of the
    team under another QOS (queued before the team's QOS existed, or requeued after a node
    failure) is moved to the team's: the scheduler fails a job whose QOS its association no
    longer lists (src/slurmctld/job_scheduler.c and job_mgr.c, job_fail_qos), and it would
    pend as ``InvalidQOS`` for ever. Accounts and QOS the platform
    made for teams no longer listed go. A group the directory cannot answer for is left as it
    is (no removal while the directory is down). Names are compared lower-cased, as sacctmgr
    stores them (SchedMD/slurm src/sacctmgr/sacctmgr.c, user_case_norm). A user leaving a team
    whose account was their default gets another of theirs as default first (slurmdbd refuses
    to delete a default account's association while others remain). Runs beside the login
    container, whose sackd authenticates it (as root, a Slurm administrator); it starts an SSSD
    of its own (:data:`ACCOUNTS_SSSD_KEY`: SSSD's pipes come from the image's packages, so they
    are not shared between containers).

    Args:
        cluster: Slurm's ClusterName.
        interval: seconds between passes.
        teams_file: where the teams table is mounted. Default :data:`TEAMS_FILE`.
    """
    return f"""set -uo pipefail
export LC_ALL=C
cluster={cluster}
teams_file="${{TEAMS_FILE:-{teams_file}}}"
log() {{ echo "accounts: $*"; }}
lower() {{ tr '[:upper:]' '[:lower:]'; }}
sssd -i --logger=stderr &
for _ in $(seq 60); do
  [ -S {SSS_NSS_SOCKET} ] && [ -S {SACKD_PATH}/sack.socket ] && break
  sleep 1
done
members() {{
  local entry
  entry="$(getent group "$1")" || return 1
  {{
    echo "${{entry##*:}}" | tr ',' '\n'
    getent passwd | awk -F: -v g="$1" '$4 == g {{ print $1 }}'
  }} | lower | sed '/^$/d' | sort -u
}}
users_of() {{
  sacctmgr -nP show associations where account="$1" cluster="$cluster" format=user \
    | lower | sed '/^$/d' | sort -u
}}
stopped_users() {{
  sacctmgr -nP show associations where account="$1" cluster="$cluster" format=user,maxsubmit \
    | awk -F'|' '$1 != "" && $2 == "0" {{ print $1 }}' | lower | sort -u
}}
sync_qos() {{
  local team="$1" wall="$2" tres="$3"
  if [ -z "$(sacctmgr -nP show qos "$team" format=name)" ]; then
    sacctmgr -i add qos "$team" description="platform team $team" >/dev/null \
      || {{ log "$team: cannot add its QOS"; return 1; }}
  fi
  sacctmgr -i modify qos where name="$team" set maxwall="$wall" grptres="$tres" \
    flags=DenyOnLimit >/dev/null || {{ log "$team: cannot set its QOS"; return 1; }}
}}
move_pending() {{
  local team="$1" job
  for job in $(squeue -h -t PD -A "$team" -o '%i %q' \
      | awk -v q="$team" '$2 != q {{ print $1 }}'); do
    scontrol update jobid="$job" qos="$team" >/dev/null 2>&1 \
      && log "$team: pending job $job moved to QOS $team" \
      || log "$team: pending job $job cannot take QOS $team (over its limits?); it stays"
  done
}}
sync_team() {{
  local team="$1" gid="$2" share="$3" wall="$4" tres="$5" qos=yes wanted current user other
  sync_qos "$team" "$wall" "$tres" || qos=
  if [ -z "$(sacctmgr -nP show account "$team" format=account)" ]; then
    # A new team's account comes with its QOS, never without it (it would run under normal).
    [ -n "$qos" ] || {{ log "$team: no account until its QOS can be made"; return; }}
    sacctmgr -i add account "$team" cluster="$cluster" fairshare="$share" qos="$team" \
      defaultqos="$team" description="team $team" organization=platform \
      || {{ log "$team: cannot add"; return; }}
  elif [ -n "$qos" ]; then
    sacctmgr -i modify account where name="$team" cluster="$cluster" set fairshare="$share" \
      qos="$team" defaultqos="$team" >/dev/null || log "$team: cannot set fairshare and QOS"
  fi
  [ -n "$qos" ] && move_pending "$team"
  if ! wanted="$(members "$gid")"; then
    log "$team: the directory has no group $gid; users left as they are"
    return
  fi
  current="$(users_of "$team")"
  for user in $(comm -23 <(echo "$wanted") <(echo "$current")); do
    sacctmgr -i add user "$user" account="$team" cluster="$cluster" >/dev/null \
      && log "$team: added $user" || log "$team: cannot add $user"
  done
  for user in $(comm -13 <(echo "$wanted") <(echo "$current")); do
    other="$(sacctmgr -nP show associations where user="$user" cluster="$cluster" \
      format=account | sed '/^$/d' | grep -vxF "$team" | head -n 1)"
    [ -n "$other" ] && sacctmgr -i modify user "$user" set defaultaccount="$other" >/dev/null
    if sacctmgr -i delete user "$user" where account="$team" cluster="$cluster" >/dev/null; then
      log "$team: removed $user"
    else
      sacctmgr -i modify user where name="$user" account="$team" cluster="$cluster" \
        set maxsubmitjobs=0 >/dev/null
      log "$team: $user has jobs pending or running; no new ones, removed once they end"
    fi
  done
  for user in $(stopped_users "$team" | comm -12 - <(echo "$wanted")); do
    sacctmgr -i modify user where name="$user" account="$team" cluster="$cluster" \
      set maxsubmitjobs=-1 >/dev/null && log "$team: $user is back; may submit again"
  done
}}
while true; do
  if ! teams="$(sed '/^$/d' "$teams_file")"; then
    log "cannot read $teams_file; nothing changed"
  else
    while read -r team gid share wall tres; do
      [ -n "$team" ] && sync_team "$team" "$gid" "$share" "$wall" "$tres"
    done <<< "$teams"
    names="$(echo "$teams" | cut -d' ' -f1)"
    for gone in $(sacctmgr -nP show account where organization=platform format=account \
        | sed '/^$/d' | grep -vxF -f <(echo "$names")); do
      sacctmgr -i delete account "$gone" cluster="$cluster" >/dev/null \
        && log "$gone: no longer a team, removed" || log "$gone: cannot remove (running jobs?)"
    done
    for gone in $(sacctmgr -nP show qos format=name,description \
        | awk -F'|' '$2 ~ /^platform team / {{ print $1 }}' | grep -vxF -f <(echo "$names")); do
      # Its account first: a QOS deleted under a live account leaves its jobs without one.
      [ -z "$(sacctmgr -nP show account "$gone" format=account)" ] || continue
      sacctmgr -i delete qos "$gone" >/dev/null \
        && log "$gone: QOS of no team, removed" || log "$gone: cannot remove its QOS (in use?)"
    done
  fi
  [ "${{ACCOUNTS_ONCE:-}}" = 1 ] && exit 0
  sleep {interval}
done
"""


def home_prolog() -> str:
    """Slurm Prolog (as root, on each node of a job, at allocation): the user's home there.

    SSSD gives directory users ``/home/<user>`` (:func:`sssd_conf`), which pam_mkhomedir makes
    only where they log in; a job's output and caches under ``$HOME`` would fail on a node
    without it. A failing Prolog drains the node, so it never fails. Users' homes on nodes go
    with the node: docs/how-to/submit-a-slurm-job.md keeps work on ``/fsx``.
    """
    return "\n".join(
        [
            "#!/bin/sh",
            "# Generated by the training platform (components/slurm_directory.py, home_prolog).",
            f'[ "${{SLURM_JOB_UID:-0}}" -ge {MIN_TEAM_GID} ] 2>/dev/null || exit 0',
            'home="/home/${SLURM_JOB_USER}"',
            '[ -d "$home" ] || install -d -o "$SLURM_JOB_UID" -g "$SLURM_JOB_GID" -m 0700 "$home"',
            "exit 0",
            "",
        ]
    )


HOME_PROLOG: Final = "00-home.sh"
"""The Prolog's name in the chart's ``prologScripts`` (the operator's slurm.conf names it)."""


def accounts_container(image: str, script: str, *, ca_certificates: bool) -> dict[str, Any]:
    """The container beside the login container that runs :func:`accounts_script`.

    It shares the login pod's sackd directory (Slurm's config and auth socket), so it needs no
    key of its own, and mounts its own ``sssd.conf`` (:func:`accounts_sssd_volume`). SSSD
    keeps root's usual capabilities (it switches users and reads protected files); raw sockets
    and device nodes it never needs.

    Args:
        image: the login image (Slurm's clients, SSSD and its NSS module).
        script: the loop.
        ca_certificates: mount the directory's CA certificates.
    """
    return {
        "name": "accounts",
        "image": image,
        "command": ["bash", "-c", script],
        "resources": {
            "requests": {"cpu": "10m", "memory": "64Mi"},
            "limits": {"memory": "128Mi"},
        },
        "securityContext": {"capabilities": {"drop": list(LOGIN_DROPPED_CAPABILITIES)}},
        # Restarted when its SSSD is gone (getent would fail, and no team would be synced).
        # No readiness probe: a pod is Ready only when every container is, and the login
        # service must keep its pod while the directory is away.
        "livenessProbe": {
            "exec": {"command": ["test", "-S", SSS_NSS_SOCKET]},
            "initialDelaySeconds": 90,
            "periodSeconds": 60,
            "failureThreshold": 3,
        },
        "volumeMounts": [
            {"name": "sackd-dir", "mountPath": SACKD_PATH},
            {"name": "accounts-sssd", "mountPath": "/etc/sssd/sssd.conf",
             "subPath": "sssd.conf", "readOnly": True},
            {"name": "slurm-teams", "mountPath": TEAMS_DIR, "readOnly": True},
            *([ca_mount()] if ca_certificates else []),
        ],
    }  # fmt: skip


def accounts_sssd_volume() -> dict[str, Any]:
    """The accounts loop's ``sssd.conf`` (:data:`ACCOUNTS_SSSD_KEY`), root-only as SSSD wants."""
    return {
        "name": "accounts-sssd",
        "secret": {
            "secretName": SSSD_SECRET["name"],
            "defaultMode": 0o600,
            "items": [{"key": ACCOUNTS_SSSD_KEY, "path": "sssd.conf"}],
        },
    }


def teams_volume() -> dict[str, Any]:
    """The teams table (:data:`TEAMS_CONFIG_MAP`) as the accounts loop's volume."""
    return {"name": "slurm-teams", "configMap": {"name": TEAMS_CONFIG_MAP["name"]}}


def ca_mount() -> dict[str, Any]:
    """The directory's CA certificates at :data:`CA_PATH` (from :data:`CA_CONFIG_MAP`)."""
    return {"name": "directory-ca", "mountPath": CA_PATH, "subPath": "ca.pem", "readOnly": True}


def ca_volume() -> dict[str, Any]:
    """The ConfigMap volume behind :func:`ca_mount`."""
    return {"name": "directory-ca", "configMap": {"name": CA_CONFIG_MAP}}


def directory_objects(
    name: str,
    directory: SlurmDirectoryConfig,
    bind_password: pulumi.Input[str] | None,
    *,
    teams: Sequence[TeamRow],
    opts: pulumi.ResourceOptions,
) -> list[pulumi.Resource]:
    """The Secret with ``sssd.conf`` (it holds the bind password), the teams table, the CA.

    Args:
        name: the Slurm component's name, prefix of the objects' names.
        directory: the directory's config.
        bind_password: the bind password (a secret), with ``bindDn``; None for anonymous bind.
        teams: the teams the accounts loop keeps (:func:`team_rows`).
        opts: options of the objects (parent, provider, what they wait for).
    """

    def confs(password: str | None) -> dict[str, str]:
        return {
            SSSD_SECRET["key"]: sssd_conf(directory, bind_password=password),
            ACCOUNTS_SSSD_KEY: sssd_conf(directory, bind_password=password, accounts=True),
        }

    data: pulumi.Input[dict[str, str]]
    if directory.bind_dn is None:
        data = confs(None)
    else:
        data = pulumi.Output.secret(pulumi.Output.from_input(bind_password).apply(confs))
    made: list[pulumi.Resource] = [
        k8s.core.v1.Secret(
            f"{name}-sssd-conf",
            metadata={"name": SSSD_SECRET["name"], "namespace": NAMESPACE},
            type="Opaque",
            string_data=data,
            opts=opts,
        )
    ]
    made.append(
        k8s.core.v1.ConfigMap(
            f"{name}-teams",
            metadata={"name": TEAMS_CONFIG_MAP["name"], "namespace": NAMESPACE},
            data={TEAMS_CONFIG_MAP["key"]: teams_table(teams)},
            opts=opts,
        )
    )
    if directory.ca_certificates is not None:
        made.append(
            k8s.core.v1.ConfigMap(
                f"{name}-directory-ca",
                metadata={"name": CA_CONFIG_MAP, "namespace": NAMESPACE},
                data={"ca.pem": directory.ca_certificates},
                opts=opts,
            )
        )
    return made
