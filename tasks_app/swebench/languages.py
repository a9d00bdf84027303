"""The languages of SWE-bench: which repositories the official package knows, and in which
language, so that an instance is run and graded the package's way or refused at import.

The official package (swebench 4.1.0) ships, per repository, a language
(``MAP_REPO_TO_EXT``: py, go, java, js, rs, c, php, rb), a specification per version
(``MAP_REPO_VERSION_TO_SPECS``: the test commands) and a log parser (``MAP_REPO_TO_PARSER``).
SWE-bench Multilingual's nine languages are all there. A Python repository runs our copy of
the Python eval script (``eval_script``: activation on offline images); any other language runs
the package's own script unchanged and is graded by its own parser.

Refused at import, so that nothing fails later with a traceback:

* a repository the package does not know, unless the row names its own image (a custom
  dataset: run with the task's test command, graded with the pytest parser, as before);
* an instance of a non-Python repository whose version the specification does not list (the
  package builds no eval script for it);
* an instance its repository's parser cannot read (jekyll and immutable-js pick a runner by
  the instance's pull-request number and raise for any other).

Pure: no Django. The package is imported when first needed (about 2 s).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any, Final

PYTHON: Final = "py"
# The package's language codes, as the docs and errors name them.
LANGUAGE_NAMES: Final = {
    "py": "Python",
    "go": "Go",
    "java": "Java",
    "js": "JavaScript/TypeScript",
    "rs": "Rust",
    "c": "C/C++",
    "php": "PHP",
    "rb": "Ruby",
}
Parser = Callable[[str, Any], dict[str, str]]
# What the eval script is told the environment is called, and where the repository is.
ENV_NAME: Final = "testbed"


def known_repo(repo: str) -> bool:
    """Whether the official package knows ``repo`` (a specification or a parser for it)."""
    from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS
    from swebench.harness.log_parsers import MAP_REPO_TO_PARSER

    return repo in MAP_REPO_VERSION_TO_SPECS or repo in MAP_REPO_TO_PARSER


def language_of(repo: str) -> str:
    """The package's language code of ``repo``; Python for a repository it does not list
    (a custom dataset is run and graded as a pytest repository)."""
    from swebench.harness.constants import MAP_REPO_TO_EXT

    return str(MAP_REPO_TO_EXT.get(repo, PYTHON))


def is_python(repo: str) -> bool:
    return language_of(repo) == PYTHON


def parser_for(repo: str) -> Parser:
    """The official parser of ``repo``; ``parse_log_pytest`` for a repo it does not list."""
    from swebench.harness.log_parsers import MAP_REPO_TO_PARSER
    from swebench.harness.log_parsers.python import parse_log_pytest

    return MAP_REPO_TO_PARSER.get(repo, parse_log_pytest)


def parser_spec(*, repo: str, instance_id: str = "", version: str = "") -> Any:
    """What the official parsers get as their ``test_spec``: the fields of a ``TestSpec`` they
    read (jekyll's and immutable-js's pick a runner by ``instance_id``)."""
    return SimpleNamespace(instance_id=instance_id, repo=repo, version=version, language=None)


def official_test_commands(repo: str, version: str) -> list[str]:
    """The specification's test commands of a non-Python (repo, version), in order."""
    from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

    test_cmd = MAP_REPO_VERSION_TO_SPECS[repo][version]["test_cmd"]
    return [test_cmd] if isinstance(test_cmd, str) else list(test_cmd)


def repo_problems(row: Mapping[str, Any], *, own_image: bool) -> list[tuple[str, str]]:
    """Why the package cannot run or grade ``row`` (a checked instance row), as
    (field, message) pairs; [] when it can."""
    repo = str(row["repo"])
    if not known_repo(repo):
        if own_image:
            return []
        return [
            (
                "repo",
                f"the official swebench package does not know repository {repo!r}: it has no "
                "eval script or log parser for it (known: the repositories of SWE-bench, "
                "Multilingual and Multimodal; a custom dataset names its own image in "
                "image_name and is graded as a pytest repository)",
            )
        ]
    language = language_of(repo)
    version = str(row["version"])
    if language != PYTHON:
        from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

        versions = MAP_REPO_VERSION_TO_SPECS.get(repo, {})
        if not (versions.get(version) or {}).get("test_cmd"):
            listed = ", ".join(sorted(versions)[:8])
            return [
                (
                    "version",
                    f"the official specification of {repo} ({LANGUAGE_NAMES[language]}) has "
                    f"no version {version!r}, so no eval script (it lists {listed}, ...)",
                )
            ]
    spec = parser_spec(repo=repo, instance_id=str(row["instance_id"]), version=version)
    try:
        parser_for(repo)("", spec)
    except Exception as exc:  # the package's parsers raise ValueError (and could raise others)
        return [("instance_id", f"the official log parser of {repo} cannot read it ({exc})")]
    return []
