"""The aiohttp application: routing, the request pipeline and the error contract of API.md §1.

Pipeline of a group route: route match (404/405) -> group id from the raw path (400 if not UTF-8) ->
auth (401/403) -> body (415/413/400) -> decode (400, or in-band 35) -> loading? (in-band 14) ->
shutting down? (503) -> core call with a ticket -> await the durable answer -> render for the version.
No request, however malformed, reaches the core without passing this pipeline, and none can crash it:
unexpected exceptions become a generic 500 and a log line, never a stack trace to the client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import unquote_to_bytes

from aiohttp import web

from berth.coordinator.core import Coordinator, Effects
from berth.coordinator.core.model import (
    DeleteResponse,
    ExpectedMembersResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinRequest,
    JoinResponse,
    LeaveRequest,
    LeaveResponse,
    OffsetCommitRequest,
    OffsetFetchResponse,
    Response,
    SyncRequest,
    SyncResponse,
)
from berth.coordinator.core.offsets import commit_error_response
from berth.coordinator.http import decode
from berth.coordinator.http.auth import Principal
from berth.coordinator.http.clock import Clock
from berth.coordinator.http.config import ServerConfig
from berth.coordinator.http.engine import Engine, WriterPort, WritesDone
from berth.coordinator.http.errors import (
    HttpError,
    bad_request,
    forbidden,
    method_not_allowed,
    not_found,
    request_timeout,
    shutting_down,
    too_large,
    unauthorized,
    unsupported_media_type,
)
from berth.coordinator.http.metrics import Metrics
from berth.coordinator.http.openapi import openapi_document
from berth.coordinator.http.render import render
from berth.coordinator.protocol import API_VERSIONS, Error

log = logging.getLogger("berth.coordinator")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Server:
    """Everything a handler needs; one per application."""

    def __init__(
        self,
        config: ServerConfig,
        clock: Clock,
        core: Coordinator,
        make_writer: Callable[[WritesDone], WriterPort],
        load_records: Callable[[Coordinator], None],
        journal_page: Callable[[int, int], list[dict[str, Any]]],
    ) -> None:
        self.config = config
        self.clock = clock
        self.core = core
        self.metrics = Metrics()
        self._make_writer = make_writer
        self._load_records = load_records
        self.journal_page = journal_page
        self._engine: Engine | None = None
        self.loaded = asyncio.Event()

    @property
    def engine(self) -> Engine:
        assert self._engine is not None, "the engine starts with the application"
        return self._engine

    async def start(self, _app: web.Application) -> None:
        def count_failure() -> None:
            self.metrics.write_failures += 1

        self._engine = Engine(self.core, self.clock, self._make_writer, count_failure)
        asyncio.get_running_loop().create_task(self._load())

    async def _load(self) -> None:
        started = time.perf_counter()
        try:
            await asyncio.get_running_loop().run_in_executor(None, self._load_records, self.core)
        except Exception:
            log.exception("loading persisted state failed")
            raise
        self.engine.apply(self.core.load((), self.clock.now_ms()))
        self.engine.ready = True
        self.loaded.set()
        log.info(
            "loaded %d groups, %d members in %.2f s",
            len(self.core.groups),
            self.core.member_count(),
            time.perf_counter() - started,
        )

    async def stop(self, _app: web.Application) -> None:
        if self._engine is not None:
            await self._engine.shutdown()

    # ------------------------------------------------------------------------------------- pipeline

    def authorize(self, request: web.Request, group_id: str | None = None, admin: bool = False) -> None:
        tokens = self.config.tokens
        if tokens is None:
            return
        principal: Principal | None = tokens.authenticate(request.headers.get("Authorization"))
        if principal is None:
            raise unauthorized("Authorization: a valid 'Bearer <token>' header is required")
        if admin and not principal.admin:
            raise forbidden(f"Authorization: token {principal.fingerprint} is not an admin token")
        if group_id is not None and not principal.may_use_group(group_id):
            raise forbidden(f"Authorization: token {principal.fingerprint} may not use this group")

    def check_open(self) -> None:
        if self._engine is not None and self._engine.closing:
            raise shutting_down()

    async def read_json(self, request: web.Request) -> Any:
        length = request.content_length
        if length is not None and length > self.config.max_body_bytes:
            raise too_large(f"body: {length} bytes is over the {self.config.max_body_bytes}-byte limit")
        try:
            if request.content.is_eof():  # the whole body is here (nearly always): no timer to arm and cancel
                raw = await request.read()
            else:
                async with asyncio.timeout(self.config.body_timeout_s):
                    raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise too_large(f"body: over the {self.config.max_body_bytes}-byte limit") from None
        except TimeoutError:
            raise request_timeout(f"body: not received within {self.config.body_timeout_s:g} s") from None
        if not raw:
            raise bad_request("body: empty, expected a JSON object")
        content_type = request.headers.get("Content-Type")
        if content_type is None or content_type.split(";", 1)[0].strip().lower() != "application/json":
            raise unsupported_media_type("Content-Type: must be application/json")
        try:
            return _decode_json(raw.decode("utf-8"))
        except RecursionError:
            raise bad_request("body: JSON nested too deeply") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise bad_request(f"body: not valid JSON ({str(exc)[:120]})") from None

    def loading_or_closed(self) -> bool:
        """True while persisted state is still loading (answer in-band 14); raises 503 when shutting down."""
        self.check_open()
        return not self.engine.ready

    async def call(
        self, invoke: Callable[[int, int], Effects], unavailable: Response, group_id: str | None = None
    ) -> Response:
        return await self.engine.call(invoke, unavailable, group_id)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


_decode_json = json.JSONDecoder(parse_constant=_reject_constant).decode  # built once: loads(**kw) builds one per call


_JSON_HEADERS = {"Content-Type": "application/json"}
_encode_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=_encode_json(body).encode("utf-8"), status=status, headers=_JSON_HEADERS)


_ERROR_ONLY_BODIES = {error: _encode_json({"error_code": int(error), "error": error.name}).encode() for error in Error}


def error_only_response(error: Error) -> web.Response:
    """Heartbeat and delete answers are just an error code: their bodies are encoded once, at import."""
    return web.Response(body=_ERROR_ONLY_BODIES[error], headers=_JSON_HEADERS)


def group_id_of(request: web.Request) -> str:
    """The group id, percent-decoded from the raw path: a group id may hold any UTF-8, '/' included."""
    raw_segment = request.raw_path.split("?", 1)[0].split("/")[3]
    try:
        return unquote_to_bytes(raw_segment).decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request("group_id: not valid UTF-8 after percent-decoding") from None


# ---------------------------------------------------------------------------------------------- handlers

SERVER: web.AppKey[Server] = web.AppKey("server", Server)


class _ProtocolRequest(Protocol):
    @property
    def group_id(self) -> str: ...

    @property
    def api_version(self) -> int: ...


R = TypeVar("R", bound=_ProtocolRequest)


@dataclass(frozen=True)
class ProtocolRoute(Generic[R]):
    """One of the five POST routes of the group protocol: how to decode it, call the core, and shape an error."""

    decode: Callable[[str, object, decode.Limits, str], R]  # (group id, body, limits, client host)
    invoke: Callable[[Coordinator, R, int, int], Effects]  # (core, request, ticket, now)
    answer: Callable[[R, Error], Response]  # the route's response carrying just an error


def protocol_handler(route: ProtocolRoute[R]) -> Handler:
    """The pipeline of a protocol POST (module docstring), the same for join, sync, heartbeat, leave and commit."""

    async def handle(request: web.Request) -> web.Response:
        s, group_id = _group_route(request)
        body = await s.read_json(request)
        try:
            req = route.decode(group_id, body, s.config.limits, request.remote or "")
        except decode.InBandError as exc:
            return respond(exc.response, exc.api_version)
        if s.loading_or_closed():
            return respond(route.answer(req, Error.COORDINATOR_LOAD_IN_PROGRESS), req.api_version)
        response = await s.call(
            lambda ticket, now: route.invoke(s.core, req, ticket, now),
            route.answer(req, Error.COORDINATOR_NOT_AVAILABLE),
            req.group_id,
        )
        return respond(response, req.api_version)

    return handle


JOIN: ProtocolRoute[JoinRequest] = ProtocolRoute(
    decode.decode_join, Coordinator.join, lambda req, error: JoinResponse(error, member_id=req.member_id)
)
SYNC: ProtocolRoute[SyncRequest] = ProtocolRoute(
    lambda group, body, limits, _: decode.decode_sync(group, body, limits),
    Coordinator.sync,
    lambda _, e: SyncResponse(e),
)
HEARTBEAT: ProtocolRoute[HeartbeatRequest] = ProtocolRoute(
    lambda group, body, limits, _: decode.decode_heartbeat(group, body, limits),
    Coordinator.heartbeat,
    lambda _, error: HeartbeatResponse(error),
)
LEAVE: ProtocolRoute[LeaveRequest] = ProtocolRoute(
    lambda group, body, limits, _: decode.decode_leave(group, body, limits),
    Coordinator.leave,
    lambda _, e: LeaveResponse(e),
)
COMMIT: ProtocolRoute[OffsetCommitRequest] = ProtocolRoute(
    lambda group, body, limits, _: decode.decode_commit(group, body, limits),
    Coordinator.commit_offsets,
    commit_error_response,
)


def respond(response: Response, version: int) -> web.Response:
    if isinstance(response, HeartbeatResponse | DeleteResponse):
        return error_only_response(response.error)  # bodies encoded once, at import
    return json_response(render(response, version))


async def fetch_offsets(request: web.Request) -> web.Response:
    s, group_id = _group_route(request)
    version = decode.query_api_version(request.query, "offset_fetch")
    topics = tuple(request.query.getall("topic", [])) or None
    if s.loading_or_closed():
        return json_response(render(OffsetFetchResponse(Error.COORDINATOR_LOAD_IN_PROGRESS), version))
    return json_response(render(s.core.fetch_offsets(group_id, topics), version))


async def describe(request: web.Request) -> web.Response:
    s, group_id = _group_route(request)
    version = decode.query_api_version(request.query, "describe")
    if s.loading_or_closed():
        error = Error.COORDINATOR_LOAD_IN_PROGRESS
        return json_response({"error_code": int(error), "error": error.name, "group_id": group_id})
    return json_response(render(s.core.describe(group_id), version))


async def list_groups(request: web.Request) -> web.Response:
    s = request.app[SERVER]
    s.authorize(request, admin=True)
    version = decode.query_api_version(request.query, "list")
    states = request.query.getall("state", [])
    if s.loading_or_closed():
        error = Error.COORDINATOR_LOAD_IN_PROGRESS
        return json_response({"error_code": int(error), "error": error.name, "groups": []})
    return json_response(render(s.core.list_groups(states), version))


async def delete_group(request: web.Request) -> web.Response:
    s, group_id = _group_route(request, admin=True)
    version = decode.query_api_version(request.query, "delete")
    if s.loading_or_closed():
        return json_response(render(DeleteResponse(Error.COORDINATOR_LOAD_IN_PROGRESS), version))
    response = await s.call(
        lambda ticket, now: s.core.delete_group(group_id, ticket, now),
        DeleteResponse(Error.COORDINATOR_NOT_AVAILABLE),
        group_id,
    )
    return json_response(render(response, version))


async def put_expected_members(request: web.Request) -> web.Response:
    s, group_id = _group_route(request, admin=True)
    ids = decode.decode_expected_members(await s.read_json(request), s.config.limits)
    if s.loading_or_closed():
        return json_response(render(ExpectedMembersResponse(Error.COORDINATOR_LOAD_IN_PROGRESS), 0))
    response = await s.call(
        lambda ticket, now: s.core.put_expected_members(group_id, ids, ticket, now),
        ExpectedMembersResponse(Error.COORDINATOR_NOT_AVAILABLE),
        group_id,
    )
    return json_response(render(response, 0))


async def get_expected_members(request: web.Request) -> web.Response:
    s, group_id = _group_route(request, admin=True)
    if s.loading_or_closed():
        return json_response(render(ExpectedMembersResponse(Error.COORDINATOR_LOAD_IN_PROGRESS), 0))
    return json_response(render(s.core.get_expected_members(group_id), 0))


async def delete_expected_members(request: web.Request) -> web.Response:
    s, group_id = _group_route(request, admin=True)
    if s.loading_or_closed():
        return json_response(render(ExpectedMembersResponse(Error.COORDINATOR_LOAD_IN_PROGRESS), 0))
    response = await s.call(
        lambda ticket, now: s.core.delete_expected_members(group_id, ticket, now),
        ExpectedMembersResponse(Error.COORDINATOR_NOT_AVAILABLE),
        group_id,
    )
    return json_response(render(response, 0))


async def get_config(request: web.Request) -> web.Response:
    s = request.app[SERVER]
    s.authorize(request)
    c = s.config.core
    return json_response(
        {
            "group_min_session_timeout_ms": c.group_min_session_timeout_ms,
            "group_max_session_timeout_ms": c.group_max_session_timeout_ms,
            "group_max_size": c.group_max_size,
            "group_initial_rebalance_delay_ms": c.group_initial_rebalance_delay_ms,
            "new_member_join_timeout_ms": c.new_member_join_timeout_ms,
            "offset_metadata_max_bytes": c.offset_metadata_max_bytes,
            "api_versions": {api: list(span) for api, span in API_VERSIONS.items()},
        }
    )


async def get_openapi(request: web.Request) -> web.Response:
    s = request.app[SERVER]
    s.authorize(request)
    return json_response(
        openapi_document(manual_clock=s.config.manual_clock, auth=s.config.tokens is not None, limits=s.config.limits)
    )


JOURNAL_MAX_LIMIT = 10_000


async def journal(request: web.Request) -> web.Response:
    s = request.app[SERVER]
    s.authorize(request, admin=True)
    after = decode.query_int(request.query.get("after", "0"), "after")
    limit = decode.query_int(request.query.get("limit", "1000"), "limit", lo=0, hi=JOURNAL_MAX_LIMIT)
    s.check_open()
    events = await asyncio.get_running_loop().run_in_executor(None, s.journal_page, after, limit)
    return json_response({"events": events, "next": events[-1]["seq"] if events else after})


async def debug_clock(request: web.Request) -> web.Response:
    s = request.app[SERVER]
    advance_ms = decode.decode_clock_advance(await s.read_json(request), s.config.limits)
    s.check_open()
    await s.loaded.wait()
    return json_response({"now_ms": await s.engine.advance(advance_ms)})


async def debug_store(request: web.Request) -> web.Response:
    """Tests only (with ``--manual-clock``): make the disk fail, stay failed, or stall (API.md §6's sibling)."""
    s = request.app[SERVER]
    faults_wanted = decode.decode_store_faults(await s.read_json(request), s.config.limits)
    faults = getattr(s.engine.writer, "faults", None)
    if faults is None:
        raise not_found("path: this store has no fault injection")
    if "fail_next" in faults_wanted:
        faults.fail_next(faults_wanted["fail_next"])
    if "failing" in faults_wanted:
        faults.set_failing(faults_wanted["failing"])
    if "stalled" in faults_wanted:
        faults.set_stalled(faults_wanted["stalled"])
    return json_response({"injected": faults.injected})


async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    s = request.app[SERVER]
    if s._engine is not None and s.engine.ready and not s.engine.closing:
        return json_response({"status": "ready"})
    return json_response({"status": "loading" if not s.loaded.is_set() else "stopping"}, status=503)


async def metrics(request: web.Request) -> web.Response:
    s = request.app[SERVER]
    return web.Response(text=s.metrics.render(lambda: _gauges(s)), content_type="text/plain", charset="utf-8")


def _gauges(s: Server) -> list[tuple[str, str, dict[str, str], float]]:
    core = s.core
    by_state = core.groups_by_state()
    rows: list[tuple[str, str, dict[str, str], float]] = [
        ("berth_groups", "gauge", {"state": state}, float(by_state.get(state, 0)))
        for state in ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable")
    ]
    rows.append(("berth_members", "gauge", {}, float(core.member_count())))
    rows.extend(
        ("berth_rebalances_total", "counter", {"cause": cause}, float(n))
        for cause, n in sorted(core.rebalances_by_cause.items())
    )
    if s._engine is not None:
        rows.append(("berth_parked_requests", "gauge", {}, float(s.engine.parked)))
        rows.append(("berth_store_writes_in_flight", "gauge", {}, float(s.engine.writes_in_flight)))
    rows.append(("berth_ready", "gauge", {}, 1.0 if s.loaded.is_set() else 0.0))
    return rows


def _group_route(request: web.Request, admin: bool = False) -> tuple[Server, str]:
    s = request.app[SERVER]
    group_id = group_id_of(request)
    s.authorize(request, group_id, admin=admin)
    return s, group_id


# -------------------------------------------------------------------------------------------- middleware


@web.middleware
async def contract_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    route = request.match_info.route.name or "unmatched"
    try:
        response = await handler(request)
    except HttpError as exc:
        response = json_response(exc.body(), exc.status)
        if exc.close_connection:
            response.force_close()  # don't read (or wait for) the rest of a body we refused
    except web.HTTPNotFound:
        response = json_response(not_found(f"path: no route for {request.method} {request.path[:200]}").body(), 404)
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods))
        response = json_response(
            method_not_allowed(f"method: {request.method} not allowed here (allowed: {allowed})").body(), 405
        )
    except web.HTTPRequestEntityTooLarge:
        response = json_response(too_large("body: over the size limit").body(), 413)
        response.force_close()
    except web.HTTPException as exc:
        response = json_response(
            {"error": exc.reason.upper().replace(" ", "_"), "message": exc.text or exc.reason}, exc.status
        )
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("internal error on %s %r", request.method, request.path[:200])
        response = json_response({"error": "INTERNAL_ERROR", "message": "internal error; see the coordinator log"}, 500)
    request.app[SERVER].metrics.observe_request(route, response.status, time.perf_counter() - started)
    return response


def create_app(
    config: ServerConfig,
    clock: Clock,
    core: Coordinator,
    make_writer: Callable[[WritesDone], WriterPort],
    load_records: Callable[[Coordinator], None],
    journal_page: Callable[[int, int], list[dict[str, Any]]],
) -> web.Application:
    app = web.Application(client_max_size=config.max_body_bytes, middlewares=[contract_middleware])
    server = Server(config, clock, core, make_writer, load_records, journal_page)
    app[SERVER] = server
    app.on_startup.append(server.start)
    app.on_shutdown.append(server.stop)
    group = "/v1/groups/{group_id}"
    r = app.router
    # Registration order is match order among /v1/groups/... routes: the hottest first.
    r.add_post(f"{group}/heartbeat", protocol_handler(HEARTBEAT), name="heartbeat")
    r.add_post(f"{group}/offsets", protocol_handler(COMMIT), name="offset_commit")
    r.add_post(f"{group}/join", protocol_handler(JOIN), name="join")
    r.add_post(f"{group}/sync", protocol_handler(SYNC), name="sync")
    r.add_post(f"{group}/leave", protocol_handler(LEAVE), name="leave")
    r.add_get(f"{group}/offsets", fetch_offsets, name="offset_fetch", allow_head=False)
    r.add_get(group, describe, name="describe", allow_head=False)
    r.add_delete(group, delete_group, name="delete")
    r.add_put(f"{group}/expected-members", put_expected_members, name="expected_members_put")
    r.add_get(f"{group}/expected-members", get_expected_members, name="expected_members_get", allow_head=False)
    r.add_delete(f"{group}/expected-members", delete_expected_members, name="expected_members_delete")
    r.add_get("/v1/groups", list_groups, name="list", allow_head=False)
    r.add_get("/v1/config", get_config, name="config", allow_head=False)
    r.add_get("/v1/openapi.json", get_openapi, name="openapi", allow_head=False)
    r.add_get("/v1/journal", journal, name="journal", allow_head=False)
    if config.manual_clock:
        r.add_post("/v1/debug/clock", debug_clock, name="debug_clock")
        r.add_post("/v1/debug/store", debug_store, name="debug_store")
    r.add_get("/healthz", healthz, name="healthz", allow_head=False)
    r.add_get("/readyz", readyz, name="readyz", allow_head=False)
    r.add_get("/metrics", metrics, name="metrics", allow_head=False)
    return app
