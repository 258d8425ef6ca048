"""Lossless JSON values: validated, copied and frozen once, then shared freely.

The log promises that what the model saw can be rebuilt byte for byte, so event data
must survive a JSON round trip unchanged. ``freeze_json`` is the single gate: it
refuses anything JSON cannot carry exactly (NaN, infinities, ``-0.0``, integers a
JavaScript reader would round, non-string keys, arbitrary objects, cycles) and
returns a deep copy built from :class:`FrozenDict` and :class:`FrozenList`. Those
are ``dict``/``list`` subclasses, so orjson, pydantic and ``isinstance`` checks keep
working, but every mutating method raises; a frozen value is therefore safe to
share between events, derived messages and callers without defensive copies.

Strings may hold lone UTF-16 surrogates (``"\\udcff"``: ``os.listdir()`` gives one for a
file name byte that is not UTF-8, a model stream may cut an emoji between its halves).
dsh's writer is ``JSON.stringify``, which escapes a lone surrogate as ``\\udcff`` and
reads it back unchanged, so we do the same: :func:`dumps` and :func:`loads` keep
orjson's speed for the (nearly all) data without one and fall back to an escaping
encoder and a parser that accepts the escapes only when it is present. A surrogate
*pair* held as two code points is, to JavaScript and to every JSON reader, the one
astral character it encodes, so ``freeze_json`` joins such pairs: what it accepts is
exactly what a store reads back.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn, SupportsIndex, cast

import orjson

from dshpy.errors import DshError

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "FrozenDict",
    "FrozenList",
    "JsonValue",
    "NotJsonError",
    "dumps",
    "dumps_indented",
    "freeze_json",
    "is_sealed",
    "joined_text",
    "loads",
    "seal_cleared",
    "seal_parsed",
    "thaw",
    "unsafe_number_possible",
]

JsonValue = Any
"""A JSON value: None, bool, int, float, str, list or dict of JSON values (frozen once stored)."""

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer every JSON reader (JavaScript's included) keeps exact."""

MAX_DEPTH = 200
"""Deepest container nesting accepted; orjson refuses to encode past 254 levels."""


class NotJsonError(DshError, ValueError):
    """A value cannot be stored as lossless JSON; ``path`` locates it (``$.a[0]``)."""

    def __init__(self, reason: str, path: str = "$") -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path

    def __str__(self) -> str:
        return f"{self.reason} at {self.path}"

    def _inside(self, step: str) -> NotJsonError:
        """Prefix the location with the container step it was found under (built only on failure)."""
        self.path = "$" + step + self.path[1:]
        return self


def _immutable(*_args: object, **_kwargs: object) -> NoReturn:
    raise TypeError("stored event data is immutable; copy it with dshpy.thaw() to change it")


class FrozenDict(dict[str, Any]):
    """A read-only ``dict``: every mutating method raises ``TypeError``."""

    __slots__ = ()

    __setitem__ = _immutable
    __delitem__ = _immutable
    __ior__ = _immutable
    clear = _immutable
    pop = _immutable
    popitem = _immutable
    setdefault = _immutable
    update = _immutable

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        return (FrozenDict, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


class FrozenList(list[Any]):
    """A read-only ``list``: every mutating method raises ``TypeError``."""

    __slots__ = ()

    __setitem__ = _immutable
    __delitem__ = _immutable
    __iadd__ = _immutable
    __imul__ = _immutable
    append = _immutable
    clear = _immutable
    extend = _immutable
    insert = _immutable
    pop = _immutable
    remove = _immutable
    reverse = _immutable
    sort = _immutable

    def __reduce__(self) -> tuple[type[FrozenList], tuple[list[Any]]]:
        return (FrozenList, (list(self),))

    def __repr__(self) -> str:
        return f"FrozenList({list.__repr__(self)})"

    def index(self, value: Any, start: SupportsIndex = 0, stop: SupportsIndex = 2**62) -> int:
        return list.index(self, value, start, stop)


_SCALARS = (str, bool, type(None))


class _SealedDict(FrozenDict):
    """A FrozenDict that :func:`freeze_json` built and checked; only these are trusted as-is."""

    __slots__ = ()


class _SealedList(FrozenList):
    """A FrozenList that :func:`freeze_json` built and checked; only these are trusted as-is."""

    __slots__ = ()


class _RipeningDict(FrozenDict):
    """Checked data whose nested containers may still be the parser's own: sealed the first time one is reached.

    Sealing a replayed event whole costs more than parsing it (the assistant's stream
    records alone are a score of containers), and most readers never look inside most
    of it. So a stored row whose numbers are known to be lossless (see
    :func:`numbers_need_checking`) keeps its parsed containers, and this class stands
    in front of them: every method that can hand out a value (or hand one to other
    code) first *ripens* the dict — wraps each plain child in a ripening container of
    its own — and then turns the instance into a :class:`_SealedDict`, so from then
    on it is an ordinary sealed dict at full speed. A plain child is never reachable
    from outside, and ripening never changes one, so a race only builds a wrapper
    twice. Methods that only read keys (``len``, ``in``, ``keys()``) need no ripening.
    C code that reads a dict's or list's storage directly (orjson's encoder, pydantic-core
    validating data, ``str.join``) sees the plain children, equal to what ripening would
    give; it only reads them and hands none back.
    """

    __slots__ = ()

    def _ripe(self) -> _SealedDict:
        for key, item in dict.items(self):
            kind = type(item)
            if kind is dict:
                dict.__setitem__(self, key, _RipeningDict(item))
            elif kind is list:
                dict.__setitem__(self, key, _RipeningList(item))
        self.__class__ = _SealedDict  # type: ignore[assignment]  # same layout: a FrozenDict with no slots
        return cast(_SealedDict, self)

    def __getitem__(self, key: str) -> Any:
        return dict.__getitem__(self._ripe(), key)

    def get(self, key: str, default: Any = None) -> Any:
        return dict.get(self._ripe(), key, default)

    def items(self) -> Any:
        return dict.items(self._ripe())

    def values(self) -> Any:
        return dict.values(self._ripe())

    def __iter__(self) -> Iterator[str]:  # defined so that dict(x), {**x} and x | y go through __getitem__
        return dict.__iter__(self._ripe())

    def copy(self) -> dict[str, Any]:
        return dict.copy(self._ripe())

    def __or__(self, other: Any) -> Any:
        return dict.__or__(self._ripe(), other)

    def __ror__(self, other: Any) -> Any:
        return dict.__ror__(self._ripe(), other)

    def __eq__(self, other: object) -> bool:  # other's __eq__ may be handed our children
        return dict.__eq__(self._ripe(), other)

    def __ne__(self, other: object) -> bool:
        return dict.__ne__(self._ripe(), other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._ripe())


class _RipeningList(FrozenList):
    """The list counterpart of :class:`_RipeningDict`: ripens into a :class:`_SealedList` when first reached."""

    __slots__ = ()

    def _ripe(self) -> _SealedList:
        for index, item in enumerate(list.__iter__(self)):
            kind = type(item)
            if kind is dict:
                list.__setitem__(self, index, _RipeningDict(item))
            elif kind is list:
                list.__setitem__(self, index, _RipeningList(item))
        self.__class__ = _SealedList  # type: ignore[assignment]  # same layout: a FrozenList with no slots
        return cast(_SealedList, self)

    def __getitem__(self, index: Any) -> Any:
        return list.__getitem__(self._ripe(), index)

    def __iter__(self) -> Iterator[Any]:
        return list.__iter__(self._ripe())

    def __reversed__(self) -> Iterator[Any]:
        return list.__reversed__(self._ripe())

    def copy(self) -> list[Any]:
        return list.copy(self._ripe())

    def __add__(self, other: Any) -> Any:
        return list.__add__(self._ripe(), other)

    def __radd__(self, other: Any) -> Any:  # list + this would copy our plain children without it
        ripe = self._ripe()
        return list.__add__(other, ripe) if isinstance(other, list) else NotImplemented

    def __mul__(self, count: SupportsIndex) -> Any:
        return list.__mul__(self._ripe(), count)

    __rmul__ = __mul__

    def __contains__(self, value: object) -> bool:
        return list.__contains__(self._ripe(), value)

    def index(self, value: Any, start: SupportsIndex = 0, stop: SupportsIndex = 2**62) -> int:
        return list.index(self._ripe(), value, start, stop)

    def count(self, value: Any) -> int:
        return list.count(self._ripe(), value)

    def __eq__(self, other: object) -> bool:
        return list.__eq__(self._ripe(), other)

    def __ne__(self, other: object) -> bool:
        return list.__ne__(self._ripe(), other)

    def __lt__(self, other: Any) -> bool:
        return list.__lt__(self._ripe(), other)

    def __le__(self, other: Any) -> bool:
        return list.__le__(self._ripe(), other)

    def __gt__(self, other: Any) -> bool:
        return list.__gt__(self._ripe(), other)

    def __ge__(self, other: Any) -> bool:
        return list.__ge__(self._ripe(), other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._ripe())


_TRUSTED = (_SealedDict, _SealedList, _RipeningDict, _RipeningList)
"""Container types whose contents are known to be lossless JSON (a ripening one's plain children included)."""


def is_sealed(value: Any) -> bool:
    """Whether ``value`` is a scalar or a container :func:`freeze_json` (or a checked read) already checked."""
    kind = type(value)
    if kind is str:
        return value.isascii() or joined_text(value) is value
    return kind in _TRUSTED or kind is bool or value is None


def joined_text(value: str) -> str:
    """``value`` with every surrogate pair held as two code points joined into the character it encodes.

    JSON (and JavaScript) cannot tell the two apart, so a store would read the pair back
    as the character; joining it at the gate keeps what was appended equal to what is
    read. Lone surrogates stay as they are. ``value`` itself is returned when nothing changes.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        joined = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return value if joined == value else joined
    return value


def freeze_json(value: Any) -> JsonValue:
    """Validate ``value`` as lossless JSON and return a frozen deep copy.

    Containers this function built before are trusted and returned as they are, which
    makes re-appending data taken from an earlier event (a derived message, say) free;
    a ``FrozenDict`` built by hand is checked like any other mapping. Strings (keys
    included) keep lone surrogates and get split surrogate pairs joined (see
    :func:`joined_text`), so the copy equals what any store reads back.
    Raises :class:`NotJsonError` naming the first offending location.
    """
    kind = type(value)
    if kind is _SealedDict or kind is _SealedList:  # the common case on the append path: no work at all
        return value
    if kind is _RipeningDict or kind is _RipeningList:  # data taken from a replayed event
        return value
    return _freeze(value, 0, set())


def _scalar(value: Any) -> JsonValue:
    kind = type(value)
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise NotJsonError("integer outside the exact JSON range ±(2**53-1)")
    if kind is float:
        if not math.isfinite(value):
            raise NotJsonError(f"non-finite number {value!r}")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise NotJsonError("negative zero")
        return value
    if isinstance(value, str):  # str subclasses (enums): store the plain string
        return joined_text(str.__str__(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return _scalar(int(value))
    raise NotJsonError(f"value of type {kind.__name__} is not JSON")


def _freeze(value: Any, depth: int, active: set[int]) -> JsonValue:
    # Hot path: plain dicts and lists of ASCII strings, small ints and bools are checked inline.
    kind = type(value)
    if kind is str:
        return value if value.isascii() else joined_text(value)
    if value is None or kind is bool:
        return value
    if kind in _TRUSTED:
        return value
    is_mapping = kind is dict or (isinstance(value, Mapping) and not isinstance(value, type))
    is_sequence = not is_mapping and (kind is list or kind is tuple or isinstance(value, list | tuple))
    if not (is_mapping or is_sequence):
        return _scalar(value)
    if depth >= MAX_DEPTH:
        raise NotJsonError(f"nesting deeper than {MAX_DEPTH} levels")
    marker = id(value)
    if marker in active:
        raise NotJsonError("reference cycle")
    active.add(marker)
    if is_mapping:
        out: dict[str, Any] = {}
        for raw_key, item in value.items():
            if type(raw_key) is not str:
                raise NotJsonError(f"non-string key {raw_key!r}")
            key = raw_key if raw_key.isascii() else joined_text(raw_key)
            item_kind = type(item)
            if (
                (item_kind is str and item.isascii())
                or item is None
                or item_kind is bool
                or (item_kind is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)
            ):
                out[key] = item
                continue
            try:
                out[key] = _freeze(item, depth + 1, active)
            except NotJsonError as error:
                raise error._inside(f".{key}") from None
        active.discard(marker)
        if len(out) != len(value):
            raise NotJsonError("two keys are the same string once their surrogate pairs are joined")
        return _SealedDict(out)
    items: list[Any] = []
    for index, item in enumerate(value):
        item_kind = type(item)
        if (
            (item_kind is str and item.isascii())
            or item is None
            or item_kind is bool
            or (item_kind is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)
        ):
            items.append(item)
            continue
        try:
            items.append(_freeze(item, depth + 1, active))
        except NotJsonError as error:
            raise error._inside(f"[{index}]") from None
    active.discard(marker)
    return _SealedList(items)


def seal_parsed(value: Any) -> JsonValue:
    """Seal a value fresh from ``orjson.loads`` (or :func:`loads`), reusing its containers.

    Parsed JSON cannot hold cycles, non-string keys, NaN or arbitrary objects, so only
    the checks JSON itself does not make remain (``-0.0``, integers past ±2**53-1,
    nesting depth). The parsed containers are consumed: do not use ``value`` afterwards.
    """
    return _seal_parsed(value, 0)


def _seal_parsed(value: Any, depth: int) -> JsonValue:
    kind = type(value)
    if kind is not dict and kind is not list:
        return _scalar(value) if kind is int or kind is float else value
    if depth >= MAX_DEPTH:
        raise NotJsonError(f"nesting deeper than {MAX_DEPTH} levels")
    is_dict = kind is dict
    for slot, item in value.items() if is_dict else enumerate(value):
        item_kind = type(item)
        if item_kind is dict or item_kind is list:
            try:
                value[slot] = _seal_parsed(item, depth + 1)  # replacing a value keeps the dict's size
            except NotJsonError as error:
                raise error._inside(f".{slot}" if is_dict else f"[{slot}]") from None
        elif (item_kind is int and not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER) or (
            item_kind is float and item == 0.0 and math.copysign(1.0, item) < 0
        ):
            problem = NotJsonError("number JSON readers cannot keep exactly")
            raise problem._inside(f".{slot}" if is_dict else f"[{slot}]")
    return _SealedDict(value) if is_dict else _SealedList(value)


_NUMBER_SHAPES = bytes(
    ord("0") if byte in b"0123456789" else ord("e") if byte in b"eE" else byte if byte in b"-" else ord(" ")
    for byte in range(256)
)
"""Translation that keeps only the shape of numbers: every digit becomes ``0``, ``E`` becomes ``e``."""

_UNSAFE_SHAPES = (b"0" * 16, b"e-000")
"""An integer past ±(2**53-1) has 16 digits or more; a double that underflows to ``-0.0`` from a
mantissa of 1 or more needs an exponent of -324 or lower (three digits at least)."""

_NEGATIVE_ZEROS = (b"-0.", b"-0e", b"-0E")
"""How a float literal with a zero mantissa (``-0.0``, ``-0e5``, ``-0.000001e-330``) starts; ``-0`` alone is int 0."""


def unsafe_number_possible(text: bytes) -> bool:
    """Whether JSON ``text`` may hold a number :func:`seal_parsed` refuses (``-0.0``, an unsafe integer).

    Conservative and about a hundred times cheaper than looking at every parsed value:
    ``False`` proves there is none, ``True`` (a date's ``-0.5``, a long digit run in a
    string) only means "look". ``text`` may be many rows joined by a separator that is
    not a digit, ``-``, ``.`` or ``e``, so one call clears a whole chunk of a log.
    """
    shapes = text.translate(_NUMBER_SHAPES)
    if _UNSAFE_SHAPES[0] in shapes or _UNSAFE_SHAPES[1] in shapes:
        return True
    # "-0" first: a search is quick when the needle ends in a rare byte, and "e" or "." are not rare in text
    return b"-0" in text and any(zero in text for zero in _NEGATIVE_ZEROS)


def seal_cleared(value: Any, source: bytes) -> JsonValue:
    """Seal a value fresh from ``orjson.loads(source)`` when :func:`unsafe_number_possible` cleared ``source``.

    The result equals :func:`seal_parsed`'s and is as immutable, but containers are
    sealed the first time a reader reaches them (see :class:`_RipeningDict`), so a
    replay pays only for what is looked at. Nesting is bounded by counting the source's
    brackets (only a row long enough to nest :data:`MAX_DEPTH` levels is counted, and
    one that may is sealed the exact way, which names the place). The parsed
    containers are consumed: do not use ``value`` afterwards.
    """
    if len(source) >= 2 * MAX_DEPTH and source.count(b"[") + source.count(b"{") >= MAX_DEPTH:
        return _seal_parsed(value, 0)
    kind = type(value)
    if kind is dict:
        return _RipeningDict(value)
    if kind is list:
        return _RipeningList(value)
    return _scalar(value) if kind is int or kind is float else value


def thaw(value: JsonValue) -> Any:
    """Return a plain, mutable deep copy of a (frozen) JSON value."""
    if isinstance(value, dict):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list):
        return [thaw(item) for item in value]
    return value


_ORJSON_DEPTH = 254
"""How deep orjson nests before it refuses (the escaping encoder refuses past the same depth)."""

_SURROGATE = re.compile("([\ud800-\udfff])")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_ESCAPED_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def dumps(value: JsonValue) -> bytes:
    """Encode compactly, keeping key order: ``JSON.stringify``'s output, byte for byte (dsh's writer).

    orjson writes everything but strings holding a lone surrogate, which it refuses;
    only then is the value walked again by the escaping encoder (see the module docs).
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        return _escaping_top(value, None)


def dumps_indented(value: JsonValue) -> bytes:
    """:func:`dumps` indented by two spaces (orjson's ``OPT_INDENT_2`` layout), for people to read."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except TypeError:
        return _escaping_top(value, 0)


def _escaping_top(value: Any, indent: int | None) -> bytes:
    try:
        return _escaping(value, indent, 0)
    except RecursionError:  # nesting near orjson's limit, from a deep call stack: refused as orjson refuses it
        raise orjson.JSONEncodeError("Recursion limit reached") from None


def _escaping(value: Any, indent: int | None, depth: int) -> bytes:
    """Encode as orjson would, but write lone surrogates as ``JSON.stringify`` does.

    ``indent`` is the current indentation level when indenting, else ``None``. Anything
    but strings, dicts, lists and tuples goes to orjson, so numbers are written by the
    same code as on the fast path, and a value orjson cannot encode still raises its error.
    """
    if isinstance(value, str):
        return _escaped_string(value)
    is_dict = isinstance(value, dict)
    if not is_dict and not isinstance(value, list | tuple):
        return orjson.dumps(value)
    if depth >= _ORJSON_DEPTH:
        raise orjson.JSONEncodeError("Recursion limit reached")
    if not value:
        return b"{}" if is_dict else b"[]"
    inner = None if indent is None else indent + 1
    parts: list[bytes] = []
    if is_dict:
        separator = b":" if indent is None else b": "
        for key, item in value.items():
            if not isinstance(key, str):
                raise orjson.JSONEncodeError("Dict key must be str")
            parts.append(_escaped_string(key) + separator + _part(item, inner, depth + 1))
    else:
        for item in value:
            parts.append(_part(item, inner, depth + 1))
    opening, closing = (b"{", b"}") if is_dict else (b"[", b"]")
    if indent is None:
        return opening + b",".join(parts) + closing
    outer = b"\n" + b"  " * indent
    lead = outer + b"  "
    return opening + lead + (b"," + lead).join(parts) + outer + closing


def _part(value: Any, indent: int | None, depth: int) -> bytes:
    """One member: whole by orjson when it can (compact only), else walked; only the subtrees with a lone
    surrogate cost the slow walk."""
    if indent is None:
        try:
            return orjson.dumps(value)
        except TypeError:
            pass
    return _escaping(value, indent, depth)


def _escaped_string(text: str) -> bytes:
    """A JSON string literal; each lone surrogate becomes a lowercase ``\\uXXXX`` escape."""
    try:
        return orjson.dumps(text)
    except TypeError:
        pieces = _SURROGATE.split(joined_text(text))  # odd positions hold the lone surrogates
    out = [b'"']
    for index, piece in enumerate(pieces):
        if index % 2:
            out.append(b"\\u%04x" % ord(piece))
        elif piece:
            out.append(orjson.dumps(piece)[1:-1])
    out.append(b'"')
    return b"".join(out)


def loads(raw: bytes | bytearray | memoryview | str) -> JsonValue:
    """Decode strict JSON (NaN and Infinity are refused) into plain containers.

    orjson refuses ``\\udcff``-style escapes of lone surrogates, which ``JSON.stringify``
    writes; a document holding one is parsed again by the standard library's decoder,
    held to orjson's rules (UTF-8 input, no NaN, no infinite numbers). Errors are
    ``orjson.JSONDecodeError`` either way.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        text = _with_escaped_surrogates(raw)
        if text is None:
            raise
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError) as error:
        if isinstance(error, json.JSONDecodeError):
            raise orjson.JSONDecodeError(error.msg, text, error.pos) from None
        raise orjson.JSONDecodeError(str(error), text, 0) from None


def _with_escaped_surrogates(raw: bytes | bytearray | memoryview | str) -> str | None:
    """The document as text when it escapes a surrogate (and holds no raw one), else ``None``."""
    if isinstance(raw, str):
        if _ESCAPED_SURROGATE.search(raw) is None or _SURROGATE.search(raw) is not None:
            return None
        return raw
    data = bytes(raw)
    if _ESCAPED_SURROGATE_BYTES.search(data) is None:
        return None
    try:
        return data.decode("utf-8")  # strict: a raw surrogate's bytes are not UTF-8
    except UnicodeDecodeError:
        return None


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise ValueError(f"number {literal} is infinite as a double")
    return number


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
