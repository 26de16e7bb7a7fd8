"""Builders for the records and writes the store tests persist, and readers for what ended up on disk.

Shared by the tests and by ``crash_writer.py`` (the child process of the crash test), so both sides agree on
what a write with a given token contains.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from berth.coordinator.core import (
    ExpectedMembersRecord,
    GroupMetadata,
    GroupRecord,
    MemberMetadata,
    OffsetAndMetadata,
    OffsetRecord,
    Record,
    Write,
)
from berth.coordinator.store import SqliteStore
from berth.coordinator.store.segments import segment_paths


def member(group_id: str, i: int) -> MemberMetadata:
    return MemberMetadata(
        member_id=f"{group_id}-{i}-uuid",
        group_instance_id=f"{group_id}-{i}",
        client_id="consumer",
        client_host="10.0.0.1",
        rebalance_timeout_ms=300_000,
        session_timeout_ms=45_000,
        subscription=b'{"topics":["orders"]}',
        assignment=b'{"partitions":{}}',
    )


def group_snapshot(group_id: str, *, generation: int = 1, members: int = 3) -> GroupRecord:
    """A whole-group record shaped like the core's ``new_group_record`` (members in member id order)."""
    return GroupRecord(
        group_id,
        GroupMetadata(
            protocol_type="consumer",
            generation=generation,
            protocol="range",
            leader=f"{group_id}-0-uuid" if members else None,
            current_state_timestamp=1_700_000_000_000,
        ),
        tuple(sorted((member(group_id, i) for i in range(members)), key=lambda m: m.member_id)),
    )


def offset(group_id: str, topic: str, partition: int, committed: int, metadata: str = "") -> OffsetRecord:
    return OffsetRecord(group_id, topic, partition, OffsetAndMetadata(committed, metadata, 7, 1_700_000_000_000))


def expected_members(group_id: str, *ids: str) -> ExpectedMembersRecord:
    return ExpectedMembersRecord(group_id, ids)


def event(group_id: str, event_type: str, **fields: Any) -> dict[str, Any]:
    return {"ts_ms": 1_700_000_000_000, "group_id": group_id, "type": event_type, **fields}


def write(token: int, *records: Record, events: list[dict[str, Any]] | None = None) -> Write:
    return Write(token, list(records), events or [])


def crash_test_write(token: int) -> Write:
    """What the crash child submits for ``token``: its own group, three offsets, a shared group, two events."""
    own = f"group-{token}"
    return write(
        token,
        group_snapshot(own, generation=token),
        group_snapshot("shared", generation=token),
        *(offset(own, "orders", partition, committed=token * 10 + partition) for partition in range(3)),
        events=[event(own, "member_joined", token=token), event(own, "rebalance_started", token=token)],
    )


def loaded(store: SqliteStore) -> list[Record]:
    return list(store.load())


def whole_journal(store: SqliteStore) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while page := store.journal_page(after=events[-1]["seq"] if events else 0, limit=100):
        events.extend(page)
    return events


def segment_events(data_dir: Path) -> list[dict[str, Any]]:
    """Every event in the segment files, in file order; fails on a torn or unparsable line."""
    events: list[dict[str, Any]] = []
    for path in segment_paths(data_dir / "journal"):
        text = path.read_text()
        assert not text or text.endswith("\n"), f"{path.name} ends with a torn line"
        events.extend(json.loads(line) for line in text.splitlines())
    return events


def segment_line_counts(data_dir: Path) -> dict[str, int]:
    return {path.name: len(path.read_text().splitlines()) for path in segment_paths(data_dir / "journal")}


class Reports:
    """The ``on_done`` callback of a writer: keeps each transaction's report, in order (called on its thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.transactions: list[list[tuple[int, bool]]] = []

    def __call__(self, outcomes: list[tuple[int, bool]]) -> None:
        with self._lock:
            self.transactions.append(list(outcomes))

    @property
    def outcomes(self) -> list[tuple[int, bool]]:
        with self._lock:
            return [outcome for transaction in self.transactions for outcome in transaction]
