"""The replicated store's settings (``--etcd-*`` flags, docs/api.md §10) and the checks they must pass.

The defaults of ``max_txn_ops`` and ``max_request_bytes`` are what the chart gives its etcd (``--max-txn-ops``,
``--max-request-bytes``; docs/high-availability.md): etcd's own defaults (128 operations, 1.5 MiB) would refuse a
rebalance of a group of more than ~120 members or of more than ~1 MiB of metadata. They must not exceed what the
etcd cluster was started with; a transaction etcd refuses fails its writes (COORDINATOR_NOT_AVAILABLE) and says why
in the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from berth.coordinator.store.etcd.client import EtcdClient, EtcdTls
from berth.coordinator.store.etcd.txn import RESERVED_BYTES, Limits

DEFAULT_PREFIX = "/berth/"
DEFAULT_LEASE_TTL_S = 5
DEFAULT_TIMEOUT_S = 2.0  # at most; and at most half the lease TTL
CHART_MAX_TXN_OPS = 131_072
CHART_MAX_REQUEST_BYTES = 16 * 2**20


@dataclass(frozen=True)
class ReplicationConfig:
    endpoints: tuple[str, ...]
    prefix: str = DEFAULT_PREFIX
    name: str = "berth"  # this replica, as the leader key and the logs name it
    lease_ttl_s: int = DEFAULT_LEASE_TTL_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    limits: Limits = field(default_factory=lambda: Limits(CHART_MAX_TXN_OPS, CHART_MAX_REQUEST_BYTES))
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    def problems(self, group_metadata_max_bytes: int | None) -> list[str]:
        """What is wrong with these settings, with the coordinator's group metadata bound (empty: nothing)."""
        found = []
        if not self.prefix.endswith("/"):
            found.append(f"--etcd-prefix {self.prefix!r} must end with '/'")
        if self.lease_ttl_s < 2:
            found.append("--etcd-lease-ttl-s must be at least 2")
        if self.timeout_s <= 0 or self.timeout_s >= self.lease_ttl_s:
            found.append("--etcd-timeout-s must be positive and below --etcd-lease-ttl-s")
        if self.limits.max_txn_ops < 64:
            found.append("--etcd-max-txn-ops must be at least 64")
        if (self.cert_file is None) != (self.key_file is None):
            found.append("--etcd-cert-file and --etcd-key-file go together")
        room = (self.limits.max_request_bytes - RESERVED_BYTES) * 3 // 5  # base64 (4/3) and per-member JSON (~20 %)
        if group_metadata_max_bytes is None or group_metadata_max_bytes > room:
            bound = "unlimited" if group_metadata_max_bytes is None else str(group_metadata_max_bytes)
            found.append(
                f"--group-metadata-max-bytes ({bound}) must let a group's record fit in one etcd transaction: at most"
                f" {room} with --etcd-max-request-bytes {self.limits.max_request_bytes}"
            )
        return found

    def tls(self) -> EtcdTls | None:
        """TLS to https endpoints (verifying against ``ca_file``, presenting the client certificate)."""
        if self.ca_file is None and self.cert_file is None:
            return None
        return EtcdTls(self.ca_file, self.cert_file, self.key_file)

    def client(self) -> EtcdClient:
        """A client of these endpoints, with this timeout and TLS."""
        return EtcdClient(self.endpoints, timeout_s=self.timeout_s, tls=self.tls())
