"""Fixtures shared by every test directory: a throwaway PostgreSQL schema per test (or a visible skip),
and session roots holding old-format dsh logs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dshpy.storage.jsonl.zstd_frames import compress_frame
from dshpy.testing.postgres import SKIP_REASON, drop_schema, scratch_schema, store_url, test_dsn


@pytest.fixture
def postgres_dsn() -> str:
    """The test server (``DSH_TEST_POSTGRES_DSN``); the test skips, saying why, when it is unset."""
    dsn = test_dsn()
    if dsn is None:
        pytest.skip(SKIP_REASON)
    return dsn


@pytest.fixture
def postgres_url(postgres_dsn: str) -> Iterator[str]:
    """A store URL on a schema of its own, dropped after the test."""
    schema = scratch_schema()
    yield store_url(postgres_dsn, schema)
    drop_schema(postgres_dsn, schema)


LONG_FIRST = "crash"
"""The SIGKILL tests (a few minutes of the suite, each test a minute or more) are run first: with
``pytest -n`` the short tests then fill the other workers around them, instead of one long test
starting last and running on alone."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.parent.name != LONG_FIRST)  # stable: the order within each part holds


DSH_OLD_ROOTS = Path(__file__).resolve().parent / "fixtures" / "dsh_old" / "roots"
"""Session roots of old-format dsh logs (see tests/fixtures/dsh_old/README.md)."""


def write_generation(path: Path, plain: bytes, compression: str) -> None:
    """Store a plain JSONL log at ``path`` as dsh would in that encoding: zstd puts the header alone in frame 0."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if compression == "none":
        path.write_bytes(plain)
        return
    head, _, body = plain.partition(b"\n")
    path.write_bytes(compress_frame(head + b"\n") + (compress_frame(body) if body else b""))


@pytest.fixture
def dsh_old_root(tmp_path: Path) -> Callable[..., Path]:
    """Build a session root from a fixture family with each session stored as generation ``version`` only."""

    def build(family: str, compression: str = "none", version: int = 0, name: str = "sessions") -> Path:
        root = tmp_path / f"{name}-{family}-{compression}-v{version}"
        source_name = "session.jsonl" if version == 0 else f"session.v{version}.jsonl"
        for source in sorted((DSH_OLD_ROOTS / family).glob(f"*/*/{source_name}")):
            relative = source.parent.relative_to(DSH_OLD_ROOTS / family)
            target = root / relative / (source_name + (".zstd" if compression == "zstd" else ""))
            write_generation(target, source.read_bytes(), compression)
        root.mkdir(parents=True, exist_ok=True)
        return root

    return build
