"""Whether a tier that needs something this machine may lack runs: without it, a test skips with one line saying
how to get it; with ``CI=true`` that skip is a failure instead, so CI always exercises every tier (a skipped test
hides that it never ran). Every skip in the test tree goes through :func:`unavailable` (tests/test_layout.py)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(message: str) -> NoReturn:
    """Skip, or fail under CI, where a skipped test would hide that it never ran."""
    if in_ci():
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)
