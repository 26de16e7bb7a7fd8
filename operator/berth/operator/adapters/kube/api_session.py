"""An asyncio HTTP session to the Kubernetes API server (aiohttp), for the watch cache and for Kopf.

The official ``kubernetes`` client is synchronous: every call takes a worker thread, and a watch would hold one for
minutes, uncancellable. The watch cache (``kube.informer``) and Kopf (which is built on aiohttp) use this session
instead; the operator's own one-off calls keep the official client (``kube.calls``). Rules:

- One identity for everything (``kube.identity``): the same server, CA, client certificate and bearer token as the
  official client. The token is taken from the client's configuration for every request, so a rotated
  service-account token (the in-cluster loader's refresh hook re-reads it) is used without a new login.
- Every request says who sent it: ``User-Agent: berth-operator/<version> (<identity>)``, so an API server's audit
  log tells two replicas apart.
- Writes pass a gate (:class:`~berth.operator.ports.WriteGate`): a replica that is not (or no longer) the leader
  sends no POST, PUT, PATCH or DELETE, whoever asks (Kopf's finalizer and annotation patches, Events, or the
  operator's own code); checked when a request starts and again once connected, right before it is written, with
  ``TCP_USER_TIMEOUT`` bounding how late the network may deliver it (``gated_http``). Reads always pass.
- Streams are read as JSON lines of any length (a watch event carries a whole object; aiohttp's ``readline`` caps a
  line at its buffer size).
- :meth:`ApiSession.call` sends an official-client method's request (``apps.create_namespaced_stateful_set``...)
  on this session: the client's own serializer builds its method, path, query and body (so the call site names
  the method, as tests/chart's RBAC scan reads it), sent with the content type the client's REST layer would send
  (:func:`content_type`), and an error status is the client's ``ApiException``, as the client itself would raise
  it. The operator's client sends its calls here (``calls.GatedApiClient.send_on``).
"""

from __future__ import annotations

import functools
import inspect
import json
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
import kubernetes

from berth.operator.adapters.kube.calls import REQUEST_TIMEOUT
from berth.operator.adapters.kube.identity import KubeIdentity
from berth.operator.adapters.leadership.gated_http import READ_METHODS, bounded_connector, gated_request_class
from berth.operator.ports import WriteGate

#: Seconds to connect; a plain request gets ``REQUEST_TIMEOUT_S`` in all, a stream as long as the server keeps it.
CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 60.0


class ApiStatusError(Exception):
    """The API server answered a request with an error status (``status`` is its HTTP code, ``reason`` its words)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status
        self.reason = reason


def ssl_context(configuration: kubernetes.client.Configuration) -> ssl.SSLContext | None:
    """The TLS settings of the official client's configuration (None for plain http)."""
    if not str(configuration.host).startswith("https"):
        return None
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file and configuration.key_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def authorization(configuration: kubernetes.client.Configuration) -> str | None:
    """The ``Authorization`` header the official client would send now (a refreshed token), if any."""
    # "BearerToken" in kubernetes>=36, "authorization" before (see kube.identity.connection_info).
    header = configuration.get_api_key_with_prefix("BearerToken") or configuration.get_api_key_with_prefix(
        "authorization"
    )
    if header:
        return str(header) if " " in str(header) else f"Bearer {header}"
    if configuration.username or configuration.password:
        return aiohttp.BasicAuth(configuration.username or "", configuration.password or "").encode()
    return None


class ApiSession:
    """One aiohttp session to the API server as the operator's identity (see the module docstring); a
    :class:`~berth.operator.adapters.kube.calls.Sender`."""

    def __init__(
        self,
        identity: KubeIdentity,
        *,
        user_agent: str,
        gate: WriteGate | None = None,
        write_bound_s: float | None = None,
    ) -> None:
        self.configuration = identity.configuration
        self.server = str(self.configuration.host).rstrip("/")
        self.gate = gate
        self.session = new_session(identity, user_agent=user_agent, gate=gate, write_bound_s=write_bound_s)

    async def close(self) -> None:
        await self.session.close()

    async def get_json(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        """``GET path?params``, the answer as a dict; an error status raises :class:`ApiStatusError`."""
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S, sock_connect=CONNECT_TIMEOUT_S)
        async with self.session.get(self.server + path, params=dict(params), timeout=timeout) as response:
            await raise_for_status(response)
            body = await response.json(content_type=None)
        if not isinstance(body, dict):
            raise ValueError(f"GET {path}: the API server answered {type(body).__name__}")
        return body

    async def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The official-client ``method(*args, **kwargs)``, sent on this session; the answer as a dict. Raises the
        client's ``ApiException`` for an error status (``_request_timeout`` and ``_preload_content`` are this
        session's business and ignored)."""
        http_method, url, headers, body, _ = _serialized(method, args, kwargs)
        if url.startswith("/"):
            url = self.server + url
        # The session says who sends it and with which token (refreshed per request), as for every other request.
        headers = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "user-agent")}
        if body is not None:
            headers["Content-Type"] = content_type(headers.get("Content-Type"), body)
        connect, read = REQUEST_TIMEOUT
        timeout = aiohttp.ClientTimeout(total=connect + read, sock_connect=connect)
        data = None if body is None else json.dumps(body)
        async with self.session.request(http_method, url, headers=headers, data=data, timeout=timeout) as response:
            text = await response.text()
            if response.status >= 400:
                raise kubernetes.client.ApiException(status=response.status, reason=response.reason, body=text)
        answer = json.loads(text or "{}")
        if not isinstance(answer, dict):
            raise ValueError(f"{getattr(method, '__name__', 'call')}: the API server answered {type(answer).__name__}")
        return answer

    async def stream(self, path: str, params: Mapping[str, str], *, timeout_s: float) -> AsyncIterator[dict[str, Any]]:
        """``GET path?params`` as a stream of JSON objects, one per line, until the server ends it (or
        ``timeout_s`` passes: a connection that went silent is not waited on for ever)."""
        timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=CONNECT_TIMEOUT_S)
        async with self.session.get(self.server + path, params=dict(params), timeout=timeout) as response:
            await raise_for_status(response)
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
            if buffer.strip():
                yield json.loads(buffer)


def content_type(declared: str | None, body: object) -> str:
    """The ``Content-Type`` of a request with a JSON ``body``, as the official client's REST layer sends it: JSON when
    the method declares none (a create), and a strategic merge patch where a built-in object's patch declares a JSON
    Patch but the body is an object, not a list of operations (aiohttp would send ``text/plain``: the API server
    answers 415)."""
    if not declared:
        return "application/json"
    if declared == "application/json-patch+json" and not isinstance(body, list):
        return "application/strategic-merge-patch+json"
    return declared


def _serialized(method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """``(method, url, headers, body, post_params)`` of an official-client call, from the client's own serializer
    (``_<method>_serialize``, which every generated API method has)."""
    serialize, names = _serializer(method)
    params: dict[str, Any] = dict.fromkeys(names)
    params.update(zip(names, args, strict=False))
    params.update((key, value) for key, value in kwargs.items() if key in params)
    return tuple(serialize(**params))


def _serializer(method: Callable[..., Any]) -> tuple[Callable[..., Any], tuple[str, ...]]:
    api: object = getattr(method, "__self__", None)
    serialize = getattr(api, f"_{getattr(method, '__name__', '')}_serialize", None)
    if serialize is None:
        raise TypeError(f"{method!r} is not a method of a kubernetes client API")
    api_class: type = type(api)
    return serialize, _parameters(api_class, method.__name__)


@functools.cache
def _parameters(api_class: type, name: str) -> tuple[str, ...]:
    """The serializer's parameters, in order (its positional ones first, as the method's)."""
    return tuple(inspect.signature(getattr(api_class, f"_{name}_serialize")).parameters)[1:]  # without self


async def raise_for_status(response: aiohttp.ClientResponse) -> None:
    if response.status < 400:
        return
    text = await response.text()
    try:
        message = json.loads(text).get("message") or text
    except (ValueError, AttributeError):
        message = text
    raise ApiStatusError(response.status, str(message)[:500] or str(response.reason))


def new_session(
    identity: KubeIdentity, *, user_agent: str, gate: WriteGate | None, write_bound_s: float | None = None
) -> aiohttp.ClientSession:
    """A fresh aiohttp session as ``identity`` (Kopf closes the sessions it is given when it logs in again)."""
    configuration = identity.configuration

    async def identify(request: aiohttp.ClientRequest, handler: Any) -> aiohttp.ClientResponse:
        if gate is not None and request.method not in READ_METHODS:
            gate.check()
        header = authorization(configuration)
        if header:
            request.headers["Authorization"] = header
        response: aiohttp.ClientResponse = await handler(request)
        return response

    return aiohttp.ClientSession(
        connector=bounded_connector(write_bound_s, limit=0, ssl=ssl_context(configuration) or True),
        headers={"User-Agent": user_agent},
        middlewares=(identify,),
        request_class=gated_request_class(gate) if gate is not None else aiohttp.ClientRequest,
    )
