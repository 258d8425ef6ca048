"""Helpers for tests that need a PostgreSQL server: the DSN from the environment, throwaway schemas.

Tests read the server from ``DSH_TEST_POSTGRES_DSN`` (e.g.
``postgresql://postgres@127.0.0.1:5432/test``) and skip when it is unset. Each test
works in its own schema (``?schema=…`` on the store URL), so runs in parallel or
after a crash never see each other's sessions; :func:`drop_schema` removes it.
"""

from __future__ import annotations

import os
import uuid

__all__ = ["DSN_ENV", "SKIP_REASON", "drop_schema", "scratch_schema", "store_url", "test_dsn"]

DSN_ENV = "DSH_TEST_POSTGRES_DSN"
SKIP_REASON = (
    f"{DSN_ENV} is not set: PostgreSQL tests skipped "
    f"(set it, e.g. {DSN_ENV}=postgresql://postgres@127.0.0.1:5432/test, to run them)"
)


def test_dsn() -> str | None:
    """The test server's DSN, or None when PostgreSQL tests should skip."""
    return os.environ.get(DSN_ENV) or None


test_dsn.__test__ = False  # type: ignore[attr-defined]  # not a pytest test, despite the name


def scratch_schema(prefix: str = "dshpy_test") -> str:
    """A fresh schema name nobody else uses."""
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:10]}"


def store_url(dsn: str, schema: str) -> str:
    """The store URL of ``schema`` on the server ``dsn`` (which must not carry a query already)."""
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


def drop_schema(dsn: str, schema: str) -> None:
    """Drop ``schema`` and everything in it (no error if it does not exist)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
