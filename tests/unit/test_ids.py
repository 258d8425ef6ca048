"""Session ids are untrusted: every id dsh can write is read, nothing that acts as a path is.

dsh names sessions with any string and escapes it on disk, so dshpy accepts spaces,
``/``, ``\\`` and any script (issue #16). What would make an id a path rather than a
name stays refused before any backend sees it: ``.``/``..`` (also as components),
absolute paths and NUL. Control characters and lone surrogates are names to dsh
(its ``encodeSegment`` escapes every code unit), so they are to dshpy.
"""

import pytest

from dshpy import InvalidSessionIdError, check_session_id, new_message_id, new_session_id


@pytest.mark.parametrize(
    "good",
    [
        "a",
        "session-0123abcd",
        "A.b_c-9",
        "x" * 128,
        "...",
        "x/y",
        "x\\y",
        "naïve",
        " lead",
        "my session",
        "team/alpha/run 2",
        "会话 ü ✓",
        "emoji 🙂",
        "~0041",
        "a//b",
        ".hidden",
        "x..y",
        "a/.../b",
        "tab\there",
        "new\nline\r",
        "del\x7f",
        "bell\x07",
        "lone \ud800",
        "\udcff",
        "half \ud83d emoji",
    ],
)
def test_accepted_ids(good):
    assert check_session_id(good) == good


@pytest.mark.parametrize(
    "bad",
    [
        "",
        ".",
        "..",
        "../x",
        "x/..",
        "x/../y",
        "x\\..\\y",
        "./x",
        "/abs",
        "\\abs",
        "C:\\x",
        "c:/x",
        "x" * 129,
        "nul\x00",
        5,
        None,
        b"bytes",
    ],
)
def test_refused_ids(bad):
    with pytest.raises(InvalidSessionIdError):
        check_session_id(bad)


def test_minted_ids_are_valid_and_unique():
    ids = {new_session_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(check_session_id(i).startswith("session-") and len(i) == 40 for i in ids)
    assert new_message_id() != new_message_id()


def test_refusals_say_what_is_wrong():
    with pytest.raises(InvalidSessionIdError, match="it is empty"):
        check_session_id("")
    with pytest.raises(InvalidSessionIdError, match="it holds a NUL character"):
        check_session_id("a\x00b")
