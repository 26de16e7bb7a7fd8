"""A thin async HTTP client for end-to-end tests that speaks the coordinator's JSON contract.

Methods return ``(status, body)``. Long-polls are awaited like anything else; start them as tasks
(``asyncio.create_task(api.join(...))``) to keep them parked while the test does something else.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

Body = dict[str, Any]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class Api:
    def __init__(self, session: aiohttp.ClientSession, base_url: str, token: str | None = None) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.token = token

    def url(self, path: str) -> URL:
        return URL(self.base_url + path, encoded=True)

    def group_path(self, group_id: str, suffix: str = "") -> str:
        return f"/v1/groups/{quote(group_id, safe='')}{suffix}"

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        headers.update(extra or {})
        return headers

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Body]:
        data = raw
        hdrs = self._headers(headers)
        if body is not None:
            import json

            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        async with self.session.request(method, self.url(path), data=data, headers=hdrs) as resp:
            payload = await resp.json(content_type=None) if resp.content_length != 0 else {}
            return resp.status, payload

    async def post(self, path: str, body: Any) -> tuple[int, Body]:
        return await self.request("POST", path, body)

    async def get(self, path: str) -> tuple[int, Body]:
        return await self.request("GET", path)

    async def put(self, path: str, body: Any) -> tuple[int, Body]:
        return await self.request("PUT", path, body)

    async def get_body(self, path: str) -> Body:
        """A GET that must be answered 200: its body."""
        status, body = await self.get(path)
        assert status == 200, (path, status, body)
        return body

    # ------------------------------------------------------------------------------- protocol helpers

    async def join(
        self,
        group: str,
        member_id: str = "",
        instance_id: str | None = None,
        *,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 30_000,
        protocols: list[tuple[str, bytes]] | None = None,
        api_version: int = 9,
        **extra: Any,
    ) -> Body:
        body: Body = {
            "api_version": api_version,
            "member_id": member_id,
            "session_timeout_ms": session_timeout_ms,
            "protocol_type": "consumer",
            "protocols": [{"name": n, "metadata": b64(m)} for n, m in (protocols or [("range", b"sub")])],
            **extra,
        }
        if api_version >= 1:
            body["rebalance_timeout_ms"] = rebalance_timeout_ms
        if instance_id is not None:
            body["group_instance_id"] = instance_id
        status, resp = await self.post(self.group_path(group, "/join"), body)
        assert status == 200, resp
        return resp

    async def sync(
        self,
        group: str,
        member_id: str,
        generation_id: int,
        instance_id: str | None = None,
        assignments: dict[str, bytes] | None = None,
        api_version: int = 5,
    ) -> Body:
        body: Body = {
            "api_version": api_version,
            "member_id": member_id,
            "generation_id": generation_id,
            "assignments": [{"member_id": m, "assignment": b64(a)} for m, a in (assignments or {}).items()],
        }
        if api_version >= 5:
            body.update(protocol_type="consumer", protocol_name="range")
        if instance_id is not None:
            body["group_instance_id"] = instance_id
        status, resp = await self.post(self.group_path(group, "/sync"), body)
        assert status == 200, resp
        return resp

    async def heartbeat(self, group: str, member_id: str, generation_id: int, instance_id: str | None = None) -> Body:
        body: Body = {"member_id": member_id, "generation_id": generation_id}
        if instance_id is not None:
            body["group_instance_id"] = instance_id
        status, resp = await self.post(self.group_path(group, "/heartbeat"), body)
        assert status == 200, resp
        return resp

    async def leave(self, group: str, members: list[tuple[str, str | None]]) -> Body:
        body = {"members": [{"member_id": m, "group_instance_id": i} for m, i in members]}
        status, resp = await self.post(self.group_path(group, "/leave"), body)
        assert status == 200, resp
        return resp

    async def describe(self, group: str) -> Body:
        status, resp = await self.get(self.group_path(group))
        assert status == 200, resp
        return resp

    async def advance(self, ms: int) -> int:
        status, resp = await self.post("/v1/debug/clock", {"advance_ms": ms})
        assert status == 200, resp
        return int(resp["now_ms"])

    async def parked(self) -> int:
        """How many requests the coordinator holds parked (joins and syncs waiting for an answer)."""
        async with self.session.get(self.url("/metrics")) as resp:
            for line in (await resp.text()).splitlines():
                if line.startswith("berth_parked_requests "):
                    return int(float(line.split()[1]))
        return 0

    async def journal_polls_parked(self) -> int:
        """How many journal long-polls the coordinator holds."""
        async with self.session.get(self.url("/metrics")) as resp:
            for line in (await resp.text()).splitlines():
                if line.startswith("berth_parked_journal_polls "):
                    return int(float(line.split()[1]))
        return 0

    async def until_journal_poll_parked(self, n: int = 1, timeout: float = 10.0) -> None:
        """Wait until at least ``n`` journal long-polls are parked at the coordinator."""
        deadline = asyncio.get_running_loop().time() + timeout
        while await self.journal_polls_parked() < n:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"fewer than {n} journal polls parked after {timeout} s")
            await asyncio.sleep(0.005)

    async def until_parked(self, n: int, timeout: float = 10.0) -> None:
        """Wait until at least ``n`` requests are parked: a long-poll has reached the coordinator."""
        deadline = asyncio.get_running_loop().time() + timeout
        while await self.parked() < n:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"fewer than {n} requests parked after {timeout} s")
            await asyncio.sleep(0.005)

    async def park(self, coro: Any) -> asyncio.Task[Any]:
        """Start a long-poll and return once the coordinator holds it."""
        before = await self.parked()
        task = asyncio.ensure_future(coro)
        await self.until_parked(before + 1)
        return task

    async def form_static_group(
        self,
        group: str,
        instances: list[str],
        *,
        api_version: int = 9,
        assignment: Callable[[str], bytes] = lambda instance: instance.encode(),
    ) -> dict[str, Body]:
        """Join every instance, let the (manual-clock) initial delay run out, and sync with the leader's assignment
        (``assignment(instance)`` for each); returns each instance's join answer."""
        joins = [await self.park(self.join(group, instance_id=i, api_version=api_version)) for i in instances]
        while not all(task.done() for task in joins):
            await self.advance(3_000)
        joined = {i: task.result() for i, task in zip(instances, joins, strict=True)}
        leader = next(r for r in joined.values() if r["leader"] == r["member_id"])
        plan = {r["member_id"]: assignment(i) for i, r in joined.items()}
        synced = await asyncio.gather(
            *(
                self.sync(group, r["member_id"], r["generation_id"], i, plan if r is leader else None)
                for i, r in joined.items()
            )
        )
        assert all(s["error"] == "NONE" for s in synced), synced
        return joined

    async def journal(self, after: int = 0, limit: int = 10_000) -> list[Body]:
        status, resp = await self.get(f"/v1/journal?after={after}&limit={limit}")
        assert status == 200, resp
        return list(resp["events"])

    async def whole_journal(self) -> list[Body]:
        """Every event, page after page (one page holds at most 10,000)."""
        events: list[Body] = []
        while page := await self.journal(after=events[-1]["seq"] if events else 0):
            events += page
        return events
