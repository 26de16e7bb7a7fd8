"""Certificates for TLS tests, made with the ``openssl`` command the way an operator would: a CA, and server
certificates it signs (for 127.0.0.1 and localhost), written where a coordinator reads them.

``install`` replaces a certificate and key the way the kubelet updates a Secret volume: both files appear at once
(written aside, then renamed over the old ones).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from support.ci import unavailable


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path

    def serial(self) -> int:
        out = _openssl("x509", "-in", str(self.cert), "-noout", "-serial")
        return int(out.strip().split("=", 1)[1], 16)


def openssl_or_skip() -> str:
    path = shutil.which("openssl")
    if path is None:
        unavailable("the openssl command is not installed")
    return path


def _openssl(*args: str) -> str:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"openssl {' '.join(args)}: {result.stderr}"
    return result.stdout


def make_ca(directory: Path, name: str = "berth-test-ca") -> Pair:
    directory.mkdir(parents=True, exist_ok=True)
    pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
    _openssl(
        *("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"),
        *("-keyout", str(pair.key), "-out", str(pair.cert), "-days", "2", "-subj", f"/CN={name}"),
        *("-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"),
    )
    return pair


def make_server_cert(directory: Path, ca: Pair, serial: int, name: str = "coordinator") -> Pair:
    """A certificate for 127.0.0.1 and localhost, signed by ``ca``, with the given serial number."""
    directory.mkdir(parents=True, exist_ok=True)
    pair = Pair(directory / f"{name}-{serial}.crt", directory / f"{name}-{serial}.key")
    csr = directory / f"{name}-{serial}.csr"
    extensions = directory / f"{name}-{serial}.ext"
    extensions.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    _openssl(
        *("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"),
        *("-keyout", str(pair.key), "-out", str(csr), "-subj", f"/CN={name}"),
    )
    _openssl(
        *("x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key)),
        *("-set_serial", str(serial), "-days", "2", "-out", str(pair.cert), "-extfile", str(extensions)),
    )
    return pair


def install(source: Pair, target: Pair) -> None:
    """Put ``source``'s certificate and key in ``target``'s place, each file replaced in one rename."""
    for src, dst in ((source.key, target.key), (source.cert, target.cert)):
        staged = dst.with_name(f".{dst.name}.new")
        shutil.copyfile(src, staged)
        os.replace(staged, dst)


def served_serial(host: str, port: int, ca: Pair) -> int:
    """The serial number of the certificate a fresh TLS connection is shown, verified against ``ca``."""
    context = ssl.create_default_context(cafile=str(ca.cert))
    with (
        socket.create_connection((host, port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    pem = ssl.DER_cert_to_PEM_cert(der)
    result = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=pem, capture_output=True, text=True)
    return int(result.stdout.strip().split("=", 1)[1], 16)


def tls_handshake(data: dict[str, bytes], server_name: str) -> str | None:
    """Serve ``tls.crt``/``tls.key`` on loopback and connect verifying against ``ca.crt`` as ``server_name``: None
    when the handshake verifies, else why not."""
    with tempfile.TemporaryDirectory() as directory:
        cert, key = Path(directory, "tls.crt"), Path(directory, "tls.key")
        cert.write_bytes(data["tls.crt"])
        key.write_bytes(data["tls.key"])
        server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cadata=data["ca.crt"].decode())
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve() -> None:
            connection, _ = listener.accept()
            with contextlib.suppress(OSError), server_context.wrap_socket(connection, server_side=True) as tls:
                tls.recv(1)

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        try:
            with (
                socket.create_connection(listener.getsockname(), timeout=10) as raw,
                client_context.wrap_socket(raw, server_hostname=server_name),
            ):
                return None
        except ssl.SSLCertVerificationError as error:
            return str(error)
        finally:
            server.join(10)
