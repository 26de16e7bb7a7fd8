"""The journal long-poll (docs/api.md §8) on a real coordinator process with the manual clock.

``GET /v1/journal?after=SEQ&wait_ms=W``: with nothing after SEQ it waits for the next durable event, or for W ms of
the coordinator's clock, or for the shutdown; otherwise it answers at once, like any page.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support.api import Api
from support.coordinator import CoordinatorProcess

pytestmark = pytest.mark.timeout(60)


async def waiting_polls(api: Api) -> int:
    async with api.session.get(api.url("/metrics")) as resp:
        for line in (await resp.text()).splitlines():
            if line.startswith("berth_parked_journal_polls "):
                return int(float(line.split()[1]))
    return 0


async def poll(api: Api, after: int, wait_ms: int) -> asyncio.Task[tuple[int, dict[str, Any]]]:
    """Start a long-poll and return once the coordinator holds it."""
    before = await waiting_polls(api)
    task = asyncio.ensure_future(api.get(f"/v1/journal?after={after}&wait_ms={wait_ms}"))
    for _ in range(2_000):
        if await waiting_polls(api) > before or task.done():
            return task
        await asyncio.sleep(0.005)
    raise AssertionError("the journal poll never parked")


async def last_seq(api: Api) -> int:
    status, page = await api.get("/v1/journal?after=0&limit=10000")
    assert status == 200
    return int(page["next"])


async def test_a_poll_is_answered_as_soon_as_an_event_is_durable(api: Api) -> None:
    seq = await last_seq(api)
    waiting = await poll(api, seq, 30_000)
    assert not waiting.done()

    status, answer = await api.request(
        "PUT", api.group_path("orders", "/expected-members"), {"group_instance_ids": ["o-0"]}
    )
    assert status == 200 and answer["error"] == "NONE"

    status, page = await asyncio.wait_for(waiting, 10)  # the clock did not move: the event woke it
    assert status == 200
    assert [e["type"] for e in page["events"]] == ["group_created", "expected_members_changed"]
    assert page["next"] == page["events"][-1]["seq"] == seq + 2


async def test_a_poll_with_nothing_to_read_ends_when_the_clock_passes_its_wait(api: Api) -> None:
    seq = await last_seq(api)
    waiting = await poll(api, seq, 5_000)
    await api.advance(4_999)
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await api.advance(1)
    status, page = await asyncio.wait_for(waiting, 10)
    assert (status, page) == (200, {"events": [], "next": seq, "first": seq + 1, "last": seq})


async def test_a_poll_with_events_after_it_is_answered_at_once(api: Api) -> None:
    await api.request("PUT", api.group_path("orders", "/expected-members"), {"group_instance_ids": ["o-0"]})
    status, page = await asyncio.wait_for(api.get("/v1/journal?after=0&wait_ms=30000"), 5)
    assert status == 200 and page["events"][0]["seq"] == 1


@pytest.mark.parametrize("query", ["wait_ms=30001", "wait_ms=-1", "wait_ms=soon"])
async def test_a_wait_beyond_the_maximum_is_refused(api: Api, query: str) -> None:
    status, body = await api.get(f"/v1/journal?{query}")
    assert (status, body["error"]) == (400, "INVALID_REQUEST") and "wait_ms" in body["message"]


async def test_shutdown_answers_the_waiting_polls(coordinator: CoordinatorProcess, api: Api) -> None:
    seq = await last_seq(api)
    waiting = await poll(api, seq, 30_000)
    assert coordinator.proc is not None
    coordinator.proc.send_signal(signal.SIGTERM)
    status, page = await asyncio.wait_for(waiting, 10)
    assert (status, page) == (200, {"events": [], "next": seq, "first": seq + 1, "last": seq})
    assert await asyncio.to_thread(coordinator.proc.wait, 20) == 0


async def test_a_journal_reader_cannot_take_the_operators_places(tmp_path: Path) -> None:
    """Issue 22, point 9: a ``journal:read`` token that parked a thousand polls used to fill every place, so that the
    operator's follower's poll came back at once, empty, again and again (a spin). Polls park per token now: the
    reader keeps its 16 places, its others are answered at once, and the admin's poll waits for the next event."""
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"name": "operator", "token": "operator-token-0123", "admin": True},
                    {"name": "analytics", "token": "analytics-token-0123", "scopes": ["journal:read"]},
                ]
            }
        )
    )
    args = ("--tokens-file", str(tokens), "--max-connections-per-client", "0")
    with CoordinatorProcess(tmp_path / "data", *args) as proc:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            reader = Api(session, proc.url, token="analytics-token-0123")
            operator = Api(session, proc.url, token="operator-token-0123")
            flood = [asyncio.ensure_future(reader.get("/v1/journal?after=0&wait_ms=30000")) for _ in range(1_016)]
            answered = 0
            for _ in range(2_000):
                answered = sum(task.done() for task in flood)
                if answered >= 1_000:
                    break
                await asyncio.sleep(0.01)
            assert answered == 1_000, "all but the reader's 16 places are answered at once"
            assert await waiting_polls(operator) == 16

            held = await poll(operator, 0, 30_000)
            await asyncio.sleep(0.2)
            assert not held.done(), "the operator's poll is held, not answered at once"
            await operator.request(
                "PUT", operator.group_path("orders", "/expected-members"), {"group_instance_ids": ["o-0"]}
            )
            status, page = await asyncio.wait_for(held, 10)
            assert status == 200 and [e["type"] for e in page["events"]][:1] == ["group_created"]
            for task in flood:
                task.cancel()
            await asyncio.gather(*flood, return_exceptions=True)
