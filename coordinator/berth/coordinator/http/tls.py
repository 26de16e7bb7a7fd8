"""HTTPS on the API listener (docs/api.md §10 "TLS"): a certificate and key from files, reloaded when the files
change, without closing the listener.

Owns ``ServerTls``. Rules:

- The listener's ``SSLContext`` is made once. Its SNI callback, which OpenSSL calls for every ClientHello (with or
  without a server name), moves the handshake to the context of the newest certificate loaded; connections already
  open keep the certificate they were made with. Nothing is closed or re-bound to rotate.
- Every ``reload_interval_s`` the two files' identity (device, inode, size, modification time, following symlinks:
  a Kubernetes Secret volume swaps a symlink, cert-manager rewrites the Secret) is compared with what was loaded;
  when it changed, a new context is built from both files. A pair that does not load (half written, a key that does
  not match the certificate) is logged, counted and retried at the next check; the last good certificate stays.
- TLS 1.2 at least, no client certificates (clients prove themselves with bearer tokens).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import ssl
import time
from pathlib import Path

from berth.coordinator.http.config import TlsFiles
from berth.coordinator.http.metrics import EdgeStats, count
from berth.coordinator.http.quiet_log import QuietLog

log = logging.getLogger("berth.coordinator")

FileIdentity = tuple[tuple[int, int, int, int], tuple[int, int, int, int]]


class TlsError(Exception):
    """The certificate or key cannot be used; the message names the file."""


class ServerTls:
    def __init__(self, files: TlsFiles, stats: EdgeStats, quiet: QuietLog) -> None:
        self.files = files
        self.stats = stats
        self.quiet = quiet
        self._identity = _identity(files)
        self._current = _context(files)  # raises TlsError: the coordinator does not start without its certificate
        self.listener_context = self._current
        self.listener_context.sni_callback = self._choose_context
        self._checker: asyncio.TimerHandle | None = None
        self.stats.tls_loaded_at = time.time()
        log.info("tls: serving the certificate in %s (%s)", files.cert_file, fingerprint(files.cert_file))

    def _choose_context(self, connection: ssl.SSLObject, _server_name: str | None, listener: ssl.SSLContext) -> None:
        current = self._current
        if current is not listener:
            connection.context = current

    # ------------------------------------------------------------------------------------------ reloading

    def start(self) -> None:
        self._checker = asyncio.get_running_loop().call_later(self.files.reload_interval_s, self._check)

    def stop(self) -> None:
        if self._checker is not None:
            self._checker.cancel()
            self._checker = None

    def _check(self) -> None:
        try:
            self.reload_if_changed()
        finally:
            self.start()

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed since the last good load; True when a new certificate is served."""
        try:
            identity = _identity(self.files)
            if identity == self._identity:
                return False
            context = _context(self.files)
        except TlsError as exc:
            count(self.stats.tls_reloads, "failed")
            self.quiet.write(logging.ERROR, "tls_reload", "tls: keeping the current certificate: %s", exc)
            return False
        self._current = context
        self._identity = identity
        self.stats.tls_loaded_at = time.time()
        count(self.stats.tls_reloads, "ok")
        log.info("tls: reloaded the certificate in %s (%s)", self.files.cert_file, fingerprint(self.files.cert_file))
        return True


def _context(files: TlsFiles) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(files.cert_file, files.key_file)
    except FileNotFoundError as exc:
        raise TlsError(f"{exc.filename}: no such file") from None
    except OSError as exc:  # ssl.SSLError is an OSError
        raise TlsError(
            f"cannot use the certificate {files.cert_file} with the key {files.key_file}: "
            f"{getattr(exc, 'reason', None) or exc.strerror or exc}"
        ) from None
    return context


def _identity(files: TlsFiles) -> FileIdentity:
    def one(path: Path) -> tuple[int, int, int, int]:
        try:
            stat = os.stat(path)
        except OSError as exc:
            raise TlsError(f"{path}: {exc.strerror or exc}") from None
        return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns

    return one(files.cert_file), one(files.key_file)


def fingerprint(cert_file: Path) -> str:
    """``sha256 ab12cd34...`` of the first certificate in a PEM file (what ``openssl x509 -fingerprint`` shows)."""
    try:
        pem = cert_file.read_text(encoding="ascii", errors="replace")
        start = pem.index(ssl.PEM_HEADER)
        der = ssl.PEM_cert_to_DER_cert(pem[start : pem.index(ssl.PEM_FOOTER, start) + len(ssl.PEM_FOOTER)])
    except (OSError, ValueError):
        return "fingerprint unknown"
    return f"sha256 {hashlib.sha256(der).hexdigest()[:16]}"
