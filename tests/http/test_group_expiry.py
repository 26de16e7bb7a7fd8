"""Groups that expire and a cap on how many exist (docs/api.md §6, §11), on a real coordinator with the manual
clock: an empty group is deleted at the next check, committed offsets a retention after the group emptied, and a
group beyond ``--max-groups`` is refused in-band until expiry makes room; a restart brings nothing back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from support.api import Api
from support.coordinator import CoordinatorProcess

pytestmark = pytest.mark.timeout(60)

CHECK_MS = 600_000
RETENTION_MS = 7 * 86_400_000


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[CoordinatorProcess]:
    with CoordinatorProcess(tmp_path / "data", "--max-groups", "2") as coordinator:
        yield coordinator


@pytest.fixture
async def api(capped: CoordinatorProcess) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(session, capped.url)


async def simple_commit(api: Api, group: str, offset: int = 1) -> dict:
    body = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset}]}]}
    status, answer = await api.post(api.group_path(group, "/offsets"), body)
    assert status == 200
    return answer


async def group_ids(api: Api) -> list[str]:
    _, listed = await api.get("/v1/groups")
    return [g["group_id"] for g in listed["groups"]]


async def test_groups_beyond_the_cap_are_refused_until_an_empty_one_expires(api: Api) -> None:
    joined = await api.form_static_group("passing", ["p-0"])
    await api.leave("passing", [(joined["p-0"]["member_id"], "p-0")])  # Empty, no offsets
    await simple_commit(api, "staying")  # its offsets keep it for a retention

    refused = await api.join("third", instance_id="t-0")
    assert (refused["error_code"], refused["error"]) == (15, "COORDINATOR_NOT_AVAILABLE")
    assert (await simple_commit(api, "third"))["error_code"] == 15
    assert sorted(await group_ids(api)) == ["passing", "staying"]

    await api.advance(CHECK_MS)

    assert await group_ids(api) == ["staying"]
    deleted = [e for e in await api.whole_journal() if e["type"] == "group_deleted"]
    assert [(e["group_id"], e["via"]) for e in deleted] == [("passing", "expired")]
    assert (await simple_commit(api, "third"))["error"] == "NONE"


async def test_offsets_expire_a_retention_after_the_group_emptied_and_stay_expired_after_a_restart(
    capped: CoordinatorProcess, api: Api
) -> None:
    await simple_commit(api, "orders", offset=42)
    await api.advance(RETENTION_MS - CHECK_MS)
    _, fetched = await api.get(api.group_path("orders", "/offsets"))
    assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 42

    await api.advance(CHECK_MS)

    _, fetched = await api.get(api.group_path("orders", "/offsets"))
    assert fetched["topics"] == []
    assert await group_ids(api) == []
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, capped.kill)
    await loop.run_in_executor(None, capped.start)
    api.base_url = capped.url
    assert await group_ids(api) == []
