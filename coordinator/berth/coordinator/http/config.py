"""The server's configuration: where it listens, its limits, auth, TLS, and the core's group settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from berth.coordinator.core import CoordinatorConfig
from berth.coordinator.http.auth import TokenSet
from berth.coordinator.protocol import Limits
from berth.coordinator.store import StoreConfig
from berth.coordinator.store.etcd import ReplicationConfig


@dataclass(frozen=True)
class ServerConfig:
    data_dir: Path | None  # None: the replicated store (``replication``)
    host: str = "127.0.0.1"
    port: int = 9094
    max_body_bytes: int = 1_048_576
    idle_timeout_s: float = 120.0  # a connection that sends no complete request for this long is closed
    body_timeout_s: float = 30.0  # a request body must arrive within this (slow-body clients get 408)
    max_connections: int = 10_000  # beyond this, new connections get a 503 and are closed
    manual_clock: bool = False
    tokens: TokenSet | None = None
    limits: Limits = field(default_factory=Limits)
    core: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    # The store's start-up checks and bounds (issue #12): docs/api.md §6, §8, §10.
    store: StoreConfig = field(default_factory=StoreConfig)
    journal_page_max_bytes: int = 1_048_576  # a journal page stops before this many bytes of events (but one)
    # --- the network edge (docs/api.md §6, §10): per-client limit, header timeout, probe listener, TLS, metrics
    max_connections_per_client: int = 1_000  # from one IPv4 address or IPv6 /64; 0: no per-client limit
    header_timeout_s: float = 10.0  # a request head must be complete this long after its first byte (else 408)
    probe_port: int | None = None  # /healthz, /readyz and /metrics on a listener of their own (plain HTTP)
    tls: TlsFiles | None = None  # serve HTTPS with this certificate, reloaded when the files change
    metrics_max_groups: int = 200  # groups with per-group series; the rest only in the aggregates
    metrics_max_groups_per_token: int = 10  # of those, held by one non-admin token's groups (0: no quota)
    replication: ReplicationConfig | None = None  # replicas on etcd (--etcd-endpoints) instead of --data-dir


@dataclass(frozen=True)
class TlsFiles:
    cert_file: Path  # PEM: the certificate, then any intermediates
    key_file: Path  # PEM: its private key
    reload_interval_s: float = 10.0  # how often the files are checked for a new certificate
