"""Slurm users from the directory: SSSD on login and compute pods, team accounts, fair share.

Pure builders beside :class:`components.slurm.Slurm`, which registers what they describe.

Identities. Slinky's login and slurmd images run SSSD under supervisord with ``sss`` in
``nsswitch.conf`` and PAM (SlinkyProject/containers schedmd/slurm/26.05/ubuntu24.04/Dockerfile:
``authselect select sssd with-mkhomedir``; slurmd's ``nsswitch.conf`` puts ``slurm`` first). The
operator mounts one ``sssd.conf`` into login pods (slurm-operator v1.2.1
internal/builder/loginbuilder/login_app.go, loginVolumes) and into slurmd pods when the NodeSet
enables SSH (internal/builder/workerbuilder/worker_app.go, workerVolumes), both from the Secret
named here, so a login shell and a job step resolve one user to one uid and one set of groups.
Job steps run as the submitting user's uid and groups: with ``AuthInfo=use_client_ids`` (the
operator's, internal/builder/common/const.go) the client's own lookup travels with the job.

Accounts. Each team gets a Slurm account whose users are the members of the directory group
whose gidNumber is the team's ``gid`` (the group that owns its directories on the shared file
system), kept in step by a small loop in a container beside the login container, with its own
SSSD (:func:`accounts_script`).
``AccountingStorageEnforce=associations`` makes that membership the condition for submitting at
all. Fair share (``Fairshare`` of the account, weighted by ``PriorityWeightFairshare``, which
Slurm defaults to 0: SchedMD/slurm slurm-26-05-3-1 src/common/read_config.c) is the team's
Volcano ``deserved`` share (:func:`fair_shares`), in accelerator units that partitions bill by
(:func:`billing_weights`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from components.catalog import GPU_RESOURCE
from components.config.pools import NodePoolConfig
from components.config.slurm import SlurmDirectoryConfig
from components.config.teams import MIN_TEAM_GID, TeamConfig

SSSD_SECRET: Final = {"name": "slurm-sssd-conf", "key": "sssd.conf"}
"""The Secret with ``sssd.conf`` the stack makes (the chart's ``sssd.secretRef``)."""
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
ENFORCE: Final = "associations,limits,safe"
"""``AccountingStorageEnforce``: a user submits only under an account they belong to."""
PRIORITY_CONF: Final = {
    "PriorityType": "priority/multifactor",
    "PriorityWeightFairshare": 10000,
    "PriorityWeightAge": 1000,
    "PriorityDecayHalfLife": "7-0",
    "AccountingStorageEnforce": ENFORCE,
}
"""Fair share decides the order of pending jobs, age breaks ties slowly; usage halves weekly."""


def _ini_value(text: str, key: str) -> str:
    if "\n" in text or "\r" in text:
        raise ValueError(f"sssd.conf {key} must be one line")
    return text


def sssd_conf(directory: SlurmDirectoryConfig, *, bind_password: str | None) -> str:
    """``sssd.conf`` for login and slurmd pods (sssd.conf(5), sssd-ldap(5)).

    Args:
        directory: the validated ``slurm.directory``.
        bind_password: the bind DN's password (from the secret config key), None for an
            anonymous bind.

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
        "enumerate": "false",
        # Homes are the login pod's own (pam_mkhomedir): root squash on /fsx stops root from
        # making one there for the user. Durable work goes under /fsx/teams/<team>.
        "override_homedir": "/home/%u",
        "default_shell": "/bin/bash",
    }
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
        "nss": {"filter_users": "root,slurm", "filter_groups": "root,slurm"},
        "pam": {},
        "ssh": {},
        f"domain/{DOMAIN}": domain,
    }
    lines = ["# Generated by the training platform (components/slurm_directory.py)."]
    for section, options in sections.items():
        lines += ["", f"[{section}]", *(f"{key} = {value}" for key, value in options.items())]
    return "\n".join(lines) + "\n"


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

    Args:
        pool: the node set's pool (GPU or Trainium).
        gres: its GRES name (``gpu`` or ``neuron``).
        teams: every team, whose deserved shares fix the Neuron device's weight.
    """
    gpu = pool.instance.accelerator_resource == GPU_RESOURCE
    weight = 1.0 if gpu else neuron_device_weight(teams)
    return f"GRES/{gres}={weight:g}"


def accounts_script(teams: Mapping[str, tuple[int, int]], *, cluster: str, interval: int) -> str:
    """The loop that keeps each team's Slurm account and users in step with the directory.

    Every ``interval`` seconds, for each team: create its account (or set its ``Fairshare``),
    add each member of the directory group with the team's gid as a user of it, and remove
    users no longer in the group. A group the directory cannot answer for is left as it is
    (no removal when the directory is down). Runs beside the login container, whose sackd
    authenticates it (as root, a Slurm administrator); it starts an SSSD of its own from the
    same ``sssd.conf`` (SSSD's pipes directory comes from the image's packages, so it is not
    shared between containers).

    Args:
        teams: team -> (gid, fair share).
        cluster: Slurm's ClusterName.
        interval: seconds between passes.
    """
    table = "\n".join(f"{name} {gid} {share}" for name, (gid, share) in sorted(teams.items()))
    return f"""set -uo pipefail
export LC_ALL=C
cluster={cluster}
log() {{ echo "accounts: $*"; }}
sssd -i --logger=stderr &
for _ in $(seq 60); do [ -S {SSS_NSS_SOCKET} ] && break; sleep 1; done
members() {{
  local entry
  entry="$(getent group "$1")" || return 1
  echo "${{entry##*:}}" | tr ',' '\\n' | sed '/^$/d' | sort -u
}}
users_of() {{
  sacctmgr -nP show associations where account="$1" cluster="$cluster" format=user \\
    | sed '/^$/d' | sort -u
}}
sync_team() {{
  local team="$1" gid="$2" share="$3" wanted current user
  if [ -z "$(sacctmgr -nP show account "$team" format=account)" ]; then
    sacctmgr -i add account "$team" cluster="$cluster" fairshare="$share" \\
      description="team $team" organization=platform || {{ log "$team: cannot add"; return; }}
  else
    sacctmgr -i modify account where name="$team" cluster="$cluster" set fairshare="$share" \\
      >/dev/null || log "$team: cannot set fairshare"
  fi
  if ! wanted="$(members "$gid")"; then
    log "$team: the directory has no group $gid; users left as they are"
    return
  fi
  current="$(users_of "$team")"
  for user in $(comm -23 <(echo "$wanted") <(echo "$current")); do
    sacctmgr -i add user "$user" account="$team" cluster="$cluster" >/dev/null \\
      && log "$team: added $user" || log "$team: cannot add $user"
  done
  for user in $(comm -13 <(echo "$wanted") <(echo "$current")); do
    sacctmgr -i delete user "$user" where account="$team" cluster="$cluster" >/dev/null \\
      && log "$team: removed $user" || log "$team: cannot remove $user (running jobs?)"
  done
}}
teams="{table}"
while true; do
  while read -r team gid share; do sync_team "$team" "$gid" "$share"; done <<< "$teams"
  [ "${{ACCOUNTS_ONCE:-}}" = 1 ] && exit 0
  sleep {interval}
done
"""


def accounts_container(image: str, script: str, *, ca_certificates: bool) -> dict[str, Any]:
    """The container beside the login container that runs :func:`accounts_script`.

    It shares the login pod's sackd directory (Slurm's config and auth socket) and its
    ``sssd.conf``, so it needs no key of its own. SSSD keeps root's usual capabilities (it
    switches users and reads protected files); raw sockets and device nodes it never needs.

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
            {"name": "sssd-conf", "mountPath": "/etc/sssd/sssd.conf", "subPath": "sssd.conf",
             "readOnly": True},
            *([ca_mount()] if ca_certificates else []),
        ],
    }  # fmt: skip


def ca_mount() -> dict[str, Any]:
    """The directory's CA certificates at :data:`CA_PATH` (from :data:`CA_CONFIG_MAP`)."""
    return {"name": "directory-ca", "mountPath": CA_PATH, "subPath": "ca.pem", "readOnly": True}


def ca_volume() -> dict[str, Any]:
    """The ConfigMap volume behind :func:`ca_mount`."""
    return {"name": "directory-ca", "configMap": {"name": CA_CONFIG_MAP}}
