"""A failing disk (injected under the store interface through ``/v1/debug/store``): the request whose write failed,
and every answer of its group that was waiting on that write, is COORDINATOR_NOT_AVAILABLE; the group is loaded
again from the store, which says what became durable (docs/api.md §10, §11). While it loads, its requests are
answered COORDINATOR_NOT_AVAILABLE too, and a client asks again; the coordinator carries on, and recovers with the
disk."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable

import pytest
from support.api import Api

pytestmark = pytest.mark.timeout(60)
GROUP = "orders"


async def served(ask: Callable[[], Awaitable[dict]]) -> dict:
    """Ask until the answer is not COORDINATOR_NOT_AVAILABLE (the group loading again), as a client retries."""
    for _ in range(200):
        answer = await ask()
        if answer.get("error_code") != 15:
            return answer
        await asyncio.sleep(0.02)
    raise AssertionError(f"still not available: {answer}")


async def fail_disk(api: Api, failing: bool) -> None:
    status, body = await api.post("/v1/debug/store", {"failing": failing})
    assert status == 200, body


async def form(api: Api, instances: list[str]) -> dict[str, dict]:
    return await api.form_static_group(GROUP, instances)


async def commit(api: Api, member: dict, offset: int) -> dict:
    _, body = await api.post(
        api.group_path(GROUP, "/offsets"),
        {
            "member_id": member["member_id"],
            "generation_id": member["generation_id"],
            "group_instance_id": "a",
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset}]}],
        },
    )
    return body


async def test_a_failed_offset_commit_changes_nothing_and_recovers(api: Api) -> None:
    me = (await form(api, ["a"]))["a"]
    assert (await commit(api, me, 10))["error"] == "NONE"
    await fail_disk(api, True)
    failed = await commit(api, me, 11)
    assert failed["error_code"] == 15
    assert failed["topics"][0]["partitions"][0]["error_code"] == 15
    fetched = await served(lambda: api.get_body(api.group_path(GROUP, "/offsets?topic=t")))
    assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 10
    await fail_disk(api, False)
    assert (await commit(api, me, 12))["error"] == "NONE"


async def test_a_failed_static_restart_is_reverted(api: Api) -> None:
    before = await form(api, ["a", "b"])
    await fail_disk(api, True)
    restarted = await api.join(GROUP, instance_id="b")
    assert restarted["error"] == "COORDINATOR_NOT_AVAILABLE"
    described = await served(lambda: api.describe(GROUP))
    assert {m["group_instance_id"]: m["member_id"] for m in described["members"]}["b"] == before["b"]["member_id"]
    beat = await served(lambda: api.heartbeat(GROUP, before["b"]["member_id"], before["b"]["generation_id"], "b"))
    assert beat["error"] == "NONE"  # the old member was never replaced
    await fail_disk(api, False)
    again = await api.join(GROUP, instance_id="b")
    assert again["error"] == "NONE"
    synced = await api.sync(GROUP, again["member_id"], again["generation_id"], "b")
    assert base64.b64decode(synced["assignment"]) == b"b"


async def test_a_failed_assignment_write_answers_every_sync_and_the_group_is_what_the_store_holds(api: Api) -> None:
    joins = [await api.park(api.join(GROUP, instance_id=i)) for i in ("a", "b")]
    while not all(t.done() for t in joins):
        await api.advance(3_000)
    joined = [t.result() for t in joins]
    leader = next(j for j in joined if j["leader"] == j["member_id"])
    follower = next(j for j in joined if j is not leader)
    parked = await api.park(api.sync(GROUP, follower["member_id"], follower["generation_id"]))
    await fail_disk(api, True)
    answer = await api.sync(
        GROUP, leader["member_id"], leader["generation_id"], assignments={leader["member_id"]: b"x"}
    )
    assert answer["error"] == "COORDINATOR_NOT_AVAILABLE"
    assert (await parked)["error"] == "COORDINATOR_NOT_AVAILABLE"
    # The store holds the group as created: its first generation's assignment never became durable (as after a
    # restart at that moment), so the members join again: a rebalance.
    described = await served(lambda: api.describe(GROUP))
    assert (described["group_state"], described["members"]) == ("Empty", [])
    await fail_disk(api, False)
    journal_types = [e["type"] for e in await api.journal()]
    assert "assignment_stored" not in journal_types  # the failed write's events went with it
    again = await api.park(api.join(GROUP, instance_id="a"))
    while not again.done():
        await api.advance(3_000)
    assert again.result()["error"] == "NONE"


async def test_a_group_whose_creation_could_not_be_written_does_not_exist(api: Api) -> None:
    await fail_disk(api, True)
    first = await api.join("fresh", api_version=9)
    assert first["error"] == "COORDINATOR_NOT_AVAILABLE"
    assert (await served(lambda: api.describe("fresh")))["group_state"] == "Dead"
    await fail_disk(api, False)
    assert (await api.join("fresh", api_version=9))["error"] == "MEMBER_ID_REQUIRED"
    assert (await api.describe("fresh"))["group_state"] == "Empty"


async def test_a_stalled_write_holds_only_its_own_groups_answers(api: Api) -> None:
    member = (await form(api, ["a"]))["a"]
    await api.post("/v1/debug/store", {"stalled": True})
    try:
        pending = await api.park(api.join("other", api_version=9))  # creates a group: a write, stalled
        assert (await api.heartbeat(GROUP, member["member_id"], member["generation_id"], "a"))["error"] == "NONE"
        assert not pending.done()  # its answer waits for its write
    finally:
        await api.post("/v1/debug/store", {"stalled": False})
    assert (await pending)["error"] == "MEMBER_ID_REQUIRED"


async def test_a_stalled_write_holds_its_own_groups_heartbeats_until_it_is_durable(api: Api) -> None:
    """The other half: a heartbeat of the group whose write is stalled is not answered before that write is durable
    (its answer would tell the member a state the coordinator may lose); it is answered once the write lands."""
    member = (await form(api, ["a"]))["a"]
    await api.post("/v1/debug/store", {"stalled": True})
    try:
        committing = await api.park(commit(api, member, 10))  # the group's write, stalled
        beating = await api.park(api.heartbeat(GROUP, member["member_id"], member["generation_id"], "a"))
        assert not committing.done() and not beating.done()
    finally:
        await api.post("/v1/debug/store", {"stalled": False})
    assert (await committing)["error"] == "NONE"
    assert (await beating)["error"] == "NONE"


async def readiness(api: Api) -> tuple[int, int]:
    """(/readyz status, /healthz status)."""
    ready, _ = await api.get("/readyz")
    healthy, _ = await api.get("/healthz")
    return ready, healthy


async def test_readiness_is_503_while_writes_fail_and_ready_again_once_the_disk_takes_them(api: Api) -> None:
    me = (await form(api, ["a"]))["a"]
    assert await readiness(api) == (200, 200)
    await fail_disk(api, True)
    assert (await commit(api, me, 11))["error_code"] == 15

    assert await readiness(api) == (503, 200)  # not ready, but alive: the kubelet must not restart it
    _, body = await api.get("/readyz")
    assert body["status"] == "store failing"
    assert body["reason"].startswith("the disk refuses writes: ")
    assert await readiness(api) == (503, 200)  # its own probe write fails too

    await fail_disk(api, False)
    # Each probe of /readyz queues a probe write (no client writes while the coordinator is not ready); the
    # writer thread runs it in its own time, so ask until one has.
    for _ in range(1_000):
        if (await readiness(api))[0] == 200:
            break
    assert await readiness(api) == (200, 200)
    # Ready says the disk takes writes; the group the failed write unloaded loads again on its own (CI, a busy
    # machine: the commit came between the two and was answered 15), so the commit retries as a client does.
    assert (await served(lambda: commit(api, me, 12)))["error"] == "NONE"


async def test_answers_held_behind_a_failed_write_are_never_successes(api: Api) -> None:
    """Issue 28 R1: a PUT of expected members whose write fails is answered 15; the same PUT retried while that
    write was in flight (a no-op in memory), a GET and a describe were held behind it. None of them may be answered
    as if the write had landed: they are 15 too, and afterwards the group holds what the store holds."""
    path = api.group_path(GROUP, "/expected-members")
    assert (await api.put(path, {"group_instance_ids": ["a"]}))[0] == 200
    await api.post("/v1/debug/store", {"stalled": True})
    try:
        first = await api.park(api.put(path, {"group_instance_ids": ["a", "b"]}))  # its write held by the disk
        retried = await api.park(api.put(path, {"group_instance_ids": ["a", "b"]}))
        read = asyncio.ensure_future(api.get(path))
        described = asyncio.ensure_future(api.describe(GROUP))
        await asyncio.sleep(0.2)  # the reads reach the coordinator (and are held: asserted by their answers below)
        await fail_disk(api, True)
    finally:
        await api.post("/v1/debug/store", {"stalled": False})
    assert (await first)[1]["error_code"] == 15
    assert (await retried)[1]["error_code"] == 15
    assert (await read)[1]["error_code"] == 15
    assert (await described)["error_code"] == 15
    await fail_disk(api, False)
    expected = await served(lambda: api.get_body(path))
    assert expected["group_instance_ids"] == ["a"]


async def test_two_failed_writes_of_one_group_leave_it_as_the_store_has_it(api: Api) -> None:
    """Two changes of one group in flight when the disk fails: each undone on its own would restore what the
    other had set ([a, b], where the store holds [a]); the group loaded again from the store holds [a]."""
    path = api.group_path(GROUP, "/expected-members")
    assert (await api.put(path, {"group_instance_ids": ["a"]}))[0] == 200
    await api.post("/v1/debug/store", {"stalled": True})
    try:
        second = await api.park(api.put(path, {"group_instance_ids": ["a", "b"]}))
        third = await api.park(api.put(path, {"group_instance_ids": ["a", "b", "c"]}))
        await fail_disk(api, True)
    finally:
        await api.post("/v1/debug/store", {"stalled": False})
    assert [(await t)[1]["error_code"] for t in (second, third)] == [15, 15]
    await fail_disk(api, False)
    assert (await served(lambda: api.get_body(path)))["group_instance_ids"] == ["a"]


async def test_readiness_is_503_while_a_group_cannot_be_read_back_and_ready_once_it_is(api: Api) -> None:
    """Found by the robustness run seed 22 (etcd out of space): the store took writes again while a group unloaded
    after a failed write still waited to be read back, and /readyz said 200 while that group's commits were
    refused. A replica that cannot serve a group it holds is not ready; the reason says why, naming no group."""
    me = (await form(api, ["a"]))["a"]
    others = api.group_path("elsewhere", "/expected-members")
    await api.post("/v1/debug/store", {"reads_failing": True})
    try:
        await api.post("/v1/debug/store", {"fail_next": 1})
        assert (await commit(api, me, 11))["error_code"] == 15
        assert (await api.put(others, {"group_instance_ids": ["x"]}))[0] == 200  # the store takes writes
        for _ in range(200):  # the reload runs once the failed write is done, and fails at once
            status, body = await api.get("/readyz")
            if status == 503:
                break
            await asyncio.sleep(0.02)
        assert (status, body["status"]) == (503, "store failing"), body
        assert body["reason"].startswith("1 group(s) could not be read back after a failed write: "), body
        assert GROUP not in body["reason"]
        assert (await commit(api, me, 12))["error_code"] == 15  # the group is not served meanwhile
    finally:
        await api.post("/v1/debug/store", {"reads_failing": False})
    for _ in range(200):  # the reload is tried again every RELOAD_RETRY_S
        if (await readiness(api))[0] == 200:
            break
        await asyncio.sleep(0.05)
    assert await readiness(api) == (200, 200)
    assert (await commit(api, me, 13))["error"] == "NONE"
