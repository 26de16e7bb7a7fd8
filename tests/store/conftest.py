"""Fixtures for the store tests: a data dir in tmp_path, an open store, and a writer whose reports are kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from store_test_data import Reports

from berth.coordinator.store import GroupCommitWriter, SqliteStore


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path) -> Iterator[SqliteStore]:
    opened = SqliteStore(data_dir, segment_max_events=3)
    yield opened
    opened.close()


@pytest.fixture
def reports() -> Reports:
    return Reports()


@pytest.fixture
def writer(store: SqliteStore, reports: Reports) -> Iterator[GroupCommitWriter]:
    started = GroupCommitWriter(store, reports)
    yield started
    started.close()
