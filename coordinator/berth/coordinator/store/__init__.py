"""The coordinator's durable store: SQLite (WAL, synchronous=FULL) with group commit, plus journal segments.

- ``SqliteStore``: opens ``<data_dir>/berth.db`` (refusing an unusable dir with ``StoreError``), loads every
  record for replay, pages the journal, and reconciles the JSON Lines segments under ``<data_dir>/journal/``.
- ``GroupCommitWriter``: the one writer thread; many writes share one transaction and one fsync; its
  ``TransactionStats`` say what they took.
- ``StoreFaults``: fault injection under the store interface (``writer.faults``), for tests.
- ``etcd``: the replicated store (coordinator replicas of which one acts, docs/high-availability.md), behind the
  same interface: ``load``, the journal reads, a writer per term.

The store imports only the core's record and effect types and the standard library (import-linter checks it).
"""

from berth.coordinator.store.config import StoreConfig
from berth.coordinator.store.errors import StoreError
from berth.coordinator.store.faults import InjectedDiskError, StoreFaults
from berth.coordinator.store.schema import SCHEMA_VERSION
from berth.coordinator.store.sqlite_store import SqliteStore
from berth.coordinator.store.writer import TRANSACTION_BUCKETS_S, GroupCommitWriter, OnDone, TransactionStats

__all__ = [
    "SCHEMA_VERSION",
    "TRANSACTION_BUCKETS_S",
    "GroupCommitWriter",
    "InjectedDiskError",
    "OnDone",
    "SqliteStore",
    "StoreConfig",
    "StoreError",
    "StoreFaults",
    "TransactionStats",
]
