"""Group ownership at Berth's coordinator (docs/api.md §7a, docs/operator.md "Group ownership"), against the real
operator and a real coordinator: a fleet claims its group before anything else is sent for it, is refused
``GroupOwned`` when the group is another fleet's and ``GroupInUse`` when it is in use by nobody's (and sends nothing
more), adopts only as the operator's administrator decided (``--adopt-groups``; ``spec.coordinator.adoptGroup``
grants nothing), asserts its uid on every write, and on deletion releases what it keeps."""

from __future__ import annotations

from typing import Any

import aiohttp
from kopf_apiserver import FLEETS, ApiServer
from kopf_controller import StatefulSetController
from kopf_harness import (
    OperatorFactory,
    condition,
    create_fleet,
    delete_fleet,
    fleet_body,
    join_static_members,
    journal,
    messages,
    passes_after,
    patch_fleet_spec,
    requests_to,
    set_paused,
    stored,
    until,
)
from support.api import Api
from support.coordinator import CoordinatorProcess

FOREIGN = {"namespace": "team-a", "name": "orders", "uid": "uid-of-team-a"}


async def owner_of(api: Api, group: str) -> Any:
    return (await api.describe(group))["owner"]


async def claim(api: Api, group: str, owner: dict[str, str], *, adopt: bool = False) -> tuple[int, Any]:
    return await api.request("PUT", api.group_path(group, "/owner"), {**owner, "adopt": adopt})


def owner_writes(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Admin writes and ownership changes of a group's journal (what a refused fleet must never cause)."""
    kinds = {"member_left", "expected_members_changed", "group_deleted", "owner_claimed"}
    return [e for e in events if e["type"] in kinds and (e["type"] != "member_left" or e.get("via") == "admin")]


async def test_a_fleet_whose_group_another_fleet_owns_is_refused_and_sends_nothing_then_deletes_nothing(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    session: aiohttp.ClientSession,
    start_operator: OperatorFactory,
) -> None:
    # Team A's group: owned by team A's fleet (another operator recorded it), two members in it.
    status, _ = await claim(api, "orders", FOREIGN)
    assert status == 200
    await join_static_members(api, "orders", ["orders-0", "orders-1"])
    before = await api.describe("orders")
    writes_before = owner_writes(await journal(session, coordinator.url, "orders"))

    await start_operator("--coordinator-url", coordinator.url)
    await create_fleet(apiserver, fleet_body("orders", 0))  # the hostile fleet: same group, zero replicas
    refused = await until(
        lambda: (c := condition(apiserver, "orders", "SpecValid")) and c["status"] == "False" and c, "refused"
    )
    assert refused["reason"] == "GroupOwned"
    assert "belongs to fleet team-a/orders" in refused["message"], refused
    assert (condition(apiserver, "orders", "Ready") or {})["reason"] == "GroupOwned"
    await until(lambda: messages(apiserver, "orders", "GroupOwned"), "the Warning Event")
    await passes_after("orders", passes=3)
    assert requests_to(apiserver, "POST", "/statefulsets") == []  # nothing created for it either

    await delete_fleet(apiserver, "orders")
    await until(lambda: stored(apiserver, FLEETS, "orders") is None, "the fleet released", timeout_s=60)
    # Kopf posts the Event in the background, after the finalizer is gone: wait for it.
    released = await until(lambda: messages(apiserver, "orders", "Released"), "the Released Event")
    assert released == ["nothing was created for this fleet"]

    # Team A's group is as it was: its owner, members, generation, and no admin write or claim from this fleet.
    after = await api.describe("orders")
    assert after["owner"] == FOREIGN
    assert {m["group_instance_id"] for m in after["members"]} == {"orders-0", "orders-1"}
    assert after["generation_id"] == before["generation_id"]
    assert owner_writes(await journal(session, coordinator.url, "orders")) == writes_before


async def test_a_group_in_use_by_nobodys_fleet_is_taken_only_as_the_administrator_decided(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    start_operator: OperatorFactory,
) -> None:
    await join_static_members(api, "orders", ["orders-0"])  # consumers ran before the fleet existed
    operator = await start_operator("--coordinator-url", coordinator.url)
    await create_fleet(apiserver, fleet_body("orders", 1, coordinator={"adoptGroup": True}))
    refused = await until(
        lambda: (c := condition(apiserver, "orders", "SpecValid")) and c["status"] == "False" and c, "refused"
    )
    # The spec field any namespace editor controls grants nothing (issue 22, point 2).
    assert refused["reason"] == "GroupInUse"
    assert "taking it over is the administrator's decision (the operator's --adopt-groups" in refused["message"]
    assert "spec.coordinator.adoptGroup is deprecated and grants nothing" in refused["message"]
    assert await owner_of(api, "orders") is None

    await operator.stop()
    await start_operator("--coordinator-url", coordinator.url, "--adopt-groups", "shop=orders,payments-*")
    await until(lambda: (c := condition(apiserver, "orders", "Ready")) and c["status"] == "True", "Ready=True")
    owner = await owner_of(api, "orders")
    uid = (stored(apiserver, FLEETS, "orders") or {})["metadata"]["uid"]
    assert owner == {"namespace": "shop", "name": "orders", "uid": uid}
    assert any("adopted" in m for m in messages(apiserver, "orders", "GroupClaimed"))
    deprecated = condition(apiserver, "orders", "DeprecatedField") or {}
    assert (deprecated.get("status"), deprecated.get("reason")) == ("True", "AdoptGroupIgnored")


async def test_a_fresh_group_is_claimed_every_write_names_the_owner_and_a_kept_group_is_released(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    session: aiohttp.ClientSession,
    start_operator: OperatorFactory,
) -> None:
    await start_operator("--coordinator-url", coordinator.url)
    await create_fleet(apiserver, fleet_body("orders", 2, deleteGroupOnDelete=False))
    await until(lambda: len(controller.pods("orders")) == 2, "2 pods")
    await join_static_members(api, "orders", ["orders-0", "orders-1"])
    await until(lambda: (c := condition(apiserver, "orders", "Ready")) and c["status"] == "True", "Ready=True")
    uid = (stored(apiserver, FLEETS, "orders") or {})["metadata"]["uid"]
    assert await owner_of(api, "orders") == {"namespace": "shop", "name": "orders", "uid": uid}
    events = await journal(session, coordinator.url, "orders")
    claimed = [e for e in events if e["type"] == "owner_claimed"]
    first_write = next(i for i, e in enumerate(events) if e["type"] == "expected_members_changed")
    assert len(claimed) == 1 and events.index(claimed[0]) < first_write  # claimed before anything else

    # The group changes hands behind the operator's back (an admin released it; another fleet claimed it): the
    # next write asserts this fleet's uid, the coordinator refuses it, and the fleet is refused - nothing changes.
    # (Paused meanwhile: a pass between the release and the other claim would take back the group it ran on.)
    await set_paused(apiserver, "orders", True)
    await until(lambda: (c := condition(apiserver, "orders", "Paused")) and c["status"] == "True", "Paused=True")
    status, _ = await api.request("DELETE", api.group_path("orders", "/owner") + f"?uid={uid}")
    assert status == 200
    assert (await claim(api, "orders", FOREIGN, adopt=True))[0] == 200
    await patch_fleet_spec(apiserver, "orders", {"replicas": 3})
    await set_paused(apiserver, "orders", False)
    refused = await until(
        lambda: (c := condition(apiserver, "orders", "SpecValid")) and c["status"] == "False" and c, "refused"
    )
    assert refused["reason"] == "GroupOwned" and "fleet team-a/orders" in refused["message"]
    assert (await api.request("GET", api.group_path("orders", "/expected-members")))[1]["group_instance_ids"] == [
        "orders-0",
        "orders-1",
    ]

    # Back to this fleet; deleting it keeps the group (deleteGroupOnDelete: false) and releases it.
    status, _ = await api.request("DELETE", api.group_path("orders", "/owner") + f"?uid={FOREIGN['uid']}")
    assert status == 200
    assert (await claim(api, "orders", {"namespace": "shop", "name": "orders", "uid": uid}, adopt=True))[0] == 200
    await patch_fleet_spec(apiserver, "orders", {"replicas": 2})
    await until(lambda: (c := condition(apiserver, "orders", "SpecValid")) and c["status"] == "True", "accepted")
    await delete_fleet(apiserver, "orders")
    await until(lambda: stored(apiserver, FLEETS, "orders") is None, "the fleet released", timeout_s=60)
    described = await api.describe("orders")
    assert described["owner"] is None and described["group_state"] == "Empty"
    assert messages(apiserver, "orders", "GroupReleased") == ["released group orders: it is kept, owned by no fleet"]
    kinds = [e["type"] for e in await journal(session, coordinator.url, "orders")]
    assert kinds[-1] == "owner_released" and "group_deleted" not in kinds
