"""kill -9 at a random moment loses nothing that was acknowledged, and the segments heal to match the journal.

A child process (``crash_writer.py``) submits writes in a loop and prints each token once the store reports
it durable. The parent reads a random number of acknowledgements, SIGKILLs the child while it is still
writing, reopens the store and checks every acknowledged write: its group record, its offsets, its two
journal events. Five crashes hit the same data dir, so recovery also runs on top of earlier recoveries.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from store_test_data import crash_test_write, segment_events, whole_journal

from berth.coordinator.core import GroupRecord, OffsetRecord
from berth.coordinator.store import SqliteStore

CHILD = Path(__file__).with_name("crash_writer.py")
SEGMENT_MAX_EVENTS = 40  # small, so crashes also land around rotations
TOKENS_PER_ROUND = 1_000_000  # each child starts a fresh token range: a token is never written twice


def run_child_until_killed(data_dir: Path, first_token: int, acks_before_kill: int) -> list[int]:
    """Start a writer child, SIGKILL it after ``acks_before_kill`` acks; every token it acknowledged."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(data_dir), str(first_token), str(SEGMENT_MAX_EVENTS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        acked: list[int] = []
        while len(acked) < acks_before_kill:
            line = child.stdout.readline()
            assert line, f"the writer child died on its own (exit {child.wait()})"
            acked.append(int(line))
    finally:
        child.send_signal(signal.SIGKILL)
        rest, _ = child.communicate()
    # Acks printed before the kill landed count too; a line cut by the kill is not an ack.
    acked += [int(line) for line in rest.splitlines(keepends=True) if line.endswith("\n")]
    assert child.returncode == -signal.SIGKILL
    return acked


def assert_acknowledged_writes_survived(data_dir: Path, acknowledged: list[int]) -> None:
    with SqliteStore(data_dir, segment_max_events=SEGMENT_MAX_EVENTS) as store:
        records = list(store.load())
        journal = whole_journal(store)
        segments = segment_events(data_dir)
    groups = {r.group_id: r for r in records if isinstance(r, GroupRecord)}
    offsets = {(r.group_id, r.topic, r.partition): r.value for r in records if isinstance(r, OffsetRecord)}
    seqs_by_token: defaultdict[int, list[int]] = defaultdict(list)
    for e in journal:
        seqs_by_token[e["token"]].append(e["seq"])

    for token in acknowledged:
        expected = crash_test_write(token)
        own, _shared, *own_offsets = expected.records
        assert isinstance(own, GroupRecord)
        assert groups.get(own.group_id) == own, f"acknowledged write {token}: group record lost"
        for record in own_offsets:
            assert isinstance(record, OffsetRecord)
            key = (record.group_id, record.topic, record.partition)
            assert offsets.get(key) == record.value, f"acknowledged write {token}: offset {key} lost"
        seqs = seqs_by_token[token]
        assert len(seqs) == 2, f"acknowledged write {token}: journal events lost"
        assert seqs[1] == seqs[0] + 1, f"acknowledged write {token}: journal events not adjacent"
    shared = groups["shared"].value
    assert shared is not None
    assert shared.generation >= max(acknowledged), "the shared group lost an acknowledged snapshot"
    assert [e["seq"] for e in journal] == list(range(1, len(journal) + 1))
    assert segments == journal


def test_every_acknowledged_write_survives_kill_9_and_segments_match_the_journal(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    rng = random.Random()
    acknowledged: list[int] = []
    for crash in range(5):
        acknowledged += run_child_until_killed(
            data_dir, first_token=crash * TOKENS_PER_ROUND + 1, acks_before_kill=rng.randint(20, 80)
        )
        assert_acknowledged_writes_survived(data_dir, acknowledged)
