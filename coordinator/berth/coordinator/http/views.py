"""The views: one per route of ``protocol.routes.ROUTES``, each a thin translation to the core and back.

The group protocol's POST routes (join, sync, heartbeat, leave, offsets) share ``protocol_view``: group id ->
auth -> body -> decode (400, or in-band 35) -> loading? (in-band 14) -> shutting down? (503) -> core call
under a ticket -> the durable answer, encoded for the request's version (docs/api.md §3-§5). They are served by
the low-level front (``front``) and registered on the application too, which answers them identically.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import unquote_to_bytes

from aiohttp import web

from berth.coordinator.core import Coordinator, Effects
from berth.coordinator.http.errors import bad_request, from_invalid, not_found
from berth.coordinator.http.responses import answer_response, json_response, struct_response
from berth.coordinator.http.state import STATE, CoordinatorServer
from berth.coordinator.protocol import (
    API_VERSIONS,
    Answer,
    Body,
    ClockRequest,
    ClockResponse,
    ConfigResponse,
    DeleteResponse,
    DescribeResponse,
    Error,
    ExpectedMembersRequest,
    ExpectedMembersResponse,
    GroupId,
    HeartbeatRequest,
    HeartbeatResponse,
    InvalidRequest,
    JoinRequest,
    JoinResponse,
    LeaveRequest,
    LeaveResponse,
    ListResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchResponse,
    StatusResponse,
    StoreFaultsRequest,
    StoreFaultsResponse,
    SyncRequest,
    SyncResponse,
)
from berth.coordinator.protocol.codec import CarriesTooNew, RequestCodec, encode, query_api_version, query_int
from berth.coordinator.protocol.openapi import openapi_document
from berth.coordinator.protocol.routes import (
    JOURNAL_DEFAULT_LIMIT,
    JOURNAL_MAX_LIMIT,
    JOURNAL_MAX_WAIT_MS,
    ROUTES_BY_OPERATION,
    Access,
    Route,
)

B = TypeVar("B", bound=Body)
B_contra = TypeVar("B_contra", bound=Body, contravariant=True)
View = Callable[[web.Request], Awaitable[web.StreamResponse]]


def group_id_of(raw_segment: str) -> GroupId:
    """The group id, percent-decoded from its raw path segment: a group id may hold any UTF-8, '/' included."""
    if raw_segment.isascii() and "%" not in raw_segment:
        return GroupId(raw_segment)
    try:
        return GroupId(unquote_to_bytes(raw_segment).decode("utf-8"))
    except (UnicodeDecodeError, UnicodeEncodeError):
        raise bad_request("group_id: not valid UTF-8 after percent-decoding") from None


def raw_group_segment(request: web.BaseRequest) -> str:
    return request.raw_path.split("?", 1)[0].split("/")[3]


# ------------------------------------------------------------------------------------------ group protocol


class CoreCall(Protocol[B_contra]):
    """A core method of the group protocol, unbound: ``Coordinator.heartbeat`` and its siblings."""

    def __call__(
        self, core: Coordinator, group_id: GroupId, request: B_contra, version: int, ticket: int, now_ms: int, /
    ) -> Effects: ...


class HostCall(Protocol[B_contra]):
    """A core method that also records the member's address (``Coordinator.join``)."""

    def __call__(
        self,
        core: Coordinator,
        group_id: GroupId,
        request: B_contra,
        version: int,
        ticket: int,
        now_ms: int,
        /,
        client_host: str,
    ) -> Effects: ...


@dataclass(frozen=True, slots=True)
class ProtocolRoute(Generic[B]):
    """One of the five POST routes of the group protocol: how to decode it, call the core, and refuse it."""

    route: Route
    codec: RequestCodec[B]
    call: CoreCall[B]
    refuse: Callable[[B, Error], Answer]  # the route's answer carrying just an error
    host_call: HostCall[B] | None = None  # the peer's address is looked up only for the call that records it


async def protocol_view(
    state: CoordinatorServer, request: web.BaseRequest, protocol: ProtocolRoute[B], group_id: GroupId
) -> web.Response:
    if state.config.tokens is not None:
        state.authorize(request.headers, Access.GROUP, group_id)
    raw = await state.read_body(request)
    try:
        req, version = protocol.codec.decode(raw, state.config.limits)
    except CarriesTooNew as exc:
        refused: B = exc.request  # type: ignore[assignment]  # decoded by this route's codec
        return answer_response(protocol.refuse(refused, Error.UNSUPPORTED_VERSION), exc.version)
    except InvalidRequest as exc:
        raise from_invalid(exc) from None
    engine = state.running_engine
    if engine is None or not engine.ready or engine.closing:
        state.refuse_if_closed()
        return answer_response(protocol.refuse(req, Error.COORDINATOR_LOAD_IN_PROGRESS), version)
    # partial, not lambdas: one Python frame less per request, and nothing built twice.
    if protocol.host_call is not None:
        invoke = partial(protocol.host_call, state.core, group_id, req, version, client_host=request.remote or "")
    else:
        invoke = partial(protocol.call, state.core, group_id, req, version)
    answer = await engine.call(invoke, partial(protocol.refuse, req, Error.COORDINATOR_NOT_AVAILABLE), group_id)
    return answer_response(answer, version)


_HEARTBEAT_ANSWERS = {error: HeartbeatResponse(error) for error in Error}

PROTOCOL_ROUTES: dict[str, ProtocolRoute[Any]] = {
    "join": ProtocolRoute(
        ROUTES_BY_OPERATION["join"],
        RequestCodec(JoinRequest, "join"),
        Coordinator.join,
        lambda req, error: JoinResponse(error, member_id=req.member_id),
        host_call=Coordinator.join,
    ),
    "sync": ProtocolRoute(
        ROUTES_BY_OPERATION["sync"],
        RequestCodec(SyncRequest, "sync"),
        Coordinator.sync,
        lambda _, error: SyncResponse(error),
    ),
    "heartbeat": ProtocolRoute(
        ROUTES_BY_OPERATION["heartbeat"],
        RequestCodec(HeartbeatRequest, "heartbeat"),
        Coordinator.heartbeat,
        lambda _, error: _HEARTBEAT_ANSWERS[error],
    ),
    "leave": ProtocolRoute(
        ROUTES_BY_OPERATION["leave"],
        RequestCodec(LeaveRequest, "leave"),
        Coordinator.leave,
        lambda _, error: LeaveResponse(error),
    ),
    "offsets": ProtocolRoute(
        ROUTES_BY_OPERATION["offsets"],
        RequestCodec(OffsetCommitRequest, "offsets"),
        Coordinator.commit_offsets,
        OffsetCommitResponse.refusing,
    ),
}


def _protocol_app_view(protocol: ProtocolRoute[Any]) -> View:
    async def view(request: web.Request) -> web.Response:
        state = request.app[STATE]
        return await protocol_view(state, request, protocol, group_id_of(raw_group_segment(request)))

    return view


# ------------------------------------------------------------------------------------------ group reads, admin


def _group_route(request: web.Request, access: Access = Access.GROUP) -> tuple[CoordinatorServer, GroupId]:
    state = request.app[STATE]
    group_id = group_id_of(raw_group_segment(request))
    state.authorize(request.headers, access, group_id)
    return state, group_id


def _version(request: web.Request, api: str) -> int:
    try:
        return query_api_version(request.query.get("api_version"), api)
    except InvalidRequest as exc:
        raise from_invalid(exc) from None


def _query_int(request: web.Request, name: str, default: int, lo: int, hi: int) -> int:
    try:
        return query_int(request.query.get(name, str(default)), name, lo=lo, hi=hi)
    except InvalidRequest as exc:
        raise from_invalid(exc) from None


async def _decoded(state: CoordinatorServer, request: web.Request, codec: RequestCodec[B]) -> B:
    raw = await state.read_body(request)
    try:
        body, _ = codec.decode(raw, state.config.limits)
    except InvalidRequest as exc:
        raise from_invalid(exc) from None
    return body


async def fetch_offsets(request: web.Request) -> web.Response:
    state, group_id = _group_route(request)
    version = _version(request, "offset_fetch")
    topics = tuple(request.query.getall("topic", [])) or None
    if state.loading():
        return answer_response(OffsetFetchResponse(Error.COORDINATOR_LOAD_IN_PROGRESS), version)
    return answer_response(state.core.fetch_offsets(group_id, topics), version)


async def describe(request: web.Request) -> web.Response:
    state, group_id = _group_route(request)
    version = _version(request, "describe")
    if state.loading():
        loading = DescribeResponse(Error.COORDINATOR_LOAD_IN_PROGRESS, group_id=group_id, group_state="")
        return answer_response(loading, version)
    return answer_response(state.core.describe(group_id), version)


async def list_groups(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.authorize(request.headers, Access.ADMIN)
    version = _version(request, "list")
    if state.loading():
        return answer_response(ListResponse(Error.COORDINATOR_LOAD_IN_PROGRESS), version)
    return answer_response(state.core.list_groups(request.query.getall("state", [])), version)


async def delete_group(request: web.Request) -> web.Response:
    state, group_id = _group_route(request, Access.ADMIN)
    version = _version(request, "delete")
    if state.loading():
        return answer_response(DeleteResponse(Error.COORDINATOR_LOAD_IN_PROGRESS), version)
    core = state.core
    answer = await state.engine.call(
        lambda ticket, now: core.delete_group(group_id, ticket, now),
        lambda: DeleteResponse(Error.COORDINATOR_NOT_AVAILABLE),
        group_id,
    )
    return answer_response(answer, version)


_EXPECTED_MEMBERS = RequestCodec(ExpectedMembersRequest)


async def put_expected_members(request: web.Request) -> web.Response:
    state, group_id = _group_route(request, Access.ADMIN)
    ids = (await _decoded(state, request, _EXPECTED_MEMBERS)).group_instance_ids
    if state.loading():
        return answer_response(ExpectedMembersResponse(Error.COORDINATOR_LOAD_IN_PROGRESS), 0)
    core = state.core
    answer = await state.engine.call(
        lambda ticket, now: core.put_expected_members(group_id, ids, ticket, now),
        lambda: ExpectedMembersResponse(Error.COORDINATOR_NOT_AVAILABLE),
        group_id,
    )
    return answer_response(answer, 0)


async def get_expected_members(request: web.Request) -> web.Response:
    state, group_id = _group_route(request, Access.ADMIN)
    if state.loading():
        return answer_response(ExpectedMembersResponse(Error.COORDINATOR_LOAD_IN_PROGRESS), 0)
    return answer_response(state.core.get_expected_members(group_id), 0)


async def delete_expected_members(request: web.Request) -> web.Response:
    state, group_id = _group_route(request, Access.ADMIN)
    if state.loading():
        return answer_response(ExpectedMembersResponse(Error.COORDINATOR_LOAD_IN_PROGRESS), 0)
    core = state.core
    answer = await state.engine.call(
        lambda ticket, now: core.delete_expected_members(group_id, ticket, now),
        lambda: ExpectedMembersResponse(Error.COORDINATOR_NOT_AVAILABLE),
        group_id,
    )
    return answer_response(answer, 0)


# ------------------------------------------------------------------------------------- config, docs, journal


async def get_config(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.authorize(request.headers, Access.TOKEN)
    c = state.config.core
    return struct_response(
        ConfigResponse(
            group_min_session_timeout_ms=c.group_min_session_timeout_ms,
            group_max_session_timeout_ms=c.group_max_session_timeout_ms,
            group_max_size=c.group_max_size,
            group_initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
            new_member_join_timeout_ms=c.new_member_join_timeout_ms,
            offset_metadata_max_bytes=c.offset_metadata_max_bytes,
            api_versions=dict(API_VERSIONS),
        )
    )


async def get_openapi(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.authorize(request.headers, Access.TOKEN)
    config = state.config
    document = openapi_document(manual_clock=config.manual_clock, auth=config.tokens is not None, limits=config.limits)
    return struct_response(document)


async def journal(request: web.Request) -> web.Response:
    """A page of the journal; with ``wait_ms`` and nothing after ``after``, a long-poll (docs/api.md §8)."""
    state = request.app[STATE]
    state.authorize(request.headers, Access.ADMIN)
    after = _query_int(request, "after", 0, 0, 2**63 - 1)
    limit = _query_int(request, "limit", JOURNAL_DEFAULT_LIMIT, 0, JOURNAL_MAX_LIMIT)
    wait_ms = _query_int(request, "wait_ms", 0, 0, JOURNAL_MAX_WAIT_MS)
    state.refuse_if_closed()
    if wait_ms and state.journal.last_seq() <= after:
        await state.journal_polls.wait(after, wait_ms)
    lines = await asyncio.get_running_loop().run_in_executor(None, state.journal.journal_lines, after, limit)
    last = _seq_of(lines[-1]) if lines else after
    return json_response(b'{"events":[' + ",".join(lines).encode() + b'],"next":' + str(last).encode() + b"}")


def _seq_of(line: str) -> int:
    # A journal line starts with its seq: {"seq":123,...} (docs/formats.md "Journal events").
    return int(line[7 : line.index(",", 7)] if "," in line else line[7:-1])


# ---------------------------------------------------------------------------------------- tests, operations

_CLOCK = RequestCodec(ClockRequest)
_FAULTS = RequestCodec(StoreFaultsRequest)


async def debug_clock(request: web.Request) -> web.Response:
    """Advance the manual clock (docs/api.md §9): every due timer fires, its work is done, then the answer."""
    state = request.app[STATE]
    advance_ms = (await _decoded(state, request, _CLOCK)).advance_ms
    state.refuse_if_closed()
    await state.loaded.wait()
    now_ms = await state.engine.advance(advance_ms)
    state.journal_polls.expire(now_ms)
    return struct_response(ClockResponse(now_ms))


async def debug_store(request: web.Request) -> web.Response:
    """Tests only (with ``--manual-clock``): make the disk fail, stay failed, or stall (docs/api.md §9)."""
    state = request.app[STATE]
    wanted = await _decoded(state, request, _FAULTS)
    faults = state.faults
    if faults is None:
        raise not_found("path: this store has no fault injection")
    if wanted.fail_next is not None:
        faults.fail_next(wanted.fail_next)
    if wanted.failing is not None:
        faults.set_failing(wanted.failing)
    if wanted.stalled is not None:
        faults.set_stalled(wanted.stalled)
    return struct_response(StoreFaultsResponse(faults.injected))


_OK = encode(StatusResponse("ok"))
_READY = encode(StatusResponse("ready"))


async def healthz(request: web.Request) -> web.Response:
    return json_response(_OK)


async def readyz(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if state.started and state.engine.ready and not state.engine.closing:
        return json_response(_READY)
    return struct_response(StatusResponse("loading" if not state.loaded.is_set() else "stopping"), status=503)


async def metrics(request: web.Request) -> web.Response:
    state = request.app[STATE]
    return web.Response(text=state.metrics.render(lambda: _gauges(state)), content_type="text/plain", charset="utf-8")


def _gauges(state: CoordinatorServer) -> list[tuple[str, str, dict[str, str], float]]:
    core = state.core
    by_state = core.groups_by_state()
    rows: list[tuple[str, str, dict[str, str], float]] = [
        ("berth_groups", "gauge", {"state": name}, float(by_state.get(name, 0)))
        for name in ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable")
    ]
    rows.append(("berth_members", "gauge", {}, float(core.member_count())))
    rows.extend(
        ("berth_rebalances_total", "counter", {"cause": cause}, float(n))
        for cause, n in sorted(core.rebalances_by_cause.items())
    )
    if state.started:
        rows.append(("berth_parked_requests", "gauge", {}, float(state.engine.parked)))
        rows.append(("berth_store_writes_in_flight", "gauge", {}, float(state.engine.writes_in_flight)))
    rows.append(("berth_parked_journal_polls", "gauge", {}, float(state.journal_polls.parked)))
    rows.append(("berth_ready", "gauge", {}, 1.0 if state.loaded.is_set() else 0.0))
    return rows


VIEWS: dict[str, View] = {
    **{operation: _protocol_app_view(protocol) for operation, protocol in PROTOCOL_ROUTES.items()},
    "offset_fetch": fetch_offsets,
    "describe": describe,
    "delete": delete_group,
    "expected_members_put": put_expected_members,
    "expected_members_get": get_expected_members,
    "expected_members_delete": delete_expected_members,
    "list": list_groups,
    "config": get_config,
    "openapi": get_openapi,
    "journal": journal,
    "debug_clock": debug_clock,
    "debug_store": debug_store,
    "healthz": healthz,
    "readyz": readyz,
    "metrics": metrics,
}
