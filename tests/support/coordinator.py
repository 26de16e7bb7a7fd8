"""Real ``berth-coordinator`` processes for end-to-end tests: the library's ``CoordinatorProcess``, with the
manual clock by default (tests move time explicitly with ``POST /v1/debug/clock``)."""

from __future__ import annotations

from pathlib import Path

from berth.coordinator.client.process import CoordinatorProcess as _CoordinatorProcess


class CoordinatorProcess(_CoordinatorProcess):
    def __init__(self, data_dir: Path, *extra_args: str, manual_clock: bool = True) -> None:
        super().__init__(data_dir, *extra_args, manual_clock=manual_clock)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()  # tests do not wait for a graceful stop they are not testing
