"""The journal's bounds on a real coordinator (docs/api.md §8): every answer says the journal's extent (``first``,
``last``), pages stop at ``--journal-page-max-bytes``, retention (``--journal-retention-bytes``) drops the oldest
events and a reader that asks for them is told so, and a reader can follow the journal from its end."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support.api import Api
from support.coordinator import CoordinatorProcess

pytestmark = pytest.mark.timeout(60)

PAGE_MAX_BYTES = 2_000
RETENTION_BYTES = 8_000


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    with CoordinatorProcess(
        tmp_path / "data",
        "--journal-page-max-bytes",
        str(PAGE_MAX_BYTES),
        "--journal-retention-bytes",
        str(RETENTION_BYTES),
    ) as coordinator:
        async with aiohttp.ClientSession() as session:
            yield Api(session, coordinator.url)


async def journal_events(api: Api, n: int, start: int = 0) -> None:
    """``n`` events: each simple commit creates a group (``group_created``)."""
    for k in range(start, start + n):
        body = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": k}]}]}
        status, answer = await api.post(api.group_path(f"group-{k:04d}", "/offsets"), body)
        assert (status, answer["error"]) == (200, "NONE")


async def page(api: Api, query: str) -> dict[str, Any]:
    status, answer = await api.get(f"/v1/journal?{query}")
    assert status == 200, answer
    return answer


async def test_every_answer_carries_the_journals_first_and_last_seq(api: Api) -> None:
    assert await page(api, "after=0") == {"events": [], "next": 0, "first": 1, "last": 0}
    await journal_events(api, 3)

    answer = await page(api, "after=1&limit=1")
    assert [e["seq"] for e in answer["events"]] == [2]
    assert (answer["next"], answer["first"], answer["last"]) == (2, 1, 3)
    assert await page(api, "limit=0") == {"events": [], "next": 0, "first": 1, "last": 3}  # the end, cheaply


async def test_a_page_stops_at_its_byte_bound_and_next_pages_through_without_gaps(api: Api) -> None:
    await journal_events(api, 40)
    last = (await page(api, "limit=0"))["last"]
    first = (await page(api, "limit=0"))["first"]

    seqs: list[int] = []
    after = first - 1
    while True:
        status, raw = await raw_page(api, f"after={after}&limit=10000")
        assert status == 200
        answer = json.loads(raw)
        if not answer["events"]:
            break
        assert len(answer["events"]) < 40  # the byte bound, not the limit, ended the page
        assert sum(len(json.dumps(e, separators=(",", ":"))) + 1 for e in answer["events"]) <= PAGE_MAX_BYTES
        seqs += [e["seq"] for e in answer["events"]]
        assert answer["next"] == seqs[-1]
        after = answer["next"]
    assert seqs == list(range(first, last + 1))


async def raw_page(api: Api, query: str) -> tuple[int, bytes]:
    async with api.session.get(api.url(f"/v1/journal?{query}")) as resp:
        return resp.status, await resp.read()


async def test_a_reader_behind_retention_is_told_what_it_missed_and_gets_the_oldest_kept_events(api: Api) -> None:
    await journal_events(api, 200)

    answer = await page(api, "after=0")
    first, last = answer["first"], answer["last"]
    assert first > 1  # retention dropped the oldest events ...
    assert answer["events"][0]["seq"] == first  # ... and the page starts at the oldest one kept
    assert last == 200
    # What the journal keeps stays within its bound (each event is one line of the segments).
    kept: list[dict[str, Any]] = []
    after = 0
    while events := (await page(api, f"after={after}"))["events"]:
        kept += events
        after = events[-1]["seq"]
    assert [e["seq"] for e in kept] == list(range(first, last + 1))
    assert sum(len(json.dumps(e, separators=(",", ":"))) + 1 for e in kept) <= RETENTION_BYTES


async def test_a_reader_can_follow_the_journal_from_its_end(api: Api) -> None:
    await journal_events(api, 5)
    last = (await page(api, "limit=0"))["last"]

    follow = asyncio.ensure_future(page(api, f"after={last}&wait_ms=30000"))
    await api.until_journal_poll_parked()
    await journal_events(api, 1, start=100)
    answer = await follow

    assert [(e["seq"], e["group_id"]) for e in answer["events"]] == [(last + 1, "group-0100")]
    assert answer["last"] == answer["next"] == last + 1
