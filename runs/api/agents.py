"""The agent CLIs an attempt may name: listed for everyone, added by staff
(``runs.agent_clis``: checked exactly as a shipped definition file, and more)."""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from ninja import Field, Router, Schema, Status

from benchsite.accounts.auth import PUBLIC_READ, write_auth, write_throttle
from benchsite.accounts.models import Action, Door
from benchsite.api.errors import ErrorOut
from runs.agent_clis import all_definitions, definition_add, find_definition
from runs.agents.cli.definition import AgentDefinition, DefinitionError

router = Router(tags=["agents"])


class AgentCliOut(Schema):
    name: str
    title: str
    description: str
    wire_api: str
    runs_in: str
    package: str = Field(description="kind:package==version, as installed")
    runtime: str | None = Field(
        description="what runs it when the task's image need not have it (kind:package==version"
        ", mounted beside it), or null"
    )
    context_file: str = Field(
        description="the file in the repository it reads its instructions from ('' for none)"
    )
    origin: str = Field(description='"shipped", or "added by <account> on <date>"')


class AgentCliIn(Schema):
    definition: str = Field(
        min_length=1,
        description="the definition's YAML, as a shipped file holds it "
        "(runs/agents/cli/definitions/*.yaml; see docs/agent-clis.md)",
    )


class AgentCliAddedOut(AgentCliOut):
    created_at: dt.datetime


def _out(definition: AgentDefinition) -> dict:
    spec = definition.spec
    return {
        "name": spec.name,
        "title": spec.title,
        "description": spec.description,
        "wire_api": spec.wire_api,
        "runs_in": spec.runs_in,
        "package": spec.install.pin,
        "runtime": spec.runtime.pin if spec.runtime else None,
        "context_file": spec.context_file,
        "origin": definition.origin,
    }


@router.get(
    "/agent-clis",
    response={200: list[AgentCliOut]},
    auth=PUBLIC_READ,
    summary="The agent CLIs a configuration may name: shipped, then added",
)
def agent_cli_list(request: HttpRequest):
    definitions, _ = all_definitions()
    return [_out(d) for d in definitions.values()]


@router.post(
    "/agent-clis",
    response={201: AgentCliAddedOut, 400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 429: ErrorOut},
    auth=write_auth(Action.AGENT_CLI_ADD),
    throttle=write_throttle,
    summary="Add an agent CLI definition (staff)",
    description="Checked as a shipped file is (pinned version, npm integrity and kept files, "
    "known placeholders), and it must run in the sandbox and take a name not yet used. A "
    "problem is a 400 naming the definition's field. Installed on an attempt's first use.",
)
def agent_cli_add(request: HttpRequest, payload: AgentCliIn):
    try:
        row = definition_add(
            text=payload.definition, actor=request.user, door=Door.API, request=request
        )
    except DefinitionError as exc:
        by_field: dict[str, list[str]] = {}
        for problem in exc.problems:
            by_field.setdefault(problem.field or "definition", []).append(problem.message)
        raise ValidationError(by_field) from None
    return Status(201, _out(find_definition(row.name)) | {"created_at": row.created_at})
