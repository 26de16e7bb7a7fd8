"""``python -m benchmarks.etcd_floor``: what etcd alone spends per replicated write, the ceiling that puts on
HA ÷ SQLite on this machine, and what two layout changes would move it to (docs/high-availability.md, "Throughput").

On one machine the coordinator, the load generator and the three etcd members share the cores, so the replicated
store's rate is bounded by their CPU per write together, however the writer batches or pipelines. This measures
each part, side by side in one run, with ``durable_writes``' load (64 clients: static replacements in one
64-member group, then commits of 50 partitions):

1. SQLite: a coordinator on SQLite takes the load: its rate.
2. Record: a replica on a 3-member etcd cluster (fsync on) takes the same load: the coordinator's and the load
   generator's CPU per write; then what each of its transactions did is read back from etcd's history
   (``transactions_between``).
3. Replay: the recorded transactions, in order and in a loop, straight to etcd from one client (one in flight, as
   the writer sends them), without their compares (nothing else writes), for each variant:

   - ``as sent``: the transactions themselves, over gRPC as the store sends them;
   - ``as sent, JSON gateway``: the same, through etcd's JSON gateway (``/v3/kv/txn``), as the store sent them
     before its transactions went over gRPC: what the gateway costs etcd;
   - ``journal uncompressed``: each journal chunk's value plain text, as the store wrote it before schema 2;
   - ``schema 1``: besides, each static member stored under its member id, as the store did before it keyed them by
     their ``group.instance.id``: a static replacement then deletes its predecessor's key and creates one, where it
     now overwrites one. The two variants tell what schema 2's two changes each saved.

   etcd's CPU (its three members together) per write, and the ceiling: the cores over the coordinator's, the load
   generator's and etcd's CPU per write, as a fraction of SQLite's rate.

The figures are printed and written to ``benchmarks/results/etcd_floor.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import http.client
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.common import RESULTS, Coordinator, cpu_seconds, machine, progress
from benchmarks.ha_writes import KINDS, children_cpu_s, load_spec
from benchmarks.heartbeat import form_groups
from benchmarks.writes_loadgen import CLIENTS, load
from berth.coordinator.store.etcd.client import EtcdClient, b64, prefix_end
from berth.coordinator.store.etcd.journal import decode_chunk
from berth.operator.local.etcd_cluster import EtcdCluster
from berth.operator.local.replicas import Replicas

PREFIX = "/bench/"
UNCOMPRESSED = "journal uncompressed"
SCHEMA_1 = "schema 1 (members by member id, journal uncompressed)"
VARIANTS = ("as sent", "as sent, JSON gateway", UNCOMPRESSED, SCHEMA_1)
#: The variant replayed through etcd's JSON gateway; the others go over gRPC.
GATEWAY = "as sent, JSON gateway"
Txn = dict[str, Any]


def transactions_between(endpoint: str, first: int, last: int) -> list[Txn]:
    """What each transaction from revision ``first`` to ``last`` did under ``PREFIX``, read back from etcd's
    history (a watch from ``first``): one revision is one transaction; its puts (without their lease) and its
    deletes, each of one key, in the transaction's shape as the gateway takes it. The compares are not kept:
    the replay sends none (nothing else writes)."""
    parts = urlsplit(endpoint)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 2379, timeout=30)
    prefix = PREFIX.encode()
    body = {"create_request": {"key": b64(prefix), "range_end": b64(prefix_end(prefix)), "start_revision": first}}
    conn.request("POST", "/v3/watch", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    answer = conn.getresponse()
    by_revision: dict[int, list[dict[str, Any]]] = {}
    try:
        while not by_revision or max(by_revision) < last:
            line = answer.readline()
            if not line:
                raise RuntimeError("etcd's watch ended before the last transaction")
            for event in json.loads(line).get("result", {}).get("events", ()):
                kv = event["kv"]
                if event.get("type") == "DELETE":
                    op = {"request_delete_range": {"key": kv["key"]}}
                else:
                    op = {"request_put": {"key": kv["key"], "value": kv.get("value", "")}}
                by_revision.setdefault(int(kv["mod_revision"]), []).append(op)
    finally:
        conn.close()
    return [{"success": ops} for revision, ops in sorted(by_revision.items()) if revision <= last]


def _key(op: dict[str, Any]) -> bytes:
    return base64.b64decode(op["key"])


def variant(txns: list[Txn], name: str) -> list[list[dict[str, Any]]]:
    """The operations of the recorded transactions, in order, as the variant ``name`` would send them."""
    journal, members = (PREFIX + "j/").encode(), (PREFIX + "m/").encode()
    last_put: dict[bytes, bytes] = {}  # (schema 1) a slot's key -> the key its member was last put under
    sent = []
    for txn in txns:
        ops: list[dict[str, Any]] = []
        for op in txn["success"]:
            put = op.get("request_put")
            if name in (UNCOMPRESSED, SCHEMA_1) and put is not None and _key(put).startswith(journal):
                plain = "\n".join(decode_chunk(base64.b64decode(put["value"]))).encode()
                op = {"request_put": {**put, "value": b64(plain)}}
            elif name == SCHEMA_1 and put is not None and _key(put).startswith(members):
                slot_key = _key(put)
                epoch, marker, _ = slot_key.rsplit(b"/", 2)  # a static member's slot is i/<instance, hex>
                if marker == b"i":
                    member_id = json.loads(base64.b64decode(put["value"]))["member_id"].encode()
                    key = epoch + b"/" + member_id
                    previous = last_put.get(slot_key)
                    if previous is not None and previous != key:
                        ops.append({"request_delete_range": {"key": b64(previous)}})
                    last_put[slot_key] = key
                    op = {"request_put": {**put, "key": b64(key)}}
            ops.append(op)
        sent.append(ops)
    return sent


def replay(
    client: EtcdClient, txns: list[list[dict[str, Any]]], pids: list[int], seconds: float, *, gateway: bool = False
) -> tuple[int, float]:
    """Send ``txns`` in a loop for ``seconds``, over gRPC or through the JSON ``gateway``: (transactions sent, etcd
    CPU seconds spent)."""
    before = sum(cpu_seconds(pid) for pid in pids)
    sent = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        ops = txns[sent % len(txns)]
        if gateway:
            client.call("/v3/kv/txn", {"compare": [], "success": ops, "failure": []})
        else:
            client.txn([], ops)
        sent += 1
    return sent, sum(cpu_seconds(pid) for pid in pids) - before


def measure(seconds: float, runs: int) -> dict[str, Any]:
    figures: dict[str, Any] = {kind: {} for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="berth-etcd-floor-") as tmp:
        root = Path(tmp)
        with Coordinator(root / "sqlite") as sqlite:
            asyncio.run(form_groups(sqlite.url, 1, CLIENTS, prefix="writes"))
            for kind in KINDS:
                answer = load(load_spec(kind, sqlite.url, seconds, "sqlite"), sqlite.pid)
                assert not answer["errors"], answer
                figures[kind]["sqlite_writes_per_s"] = answer["per_s"]
                progress(f"SQLite: {answer['per_s']:.0f} {kind} writes/s")
        with EtcdCluster(root / "etcd", 3, fsync=True) as cluster:
            pids = [p.pid for p in cluster.processes if p is not None]
            client = EtcdClient(cluster.endpoints)
            try:
                recorded: dict[str, list[Txn]] = {}
                with Replicas(root / "replicas", cluster.endpoints[0], PREFIX, 1, "--log-level", "warning") as replicas:
                    active = replicas.active()
                    asyncio.run(form_groups(active.url, 1, CLIENTS, prefix="writes"))
                    for kind in KINDS:
                        first = client.range(b"\0")[1] + 1
                        children = children_cpu_s()
                        answer = load(load_spec(kind, active.url, seconds, "floor"), active.pid)
                        assert not answer["errors"], answer
                        txns = transactions_between(cluster.endpoints[0], first, client.range(b"\0")[1])
                        recorded[kind] = txns
                        done = answer["done"]
                        figures[kind].update(
                            transactions_recorded=len(txns),
                            writes_per_transaction=done / len(txns),
                            coordinator_cpu_us_per_write=answer["server_cpu_s"] / done * 1e6,
                            loadgen_cpu_us_per_write=(children_cpu_s() - children) / done * 1e6,
                        )
                        progress(f"recorded {len(txns)} transactions of {done} {kind} writes")
                for kind, txns in recorded.items():
                    per_txn = figures[kind]["writes_per_transaction"]
                    used: dict[str, list[float]] = {name: [] for name in VARIANTS}
                    for _ in range(runs):
                        for name in VARIANTS:
                            ops = variant(txns, name)
                            sent, cpu_s = replay(client, ops, pids, seconds, gateway=name == GATEWAY)
                            used[name].append(cpu_s / (sent * per_txn) * 1e6)
                            progress(f"{kind}, {name}: etcd {used[name][-1]:.0f} us of CPU per write")
                    figures[kind]["etcd_cpu_us_per_write"] = {name: statistics.median(u) for name, u in used.items()}
            finally:
                client.close()
    cores = os.cpu_count() or 1
    for kind in KINDS:
        f = figures[kind]
        others = f["coordinator_cpu_us_per_write"] + f["loadgen_cpu_us_per_write"]
        f["ha_over_sqlite_at_most"] = {
            name: cores / ((others + etcd_us) * 1e-6) / f["sqlite_writes_per_s"]
            for name, etcd_us in f["etcd_cpu_us_per_write"].items()
        }
    figures["cores"] = cores
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.etcd_floor", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="of each recording and each replay")
    parser.add_argument("--runs", type=int, default=3, help="replays of each variant (alternating)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    figures = measure(args.seconds, args.runs)
    figures["load_average"] = {"before": load_before, "after": os.getloadavg()[0]}
    for kind in KINDS:
        f = figures[kind]
        print(
            f"{kind}: SQLite {f['sqlite_writes_per_s']:.0f} writes/s; on etcd, per write: coordinator"
            f" {f['coordinator_cpu_us_per_write']:.0f} us, load generator {f['loadgen_cpu_us_per_write']:.0f} us"
            f" of CPU ({f['writes_per_transaction']:.1f} writes per transaction)"
        )
        for name, us in f["etcd_cpu_us_per_write"].items():
            at_most = f["ha_over_sqlite_at_most"][name]
            print(f"  {name:30} etcd {us:4.0f} us of CPU per write: HA / SQLite at most {at_most:.2f}x")
    result = {
        "command": "python -m benchmarks.etcd_floor",
        "figures": figures,
        "machine": machine(),
    }
    (RESULTS / "etcd_floor.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
