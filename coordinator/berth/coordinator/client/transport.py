"""HTTP to the coordinator: one aiohttp session, the bearer token, and docs/api.md §5's error contract.

Owns ``Transport``. Rules:

- A request either returns the HTTP 200 answer decoded into its declared type (``berth.coordinator.protocol``;
  protocol outcomes are in-band, read by the caller) or raises: ``CoordinatorUnavailableError`` for what may pass
  (connection errors, timeouts, an answer that is not HTTP; HTTP 5xx as its subclass ``CoordinatorServerError``),
  ``CoordinatorRefusedError`` for 4xx (``AuthorizationError`` 401/403, ``RequestTooLargeError`` 413),
  ``CoordinatorHttpError`` for any other status, ``MalformedResponseError`` for a 200 answer that is not what the
  contract promises, ``ResponseTooLargeError`` for an answer over ``max_response_bytes``.
- Answers are untrusted (errors.py): no exception message carries the server's text; bodies are read only up to
  ``max_response_bytes`` (a declared length over it is refused unread), never decompressed (``Accept-Encoding:
  identity``; an encoded answer is malformed), and redirects are not followed (the token stays with the URL given).
- HTTPS is verified against ``ca_file`` when given, else the system's CAs (``tls``).
- Group ids are percent-encoded into the path (every byte but unreserved ones), so any id round-trips.
- Every request has a timeout: the caller's (long-polls size theirs from the rebalance timeout) or the default; a
  new connection must be made within ``CONNECT_TIMEOUT_S`` of it (Kafka's socket.connection.setup.timeout.ms is
  10 s): an address that swallows connection attempts (a pod on a lost node, still in the Service's endpoints until
  the node is declared lost) costs a retry, not the whole request timeout.
- No retries here: retrying is the caller's decision (``backoff``), because only it knows what is idempotent.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, Sequence
from typing import TypeVar
from urllib.parse import quote

import aiohttp
import msgspec
from yarl import URL

from berth.coordinator.client.errors import (
    AuthorizationError,
    BerthClientError,
    CoordinatorHttpError,
    CoordinatorRefusedError,
    CoordinatorServerError,
    CoordinatorUnavailableError,
    GroupOwnedError,
    RequestTooLargeError,
    ResponseTooLargeError,
    untrusted_text,
)
from berth.coordinator.client.tls import verifying_context
from berth.coordinator.protocol import Error, GroupOwnedBody, HttpErrorBody
from berth.coordinator.protocol.codec import encode

T = TypeVar("T")

#: In-band errors that mean "ask again later": the coordinator is loading, failing to persist, or not ours.
RETRIABLE_ERRORS = frozenset(
    {Error.COORDINATOR_LOAD_IN_PROGRESS, Error.COORDINATOR_NOT_AVAILABLE, Error.NOT_COORDINATOR}
)

#: The most an answer may be, by default. The largest legitimate answers carry a whole group's metadata: the
#: leader's JoinGroup answer and a describe of a group at the coordinator's 8 MiB group-metadata bound
#: (``--group-metadata-max-bytes``), about 11 MiB in base64; journal pages are bounded at 1 MiB.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024

#: The most a new TCP (and TLS) connection may take before the request fails as unreachable and is retried.
CONNECT_TIMEOUT_S = 5.0

QueryParams = Sequence[tuple[str, str]]
_JSON_HEADERS = {"Content-Type": "application/json"}


class MalformedResponseError(BerthClientError):
    """A 200 answer lacks a field the contract promises, has it with the wrong type, or is encoded.

    The message says what was asked; ``detail`` is the decoder's complaint (escaped: it may quote the answer).
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = untrusted_text(detail)


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
        ca_file: str | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.request_timeout_s = request_timeout_s
        self.max_response_bytes = max_response_bytes
        self._ssl: ssl.SSLContext | bool = verifying_context(ca_file) or True
        self._headers = {"Accept-Encoding": "identity"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
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
            self._session = aiohttp.ClientSession(auto_decompress=False)
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
        headers: Mapping[str, str] | None = None,
    ) -> T:
        """One request; the HTTP 200 answer decoded as ``answer`` (see the module rules for everything else).
        ``headers`` are sent besides the transport's own (``Berth-Owner-Uid``)."""
        url = URL(self.base_url + path, encoded=True)
        if params:
            url = url.with_query(list(params))
        total = timeout_s if timeout_s is not None else self.request_timeout_s
        timeout = aiohttp.ClientTimeout(total=total, sock_connect=min(total, CONNECT_TIMEOUT_S))
        data = None if body is None else encode(body)
        sent = self._headers if body is None else self._body_headers
        if headers:
            sent = {**headers, **sent}
        what = f"{method} {path}"
        try:
            async with self._client().request(
                method, url, data=data, headers=sent, timeout=timeout, ssl=self._ssl, allow_redirects=False
            ) as response:
                raw = await _read_capped(response, self.max_response_bytes, what)
                status = response.status
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            raise CoordinatorUnavailableError(
                f"coordinator at {self.base_url} unreachable ({what}): {_describe(error)}"
            ) from error
        if status != 200:
            raise _http_error(status, raw, what)
        try:
            return msgspec.json.decode(raw, type=answer)
        except (msgspec.DecodeError, UnicodeDecodeError) as error:
            raise MalformedResponseError(f"{what}: the answer is not what the contract promises", str(error)) from None


async def _read_capped(response: aiohttp.ClientResponse, limit: int, what: str) -> bytes:
    """The body, if it is at most ``limit`` bytes and not encoded; never more than ``limit`` bytes held."""
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise MalformedResponseError(f"{what}: the answer is content-encoded, which the client did not ask for")
    declared = response.content_length
    if declared is not None:
        if declared > limit:
            raise ResponseTooLargeError(what, limit, declared)
        return await response.read()  # exactly the declared length: HTTP framing stops there
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise ResponseTooLargeError(what, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _http_error(status: int, raw: bytes, what: str) -> CoordinatorHttpError:
    try:
        body: HttpErrorBody | None = msgspec.json.decode(raw, type=HttpErrorBody)
    except (msgspec.DecodeError, UnicodeDecodeError):
        body = None
    error = body.error if body else ""
    detail = body.message if body else raw[:400].decode("utf-8", "replace")
    if status >= 500:
        return CoordinatorServerError(status, error, detail, path=what)
    if status == 409 and error == "GROUP_OWNED":
        try:
            owned = msgspec.json.decode(raw, type=GroupOwnedBody)
        except (msgspec.DecodeError, UnicodeDecodeError):
            owned = None
        return GroupOwnedError(status, error, detail, path=what, owner=owned.owner if owned else None)
    if status in (401, 403):
        return AuthorizationError(status, error, detail, path=what)
    if status == 413:
        return RequestTooLargeError(status, error, detail, path=what)
    if 400 <= status < 500:
        return CoordinatorRefusedError(status, error, detail, path=what)
    return CoordinatorHttpError(status, error, detail, path=what)


def _describe(error: BaseException) -> str:
    """What went wrong, in words that carry nothing the server sent (aiohttp's parser errors may quote it)."""
    if isinstance(error, asyncio.TimeoutError):
        return "timed out"
    if isinstance(error, aiohttp.ClientConnectorError | aiohttp.ServerDisconnectedError | OSError):
        return str(error) or type(error).__name__  # local facts: the address, the OS's or TLS library's reason
    return f"the answer was not well-formed HTTP ({type(error).__name__})"
