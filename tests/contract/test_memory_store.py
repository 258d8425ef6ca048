import pytest

import dshpy
from dshpy.testing.contract import StoreContract


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def store(self):
        return dshpy.open_store("memory:")
