"""Real ``berth-coordinator`` processes for end-to-end tests: the library's ``CoordinatorProcess``, with the
manual clock by default (tests move time explicitly with ``POST /v1/debug/clock``)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.certs import Pair

from berth.operator.local.coordinator_process import CoordinatorProcess as _CoordinatorProcess


class CoordinatorProcess(_CoordinatorProcess):
    def __init__(self, data_dir: Path, *extra_args: str, manual_clock: bool = True) -> None:
        super().__init__(data_dir, *extra_args, manual_clock=manual_clock)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()  # tests do not wait for a graceful stop they are not testing


@contextmanager
def secured_coordinator(
    folder: Path, *, tokens: Sequence[Mapping[str, Any]] = (), tls: Pair | None = None, flags: Sequence[str] = ()
) -> Iterator[CoordinatorProcess]:
    """A coordinator process on a data directory in ``folder`` that asks for bearer tokens (``--tokens-file``
    listing ``tokens``) and/or serves TLS with ``tls`` (its certificate and key), with ``flags``; killed when done."""
    args = list(flags)
    if tokens:
        path = folder / "tokens.json"
        path.write_text(json.dumps({"tokens": list(tokens)}))
        args += ["--tokens-file", str(path)]
    if tls is not None:
        args += ["--tls-cert-file", str(tls.cert), "--tls-key-file", str(tls.key)]
    process = CoordinatorProcess(folder / "data", *args)
    process.start()
    try:
        yield process
    finally:
        process.kill()


def coordinator_get(process: _CoordinatorProcess, path: str, token: str | None = None) -> Any:
    """``GET path`` on a coordinator process, with a bearer token; the decoded JSON answer."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(process.url + path, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def coordinator_post(process: _CoordinatorProcess, path: str, body: Any, token: str | None = None) -> Any:
    """``POST path`` with a JSON body on a coordinator process; the decoded JSON answer."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(process.url + path, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())
