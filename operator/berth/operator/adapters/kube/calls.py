"""Running one official-client call without blocking the event loop and reading its answer as the API server's JSON.

Rules: a call is sent on the operator's asyncio session (``kube.api_session``) when its client has one
(:meth:`GatedApiClient.send_on`): the client's own request serializer builds the request, the session sends it, and
no thread or model validation is spent on it (the client's threads were 18 % of the operator's CPU while a thousand
fleets were created); otherwise it runs in a worker thread (``asyncio.to_thread``). Either way the call names an
official-client method, which is how tests/chart derives the operator's RBAC from the code. Answers are plain dicts
(camelCase, exactly what the API server sent), not the client's models, so a field the models do not know is never
lost and a partial object never fails validation; every call carries a timeout, so a hung connection cannot hold a
thread forever. A failure status is an ``ApiException`` whichever way the call went.
:class:`GatedApiClient` is the official client whose writes pass a :class:`~berth.operator.ports.WriteGate` first
(the leader's: a replica that does not hold the Lease sends none), checked when the call is made and again by the
connection right before the request is written, with ``TCP_USER_TIMEOUT`` bounding how late the network may deliver
it (``gated_http``).
Non-2xx answers raise :class:`kubernetes.client.ApiException`; :func:`is_not_found` and :func:`api_error_text`
help callers tell and say what happened. The adapters' port methods let none escape: :func:`port_errors` turns
one into :class:`~berth.operator.ports.ApiCallFailed` with the API server's own words.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import kubernetes

from berth.operator.adapters.leadership.gated_http import READ_METHODS, bound_connections, gate_connections
from berth.operator.ports import ApiCallFailed, WriteGate

#: (connect, read) seconds for one API call.
REQUEST_TIMEOUT = (10.0, 60.0)
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"

ApiException = kubernetes.client.ApiException


class Sender(Protocol):
    """Sends an official-client method's request without a thread (``ApiSession.call``)."""

    async def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]: ...


class GatedApiClient(kubernetes.client.ApiClient):
    """The official client, saying who it is (``user_agent``), its writes refused while ``gate`` says so, its
    connections' unacknowledged bytes dropped after ``write_bound_s``."""

    def __init__(
        self,
        configuration: kubernetes.client.Configuration,
        *,
        user_agent: str,
        gate: WriteGate | None,
        write_bound_s: float | None = None,
    ) -> None:
        super().__init__(configuration)
        self.user_agent = user_agent
        self.gate = gate
        if gate is not None:
            gate_connections(self.rest_client.pool_manager, gate)
        if write_bound_s is not None:
            bound_connections(self.rest_client.pool_manager, write_bound_s)
        #: Where this client's calls are sent instead of a thread (None: in a thread).
        self.sender: Sender | None = None

    def send_on(self, sender: Sender) -> None:
        """From now on, :func:`call_json` sends this client's calls through ``sender`` (on the event loop that owns
        it: the operator's)."""
        self.sender = sender

    def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if self.gate is not None and method.upper() not in READ_METHODS:
            self.gate.check()
        return super().call_api(method, url, *args, **kwargs)


async def call_json(method: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``method(*args, **kwargs)`` on its client's sender, else in a thread; the response body as a dict."""
    client = getattr(getattr(method, "__self__", None), "api_client", None)
    sender = getattr(client, "sender", None)
    if sender is not None:
        answer: dict[str, Any] = await sender.call(method, *args, **kwargs)
        return answer
    return await asyncio.to_thread(call_json_here, method, *args, **kwargs)


def call_json_here(method: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``method(*args, **kwargs)`` on this thread; the response body as a dict."""
    kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT)
    response = method(*args, _preload_content=False, **kwargs)
    body = json.loads(response.data or b"{}")
    if not isinstance(body, dict):
        raise ValueError(f"{getattr(method, '__name__', 'call')}: the API server answered {type(body).__name__}")
    return body


def is_not_found(error: BaseException) -> bool:
    return isinstance(error, ApiException) and error.status == 404


async def read_or_none(method: Callable[..., Any], *args: Any) -> dict[str, Any] | None:
    """``call_json(method, *args)``, or None when the object does not exist (404)."""
    try:
        return await call_json(method, *args)
    except Exception as error:
        if is_not_found(error):
            return None
        raise


def is_conflict(error: BaseException) -> bool:
    return isinstance(error, ApiException) and error.status == 409


def api_error_text(error: BaseException) -> str:
    """The API server's own message (``Status.message``) when it sent one, else the error as text."""
    if isinstance(error, ApiException):
        try:
            status = json.loads(error.body or "{}")
        except (TypeError, ValueError):
            status = {}
        message = status.get("message") if isinstance(status, dict) else None
        return f"HTTP {error.status}: {message or error.reason}"
    return str(error) or type(error).__name__


@contextmanager
def port_errors() -> Iterator[None]:
    """Around a port method: an ``ApiException`` leaves as :class:`~berth.operator.ports.ApiCallFailed`."""
    try:
        yield
    except ApiException as error:
        raise ApiCallFailed(api_error_text(error)) from error
