"""What the tests that drive ``dshpy-runtime`` through dsh's official SDK share."""

from __future__ import annotations

import os
import shutil
import sys

import pytest


def dshpy_runtime() -> str:
    """The ``dshpy-runtime`` executable (on PATH or beside this Python), or skip the test."""
    found = shutil.which("dshpy-runtime") or shutil.which("dshpy-runtime", path=os.path.dirname(sys.executable))
    if found is None:
        pytest.skip("dshpy-runtime is not installed (pip install -e .)")
    return found
