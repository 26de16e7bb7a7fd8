"""The operator's leadership, checked from what the API server and the coordinator recorded (no assertion chosen in
advance: the history is read afterwards and the rules below are checked on it, as Jepsen's checkers do).

Inputs, both stamped with this machine's clock (the API server, the coordinator and the tests run on it):

- the API server's audit log (``support.kube_cluster``, ``audit_lease_writes``): every request of the operator's
  ServiceAccount as received (its User-Agent names the replica: ``berth-operator/<version> (<identity>)``), and every
  write to the leader's Lease once answered, with the holder it asked for and the status it got;
- the coordinator's journal (``GET /v1/journal``): each write of an admin token carries ``actor``, the token's name,
  and each replica has a token of its own named after it.

From the Lease's writes that succeeded, :func:`lease_terms` makes the terms: who held the Lease from when (the
moment the API server received the write that took it), and the releases. Rules (:func:`check`):

- **no write without the Lease**: every write of a replica (to the API server, the Lease's own writes aside, or
  recorded by the coordinator) comes after the start of one of its terms;
- **no step by a deposed leader**: no write of a replica arrives at or after the start of the next term (another
  replica's, or its own release): once a newer leader could have acted, the old one acts no more. The smallest gap
  between a deposed leader's last write and the next term is kept as the run's *margin*.

:func:`batch_leaves` reads the batch leaves of a group from the journal (``member_left`` via ``admin``, one request's
events share its actor and time), for the rule **one batch leave per scale-down** naming exactly the departed ids.
:func:`takeover` measures, after a fault, when another replica took the Lease and when it first wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

Obj = Mapping[str, Any]
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
_AGENT = re.compile(r"\(([^()]+)\)\s*$")


def stamp(text: str) -> float:
    """An audit timestamp (RFC 3339, microseconds, ``Z``) as seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def identity_of(event: Obj) -> str | None:
    """The replica a request came from: the last parenthesis of its User-Agent."""
    found = _AGENT.search(str(event.get("userAgent") or ""))
    return found.group(1) if found else None


@dataclass(frozen=True)
class Term:
    """``holder`` took the Lease with the write received at ``started`` (answered at ``answered``); a holder of ""
    is a release by ``released_by``."""

    holder: str
    started: float
    answered: float
    released_by: str = ""


@dataclass(frozen=True)
class Write:
    identity: str
    at: float
    what: str  # "patch statefulsets/orders", "coordinator member_left orders-3"
    to: str  # "apiserver" or "coordinator"


@dataclass(frozen=True)
class Violation:
    rule: str
    write: Write
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.write.identity} {self.write.what} at {self.write.at:.3f} ({self.detail})"


def lease_terms(events: Iterable[Obj], namespace: str, lease: str) -> list[Term]:
    """The terms of Lease ``namespace/lease``, in order, from its writes that the API server accepted."""
    terms: list[Term] = []
    holder = ""
    for event in sorted(_lease_writes(events, namespace, lease), key=lambda e: stamp(e["stageTimestamp"])):
        if event["verb"] == "delete":
            holder = ""
            continue
        asked = _holder_asked(event)
        writer = identity_of(event) or ""
        received, answered = stamp(event["requestReceivedTimestamp"]), stamp(event["stageTimestamp"])
        if asked and asked != holder:
            terms.append(Term(asked, received, answered))
        elif not asked and holder:
            terms.append(Term("", received, answered, released_by=writer))
        holder = asked
    return terms


def last_held(events: Iterable[Obj], namespace: str, lease: str, holder: str, *, before: float) -> float | None:
    """When the API server last received a write of the Lease naming ``holder`` (its acquisition or a renewal) before
    ``before``: another replica may take the Lease on its expiry no sooner than the Lease's duration after it."""
    return max(
        (
            stamp(e["requestReceivedTimestamp"])
            for e in _lease_writes(events, namespace, lease)
            if e["verb"] != "delete" and _holder_asked(e) == holder and stamp(e["requestReceivedTimestamp"]) < before
        ),
        default=None,
    )


def taken_on_release(
    events: Iterable[Obj], namespace: str, lease: str, leader: str, standby: str, *, since: float, lease_s: float
) -> list[str]:
    """The rule for the standby after a graceful stop: it took the Lease on ``leader``'s release (at ``since`` or
    later), before the Lease could have expired: sooner than ``lease_s`` after ``leader``'s last renewal."""
    events = list(events)
    terms = lease_terms(events, namespace, lease)
    release = next((t for t in terms if t.holder == "" and t.released_by == leader and t.started >= since), None)
    if release is None:
        return [f"{leader} never released the Lease"]
    took = next((t for t in terms if t.holder == standby and t.started >= release.started), None)
    held = last_held(events, namespace, lease, leader, before=release.started)
    if took is None or held is None:
        return [f"{standby} never took the Lease after {leader} released it"]
    if took.started >= held + lease_s:
        return [
            f"{standby} took the Lease {took.started - held:.1f} s after {leader}'s last renewal: on its expiry"
            f" ({leader} released it {release.started - held:.1f} s after that renewal, answered"
            f" {release.answered - held:.1f} s after)"
        ]
    return []


def _holder_asked(event: Obj) -> str:
    return str(((event.get("requestObject") or {}).get("spec") or {}).get("holderIdentity") or "")


def _lease_writes(events: Iterable[Obj], namespace: str, lease: str) -> list[Obj]:
    """The Lease's writes the API server accepted."""
    return [
        e
        for e in events
        if e.get("stage") == "ResponseComplete"
        and 200 <= int((e.get("responseStatus") or {}).get("code") or 0) < 300
        and e.get("verb") in WRITE_VERBS
        and (e.get("objectRef") or {}).get("resource") == "leases"
        and (e.get("objectRef") or {}).get("namespace") == namespace
        and (e.get("objectRef") or {}).get("name") == lease
    ]


def apiserver_writes(events: Iterable[Obj], namespace: str, lease: str) -> list[Write]:
    """Every write request of a replica as the API server received it, the election's own Lease writes aside."""
    found = []
    for event in events:
        ref = event.get("objectRef") or {}
        if event.get("verb") not in WRITE_VERBS or event.get("stage") != "RequestReceived":
            continue
        if ref.get("resource") == "leases" and ref.get("namespace") == namespace and ref.get("name") == lease:
            continue
        identity = identity_of(event)
        if identity is None:
            continue
        what = f"{event['verb']} {ref.get('resource')}{'/' + ref['subresource'] if ref.get('subresource') else ''}"
        found.append(
            Write(identity, stamp(event["requestReceivedTimestamp"]), f"{what}/{ref.get('name', '')}", "apiserver")
        )
    return found


def coordinator_writes(journal: Iterable[Obj], identities: Mapping[str, str]) -> list[Write]:
    """The journal's events caused by a replica's token (``actor``: its name; ``identities`` maps it to the replica's
    Lease identity)."""
    found = []
    for event in journal:
        actor = event.get("actor")
        if actor is None or actor not in identities:
            continue
        ids = event.get("group_instance_id") or ",".join(event.get("added") or []) or ""
        what = f"coordinator {event['type']} {event.get('group_id', '')} {ids}".strip()
        found.append(Write(identities[actor], event["ts_ms"] / 1000, what, "coordinator"))
    return found


@dataclass
class Verdict:
    violations: list[Violation]
    checked: int  # writes checked
    #: The smallest gap, in seconds, between a deposed leader's last write and the next term (None: no handover).
    margin_s: float | None

    @property
    def ok(self) -> bool:
        return not self.violations


def check(terms: Sequence[Term], writes: Iterable[Write], *, precision_s: float = 0.0) -> Verdict:
    """The rules of the module docstring over ``writes``. ``precision_s``: how much earlier than a term's start a
    write stamped more coarsely (the journal's milliseconds) may be and still count as before it."""
    violations: list[Violation] = []
    checked = 0
    last_in_term: dict[int, float] = {}
    for write in sorted(writes, key=lambda w: w.at):
        checked += 1
        mine = [i for i, term in enumerate(terms) if term.holder == write.identity and term.started <= write.at]
        if not mine:
            violations.append(Violation("write without the Lease", write, "no term of this replica began before it"))
            continue
        index = mine[-1]
        following = terms[index + 1] if index + 1 < len(terms) else None
        slack = precision_s if write.to == "coordinator" else 0.0
        if following is not None and write.at >= following.started + slack:
            newer = following.holder or f"the release by {following.released_by or write.identity}"
            late = write.at - following.started
            violations.append(
                Violation(
                    "step by a deposed leader",
                    write,
                    f"{late:.3f} s after {newer} took over at {following.started:.3f}",
                )
            )
            continue
        last_in_term[index] = max(last_in_term.get(index, write.at), write.at)
    margins = [
        terms[index + 1].started - last
        for index, last in last_in_term.items()
        if index + 1 < len(terms) and terms[index + 1].holder
    ]
    return Verdict(violations, checked, min(margins) if margins else None)


@dataclass(frozen=True)
class Leave:
    actor: str
    at: float
    ids: tuple[str, ...]


def batch_leaves(journal: Iterable[Obj], group: str) -> list[Leave]:
    """The admin (batch) leaves of ``group``: adjacent ``member_left via admin`` events with one actor and time."""
    leaves: list[Leave] = []
    previous: tuple[int, str, int] | None = None
    for event in journal:
        if event.get("group_id") != group or event.get("type") != "member_left" or event.get("via") != "admin":
            previous = None
            continue
        key = (int(event.get("seq", 0)), str(event.get("actor") or ""), int(event["ts_ms"]))
        if previous is not None and key[0] == previous[0] + 1 and key[1:] == previous[1:] and leaves:
            last = leaves[-1]
            leaves[-1] = Leave(last.actor, last.at, (*last.ids, str(event["group_instance_id"])))
        else:
            leaves.append(Leave(key[1], key[2] / 1000, (str(event["group_instance_id"]),)))
        previous = key
    return leaves


@dataclass(frozen=True)
class Takeover:
    holder: str
    acquired_s: float  # after the fault
    first_write_s: float | None  # its first write after that, Events aside


def takeover(terms: Sequence[Term], writes: Iterable[Write], *, after: float, previous: str) -> Takeover | None:
    """The first term of a replica other than ``previous`` that began after ``after``, and its first write."""
    for term in terms:
        if term.started >= after and term.holder and term.holder != previous:
            own = [
                w.at
                for w in writes
                if w.identity == term.holder and w.at >= term.started and not w.what.startswith("create events")
            ]
            return Takeover(term.holder, term.started - after, (min(own) - after) if own else None)
    return None
