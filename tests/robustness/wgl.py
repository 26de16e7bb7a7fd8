"""Is one key's history linearizable? A Wing-Gong search (with Lowe's memoisation), as Knossos and Porcupine do.

Each ``Entry`` is one operation on the key: invoked at ``invoke``, completed at ``complete`` (None: indeterminate —
no answer came back, so it may have taken effect at any moment after its invocation, or never). ``op`` is what the
model's ``step(state, op)`` reads; ``step`` returns the states the operation may lead to (several when the model
allows more than one outcome; none when the operation, with the answer it got, is impossible in that state).

The search linearizes operations one at a time: the next one may be any not yet linearized whose invocation is not
after the earliest completion among the determinate operations still pending (none may come after an operation
that had already completed when it was invoked). It succeeds once every determinate operation is linearized;
indeterminate ones may be left out. Visited (linearized set, state) pairs are not searched twice.

Indeterminate operations that are the same operation (a client's retries of one request) are interchangeable: each
may take effect at any moment after its invocation, so the earliest invoked can stand in for any later one. The
search therefore takes them in invocation order only (a later one only once the earlier ones are linearized), which
turns the 2^k subsets of k retries into k + 1 counts, without losing any linearization.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

S = TypeVar("S", bound=Hashable)


@dataclass(frozen=True)
class Entry:
    id: int
    invoke: int
    complete: int | None
    op: Any


@dataclass
class Verdict:
    ok: bool
    explored: int  # (linearized set, state) pairs searched
    longest: list[Entry]  # the longest linearization found (the whole history when ok)
    blocked: list[Entry]  # when not ok: the operations none of which could come next after ``longest``
    exhausted: bool = False  # gave up after ``budget`` pairs (counted as not ok: a history too hard to decide)


class Model(Generic[S]):
    def __init__(self, init: S, step: Callable[[S, Any], Sequence[S]]) -> None:
        self.init = init
        self.step = step


def check(entries: Sequence[Entry], model: Model[S], budget: int = 2_000_000) -> Verdict:
    ordered = sorted(entries, key=lambda e: (e.invoke, e.id))
    n = len(ordered)
    determinate = [e.complete is not None for e in ordered]
    full = sum(1 << i for i in range(n) if determinate[i])
    twin_before: list[int] = []  # the previous identical indeterminate entry's index, or -1
    last_of: dict[Any, int] = {}
    for i, e in enumerate(ordered):
        if e.complete is None:
            twin_before.append(last_of.get(e.op, -1))
            last_of[e.op] = i
        else:
            twin_before.append(-1)
    seen: set[tuple[int, Hashable]] = set()
    best: tuple[int, list[int]] = (-1, [])
    stack: list[tuple[int, S, list[int]]] = [(0, model.init, [])]
    explored = 0
    while stack:
        mask, state, order = stack.pop()
        if mask & full == full:
            return Verdict(True, explored, [ordered[i] for i in order], [])
        key = (mask, state)
        if key in seen:
            continue
        seen.add(key)
        explored += 1
        if explored > budget:
            return Verdict(False, explored, [ordered[i] for i in best[1]], [], exhausted=True)
        if len(order) > best[0]:
            best = (len(order), order)
        horizon = min((e.complete for i, e in enumerate(ordered) if not mask >> i & 1 and e.complete is not None))
        # Pushed so that the determinate candidates are tried first (earliest invoked first), the indeterminate ones
        # after them: what must happen before what may.
        for pass_determinate in (False, True):
            for i in range(n - 1, -1, -1):
                entry = ordered[i]
                if determinate[i] != pass_determinate or mask >> i & 1 or entry.invoke > horizon:
                    continue
                if twin_before[i] >= 0 and not mask >> twin_before[i] & 1:
                    continue  # its earlier twin stands in for it
                for nxt in model.step(state, entry.op):
                    if (mask | 1 << i, nxt) not in seen:
                        stack.append((mask | 1 << i, nxt, [*order, i]))
    done = 0
    for i in best[1]:
        done |= 1 << i
    pending = [e for i, e in enumerate(ordered) if not done >> i & 1 and e.complete is not None]
    horizon = min((e.complete for e in pending if e.complete is not None), default=0)
    blocked = [e for i, e in enumerate(ordered) if not done >> i & 1 and e.invoke <= horizon]
    return Verdict(False, explored, [ordered[i] for i in best[1]], blocked)
