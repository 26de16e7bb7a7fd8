"""Start-up that refuses to lose data (docs/api.md §10): a store that cannot be loaded, a database that lost its
history next to the journal segments, or damaged pages make ``berth-coordinator`` print one line on stderr and exit
2 — never "up but never ready", never a fresh store that cuts the segments to match."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from support.api import Api
from support.coordinator import CoordinatorProcess

pytestmark = pytest.mark.timeout(120)


def start(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run the command on ``data_dir``; one that would come up is killed after 20 s (and fails the test)."""
    return subprocess.run(
        [sys.executable, "-m", "berth.coordinator.command.main", "--data-dir", str(data_dir), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=20,
    )


def refused_with(data_dir: Path) -> str:
    result = start(data_dir)
    assert result.returncode == 2, result
    assert result.stdout == ""  # never announced itself as listening
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("berth-coordinator: error: ")
    return lines[0]


@pytest.fixture
def stopped_store(tmp_path: Path) -> Path:
    """A data dir with a Stable group, offsets and a journal, its coordinator stopped."""
    data_dir = tmp_path / "data"

    async def fill(url: str) -> None:
        async with aiohttp.ClientSession() as session:
            api = Api(session, url)
            await api.form_static_group("orders", ["orders-0", "orders-1"])

    with CoordinatorProcess(data_dir) as coordinator:
        asyncio.run(fill(coordinator.url))
    return data_dir


@pytest.mark.parametrize(
    ("statement", "complaint"),
    [
        ("UPDATE groups SET record = '{not json'", "group 'orders': JSON is malformed"),
        ("UPDATE groups SET record = '{\"version\": [2]}'", "group 'orders': Expected `int`, got `array`"),
        ("UPDATE groups SET record = '{\"version\": -1}'", "group 'orders': Expected `int` >= 1"),
        ("UPDATE group_members SET record = '{\"member_id\": null}'", "Expected `str`, got `null`"),
        (
            "UPDATE groups SET record = json_set(record, '$.leader', 'nobody')",
            "group 'orders': its leader 'nobody' is not one of its members",
        ),
    ],
)
def test_a_record_that_cannot_be_loaded_is_one_line_and_exit_2(
    stopped_store: Path, statement: str, complaint: str
) -> None:
    with sqlite3.connect(stopped_store / "berth.db") as conn:
        conn.execute(statement)

    line = refused_with(stopped_store)

    assert str(stopped_store / "berth.db") in line
    assert complaint in line


def test_damaged_pages_are_refused_by_the_integrity_check(stopped_store: Path) -> None:
    db = stopped_store / "berth.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the file itself, none newer in the WAL
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'group_members'").fetchone()[0]
    conn.close()
    with db.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(os.urandom(page_size))

    assert f"database {db} failed its integrity check" in refused_with(stopped_store)


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_a_lost_database_next_to_journal_segments_is_refused_and_the_segments_kept(
    stopped_store: Path, how: str
) -> None:
    segments = {p.name: p.read_bytes() for p in (stopped_store / "journal").iterdir()}
    assert segments
    if how == "deleted":
        (stopped_store / "berth.db").unlink()
    else:
        (stopped_store / "berth.db").write_bytes(b"")

    line = refused_with(stopped_store)

    assert "but the journal segments" in line
    assert "refusing to start" in line
    assert {p.name: p.read_bytes() for p in (stopped_store / "journal").iterdir()} == segments
