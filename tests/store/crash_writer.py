"""Child process of the crash test: submit writes in a loop and print each token once it is durable.

Usage: ``crash_writer.py DATA_DIR FIRST_TOKEN SEGMENT_MAX_EVENTS``. Runs until killed. A token is printed
(one line, flushed) only after ``on_done`` reported its write ok, so every printed token is a promise the
parent checks after SIGKILL. At most 64 writes are in flight, like 64 clients waiting for their answers.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from store_test_data import crash_test_write

from berth.coordinator.store import GroupCommitWriter, SqliteStore

IN_FLIGHT = 64


def main() -> None:
    data_dir, first_token, segment_max_events = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    slots = threading.Semaphore(IN_FLIGHT)

    def on_done(outcomes: list[tuple[int, bool]]) -> None:
        sys.stdout.write("".join(f"{token}\n" for token, ok in outcomes if ok))
        sys.stdout.flush()
        slots.release(len(outcomes))

    store = SqliteStore(data_dir, segment_max_events=segment_max_events)
    writer = GroupCommitWriter(store, on_done)
    token = first_token
    while True:
        slots.acquire()
        writer.submit(crash_test_write(token))
        token += 1


if __name__ == "__main__":
    main()
