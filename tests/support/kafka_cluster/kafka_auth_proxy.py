"""A front for the test broker that authenticates clients the way a Strimzi-managed Kafka listener does — TLS with the
cluster CA's server certificate, then mutual TLS (a client certificate from the clients CA) or SASL SCRAM-SHA-512
— and forwards everything else to kfake, which has no SASL or TLS of its own (its README).

It speaks the Kafka protocol for exactly what a listener's authentication needs: SaslHandshake and
SaslAuthenticate are answered here (the SCRAM exchange of RFC 5802/7677, checked against the users it is given;
nothing else is accepted before that), and the answers that name brokers (Metadata, FindCoordinator,
DescribeCluster) are rewritten to name this front, so a client's every connection comes back through it. The rest
goes to the broker byte for byte, one request at a time per connection, as a broker serves a connection. The
clients are real (kafka-python in the operator, librdkafka in the pods); what they authenticate with comes from real
Secrets on the real API server. What is recorded: each authenticated principal (``authenticated``: the SCRAM
username, or the client certificate's CN) and each refusal (``refused``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import socket
import ssl
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.metadata import FindCoordinatorResponse, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
#: Answers naming brokers: (api key) -> the response class rewritten to name this front.
REWRITTEN = {3: MetadataResponse, 10: FindCoordinatorResponse, 60: DescribeClusterResponse}
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE = 58, 33, 34
ITERATIONS = 4096


@dataclass
class KafkaAuthProxy:
    upstream: tuple[str, int]
    tls: ssl.SSLContext | None = None  # server side; CERT_REQUIRED for mutual TLS
    scram_users: Mapping[str, str] | None = None  # SCRAM-SHA-512 username -> password; None: no SASL
    authenticated: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def start(self) -> KafkaAuthProxy:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stopping = threading.Event()
        threading.Thread(target=self._accept, name="kafka-auth-proxy", daemon=True).start()
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.close()

    # -------------------------------------------------------------------------------------------- connections

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        client: socket.socket = raw
        try:
            if self.tls is not None:
                try:
                    client = self.tls.wrap_socket(raw, server_side=True)
                except (ssl.SSLError, OSError) as error:
                    self.refused.append(f"TLS: {error}")
                    return
                peer = client.getpeercert()  # type: ignore[attr-defined]
                if peer:
                    subject = dict(item for rdn in peer.get("subject", ()) for item in rdn)
                    self.authenticated.append(f"CN={subject.get('commonName', '')}")
            with socket.create_connection(self.upstream, timeout=30) as upstream:
                self._relay(client, upstream)
        except (OSError, ConnectionError, struct.error, ValueError):
            return
        finally:
            with contextlib.suppress(OSError):
                client.close()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        scram = _Scram(self.scram_users) if self.scram_users is not None else None
        while True:
            request = _read_frame(client)
            key, version, correlation = struct.unpack(">hhi", request[:8])
            if scram is not None and not scram.done:
                if key == SASL_HANDSHAKE:
                    client.sendall(scram.handshake(request, version, correlation))
                    continue
                if key == SASL_AUTHENTICATE:
                    answer, failure = scram.authenticate(request, version, correlation)
                    client.sendall(answer)
                    if failure:
                        self.refused.append(failure)
                        return
                    if scram.done:
                        self.authenticated.append(scram.username)
                    continue
                if key != API_VERSIONS:
                    self.refused.append(f"api key {key} before authenticating")
                    return
            upstream.sendall(struct.pack(">i", len(request)) + request)
            response = _read_frame(upstream)
            if key in REWRITTEN:
                response = self._rewritten(REWRITTEN[key], response, version)
            client.sendall(struct.pack(">i", len(response)) + response)

    def _rewritten(self, cls: Any, payload: bytes, version: int) -> bytes:
        """The answer naming this front wherever it named a broker."""
        answer = cls.decode(payload, version=version, header=True)
        for broker in [*(getattr(answer, "brokers", None) or []), *(getattr(answer, "coordinators", None) or [])]:
            broker.host, broker.port = "127.0.0.1", self.port
        if getattr(answer, "host", None):
            answer.host, answer.port = "127.0.0.1", self.port
        encoded: bytes = answer.encode(header=True)
        return encoded


class _Scram:
    """The server side of one SCRAM-SHA-512 exchange (RFC 5802), with Kafka's framing of it."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.done = False
        self.username = ""
        self._first_bare = self._server_first = self._nonce = ""
        self._salt = os.urandom(16)

    def handshake(self, request: bytes, version: int, correlation: int) -> bytes:
        asked = SaslHandshakeRequest.decode(request, version=version, header=True).mechanism
        error = 0 if asked == "SCRAM-SHA-512" else UNSUPPORTED_SASL_MECHANISM
        answer = SaslHandshakeResponse(version=version, error_code=error, mechanisms=["SCRAM-SHA-512"])
        return _framed(answer, correlation)

    def authenticate(self, request: bytes, version: int, correlation: int) -> tuple[bytes, str | None]:
        message = SaslAuthenticateRequest.decode(request, version=version, header=True).auth_bytes.decode()
        if not self._server_first:
            self._first_bare = message.split(",", 2)[2]
            fields = dict(part.split("=", 1) for part in self._first_bare.split(","))
            self.username = fields["n"]
            self._nonce = fields["r"] + base64.b64encode(os.urandom(18)).decode()
            salt = base64.b64encode(self._salt).decode()
            self._server_first = f"r={self._nonce},s={salt},i={ITERATIONS}"
            return self._answer(self._server_first.encode(), version, correlation), None
        final = dict(part.split("=", 1) for part in message.split(","))
        without_proof = message.rsplit(",p=", 1)[0]
        password = self.users.get(self.username)
        if password is None or final.get("r") != self._nonce:
            return self._failed(version, correlation, f"SCRAM: unknown user {self.username!r}")
        salted = hashlib.pbkdf2_hmac("sha512", password.encode(), self._salt, ITERATIONS)
        client_key = hmac.new(salted, b"Client Key", "sha512").digest()
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(hashlib.sha512(client_key).digest(), auth_message, "sha512").digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        if not hmac.compare_digest(proof, base64.b64decode(final.get("p", ""))):
            return self._failed(version, correlation, f"SCRAM: wrong password for {self.username!r}")
        server_key = hmac.new(salted, b"Server Key", "sha512").digest()
        verifier = base64.b64encode(hmac.new(server_key, auth_message, "sha512").digest()).decode()
        self.done = True
        return self._answer(f"v={verifier}".encode(), version, correlation), None

    def _answer(self, data: bytes, version: int, correlation: int, error: int = 0) -> bytes:
        fields: dict[str, Any] = {"error_code": error, "error_message": None, "auth_bytes": data}
        if version >= 1:
            fields["session_lifetime_ms"] = 0
        return _framed(SaslAuthenticateResponse(version=version, **fields), correlation)

    def _failed(self, version: int, correlation: int, why: str) -> tuple[bytes, str]:
        return self._answer(b"", version, correlation, SASL_AUTHENTICATION_FAILED), why


def _framed(response: Any, correlation: int) -> bytes:
    response.with_header(correlation_id=correlation)
    encoded: bytes = response.encode(header=True, framed=True)
    return encoded


def _read_frame(connection: socket.socket) -> bytes:
    size = struct.unpack(">i", _read(connection, 4))[0]
    return _read(connection, size)


def _read(connection: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def main(argv: list[str] | None = None) -> None:
    """``python -m support.kafka_auth_proxy --upstream HOST:PORT --cert F --key F [--client-ca F]``: a front serving
    TLS (mutual with ``--client-ca``) in a process of its own (the node tier runs it in the node's network
    namespace); it prints ``listening HOST:PORT``, then ``authenticated WHO`` and ``refused WHY`` as they happen."""
    import argparse
    import sys
    import time

    parser = argparse.ArgumentParser(prog="kafka_auth_proxy")
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--client-ca")
    args = parser.parse_args(argv)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    if args.client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(args.client_ca)
    host, port = args.upstream.rsplit(":", 1)
    proxy = KafkaAuthProxy((host, int(port)), tls=context).start()
    print(f"listening {proxy.bootstrap}", flush=True)
    told = [0, 0]
    while True:
        for index, (kind, said) in enumerate((("authenticated", proxy.authenticated), ("refused", proxy.refused))):
            for line in said[told[index] :]:
                print(f"{kind} {line}", flush=True)
            told[index] = len(said)
        sys.stdout.flush()
        time.sleep(0.2)


if __name__ == "__main__":
    main()
