"""Group ownership on a real coordinator (docs/api.md §7a), as a hostile fleet in another namespace would try it:
team A's operator claims ``orders`` for its fleet; a fleet ``orders`` in namespace B, asserting its own uid, can
neither batch-leave team A's members, nor overwrite their expected members, nor delete the group and its offsets.
Claims are idempotent, adoption of an unowned group in use is explicit, a release names its uid, the owner is
described, journaled and survives kill -9, and deleting the group deletes it. Without the header, admin writes
behave as they always did."""

from __future__ import annotations

import asyncio

from support.api import Api
from support.coordinator import CoordinatorProcess

TEAM_A = {"namespace": "team-a", "name": "orders", "uid": "3f1c-team-a"}
TEAM_B = {"namespace": "team-b", "name": "orders", "uid": "9d2e-team-b"}
AS_A = {"Berth-Owner-Uid": TEAM_A["uid"]}
AS_B = {"Berth-Owner-Uid": TEAM_B["uid"]}


async def claim(api: Api, group: str, owner: dict, *, adopt: bool = False) -> tuple[int, dict]:
    return await api.request("PUT", api.group_path(group, "/owner"), {**owner, "adopt": adopt})


async def leave_instances(api: Api, group: str, *instances: str, headers: dict | None = None) -> tuple[int, dict]:
    body = {"members": [{"member_id": "", "group_instance_id": i} for i in instances]}
    return await api.request("POST", api.group_path(group, "/leave"), body, headers=headers)


async def test_another_namespaces_fleet_cannot_touch_an_owned_group(api: Api) -> None:
    assert await claim(api, "orders", TEAM_A) == (200, {"error_code": 0, "error": "NONE", "owner": TEAM_A})
    await api.form_static_group("orders", ["orders-0", "orders-1"])
    await api.request("PUT", api.group_path("orders", "/expected-members"), {"group_instance_ids": ["orders-0"]})
    before = await api.describe("orders")
    assert before["owner"] == TEAM_A

    assert await claim(api, "orders", TEAM_B, adopt=True) == (
        409,
        {
            "error": "GROUP_OWNED",
            "message": "group 'orders' belongs to team-a/orders (uid 3f1c-team-a)",
            "owner": TEAM_A,
        },
    )
    status, refused = await leave_instances(api, "orders", "orders-0", "orders-1", headers=AS_B)
    assert (status, refused["error"], refused["owner"]) == (409, "GROUP_OWNED", TEAM_A)
    status, _ = await api.request(
        "PUT", api.group_path("orders", "/expected-members"), {"group_instance_ids": []}, headers=AS_B
    )
    assert status == 409
    status, _ = await api.request("DELETE", api.group_path("orders", "/expected-members"), headers=AS_B)
    assert status == 409
    status, _ = await api.request("DELETE", api.group_path("orders"), headers=AS_B)
    assert status == 409
    status, _ = await api.request("DELETE", api.group_path("orders", f"/owner?uid={TEAM_B['uid']}"))
    assert status == 409

    assert await api.describe("orders") == before  # nothing changed: same generation, members, owner
    _, expected = await api.get(api.group_path("orders", "/expected-members"))
    assert expected["group_instance_ids"] == ["orders-0"]

    status, left = await leave_instances(api, "orders", "orders-1", headers=AS_A)  # its owner may
    assert (status, [m["error"] for m in left["members"]]) == (200, ["NONE"])


async def test_a_claim_is_idempotent_and_an_unowned_group_in_use_needs_adopt(api: Api) -> None:
    await api.form_static_group("legacy", ["legacy-0"])

    status, refused = await claim(api, "legacy", TEAM_A)
    assert (status, refused["error"], refused["owner"]) == (409, "GROUP_OWNED", None)
    status, refused = await leave_instances(api, "legacy", "legacy-0", headers=AS_A)
    assert (status, refused["owner"]) == (409, None)  # asserting an owner it does not have

    assert await claim(api, "legacy", TEAM_A, adopt=True) == (200, {"error_code": 0, "error": "NONE", "owner": TEAM_A})
    assert (await claim(api, "legacy", TEAM_A))[0] == 200
    claimed = [e for e in await api.whole_journal() if e["type"] == "owner_claimed"]
    assert [(e["owner"], e["adopted"]) for e in claimed] == [(TEAM_A, True)]


async def test_a_release_names_its_uid_in_the_query_or_the_body(api: Api) -> None:
    await claim(api, "orders", TEAM_A)

    status, answer = await api.request("DELETE", api.group_path("orders", "/owner"), {"uid": TEAM_A["uid"]})
    assert (status, answer) == (200, {"error_code": 0, "error": "NONE", "owner": None})
    assert (await api.describe("orders"))["owner"] is None
    await claim(api, "orders", TEAM_B)
    status, _ = await api.request("DELETE", api.group_path("orders", f"/owner?uid={TEAM_B['uid']}"))
    assert status == 200
    status, missing = await api.request("DELETE", api.group_path("orders", "/owner"))
    assert (status, missing["error"]) == (400, "INVALID_REQUEST")
    released = [e for e in await api.whole_journal() if e["type"] == "owner_released"]
    assert [e["owner"]["uid"] for e in released] == [TEAM_A["uid"], TEAM_B["uid"]]


async def test_the_owner_survives_kill_9_and_goes_with_its_group(coordinator: CoordinatorProcess, api: Api) -> None:
    await claim(api, "orders", TEAM_A)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, coordinator.kill)
    await loop.run_in_executor(None, coordinator.start)
    api.base_url = coordinator.url
    assert (await api.describe("orders"))["owner"] == TEAM_A

    status, deleted = await api.request("DELETE", api.group_path("orders"), headers=AS_A)
    assert (status, deleted["error"]) == (200, "NONE")
    assert (await api.describe("orders"))["group_state"] == "Dead"
    assert (await claim(api, "orders", TEAM_B))[0] == 200  # the owner went with the group


async def test_without_the_header_admin_writes_behave_as_before(api: Api) -> None:
    await claim(api, "orders", TEAM_A)
    await api.form_static_group("orders", ["orders-0"])

    status, left = await leave_instances(api, "orders", "orders-0")
    assert (status, [m["error"] for m in left["members"]]) == (200, ["NONE"])
