import pytest

import dshpy
from dshpy.testing.contract import StoreContract


class TestJsonlStore(StoreContract):
    @pytest.fixture(params=["none", "zstd"])
    def store(self, request, tmp_path):
        return dshpy.open_store(f"jsonl:///{tmp_path}/sessions?compression={request.param}")

    def reopen(self, store):
        return dshpy.open_store(store.url)
