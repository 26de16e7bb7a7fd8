"""Group commit: shared transactions, seq numbering, rollback on a failing disk, per-write rejection."""

from __future__ import annotations

import threading

import pytest
from store_test_data import Reports, event, group_snapshot, loaded, offset, whole_journal, write

from berth.coordinator.core import GroupRecord, Write
from berth.coordinator.store import GroupCommitWriter, SqliteStore, StoreError


def events_of(*groups: str) -> list[dict[str, object]]:
    return [event(group_id, "member_joined") for group_id in groups]


def test_writes_submitted_while_the_disk_stalls_share_one_transaction(
    writer: GroupCommitWriter, reports: Reports
) -> None:
    writer.faults.set_stalled(True)
    for token in range(1, 6):
        writer.submit(write(token, group_snapshot(f"g{token}")))
    writer.faults.set_stalled(False)
    writer.flush()

    assert reports.transactions == [[(1, True), (2, True), (3, True), (4, True), (5, True)]]


def test_a_transaction_takes_at_most_max_batch_writes(store: SqliteStore, reports: Reports) -> None:
    with GroupCommitWriter(store, reports, max_batch_writes=2) as writer:
        writer.faults.set_stalled(True)
        for token in range(1, 6):
            writer.submit(write(token, group_snapshot(f"g{token}")))
        writer.faults.set_stalled(False)

    assert [[token for token, _ in t] for t in reports.transactions] == [[1, 2], [3, 4], [5]]


def test_journal_seq_numbers_are_contiguous_in_submission_order(
    store: SqliteStore, writer: GroupCommitWriter, reports: Reports
) -> None:
    submitters = [
        threading.Thread(target=lambda n=n: writer.submit(write(n, events=events_of(f"a{n}", f"b{n}"))))
        for n in range(1, 21)
    ]
    for thread in submitters:
        thread.start()
    for thread in submitters:
        thread.join()
    writer.flush()

    journal = whole_journal(store)
    reported_order = [token for token, _ in reports.outcomes]
    assert [e["seq"] for e in journal] == list(range(1, 41))
    assert [e["group_id"] for e in journal] == [f"{p}{n}" for n in reported_order for p in "ab"]
    assert store.last_seq() == 40


def test_a_failed_transaction_is_rolled_back_and_its_seq_numbers_are_reused(
    store: SqliteStore, writer: GroupCommitWriter, reports: Reports
) -> None:
    writer.submit(write(1, group_snapshot("orders", generation=1), events=events_of("first")))
    writer.flush()
    writer.faults.fail_next(1)
    writer.submit(write(2, group_snapshot("orders", generation=2), offset("orders", "t", 0, 5), events=events_of("x")))
    writer.flush()
    writer.submit(write(3, events=events_of("second")))
    writer.flush()

    assert reports.outcomes == [(1, True), (2, False), (3, True)]
    assert loaded(store) == [group_snapshot("orders", generation=1)]
    assert [(e["seq"], e["group_id"]) for e in whole_journal(store)] == [(1, "first"), (2, "second")]
    assert writer.faults.injected == 1


def test_a_failing_disk_fails_every_write_until_it_recovers(
    store: SqliteStore, writer: GroupCommitWriter, reports: Reports
) -> None:
    writer.faults.set_failing(True)
    for token in (1, 2, 3):
        writer.submit(write(token, group_snapshot(f"g{token}"), events=events_of(f"g{token}")))
        writer.flush()
    writer.faults.set_failing(False)
    writer.submit(write(4, group_snapshot("g4"), events=events_of("g4")))
    writer.flush()

    assert reports.outcomes == [(1, False), (2, False), (3, False), (4, True)]
    assert loaded(store) == [group_snapshot("g4")]
    assert [(e["seq"], e["group_id"]) for e in whole_journal(store)] == [(1, "g4")]


def test_the_writer_is_unhealthy_from_a_failed_transaction_until_a_write_or_a_probe_commits(
    store: SqliteStore, writer: GroupCommitWriter, reports: Reports
) -> None:
    writer.faults.set_failing(True)
    writer.submit(write(1, group_snapshot("g1")))
    writer.flush()
    assert not writer.healthy

    writer.probe()
    writer.flush()
    assert not writer.healthy  # the probe's own transaction failed too

    writer.faults.set_failing(False)
    writer.probe()
    writer.flush()
    assert writer.healthy
    assert reports.outcomes == [(1, False)]  # a probe is nobody's write
    assert loaded(store) == []


def test_a_write_whose_content_cannot_be_stored_fails_alone(
    store: SqliteStore, writer: GroupCommitWriter, reports: Reports
) -> None:
    writer.faults.set_stalled(True)
    writer.submit(write(1, group_snapshot("a"), events=events_of("a")))
    writer.submit(write(2, offset("b", "bad-\ud800-topic", 0, 1), events=events_of("b")))  # lone surrogate
    writer.submit(write(3, offset("c", "t", 0, 2**63)))  # beyond SQLite's 64-bit integers
    writer.submit(write(4, group_snapshot("d"), events=[{"type": "x", "value": object()}]))  # not JSON
    writer.submit(write(5, group_snapshot("e"), events=events_of("e")))
    writer.faults.set_stalled(False)
    writer.flush()

    assert reports.transactions == [[(1, True), (2, False), (3, False), (4, False), (5, True)]]
    assert loaded(store) == [group_snapshot("a"), group_snapshot("e")]
    assert [(e["seq"], e["group_id"]) for e in whole_journal(store)] == [(1, "a"), (2, "e")]


def test_a_stray_seq_in_an_event_is_replaced_by_the_stores(store: SqliteStore, writer: GroupCommitWriter) -> None:
    writer.submit(write(1, events=[{"seq": 99, **event("g", "group_created")}]))
    writer.flush()

    assert whole_journal(store) == [{"seq": 1, **event("g", "group_created")}]


def test_on_done_that_raises_does_not_stop_the_writer(store: SqliteStore) -> None:
    seen: list[list[tuple[int, bool]]] = []

    def on_done(outcomes: list[tuple[int, bool]]) -> None:
        seen.append(outcomes)
        raise RuntimeError("the adapter's bug")

    with GroupCommitWriter(store, on_done) as writer:
        writer.submit(write(1, GroupRecord("g", None)))
        writer.flush()
        writer.submit(write(2, GroupRecord("g", None)))

    assert seen == [[(1, True)], [(2, True)]]


def test_close_finishes_every_submitted_write_and_refuses_new_ones(store: SqliteStore, reports: Reports) -> None:
    writer = GroupCommitWriter(store, reports)
    writer.faults.set_stalled(True)
    writes: list[Write] = [write(token, events=events_of("g")) for token in range(1, 4)]
    for w in writes:
        writer.submit(w)
    writer.faults.set_stalled(False)
    writer.close()

    assert reports.outcomes == [(1, True), (2, True), (3, True)]
    with pytest.raises(StoreError, match="closed"):
        writer.submit(write(4))
