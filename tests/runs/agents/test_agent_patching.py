"""Patch normalization and path checks (pure: no sandbox)."""

from __future__ import annotations

import pytest

from runs.agents.patching import PatchError, extract_diff, normalize_patch
from tests.conftest import TASKS_DIR

CALC = (TASKS_DIR.parent / "examples/toy_repo/src/toy/calc.py").read_text()
SOLUTION = (TASKS_DIR / "custom-dev/toy_fail_pytest/solution.patch").read_text()


def read_text(path: str) -> str | None:
    return CALC if path == "src/toy/calc.py" else None


def test_it_takes_a_git_diff_as_is_in_strict_mode():
    patch = normalize_patch(SOLUTION, strict=True)
    assert patch.text == SOLUTION
    assert patch.strip == 1
    assert patch.paths == ("src/toy/calc.py",)
    assert patch.notes == ()


def test_it_converts_a_begin_patch_block_to_a_unified_diff():
    block = (
        "*** Begin Patch\n"
        "*** Update File: src/toy/calc.py\n"
        "@@ def mean(values):\n"
        "     if not values:\n"
        '         raise ValueError("mean of an empty list")\n'
        "-    return total(values) // len(values)\n"
        "+    return total(values) / len(values)\n"
        "*** End Patch\n"
    )
    patch = normalize_patch(block, strict=False, read_text=read_text)
    assert "@@ -11,4 +11,4 @@" in patch.text
    assert "-    return total(values) // len(values)\n" in patch.text
    assert "+    return total(values) / len(values)\n" in patch.text
    assert patch.paths == ("src/toy/calc.py",)
    assert any("Begin Patch" in note for note in patch.notes)


def test_it_converts_begin_patch_file_additions():
    block = "*** Begin Patch\n*** Add File: src/toy/new.py\n+X = 1\n*** End Patch"
    patch = normalize_patch(block, strict=False, read_text=read_text)
    assert "--- /dev/null\n+++ b/src/toy/new.py\n" in patch.text
    assert "+X = 1\n" in patch.text


def test_it_reports_begin_patch_context_that_is_not_in_the_file():
    block = (
        "*** Begin Patch\n*** Update File: src/toy/calc.py\n@@\n-    return 42\n+    return 0\n"
        "*** End Patch\n"
    )
    with pytest.raises(PatchError, match="not found in the file"):
        normalize_patch(block, strict=False, read_text=read_text)


def test_it_takes_the_diff_out_of_a_fenced_answer_and_adds_prefixes_for_bare_hunks():
    answer = (
        "Here is the fix:\n```diff\n--- src/toy/calc.py\n+++ src/toy/calc.py\n@@\n"
        "-    return total(values) // len(values)\n+    return total(values) / len(values)\n"
        "```\nThat should do it."
    )
    patch = normalize_patch(answer, strict=False, read_text=read_text)
    assert patch.text.startswith("diff --git a/src/toy/calc.py b/src/toy/calc.py\n")
    assert "@@ -11,4 +11,4 @@" in patch.text
    assert "removed text around the diff" in patch.notes


def test_it_converts_crlf_line_ends():
    patch = normalize_patch(SOLUTION.replace("\n", "\r\n"), strict=False, read_text=read_text)
    assert "\r" not in patch.text
    assert "converted CRLF line ends" in patch.notes


@pytest.mark.parametrize(
    ("diff", "message"),
    [
        ("--- a/../../outside\n+++ b/../../outside\n@@ -0,0 +1 @@\n+x\n", "escapes"),
        ("--- /dev/null\n+++ /etc/passwd\n@@ -0,0 +1 @@\n+x\n", "absolute"),
        ("--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n", ".git"),
        (
            "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+/\n",
            "symbolic link",
        ),
        ("*** Begin Patch\n*** Add File: ../x\n+1\n*** End Patch\n", "escapes"),
        ("GIT binary patch\nliteral 0\n", "no unified diff|binary"),
    ],
)
def test_it_refuses_patches_that_could_leave_the_workspace(diff, message):
    with pytest.raises(PatchError, match=message):
        normalize_patch(diff, strict=False, read_text=read_text)


def test_strict_mode_refuses_begin_patch_and_prose():
    with pytest.raises(PatchError, match="strict"):
        normalize_patch("*** Begin Patch\n*** End Patch\n", strict=True)
    with pytest.raises(PatchError, match="strict"):
        normalize_patch("Here you go:\n" + SOLUTION, strict=True)


def test_it_refuses_empty_and_hunkless_patches():
    with pytest.raises(PatchError, match="empty"):
        normalize_patch("  \n", strict=False)
    with pytest.raises(PatchError, match="no unified diff"):
        normalize_patch("I changed the code.", strict=False)


def test_extract_diff_finds_nothing_in_plain_prose():
    assert extract_diff("The bug is the integer division in mean().") is None
    assert extract_diff("prefix\n" + SOLUTION).startswith("diff --git")
