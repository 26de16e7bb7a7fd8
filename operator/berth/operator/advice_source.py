"""Where the session-timeout advice comes from: ``--advice-configmap`` and/or ``--advice-file`` (docs/formats.md).

The :class:`~berth.operator.ports.AdviceReader` the operator's passes ask. Rules:

- Read at most once per ``ttl_s`` whatever the number of fleets (every fleet's reconcile asks); the pipeline
  rewrites advice hourly, so a reconcile interval's staleness costs nothing.
- With both sources, each group's entry comes from the newer document (``planners.advice.combine``).
- No advice yet (no ConfigMap, no key, no file) is normal: ``None``. An unreadable or malformed document is a
  ``problem`` (logged once per distinct problem by the caller) and the other source, if any, still counts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from berth.operator.planners.advice import Advice, AdviceReading, combine, parse_into

ADVICE_KEY = "advice.json"

ConfigMapKeyReader = Callable[[str, str, str], Awaitable[str | None]]


@dataclass
class AdviceSource:
    read_config_map_key: ConfigMapKeyReader | None = None
    config_map: tuple[str, str] | None = None  # (namespace, name)
    file: Path | None = None
    ttl_s: float = 10.0
    clock: Callable[[], float] = time.monotonic
    _cached: AdviceReading | None = field(default=None, init=False)
    _read_at: float = field(default=0.0, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

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
        return AdviceReading(combine(documents), tuple(problems))
