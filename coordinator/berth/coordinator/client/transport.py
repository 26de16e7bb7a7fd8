"""HTTP to the coordinator: one aiohttp session, the bearer token, and API.md §1's error contract.

Owns ``Transport``. Rules:

- A request either returns the JSON object of an HTTP 200 (protocol outcomes are in-band, read by the caller)
  or raises: ``CoordinatorUnavailableError`` for what may pass (connection errors, timeouts; HTTP 5xx as its
  subclass ``CoordinatorServerError``), ``AuthorizationError`` for 401/403, ``CoordinatorHttpError`` for every
  other status. HTTP errors carry the server's ``error`` and ``message``.
- Group ids are percent-encoded into the path (every byte but unreserved ones), so any id round-trips.
- Every request has a timeout: the caller's (long-polls size theirs from the rebalance timeout) or the default.
- No retries here: retrying is the caller's decision (``backoff``), because only it knows what is idempotent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from berth.coordinator.client.errors import (
    AuthorizationError,
    CoordinatorHttpError,
    CoordinatorServerError,
    CoordinatorUnavailableError,
)
from berth.coordinator.protocol import Error

#: In-band errors that mean "ask again later": the coordinator is loading, failing to persist, or not ours.
RETRIABLE_ERRORS = frozenset(
    {Error.COORDINATOR_LOAD_IN_PROGRESS, Error.COORDINATOR_NOT_AVAILABLE, Error.NOT_COORDINATOR}
)

QueryParams = Sequence[tuple[str, str]]


def group_path(group_id: str, suffix: str = "") -> str:
    """``/v1/groups/{group_id}{suffix}`` with the id percent-encoded (``/`` included)."""
    return f"/v1/groups/{quote(group_id, safe='')}{suffix}"


def error_of(body: Mapping[str, Any], key: str = "error_code") -> Error:
    """The Kafka error in ``body[key]``; a code this library does not know reads as UNKNOWN_SERVER_ERROR."""
    code = body.get(key, 0)
    try:
        return Error(code)
    except ValueError:
        return Error.UNKNOWN_SERVER_ERROR


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

    async def post(self, path: str, body: Mapping[str, Any], *, timeout_s: float | None = None) -> dict[str, Any]:
        return await self.request("POST", path, body=body, timeout_s=timeout_s)

    async def get(self, path: str, params: QueryParams = (), *, timeout_s: float | None = None) -> dict[str, Any]:
        return await self.request("GET", path, params=params, timeout_s=timeout_s)

    async def put(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("PUT", path, body=body)

    async def delete(self, path: str, params: QueryParams = ()) -> dict[str, Any]:
        return await self.request("DELETE", path, params=params)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: QueryParams = (),
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        url = URL(self.base_url + path, encoded=True)
        if params:
            url = url.with_query(list(params))
        timeout = aiohttp.ClientTimeout(total=timeout_s if timeout_s is not None else self.request_timeout_s)
        try:
            async with self._client().request(
                method, url, json=body, headers=self._headers, timeout=timeout
            ) as response:
                text = await response.text()
                status = response.status
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            raise CoordinatorUnavailableError(
                f"coordinator at {self.base_url} unreachable ({method} {path}): {_describe(error)}"
            ) from error
        return _read_answer(status, text, f"{method} {path}")


def _read_answer(status: int, text: str, what: str) -> dict[str, Any]:
    try:
        document = json.loads(text) if text else {}
    except ValueError:
        document = {}
    body: dict[str, Any] = document if isinstance(document, dict) else {}
    if status == 200:
        if not isinstance(document, dict):
            raise CoordinatorHttpError(status, "INVALID_RESPONSE", "the answer is not a JSON object", path=what)
        return body
    error = str(body.get("error", "")) or f"HTTP_{status}"
    message = str(body.get("message", "")) or (text.strip()[:200] if not body else "")
    if status >= 500:
        raise CoordinatorServerError(status, error, message, path=what)
    if status in (401, 403):
        raise AuthorizationError(status, error, message, path=what)
    raise CoordinatorHttpError(status, error, message, path=what)


def _describe(error: BaseException) -> str:
    if isinstance(error, asyncio.TimeoutError):
        return "timed out"
    return str(error) or type(error).__name__
