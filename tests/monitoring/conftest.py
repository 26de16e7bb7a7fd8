"""Fixtures for tests/monitoring: promtool (Debian's prometheus package, installed by `make install` through
scripts/ensure-promtool.sh). Without it the tests that need it skip with one line, except under CI=true, where a
missing promtool fails them: CI must check the rules."""

from __future__ import annotations

import shutil

import pytest
from support.ci import unavailable


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        unavailable("promtool is not installed: run `make promtool` (scripts/ensure-promtool.sh)")
    return path
