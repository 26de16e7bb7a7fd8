"""Synchronous raw HTTP for tests that need to send exactly the bytes and headers they choose."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit


def send(
    base_url: str, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """Send one request on a fresh connection; returns (status, parsed JSON body or raw text)."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, raw.decode("utf-8", "replace")
    finally:
        conn.close()


def post_json(base_url: str, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    return send(
        base_url, "POST", path, json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})}
    )
