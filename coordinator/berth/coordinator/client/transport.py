"""HTTP to the coordinator: one aiohttp session, the bearer token, and docs/api.md §5's error contract.

Owns ``Transport``. Rules:

- A request either returns the HTTP 200 answer decoded into its declared type (``berth.coordinator.protocol``;
  protocol outcomes are in-band, read by the caller) or raises: ``CoordinatorUnavailableError`` for what may pass
  (connection errors, timeouts; HTTP 5xx as its subclass ``CoordinatorServerError``), ``AuthorizationError`` for
  401/403, ``CoordinatorHttpError`` for every other status, ``MalformedResponseError`` for a 200 answer that is
  not what the contract promises. HTTP errors carry the server's ``error`` and ``message``.
- Group ids are percent-encoded into the path (every byte but unreserved ones), so any id round-trips.
- Every request has a timeout: the caller's (long-polls size theirs from the rebalance timeout) or the default.
- No retries here: retrying is the caller's decision (``backoff``), because only it knows what is idempotent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TypeVar
from urllib.parse import quote

import aiohttp
import msgspec
from yarl import URL

from berth.coordinator.client.errors import (
    AuthorizationError,
    BerthClientError,
    CoordinatorHttpError,
    CoordinatorServerError,
    CoordinatorUnavailableError,
)
from berth.coordinator.protocol import Error, HttpErrorBody
from berth.coordinator.protocol.codec import encode

T = TypeVar("T")

#: In-band errors that mean "ask again later": the coordinator is loading, failing to persist, or not ours.
RETRIABLE_ERRORS = frozenset(
    {Error.COORDINATOR_LOAD_IN_PROGRESS, Error.COORDINATOR_NOT_AVAILABLE, Error.NOT_COORDINATOR}
)

QueryParams = Sequence[tuple[str, str]]
_JSON_HEADERS = {"Content-Type": "application/json"}


class MalformedResponseError(BerthClientError):
    """A 200 answer lacks a field the contract promises, or has it with the wrong type."""


def group_path(group_id: str, suffix: str = "") -> str:
    """``/v1/groups/{group_id}{suffix}`` with the id percent-encoded (``/`` included)."""
    return f"/v1/groups/{quote(group_id, safe='')}{suffix}"


class Transport:
    """JSON requests to one coordinator. Owns its aiohttp session unless one is passed in."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        request_timeout_s: float = 30.0,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.request_timeout_s = request_timeout_s
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._body_headers = {**self._headers, **_JSON_HEADERS}
        self._session = session
        self._owns_session = session is None

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
        self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            if not self._owns_session:
                raise RuntimeError("the transport was closed")
            # Created lazily so that a Transport can be built outside a running event loop.
            self._session = aiohttp.ClientSession()
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        answer: type[T],
        *,
        body: msgspec.Struct | None = None,
        params: QueryParams = (),
        timeout_s: float | None = None,
    ) -> T:
        """One request; the HTTP 200 answer decoded as ``answer`` (see the module rules for everything else)."""
        url = URL(self.base_url + path, encoded=True)
        if params:
            url = url.with_query(list(params))
        timeout = aiohttp.ClientTimeout(total=timeout_s if timeout_s is not None else self.request_timeout_s)
        data = None if body is None else encode(body)
        headers = self._headers if body is None else self._body_headers
        try:
            async with self._client().request(method, url, data=data, headers=headers, timeout=timeout) as response:
                raw = await response.read()
                status = response.status
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            raise CoordinatorUnavailableError(
                f"coordinator at {self.base_url} unreachable ({method} {path}): {_describe(error)}"
            ) from error
        what = f"{method} {path}"
        if status != 200:
            raise _http_error(status, raw, what)
        try:
            return msgspec.json.decode(raw, type=answer)
        except (msgspec.DecodeError, UnicodeDecodeError) as error:
            raise MalformedResponseError(f"{what}: the answer is not what the contract promises: {error}") from None


def _http_error(status: int, raw: bytes, what: str) -> CoordinatorHttpError:
    try:
        body: HttpErrorBody | None = msgspec.json.decode(raw, type=HttpErrorBody)
    except (msgspec.DecodeError, UnicodeDecodeError):
        body = None
    error = (body.error if body else "") or f"HTTP_{status}"
    message = body.message if body else raw.decode("utf-8", "replace").strip()[:200]
    if status >= 500:
        return CoordinatorServerError(status, error, message, path=what)
    if status in (401, 403):
        return AuthorizationError(status, error, message, path=what)
    return CoordinatorHttpError(status, error, message, path=what)


def _describe(error: BaseException) -> str:
    if isinstance(error, asyncio.TimeoutError):
        return "timed out"
    return str(error) or type(error).__name__
