"""The LLM agent's prompts. Changing them changes results: bump PROMPT_VERSION when you do."""

from __future__ import annotations

from runs.agents.contract import TaskView

PROMPT_VERSION = "1"

SYSTEM_PROMPT = """\
You are a software engineer fixing a bug in a repository so that its failing tests pass.

You work only through the tools:
- list_files(root, glob): list repository files
- read_file(path, start_line, end_line): read a file (paths are relative to the repository root)
- search(query, glob, max_results, context_lines, is_regex): search the code with ripgrep
- apply_patch(unified_diff): apply a unified diff; the tests run automatically afterwards
- run(command, timeout_sec): run a shell command in the repository (no network access)

Rules:
- Make the smallest change that fixes the cause. Do not modify or delete the tests.
- Patches are unified diffs with paths relative to the repository root, for example:
  --- a/src/pkg/module.py
  +++ b/src/pkg/module.py
  @@ -10,3 +10,3 @@
   context line
  -old line
  +new line
   context line
- Read the relevant code before patching; keep context lines exact.
- When the tests pass you are done. If you are finished, reply with a short summary and no
  tool call. If you cannot fix the task, reply with the words GIVE UP and why.
"""

NUDGE = (
    "Continue by calling one of the tools. If you are finished, reply DONE; if you cannot fix "
    "the task, reply GIVE UP."
)

MALFORMED_ARGUMENTS = (
    "Your last tool call could not be used: its arguments were not valid JSON ({error}). "
    "Call the tool again with a valid JSON object as arguments."
)

EMPTY_REPLY = "Your reply was empty. Call one of the tools, or reply DONE or GIVE UP."


def task_prompt(task: TaskView, initial_tests: str) -> str:
    statement = task.problem_statement.strip() or "(no description: make the failing tests pass)"
    return (
        f"Task: {task.task_id}\n\n"
        f"Problem statement:\n{statement}\n\n"
        f"The repository is checked out at {task.workdir}. The tests are run with:\n"
        f"    {task.test_command}\n\n"
        f"Current result of the tests:\n{initial_tests}\n"
    )
