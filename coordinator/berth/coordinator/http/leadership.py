"""The server's view of who may act: terms of leadership, each with the store it loads from and writes to.

``Leadership`` hands the server a ``Term`` each time this process becomes the one that acts; the server loads the
store into a fresh core, serves until the term ends, answers what is parked, and waits for the next one
(``state.CoordinatorServer``). The core and the HTTP adapter do not know which store they run on:

- ``SoleLeadership`` (the SQLite store, one replica): one term, from start to shutdown; ``acting`` is None
  (nothing to check per request).
- The replicated store's leadership (``replicas.EtcdLeadership``): a term per election won; ``acting()`` is the
  lease's local deadline, checked before every answer and timer; writes are fenced in the store itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from berth.coordinator.core import Coordinator, Record
from berth.coordinator.http.engine import WriterPort, WritesDone
from berth.coordinator.protocol import GroupId


class TermLost(Exception):
    """``Term.load`` could not load the store for a reason that may pass (the replicated store out of reach): the
    term is given up and the replica stands by again. Anything else a load raises is fatal (exit 2)."""


class Term(Protocol):
    """One tenure as the acting replica."""

    @property
    def name(self) -> str:
        """Says which tenure this is, for logs (a term number on the replicated store)."""
        ...

    @property
    def acting(self) -> Callable[[], bool] | None:
        """A cheap check, made before every answer and timer, that the term still holds; None: always."""
        ...

    def load(self, core: Coordinator) -> None:
        """Replay the store into ``core`` (blocking: the server runs it in an executor); raises ``StoreError`` for a
        store that cannot be loaded, ``TermLost`` when the term ended or the store could not be reached."""
        ...

    def make_writer(self, on_done: WritesDone) -> WriterPort:
        """The writer of this term: its writes are durable only while the term holds."""
        ...

    def load_group(self, group_id: GroupId) -> list[Record]:
        """One group's records from the store (blocking), to load it again after a write of it failed; raises when
        the store cannot be read (the engine tries again)."""
        ...

    async def ended(self) -> str:
        """Return (the reason) once the term is over."""
        ...


class Leadership(Protocol):
    @property
    def replicated(self) -> bool:
        """Whether other replicas may act instead of this one (a standby answers NOT_COORDINATOR)."""
        ...

    def start(self) -> None:
        """Begin campaigning (in the running event loop)."""
        ...

    async def next_term(self) -> Term:
        """Return once this process is to act."""
        ...

    def close(self) -> None:
        """Stop campaigning and step down (blocking; after the last term's writes landed)."""
        ...


class SoleTerm:
    """The single replica's one term: it acts from load to shutdown."""

    name = "sole"
    acting: Callable[[], bool] | None = None

    def __init__(
        self,
        load: Callable[[Coordinator], None],
        make_writer: Callable[[WritesDone], WriterPort],
        load_group: Callable[[GroupId], list[Record]],
    ) -> None:
        self._load = load
        self._make_writer = make_writer
        self.load_group = load_group
        self._ended = asyncio.Event()

    def load(self, core: Coordinator) -> None:
        self._load(core)

    def make_writer(self, on_done: WritesDone) -> WriterPort:
        return self._make_writer(on_done)

    async def ended(self) -> str:
        await self._ended.wait()
        return "stopping"


class SoleLeadership:
    replicated = False

    def __init__(self, term: SoleTerm) -> None:
        self._term: SoleTerm | None = term

    def start(self) -> None:
        pass

    async def next_term(self) -> Term:
        term, self._term = self._term, None
        if term is None:
            await asyncio.Event().wait()  # one term only: the server stops before asking again
        assert term is not None
        return term

    def close(self) -> None:
        pass
