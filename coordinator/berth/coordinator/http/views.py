"""The application's views: one per route of ``protocol.routes.ROUTES``, each a thin translation to the core and
back (the group protocol's POST routes come from ``protocol_views``). ``VIEWS`` maps operation ids to views.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web

from berth.coordinator.http import health
from berth.coordinator.http.audit import acting_as
from berth.coordinator.http.connections import client_of
from berth.coordinator.http.errors import (
    GroupOwnedError,
    bad_request,
    from_invalid,
    not_coordinator,
    not_found,
    store_unreadable,
)
from berth.coordinator.http.protocol_views import (
    PROTOCOL_ROUTES,
    ProtocolRoute,
    group_id_of,
    protocol_view,
    refuse_unless_owner,
)
from berth.coordinator.http.responses import answer_response, json_response, not_served, struct_response
from berth.coordinator.http.state import STATE, CoordinatorServer
from berth.coordinator.protocol import (
    API_VERSIONS,
    FETCH_DEFAULT_LIMIT,
    FETCH_MAX_LIMIT,
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
    InvalidRequest,
    ListResponse,
    OffsetFetchResponse,
    OwnerReleaseRequest,
    OwnerRequest,
    OwnerResponse,
    StoreFaultsRequest,
    StoreFaultsResponse,
    parse_fetch_cursor,
)
from berth.coordinator.protocol.codec import RequestCodec, query_api_version, query_int
from berth.coordinator.protocol.openapi import openapi_document
from berth.coordinator.protocol.routes import (
    JOURNAL_DEFAULT_LIMIT,
    JOURNAL_MAX_LIMIT,
    JOURNAL_MAX_WAIT_MS,
    Access,
)
from berth.coordinator.store import StoreError

log = logging.getLogger("berth.coordinator")

B = TypeVar("B", bound=Body)
B_contra = TypeVar("B_contra", bound=Body, contravariant=True)
View = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _protocol_app_view(protocol: ProtocolRoute[Any]) -> View:
    async def view(request: web.Request) -> web.Response:
        state = request.app[STATE]
        return await protocol_view(state, request, protocol, group_id_of(raw_group_segment(request)))

    return view


# ------------------------------------------------------------------------------------------ group reads, admin


def raw_group_segment(request: web.BaseRequest) -> str:
    return request.raw_path.split("?", 1)[0].split("/")[3]


#: Where a request keeps the name of the token it was authorized with (the ``actor`` of its journal events).
_ACTOR = "berth.actor"


def _group_route(request: web.Request, access: Access = Access.GROUP) -> tuple[CoordinatorServer, GroupId]:
    state = request.app[STATE]
    group_id = group_id_of(raw_group_segment(request))
    principal = state.authorize(request, access, group_id)
    if principal is not None:
        request[_ACTOR] = principal.name
    return state, group_id


def _actor(request: web.Request) -> str | None:
    actor: str | None = request.get(_ACTOR)
    return actor


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
    """One page of the group's offsets (docs/api.md §4): ``?after=`` the previous page's ``next``, ``?limit=``."""
    state, group_id = _group_route(request)
    version = _version(request, "offset_fetch")
    topics = tuple(request.query.getall("topic", [])) or None
    limit = _query_int(request, "limit", FETCH_DEFAULT_LIMIT, 1, FETCH_MAX_LIMIT)
    cursor = request.query.get("after")
    try:
        after = None if cursor is None else parse_fetch_cursor(cursor)
    except InvalidRequest as exc:
        raise from_invalid(exc) from None
    if (unserved := state.not_serving()) is not None:
        return not_served(OffsetFetchResponse(unserved), version)
    answer = await state.engine.read(
        group_id,
        lambda: state.core.fetch_offsets(group_id, topics, after, limit),
        lambda: OffsetFetchResponse(Error.COORDINATOR_NOT_AVAILABLE),
    )
    return answer_response(answer, version)


async def describe(request: web.Request) -> web.Response:
    state, group_id = _group_route(request)
    version = _version(request, "describe")
    if (unserved := state.not_serving()) is not None:
        return not_served(DescribeResponse(unserved, group_id=group_id, group_state=""), version)
    answer = await state.engine.read(
        group_id,
        lambda: state.core.describe(group_id),
        lambda: DescribeResponse(Error.COORDINATOR_NOT_AVAILABLE, group_id=group_id, group_state=""),
    )
    return answer_response(answer, version)


async def list_groups(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.authorize(request, Access.ADMIN)
    version = _version(request, "list")
    if (unserved := state.not_serving()) is not None:
        return not_served(ListResponse(unserved), version)
    states = request.query.getall("state", [])
    answer = await state.engine.read(
        None, lambda: state.core.list_groups(states), lambda: ListResponse(Error.COORDINATOR_NOT_AVAILABLE)
    )
    return answer_response(answer, version)


async def delete_group(request: web.Request) -> web.Response:
    state, group_id = _group_route(request, Access.ADMIN)
    version = _version(request, "delete")
    if (unserved := state.not_serving()) is not None:
        return not_served(DeleteResponse(unserved), version)
    core, engine = state.core, state.engine
    await refuse_unless_owner(request, state, group_id)
    answer = await engine.call(
        acting_as(_actor(request), lambda ticket, now: core.delete_group(group_id, ticket, now)),
        lambda: DeleteResponse(Error.COORDINATOR_NOT_AVAILABLE),
        group_id,
    )
    return answer_response(answer, version)


_EXPECTED_MEMBERS = RequestCodec(ExpectedMembersRequest)


async def put_expected_members(request: web.Request) -> web.Response:
    state, group_id = _group_route(request, Access.ADMIN)
    ids = (await _decoded(state, request, _EXPECTED_MEMBERS)).group_instance_ids
    if (unserved := state.not_serving()) is not None:
        return not_served(ExpectedMembersResponse(unserved), 0)
    core, engine = state.core, state.engine
    await refuse_unless_owner(request, state, group_id)
    answer = await engine.call(
        acting_as(_actor(request), lambda ticket, now: core.put_expected_members(group_id, ids, ticket, now)),
        lambda: ExpectedMembersResponse(Error.COORDINATOR_NOT_AVAILABLE),
        group_id,
    )
    return answer_response(answer, 0)


async def get_expected_members(request: web.Request) -> web.Response:
    state, group_id = _group_route(request, Access.ADMIN)
    if (unserved := state.not_serving()) is not None:
        return not_served(ExpectedMembersResponse(unserved), 0)
    answer = await state.engine.read(
        group_id,
        lambda: state.core.get_expected_members(group_id),
        lambda: ExpectedMembersResponse(Error.COORDINATOR_NOT_AVAILABLE),
    )
    return answer_response(answer, 0)


async def delete_expected_members(request: web.Request) -> web.Response:
    state, group_id = _group_route(request, Access.ADMIN)
    if (unserved := state.not_serving()) is not None:
        return not_served(ExpectedMembersResponse(unserved), 0)
    core, engine = state.core, state.engine
    await refuse_unless_owner(request, state, group_id)
    answer = await engine.call(
        acting_as(_actor(request), lambda ticket, now: core.delete_expected_members(group_id, ticket, now)),
        lambda: ExpectedMembersResponse(Error.COORDINATOR_NOT_AVAILABLE),
        group_id,
    )
    return answer_response(answer, 0)


# ---------------------------------------------------------------------------------------------------- owners
# docs/api.md §7a. Each refusal is checked right before its core call, with no await in between: what was checked
# is what the call finds.

_OWNER = RequestCodec(OwnerRequest)
_RELEASE = RequestCodec(OwnerReleaseRequest)


async def put_owner(request: web.Request) -> web.Response:
    state, group_id = _group_route(request, Access.ADMIN)
    claim = await _decoded(state, request, _OWNER)
    if (unserved := state.not_serving()) is not None:
        return not_served(OwnerResponse(unserved), 0)
    core, engine = state.core, state.engine
    await engine.settled(group_id)  # the owner checked is a durable one
    refusal = core.owner_claim_refusal(group_id, claim.uid, claim.adopt)
    if refusal is not None:
        raise GroupOwnedError(refusal)
    answer = await engine.call(
        acting_as(
            _actor(request), lambda ticket, now: core.claim_owner(group_id, claim.owner, claim.adopt, ticket, now)
        ),
        lambda: OwnerResponse(Error.COORDINATOR_NOT_AVAILABLE),
        group_id,
    )
    return answer_response(answer, 0)


async def delete_owner(request: web.Request) -> web.Response:
    state, group_id = _group_route(request, Access.ADMIN)
    uid = request.query.get("uid")
    if uid is None and request.can_read_body:
        uid = (await _decoded(state, request, _RELEASE)).uid
    if not uid:
        raise bad_request("uid: required (the query's ?uid= or the body's uid), naming the owner that lets go")
    if (unserved := state.not_serving()) is not None:
        return not_served(OwnerResponse(unserved), 0)
    core, engine = state.core, state.engine
    await engine.settled(group_id)
    refusal = core.owner_release_refusal(group_id, uid)
    if refusal is not None:
        raise GroupOwnedError(refusal)
    answer = await engine.call(
        acting_as(_actor(request), lambda ticket, now: core.release_owner(group_id, uid, ticket, now)),
        lambda: OwnerResponse(Error.COORDINATOR_NOT_AVAILABLE),
        group_id,
    )
    return answer_response(answer, 0)


# ------------------------------------------------------------------------------------- config, docs, journal


async def get_config(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.authorize(request, Access.TOKEN)
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
            member_metadata_max_bytes=state.config.limits.max_member_metadata_bytes,
            group_metadata_max_bytes=c.group_metadata_max_bytes,
            max_groups=c.max_groups,
            offsets_retention_ms=c.offsets_retention_ms,
            journal_event_max_bytes=c.journal_event_max_bytes,
            journal_page_max_bytes=state.config.journal_page_max_bytes,
            offsets_max_per_group=c.offsets_max_per_group,
            offsets_max_bytes_per_group=c.offsets_max_bytes_per_group,
            max_stored_bytes=c.max_stored_bytes,
            max_stored_bytes_per_token=c.max_stored_bytes_per_tenant,
            max_groups_per_token=c.max_groups_per_tenant,
            max_pending_members_per_group=c.max_pending_members_per_group,
            pending_member_timeout_ms=c.pending_member_timeout_ms,
        )
    )


async def get_openapi(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.authorize(request, Access.TOKEN)
    config = state.config
    document = openapi_document(manual_clock=config.manual_clock, auth=config.tokens is not None, limits=config.limits)
    return struct_response(document)


async def journal(request: web.Request) -> web.Response:
    """A page of the journal; with ``wait_ms`` and nothing after ``after``, a long-poll (docs/api.md §8)."""
    state = request.app[STATE]
    principal = state.authorize(request, Access.JOURNAL)
    after = _query_int(request, "after", 0, 0, 2**63 - 1)
    limit = _query_int(request, "limit", JOURNAL_DEFAULT_LIMIT, 0, JOURNAL_MAX_LIMIT)
    wait_ms = _query_int(request, "wait_ms", 0, 0, JOURNAL_MAX_WAIT_MS)
    state.refuse_if_closed()
    _refuse_unless_serving_journal(state)
    if wait_ms and state.journal.last_seq() <= after:
        # Parked per token (per client without tokens): one reader cannot take the places of the others.
        holder = principal.name if principal is not None else client_of((request.remote or "",))
        admin = principal is not None and principal.admin
        await state.journal_polls.wait(after, wait_ms, holder, admin)
        _refuse_unless_serving_journal(state)  # the term may have ended while it waited
    max_bytes = state.config.journal_page_max_bytes
    try:
        window = await asyncio.get_running_loop().run_in_executor(
            None, state.journal.journal_window, after, limit, max_bytes
        )
    except StoreError as exc:
        log.warning("journal: %s", exc)
        raise store_unreadable() from None
    lines = window.lines
    page_end = _seq_of(lines[-1]) if lines else after
    tail = f'],"next":{page_end},"first":{window.first},"last":{window.last}}}'
    return json_response(b'{"events":[' + ",".join(lines).encode() + tail.encode())


def _refuse_unless_serving_journal(state: CoordinatorServer) -> None:
    """Only the active replica of a replicated store reads the journal (a standby's view of it is not kept): 503
    NOT_COORDINATOR elsewhere. The single replica reads its journal while it loads, as before."""
    if state.leadership.replicated and not state.stopping and state.not_serving() is not None:
        raise not_coordinator()


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
    """Tests only (with ``--manual-clock``): make the disk fail, stay failed, stall, or fail reads (docs/api.md §9)."""
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
    if wanted.reads_failing is not None:
        faults.set_reads_failing(wanted.reads_failing)
    return struct_response(StoreFaultsResponse(faults.injected))


async def healthz(request: web.Request) -> web.Response:
    return health.liveness()


async def readyz(request: web.Request) -> web.Response:
    return health.readiness(request.app[STATE])


async def metrics(request: web.Request) -> web.Response:
    return health.prometheus_text(request.app[STATE])


VIEWS: dict[str, View] = {
    **{operation: _protocol_app_view(protocol) for operation, protocol in PROTOCOL_ROUTES.items()},
    "offset_fetch": fetch_offsets,
    "describe": describe,
    "delete": delete_group,
    "expected_members_put": put_expected_members,
    "expected_members_get": get_expected_members,
    "expected_members_delete": delete_expected_members,
    "owner_put": put_owner,
    "owner_delete": delete_owner,
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
