import pytest

import dshpy
from dshpy.testing.contract import StoreContract


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store(self, tmp_path):
        store = dshpy.open_store(f"sqlite:///{tmp_path}/sessions.db")
        self._opened = [store]
        yield store
        for opened in self._opened:
            opened.close()

    def reopen(self, store):
        again = dshpy.open_store(store.url)
        self._opened.append(again)
        return again
