"""What clients were told: every operation with its invoke and completion times, its request and its answer.

An ``Op`` is one request a client sent (a retry is a new ``Op``): ``invoke_ns`` when it was sent, ``complete_ns``
when its answer (or its failure) came back, both from one monotonic clock (every client runs in the test process).
``answer`` is the decoded HTTP 200 body, or None when the client got no answer it could trust (a timeout, a
connection error, an HTTP error): such an operation is *indeterminate*, it may or may not have taken effect, and
the checker treats it so. ``status`` is the HTTP status (0 without one).

A ``History`` is appended to by the clients of a run and written as JSON lines (one op per line), so a failing run's
history can be read, or checked again, after the fact.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

Body = dict[str, Any]


@dataclass
class Op:
    process: str  # the client that sent it (a member, an admin writer, ...)
    method: str  # GET, PUT, POST, DELETE
    path: str  # /v1/groups/<group>/<what>, the group percent-encoded
    group: str
    what: str  # join, sync, heartbeat, leave, commit, fetch, describe, expected, owner, delete
    request: Body
    invoke_ns: int
    complete_ns: int = 0
    status: int = 0
    answer: Body | None = None
    headers: dict[str, str] = field(default_factory=dict)
    index: int = 0  # its place in the history

    @property
    def determinate(self) -> bool:
        """An answer came back (HTTP 200, or a refusal the contract says changes nothing: 409 GROUP_OWNED)."""
        return self.answer is not None

    @property
    def error(self) -> str | None:
        """The in-band error's name (``NONE`` for success), or None when indeterminate."""
        if self.answer is None:
            return None
        return str(self.answer.get("error", "NONE"))


class History:
    def __init__(self) -> None:
        self.ops: list[Op] = []

    def invoke(
        self, process: str, method: str, path: str, group: str, what: str, request: Body, headers: dict[str, str]
    ) -> Op:
        op = Op(process, method, path, group, what, request, time.monotonic_ns(), headers=headers)
        op.index = len(self.ops)
        self.ops.append(op)
        return op

    @staticmethod
    def complete(op: Op, status: int, answer: Body | None) -> None:
        op.complete_ns = time.monotonic_ns()
        op.status = status
        op.answer = answer

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def write(self, path: Path) -> None:
        with path.open("w") as out:
            for op in self.ops:
                out.write(json.dumps(asdict(op), separators=(",", ":")) + "\n")

    @classmethod
    def read(cls, path: Path) -> History:
        history = cls()
        with path.open() as lines:
            history.ops = [Op(**json.loads(line)) for line in lines if line.strip()]
        return history
