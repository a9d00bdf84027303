"""Every agent CLI an attempt may name: the shipped definition files, then those staff added
through the API or the admin (``runs.models.AgentCliDefinition``), checked exactly as a file is
(``runs.agents.cli.definition.parse_definition``) when added and again when used.

What an added definition may not do, by field:

- ``name``: take a shipped CLI's name (an attempt naming ``claude-code`` always runs the
  shipped one) or one already added;
- ``runs_in: worker``: a CLI that runs on the worker runs outside the sandbox, with the host's
  files and network; only a shipped definition, read in review, may;
- anything a shipped file may not (an unpinned version, an npm package without its sha512
  integrity or its kept files, an unknown placeholder).

Its install is built on first use, into the same content-keyed cache, by the same steps: an
npm tarball checked against the integrity hash, its named files copied, no install script run.
"""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest

from benchsite.accounts.models import Action, Door
from benchsite.accounts.services import audit_event_record
from runs.agents.cli import definition as shipped
from runs.agents.cli.definition import (
    AgentDefinition,
    DefinitionError,
    Problem,
    load_definition,
    load_definitions,
    parse_definition,
)
from runs.models import AgentCliDefinition

MAX_TEXT_BYTES = 64 * 1024
ADDED = "(added)"  # the source an added definition's problems are named by


def _origin(row: AgentCliDefinition) -> str:
    who = row.created_by.get_username() if row.created_by else "a deleted account"
    return f"added by {who} on {row.created_at:%Y-%m-%d}"


def _parsed(row: AgentCliDefinition) -> AgentDefinition:
    return parse_definition(
        row.text, f"agent CLI {row.name!r} {ADDED}", file_name=row.name, origin=_origin(row)
    )


def find_definition(name: str) -> AgentDefinition:
    """The definition ``name`` names: the shipped file, else the added one. Raises
    ``DefinitionError`` naming what is wrong (unknown: the known names)."""
    path = shipped.DEFINITIONS_DIR / f"{name}.yaml"
    if path.is_file():
        return load_definition(path)
    row = AgentCliDefinition.objects.select_related("created_by").filter(name=name).first()
    if row is None:
        files = {p.stem for p in shipped.DEFINITIONS_DIR.glob("*.yaml")}
        known = ", ".join(sorted(files | _added()))
        raise DefinitionError([Problem(str(path), "", f"no agent CLI {name!r}; known: {known}")])
    return _parsed(row)


def _added() -> set[str]:
    return set(AgentCliDefinition.objects.values_list("name", flat=True))


def all_definitions() -> tuple[dict[str, AgentDefinition], list[Problem]]:
    """Every definition by name, shipped first; and the problems of added ones that no longer
    pass the checks (a rule tightened since), which are left out. A bad shipped file raises."""
    found = load_definitions()
    problems: list[Problem] = []
    for row in AgentCliDefinition.objects.select_related("created_by"):
        if row.name in found:
            continue
        try:
            found[row.name] = _parsed(row)
        except DefinitionError as exc:
            problems += exc.problems
    return found, problems


def definition_check(text: str) -> AgentDefinition:
    """``text`` checked as an added definition: ``DefinitionError`` naming each bad field."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise DefinitionError([Problem(ADDED, "", f"over {MAX_TEXT_BYTES // 1024} KiB")])
    definition = parse_definition(text, ADDED, origin="added")
    spec, problems = definition.spec, []
    if (shipped.DEFINITIONS_DIR / f"{spec.name}.yaml").is_file():
        problems.append(Problem(ADDED, "name", f"{spec.name!r} is a shipped agent CLI"))
    elif AgentCliDefinition.objects.filter(name=spec.name).exists():
        problems.append(Problem(ADDED, "name", f"an agent CLI {spec.name!r} was already added"))
    if spec.runs_in != "sandbox":
        problems.append(
            Problem(
                ADDED,
                "runs_in",
                "an added CLI must run in the sandbox: one that runs on the worker runs "
                "outside it (only a shipped definition may)",
            )
        )
    if problems:
        raise DefinitionError(problems)
    return definition


def definition_add(
    *, text: str, actor, door: Door, request: HttpRequest | None = None
) -> AgentCliDefinition:
    """Add a definition (checked by ``definition_check``), audited. The right to add
    (``Action.AGENT_CLI_ADD``, staff) is the door's to check first."""
    definition = definition_check(text)
    with transaction.atomic():
        row = AgentCliDefinition.objects.create(
            name=definition.name, text=text, created_by=actor if actor is not None else None
        )
        audit_event_record(
            actor=actor,
            action=Action.AGENT_CLI_ADD,
            door=door,
            objects=[row],
            request=request,
            details={
                "name": row.name,
                "package": f"{definition.spec.install.package}=={definition.spec.install.version}",
            },
        )
    return row
