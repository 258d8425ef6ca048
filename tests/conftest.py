"""Fixtures shared by every test directory: a throwaway PostgreSQL schema per test (or a visible skip)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
