"""Kopf's index of every fleet's claims as the passes' :class:`~berth.operator.ports.ClaimsIndex`.

The index itself is Kopf's (``handlers.fleets.group_claims``: ``planners.claims.index_entries`` of every fleet);
this module answers from it, and keeps the one thing worth remembering about it: a census ranking. A census within
its bound needs no ranking; over it, each fleet's pass asks whether it is among the first ``limit``, and ranking a
thousand claims for each of a thousand passes is the work a burst of fleets would cost, so a ranking is reused for
:data:`CENSUS_TTL_S` (a bound is exceeded only by a burst of fleets; passes are many).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import kopf

from berth.operator.planners.claims import ClaimKey, GroupClaim, ranked_within

#: How long a ranking of the census is reused.
CENSUS_TTL_S = 1.0


class Rankings:
    """Per census key, when it was ranked and the uids within the bound (shared by every lookup of one operator)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._ranked: dict[tuple[ClaimKey, int], tuple[float, frozenset[str]]] = {}

    def within(self, key: ClaimKey, limit: int, counted: list[GroupClaim]) -> frozenset[str]:
        now = self.clock()
        cached = self._ranked.get((key, limit))
        if cached is None or now - cached[0] >= CENSUS_TTL_S:
            cached = (now, ranked_within(counted, limit))
            self._ranked[key, limit] = cached
        return cached[1]


class IndexedClaims:
    """The claims in Kopf's index (live: any handler call's index serves)."""

    def __init__(self, index: kopf.Index[ClaimKey, GroupClaim], rankings: Rankings) -> None:
        self.index = index
        self.rankings = rankings

    def holders(self, key: ClaimKey) -> Iterable[GroupClaim]:
        return list(self.index.get(key, []))

    def within(self, key: ClaimKey, limit: int, uid: str) -> bool:
        counted = list(self.index.get(key, []))
        return len(counted) <= limit or uid in self.rankings.within(key, limit, counted)


def indexed_claims(handler_kwargs: dict[str, Any], index_name: str, rankings: Rankings) -> IndexedClaims:
    """The claims index Kopf passes a handler (under ``index_name``)."""
    index: kopf.Index[ClaimKey, GroupClaim] = handler_kwargs[index_name]
    return IndexedClaims(index, rankings)
