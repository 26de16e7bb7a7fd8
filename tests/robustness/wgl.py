"""Is one key's history linearizable? A Wing-Gong search (with Lowe's memoisation), as Knossos and Porcupine do.

Each ``Entry`` is one operation on the key: invoked at ``invoke``, completed at ``complete`` (None: indeterminate —
no answer came back, so it may have taken effect at any moment after its invocation, or never). ``op`` is what the
model's ``step(state, op)`` reads; ``step`` returns the states the operation may lead to (several when the model
allows more than one outcome; none when the operation, with the answer it got, is impossible in that state).

The search linearizes operations one at a time: the next one may be any not yet linearized whose invocation is not
after the earliest completion among the determinate operations still pending (none may come after an operation
that had already completed when it was invoked). It succeeds once every determinate operation is linearized;
indeterminate ones may be left out. Visited (linearized set, state) pairs are not searched twice, nor is a pair
that one searched already covers: the same state after the same determinate operations, with fewer of the
indeterminate ones linearized (an indeterminate operation left out may still come later, or never, so linearizing
it too opens no way the other did not). Without this, each dead end was searched once for every mix of the
unanswered operations pending there.

Indeterminate operations that are the same operation (a client's retries of one request) are interchangeable: each
may take effect at any moment after its invocation, so the earliest invoked can stand in for any later one. The
search therefore takes them in invocation order only (a later one only once the earlier ones are linearized), which
turns the 2^k subsets of k retries into k + 1 counts, without losing any linearization.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

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


#: The linearization so far, newest first: (entry index, the rest), shared between the states that extend it.
_Order: TypeAlias = "tuple[int, _Order] | None"


def check(entries: Sequence[Entry], model: Model[S], budget: int = 2_000_000) -> Verdict:
    ordered = sorted(entries, key=lambda e: (e.invoke, e.id))
    n = len(ordered)
    invokes = [e.invoke for e in ordered]
    determinate = [i for i in range(n) if ordered[i].complete is not None]
    indeterminate = [i for i in range(n) if ordered[i].complete is None]
    completes = [-1 if e.complete is None else e.complete for e in ordered]
    by_completion = sorted(determinate, key=lambda i: (completes[i], i))
    full = sum(1 << i for i in determinate)
    twin_before: list[int] = [-1] * n  # the previous identical indeterminate entry's index, or -1
    last_of: dict[Any, int] = {}
    for i in indeterminate:
        twin_before[i] = last_of.get(ordered[i].op, -1)
        last_of[ordered[i].op] = i
    seen: dict[tuple[int, Hashable], list[int]] = {}  # (determinate ones linearized, state) -> indeterminate ones
    best: tuple[int, _Order] = (-1, None)
    # A state on the stack: (linearized set, model state, the order so far as a linked list and its length, the
    # first determinate entry not linearized (by invocation), the first not linearized by completion). The two
    # positions only move forward, so each state's candidates are the window between them, not all n entries.
    stack: list[tuple[int, S, _Order, int, int, int]] = [(0, model.init, None, 0, 0, 0)]
    explored = 0
    while stack:
        mask, state, order, depth, low, early = stack.pop()
        if mask & full == full:
            return Verdict(True, explored, [ordered[i] for i in _unroll(order)], [])
        if _covered(seen, mask & full, state, mask & ~full, record=True):
            continue
        explored += 1
        if explored > budget:
            return Verdict(False, explored, [ordered[i] for i in _unroll(best[1])], [], exhausted=True)
        if depth > best[0]:
            best = (depth, order)
        while mask >> determinate[low] & 1:
            low += 1
        while mask >> by_completion[early] & 1:
            early += 1
        bound = bisect.bisect_right(invokes, completes[by_completion[early]])  # invoked by the horizon
        # Pushed so that the determinate candidates are tried first (earliest invoked first), the indeterminate ones
        # after them: what must happen before what may.
        for i in reversed(indeterminate):
            if i >= bound or mask >> i & 1:
                continue
            if twin_before[i] >= 0 and not mask >> twin_before[i] & 1:
                continue  # its earlier twin stands in for it
            _push(stack, seen, full, model, state, ordered[i].op, mask | 1 << i, (i, order), depth, low, early)
        for position in range(bisect.bisect_left(determinate, bound) - 1, low - 1, -1):
            i = determinate[position]
            if not mask >> i & 1:
                _push(stack, seen, full, model, state, ordered[i].op, mask | 1 << i, (i, order), depth, low, early)
    done = 0
    for i in _unroll(best[1]):
        done |= 1 << i
    pending = [e for i, e in enumerate(ordered) if not done >> i & 1 and e.complete is not None]
    horizon = min((e.complete for e in pending if e.complete is not None), default=0)
    blocked = [e for i, e in enumerate(ordered) if not done >> i & 1 and e.invoke <= horizon]
    return Verdict(False, explored, [ordered[i] for i in _unroll(best[1])], blocked)


def _push(
    stack: list[tuple[int, S, _Order, int, int, int]],
    seen: dict[tuple[int, Hashable], list[int]],
    full: int,
    model: Model[S],
    state: S,
    op: Any,
    mask: int,
    order: _Order,
    depth: int,
    low: int,
    early: int,
) -> None:
    for nxt in model.step(state, op):
        if not _covered(seen, mask & full, nxt, mask & ~full):
            stack.append((mask, nxt, order, depth + 1, low, early))


def _covered(
    seen: dict[tuple[int, Hashable], list[int]], known: int, state: Hashable, loose: int, *, record: bool = False
) -> bool:
    """Whether a state with these determinate entries (``known``) and indeterminate ones (``loose``) linearized is
    no more promising than one already searched: the same state after the same determinate entries, with a subset of
    these indeterminate ones (each left out may still come later, or never). With ``record``, note it if not."""
    searched = seen.get((known, state))
    if searched is not None and any(m & ~loose == 0 for m in searched):
        return True
    if record:
        seen.setdefault((known, state), []).append(loose)
    return False


def _unroll(order: _Order) -> list[int]:
    out: list[int] = []
    while order is not None:
        out.append(order[0])
        order = order[1]
    return out[::-1]
