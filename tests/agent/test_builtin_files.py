"""read, write, edit: dsh's output shapes, exact edits, and writes confined to the workspace."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from builtin_support import Bench, text

from dshpy.agent.builtin import BUILTIN_TOOL_NAMES, builtin_tools
from dshpy.agent.builtin.schemas import SCHEMAS
from dshpy.agent.permissions import Permissions


@pytest.fixture
def bench(tmp_path):
    return Bench(tmp_path)


def test_schemas_are_dshs_names_and_parameters():
    tools = builtin_tools(permissions=Permissions())
    assert [t.name for t in tools] == list(BUILTIN_TOOL_NAMES)
    schemas = {t.name: t.schema()["parameters"] for t in tools}
    assert schemas["read"]["required"] == ["file_path"]
    assert set(schemas["read"]["properties"]) == {"file_path", "offset", "limit"}
    assert schemas["bash"]["required"] == ["description", "command"]
    assert set(schemas["bash"]["properties"]) == {
        "description",
        "command",
        "timeoutMs",
        "workdir",
        "run_in_background",
        "sandbox_permissions",
        "justification",
    }
    assert schemas["edit"]["required"] == ["file_path", "old_string", "new_string"]
    assert schemas["todo_write"]["properties"]["todos"]["items"]["properties"]["status"]["enum"] == [
        "pending",
        "in_progress",
        "completed",
    ]
    for name, schema in SCHEMAS.items():  # every advertised property is one the tool accepts, and vice versa
        tool = next(t for t in tools if t.name == name)
        assert set(schema["parameters"]["properties"]) == set(tool.arguments_model.model_fields)


DSH_TOOL_TURN = (
    Path(__file__).parents[1]
    / "fixtures/dsh/sessions/plain/--tmp-dshpy-dsh-fixtures-workspace--/tool-turn/session.v4.jsonl"
)


@pytest.mark.parametrize("name", ["bash", "job_output", "job_list", "job_kill"])
def test_bash_and_job_tool_parameters_are_the_ones_dshs_runtime_advertised(name):
    header = next(
        json.loads(line)
        for line in DSH_TOOL_TURN.read_text().splitlines()
        if json.loads(line).get("type") == "request/header"
    )
    theirs = next(t["parameters"] for t in header["data"]["header"]["tools"] if t["name"] == name)
    ours = next(t.schema()["parameters"] for t in builtin_tools(permissions=Permissions()) if t.name == name)
    assert list(ours["properties"]) == list(theirs["properties"])  # names and their order
    assert {k: v.get("type") for k, v in ours["properties"].items()} == {
        k: v.get("type") for k, v in theirs["properties"].items()
    }
    assert ours.get("required", []) == theirs.get("required", [])


def test_read_numbers_lines_and_says_where_the_file_ends(bench):
    (bench.root / "a.txt").write_text("one\ntwo\r\nthree\n")
    outcome = bench.call("read", file_path="a.txt")
    path = str(bench.root / "a.txt")
    assert text(outcome) == (
        f"<path>{path}</path>\n<type>file</type>\n<content>\n1: one\n2: two\n3: three\n\n"
        "(End of file - total 3 lines)\n</content>"
    )
    assert outcome.meta == {
        "path": path,
        "offset": 1,
        "lines": [{"number": 1, "text": "one"}, {"number": 2, "text": "two"}, {"number": 3, "text": "three"}],
        "totalLines": 3,
    }


def test_read_a_range_tells_how_to_continue(bench):
    (bench.root / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    outcome = bench.call("read", file_path="n.txt", offset=4, limit=2)
    assert "4: line 4\n5: line 5\n\n(Showing lines 4-5 of 10. Use offset=6 to continue.)" in text(outcome)
    beyond = bench.call("read", file_path="n.txt", offset=11)
    assert beyond.is_error and beyond.error["code"] == "FS_NOT_FOUND"
    assert "offset 11 is out of range" in text(beyond) and "(10 lines)" in text(beyond)


def test_read_refuses_what_is_not_a_text_file(bench):
    (bench.root / "bin").write_bytes(b"\x00\x01\x02")
    (bench.root / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (bench.root / "dir").mkdir()
    for name, code in (("bin", "FS_NOT_TEXT"), ("latin1.txt", "FS_NOT_TEXT"), ("dir", "FS_NOT_REGULAR_FILE")):
        outcome = bench.call("read", file_path=name)
        assert outcome.is_error and outcome.error == {"name": "FsError", "code": code}, name
    missing = bench.call("read", file_path="nope.txt")
    assert missing.error["code"] == "FS_NOT_FOUND" and "nope.txt" in text(missing)


def test_read_reaches_outside_the_workspace(bench, tmp_path):
    (tmp_path / "outside.txt").write_text("visible\n")
    assert "1: visible" in text(bench.call("read", file_path="../outside.txt"))


def test_write_creates_and_replaces_inside_the_workspace(bench):
    created = bench.call("write", file_path="sub/new.txt", content="a\nb\n")
    assert not created.is_error and text(created).startswith("Created ")
    assert (bench.root / "sub" / "new.txt").read_text() == "a\nb\n"
    replaced = bench.call("write", file_path="sub/new.txt", content="c")
    assert text(replaced).startswith("Replaced ") and (bench.root / "sub" / "new.txt").read_text() == "c"


def test_write_out_of_the_workspace_is_refused_by_path_and_by_symlink(bench, tmp_path):
    outside = tmp_path / "escape.txt"
    refused = bench.call("write", file_path="../escape.txt", content="x")
    assert refused.is_error and refused.error == {"name": "FsError", "code": "FS_SANDBOX_DENIED"}
    assert "[sandbox: file access denied under workspace-write mode]" in text(refused)
    assert "sandbox_permissions" in text(refused)  # the escalation hint, approvals being possible
    assert not outside.exists()
    os.symlink(tmp_path, bench.root / "link")
    via_link = bench.call("write", file_path="link/escape.txt", content="x")
    assert via_link.error["code"] == "FS_SANDBOX_DENIED" and not outside.exists()
    absolute = bench.call("write", file_path=str(outside), content="x")
    assert absolute.error["code"] == "FS_SANDBOX_DENIED" and not outside.exists()


def test_edit_replaces_exactly_one_match(bench):
    target = bench.root / "code.py"
    target.write_text("x = 1\ny = 2\nx = 1\n")
    ambiguous = bench.call("edit", file_path="code.py", old_string="x = 1", new_string="x = 3")
    assert ambiguous.error["code"] == "FS_AMBIGUOUS_EDIT" and "appears 2 times" in text(ambiguous)
    missing = bench.call("edit", file_path="code.py", old_string="z = 9", new_string="z = 0")
    assert missing.error["code"] == "FS_EDIT_NOT_FOUND"
    assert target.read_text() == "x = 1\ny = 2\nx = 1\n"  # refused edits change nothing
    one = bench.call("edit", file_path="code.py", old_string="y = 2", new_string="y = 20")
    assert not one.is_error and target.read_text() == "x = 1\ny = 20\nx = 1\n"
    every = bench.call("edit", file_path="code.py", old_string="x = 1", new_string="x = 3", replace_all=True)
    assert "replaced 2 occurrences" in text(every) and target.read_text() == "x = 3\ny = 20\nx = 3\n"
    empty = bench.call("edit", file_path="code.py", old_string="", new_string="q")
    assert empty.error["code"] == "FS_INVALID_ARGUMENT"
    assert bench.call("edit", file_path="gone.py", old_string="a", new_string="b").error["code"] == "FS_NOT_FOUND"


def test_edit_outside_the_workspace_is_refused(bench, tmp_path):
    outside = tmp_path / "other.txt"
    outside.write_text("keep\n")
    refused = bench.call("edit", file_path=str(outside), old_string="keep", new_string="lost")
    assert refused.error["code"] == "FS_SANDBOX_DENIED" and outside.read_text() == "keep\n"


def test_read_only_refuses_every_write(tmp_path):
    bench = Bench(tmp_path, Permissions("read-only"))
    (bench.root / "a.txt").write_text("a\n")
    refused = bench.call("write", file_path="a.txt", content="b")
    assert refused.error["code"] == "FS_SANDBOX_DENIED" and "under read-only mode" in text(refused)
    assert bench.call("edit", file_path="a.txt", old_string="a", new_string="b").error["code"] == "FS_SANDBOX_DENIED"
    assert (bench.root / "a.txt").read_text() == "a\n"
    assert "1: a" in text(bench.call("read", file_path="a.txt"))


def test_danger_full_access_writes_anywhere(tmp_path):
    bench = Bench(tmp_path, Permissions("danger-full-access"))
    assert not bench.call("write", file_path="../free.txt", content="ok").is_error
    assert (tmp_path / "free.txt").read_text() == "ok"


def test_bad_arguments_are_named(bench):
    outcome = bench.call("write", file_path="a.txt")
    assert outcome.error["code"] == "INVALID_TOOL_INPUT" and "content" in text(outcome)
    unknown = bench.call("read", file_path="a.txt", run_in_background=True)
    assert unknown.error["code"] == "INVALID_TOOL_INPUT" and "run_in_background" in text(unknown)


def test_the_workspace_follows_the_sessions_working_directory(bench):
    (bench.root / "inner").mkdir()
    assert not bench.call("write", file_path="inner/a.txt", content="1").is_error
    bench.session.append("working-directory/change", {"cwd": str(bench.root / "inner")})
    assert "1: 1" in text(bench.call("read", file_path="a.txt"))  # relative to the new directory
    refused = bench.call("write", file_path="../b.txt", content="2")  # the old root is now outside
    assert refused.error["code"] == "FS_SANDBOX_DENIED" and not (bench.root / "b.txt").exists()
