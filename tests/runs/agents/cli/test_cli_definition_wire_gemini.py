"""A CLI definition may name Google's Gemini API as its wire API (the gateway's fourth,
runs/gateway/gemini.py); a name the gateway does not speak is still refused by field."""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.agents.cli.definition import DefinitionError, load_definition
from tests.runs.agents.cli.test_cli_agent_definitions import write_definition

# Gemini CLI's variables: the base URL is the host (its client adds /v1beta).
GEMINI_ENV = {"GOOGLE_GEMINI_BASE_URL": "{base_url}", "GEMINI_API_KEY": "{token}"}


def definition(folder: Path, wire_api: str) -> Path:
    return write_definition(folder, "tiny-gemini", wire_api=wire_api, env=GEMINI_ENV)


def test_it_accepts_gemini_as_a_wire_api(tmp_path: Path) -> None:
    loaded = load_definition(definition(tmp_path, "gemini"))
    assert loaded.spec.wire_api == "gemini"


def test_it_still_refuses_a_wire_api_the_gateway_does_not_speak(tmp_path: Path) -> None:
    path = definition(tmp_path, "gemini-live")
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    assert f"{path}: wire_api:" in str(caught.value) and "'gemini'" in str(caught.value)
