"""How a pass writes a fleet's status (``reconcile.record``): deferred patches sent with the next write, composed
into one merge patch only where one says exactly what the patches said in order (RFC 7386)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from berth.operator.reconcile.record import FleetRecord


def rfc7386(target: Any, patch: Any) -> Any:
    """The RFC's own MergePatch pseudo-code, as the reference."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = rfc7386(result.get(key), value)
    return result


class Server:
    """A status subresource that counts its writes."""

    def __init__(self, status: dict[str, Any]) -> None:
        self.status = status
        self.writes: list[Mapping[str, Any]] = []

    async def patch_status(self, patch: Mapping[str, Any]) -> Mapping[str, Any]:
        self.writes.append(copy.deepcopy(dict(patch)))
        self.status = rfc7386(self.status, patch)
        return copy.deepcopy(self.status)


def record_on(server: Server) -> FleetRecord:
    context = SimpleNamespace(events_for=lambda body: None, status_for=lambda body: server)
    body = {"metadata": {"name": "orders", "namespace": "shop", "uid": "u"}, "status": copy.deepcopy(server.status)}
    return FleetRecord(context, body)  # type: ignore[arg-type]


KEYS = st.sampled_from(["a", "b", "c"])
LEAF = st.one_of(st.none(), st.integers(0, 3), st.lists(st.integers(0, 3), max_size=2))
VALUES = st.recursive(LEAF, lambda inner: st.dictionaries(KEYS, inner, max_size=3), max_leaves=6)
PATCHES = st.dictionaries(KEYS, VALUES, min_size=1, max_size=3)
STATUS = st.dictionaries(KEYS, VALUES.filter(lambda v: v is not None), max_size=3)


@settings(max_examples=300, deadline=None)
@given(STATUS, st.lists(st.tuples(st.booleans(), PATCHES), min_size=1, max_size=5))
def test_deferred_patches_end_where_writing_each_in_turn_ends(
    status: dict[str, Any], steps: list[tuple[bool, dict[str, Any]]]
) -> None:
    expected = rfc7386({}, status)
    for _, patch in steps:
        expected = rfc7386(expected, patch)
    server = Server(rfc7386({}, status))
    record = record_on(server)

    async def run() -> None:
        for deferred, patch in steps:
            if deferred:
                record.defer(patch)
                assert record.status == rfc7386(record.status, {})  # seen at once, as a status (no nulls)
            else:
                await record.write(patch)
        await record.flush()

    asyncio.run(run())
    assert server.status == expected
    assert record.status == expected
    assert len(server.writes) <= len(steps)


def test_what_is_only_said_rides_with_the_next_write_and_a_pass_ends_with_one() -> None:
    server = Server({"replicas": 1})
    record = record_on(server)

    async def run() -> None:
        record.defer({"sessionTimeoutMs": 45_000, "sessionTimeoutReason": "estimated"})
        assert record.status["sessionTimeoutMs"] == 45_000 and server.writes == []
        await record.write_changes({"expectedMembers": None})  # changes nothing: not written, nor is what waits
        assert server.writes == []
        await record.write({"expectedMembers": ["orders-0"]})
        assert server.writes == [
            {"sessionTimeoutMs": 45_000, "sessionTimeoutReason": "estimated", "expectedMembers": ["orders-0"]}
        ]
        record.defer_changes({"replicas": 1, "lastScaleDown": {"rebalances": 0}})
        await record.flush()
        await record.flush()  # nothing left: nothing sent

    asyncio.run(run())
    assert server.writes[1:] == [{"lastScaleDown": {"rebalances": 0}}]


def test_a_map_merged_into_a_key_a_deferred_patch_removes_is_a_write_of_its_own() -> None:
    server = Server({"lastScaleDown": {"removed": ["orders-4"], "seconds": 3}})
    record = record_on(server)

    async def run() -> None:
        record.defer({"lastScaleDown": None})
        record.defer({"lastScaleDown": {"rebalances": 1}})
        await record.flush()

    asyncio.run(run())
    assert server.writes == [{"lastScaleDown": None}, {"lastScaleDown": {"rebalances": 1}}]
    assert server.status == {"lastScaleDown": {"rebalances": 1}}
