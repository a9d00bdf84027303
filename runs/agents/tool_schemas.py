"""The five tools' argument schemas (OpenAI function-calling format) and the validation of a
call's arguments against them."""

from __future__ import annotations

import json
from typing import Any

from runs.agents.tool_results import ToolInputError

# JSON schemas of the five tools, as the LLM sees them (OpenAI function-calling format).
TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "name": "list_files",
        "description": "List files under a directory of the repository (hidden and build "
        "directories skipped). Optional glob, e.g. '*.py' or 'src/**/*.py'.",
        "parameters": {
            "type": "object",
            "properties": {
                "root": {"type": "string", "description": "directory, default '.'"},
                "glob": {"type": "string"},
            },
        },
    },
    {
        "name": "read_file",
        "description": "Read a text file of the repository, optionally a 1-based inclusive "
        "line range. Long files are truncated; ask for a range to see more.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1},
            },
            "required": ["path"],
        },
    },
    {
        "name": "search",
        "description": "Search the repository with ripgrep; returns matching lines with "
        "context. Fixed-string search unless is_regex is true.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "glob": {"type": "string"},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 500},
                "context_lines": {"type": "integer", "minimum": 0, "maximum": 10},
                "is_regex": {"type": "boolean"},
            },
            "required": ["query"],
        },
    },
    {
        "name": "apply_patch",
        "description": "Apply a unified diff (as produced by 'git diff', paths relative to the "
        "repository root). The tests run automatically afterwards.",
        "parameters": {
            "type": "object",
            "properties": {"unified_diff": {"type": "string"}},
            "required": ["unified_diff"],
        },
    },
    {
        "name": "run",
        "description": "Run a shell command in the repository, without network access. "
        "Returns the exit code and output.",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout_sec": {"type": "number", "minimum": 1},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["command"],
        },
    },
]
TOOL_NAMES = tuple(schema["name"] for schema in TOOL_SCHEMAS)
_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
}


def validate_arguments(name: str, arguments: Any) -> dict[str, Any]:
    schema = next((s for s in TOOL_SCHEMAS if s["name"] == name), None)
    if schema is None:
        raise ToolInputError(f"unknown tool {name!r}; tools: {', '.join(TOOL_NAMES)}")
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ToolInputError(f"{name}: arguments are not valid JSON: {exc.msg}") from exc
    if not isinstance(arguments, dict):
        raise ToolInputError(f"{name}: arguments must be a JSON object")
    properties = schema["parameters"]["properties"]
    allowed = set(properties) | ({"network"} if name == "run" else set())
    unknown = set(arguments) - allowed
    if unknown:
        raise ToolInputError(f"{name}: unknown argument(s) {', '.join(sorted(unknown))}")
    kwargs = {}
    for key, value in arguments.items():
        if value is None:
            continue
        expected = "boolean" if key == "network" else properties[key]["type"]
        python_type = _PYTHON_TYPES[expected]
        if isinstance(value, bool) and expected != "boolean":
            raise ToolInputError(f"{name}: {key} must be {expected}, got boolean")
        if not isinstance(value, python_type):
            raise ToolInputError(f"{name}: {key} must be {expected}, got {type(value).__name__}")
        kwargs[key] = value
    for key in schema["parameters"].get("required", []):
        if key not in kwargs:
            raise ToolInputError(f"{name}: missing required argument {key!r}")
    return kwargs
