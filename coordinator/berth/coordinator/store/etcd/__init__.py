"""The replicated store: the coordinator's state in etcd, for replicas of which one acts (docs/high-availability.md).

- ``EtcdClient``: etcd's v3 API, KV over gRPC with messages encoded by hand (``client``, ``kv_wire``), leases and
  watches over its JSON gateway.
- ``EtcdStore``: the key layout (``keys``), load and journal reads, one fenced transaction (``store``, ``txn``,
  ``journal``).
- ``EtcdWriter``: group commit into etcd transactions under a term (``writer``).
- ``EtcdElection`` and ``Tenure``: the leader key on a lease, and one term of it (``election``).
- ``copy_sqlite_to_etcd``: moving a single-replica data dir into an empty prefix (``copy``).
"""

from berth.coordinator.store.etcd.client import EtcdClient, EtcdError, EtcdRefused, EtcdTls, EtcdUnavailable
from berth.coordinator.store.etcd.config import (
    CHART_MAX_REQUEST_BYTES,
    CHART_MAX_TXN_OPS,
    DEFAULT_LEASE_TTL_S,
    DEFAULT_PREFIX,
    DEFAULT_TIMEOUT_S,
    ReplicationConfig,
)
from berth.coordinator.store.etcd.election import EtcdElection, Tenure
from berth.coordinator.store.etcd.store import EtcdStore, Fenced, Term
from berth.coordinator.store.etcd.txn import Limits
from berth.coordinator.store.etcd.writer import EtcdWriter

__all__ = [
    "CHART_MAX_REQUEST_BYTES",
    "CHART_MAX_TXN_OPS",
    "DEFAULT_LEASE_TTL_S",
    "DEFAULT_PREFIX",
    "DEFAULT_TIMEOUT_S",
    "EtcdClient",
    "EtcdElection",
    "EtcdError",
    "EtcdRefused",
    "EtcdTls",
    "EtcdStore",
    "EtcdUnavailable",
    "EtcdWriter",
    "Fenced",
    "Limits",
    "ReplicationConfig",
    "Tenure",
    "Term",
]
