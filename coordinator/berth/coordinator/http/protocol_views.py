"""The group protocol's POST routes (join, sync, heartbeat, leave, offsets), served by one view.

``protocol_view``: group id -> auth -> body -> decode (400, or in-band 35) -> loading? (in-band 14) -> shutting
down? (503) -> the core call under a ticket -> the durable answer, encoded for the request's version (docs/api.md
§3-§5). ``PROTOCOL_ROUTES`` says, per route, how to decode it, which core method answers it and how it is refused.
The low-level front serves these routes; the application registers them too and answers them identically.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import unquote_to_bytes

from aiohttp import web

from berth.coordinator.core import Coordinator, Effects
from berth.coordinator.http.audit import acting_as
from berth.coordinator.http.auth import Principal
from berth.coordinator.http.errors import GroupOwnedError, bad_request, from_invalid
from berth.coordinator.http.responses import answer_response, not_served
from berth.coordinator.http.state import CoordinatorServer
from berth.coordinator.protocol import (
    Answer,
    Body,
    Error,
    GroupId,
    HeartbeatRequest,
    HeartbeatResponse,
    InvalidRequest,
    JoinRequest,
    JoinResponse,
    LeaveRequest,
    LeaveResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncRequest,
    SyncResponse,
)
from berth.coordinator.protocol.codec import CarriesTooNew, RequestCodec
from berth.coordinator.protocol.routes import OWNER_UID_HEADER, ROUTES_BY_OPERATION, Access, Route

B = TypeVar("B", bound=Body)
B_contra = TypeVar("B_contra", bound=Body, contravariant=True)


def group_id_of(raw_segment: str) -> GroupId:
    """The group id, percent-decoded from its raw path segment: a group id may hold any UTF-8, '/' included."""
    if raw_segment.isascii() and "%" not in raw_segment:
        return GroupId(raw_segment)
    try:
        return GroupId(unquote_to_bytes(raw_segment).decode("utf-8"))
    except (UnicodeDecodeError, UnicodeEncodeError):
        raise bad_request("group_id: not valid UTF-8 after percent-decoding") from None


class CoreCall(Protocol[B_contra]):
    """A core method of the group protocol, unbound: ``Coordinator.heartbeat`` and its siblings."""

    def __call__(
        self, core: Coordinator, group_id: GroupId, request: B_contra, version: int, ticket: int, now_ms: int, /
    ) -> Effects: ...


class HostCall(Protocol[B_contra]):
    """A core method that also records the member's address (``Coordinator.join``) and may create a group for the
    request's tenant."""

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
        tenant: str | None,
    ) -> Effects: ...


class TenantCall(Protocol[B_contra]):
    """A core method that may create a group for the request's tenant (``Coordinator.commit_offsets``)."""

    def __call__(
        self,
        core: Coordinator,
        group_id: GroupId,
        request: B_contra,
        version: int,
        ticket: int,
        now_ms: int,
        /,
        tenant: str | None,
    ) -> Effects: ...


@dataclass(frozen=True, slots=True)
class ProtocolRoute(Generic[B]):
    """One of the five POST routes of the group protocol: how to decode it, call the core, and refuse it."""

    route: Route
    codec: RequestCodec[B]
    call: CoreCall[B]
    refuse: Callable[[B, Error], Answer]  # the route's answer carrying just an error
    host_call: HostCall[B] | None = None  # the peer's address is looked up only for the call that records it
    tenant_call: TenantCall[B] | None = None  # a call that may create a group: it learns the request's tenant
    plain: bool = field(init=False)  # neither of the two above: ``call`` alone (heartbeat, sync, leave)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plain", self.host_call is None and self.tenant_call is None)

    audited: bool = False  # its journal events carry the acting token's name (an admin removal is a leave)
    timed_per_group: bool = False  # its latency goes into the group's histogram (join, sync: the rebalance wait)


async def refuse_unless_owner(request: web.BaseRequest, state: CoordinatorServer, group_id: GroupId) -> None:
    """HTTP 409 GROUP_OWNED when the request asserts an owner (``Berth-Owner-Uid``) the group refuses
    (docs/api.md §7a); nothing to check without the header. Call it right before the core call: it waits until the
    group's owner is durable (no write of the group in flight), and nothing awaits between the check and the call."""
    uid = request.headers.get(OWNER_UID_HEADER)
    if uid is None:
        return
    await state.engine.settled(group_id)
    refusal = state.core.owner_assertion_refusal(group_id, uid)
    if refusal is not None:
        raise GroupOwnedError(refusal)


async def protocol_view(
    state: CoordinatorServer,
    request: web.BaseRequest,
    protocol: ProtocolRoute[B],
    group_id: GroupId,
    *,
    answer_expect: bool = False,
) -> web.Response:
    started = time.perf_counter() if protocol.timed_per_group else 0.0
    principal = None if state.config.tokens is None else state.authorize(request, Access.GROUP, group_id)
    raw = await state.read_body(request, answer_expect=answer_expect)
    try:
        req, version = protocol.codec.decode(raw, state.config.limits)
    except CarriesTooNew as exc:
        refused: B = exc.request  # type: ignore[assignment]  # decoded by this route's codec
        return answer_response(protocol.refuse(refused, Error.UNSUPPORTED_VERSION), exc.version)
    except InvalidRequest as exc:
        raise from_invalid(exc) from None
    engine = state.running_engine
    if engine is None or not engine.ready or engine.closing:
        refusal = state.not_serving() or Error.COORDINATOR_LOAD_IN_PROGRESS  # (a term that ends in between)
        return not_served(protocol.refuse(req, refusal), version)
    if protocol.route.owned:
        await refuse_unless_owner(request, state, group_id)  # the leave by instance ids of an operator
    # partial, not lambdas: one Python frame less per request, and nothing built twice.
    invoke: Callable[[int, int], Effects]
    if protocol.plain:  # the heartbeat's way: one test, as before tenants
        invoke = partial(protocol.call, state.core, group_id, req, version)
    elif protocol.host_call is not None:
        host = request.remote or ""
        invoke = partial(
            protocol.host_call, state.core, group_id, req, version, client_host=host, tenant=tenant_of(principal)
        )
    else:
        assert protocol.tenant_call is not None
        invoke = partial(protocol.tenant_call, state.core, group_id, req, version, tenant=tenant_of(principal))
    if protocol.audited and principal is not None:
        invoke = acting_as(principal.name, invoke)
    answer = await engine.call(invoke, partial(protocol.refuse, req, Error.COORDINATOR_NOT_AVAILABLE), group_id)
    if protocol.timed_per_group:
        state.metrics.groups.observe(protocol.route.operation, group_id, time.perf_counter() - started)
    return answer_response(answer, version)


def tenant_of(principal: Principal | None) -> str | None:
    """The tenant a group created for this request counts towards (docs/api.md §6): a non-admin token's name; an
    admin token's groups, and every group without tokens, belong to no tenant."""
    return None if principal is None or principal.admin else principal.name


_HEARTBEAT_ANSWERS = {error: HeartbeatResponse(error) for error in Error}

PROTOCOL_ROUTES: dict[str, ProtocolRoute[Any]] = {
    "join": ProtocolRoute(
        ROUTES_BY_OPERATION["join"],
        RequestCodec(JoinRequest, "join"),
        Coordinator.join,
        lambda req, error: JoinResponse(error, member_id=req.member_id),
        host_call=Coordinator.join,
        timed_per_group=True,
    ),
    "sync": ProtocolRoute(
        ROUTES_BY_OPERATION["sync"],
        RequestCodec(SyncRequest, "sync"),
        Coordinator.sync,
        lambda _, error: SyncResponse(error),
        timed_per_group=True,
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
        audited=True,
    ),
    "offsets": ProtocolRoute(
        ROUTES_BY_OPERATION["offsets"],
        RequestCodec(OffsetCommitRequest, "offsets"),
        Coordinator.commit_offsets,
        OffsetCommitResponse.refusing,
        tenant_call=Coordinator.commit_offsets,
    ),
}
