"""``title``: the latest session/title, else a clean, bounded fallback from the first human prompt."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from projection_support import new_session

from dshpy.projections import TITLE, fallback_title, state_of
from dshpy.projections.builtins.title import (
    ELLIPSIS,
    MAX_EVENT_TITLE_BYTES,
    MAX_TITLE_BYTES,
    MAX_WORDS,
    clean_text,
    truncate_utf8,
)
from dshpy.testing.builders import user_message

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # man ZWJ woman ZWJ girl: one grapheme, 18 bytes
THUMBS = "\U0001f44d\U0001f3fd"  # thumbs up + medium skin tone
FLAG = "\U0001f1eb\U0001f1f7"  # regional indicators F R
ZALGO = "x" + "\u0301\u0316\u0323\u0330\u0347"  # one base, five combining marks that NFC leaves alone


def size(text: str) -> int:
    return len(text.encode("utf-8"))


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("What is 2 + 2?", "What is 2 + 2?"),
        ("  lots\t of\n\n whitespace\u00a0\u3000here  ", "lots of whitespace here"),
        ("bell\x07 and nul\x00 and del\x7f gone", "bell and nul and del gone"),
        ("\x1b[31mred\x1b[0m text \x1b]0;window title\x07done", "red text done"),
        ("right\u202eto-left\u200b and zero width", "rightto-left and zero width"),
        ("cafe\u0301 au lait", "caf\u00e9 au lait"),  # NFC
        (f"family {FAMILY} {THUMBS} {FLAG}", f"family {FAMILY} {THUMBS} {FLAG}"),
        ("\ud800lone surrogate", "lone surrogate"),
        ("line one\r\nline two", "line one line two"),
    ],
)
def test_fallback_cleans_the_prompt(prompt: str, title: str) -> None:
    assert fallback_title(prompt) == title


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t", "\x00\x01\x1b[0m", "\u200b\u200e"])
def test_nothing_printable_gives_no_title(prompt: str) -> None:
    assert fallback_title(prompt) is None


def test_a_long_prompt_keeps_whole_words_within_the_byte_budget() -> None:
    prompt = "Please refactor the persistence layer so that every backend shares one contract suite and more"
    title = fallback_title(prompt)
    assert title == "Please refactor the persistence layer so that every backend shares one…"
    assert size(title) <= MAX_TITLE_BYTES
    assert len(title.split()) <= MAX_WORDS


def test_more_words_than_allowed_end_with_an_ellipsis() -> None:
    title = fallback_title(" ".join(["w"] * 20))
    assert title == " ".join(["w"] * MAX_WORDS) + ELLIPSIS
    assert fallback_title(" ".join(["w"] * MAX_WORDS)) == " ".join(["w"] * MAX_WORDS)


def test_exactly_at_the_budget_needs_no_ellipsis() -> None:
    prompt = "a" * 39 + " " + "b" * 40
    assert size(prompt) == MAX_TITLE_BYTES
    assert fallback_title(prompt) == prompt
    assert fallback_title(prompt + "b") == "a" * 39 + ELLIPSIS


def test_a_giant_word_is_cut_between_code_points() -> None:
    title = fallback_title("漢" * 100)  # 3 bytes each
    assert title == "漢" * 25 + ELLIPSIS  # 75 + 3 bytes; a 26th would need 81
    assert size(title) <= MAX_TITLE_BYTES


def test_a_giant_word_is_never_cut_inside_a_grapheme() -> None:
    for unit in (FAMILY, THUMBS, FLAG, ZALGO, "e\u0301" * 1, "1\ufe0f\u20e3"):
        word = unicodedata.normalize("NFC", unit) * 60
        title = fallback_title(word)
        assert title is not None and title.endswith(ELLIPSIS)
        body = title[: -len(ELLIPSIS)]
        assert size(title) <= MAX_TITLE_BYTES
        assert len(body) % len(unicodedata.normalize("NFC", unit)) == 0, unit  # whole clusters only
        assert body


def test_truncate_utf8_keeps_clusters_whole() -> None:
    assert truncate_utf8(FAMILY + "abc", 18) == FAMILY
    assert truncate_utf8(FAMILY + "abc", 17) == ""
    assert truncate_utf8(ZALGO + "y", size(ZALGO) - 1) == ""
    assert truncate_utf8(FLAG + FLAG, 9) == FLAG
    assert truncate_utf8("short", 80) == "short"


def test_a_huge_prompt_is_cheap() -> None:
    assert fallback_title("word " * 1_000_000) == ("word " * MAX_WORDS).strip() + ELLIPSIS
    assert fallback_title("x" * 5_000_000) == "x" * (MAX_TITLE_BYTES - 3) + ELLIPSIS


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_fallback_is_bounded_clean_and_a_prefix(text: str) -> None:
    title = fallback_title(text)
    if title is None:
        assert clean_text(text) == ""
        return
    encoded = title.encode("utf-8")  # never a lone surrogate
    assert len(encoded) <= MAX_TITLE_BYTES
    assert title == title.strip() and "  " not in title
    assert not any(unicodedata.category(c) in ("Cc", "Cs") for c in title)
    assert not any(c.isspace() and c != " " for c in title)
    cleaned = clean_text(text)
    assert cleaned.startswith(title) or (title.endswith(ELLIPSIS) and cleaned.startswith(title[: -len(ELLIPSIS)]))


# -- the projection ---------------------------------------------------------------------------


def prompt(session, text: str, kind: str = "user") -> int:  # type: ignore[no-untyped-def]
    return session.append("user/message", user_message(text, kind=kind), surface_op="append").seq


def title_event(session, title: str, cites: list[int] | None = None):  # type: ignore[no-untyped-def]
    source = {"kind": "user"} if not cites else {"kind": "provider", "provider": "deepseek"}
    return session.append("session/title", {"title": title, "messageSeqs": cites or [], "source": source})


def test_the_first_human_prompt_names_the_session() -> None:
    session = new_session()
    assert state_of(session, TITLE).title is None
    prompt(session, "runtime snapshot", kind="runtime-context")  # not human
    first = prompt(session, "Fix the flaky test\nplease")
    prompt(session, "and another thing")
    state = state_of(session, TITLE)
    assert (state.title, state.source, state.seq) == ("Fix the flaky test please", "prompt", first)


def test_a_prompt_without_text_is_skipped() -> None:
    session = new_session()
    image = user_message("x")
    image["content"] = [{"type": "image", "attachment": {"attachmentId": "a", "mediaType": "image/png"}}]
    session.append("user/message", image, surface_op="append")
    prompt(session, "\x1b[0m")
    seq = prompt(session, "describe it")
    assert (state_of(session, TITLE).title, state_of(session, TITLE).seq) == ("describe it", seq)


def test_the_latest_title_event_wins_over_everything() -> None:
    session = new_session()
    first = prompt(session, "original prompt")
    titled = title_event(session, "Provider title", [first])
    assert state_of(session, TITLE).model_dump() == {"title": "Provider title", "source": "event", "seq": titled.seq}
    renamed = title_event(session, "  My\tname  ")
    prompt(session, "later prompt")
    assert state_of(session, TITLE).model_dump() == {"title": "My name", "source": "event", "seq": renamed.seq}


def test_title_events_are_cleaned_and_capped_and_blank_ones_ignored() -> None:
    session = new_session()
    kept = title_event(session, "\x1b[1mBold\x1b[0m title")
    title_event(session, " \x07 ")
    assert (state_of(session, TITLE).title, state_of(session, TITLE).seq) == ("Bold title", kept.seq)
    title_event(session, "ü" * 500)
    assert state_of(session, TITLE).title == "ü" * (MAX_EVENT_TITLE_BYTES // 2)


def test_irrelevant_events_keep_the_same_state_object() -> None:
    session = new_session()
    prompt(session, "hello")
    state = state_of(session, TITLE)
    prompt(session, "again")
    session.append("todo/write", {"todos": []})
    assert state_of(session, TITLE) is state
