"""A small synchronous etcd v3 client: KV over gRPC (``Txn``, ``Range``), leases and watches over etcd's JSON
gateway (``/v3/lease/*``, ``/v3/watch``), both on the same client URL (etcd serves the two on one port).

Why a blocking client: the store's writer and the election run in threads of their own (as the SQLite writer
does), so a blocking client fits them and keeps etcd's I/O off the event loop.

Why KV over gRPC: a transaction through the gateway costs etcd about 1.6 times the CPU of the same transaction
over gRPC (JSON and base64 decoding, then a call to its own gRPC server; docs/high-availability.md, "Throughput",
measured by ``python -m benchmarks.etcd_floor``), and on a machine that runs etcd beside the coordinator that CPU
is the coordinator's. The messages are encoded by hand (``kv_wire``): the requests and answers keep the gateway's JSON
shapes, so the store speaks one dialect whichever path a call takes. Leases and watches stay on the gateway: they
are rare, and gRPC has them only as streams.

Rules:
- One ``EtcdClient`` may be shared by threads: each thread has its own keep-alive connection and gRPC channel
  (``threading.local``), both to the endpoint the thread is on.
- Endpoints are tried in turn: a request that fails to reach one moves that thread to the next (and closes its
  connection and channel to it), so a dead or partitioned etcd member costs one timeout, not an outage.
- Errors say whether the request may have taken effect. ``EtcdUnavailable``: not known (connection lost, timeout,
  HTTP 5xx, gRPC's UNAVAILABLE or DEADLINE_EXCEEDED, etcd's "leader changed" or "request timed out") — the caller
  must find out before it reports failure. ``EtcdRefused``: etcd answered that it did not apply it (HTTP 4xx or
  the gRPC status of one: too many operations, request too large, a compacted revision, an unknown lease, out of
  space). Neither message carries a key or value.
- Keys and values are bytes; the gateway carries them as base64 and 64-bit integers as strings (``b64``/``num``).
  A request body may hold ``bytes`` where the gateway wants base64 (msgspec and ``kv_wire`` take either); an
  answer's keys and values are base64 text from the gateway and bytes over gRPC (``unb64`` takes either).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
import msgspec

from berth.coordinator.store.etcd.kv_wire import decode_range, decode_txn, encode_range, encode_txn

JsonObject = dict[str, Any]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode

#: Watches ask etcd to cancel them when the member they reach loses its raft leader (a partitioned member), so a
#: standby never waits on a watch that cannot deliver (gRPC metadata "hasleader", passed by the gateway).
_REQUIRE_LEADER = {"Grpc-Metadata-hasleader": "true"}


class EtcdError(Exception):
    """Something went wrong talking to etcd."""


class EtcdUnavailable(EtcdError):
    """etcd could not be asked, or did not say whether it applied the request (it may have)."""


class EtcdRefused(EtcdError):
    """etcd answered that it did not apply the request (HTTP 4xx); ``code`` is the gRPC status code."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str | bytes | None) -> bytes:
    """A key or value of an answer: base64 text from the gateway, bytes over gRPC, absent when empty."""
    if isinstance(text, bytes):
        return text
    return base64.b64decode(text) if text else b""


def num(value: object) -> int:
    """A 64-bit integer as the gateway writes it (a string; absent when zero)."""
    return int(value) if value is not None else 0  # type: ignore[call-overload]


def prefix_end(prefix: bytes) -> bytes:
    """The ``range_end`` that makes a range cover every key starting with ``prefix``."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\x00"  # every key


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int

    @classmethod
    def of(cls, kv: JsonObject) -> KeyValue:
        return cls(
            unb64(kv.get("key")),
            unb64(kv.get("value")),
            num(kv.get("create_revision")),
            num(kv.get("mod_revision")),
            num(kv.get("lease")),
        )


@dataclass(frozen=True, slots=True)
class _Endpoint:
    https: bool
    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> _Endpoint:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"etcd endpoint {url!r}: expected http(s)://HOST:PORT")
        return cls(parts.scheme == "https", parts.hostname, parts.port or 2379)

    def __str__(self) -> str:
        return f"{'https' if self.https else 'http'}://{self.host}:{self.port}"


@dataclass(frozen=True)
class EtcdTls:
    """TLS to etcd's https endpoints: ``ca_file`` to verify etcd against (else the system's roots), a client
    certificate and its key to present (PEM files)."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
        if self.cert_file is not None and self.key_file is not None:
            context.load_cert_chain(str(self.cert_file), str(self.key_file))
        return context

    def channel_credentials(self) -> grpc.ChannelCredentials:
        def read(path: Path | None) -> bytes | None:
            return path.read_bytes() if path is not None else None

        return grpc.ssl_channel_credentials(read(self.ca_file), read(self.key_file), read(self.cert_file))


#: gRPC statuses after which a request may still have been applied (the gateway maps them to HTTP 5xx); etcd's
#: own refusals come with other statuses (INVALID_ARGUMENT, OUT_OF_RANGE, NOT_FOUND, RESOURCE_EXHAUSTED, ...).
_GRPC_UNKNOWN_OUTCOME = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.CANCELLED,
    }
)
#: No bound of the client's own on message sizes: etcd's --max-request-bytes is the bound (config.Limits).
_CHANNEL_OPTIONS = (("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1))


class EtcdClient:
    def __init__(self, endpoints: Sequence[str], *, timeout_s: float = 5.0, tls: EtcdTls | None = None) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self.endpoints = [_Endpoint.parse(url) for url in endpoints]
        self.timeout_s = timeout_s
        self._ssl = tls.ssl_context() if tls is not None else None
        self._credentials = (tls or EtcdTls()).channel_credentials() if any(e.https for e in self.endpoints) else None
        self._local = threading.local()

    def __str__(self) -> str:
        return ",".join(str(e) for e in self.endpoints)

    # ------------------------------------------------------------------------------------------- requests

    def call(self, path: str, body: JsonObject, *, timeout_s: float | None = None) -> JsonObject:
        """POST ``body`` to ``path`` on this thread's endpoint; the decoded answer, or an ``EtcdError``."""
        local = self._local
        index = getattr(local, "index", 0)
        endpoint = self.endpoints[index % len(self.endpoints)]
        conn: http.client.HTTPConnection | None = getattr(local, "conn", None)
        if conn is None:
            conn = self._connect(endpoint, timeout_s or self.timeout_s)
            local.conn = conn
        else:
            conn.timeout = timeout_s or self.timeout_s
            if conn.sock is not None:
                conn.sock.settimeout(conn.timeout)
        data = _encode(body)
        try:
            conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            raw = response.read()
            status = response.status
        except (OSError, http.client.HTTPException) as exc:
            self._drop(local, index)
            raise EtcdUnavailable(f"etcd {endpoint}{path}: {_describe(exc)}") from None
        return _answer(endpoint, path, status, raw)

    def kv(self, method: str, request: bytes, decode: Callable[[bytes], JsonObject]) -> JsonObject:
        """Call ``/etcdserverpb.KV/<method>`` with an encoded ``request`` on this thread's endpoint; the answer
        ``decode``d, or an ``EtcdError``."""
        local = self._local
        index = getattr(local, "index", 0)
        endpoint = self.endpoints[index % len(self.endpoints)]
        calls: dict[str, grpc.UnaryUnaryMultiCallable[bytes, bytes]] | None = getattr(local, "calls", None)
        if calls is None:
            target = f"{endpoint.host}:{endpoint.port}"
            if endpoint.https:
                assert self._credentials is not None
                channel = grpc.secure_channel(target, self._credentials, options=_CHANNEL_OPTIONS)
            else:
                channel = grpc.insecure_channel(target, options=_CHANNEL_OPTIONS)
            local.channel, local.calls = channel, {}
            calls = local.calls
        call = calls.get(method)
        if call is None:
            call = calls[method] = local.channel.unary_unary(f"/etcdserverpb.KV/{method}")
        try:
            raw = call(request, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            code: grpc.StatusCode = exc.code()
            text = f"etcd {endpoint} KV/{method}: {exc.details() or code.name}"
            if code in _GRPC_UNKNOWN_OUTCOME:
                self._drop(local, index)
                raise EtcdUnavailable(text) from None
            raise EtcdRefused(text, code.value[0]) from None
        try:
            return decode(raw)
        except ValueError as exc:
            raise EtcdUnavailable(f"etcd {endpoint} KV/{method}: an answer that is not one: {exc}") from None

    def txn(
        self, compare: list[JsonObject], success: list[JsonObject], failure: list[JsonObject] | None = None
    ) -> JsonObject:
        return self.kv("Txn", encode_txn({"compare": compare, "success": success, "failure": failure}), decode_txn)

    def range(
        self,
        key: bytes,
        range_end: bytes | None = None,
        *,
        limit: int = 0,
        revision: int = 0,
        descending: bool = False,
        count_only: bool = False,
        keys_only: bool = False,
    ) -> tuple[list[KeyValue], int, bool, int]:
        """(key-values, the store's revision, whether there are more, count)."""
        body: JsonObject = {"key": key}
        if range_end is not None:
            body["range_end"] = range_end
        if limit:
            body["limit"] = limit
        if revision:
            body["revision"] = revision
        if descending:
            body.update(sort_order="DESCEND", sort_target="KEY")
        if count_only:
            body["count_only"] = True
        if keys_only:
            body["keys_only"] = True
        answer = self.kv("Range", encode_range(body), decode_range)
        kvs = [KeyValue.of(kv) for kv in answer.get("kvs", ())]
        return kvs, num(answer.get("header", {}).get("revision")), bool(answer.get("more")), num(answer.get("count"))

    def lease_grant(self, ttl_s: int) -> tuple[int, int]:
        """A new lease: (id, granted TTL in seconds)."""
        answer = self.call("/v3/lease/grant", {"TTL": ttl_s})
        if answer.get("error"):
            raise EtcdRefused(f"etcd lease grant: {answer['error']}")
        return num(answer.get("ID")), num(answer.get("TTL"))

    def lease_keepalive(self, lease: int) -> int:
        """Renew the lease; its remaining TTL in seconds, 0 when it no longer exists."""
        answer = self.call("/v3/lease/keepalive", {"ID": lease})
        return num(answer.get("result", {}).get("TTL"))

    def lease_revoke(self, lease: int) -> None:
        """Revoke the lease (its keys go with it); a lease already gone is not an error."""
        with contextlib.suppress(EtcdRefused):
            self.call("/v3/lease/revoke", {"ID": lease})

    def watch(self, key: bytes, start_revision: int, timeout_s: float) -> WatchStream:
        """A watch on one key from ``start_revision``; see ``WatchStream``."""
        return WatchStream(self, key, start_revision, timeout_s)

    def close(self) -> None:
        """Close this thread's connection and channel (other threads close theirs when they end)."""
        self._drop(self._local, getattr(self._local, "index", 0), advance=False)

    # ------------------------------------------------------------------------------------------- helpers

    def _connect(self, endpoint: _Endpoint, timeout_s: float) -> http.client.HTTPConnection:
        if endpoint.https:
            return http.client.HTTPSConnection(endpoint.host, endpoint.port, timeout=timeout_s, context=self._ssl)
        return http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout_s)

    def _drop(self, local: threading.local, index: int, *, advance: bool = True) -> None:
        conn = getattr(local, "conn", None)
        if conn is not None:
            conn.close()
        channel = getattr(local, "channel", None)
        if channel is not None:
            channel.close()
        local.conn = local.channel = local.calls = None
        if advance:
            local.index = index + 1


class WatchStream:
    """One watch: ``events()`` yields etcd's events (dicts) until the stream ends, ``timeout_s`` passes without an
    answer, or ``close()`` (from any thread); then it raises ``EtcdUnavailable``. Runs on its own connection."""

    def __init__(self, client: EtcdClient, key: bytes, start_revision: int, timeout_s: float) -> None:
        index = getattr(client._local, "index", 0)
        self.endpoint = client.endpoints[index % len(client.endpoints)]
        self._client = client
        self._key = key
        self._start = start_revision
        self._conn = client._connect(self.endpoint, timeout_s)
        self._closed = threading.Event()

    def events(self) -> Iterator[JsonObject]:
        body = {"create_request": {"key": b64(self._key), "start_revision": self._start}}
        try:
            self._conn.request(
                "POST", "/v3/watch", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
            )
            response = self._conn.getresponse()
            if response.status != 200:
                raise EtcdUnavailable(f"etcd {self.endpoint}/v3/watch: HTTP {response.status}")
            while not self._closed.is_set():
                line = response.readline()
                if not line:
                    raise EtcdUnavailable(f"etcd {self.endpoint}/v3/watch: the stream ended")
                result = json.loads(line).get("result", {})
                if result.get("canceled"):
                    raise EtcdUnavailable(f"etcd {self.endpoint}/v3/watch: canceled ({result.get('cancel_reason')})")
                yield from result.get("events", ())
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self._client._drop(self._client._local, getattr(self._client._local, "index", 0))
            raise EtcdUnavailable(f"etcd {self.endpoint}/v3/watch: {_describe(exc)}") from None
        finally:
            self._conn.close()
        raise EtcdUnavailable("watch closed")

    def close(self) -> None:
        """Stop the watch from any thread: the blocked read returns at once."""
        self._closed.set()
        sock = self._conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _answer(endpoint: _Endpoint, path: str, status: int, raw: bytes) -> JsonObject:
    try:
        answer = _decode(raw) if raw else {}
    except (ValueError, msgspec.DecodeError):
        raise EtcdUnavailable(f"etcd {endpoint}{path}: HTTP {status}, not JSON") from None
    if not isinstance(answer, dict):
        raise EtcdUnavailable(f"etcd {endpoint}{path}: HTTP {status}, not a JSON object")
    if status == 200:
        return answer
    message = str(answer.get("message") or answer.get("error") or f"HTTP {status}")
    code = answer.get("code")
    text = f"etcd {endpoint}{path}: {message}"
    # gRPC Unavailable (14), DeadlineExceeded (4), Unknown (2) and Internal (13) may hide an applied request
    # ("leader changed", "request timed out"); everything else etcd answers before it proposes anything.
    if status >= 500 or code in (2, 4, 13, 14):
        raise EtcdUnavailable(text)
    raise EtcdRefused(text, code if isinstance(code, int) else None)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    return str(exc) or type(exc).__name__
