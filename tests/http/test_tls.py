"""TLS on a real coordinator process, with a CA and certificates made by ``openssl`` (issue 12, item 15; docs/api.md
§10 "TLS"):

- clients that trust the CA complete the handshake and are served; one that does not is refused by its own check;
- a certificate replaced in place (as cert-manager and the kubelet do) is served to new connections within the
  reload interval, while the listener stays open and connections made before keep working;
- a replacement that does not load (a key that does not match) leaves the last good certificate in place, logged
  and counted; an unusable certificate at start is one line on stderr and exit status 2.
"""

from __future__ import annotations

import http.client
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.certs import Pair, install, make_ca, make_server_cert, openssl_or_skip, served_serial
from support.coordinator import CoordinatorProcess, secured_coordinator

pytestmark = pytest.mark.timeout(120)


@dataclass
class Secured:
    proc: CoordinatorProcess
    ca: Pair
    live: Pair
    spare: Path

    @property
    def port(self) -> int:
        return int(self.proc.url.rsplit(":", 1)[1])

    def client(self) -> http.client.HTTPSConnection:
        context = ssl.create_default_context(cafile=str(self.ca.cert))
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=10)


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Secured]:
    openssl_or_skip()
    ca = make_ca(tmp_path / "ca")
    live = Pair(tmp_path / "tls" / "tls.crt", tmp_path / "tls" / "tls.key")
    live.cert.parent.mkdir()
    install(make_server_cert(tmp_path / "issued", ca, 1001), live)
    with secured_coordinator(tmp_path, tls=live, flags=("--tls-reload-interval-s", "0.2")) as proc:
        yield Secured(proc, ca, live, tmp_path / "issued")


def get(connection: http.client.HTTPSConnection, path: str) -> tuple[int, bytes]:
    connection.request("GET", path)
    answer = connection.getresponse()
    return answer.status, answer.read()


def until_served(secured: Secured, serial: int, timeout_s: float = 15.0) -> None:
    """Open new connections until one is shown the certificate with ``serial`` (each one must succeed)."""
    deadline = time.monotonic() + timeout_s
    while served_serial("127.0.0.1", secured.port, secured.ca) != serial:
        assert time.monotonic() < deadline, f"certificate {serial} not served after {timeout_s} s"
        time.sleep(0.05)


def test_a_client_that_trusts_the_ca_is_served_and_others_are_refused(secured: Secured) -> None:
    assert secured.proc.url.startswith("https://")
    assert served_serial("127.0.0.1", secured.port, secured.ca) == 1001
    assert get(secured.client(), "/healthz") == (200, b'{"status":"ok"}')
    untrusting = http.client.HTTPSConnection("127.0.0.1", secured.port, context=ssl.create_default_context())
    with pytest.raises(ssl.SSLCertVerificationError):
        get(untrusting, "/healthz")
    plain = http.client.HTTPConnection("127.0.0.1", secured.port, timeout=10)  # no TLS: no answer, no token sent
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        get(plain, "/healthz")


def test_a_rotated_certificate_is_served_without_closing_the_listener(secured: Secured) -> None:
    before = secured.client()
    assert get(before, "/healthz")[0] == 200  # a keep-alive connection made with the old certificate
    install(make_server_cert(secured.spare, secured.ca, 1002), secured.live)
    until_served(secured, 1002)
    assert get(before, "/healthz")[0] == 200  # still open, still served
    assert get(secured.client(), "/readyz")[0] == 200
    status, text = get(secured.client(), "/metrics")
    assert status == 200 and b'berth_tls_reloads_total{result="ok"} 1' in text
    assert "tls: reloaded the certificate" in secured.proc.stderr()


def test_a_replacement_that_does_not_load_keeps_the_last_good_certificate(secured: Secured) -> None:
    first = make_server_cert(secured.spare, secured.ca, 1003)
    other = make_server_cert(secured.spare, secured.ca, 1004)
    install(Pair(first.cert, other.key), secured.live)  # a key that does not belong to the certificate
    deadline = time.monotonic() + 15
    while b'berth_tls_reloads_total{result="failed"}' not in get(secured.client(), "/metrics")[1]:
        assert time.monotonic() < deadline, "the broken pair was never tried"
        time.sleep(0.05)
    assert served_serial("127.0.0.1", secured.port, secured.ca) == 1001
    assert "tls: keeping the current certificate" in secured.proc.stderr()
    install(first, secured.live)  # the rotation completes: the good pair is picked up
    until_served(secured, 1003)


def test_an_unusable_certificate_is_refused_at_start(tmp_path: Path) -> None:
    openssl_or_skip()
    ca = make_ca(tmp_path / "ca")
    one, two = make_server_cert(tmp_path, ca, 1), make_server_cert(tmp_path, ca, 2)
    proc = CoordinatorProcess(tmp_path / "data", "--tls-cert-file", str(one.cert), "--tls-key-file", str(two.key))
    with pytest.raises(RuntimeError, match="exit 2"):
        proc.start()
    lines = proc.stderr().strip().splitlines()
    assert len(lines) == 1 and str(one.cert) in lines[0], lines
