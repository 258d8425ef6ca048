"""Session ids are untrusted: one narrow pattern, checked before any backend sees them."""

import pytest

from dshpy import InvalidSessionIdError, check_session_id, new_message_id, new_session_id


@pytest.mark.parametrize("good", ["a", "session-0123abcd", "A.b_c-9", "x" * 128, "..."])
def test_accepted_ids(good):
    assert check_session_id(good) == good


@pytest.mark.parametrize("bad", ["", ".", "..", "../x", "x/y", "x\\y", "x" * 129, "tab\there", "naïve", "nul\x00",
                                 " lead", 5, None, b"bytes"])
def test_refused_ids(bad):
    with pytest.raises(InvalidSessionIdError):
        check_session_id(bad)


def test_minted_ids_are_valid_and_unique():
    ids = {new_session_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(check_session_id(i).startswith("session-") and len(i) == 40 for i in ids)
    assert new_message_id() != new_message_id()
