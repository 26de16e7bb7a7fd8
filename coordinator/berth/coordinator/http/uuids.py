"""Member ids' randomness for the core: uuid4 strings from the OS's random source, read in batches.

``uuid.uuid4()`` asks the kernel for 16 random bytes every time; a fleet joining at once asks thousands of times.
``RandomUuids`` reads 4 KiB at a time (256 ids per system call) from the same source, so the ids are just as
unpredictable (docs/api.md §11: ``<prefix>-<uuid4>``).
"""

from __future__ import annotations

import os
import uuid

_BATCH = 256


class RandomUuids:
    def __init__(self) -> None:
        self._pool = b""
        self._offset = 0

    def __call__(self) -> str:
        if self._offset >= len(self._pool):
            self._pool = os.urandom(16 * _BATCH)
            self._offset = 0
        raw = self._pool[self._offset : self._offset + 16]
        self._offset += 16
        return str(uuid.UUID(bytes=raw, version=4))
