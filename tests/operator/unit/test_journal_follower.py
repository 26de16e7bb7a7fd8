"""The journal follower: one long-poll per coordinator, from the journal's end, handing each page's groups on, and
backing off (without giving up) while the coordinator cannot be read."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest

from berth.operator.reconcile.journal_follower import END_PAGES, MIN_EMPTY_POLL_S, PAGE, WAIT_MS, JournalFollower


class Journal:
    """A scripted journal: pages to answer in order, then a stop."""

    def __init__(self, answers: list[tuple[int, set[str]] | Exception]) -> None:
        self.answers = deque(answers)
        self.asked: list[tuple[int, int, int]] = []

    async def journal_page(self, after: int, limit: int, wait_ms: int) -> tuple[int, set[str]]:
        self.asked.append((after, limit, wait_ms))
        if not self.answers:
            raise asyncio.CancelledError
        answer = self.answers.popleft()
        if isinstance(answer, Exception):
            raise answer
        return answer


async def follow(journal: Journal, poll_s: float = WAIT_MS / 1000) -> tuple[list[tuple[str, set[str]]], list[float]]:
    """Run the follower over ``journal``; each answer takes ``poll_s`` of its clock (a long-poll held its wait)."""
    changes: list[tuple[str, set[str]]] = []
    slept: list[float] = []
    now = [0.0]

    async def on_change(url: str, groups: set[str]) -> None:
        changes.append((url, groups))

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    def clock() -> float:
        now[0] += poll_s / 2  # read before and after each answer
        return now[0]

    with pytest.raises(asyncio.CancelledError):
        await JournalFollower("http://c:9094", journal, on_change, sleep=sleep, clock=clock).run()
    return changes, slept


async def test_it_starts_at_the_end_and_hands_each_pages_groups_on() -> None:
    journal = Journal(
        [
            (10_000, {"old"}),
            (12_345, {"old"}),
            (12_345, set()),
            (12_347, {"orders", "payments"}),
            (12_347, set()),
            (12_348, {"orders"}),
        ]
    )
    changes, _ = await follow(journal)
    # History (up to 12,345) is paged through once without a word; then long-polls from there.
    assert journal.asked[:3] == [(0, 10_000, 0), (10_000, 10_000, 0), (12_345, 10_000, 0)]
    assert journal.asked[3:6] == [(12_345, PAGE, WAIT_MS), (12_347, PAGE, WAIT_MS), (12_347, PAGE, WAIT_MS)]
    assert changes == [("http://c:9094", {"orders", "payments"}), ("http://c:9094", {"orders"})]


async def test_a_coordinator_that_cannot_be_read_is_retried_with_a_capped_backoff() -> None:
    down = ConnectionRefusedError("refused")
    journal = Journal([down, (5, set()), (5, set()), *[down] * 7, (9, {"orders"})])
    changes, slept = await follow(journal)
    assert slept == [1.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert changes == [("http://c:9094", {"orders"})]


AT_THE_END = [(7, set()), (7, set())]  # the journal's end, paged to without waiting


async def test_an_answer_naming_groups_without_moving_the_cursor_is_followed_by_a_pause_too() -> None:
    """Not only empty answers: any answer that came back at once and did not move the cursor (its groups still
    handed on) waits before the next poll."""
    journal = Journal([*AT_THE_END, (7, {"orders"}), (7, {"orders"}), (8, {"orders"})])
    changes, slept = await follow(journal, poll_s=0.0)
    assert slept == [MIN_EMPTY_POLL_S] * 2
    assert changes == [("http://c:9094", {"orders"})] * 3


async def test_a_cursor_that_goes_back_is_a_failure_then_the_end_is_found_again() -> None:
    journal = Journal([*AT_THE_END, (3, {"ghost"}), (2, set()), (2, set()), (4, {"orders"})])
    changes, slept = await follow(journal)
    assert slept == [1.0]  # backed off once
    assert journal.asked[3:5] == [(0, 10_000, 0), (2, 10_000, 0)]  # the new journal's end, then from there
    assert changes == [("http://c:9094", {"orders"})]  # nothing handed on from the rewound answer


async def test_finding_the_end_reads_a_bounded_number_of_pages() -> None:
    endless = Journal([(n, set()) for n in range(1, END_PAGES + 2)])
    with pytest.raises(asyncio.CancelledError):
        await JournalFollower("http://c:9094", endless, lambda url, groups: asyncio.sleep(0)).run()
    assert [after for after, limit, _ in endless.asked if limit == 10_000][-1] == END_PAGES - 1


async def test_empty_answers_that_come_back_at_once_cannot_make_it_spin() -> None:
    """Issue 22, point 9: a coordinator whose long-poll places were all taken (a journal:read token parked a thousand
    polls) answered the follower's poll at once, empty, and the follower polled again at once: a spin. An empty
    answer sooner than MIN_EMPTY_POLL_S is now followed by a pause; one that was held is not."""
    at_the_end = [(7, set()), (7, set())]  # the journal's end, paged to without waiting
    journal = Journal([*at_the_end, *[(7, set())] * 5, (8, {"orders"})])
    changes, slept = await follow(journal, poll_s=0.0)
    assert slept == [MIN_EMPTY_POLL_S] * 5
    assert changes == [("http://c:9094", {"orders"})]
    held = Journal([*at_the_end, *[(7, set())] * 5, (8, {"orders"})])
    _, slept = await follow(held)
    assert slept == []


async def test_once_it_found_the_end_every_fleet_on_the_coordinator_is_passed_again() -> None:
    """Issue 28's campaign: a new leader's pass sent a batch leave, the group's rebalance completed, and only then did
    the follower its pass started find the journal's end: nothing it read named the group again, and the fleet's
    status said the group was rebalancing until the slow resync. The follower now asks for a pass of every fleet on
    the coordinator once it follows (and again after the coordinator's journal went back)."""
    following: list[str] = []
    journal = Journal([*AT_THE_END, (9, {"orders"}), (3, set()), (3, set()), (3, set()), (4, set())])
    with pytest.raises(asyncio.CancelledError):
        await JournalFollower(
            "http://c:9094", journal, lambda url, groups: asyncio.sleep(0), sleep=lambda s: asyncio.sleep(0),
            on_following=following.append,
        ).run()  # fmt: skip
    assert following == ["http://c:9094", "http://c:9094"]  # at the start, and after the rewind to 3
