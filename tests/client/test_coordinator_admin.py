"""``CoordinatorAdmin`` against a real coordinator: typed results, per-member outcomes, and clear errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from member_harness import MemberFactory, form_group, member_config
from support.api import Api
from support.coordinator import CoordinatorProcess, secured_coordinator
from support.net import free_port

from berth.coordinator.client import (
    AuthorizationError,
    CoordinatorAdmin,
    CoordinatorRefusedError,
    CoordinatorUnavailableError,
    Error,
    GroupError,
    GroupMember,
    read_assignment,
    read_subscription,
)
from berth.coordinator.groups.groups_cli import main as groups_main

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def admin(coordinator: CoordinatorProcess) -> AsyncIterator[CoordinatorAdmin]:
    async with CoordinatorAdmin(coordinator.url) as client:
        yield client


async def test_describe_and_list_a_stable_group(api: Api, new_member: MemberFactory, admin: CoordinatorAdmin) -> None:
    members = [new_member("orders", f"orders-{i}") for i in range(2)]
    await form_group(api, members)

    described = await admin.describe_group("orders")
    assert (described.state, described.generation_id, described.protocol) == ("Stable", 1, "sticky")
    assert described.leader == members[0].member_id
    assert described.instance_ids() == {"orders-0", "orders-1"}
    by_instance = {m.group_instance_id: m for m in described.members}
    assert read_assignment(by_instance["orders-1"].member_assignment) == members[1].assignment
    assert read_subscription(by_instance["orders-1"].member_metadata) is not None
    assert [(g.group_id, g.state) for g in await admin.list_groups()] == [("orders", "Stable")]
    assert await admin.list_groups(["Empty"]) == ()

    unknown = await admin.describe_group("nobody")
    assert (unknown.exists, unknown.state, unknown.generation_id, unknown.leader) == (False, "Dead", -1, None)


async def test_leave_by_instance_ids_reports_each_member(
    api: Api, new_member: MemberFactory, admin: CoordinatorAdmin
) -> None:
    await form_group(api, [new_member("orders", f"orders-{i}") for i in range(3)])

    removals = await admin.leave_instances("orders", ["orders-2", "orders-7"], reason="scale-down")

    assert [(r.group_instance_id, r.error) for r in removals] == [
        ("orders-2", Error.NONE),
        ("orders-7", Error.UNKNOWN_MEMBER_ID),  # reported, not raised: it was not a member
    ]
    assert (await admin.describe_group("orders")).instance_ids() == {"orders-0", "orders-1"}
    nobody = await admin.leave_instances("no-such-group", ["x-0"])
    assert [(r.group_instance_id, r.error) for r in nobody] == [("x-0", Error.UNKNOWN_MEMBER_ID)]


async def test_expected_members_round_trip(admin: CoordinatorAdmin) -> None:
    assert await admin.put_expected_members("fleet", ["fleet-0", "fleet-1"]) == ("fleet-0", "fleet-1")
    assert await admin.get_expected_members("fleet") == ("fleet-0", "fleet-1")
    await admin.delete_expected_members("fleet")
    assert await admin.get_expected_members("fleet") == ()


async def test_delete_group_outcomes_are_returned(api: Api, new_member: MemberFactory, admin: CoordinatorAdmin) -> None:
    await form_group(api, [new_member("busy", "busy-0")])
    await admin.put_expected_members("idle", ["idle-0"])  # creates an empty group

    assert await admin.delete_group("idle") is Error.NONE
    assert await admin.delete_group("idle") is Error.GROUP_ID_NOT_FOUND
    assert await admin.delete_group("busy") is Error.NON_EMPTY_GROUP


async def test_offsets_and_journal_paging(api: Api, new_member: MemberFactory, admin: CoordinatorAdmin) -> None:
    member = new_member("orders", "orders-0")
    await form_group(api, [member])
    await member.commit({("orders", 2): 12})

    offsets = await admin.fetch_offsets("orders")
    assert {tp: c.offset for tp, c in offsets.items()} == {("orders", 2): 12}
    assert await admin.fetch_offsets("orders", ["payments"]) == {}
    first = await admin.journal(limit=2)
    assert [e["seq"] for e in first.events] == [1, 2] and first.next == 2
    everything = [event async for event in admin.journal_events(page_size=2)]
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
    assert everything[0]["type"] == "group_created"
    assert (await admin.journal(after=len(everything))).events == ()


async def test_config_reports_limits_and_versions(admin: CoordinatorAdmin) -> None:
    config = await admin.config()
    assert config.group_min_session_timeout_ms == 6_000
    assert config.api_versions["join"] == (0, 9)


async def test_refusals_raise_with_the_status_and_the_servers_text_aside(admin: CoordinatorAdmin) -> None:
    with pytest.raises(CoordinatorRefusedError) as bad:
        await admin.journal(limit=20_000)
    assert bad.value.status == 400 and bad.value.error == "INVALID_REQUEST"
    assert str(bad.value).startswith("HTTP 400 INVALID_REQUEST from GET /v1/journal")
    assert "limit" in bad.value.detail
    with pytest.raises(GroupError) as invalid:
        await admin.describe_group("x" * 300)
    assert invalid.value.error is Error.INVALID_GROUP_ID


async def test_an_unreachable_coordinator_raises_after_the_retries() -> None:
    async with CoordinatorAdmin(f"http://127.0.0.1:{free_port()}", attempts=2) as unreachable:
        with pytest.raises(CoordinatorUnavailableError, match="unreachable"):
            await unreachable.list_groups()


# -------------------------------------------------------------------------------------------------- authorisation


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[CoordinatorProcess]:
    tokens = [
        {"token": "root-secret", "groups": ["*"], "admin": True},
        {"token": "orders-app-secret", "groups": ["orders*"], "admin": False},
    ]
    with secured_coordinator(tmp_path, tokens=tokens) as process:
        yield process


async def test_tokens_are_sent_and_refusals_are_authorization_errors(secured: CoordinatorProcess) -> None:
    async with CoordinatorAdmin(secured.url, token="root-secret") as root:
        assert await root.list_groups() == ()
    async with CoordinatorAdmin(secured.url, token="orders-app-secret") as app:
        assert (await app.describe_group("orders")).state == "Dead"  # its own group: allowed
        with pytest.raises(AuthorizationError) as forbidden:
            await app.list_groups()  # an admin route
        assert forbidden.value.status == 403
    async with CoordinatorAdmin(secured.url) as anonymous:
        with pytest.raises(AuthorizationError) as unauthorized:
            await anonymous.describe_group("orders")
        assert unauthorized.value.status == 401 and unauthorized.value.detail


async def test_offsets_in_many_pages_are_followed_transparently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 22, point 1: a fetch is answered in pages (about 1,000 bytes each here); the admin client, a member and
    ``berth-groups`` read every page and see every offset, as if it were one answer."""
    committed = {(topic, p): p + 1 for topic in ("a", "b") for p in range(40)}
    body = {
        "topics": [
            {
                "name": t,
                "partitions": [
                    {"partition_index": p, "committed_offset": o} for (tt, p), o in committed.items() if tt == t
                ],
            }
            for t in ("a", "b")
        ]
    }
    with CoordinatorProcess(tmp_path / "data", "--offset-fetch-page-max-bytes", "1000") as process:
        async with aiohttp.ClientSession() as session:
            api = Api(session, process.url)
            assert (await api.post(api.group_path("paged", "/offsets"), body))[1]["error"] == "NONE"
            _, first = await api.get(api.group_path("paged", "/offsets"))
            assert first["next"] is not None and sum(len(t["partitions"]) for t in first["topics"]) < 10
        async with CoordinatorAdmin(process.url) as admin:
            offsets = await admin.fetch_offsets("paged")
            assert {tp: c.offset for tp, c in offsets.items()} == committed
            only_b = await admin.fetch_offsets("paged", ["b"])
            assert set(only_b) == {tp for tp in committed if tp[0] == "b"}
            # Bounded: one page of at most ``limit`` partitions, the first by topic and partition (the operator's
            # read of the partitions a group committed, issue 30).
            first_five = await admin.fetch_offsets("paged", limit=5)
            assert sorted(first_five) == sorted(committed)[:5]
            assert set(await admin.fetch_offsets("paged", ["b"], limit=3)) == {("b", 0), ("b", 1), ("b", 2)}
        member = GroupMember(member_config(process.url, "paged", None, topics={"a": 40, "b": 40}))
        assert {tp: c.offset for tp, c in (await member.committed()).items()} == committed
        await member.close()
        argv = ["--coordinator", process.url, "offsets", "paged", "-o", "json"]
        assert await asyncio.to_thread(groups_main, argv) == 0  # its own event loop
        shown = json.loads(capsys.readouterr().out)["offsets"]
        assert {(o["topic"], o["partition"]): o["offset"] for o in shown} == committed
