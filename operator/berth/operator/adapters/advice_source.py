"""Where the session-timeout advice comes from: ``--advice-configmap`` and/or ``--advice-file`` (docs/formats.md).

The :class:`~berth.operator.ports.AdviceReader` the operator's passes ask. Rules:

- Read at most once per ``ttl_s`` whatever the number of fleets (every fleet's pass asks).
- A new advice reaches the fleets it sizes within moments, not at their next resync: :meth:`AdviceSource.changed`
  (the operator's watch of the ConfigMap calls it; the file's modification time is looked at every ``ttl_s``
  while :meth:`AdviceSource.start`-ed) reads again at once and tells ``on_changed`` the group keys whose entry
  differs from the reading before (``planners.advice.changed_groups``), so only the fleets those size are poked.
- With both sources, each group's entry comes from the newer document (``planners.advice.combine``).
- No advice yet (no ConfigMap, no key, no file) is normal: ``None``. An unreadable or malformed document is a
  ``problem`` (logged here once per distinct problem, not once per fleet) and the other source, if any, still counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from berth.coordinator.formats.advice import Advice
from berth.operator.planners.advice import AdviceReading, changed_groups, combine, parse_into

logger = logging.getLogger("berth.operator.advice")

ADVICE_KEY = "advice.json"

ConfigMapKeyReader = Callable[[str, str, str], Awaitable[str | None]]


@dataclass
class AdviceSource:
    read_config_map_key: ConfigMapKeyReader | None = None
    config_map: tuple[str, str] | None = None  # (namespace, name)
    file: Path | None = None
    ttl_s: float = 10.0
    clock: Callable[[], float] = time.monotonic
    #: Told the advice keys whose entry changed, after :meth:`changed` read the advice again.
    on_changed: Callable[[frozenset[str]], None] | None = None
    _cached: AdviceReading | None = field(default=None, init=False)
    _read_at: float = field(default=0.0, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _refresh: asyncio.Task[None] | None = field(default=None, init=False)
    _again: bool = field(default=False, init=False)
    _file_task: asyncio.Task[None] | None = field(default=None, init=False)
    _logged: set[str] = field(default_factory=set, init=False)  # problems logged (once each, not once per read)

    @property
    def configured(self) -> bool:
        return self.config_map is not None or self.file is not None

    async def current(self) -> AdviceReading:
        if not self.configured:
            return AdviceReading(None)
        async with self._lock:
            if self._cached is None or self.clock() - self._read_at >= self.ttl_s:
                self._cached = await self._read()
                self._read_at = self.clock()
            return self._cached

    def changed(self) -> None:
        """The advice may have changed: read it again now and tell ``on_changed`` what did (a burst of calls is one
        read, a call during a read one more after it)."""
        if self._refresh is not None and not self._refresh.done():
            self._again = True
            return
        self._refresh = asyncio.create_task(self._refreshing(), name="advice refresh")

    async def refresh(self) -> frozenset[str]:
        """Read the advice again now; the keys whose entry differs from the reading before."""
        async with self._lock:
            before = self._cached.advice if self._cached is not None else None
            self._cached = await self._read()
            self._read_at = self.clock()
            return changed_groups(before, self._cached.advice)

    async def _refreshing(self) -> None:
        self._again = True
        while self._again:
            self._again = False
            try:
                keys = await self.refresh()
            except Exception:  # a failed read is the next pass's problem (it reads again): never lose the watcher
                logger.exception("reading the changed session-timeout advice failed")
                continue
            if keys and self.on_changed is not None:
                logger.info("session-timeout advice changed for %d group(s)", len(keys))
                self.on_changed(keys)

    def start(self) -> None:
        """Look at the advice file's modification time every ``ttl_s`` (a ConfigMap is watched by the caller)."""
        if self.file is not None and self._file_task is None:
            self._file_task = asyncio.create_task(self._watch_file(self.file), name="advice file")

    async def stop(self) -> None:
        for task in (self._file_task, self._refresh):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._file_task = self._refresh = None

    async def _watch_file(self, path: Path) -> None:
        seen = await asyncio.to_thread(_stamp, path)
        while True:
            await asyncio.sleep(self.ttl_s)
            stamp = await asyncio.to_thread(_stamp, path)
            if stamp != seen:
                seen = stamp
                self.changed()

    async def _read(self) -> AdviceReading:
        documents: list[Advice] = []
        problems: list[str] = []
        if self.config_map is not None and self.read_config_map_key is not None:
            namespace, name = self.config_map
            where = f"ConfigMap {namespace}/{name} key {ADVICE_KEY}"
            try:
                text = await self.read_config_map_key(namespace, name, ADVICE_KEY)
            except Exception as error:  # an API error must not stop sizing: the estimate still works
                problems.append(f"{where}: {error}")
                text = None
            if text is not None:
                parse_into(text, where, documents, problems)
        if self.file is not None:
            try:
                text = await asyncio.to_thread(self.file.read_text)
            except FileNotFoundError:
                text = None
            except OSError as error:
                problems.append(f"{self.file}: {error.strerror}")
                text = None
            if text is not None:
                parse_into(text, str(self.file), documents, problems)
        for problem in problems:
            if problem not in self._logged:
                self._logged.add(problem)
                logger.warning("session-timeout advice not used: %s", problem)
        return AdviceReading(combine(documents), tuple(problems))


def _stamp(path: Path) -> tuple[int, int] | None:
    """What tells a rewritten file apart: its modification time and size (None: not there or unreadable)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size
