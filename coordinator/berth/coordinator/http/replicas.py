"""Replicas on etcd (``--etcd-endpoints``): the ``--etcd-*`` flags, and the election's terms handed to the server.

``EtcdLeadership`` runs the store's ``EtcdElection`` (a thread) and turns each tenure it wins into a ``Term`` on the
event loop: ``acting`` is the tenure's lease check, ``load`` makes the prefix a Berth store if it is new and replays
it, ``make_writer`` is an ``EtcdWriter`` fenced on the term, and ``ended`` returns when the tenure is over.
``close`` steps down: the lease is revoked, the leader key goes with it, and a standby takes over at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import time
from collections.abc import Callable
from pathlib import Path

from berth.coordinator.core import Coordinator, Record, RecordFormatError
from berth.coordinator.daemon import failpoints
from berth.coordinator.http.engine import WriterPort, WritesDone
from berth.coordinator.http.leadership import Term, TermLost
from berth.coordinator.protocol import GroupId
from berth.coordinator.store import StoreConfig, StoreError
from berth.coordinator.store.etcd import (
    CHART_MAX_REQUEST_BYTES,
    CHART_MAX_TXN_OPS,
    DEFAULT_LEASE_TTL_S,
    DEFAULT_PREFIX,
    DEFAULT_TIMEOUT_S,
    EtcdElection,
    EtcdStore,
    EtcdUnavailable,
    EtcdWriter,
    Limits,
    ReplicationConfig,
    Tenure,
)
from berth.coordinator.store.etcd.election import log as election_log


class EtcdTerm:
    def __init__(self, tenure: Tenure, store: EtcdStore, loop: asyncio.AbstractEventLoop) -> None:
        self.tenure = tenure
        self.store = store
        self.name = str(tenure.term.revision)
        self.acting = tenure.acting
        self._ended: asyncio.Future[str] = loop.create_future()
        tenure.on_end(lambda t: _threadsafe(loop, _settle, self._ended, t.reason))

    def load(self, core: Coordinator) -> None:
        try:
            self.store.begin(self.tenure.term)
            for record in self.store.load():
                failpoints.hit("load.record")
                core.replay(record)
        except RecordFormatError as exc:
            raise StoreError(f"{self.store.where} holds a record this Berth cannot load: {exc}") from exc
        except EtcdUnavailable as exc:  # etcd out of reach: give the term up, another replica (or this one) retries
            self.tenure.end(f"the store could not be loaded: {exc}")
            raise TermLost(str(exc)) from exc

    def make_writer(self, on_done: WritesDone) -> WriterPort:
        return EtcdWriter(self.store, self.tenure, on_done)

    def load_group(self, group_id: GroupId) -> list[Record]:
        return self.store.load_group(group_id)

    async def ended(self) -> str:
        return await asyncio.shield(self._ended)


class EtcdLeadership:
    replicated = True

    def __init__(self, store: EtcdStore, config: ReplicationConfig) -> None:
        self.store = store
        self.config = config
        self._election: EtcdElection | None = None
        self._won: asyncio.Queue[Tenure] | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        won: asyncio.Queue[Tenure] = asyncio.Queue()
        self._won = won
        self._election = EtcdElection(
            self.config.client(),
            self.store.keys,
            name=self.config.name,
            ttl_s=self.config.lease_ttl_s,
            on_elected=lambda tenure: _threadsafe(loop, won.put_nowait, tenure),
        ).start()

    async def next_term(self) -> Term:
        assert self._won is not None, "start() first"
        while True:
            tenure = await self._won.get()
            if not tenure.ended:
                return EtcdTerm(tenure, self.store, asyncio.get_running_loop())
            election_log.info("ha: term %d ended before it was served", tenure.term.revision)

    def close(self) -> None:
        if self._election is not None:
            self._election.resign()


#: How often "waiting for etcd" is logged while it does not answer at start.
WAITING_LOG_INTERVAL_S = 10.0


def _threadsafe(loop: asyncio.AbstractEventLoop, callback: Callable[..., object], *args: object) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: we are exiting
        loop.call_soon_threadsafe(callback, *args)


def _settle(future: asyncio.Future[str], reason: str) -> None:
    if not future.done():
        future.set_result(reason)


def open_replicated(config: ReplicationConfig, store_config: StoreConfig) -> tuple[EtcdStore, EtcdLeadership]:
    """The store on etcd (checked: a usable prefix) and its leadership; ``StoreError`` when unusable."""
    client = config.client()
    store = EtcdStore(client, config.prefix, store_config, config.limits)
    said = 0.0
    while True:  # etcd may start after the replicas (a fresh install): wait for it rather than crash-loop
        try:
            store.check()
            break
        except EtcdUnavailable as exc:
            if time.monotonic() - said > WAITING_LOG_INTERVAL_S:
                election_log.warning("ha: waiting for etcd: %s", exc)
                said = time.monotonic()
            time.sleep(1)
    return store, EtcdLeadership(store, config)


# ------------------------------------------------------------------------------------------------------ flags


def add_replication_arguments(p: argparse.ArgumentParser) -> None:
    """The ``--etcd-*`` flags (docs/api.md §10, docs/high-availability.md)."""
    p.add_argument(
        "--etcd-endpoints",
        default=None,
        help="run as one of several replicas, the state in etcd at these comma-separated URLs instead of"
        " --data-dir: one replica acts, the others stand by (default: off, the SQLite store)",
    )
    p.add_argument("--etcd-prefix", default=DEFAULT_PREFIX, help="the keys' prefix in etcd (ends with '/')")
    p.add_argument(
        "--etcd-lease-ttl-s",
        type=int,
        default=DEFAULT_LEASE_TTL_S,
        help="the leader lease: a standby takes over this long after the active replica stopped renewing it",
    )
    p.add_argument(
        "--etcd-timeout-s",
        type=float,
        default=None,
        help=f"one etcd request's timeout, below the TTL (default: {DEFAULT_TIMEOUT_S:g}, or half a shorter TTL)",
    )
    p.add_argument(
        "--etcd-max-txn-ops",
        type=int,
        default=CHART_MAX_TXN_OPS,
        help="etcd's --max-txn-ops: operations one transaction may hold (at most what etcd was started with)",
    )
    p.add_argument(
        "--etcd-max-request-bytes",
        type=int,
        default=CHART_MAX_REQUEST_BYTES,
        help="etcd's --max-request-bytes: the largest transaction (at most what etcd was started with)",
    )
    p.add_argument(
        "--replica-name", default=None, help="this replica's name in the leader key and logs (default: the host name)"
    )
    p.add_argument("--etcd-ca-file", type=Path, default=None, help="verify https etcd endpoints against this CA")
    p.add_argument("--etcd-cert-file", type=Path, default=None, help="client certificate for etcd (PEM)")
    p.add_argument("--etcd-key-file", type=Path, default=None, help="the key of --etcd-cert-file (PEM)")


def replication_config(args: argparse.Namespace) -> ReplicationConfig | None:
    if not args.etcd_endpoints:
        return None
    endpoints = tuple(url.strip() for url in args.etcd_endpoints.split(",") if url.strip())
    return ReplicationConfig(
        endpoints=endpoints,
        prefix=args.etcd_prefix,
        name=args.replica_name or socket.gethostname(),
        lease_ttl_s=args.etcd_lease_ttl_s,
        timeout_s=args.etcd_timeout_s or min(DEFAULT_TIMEOUT_S, args.etcd_lease_ttl_s / 2),
        limits=Limits(args.etcd_max_txn_ops, args.etcd_max_request_bytes),
        ca_file=args.etcd_ca_file,
        cert_file=args.etcd_cert_file,
        key_file=args.etcd_key_file,
    )
