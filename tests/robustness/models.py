"""Sequential models of what docs/api.md promises, deliberately simple (a few lines each, not the coordinator's core).

- ``register``: one value: a committed offset per (group, topic, partition) (None: none committed), or a group's
  expected members. ``("write", v)`` a commit of ``v`` answered NONE for that partition, or a PUT (indeterminate
  ones too); ``("read", v)`` a fetch or GET that saw ``v``.
- ``admin_group``: what an admin sees of a group without members (§7, §7a, §2's DeleteGroups): whether it exists,
  its expected members and its owner's uid. Operations carry their answer, so a refusal (409 GROUP_OWNED, which
  shows the owner) or GROUP_ID_NOT_FOUND is an observation the state must explain, as a read is.

Each ``step`` returns the states an operation may lead to: one, or none when it is impossible with the answer it got.
An indeterminate operation carries no answer (``answer=None``): it is applied as the request asked, and the search
may also leave it out (it never happened).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from robustness.wgl import Model

# --------------------------------------------------------------------------------------------- register

V = TypeVar("V", bound=Hashable)


def _register_step(state: V, op: tuple[str, V]) -> Sequence[V]:
    kind, value = op
    if kind == "write":
        return (value,)
    return (state,) if state == value else ()


def register(initial: V) -> Model[V]:
    return Model(initial, _register_step)


# ------------------------------------------------------------------------------------------ admin groups


@dataclass(frozen=True)
class AdminState:
    exists: bool = False
    expected: tuple[str, ...] = ()
    owner: str | None = None


@dataclass(frozen=True)
class AdminOp:
    """``kind``: put_expected, get_expected, claim, release, delete, describe. ``uid``: the owner asserted (a claim's
    or release's uid, or the ``Berth-Owner-Uid`` header of a write); ``ids``: what a PUT asked for. ``answer``: None
    when indeterminate, else ("ok", ids | owner | (state, owner)), ("owned", owner seen) for a 409, or
    ("not_found",) for GROUP_ID_NOT_FOUND."""

    kind: str
    uid: str | None = None
    ids: tuple[str, ...] = ()
    answer: tuple[object, ...] | None = None


def _may_write(state: AdminState, uid: str | None) -> bool:
    """An owner assertion (or a claim) goes ahead when the group is nobody's or the uid's (these groups are vacant)."""
    return uid is None or state.owner in (None, uid)


def _admin_step(state: AdminState, op: AdminOp) -> Sequence[AdminState]:
    answer = op.answer
    if answer is not None and answer[0] == "owned":  # 409: refused, nothing changed; it shows the owner
        if op.kind == "release":
            return (state,) if state.owner not in (None, op.uid) and state.owner == answer[1] else ()
        return (state,) if not _may_write(state, op.uid) and state.owner == answer[1] else ()
    if op.kind == "get_expected":
        return (state,) if answer is None or answer[1] == state.expected else ()
    if op.kind == "describe":
        return (state,) if answer is None or answer[1] == (state.exists, state.owner) else ()
    if op.kind == "put_expected":
        if not _may_write(state, op.uid):
            return ()
        ids = tuple(dict.fromkeys(op.ids))
        if answer is not None and answer[1] != ids:
            return ()
        return (AdminState(state.exists or bool(ids), ids, state.owner),)
    if op.kind == "claim":
        if not _may_write(state, op.uid):
            return ()
        return (AdminState(True, state.expected, op.uid),)
    if op.kind == "release":
        if state.owner not in (None, op.uid):
            return ()
        return (AdminState(state.exists, state.expected, None),)
    if op.kind == "delete":
        if answer is not None and answer[0] == "not_found":
            return (state,) if not state.exists else ()
        if not state.exists or not _may_write(state, op.uid):
            return ()
        return (AdminState(),)
    raise ValueError(f"unknown admin operation {op.kind!r}")


def admin_group() -> Model[AdminState]:
    return Model(AdminState(), _admin_step)
