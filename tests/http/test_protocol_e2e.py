"""The group protocol end to end: a real coordinator process on 127.0.0.1, real HTTP, the manual clock.

These mirror the core's scenario tests at the wire level: the JSON shapes per version, long-polls parked
and answered, and the journal as a batch reader sees it.
"""

from __future__ import annotations

import asyncio
import base64

import pytest
from support.api import Api

pytestmark = pytest.mark.timeout(60)

GROUP = "orders"


async def form_static_group(api: Api, instances: list[str], *, api_version: int = 9) -> dict[str, dict]:
    formed = await api.form_static_group(
        GROUP, instances, api_version=api_version, assignment=lambda i: f"parts-of-{i}".encode()
    )
    for instance, joined in formed.items():
        sync = await api.sync(GROUP, joined["member_id"], joined["generation_id"], instance)
        assert base64.b64decode(sync["assignment"]) == f"parts-of-{instance}".encode()
    return formed


async def test_dynamic_member_joins_through_member_id_required(api: Api) -> None:
    first = await api.join(GROUP, api_version=4)
    assert first["error"] == "MEMBER_ID_REQUIRED"
    assert first["member_id"].startswith("member-")
    parked = await api.park(api.join(GROUP, first["member_id"], api_version=4))
    await api.advance(3_000)
    joined = await parked
    assert joined["error"] == "NONE"
    assert joined["member_id"] == first["member_id"] == joined["leader"]
    assert "group_instance_id" not in joined["members"][0]  # v4 cannot carry it
    assert "protocol_type" not in joined and "skip_assignment" not in joined


async def test_old_dynamic_join_is_admitted_at_once(api: Api) -> None:
    parked = await api.park(api.join(GROUP, api_version=3))
    await api.advance(3_000)
    joined = await parked
    assert joined["error"] == "NONE"
    assert joined["protocol_name"] == "range"


async def test_static_member_restart_keeps_assignment_without_rebalance(api: Api) -> None:
    before = await form_static_group(api, ["orders-0", "orders-1", "orders-2"])
    events_before = await api.journal()

    restarted = await api.join(GROUP, instance_id="orders-1")
    assert restarted["error"] == "NONE"
    assert restarted["member_id"] != before["orders-1"]["member_id"]
    assert restarted["generation_id"] == before["orders-1"]["generation_id"]
    sync = await api.sync(GROUP, restarted["member_id"], restarted["generation_id"], "orders-1")
    assert base64.b64decode(sync["assignment"]) == b"parts-of-orders-1"

    described = await api.describe(GROUP)
    assert described["group_state"] == "Stable"
    assert described["generation_id"] == before["orders-1"]["generation_id"]
    new_events = (await api.journal())[len(events_before) :]
    assert [e["type"] for e in new_events] == ["static_member_replaced"]
    assert new_events[0]["rebalance"] is False
    assert new_events[0]["old_member_id"] == before["orders-1"]["member_id"]


async def test_static_leader_restart_at_v9_skips_assignment(api: Api) -> None:
    before = await form_static_group(api, ["a", "b"])
    leader_instance = next(i for i, r in before.items() if r["leader"] == r["member_id"])
    restarted = await api.join(GROUP, instance_id=leader_instance, api_version=9)
    assert restarted["skip_assignment"] is True
    assert restarted["leader"] == restarted["member_id"]
    assert {m["group_instance_id"] for m in restarted["members"]} == {"a", "b"}


async def test_static_leader_restart_before_v9_gets_old_leader_and_no_members(api: Api) -> None:
    before = await form_static_group(api, ["a", "b"])
    leader_instance = next(i for i, r in before.items() if r["leader"] == r["member_id"])
    restarted = await api.join(GROUP, instance_id=leader_instance, api_version=8)
    assert "skip_assignment" not in restarted
    assert restarted["leader"] == before[leader_instance]["member_id"]
    assert restarted["members"] == []


async def test_duplicate_instance_is_fenced_and_journaled(api: Api) -> None:
    before = await form_static_group(api, ["a", "b"])
    await api.join(GROUP, instance_id="a")  # a second process with instance id "a" takes over
    stale = before["a"]
    response = await api.heartbeat(GROUP, stale["member_id"], stale["generation_id"], "a")
    assert response["error_code"] == 82
    assert response["error"] == "FENCED_INSTANCE_ID"
    fenced = [e for e in await api.journal() if e["type"] == "member_fenced"]
    assert fenced and fenced[-1]["member_id"] == stale["member_id"]


async def test_parked_join_of_replaced_member_is_fenced(api: Api) -> None:
    before = await form_static_group(api, ["a", "b"])
    # "b" rejoins with changed metadata, which starts a rebalance; its join stays parked.
    parked = await api.park(api.join(GROUP, before["b"]["member_id"], "b", protocols=[("range", b"new-subscription")]))
    # A restarted "b" replaces it while it waits; the replacement itself waits for the rebalance to finish.
    replacement = asyncio.create_task(api.join(GROUP, instance_id="b"))
    fenced = await parked  # answered the moment the replacement arrives
    await api.until_parked(1)
    assert fenced["error"] == "FENCED_INSTANCE_ID"
    assert fenced["member_id"] == before["b"]["member_id"]
    await api.advance(30_000)  # the rebalance timeout: "a" never rejoined, but static members are kept
    joined = await replacement
    assert joined["error"] == "NONE" and joined["generation_id"] == before["b"]["generation_id"] + 1


async def test_batch_leave_by_instance_ids_is_one_rebalance(api: Api) -> None:
    await form_static_group(api, ["f-0", "f-1", "f-2", "f-3", "f-4"])
    seq = (await api.journal())[-1]["seq"]
    response = await api.leave(GROUP, [("", "f-3"), ("", "f-4"), ("", "f-9")])
    assert [(m["group_instance_id"], m["error"]) for m in response["members"]] == [
        ("f-3", "NONE"),
        ("f-4", "NONE"),
        ("f-9", "UNKNOWN_MEMBER_ID"),
    ]
    new = await api.journal(after=seq)
    assert [e["type"] for e in new] == ["member_left", "member_left", "rebalance_started"]
    assert {e["via"] for e in new if e["type"] == "member_left"} == {"admin"}
    assert (await api.describe(GROUP))["group_state"] == "PreparingRebalance"


async def test_leave_v0_answers_one_top_level_error(api: Api) -> None:
    status, body = await api.post(api.group_path(GROUP, "/leave"), {"api_version": 0, "member_id": "nobody"})
    assert status == 200
    assert body == {"error_code": 25, "error": "UNKNOWN_MEMBER_ID"}


async def test_session_expiry_removes_a_silent_member(api: Api) -> None:
    before = await form_static_group(api, ["a", "b"])
    for _ in range(4):  # "a" keeps heartbeating, "b" falls silent
        await api.advance(3_000)
        assert (await api.heartbeat(GROUP, before["a"]["member_id"], before["a"]["generation_id"], "a"))["error"] in {
            "NONE",
            "REBALANCE_IN_PROGRESS",
        }
    described = await api.describe(GROUP)
    assert [m["group_instance_id"] for m in described["members"]] == ["a"]
    expired = [e for e in await api.journal() if e["type"] == "member_expired"]
    assert [(e["group_instance_id"], e["phase"]) for e in expired] == [("b", "session")]


async def test_offsets_commit_and_fetch(api: Api) -> None:
    before = await form_static_group(api, ["a"])
    me = before["a"]
    status, body = await api.post(
        api.group_path(GROUP, "/offsets"),
        {
            "member_id": me["member_id"],
            "generation_id": me["generation_id"],
            "group_instance_id": "a",
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42}]}],
        },
    )
    assert status == 200 and body["topics"][0]["partitions"][0]["error"] == "NONE"
    _, fetched = await api.get(api.group_path(GROUP, "/offsets?topic=t&topic=other"))
    assert fetched["topics"] == [
        {
            "name": "t",
            "partitions": [
                {
                    "partition_index": 0,
                    "committed_offset": 42,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": 0,
                    "error": "NONE",
                }
            ],
        },
        {"name": "other", "partitions": []},
    ]


async def test_simple_commit_creates_a_group_and_delete_removes_it(api: Api) -> None:
    _, body = await api.post(
        api.group_path("simple", "/offsets"),
        {
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 3, "committed_offset": 7, "committed_metadata": "m"}]}
            ]
        },
    )
    assert body["error"] == "NONE"
    _, listed = await api.get("/v1/groups")
    assert [(g["group_id"], g["group_state"]) for g in listed["groups"]] == [("simple", "Empty")]
    _, deleted = await api.request("DELETE", api.group_path("simple"))
    assert deleted == {"error_code": 0, "error": "NONE"}
    _, fetched = await api.get(api.group_path("simple", "/offsets"))
    assert fetched["topics"] == []
    _, again = await api.request("DELETE", api.group_path("simple"))
    assert again["error"] == "GROUP_ID_NOT_FOUND"


async def test_unknown_group_describes_as_dead(api: Api) -> None:
    described = await api.describe("nobody-here")
    assert described["group_state"] == "Dead"
    assert described["generation_id"] == -1 and described["leader"] is None and described["members"] == []


async def test_pre_registered_fleet_forms_when_its_last_member_joins(api: Api) -> None:
    _, body = await api.request(
        "PUT", api.group_path(GROUP, "/expected-members"), {"group_instance_ids": ["f-0", "f-1", "f-2"]}
    )
    assert body == {"error_code": 0, "error": "NONE", "group_instance_ids": ["f-0", "f-1", "f-2"]}
    joins = [asyncio.create_task(api.join(GROUP, instance_id=f"f-{i}")) for i in range(3)]
    responses = await asyncio.wait_for(asyncio.gather(*joins), timeout=10)  # no clock advance needed
    assert {r["generation_id"] for r in responses} == {1}


async def test_group_id_with_slash_and_unicode_round_trips(api: Api) -> None:
    group = "team/orders-ü"
    first = await api.join(group, api_version=9)
    assert first["error"] == "MEMBER_ID_REQUIRED"
    _, listed = await api.get("/v1/groups")
    assert [g["group_id"] for g in listed["groups"]] == [group]


async def test_manual_clock_fires_timers_in_deadline_order(api: Api) -> None:
    parked = await api.park(api.join(GROUP, instance_id="a"))
    start = await api.advance(0)
    assert not parked.done()
    now = await api.advance(2_999)
    assert now == start + 2_999 and not parked.done()
    await api.advance(1)
    assert (await parked)["error"] == "NONE"


# ------------------------------------------------------------------------------------------ Kafka's answers


async def test_a_leave_of_a_group_that_does_not_exist_is_unknown_member_id_per_member(api: Api) -> None:
    status, left = await api.post(
        api.group_path("nowhere", "/leave"),
        {"api_version": 5, "members": [{"member_id": "", "group_instance_id": "a"}, {"member_id": "m-1"}]},
    )
    assert status == 200 and (left["error_code"], left["error"]) == (0, "NONE")
    assert [(m["member_id"], m["group_instance_id"], m["error"]) for m in left["members"]] == [
        ("", "a", "UNKNOWN_MEMBER_ID"),
        ("m-1", None, "UNKNOWN_MEMBER_ID"),
    ]
    status, legacy = await api.post(api.group_path("nowhere", "/leave"), {"api_version": 2, "member_id": "m-1"})
    assert status == 200 and legacy == {"error_code": 25, "error": "UNKNOWN_MEMBER_ID"}


async def test_commit_metadata_up_to_the_advertised_limit_is_kept_and_beyond_it_refused_per_partition(
    api: Api,
) -> None:
    """The id limit (1,024 bytes) does not apply to metadata: /v1/config's offset_metadata_max_bytes (4,096) does,
    and only to the partition that carries too much (OFFSET_METADATA_TOO_LARGE), as in Kafka."""
    status, config = await api.get("/v1/config")
    assert status == 200 and config["offset_metadata_max_bytes"] == 4_096
    fits, too_large = "é" * 2_048, "x" * 4_097  # 4,096 bytes of UTF-8; one byte over
    status, committed = await api.post(
        api.group_path("simple", "/offsets"),
        {
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 5, "committed_metadata": fits},
                        {"partition_index": 1, "committed_offset": 6, "committed_metadata": too_large},
                    ],
                }
            ]
        },
    )
    assert status == 200 and committed["error_code"] == 0
    assert [(p["partition_index"], p["error"]) for p in committed["topics"][0]["partitions"]] == [
        (0, "NONE"),
        (1, "OFFSET_METADATA_TOO_LARGE"),
    ]
    status, fetched = await api.get(api.group_path("simple", "/offsets"))
    assert status == 200
    assert [(p["partition_index"], p["metadata"]) for p in fetched["topics"][0]["partitions"]] == [(0, fits)]


async def test_a_client_that_expects_100_continue_gets_it_before_it_sends_the_body(api: Api) -> None:
    """curl sends ``Expect: 100-continue`` with larger bodies and waits for it: the protocol routes answer it too."""
    host, port = api.base_url.removeprefix("http://").split(":")
    body = b'{"member_id": "x", "generation_id": 1}'
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /v1/groups/orders/heartbeat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n".encode()
    )
    assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(body)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200")
    writer.close()
