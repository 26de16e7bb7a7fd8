"""``berth-analyze --journal-url`` as the chart runs it (issue 12, items 15 and 16): over HTTPS verified with
``--ca-file``, with a token that has only the ``journal:read`` scope, and never following a redirect with it.
"""

from __future__ import annotations

import json
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.certs import Pair, install, make_ca, make_server_cert, openssl_or_skip
from support.coordinator import CoordinatorProcess, secured_coordinator

from berth.pipeline.fetch import download_journal
from berth.pipeline.main import main
from berth.pipeline.sources import JournalError

pytestmark = pytest.mark.timeout(60)

ADMIN = "operator-admin-token-0123"
ANALYTICS = "analytics-journal-token-4567"


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[CoordinatorProcess, Pair]]:
    openssl_or_skip()
    ca = make_ca(tmp_path / "ca")
    live = Pair(tmp_path / "tls.crt", tmp_path / "tls.key")
    install(make_server_cert(tmp_path / "issued", ca, 11), live)
    tokens = [
        {"name": "operator", "token": ADMIN, "admin": True},
        {"name": "analytics", "token": ANALYTICS, "scopes": ["journal:read"]},
    ]
    with secured_coordinator(tmp_path, tokens=tokens, tls=live) as proc:
        yield proc, ca


def test_the_journal_is_downloaded_over_https_with_the_journal_scope(
    secured: tuple[CoordinatorProcess, Pair], tmp_path: Path
) -> None:
    proc, ca = secured
    request = urllib.request.Request(
        f"{proc.url}/v1/groups/orders/expected-members",
        data=b'{"group_instance_ids": ["orders-0", "orders-1"]}',
        method="PUT",
        headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(ca.cert)), timeout=10).close()
    events = download_journal(proc.url, ANALYTICS, str(tmp_path / "journal"), ca_file=str(ca.cert))
    assert events == 2
    lines = [json.loads(line) for f in sorted((tmp_path / "journal").iterdir()) for line in f.read_text().splitlines()]
    assert [e["type"] for e in lines] == ["group_created", "expected_members_changed"]
    assert lines[1]["actor"] == "operator"

    with pytest.raises(JournalError, match="certificate verify failed"):
        download_journal(proc.url, ANALYTICS, str(tmp_path / "again"))  # without the CA: not trusted


def test_a_redirect_is_not_followed_with_the_token(tmp_path: Path) -> None:
    seen: list[str | None] = []

    class Target(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"events": [], "next": 0}')

        def log_message(self, *_: object) -> None:
            pass

    target = ThreadingHTTPServer(("127.0.0.1", 0), Target)

    class Redirect(Target):
        def do_GET(self) -> None:
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{target.server_address[1]}/v1/journal")
            self.end_headers()

    redirect = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    for server in (target, redirect):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(JournalError, match="HTTP 307"):
            download_journal(f"http://127.0.0.1:{redirect.server_address[1]}", ANALYTICS, str(tmp_path / "j"))
    finally:
        target.shutdown()
        redirect.shutdown()
    assert seen == []


def test_a_ca_file_without_a_journal_url_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--journal", str(tmp_path), "--ca-file", str(tmp_path / "ca.crt"), "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "--ca-file goes with --journal-url" in capsys.readouterr().err
