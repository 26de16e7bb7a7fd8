"""Downloading a running coordinator's journal (``GET /v1/journal``) into JSON Lines segments for the readers.

Owns ``--journal-url``: the analytics CronJob cannot mount the coordinator's data volume (ReadWriteOnce), so it
pages through the journal over HTTP with an admin token instead. Rules:
- Pages of ``PAGE_LIMIT`` events (the API's maximum), ``after`` = the last seq received, until a page comes back
  empty; events are written as the coordinator writes them, one compact JSON object per line, in segments named
  like the coordinator's (``segment-<first seq, 20 digits>.jsonl``) of at most ``SEGMENT_EVENTS`` events.
- Standard library only (this runs before Spark starts; the pipeline imports no Berth service).
- The token is sent as a bearer token and never printed; it needs the ``journal:read`` scope (or admin). Redirects
  are not followed, so the token goes to the given URL only. An https URL is verified against ``--ca-file`` (else
  the system's CAs). Every failure (unreachable, 401/403, a body that is not a journal page) is one
  ``JournalError`` line naming the URL, with the coordinator's own error message when it gave one.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from berth.pipeline.sources import JournalError

PAGE_LIMIT = 10_000
SEGMENT_EVENTS = 500_000
TIMEOUT_S = 30.0


def read_token_file(path: str) -> str:
    """The bearer token in ``path`` (surrounding whitespace removed); a missing or empty file is a JournalError."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as e:
        raise JournalError(f"--token-file {path}: {e.strerror or e}") from e
    if not token:
        raise JournalError(f"--token-file {path}: the file is empty")
    return token


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is an error: urllib would send the Authorization header on to wherever the answer points."""

    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None


def opener_for(ca_file: str | None) -> urllib.request.OpenerDirector:
    """URL opening without redirects, verifying https against ``ca_file`` (else the system's CAs)."""
    handlers: list[urllib.request.BaseHandler] = [_NoRedirects()]
    if ca_file is not None:
        try:
            context = ssl.create_default_context(cafile=ca_file)
        except (OSError, ValueError) as e:
            raise JournalError(f"--ca-file {ca_file}: {getattr(e, 'strerror', None) or e}") from e
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers)


def download_journal(
    base_url: str,
    token: str | None,
    directory: str,
    on_page: Callable[[int], None] = lambda _events: None,
    ca_file: str | None = None,
) -> int:
    """Write every event of the coordinator at ``base_url`` into segments under ``directory``; returns the count.

    ``on_page`` is told the running total after each page (progress output for long downloads)."""
    opener = opener_for(ca_file)
    os.makedirs(directory, exist_ok=True)
    total = 0
    segment: TextIO | None = None
    in_segment = 0
    try:
        for event_line, seq in _journal_lines(opener, base_url, token, on_page):
            if segment is None or in_segment >= SEGMENT_EVENTS:
                if segment is not None:
                    segment.close()
                segment = open(os.path.join(directory, f"segment-{seq:020d}.jsonl"), "w", encoding="utf-8")  # noqa: SIM115
                in_segment = 0
            segment.write(event_line + "\n")
            in_segment += 1
            total += 1
    finally:
        if segment is not None:
            segment.close()
    return total


def _journal_lines(
    opener: urllib.request.OpenerDirector, base_url: str, token: str | None, on_page: Callable[[int], None]
) -> Iterator[tuple[str, int]]:
    after = 0
    received = 0
    while True:
        events = _page(opener, base_url, token, after)
        if not events:
            return
        for event in events:
            yield json.dumps(event, separators=(",", ":")), int(event["seq"])
        after = int(events[-1]["seq"])
        received += len(events)
        on_page(received)


def _page(opener: urllib.request.OpenerDirector, base_url: str, token: str | None, after: int) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"after": after, "limit": PAGE_LIMIT})
    url = f"{base_url.rstrip('/')}/v1/journal?{query}"
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with opener.open(request, timeout=TIMEOUT_S) as response:
            body = response.read()
    except urllib.error.HTTPError as e:
        raise JournalError(f"journal {url}: HTTP {e.code}{_coordinator_message(e.read())}") from e
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise JournalError(f"journal {url}: coordinator unreachable ({reason})") from e
    try:
        page = json.loads(body)
        events = page["events"]
        if not isinstance(events, list) or not all(_is_event(e) for e in events):
            raise TypeError("events is not a list of events with a seq")
    except (ValueError, KeyError, TypeError) as e:
        raise JournalError(f"journal {url}: not a journal page ({e})") from e
    return events


def _is_event(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("seq"), int)


def _coordinator_message(body: bytes) -> str:
    """``: <message>`` from the coordinator's JSON error body, or nothing."""
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        return ""
    return f": {message}" if isinstance(message, str) and message else ""
