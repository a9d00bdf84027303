"""Configurations that ``ab run-suite`` and ``ab run-agent`` create from their options are
named after what they run, never with the endpoint's URL in every title (issue 29, item 8),
and stay distinct per endpoint and per CLI."""

from __future__ import annotations

import argparse

import pytest

from runs.cli import agents as agent_commands
from runs.cli import runs as run_commands
from runs.model_configs import endpoint_tag, generated_name

pytestmark = pytest.mark.django_db


def suite_args(**given) -> argparse.Namespace:
    fields = {
        "config": "",
        "variant": "cli",
        "cli": "codex",
        "model": "gpt-5-codex",
        "base_url": "",
        "api_key_env": "OPENAI_API_KEY",
        "max_calls": None,
        "max_time_sec": None,
        "agent_import_path": "",  # ab run-suite's default
    } | given
    return argparse.Namespace(**fields)


def test_a_generated_name_carries_no_url():
    url = "http://127.0.0.1:18801/v1"
    name = generated_name("cli:claude-code", "claude-sonnet-4-5", base_url=url)
    assert name == f"cli:claude-code claude-sonnet-4-5 ({endpoint_tag(url)})"
    assert "http" not in name and "18801" not in name
    assert endpoint_tag(url) != endpoint_tag("http://127.0.0.1:18802/v1")
    assert generated_name("llm", "gpt-4o") == "llm gpt-4o"


def test_run_suite_names_the_cli_and_its_model_and_keeps_endpoints_apart():
    url = "http://127.0.0.1:18801/v1"
    codex = run_commands._model_config(suite_args(base_url=url))
    assert codex.name == f"cli:codex gpt-5-codex ({endpoint_tag(url)})"
    assert codex.base_url == url
    claude = run_commands._model_config(suite_args(cli="claude-code", base_url=url))
    assert claude.pk != codex.pk  # two CLIs with one model never share a configuration
    other = run_commands._model_config(suite_args(base_url="http://127.0.0.1:18802/v1"))
    assert other.pk != codex.pk
    assert run_commands._model_config(suite_args(base_url=url)).pk == codex.pk
    llm = run_commands._model_config(suite_args(variant="llm", cli="", model="gpt-4o"))
    assert llm.name == "llm:gpt-4o"


def test_run_agent_names_its_configuration_without_the_url():
    url = "http://127.0.0.1:18801/v1"
    args = argparse.Namespace(
        cli="codex",
        model="gpt-5-codex",
        base_url=url,
        api_key_env="OPENAI_API_KEY",
        max_calls=None,
        strict_patch=False,
        max_steps=None,
        max_time_sec=None,
        log_llm_messages=None,
    )
    config = agent_commands._model_config(args, "cli")
    assert config.name == f"cli:codex gpt-5-codex ({endpoint_tag(url)})"
