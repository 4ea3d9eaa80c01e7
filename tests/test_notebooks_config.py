"""Config of notebooks and OIDC (issue 43, items 1 and 6): keys refused by path, dummy only in dev."""

from __future__ import annotations

import copy

import pytest

from components.config import (
    OIDC_CLIENT_SECRET_KEY,
    oidc_client_secret_problems,
    parse_platform_config,
)
from synth.stackfile import load_stack
from tests.config_problems import assert_reported
from tests.conftest import stack_data


def test_notebooks_are_where_the_stacks_say() -> None:
    enabled = {
        stack: parse_platform_config(stack_data(stack), stack=stack).notebooks.enabled
        for stack in ("dev", "staging", "prod")
    }
    assert enabled == {"dev": True, "staging": True, "prod": False}


def test_dummy_authenticator_only_in_dev() -> None:
    staging = copy.deepcopy(stack_data("staging"))
    staging["notebooks"]["authenticator"] = "dummy"
    assert_reported(staging, "platform.notebooks.authenticator", "dummy", "oidc outside dev")
    dev = copy.deepcopy(stack_data("dev"))
    dev["notebooks"]["authenticator"] = "dummy"
    assert parse_platform_config(dev, stack="dev").notebooks.authenticator == "dummy"


@pytest.mark.parametrize("key", ["authorizeUrl", "tokenUrl", "userdataUrl", "clientId"])
def test_oidc_notebooks_need_the_client(key: str) -> None:
    data = copy.deepcopy(stack_data("dev"))
    del data["oidc"][key]
    assert_reported(data, f"platform.oidc.{key}", None, "notebooks log in through OIDC")


def test_bad_notebook_input_names_key_value_and_what_is_allowed() -> None:
    data = copy.deepcopy(stack_data("dev"))
    data["notebooks"]["cullTimeoutSeconds"] = 60
    assert_reported(data, "platform.notebooks.cullTimeoutSeconds", 60, "600")
    data = copy.deepcopy(stack_data("dev"))
    data["oidc"]["tokenUrl"] = "http://login.example.com/token"
    assert_reported(data, "platform.oidc.tokenUrl", "http://login.example.com/token", "https")
    data = copy.deepcopy(stack_data("dev"))
    data["notebooks"]["homes"] = "ebs"
    assert_reported(data, "platform.notebooks.homes", "ebs", "")


def test_notebooks_need_the_model_store_and_images() -> None:
    data = copy.deepcopy(stack_data("dev"))
    data["modelStore"]["enabled"] = False
    assert_reported(data, "platform.notebooks.enabled", True, "home directories")
    data = copy.deepcopy(stack_data("staging"))
    del data["notebooks"]["images"]["neuron"]
    assert_reported(data, "platform.notebooks.images.neuron", None, "pools trn1")
    data = copy.deepcopy(stack_data("staging"))
    data["notebooks"]["efaPools"] = "none"
    del data["notebooks"]["images"]["neuron"]
    assert parse_platform_config(data, stack="staging").notebooks.images.neuron is None
    del data["notebooks"]["images"]["cuda"]
    assert_reported(data, "platform.notebooks.images.cuda", None, "CUDA")


def test_oidc_notebooks_need_the_client_secret_at_preview() -> None:
    """Without it the chart's hub cannot start and the atomic release rolls back mid-update:
    refused before, as a missing key or one in clear text; the stacks that log in through
    OIDC carry it as a secret."""
    config = parse_platform_config(stack_data("staging"), stack="staging")
    (missing,) = oidc_client_secret_problems(config, present=False, secret=False)
    assert missing.path == OIDC_CLIENT_SECRET_KEY
    assert f"pulumi config set --secret {OIDC_CLIENT_SECRET_KEY}" in missing.allowed
    (clear,) = oidc_client_secret_problems(config, present=True, secret=False)
    assert "[clear text]" in str(clear)
    assert oidc_client_secret_problems(config, present=True, secret=True) == []
    dummy = copy.deepcopy(stack_data("dev"))
    dummy["notebooks"]["authenticator"] = "dummy"
    # Grafana logs in through the same client wherever the oidc section is set.
    dummy_config = parse_platform_config(dummy, stack="dev")
    assert len(oidc_client_secret_problems(dummy_config, present=False, secret=False)) == 1
    dummy["observability"]["grafana"] = {"enabled": False}
    dummy_config = parse_platform_config(dummy, stack="dev")
    assert oidc_client_secret_problems(dummy_config, present=False, secret=False) == []
    for stack in ("dev", "staging"):
        stack_file = load_stack(stack)
        assert f"{stack_file.project}:{OIDC_CLIENT_SECRET_KEY}" in stack_file.secret_keys
