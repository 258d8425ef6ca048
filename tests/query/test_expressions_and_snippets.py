"""Query text into expressions, words as the index cuts them, snippets and cursors: the pure parts of search."""

from __future__ import annotations

import pytest

from dshpy.log.search_text import MatchExpr, Term, fold_word, words
from dshpy.query import InvalidQueryError, parse_query
from dshpy.query.cursors import decode_cursor, encode_cursor, fingerprint
from dshpy.query.snippets import SNIPPET_CHARS, make_snippet
from dshpy.storage.postgres_search import compile_tsquery
from dshpy.storage.search_scan import rank_bm25
from dshpy.storage.sqlite_search import compile_fts5


def test_words_are_letters_and_digits_folded_like_fts5_unicode61() -> None:
    assert words("parse_config(x86) -> Café, naïve ÉCOLE 42") == [
        "parse", "config", "x86", "cafe", "naive", "ecole", "42",
    ]  # fmt: skip
    assert words("日本語のテキスト") == ["日本語のテキスト"]
    assert fold_word("Straße") == "straße"  # lower case, not case folding: as FTS5 does


def test_a_plain_query_is_one_literal_phrase() -> None:
    expr = parse_query('  TypeError: "x" is -None OR *  ')
    assert expr == MatchExpr(((Term(("typeerror", "x", "is", "none", "or")),),))


def test_operators_make_groups_of_terms() -> None:
    expr = parse_query('alpha "beta gamma"* -delta OR NOT eps zeta AND eta*', operators=True)
    assert expr.groups == (
        (Term(("alpha",)), Term(("beta", "gamma"), prefix=True), Term(("delta",), negated=True)),
        (Term(("eps",), negated=True), Term(("zeta",)), Term(("eta",), prefix=True)),
    )
    assert compile_fts5(expr) == ('(("alpha" AND "beta gamma" *) NOT "delta") OR (("zeta" AND "eta" *) NOT "eps")')
    assert compile_tsquery(expr) == (
        "(('alpha') & ('beta' <-> 'gamma':*) & !('delta')) | (!('eps') & ('zeta') & ('eta':*))"
    )


@pytest.mark.parametrize(
    ("query", "operators", "words_in_message"),
    [
        ("", False, "empty"),
        ("\u3000 \n", False, "empty"),
        ("a\x00b", False, "NUL"),
        ("é" * 2049, False, "4098 bytes"),
        ("...", False, "no words"),
        ('"open', True, "unbalanced"),
        ("a OR", True, "each side"),
        ("OR a", True, "each side"),
        ("a NOT", True, "NOT must be followed"),
        ("-a -b", True, "exclude"),
        ("-- ...", True, "no words"),
    ],
)
def test_unusable_queries_are_refused(query: str, operators: bool, words_in_message: str) -> None:
    with pytest.raises(InvalidQueryError, match=words_in_message) as refused:
        parse_query(query, operators=operators)
    assert refused.value.code == "SESSION_QUERY_INVALID_QUERY"


def test_a_query_of_exactly_the_limit_is_accepted() -> None:
    assert parse_query("a" * 4096).groups


def test_phrases_prefixes_and_negation_match_word_sequences() -> None:
    doc = words("the quick brown fox jumps")
    assert MatchExpr.phrase("quick brown").matches(doc)
    assert not MatchExpr.phrase("brown quick").matches(doc)
    assert parse_query("qui* fox", operators=True).matches(doc)
    assert not parse_query("fox -jumps", operators=True).matches(doc)
    assert parse_query("cat OR fox", operators=True).matches(doc)


def test_bm25_ranks_frequent_short_matches_first() -> None:
    expr = MatchExpr.phrase("gizmo")
    docs = [words("gizmo " + "filler " * 30), words("gizmo gizmo"), words("nothing here")]
    scores = rank_bm25(expr, docs)
    assert scores[2] is None
    assert scores[1] is not None and scores[0] is not None and scores[1] > scores[0]


def test_a_snippet_shows_the_first_match_with_every_match_marked() -> None:
    text = "Intro line.\n\n  " + "padding " * 30 + "then parse_config failed; parse  config again" + " tail" * 50
    snippet = make_snippet(text, MatchExpr.phrase("parse config"))
    assert len(snippet.text) <= SNIPPET_CHARS
    assert snippet.truncated_start and snippet.truncated_end
    assert "\n" not in snippet.text and "  " not in snippet.text
    marked = snippet.marked()
    assert "then [parse_config] failed; [parse config] again" in marked
    assert marked.startswith("…") and marked.endswith("…")
    assert [snippet.text[s:e] for s, e in snippet.highlights] == ["parse_config", "parse config"]


def test_a_snippet_of_short_text_is_the_whole_text() -> None:
    snippet = make_snippet("Café au lait", MatchExpr.phrase("cafe"))
    assert snippet.marked("<b>", "</b>") == "<b>Café</b> au lait"
    assert not snippet.truncated_start and not snippet.truncated_end
    plain = make_snippet("no match here", MatchExpr.phrase("absent"))
    assert plain.text == "no match here" and plain.highlights == ()


@pytest.mark.parametrize(
    "text",
    [
        "def fix_parser(self):\n\t  return  self._cache  \n" * 20,
        "  leading and trailing whitespace \x0b\x0c\x1c  ",
        "short",
        "",
        "word " * 48,  # exactly SNIPPET_CHARS: nothing cut
        "words " * 40 + "x",  # one past it
        "Café au lait, then the parser",  # not ASCII: the words are always cut
        "PARSER_cache failed\r\nafter retry " * 12,
    ],
)
@pytest.mark.parametrize("query", ["parser", "cache fail", "absent words", "pars", "lait"])
def test_a_snippet_skips_cutting_words_only_when_nothing_can_match(
    text: str, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shortcut for texts that share no word with the query gives the snippet the full path gives."""
    from dshpy.query import snippets

    exprs = [MatchExpr.phrase(query), MatchExpr(((Term(tuple(words(query)), prefix=True),),))]
    quick = [make_snippet(text, expr) for expr in exprs]
    monkeypatch.setattr(snippets, "_may_match", lambda text, terms: True)
    assert quick == [make_snippet(text, expr) for expr in exprs]


def test_cursors_continue_only_the_request_that_made_them() -> None:
    request = fingerprint({"query": "x", "filters": {}})
    cursor = encode_cursor("search", request, [20, 3])
    assert decode_cursor(cursor, "search", request) == [20, 3]
    for bad, kind, fp in (
        (cursor, "list", request),
        (cursor, "search", fingerprint({"query": "y"})),
        ("v1.@@@", "search", request),
        ("v2.abc", "search", request),
        (12, "search", request),
    ):
        with pytest.raises(InvalidQueryError) as refused:
            decode_cursor(bad, kind, fp)
        assert refused.value.code == "SESSION_QUERY_INVALID_CURSOR"
