"""The reference engine for benchmark 6: ``berth-analyze``'s summary and advice computed by DuckDB on the same journal.

``python -m benchmarks.duckdb_reference --journal PARQUET_DIR --out DIR [--threads 2] [--subset]``

Owns a second implementation of the pipeline's models (docs/pipeline.md, "What is measured") in DuckDB SQL, for one
purpose: to say how far Berth's Spark job is from what a single-node columnar engine needs for the same work. It
reads a converted (Parquet) journal, as ``berth-analyze`` does, and writes ``summary.parquet`` with the columns of
``berth-analyze``'s (one row per group) and ``advice.json``'s ``groups``; the benchmark compares both with Berth's,
so that the figures are for the same results, not merely similar queries. Rules:
- Same models: restart gaps, dynamic restarts and rebalances avoided, rebalance durations, partitions moved by
  process slot (dynamic arrivals inherit a departed member's slot when the pairing is unambiguous), the advice
  rule. Partitions are compared as 64-bit keys (the topic's hash XOR the partition), as in Berth, though with
  DuckDB's hash, not xxHash: equal results unless two keys collide (docs/pipeline.md puts that at ~1e-11 per pair
  of assignments).
- ``--moved joins`` (the default): partitions moved as an expert writes it, one row per partition held and hash
  anti joins; ``--moved lambdas``: the first reference's nested list lambdas (quadratic in an assignment). Both
  give the same summary; the benchmark checks it group by group.
- Percentiles are exact (``restart_gap_p_ms`` is the ``ceil(p x n)``-th smallest gap), which is what Spark's
  ``percentile_approx`` returns at accuracy 10,000 for groups with fewer than 10,000 gaps.
- ``--subset`` computes only what the issue's first measurement did (rebalances by group and cause, restart gaps,
  rebalance durations) and writes nothing: a figure beside the full one, never compared.
- Benchmark tooling only: DuckDB is in the ``bench`` extra, never a dependency of Berth.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from berth.pipeline.advice_settings import AdviceSettings

_EVENTS = """
CREATE TEMP VIEW events AS
SELECT seq, ts_ms, group_id, type, group_instance_id, offline_ms, rebalance, via, phase, cause, assignments
FROM read_parquet('{glob}', hive_partitioning = true, union_by_name = true)
WHERE malformed_line IS NULL AND seq IS NOT NULL AND ts_ms IS NOT NULL AND group_id IS NOT NULL AND type IS NOT NULL
"""

_BY_CAUSE = """
CREATE TEMP TABLE by_cause AS
SELECT group_id, coalesce(cause, 'unknown') AS cause, count(*) AS rebalances
FROM events WHERE type = 'rebalance_started' GROUP BY ALL
"""

_GAPS = """
CREATE TEMP TABLE gaps AS
SELECT group_id, offline_ms AS gap_ms FROM events
WHERE type = 'static_member_replaced' AND group_instance_id IS NOT NULL AND offline_ms IS NOT NULL
UNION ALL
SELECT group_id, next_ts_ms - ts_ms + before FROM (
    SELECT group_id, ts_ms, CASE WHEN type = 'member_expired' THEN coalesce(offline_ms, 0) ELSE 0 END AS before,
        CASE WHEN type = 'member_left' AND via = 'leave' THEN 'leave_rejoin'
             WHEN type = 'member_expired' AND phase = 'session' THEN 'expiry_rejoin' END AS kind,
        lead(type) OVER instance AS next_type, lead(ts_ms) OVER instance AS next_ts_ms
    FROM events
    WHERE type IN ('member_joined', 'member_left', 'member_expired') AND group_instance_id IS NOT NULL
    WINDOW instance AS (PARTITION BY group_id, group_instance_id ORDER BY seq)
) WHERE kind IS NOT NULL AND next_type = 'member_joined'
"""

_GAP_STATS = """
CREATE TEMP TABLE gap_stats AS
SELECT group_id, samples, sorted[greatest(1, ceil(0.5 * samples))::BIGINT] AS p50,
    sorted[greatest(1, ceil({percentile} * samples))::BIGINT] AS p, sorted[samples] AS max_ms
FROM (SELECT group_id, count(*) AS samples, list_sort(list(gap_ms)) AS sorted FROM gaps GROUP BY group_id)
"""

_DURATIONS = """
CREATE TEMP TABLE durations AS
SELECT group_id, sum(next_ts_ms - ts_ms) AS rebalancing_ms, max(next_ts_ms - ts_ms) AS longest_ms FROM (
    SELECT group_id, type, ts_ms, lead(ts_ms) OVER (PARTITION BY group_id ORDER BY seq) AS next_ts_ms FROM events
    WHERE type IN ('rebalance_started', 'assignment_stored', 'group_emptied', 'group_deleted')
) WHERE type = 'rebalance_started' GROUP BY group_id
"""

# A dynamic departure whose group's next dynamic coming or going is an arrival, and the rebalances started from the
# departure to the first assignment stored after the arrival (restarts.py's model).
_DYNAMIC = """
CREATE TEMP TABLE dynamic_restarts AS
WITH kinds AS (
    SELECT group_id, seq,
        CASE WHEN group_instance_id IS NULL AND ((type = 'member_left' AND via = 'leave')
                                                 OR (type = 'member_expired' AND phase = 'session')) THEN 'departure'
             WHEN group_instance_id IS NULL AND type = 'member_joined' THEN 'arrival'
             WHEN type = 'rebalance_started' THEN 'started'
             WHEN type = 'assignment_stored' THEN 'stored' END AS kind
    FROM events
), counted AS (
    SELECT *, sum(CASE WHEN kind = 'started' THEN 1 ELSE 0 END) OVER (
        PARTITION BY group_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS started_so_far
    FROM kinds WHERE kind IS NOT NULL
), settled AS (
    SELECT *, first_value(CASE WHEN kind = 'stored' THEN started_so_far END IGNORE NULLS) OVER (
        PARTITION BY group_id ORDER BY seq ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS by_next_store
    FROM counted
), paired AS (
    SELECT group_id, kind, started_so_far,
        lead(kind) OVER g AS next_kind, lead(by_next_store) OVER g AS settled_at
    FROM settled WHERE kind IN ('departure', 'arrival')
    WINDOW g AS (PARTITION BY group_id ORDER BY seq)
)
SELECT group_id, count(*) AS dynamic_restarts, sum(settled_at - started_so_far) AS dynamic_restart_rebalances
FROM paired WHERE kind = 'departure' AND next_kind = 'arrival' AND settled_at IS NOT NULL GROUP BY group_id
"""

_AVOIDED = """
CREATE TEMP TABLE avoided AS
WITH static AS (
    SELECT group_id, count(*) AS static_restarts,
        count(*) FILTER (WHERE NOT rebalance) AS restarts_without_rebalance,
        count(*) FILTER (WHERE rebalance) AS restarts_with_rebalance
    FROM events WHERE type = 'static_member_replaced' GROUP BY group_id
), per_group AS (
    SELECT coalesce(s.group_id, d.group_id) AS group_id,
        coalesce(static_restarts, 0) AS static_restarts,
        coalesce(restarts_without_rebalance, 0) AS restarts_without_rebalance,
        coalesce(restarts_with_rebalance, 0) AS restarts_with_rebalance,
        coalesce(dynamic_restarts, 0) AS dynamic_restarts,
        coalesce(dynamic_restart_rebalances, 0) AS dynamic_restart_rebalances
    FROM static s FULL JOIN dynamic_restarts d ON s.group_id = d.group_id
), rate AS (
    SELECT coalesce(CASE WHEN sum(dynamic_restarts) > 0
                         THEN sum(dynamic_restart_rebalances) / sum(dynamic_restarts) END, 1.0) AS per_restart
    FROM per_group
)
SELECT per_group.*, round(static_restarts * per_restart)::BIGINT AS rebalances_if_dynamic,
    round(static_restarts * per_restart)::BIGINT - restarts_with_rebalance AS rebalances_avoided
FROM per_group, rate
"""

# Per assignment_stored: its holdings (owner = instance id, else member id; keys = partitions as 64-bit hashes, the
# topic's hash XOR the partition, as in Berth) against the previous assignment's. Where a dynamic member both arrived
# and departed, the arrivals' process slots are worked out (assignments.py's rules) from both assignments' holdings,
# built again for those few assignments only: carrying every assignment's holdings through the window, or keeping
# them all, costs DuckDB more than the rest of this query.
_HOLDINGS = """
list_transform(coalesce(assignments, []), lambda m: {
    'owner': coalesce(m.group_instance_id, m.member_id),
    'dynamic': m.group_instance_id IS NULL,
    'keys': coalesce(flatten(list_transform(map_entries(m.partitions),
        lambda e: list_transform(e.value, lambda p: xor(hash(e.key), p::UBIGINT)))), [])
})
"""
_MOVED = f"""
CREATE TEMP TABLE moved AS
WITH compared AS MATERIALIZED (
    SELECT group_id, seq, unknown_assignments, owners, keys, pairs,
        lag(seq) OVER g AS previous_seq, coalesce(lag(owners) OVER g, []) AS previous_owners,
        coalesce(lag(keys) OVER g, []) AS previous_keys, coalesce(lag(pairs) OVER g, []) AS previous_pairs,
        len(list_filter(dynamic_owners, lambda x: NOT list_contains(coalesce(lag(owners) OVER g, []), x))) > 0
            AND len(list_filter(coalesce(lag(dynamic_owners) OVER g, []), lambda x: NOT list_contains(owners, x))) > 0
            AS turnover
    FROM (
        SELECT *, list_transform(holdings, lambda h: h.owner) AS owners,
            list_transform(list_filter(holdings, lambda h: h.dynamic), lambda h: h.owner) AS dynamic_owners,
            list_distinct(flatten(list_transform(holdings, lambda h: h.keys))) AS keys,
            flatten(list_transform(holdings, lambda h: list_transform(h.keys, lambda k: xor(k, hash(h.owner)))))
                AS pairs
        FROM (
            SELECT group_id, seq, len(list_filter(coalesce(assignments, []), lambda m: m.partitions IS NULL))
                    AS unknown_assignments,
                {_HOLDINGS} AS holdings
            FROM events WHERE type = 'assignment_stored'
        )
    )
    WINDOW g AS (PARTITION BY group_id ORDER BY seq)
), turns AS (
    SELECT group_id, seq, previous_seq, previous_owners FROM compared WHERE turnover
), held AS (
    SELECT group_id, seq, {_HOLDINGS} AS holdings FROM events
    WHERE type = 'assignment_stored' AND (group_id, seq) IN (
        SELECT (group_id, seq) FROM turns UNION ALL SELECT (group_id, previous_seq) FROM turns)
), turnover AS (
    SELECT t.group_id, t.seq, t.previous_owners, now.holdings,
        list_filter(before.holdings,
            lambda d: d.dynamic AND NOT list_contains(list_transform(now.holdings, lambda h: h.owner), d.owner))
            AS departed,
        list_filter(now.holdings, lambda h: h.dynamic AND NOT list_contains(t.previous_owners, h.owner)) AS arrived
    FROM turns t JOIN held now ON now.group_id = t.group_id AND now.seq = t.seq
    JOIN held before ON before.group_id = t.group_id AND before.seq = t.previous_seq
), slotted AS (
    SELECT group_id, seq, flatten(list_transform(holdings, lambda h: list_transform(h.keys,
        lambda k: xor(k, hash(CASE
            WHEN NOT (h.dynamic AND NOT list_contains(previous_owners, h.owner)) THEN h.owner
            WHEN len(departed) = 1 AND len(arrived) = 1 THEN departed[1].owner
            WHEN len(list_filter(departed, lambda d: list_has_any(d.keys, h.keys))) = 1
                 AND len(list_filter(arrived, lambda a: list_has_any(a.keys,
                         list_filter(departed, lambda d: list_has_any(d.keys, h.keys))[1].keys))) = 1
                THEN list_filter(departed, lambda d: list_has_any(d.keys, h.keys))[1].owner
            ELSE h.owner END))))) AS pairs
    FROM turnover
)
SELECT c.group_id, count(*) AS assignments, sum(c.unknown_assignments) AS unknown_assignments,
    sum((len(list_distinct(coalesce(s.pairs, c.pairs)))
         - len(list_intersect(coalesce(s.pairs, c.pairs), c.previous_pairs)))
        - (len(c.keys) - len(list_intersect(c.keys, c.previous_keys)))) AS partitions_moved
FROM compared c LEFT JOIN slotted s ON s.group_id = c.group_id AND s.seq = c.seq
GROUP BY c.group_id
"""

# Partitions moved as a DuckDB user would write it: one row per partition held (unnest), each assignment's rows
# compared with the group's previous assignment's by plain hash anti joins (``ANTI JOIN``) on integers, linear in
# the partitions held.
# Each assignment is numbered (``aid``, its predecessor ``prev_aid``); a partition is a 64-bit key (the topic's hash
# XOR the partition, as in Berth), a member its owner's hash, a (partition, slot) pair the key XOR the slot's hash.
# Process slots (assignments.py's rules) are worked out where a dynamic member arrived and another departed, from
# those members' partitions only: which departed members' partitions each arrival took is a join of the two sets.
_MOVED_JOINS = (
    (
        "stored",
        """
CREATE TEMP TABLE stored AS
SELECT group_id, seq, aid, lag(aid) OVER (PARTITION BY group_id ORDER BY seq) AS prev_aid
FROM (SELECT group_id, seq, row_number() OVER (ORDER BY group_id, seq) AS aid
      FROM events WHERE type = 'assignment_stored')
""",
    ),
    (
        "members",
        """
CREATE TEMP TABLE members AS
SELECT s.aid, s.prev_aid, hash(coalesce(u.m.group_instance_id, u.m.member_id)) AS oh,
    u.m.group_instance_id IS NULL AS dynamic, u.m.partitions AS partitions
FROM (SELECT group_id, seq, unnest(assignments) AS m FROM events WHERE type = 'assignment_stored') u
JOIN stored s USING (group_id, seq)
""",
    ),
    (
        "turnover",
        """
CREATE TEMP TABLE arrived AS
SELECT c.aid, c.oh, c.partitions FROM members c ANTI JOIN members p ON p.aid = c.prev_aid AND p.oh = c.oh
WHERE c.dynamic;
CREATE TEMP TABLE departed AS
SELECT s.aid, p.oh, p.partitions FROM stored s JOIN members p ON p.aid = s.prev_aid
ANTI JOIN members c ON c.aid = s.aid AND c.oh = p.oh
WHERE p.dynamic;
CREATE TEMP TABLE turns AS
SELECT aid, count(*) FILTER (WHERE arrival) AS arrivals, count(*) FILTER (WHERE NOT arrival) AS departures,
    any_value(oh) FILTER (WHERE NOT arrival) AS only_departed
FROM (SELECT aid, oh, true AS arrival FROM arrived UNION ALL SELECT aid, oh, false FROM departed)
GROUP BY aid HAVING arrivals > 0 AND departures > 0;
CREATE TEMP TABLE took AS
WITH arrived_keys AS (
    SELECT aid, oh, xor(hash(topic), unnest(numbers)::UBIGINT) AS key FROM (
        SELECT aid, oh, unnest(map_keys(partitions)) AS topic, unnest(map_values(partitions)) AS numbers
        FROM arrived SEMI JOIN turns USING (aid))
), departed_keys AS (
    SELECT aid, oh, xor(hash(topic), unnest(numbers)::UBIGINT) AS key FROM (
        SELECT aid, oh, unnest(map_keys(partitions)) AS topic, unnest(map_values(partitions)) AS numbers
        FROM departed SEMI JOIN turns USING (aid))
)
SELECT DISTINCT a.aid, a.oh AS arrival, d.oh AS departure FROM arrived_keys a JOIN departed_keys d USING (aid, key);
CREATE TEMP TABLE slots AS
WITH sources AS (
    SELECT aid, arrival, count(*) AS sources, any_value(departure) AS source FROM took GROUP BY ALL
), takers AS (
    SELECT aid, departure, count(*) AS takers FROM took GROUP BY ALL
)
SELECT a.aid, a.oh,
    CASE WHEN t.arrivals = 1 AND t.departures = 1 THEN t.only_departed
         WHEN s.sources = 1 AND k.takers = 1 THEN s.source
         ELSE a.oh END AS slot
FROM arrived a JOIN turns t USING (aid)
LEFT JOIN sources s ON s.aid = a.aid AND s.arrival = a.oh
LEFT JOIN takers k ON k.aid = a.aid AND k.departure = s.source
""",
    ),
    (
        "held",
        """
CREATE TEMP TABLE held AS
SELECT aid, prev_aid, key, xor(key, oh) AS own_pair, xor(key, slot) AS slot_pair FROM (
    SELECT aid, prev_aid, oh, slot, xor(hash(topic), unnest(numbers)::UBIGINT) AS key FROM (
        SELECT m.aid, m.prev_aid, m.oh, coalesce(s.slot, m.oh) AS slot,
            unnest(map_keys(m.partitions)) AS topic, unnest(map_values(m.partitions)) AS numbers
        FROM members m LEFT JOIN slots s USING (aid, oh)))
""",
    ),
    (
        "moved",
        """
CREATE TEMP TABLE moved AS
WITH new_pairs AS (
    SELECT c.aid, count(*) AS new_pairs FROM (SELECT DISTINCT aid, prev_aid, slot_pair FROM held) c
    ANTI JOIN held p ON p.aid = c.prev_aid AND p.own_pair = c.slot_pair
    GROUP BY c.aid
), added AS (
    SELECT c.aid, count(*) AS added FROM (SELECT DISTINCT aid, prev_aid, key FROM held) c
    ANTI JOIN held p ON p.aid = c.prev_aid AND p.key = c.key
    GROUP BY c.aid
), unknown AS (
    SELECT aid, count(*) AS unknown FROM members WHERE partitions IS NULL GROUP BY aid
)
SELECT group_id, count(*) AS assignments, coalesce(sum(unknown), 0) AS unknown_assignments,
    coalesce(sum(new_pairs), 0) - coalesce(sum(added), 0) AS partitions_moved
FROM stored LEFT JOIN new_pairs USING (aid) LEFT JOIN added USING (aid) LEFT JOIN unknown USING (aid)
GROUP BY group_id
""",
    ),
)

_SUMMARY = """
CREATE TEMP TABLE summary AS
WITH per_group AS (
    SELECT group_id, count(*) AS events, min(ts_ms) AS first_ts_ms, max(ts_ms) AS last_ts_ms,
        count(*) FILTER (WHERE type = 'rebalance_started') AS rebalances
    FROM events GROUP BY group_id
), causes AS (
    SELECT group_id, map_from_entries(list({{'k': cause, 'v': rebalances}} ORDER BY cause)) AS rebalances_by_cause
    FROM by_cause GROUP BY group_id
), advice AS (
    SELECT group_id, p, samples,
        least({max_ms}, greatest({min_ms}, ceil(p * {safety_margin} + {heartbeat_ms})::BIGINT)) AS advised
    FROM gap_stats
)
SELECT e.group_id, e.events, e.first_ts_ms, e.last_ts_ms,
    coalesce(c.rebalances_by_cause, MAP {{}}::MAP(VARCHAR, BIGINT)) AS rebalances_by_cause,
    e.rebalances,
    coalesce(a.static_restarts, 0) AS static_restarts,
    coalesce(a.restarts_without_rebalance, 0) AS restarts_without_rebalance,
    coalesce(a.dynamic_restarts, 0) AS dynamic_restarts,
    coalesce(a.dynamic_restart_rebalances, 0)::BIGINT AS dynamic_restart_rebalances,
    coalesce(a.rebalances_if_dynamic, 0) AS rebalances_if_dynamic,
    coalesce(a.rebalances_avoided, 0) AS rebalances_avoided,
    coalesce(s.samples, 0) AS restart_gap_samples,
    coalesce(d.rebalancing_ms, 0)::BIGINT AS rebalancing_ms,
    coalesce(m.assignments, 0) AS assignments,
    coalesce(m.partitions_moved, 0)::BIGINT AS partitions_moved,
    coalesce(m.unknown_assignments, 0)::BIGINT AS unknown_assignments,
    s.p50 AS restart_gap_p50_ms, s.p AS restart_gap_p_ms, s.max_ms AS restart_gap_max_ms,
    d.longest_ms AS longest_rebalance_ms,
    v.advised AS advised_session_timeout_ms, v.samples >= {confident} AS advice_confident
FROM per_group e
LEFT JOIN causes c USING (group_id) LEFT JOIN avoided a USING (group_id) LEFT JOIN gap_stats s USING (group_id)
LEFT JOIN durations d USING (group_id) LEFT JOIN moved m USING (group_id) LEFT JOIN advice v USING (group_id)
ORDER BY e.group_id
"""


def parquet_glob(journal: Path) -> str:
    return str(journal / "**" / "*.parquet") if journal.is_dir() else str(journal)


def run(
    journal: Path, out: Path | None, threads: int, subset: bool, settings: AdviceSettings, moved: str = "joins"
) -> dict[str, float]:
    """Compute the summary (or only the subset); returns seconds per step."""
    import duckdb

    con = duckdb.connect(config={"threads": threads})
    con.execute(_EVENTS.format(glob=parquet_glob(journal)))
    steps = [("by_cause", _BY_CAUSE), ("gaps", _GAPS), ("gap_stats", _GAP_STATS.format(percentile=settings.percentile))]
    steps.append(("durations", _DURATIONS))
    if not subset:
        steps += [("dynamic_restarts", _DYNAMIC), ("avoided", _AVOIDED)]
        steps += list(_MOVED_JOINS) if moved == "joins" else [("moved", _MOVED)]
        summary = _SUMMARY.format(
            max_ms=settings.max_ms,
            min_ms=settings.min_ms,
            safety_margin=settings.safety_margin,
            heartbeat_ms=settings.heartbeat_interval_ms,
            confident=settings.confident_samples,
        )
        steps.append(("summary", summary))
    seconds = {}
    for name, sql in steps:
        started = time.monotonic()
        con.execute(sql)
        seconds[name] = round(time.monotonic() - started, 2)
    if out is not None and not subset:
        out.mkdir(parents=True, exist_ok=True)
        con.execute(f"COPY summary TO '{out / 'summary.parquet'}' (FORMAT parquet)")
        advised = con.execute(
            "SELECT group_id, advised_session_timeout_ms, restart_gap_samples, restart_gap_p_ms, advice_confident "
            "FROM summary WHERE restart_gap_samples > 0 ORDER BY group_id"
        ).fetchall()
        groups = {
            g: {"advised_session_timeout_ms": a, "samples": n, "restart_gap_p_ms": p, "confident": c}
            for g, a, n, p, c in advised
        }
        (out / "advice.json").write_text(json.dumps({"groups": groups}, indent=1) + "\n")
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--journal", type=Path, required=True, help="a converted (Parquet) journal")
    parser.add_argument("--out", type=Path, help="where summary.parquet and advice.json go")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--subset", action="store_true", help="only the issue's three aggregations, nothing written")
    parser.add_argument(
        "--moved",
        choices=("joins", "lambdas"),
        default="joins",
        help="partitions moved by unnest and hash joins (default) or by nested list lambdas (the first reference)",
    )
    args = parser.parse_args(argv)
    seconds = run(args.journal, args.out, args.threads, args.subset, AdviceSettings(), args.moved)
    print(json.dumps(seconds), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
