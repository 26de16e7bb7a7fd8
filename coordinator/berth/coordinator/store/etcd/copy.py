"""``berth-coordinator copy-to-etcd``: move a single-replica coordinator's data dir into an empty etcd prefix.

What it copies: every group (its fields and static member map), committed offsets, expected members, owners, and
the journal with its seq numbers, exactly as a restart would load them (docs/high-availability.md "Moving to HA").

Rules:
- The data dir is opened as the coordinator opens it (its lock, its integrity check): a coordinator still running on
  it makes the copy refuse, so nothing changes under it.
- The target prefix must hold no key at all; else one line and exit 2, nothing written.
- The copy is several transactions (each within etcd's limits). It first writes ``P migrating`` and removes it, with
  the meta key, in its last transaction: a coordinator refuses a prefix that still holds it, so an interrupted copy
  is never served as a store that lost groups. Run again after deleting the prefix.
- At the end the prefix is loaded back and compared with what was read: counts of groups, members, offsets,
  expected-members lists, and the journal's first and last seq. Exit 0 and one summary line, or 2.
- etcd over TLS takes the server's flags: ``--etcd-ca-file``, and ``--etcd-cert-file`` with ``--etcd-key-file`` for
  an etcd that requires client certificates (the chart's).
- Once the copy is checked it writes :data:`COPIED_MARKER` into the data dir (where, when, what): a coordinator
  started on that data dir refuses to serve it (:func:`copied_refusal`) unless given ``--serve-copied-data-dir``,
  since the replicas on etcd have moved on from it (a reinstall without ``coordinator.ha`` would otherwise serve the
  older state silently). Moving back is a fresh data dir, or the marker removed on purpose.
- Before anything else it waits up to ``--etcd-wait-s`` for etcd to answer (:func:`wait_for_etcd`): a copy Job
  started together with etcd's members (the chart's) would otherwise find their names not yet resolvable, fail,
  and leave its retries' logs to be told apart.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from berth.coordinator.core import ExpectedMembersRecord, GroupRecord, OffsetRecord, Record, Write
from berth.coordinator.daemon.environment import EnvironmentValueError, apply_environment
from berth.coordinator.store.config import StoreConfig
from berth.coordinator.store.errors import StoreError
from berth.coordinator.store.etcd.client import EtcdClient, EtcdError, EtcdUnavailable, b64, prefix_end
from berth.coordinator.store.etcd.config import (
    CHART_MAX_REQUEST_BYTES,
    CHART_MAX_TXN_OPS,
    DEFAULT_PREFIX,
    DEFAULT_TIMEOUT_S,
    ReplicationConfig,
)
from berth.coordinator.store.etcd.journal import JournalIndex, encode_chunk
from berth.coordinator.store.etcd.keys import SCHEMA
from berth.coordinator.store.etcd.store import EtcdStore
from berth.coordinator.store.etcd.txn import Built, Limits, build, fitting
from berth.coordinator.store.sqlite_store import SqliteStore

COMMAND = "copy-to-etcd"
#: Written into the data dir once a copy is done and checked: the file that makes ``berth-coordinator --data-dir``
#: refuse that data dir (its state is older than etcd's from the moment a replica serves the prefix).
COPIED_MARKER = "COPIED-TO-ETCD"
#: The server's flag that serves a copied data dir anyway.
SERVE_COPIED_FLAG = "--serve-copied-data-dir"
#: Journal lines per transaction of the copy (one chunk key each).
JOURNAL_LINES_PER_TXN = 5_000
#: How long the copy waits for etcd to answer at first, and how often it asks meanwhile.
DEFAULT_WAIT_S = 120.0
WAIT_EVERY_S = 1.0


@dataclass(frozen=True, slots=True)
class Tally:
    groups: int = 0
    members: int = 0
    offsets: int = 0
    expected: int = 0
    first_seq: int = 1
    last_seq: int = 0

    def __str__(self) -> str:
        return (
            f"{self.groups} groups, {self.members} members, {self.offsets} offsets, {self.expected} expected-members"
            f" lists, journal seq {self.first_seq}..{self.last_seq}"
        )


def tally(records: Sequence[Record], first_seq: int, last_seq: int) -> Tally:
    groups = [r for r in records if isinstance(r, GroupRecord) and r.value is not None]
    return Tally(
        groups=len(groups),
        members=sum(len(g.members) for g in groups),
        offsets=sum(1 for r in records if isinstance(r, OffsetRecord) and r.value is not None),
        expected=sum(1 for r in records if isinstance(r, ExpectedMembersRecord) and r.group_instance_ids),
        first_seq=first_seq,
        last_seq=last_seq,
    )


def wait_for_etcd(
    client: EtcdClient,
    prefix: bytes,
    wait_s: float,
    say: Callable[[str], None] = print,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once etcd answers a read of ``prefix`` (a quorum is serving); its last error after ``wait_s``."""
    deadline = clock() + wait_s
    said = False
    while True:
        try:
            client.range(prefix, prefix_end(prefix), count_only=True)
            return
        except EtcdUnavailable as exc:
            if clock() >= deadline:
                raise
            if not said:
                say(f"waiting up to {wait_s:g} s for etcd to answer: {exc}")
                said = True
            sleep(WAIT_EVERY_S)


def copy_sqlite_to_etcd(source: SqliteStore, target: EtcdStore, say: Callable[[str], None] = print) -> Tally:
    """Copy ``source`` into ``target``'s empty prefix; the tally, checked against what etcd holds afterwards."""
    client, keys = target.client, target.keys
    _, _, _, count = client.range(keys.prefix, prefix_end(keys.prefix), count_only=True)
    if count:
        raise StoreError(f"{target.where} is not empty ({count} keys): copy only into an unused prefix")
    marker = client.txn(
        [
            {
                "key": b64(keys.prefix),
                "range_end": b64(prefix_end(keys.prefix)),
                "target": "CREATE",
                "result": "EQUAL",
                "create_revision": 0,
            }
        ],
        [{"request_put": {"key": b64(keys.migrating), "value": b64(b"copy-to-etcd")}}],
    )
    if not marker.get("succeeded"):
        raise StoreError(f"{target.where} was written to meanwhile: copy only into an unused prefix")
    guard = {
        "key": b64(keys.migrating),
        "target": "CREATE",
        "result": "EQUAL",
        "create_revision": int(marker["header"]["revision"]),
    }

    def commit(built: Built) -> None:
        answer = client.txn([guard], built.ops)
        if not answer.get("succeeded"):
            raise StoreError(f"{target.where}: the copy's marker changed under it (another copy?); stopped")
        target.adopt(built)

    records = list(source.load())
    writes = [Write(i, [record], []) for i, record in enumerate(records, 1)]
    while writes:
        take, built = fitting(
            writes,
            lambda run: build(
                run, keys, target.epochs, JournalIndex(), target.retention, target.topic_offsets, target.slots
            ),
            target.limits,
        )
        if not target.limits.fits(len(built.ops), built.size):
            group_id = records[writes[0].token - 1].group_id
            raise StoreError(f"{target.where}: a record of group {group_id!r} does not fit in one etcd transaction")
        commit(built)
        writes = writes[take:]
    say(f"copied {len(records)} records")

    first, last = source.first_seq(), source.last_seq()
    index = JournalIndex((), first - 1)
    lines: list[tuple[int, str]] = []
    for numbered in source.journal_lines_after(first - 1):
        lines.append(numbered)
        if len(lines) >= JOURNAL_LINES_PER_TXN:
            index = _copy_journal_chunk(target, lines, index, commit)
            lines = []
    index = _copy_journal_chunk(target, lines, index, commit)
    say(f"copied journal events {first}..{last}")

    done = client.txn(
        [guard],
        [
            {"request_put": {"key": b64(keys.meta), "value": b64(json.dumps({"schema": SCHEMA}).encode())}},
            {"request_delete_range": {"key": b64(keys.migrating)}},
        ],
    )
    if not done.get("succeeded"):
        raise StoreError(f"{target.where}: the copy's marker changed under it (another copy?); stopped")

    copied = tally(records, first, last)
    found = tally(list(target.load()), target.index.first, target.index.last)
    if found != copied:
        raise StoreError(f"{target.where} holds {found} after the copy, but the data dir held {copied}")
    return copied


def mark_copied(data_dir: Path, endpoints: Sequence[str], prefix: str, copied: Tally) -> None:
    """Write :data:`COPIED_MARKER` into ``data_dir`` (durably: written aside, fsynced, renamed)."""
    marker = data_dir / COPIED_MARKER
    record = {
        "copied_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "etcd_endpoints": list(endpoints),
        "etcd_prefix": prefix,
        "copied": str(copied),
    }
    aside = marker.with_suffix(".tmp")
    with open(aside, "w", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(aside, marker)
    directory = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def copied_refusal(data_dir: Path) -> str | None:
    """Why ``data_dir`` must not be served (it was copied to etcd), in one sentence naming the flag; None when it
    was never copied."""
    marker = data_dir / COPIED_MARKER
    try:
        text = marker.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None  # never copied, or not a directory at all (the store says so, in its own words)
    try:
        record = json.loads(text)
        where = f"etcd prefix {record['etcd_prefix']} at {','.join(record['etcd_endpoints'])} on {record['copied_at']}"
    except (ValueError, KeyError, TypeError):
        where = "etcd"
    return (
        f"the data dir {data_dir} was copied to {where} ({marker.name}): the replicas on etcd have served since, so"
        f" this state is older than theirs; run the replicas (--etcd-endpoints), or pass {SERVE_COPIED_FLAG} to"
        " serve this data dir anyway"
    )


def _copy_journal_chunk(
    target: EtcdStore, lines: list[tuple[int, str]], index: JournalIndex, commit: Callable[[Built], None]
) -> JournalIndex:
    if not lines:
        return index
    built = Built([])
    built.put(target.keys.journal_chunk(lines[0][0]), encode_chunk(lines))
    new_index, first_kept = index.appended(lines, target.retention)
    if first_kept is not None:
        built.delete(target.keys.journal_chunk(0), target.keys.journal_chunk(first_kept))
    built.put(target.keys.journal_index, new_index.encode())
    commit(built)
    return new_index


# -------------------------------------------------------------------------------------------------- command


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"berth-coordinator {COMMAND}",
        description="Copy a stopped single-replica coordinator's data dir into an empty etcd prefix, for replicas"
        " on etcd (docs/high-availability.md). The flags name the same things as berth-coordinator's.",
    )
    p.add_argument("--data-dir", required=True, type=Path, help="the coordinator's data dir (it must be stopped)")
    p.add_argument("--etcd-endpoints", required=True, help="comma-separated etcd URLs")
    p.add_argument("--etcd-prefix", default=DEFAULT_PREFIX, help=f"the keys' prefix (default: {DEFAULT_PREFIX})")
    p.add_argument("--etcd-timeout-s", type=float, default=DEFAULT_TIMEOUT_S, help="one etcd request's timeout")
    p.add_argument(
        "--etcd-wait-s",
        type=float,
        default=DEFAULT_WAIT_S,
        help=f"how long to wait for etcd to answer at first (it may be starting too; default: {DEFAULT_WAIT_S:g})",
    )
    p.add_argument("--etcd-max-txn-ops", type=int, default=CHART_MAX_TXN_OPS, help="etcd's --max-txn-ops")
    p.add_argument(
        "--etcd-max-request-bytes", type=int, default=CHART_MAX_REQUEST_BYTES, help="etcd's --max-request-bytes"
    )
    p.add_argument("--etcd-ca-file", type=Path, default=None, help="verify https etcd endpoints against this CA")
    p.add_argument("--etcd-cert-file", type=Path, default=None, help="client certificate for etcd (PEM)")
    p.add_argument("--etcd-key-file", type=Path, default=None, help="the key of --etcd-cert-file (PEM)")
    p.add_argument("--journal-retention-bytes", type=int, default=256 * 2**20, help="as the coordinator's; 0: none")
    p.add_argument("--journal-retention-ms", type=int, default=7 * 86_400_000, help="as the coordinator's; 0: none")
    return p


def main(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> int:
    parser = build_parser()
    try:
        apply_environment(parser, os.environ if environ is None else environ)  # BERTH_<FLAG>, as the server's
    except EnvironmentValueError as exc:
        _fail(str(exc))
    args = parser.parse_args(argv)
    endpoints = [url.strip() for url in args.etcd_endpoints.split(",") if url.strip()]
    config = StoreConfig(
        journal_retention_bytes=args.journal_retention_bytes or None,
        journal_retention_ms=args.journal_retention_ms or None,
    )
    if (args.etcd_cert_file is None) != (args.etcd_key_file is None):
        _fail("--etcd-cert-file and --etcd-key-file go together")
    etcd = ReplicationConfig(
        tuple(endpoints),
        timeout_s=args.etcd_timeout_s,
        ca_file=args.etcd_ca_file,
        cert_file=args.etcd_cert_file,
        key_file=args.etcd_key_file,
    )
    try:
        target = EtcdStore(
            etcd.client(),
            args.etcd_prefix,
            config,
            Limits(args.etcd_max_txn_ops, args.etcd_max_request_bytes),
        )
        wait_for_etcd(target.client, target.keys.prefix, args.etcd_wait_s, say=lambda line: print(line, flush=True))
        with SqliteStore(args.data_dir, config) as source:
            copied = copy_sqlite_to_etcd(source, target, say=lambda line: print(line, flush=True))
            mark_copied(args.data_dir, endpoints, args.etcd_prefix, copied)
    except (StoreError, ValueError, OSError) as exc:
        _fail(str(exc))
    except EtcdError as exc:
        _fail(f"etcd: {exc} (the prefix may hold a partial copy: delete it and copy again)")
    print(f"copied {copied} from {args.data_dir} to etcd prefix {args.etcd_prefix}", flush=True)
    return 0


def _fail(message: str) -> NoReturn:
    print(f"berth-coordinator {COMMAND}: error: {' '.join(message.split())}", file=sys.stderr, flush=True)
    raise SystemExit(2)
