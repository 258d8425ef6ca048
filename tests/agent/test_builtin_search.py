"""glob and grep over real trees: name matching, newest first, ripgrep and the Python fallback agree."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from builtin_support import Bench, text

from dshpy.agent.builtin.search import GLOB_LIMIT, glob_regex

BUNDLED_RG = Path("/tmp/dshbin/deepseek_harness_runtime/runtime/deepseek-harness-sdk-runtime-linux-x64-rg")


def _ripgrep() -> str | None:
    found = shutil.which("rg")
    if found:
        return found
    return str(BUNDLED_RG) if BUNDLED_RG.is_file() and os.access(BUNDLED_RG, os.X_OK) else None


def _tree(root: Path) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / "src" / "main.py").write_text("import os\nprint('hello world')\n")
    (root / "src" / "pkg" / "util.py").write_text("def hello():\n    return 'Hello'\n")
    (root / "src" / "pkg" / "notes.md").write_text("hello again\n")
    (root / ".hidden" / "secret.py").write_text("hello = 'hidden'\n")
    (root / "data.bin").write_bytes(b"hello\x00world")
    for age, name in enumerate(["src/main.py", "src/pkg/util.py", "src/pkg/notes.md", ".hidden/secret.py"]):
        os.utime(root / name, (1_700_000_000 - age * 100, 1_700_000_000 - age * 100))


def test_glob_regex_rules():
    assert glob_regex("*.py").match("main.py") and not glob_regex("*.py").match("src/main.py")
    assert glob_regex("**/*.py").match("main.py") and glob_regex("**/*.py").match("a/b/c.py")
    assert glob_regex("src/*.{py,md}").match("src/x.md") and not glob_regex("src/*.py").match("src/a/x.py")
    assert glob_regex("?.[ch]").match("a.c") and not glob_regex("?.[ch]").match("ab.c")


def test_glob_matches_names_at_any_depth_newest_first_hidden_included(tmp_path):
    bench = Bench(tmp_path)
    _tree(bench.root)
    outcome = bench.call("glob", pattern="*.py")
    root = bench.root
    assert text(outcome).splitlines() == [
        str(root / "src" / "main.py"),
        str(root / "src" / "pkg" / "util.py"),
        str(root / ".hidden" / "secret.py"),
    ]
    anchored = bench.call("glob", pattern="src/*.py")
    assert text(anchored).splitlines() == [str(root / "src" / "main.py")]
    under = bench.call("glob", pattern="*.md", path="src/pkg")
    assert text(under).splitlines() == [str(root / "src" / "pkg" / "notes.md")]
    assert text(bench.call("glob", pattern="*.rs")).startswith("No files match")
    assert bench.call("glob", pattern="*", path="nowhere").error["code"] == "FS_NOT_DIRECTORY"


def test_glob_caps_the_list_and_says_so(tmp_path):
    bench = Bench(tmp_path)
    for index in range(GLOB_LIMIT + 5):
        (bench.root / f"f{index}.txt").write_text("x")
    lines = text(bench.call("glob", pattern="*.txt")).splitlines()
    assert len(lines) == GLOB_LIMIT + 1 and lines[-1].startswith("(5 more files left out")


@pytest.mark.parametrize("engine", ["python", "ripgrep"])
def test_grep_groups_matching_lines_by_file(tmp_path, engine):
    rg = _ripgrep() if engine == "ripgrep" else None
    if engine == "ripgrep" and rg is None:
        pytest.skip("ripgrep is not installed")
    bench = Bench(tmp_path, ripgrep=rg)
    _tree(bench.root)
    outcome = bench.call("grep", pattern="[Hh]ello", include="*.py")
    assert outcome.meta == {"count": 3, "engine": engine}
    lines = text(outcome).splitlines()
    assert lines[0] == "Found 3 matches"
    by_file: dict[str, list[str]] = {}
    current = ""
    for line in lines[1:]:
        if line.endswith(":") and not line.startswith(" "):
            current = line[:-1]
        elif line.strip():
            by_file.setdefault(current, []).append(line.removeprefix("  "))
    assert by_file == {
        str(bench.root / "src" / "main.py"): ["Line 2: print('hello world')"],
        str(bench.root / "src" / "pkg" / "util.py"): ["Line 1: def hello():", "Line 2:     return 'Hello'"],
    }  # hidden directories and binary files are skipped
    one_file = bench.call("grep", pattern="again", path="src/pkg/notes.md")
    assert "Line 1: hello again" in text(one_file)
    assert text(bench.call("grep", pattern="absent_word")).startswith("No matches")
    bad = bench.call("grep", pattern="(unclosed")
    assert bad.error["code"] == "FS_INVALID_ARGUMENT"
