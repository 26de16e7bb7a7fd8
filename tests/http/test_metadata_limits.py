"""Metadata bounds on a real coordinator (docs/api.md §6): one member's metadata (a join's protocols together, or
one assignment of a sync) beyond ``--member-metadata-max-bytes`` is HTTP 400 naming the field; a join that would
take its group's metadata beyond ``--group-metadata-max-bytes`` is GROUP_MAX_SIZE_REACHED in-band; both advertised
in ``/v1/config``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from support.api import Api, b64
from support.coordinator import CoordinatorProcess

pytestmark = pytest.mark.timeout(60)

MEMBER_LIMIT = 1_000
GROUP_LIMIT = 2_500


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    with CoordinatorProcess(
        tmp_path / "data",
        "--member-metadata-max-bytes",
        str(MEMBER_LIMIT),
        "--group-metadata-max-bytes",
        str(GROUP_LIMIT),
    ) as coordinator:
        async with aiohttp.ClientSession() as session:
            yield Api(session, coordinator.url)


def join_body(instance: str, *sizes: int) -> dict:
    return {
        "member_id": "",
        "group_instance_id": instance,
        "session_timeout_ms": 10_000,
        "protocol_type": "consumer",
        "protocols": [
            {"name": ["range", "roundrobin"][i], "metadata": b64(b"m" * size)} for i, size in enumerate(sizes)
        ],
    }


async def test_the_bounds_are_advertised(api: Api) -> None:
    _, config = await api.get("/v1/config")
    assert (config["member_metadata_max_bytes"], config["group_metadata_max_bytes"]) == (MEMBER_LIMIT, GROUP_LIMIT)


async def test_one_members_metadata_beyond_its_bound_is_400_naming_the_field(api: Api) -> None:
    status, body = await api.post(api.group_path("g", "/join"), join_body("i-0", 600, 600))

    assert status == 400
    assert body["error"] == "INVALID_REQUEST"
    assert body["message"] == f"protocols: 1200 bytes of metadata is over the {MEMBER_LIMIT}-byte limit for one member"
    _, described = await api.get(api.group_path("g"))
    assert described["group_state"] == "Dead"  # nothing was created


async def test_an_assignment_beyond_the_member_bound_is_400_naming_it(api: Api) -> None:
    joined = await api.form_static_group("g", ["i-0"])
    me = joined["i-0"]
    body = {
        "member_id": me["member_id"],
        "generation_id": me["generation_id"],
        "group_instance_id": "i-0",
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": me["member_id"], "assignment": b64(b"a" * (MEMBER_LIMIT + 1))}],
    }

    status, answer = await api.post(api.group_path("g", "/sync"), body)

    assert status == 400
    assert answer["message"].startswith("assignments[0].assignment: 1001 bytes is over the 1000-byte limit")


async def test_a_join_beyond_the_groups_bound_is_group_max_size_reached_in_band(api: Api) -> None:
    await api.form_static_group("g", ["i-0", "i-1"], assignment=lambda _: b"x" * 900)  # 1,806 bytes stored
    status, answer = await api.post(api.group_path("g", "/join"), join_body("i-2", 900))

    assert status == 200
    assert (answer["error_code"], answer["error"]) == (81, "GROUP_MAX_SIZE_REACHED")
    described = await api.describe("g")
    assert described["group_state"] == "Stable"
    assert sorted(m["group_instance_id"] for m in described["members"]) == ["i-0", "i-1"]
