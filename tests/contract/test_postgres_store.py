"""The backend contract on PostgreSQL (each test in its own schema; skipped without DSH_TEST_POSTGRES_DSN)."""

import pytest

import dshpy
from dshpy.testing.contract import StoreContract


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, postgres_url):
        store = dshpy.open_store(postgres_url)
        self._opened = [store]
        yield store
        for opened in self._opened:
            opened.close()

    def reopen(self, store):
        again = dshpy.open_store(store.url)
        self._opened.append(again)
        return again
