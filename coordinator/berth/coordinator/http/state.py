"""The coordinator server's state and the steps every request shares (docs/api.md §5, §10).

``CoordinatorServer`` owns the core, the engine, the clock, metrics, the journal reader and its long-polls, and the
terms of leadership: ``lifecycle`` is the application's ``cleanup_ctx``. It starts campaigning (``leadership``) and
serves each term it is given in a task it keeps: load the store into a fresh core (the first term uses the core it
was built with), start an engine on the term's writer, serve until the term ends, then answer what is parked
(COORDINATOR_NOT_AVAILABLE: nothing of a deposed term is acknowledged), close the clients' connections so that
they reconnect to the active replica, and wait for the next term. With the SQLite store there is one term, from
start to shutdown. ``shutdown`` (``on_shutdown``) answers what is parked. The request steps: ``authorize``
(401/403), ``read_body`` (413/408/400/415), ``refuse_if_closed`` (503) and ``not_serving`` (in-band 14 while
loading, 16 on a standby).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from aiohttp import web

from berth.coordinator.core import Coordinator, Write
from berth.coordinator.core.events import EventType
from berth.coordinator.http.audit import Audit
from berth.coordinator.http.auth import JOURNAL_READ, AuthFailure, Principal
from berth.coordinator.http.clock import Clock
from berth.coordinator.http.config import ServerConfig
from berth.coordinator.http.engine import Engine, FaultInjector
from berth.coordinator.http.errors import (
    bad_request,
    forbidden,
    request_timeout,
    shutting_down,
    too_large,
    unauthorized,
    unsupported_media_type,
)
from berth.coordinator.http.journal import JournalWaiters
from berth.coordinator.http.leadership import Leadership, Term, TermLost
from berth.coordinator.http.metrics import Metrics
from berth.coordinator.http.quiet_log import QuietLog
from berth.coordinator.protocol import Error
from berth.coordinator.protocol.routes import Access

log = logging.getLogger("berth.coordinator")


class JournalWindow(Protocol):
    @property
    def lines(self) -> list[str]: ...

    @property
    def first(self) -> int: ...

    @property
    def last(self) -> int: ...


class JournalSize(Protocol):
    @property
    def bytes(self) -> int: ...

    @property
    def retention_bytes(self) -> int: ...

    @property
    def oldest_ts_ms(self) -> int | None: ...


class JournalReader(Protocol):
    """The durable journal as the server reads it (the store)."""

    def last_seq(self) -> int: ...

    def journal_size(self) -> JournalSize:
        """Bytes retained against the retention bound, and the oldest retained event's ``ts_ms`` (``/metrics``)."""
        ...

    def journal_window(self, after: int, limit: int, max_bytes: int | None = None) -> JournalWindow:
        """Events after ``after`` as JSON lines, at most ``limit`` and ``max_bytes`` (but one), with the journal's
        oldest and newest seq."""
        ...


class CoordinatorServer:
    def __init__(
        self,
        config: ServerConfig,
        clock: Clock,
        core: Coordinator,
        leadership: Leadership,
        journal: JournalReader,
        new_core: Callable[[], Coordinator] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.core = core
        self.metrics = Metrics(config.metrics_max_groups, config.metrics_max_groups_per_token, self._metrics_quota)
        self.quiet = QuietLog(log)  # lines a client can provoke: rate-limited
        self.audit = Audit(self.metrics.edge, self.quiet)
        self.journal = journal
        self.journal_polls = JournalWaiters(clock)
        self.leadership = leadership
        self.loaded = asyncio.Event()  # set while a term is loaded and served
        self.stopping = False
        self.loading_term = False
        self.terms = 0  # terms served by this process (takeovers, on a replicated store)
        self.on_term_end: list[Callable[[], object]] = []  # the listener closes its clients' connections
        self._new_core = new_core
        self.running_engine: Engine | None = None  # the current term's
        self._leading: asyncio.Task[None] | None = None
        self._first_load: asyncio.Future[None] | None = None

    @property
    def engine(self) -> Engine:
        assert self.running_engine is not None, "the engine runs while a term is served"
        return self.running_engine

    @property
    def started(self) -> bool:
        return self.running_engine is not None

    @property
    def faults(self) -> FaultInjector | None:
        return self.engine.writer.faults

    # --------------------------------------------------------------------------------------------- lifecycle

    async def lifecycle(self, _app: web.Application) -> AsyncIterator[None]:
        """The application's ``cleanup_ctx``: campaign and serve terms in a task; on exit stop it, answer what is
        parked, let the last writes land and step down."""
        self._first_load = asyncio.get_running_loop().create_future()
        self.leadership.start()
        self._leading = asyncio.create_task(self._lead(), name="berth-lead")
        try:
            yield
        finally:
            await self.shutdown()
            if not self._leading.done():
                self._leading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # a failed load is the command's to report
                await self._leading
            engine = self.running_engine
            if engine is not None:
                await engine.close()
            await asyncio.get_running_loop().run_in_executor(None, self.leadership.close)

    async def shutdown(self, _app: web.Application | None = None) -> None:
        """``on_shutdown``: answer parked requests and long-polls, let in-flight writes land (idempotent)."""
        self.stopping = True
        self.journal_polls.release_all()
        if self.running_engine is not None:
            await self.running_engine.shutdown()

    async def wait_loaded(self) -> None:
        """Return once the first term's state is loaded; raise what made loading fail (the command exits 2)."""
        assert self._first_load is not None, "terms start with the application"
        await asyncio.shield(self._first_load)

    async def wait_failed(self) -> None:
        """Return when the terms stop: raising what stopped them, or normally when the server stops."""
        assert self._leading is not None, "terms start with the application"
        await asyncio.shield(self._leading)

    async def _lead(self) -> None:
        first = True
        try:
            while not self.stopping:
                term = await self.leadership.next_term()
                if not first:
                    assert self._new_core is not None, "a replicated store gives a core per term"
                    self.core = self._new_core()
                first = False
                await self._serve(term)
        except Exception as exc:
            # Reported once, as the command's one line (docs/api.md §10); the trace only for debugging.
            log.debug("serving a term failed", exc_info=exc)
            if self._first_load is not None and not self._first_load.done():
                self._first_load.set_exception(exc)
            raise

    async def _serve(self, term: Term) -> None:
        started = time.perf_counter()
        self.loading_term = True
        try:
            await asyncio.get_running_loop().run_in_executor(None, term.load, self.core)
        except TermLost as exc:
            log.warning("term %s given up before it was served (%s): standing by", term.name, exc)
            return
        finally:
            self.loading_term = False
        engine = Engine(
            self.core,
            self.clock,
            term.make_writer,
            term.load_group,
            self._count_write_failure,
            self._journal_grew,
            self._observe,
            acting=term.acting,
        )
        self.running_engine = engine
        engine.apply(self.core.load((), self.clock.now_ms()))
        engine.ready = True
        self.terms += 1
        self.loaded.set()
        if self._first_load is not None and not self._first_load.done():
            self._first_load.set_result(None)
        log.info(
            "loaded %d groups, %d members in %.2f s%s",
            len(self.core.groups),
            self.core.member_count(),
            time.perf_counter() - started,
            f" (term {term.name}: this replica is the active one)" if self.leadership.replicated else "",
        )
        reason = await term.ended()
        if self.stopping:
            return  # the application's cleanup answers what is parked and stops the writer
        log.warning("term %s is over (%s): answering what is parked, standing by", term.name, reason)
        self.loaded.clear()
        await engine.shutdown()
        await engine.close()
        self.running_engine = None
        self.journal_polls.release_waiting()
        for listener in self.on_term_end:
            listener()

    def _metrics_quota(self, group_id: str) -> str | None:
        """Whose quota of per-group series a group takes (``group_metrics``): its tenant's, or none ("") for a
        group a fleet owns or an admin created; None when there is no such group."""
        group = self.core.groups.get(group_id)  # type: ignore[call-overload]  # a GroupId is a str
        if group is None:
            return None
        return "" if group.owner is not None or group.tenant is None else str(group.tenant)

    def _count_write_failure(self) -> None:
        self.metrics.write_failures += 1

    def _journal_grew(self) -> None:
        self.journal_polls.notify(self.journal.last_seq())

    def _observe(self, write: Write) -> None:
        """Count a write's rebalances per group and time them (``group_metrics``)."""
        groups = self.metrics.groups
        for event in write.events:
            kind, group = event["type"], event["group_id"]
            if kind == EventType.REBALANCE_STARTED:
                groups.rebalance(group, str(event.get("cause", "")), event["ts_ms"])
            elif kind == EventType.ASSIGNMENT_STORED:
                groups.rebalanced(group, event["ts_ms"])
            elif kind in (EventType.GROUP_EMPTIED, EventType.GROUP_DELETED):
                groups.stopped(group)

    # ------------------------------------------------------------------------------------------ request steps

    def authorize(self, request: web.BaseRequest, access: Access, group_id: str | None = None) -> Principal | None:
        """docs/api.md §10 "Tokens": 401 without a valid token, 403 when the token may not do this; the caller's
        principal (None when the coordinator has no tokens or the route is open). Refusals are audited."""
        tokens = self.config.tokens
        if tokens is None or access is Access.OPEN:
            return None
        found = tokens.identify(request.headers.get("Authorization"))
        if not isinstance(found, Principal):
            self.audit.refused(request, found)
            raise unauthorized("Authorization: a valid 'Bearer <token>' header is required")
        refusal = _refusal(found, access, group_id)
        if refusal is not None:
            self.audit.refused(request, AuthFailure.FORBIDDEN, found.name)
            raise forbidden(f"Authorization: token {found.name!r} {refusal}")
        return found

    async def read_body(self, request: web.BaseRequest, *, answer_expect: bool = False) -> bytes:
        """The request's JSON body as bytes: 413 over the size limit, 408 when it is late, 400 when empty,
        415 without ``Content-Type: application/json`` (parameters such as ``; charset=utf-8`` allowed).

        ``answer_expect``: the request did not pass through the application, which answers ``Expect:
        100-continue`` before its handlers run; a client that asked for it gets its "100 Continue" here.
        """
        limit = self.config.max_body_bytes
        try:
            if request.content.is_eof():  # the whole body is here (nearly always): no timer to arm and cancel
                raw = await request.read()  # over the limit: HTTPRequestEntityTooLarge
            else:
                length = request.content_length
                if length is not None and length > limit:  # refused before reading any of it
                    raise too_large(f"body: {length} bytes is over the {limit}-byte limit")
                if answer_expect and request.headers.get("Expect", "").lower() == "100-continue":
                    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                async with asyncio.timeout(self.config.body_timeout_s):
                    raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise too_large(f"body: over the {limit}-byte limit") from None
        except TimeoutError:
            raise request_timeout(f"body: not received within {self.config.body_timeout_s:g} s") from None
        if not raw:
            raise bad_request("body: empty, expected a JSON object")
        content_type = request.headers.get("Content-Type")
        if content_type is None or (
            content_type != "application/json" and content_type.split(";", 1)[0].strip().lower() != "application/json"
        ):
            raise unsupported_media_type("Content-Type: must be application/json")
        return raw

    def refuse_if_closed(self) -> None:
        if self.stopping:
            raise shutting_down()

    def not_serving(self) -> Error | None:
        """None while this replica serves; else the in-band error to answer: COORDINATOR_LOAD_IN_PROGRESS while
        the store loads, NOT_COORDINATOR on a standby (a replicated store's replica that does not lead). Raises 503
        when shutting down."""
        self.refuse_if_closed()
        engine = self.running_engine
        if engine is not None and engine.ready and not engine.closing:
            return None
        if self.leadership.replicated and not self.loading_term:
            return Error.NOT_COORDINATOR
        return Error.COORDINATOR_LOAD_IN_PROGRESS


def _refusal(principal: Principal, access: Access, group_id: str | None) -> str | None:
    """Why ``principal`` may not make this call, or None when it may."""
    if access is Access.ADMIN and not principal.admin:
        return "is not an admin token"
    if access is Access.JOURNAL and not principal.has_scope(JOURNAL_READ):
        return f"may not read the journal (needs admin or the {JOURNAL_READ} scope)"
    if group_id is not None and not principal.may_use_group(group_id):
        return "may not use this group"
    return None


#: Where the application keeps its ``CoordinatorServer``.
STATE: web.AppKey[CoordinatorServer] = web.AppKey("state", CoordinatorServer)
