"""``/metrics`` as Prometheus and the people reading it expect (issue 15; docs/api.md §10 "Metrics"):

- every family has ``# HELP`` and ``# TYPE`` before its samples, once, and every documented family is there;
- per-group series (state, members, generation, rebalances by cause, join and sync latency) for a bounded number of
  groups: the first groups seen hold the slots, the rest are counted as omitted, a deleted group's slot goes to the
  next group, and a million groups cannot blow up a scrape.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.coordinator import CoordinatorProcess
from support.rawhttp import post_json, send

from berth.coordinator.http.group_metrics import GroupMetrics
from berth.coordinator.http.metrics import FAMILIES

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_]+="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    proc = CoordinatorProcess(
        Path(tmp_path_factory.mktemp("metrics")) / "data",
        *("--metrics-max-groups", "3", "--group-initial-rebalance-delay-ms", "0"),
    )
    proc.start()
    yield proc
    proc.kill()


def families(text: str) -> dict[str, dict[str, Any]]:
    """The exposition parsed strictly: HELP and TYPE once each, before any sample of their family."""
    found: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in found, f"{name} declared twice"
            found[name] = {"help": help_text, "type": None, "samples": []}
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert found[name]["type"] is None and not found[name]["samples"], line
            found[name]["type"] = kind
        else:
            match = SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            sample = match.group(1)
            family = next(
                (f for f in (sample, re.sub(r"_(bucket|sum|count)$", "", sample)) if f in found),
                None,
            )
            assert family is not None, f"{sample} has no HELP before it"
            if family != sample:
                assert found[family]["type"] == "histogram", sample
            found[family]["samples"].append((sample, match.group(2) or "", float(match.group(3))))
    return found


LABEL = re.compile(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"')


def value(found: dict[str, dict[str, Any]], family: str, sample: str, labels: str) -> float | None:
    """The sample's value; ``labels`` as written in the exposition, in any order (Prometheus ignores it)."""
    wanted = dict(LABEL.findall(labels))
    for name, label_text, number in found[family]["samples"]:
        if name == sample and dict(LABEL.findall(label_text)) == wanted:
            return float(number)
    return None


def scrape(proc: CoordinatorProcess) -> dict[str, dict[str, Any]]:
    status, text = send(proc.url, "GET", "/metrics")
    assert status == 200
    return families(text)


def form(proc: CoordinatorProcess, group: str) -> None:
    """A one-member static group, Stable: pre-registered, joined (at once: all expected are in), synced."""
    path = f"/v1/groups/{group}"
    assert send(proc.url, "PUT", f"{path}/expected-members", b'{"group_instance_ids":["i-0"]}', JSON)[0] == 200
    join = {
        "member_id": "",
        "group_instance_id": "i-0",
        "session_timeout_ms": 30_000,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": ""}],
    }
    joined = post_json(proc.url, f"{path}/join", join)[1]
    assert joined["error"] == "NONE", joined
    sync = {
        "member_id": joined["member_id"],
        "group_instance_id": "i-0",
        "generation_id": joined["generation_id"],
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": joined["member_id"], "assignment": base64.b64encode(b"a").decode()}],
    }
    assert post_json(proc.url, f"{path}/sync", sync)[1]["error"] == "NONE"


JSON = {"Content-Type": "application/json"}


def test_every_family_has_help_and_type_before_its_samples(scraped: CoordinatorProcess) -> None:
    found = scrape(scraped)
    assert set(FAMILIES) <= set(found), set(FAMILIES) - set(found)
    for name, family in found.items():
        assert family["help"] and family["type"] in {"counter", "gauge", "histogram"}, name
        if family["type"] == "counter":
            assert name.endswith("_total"), name


def test_every_family_is_documented() -> None:
    contract = (ROOT / "docs" / "api.md").read_text()
    assert [name for name in FAMILIES if f"`{name}" not in contract] == []


def test_per_group_series_describe_a_group(scraped: CoordinatorProcess) -> None:
    form(scraped, "orders")
    found = scrape(scraped)
    group = '{group="orders"'
    assert value(found, "berth_group_state", "berth_group_state", group + ',state="Stable"}') == 1
    assert value(found, "berth_group_members", "berth_group_members", group + "}") == 1
    assert value(found, "berth_group_generation", "berth_group_generation", group + "}") == 1
    assert (
        value(found, "berth_group_rebalances_total", "berth_group_rebalances_total", group + ',cause="new_member"}')
        == 1
    )
    # Causes this group never saw are there at 0, so that its first leave is an increase Prometheus can see.
    assert (
        value(found, "berth_group_rebalances_total", "berth_group_rebalances_total", group + ',cause="member_left"}')
        == 0
    )
    join_count = value(
        found, "berth_group_join_duration_seconds", "berth_group_join_duration_seconds_count", group + "}"
    )
    sync_count = value(
        found, "berth_group_sync_duration_seconds", "berth_group_sync_duration_seconds_count", group + "}"
    )
    assert join_count == 1 and sync_count == 1
    # Its one rebalance, from its start to the assignment stored, timed for the group and among all groups.
    rebalanced = value(
        found, "berth_group_rebalance_duration_seconds", "berth_group_rebalance_duration_seconds_count", group + "}"
    )
    everyone = value(found, "berth_rebalance_duration_seconds", "berth_rebalance_duration_seconds_count", "")
    assert rebalanced == 1 and everyone >= 1


def test_per_group_series_are_bounded_and_slots_pass_on(scraped: CoordinatorProcess) -> None:
    for name in ["orders", "a-1", "a-2", "a-3", "a-4", "a-5"]:  # "orders" may exist already; at most 3 slots
        form(scraped, name)
    found = scrape(scraped)
    exported = {labels.split('"')[1] for _, labels, _ in found["berth_group_members"]["samples"]}
    assert len(exported) == 3
    assert value(found, "berth_metrics_groups_omitted", "berth_metrics_groups_omitted", "") == 3
    held = sorted(exported)
    # Emptied and deleted, a group gives its slot to the next group in the order they were first seen.
    gone = held[0]
    leave = {"members": [{"member_id": "", "group_instance_id": "i-0"}]}
    assert send(scraped.url, "DELETE", f"/v1/groups/{gone}/expected-members")[0] == 200
    assert post_json(scraped.url, f"/v1/groups/{gone}/leave", leave)[1]["error"] == "NONE"
    assert send(scraped.url, "DELETE", f"/v1/groups/{gone}")[1]["error"] == "NONE"
    after = scrape(scraped)
    now_exported = {labels.split('"')[1] for _, labels, _ in after["berth_group_members"]["samples"]}
    assert len(now_exported) == 3 and gone not in now_exported
    assert exported - {gone} <= now_exported  # the others keep theirs: no series jumps between groups
    assert value(after, "berth_metrics_groups_omitted", "berth_metrics_groups_omitted", "") == 2


# --- the families the alert rules need (deploy/monitoring/berth-alerts.yaml, docs/monitoring.md) ------------------

RETENTION_BYTES = 4_000


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[CoordinatorProcess]:
    """A coordinator of its own, with a small journal bound, so that retention acts within a few requests."""
    with CoordinatorProcess(
        tmp_path / "data", "--journal-retention-bytes", str(RETENTION_BYTES), "--group-initial-rebalance-delay-ms", "0"
    ) as proc:
        yield proc


def test_fenced_answers_are_counted_each_in_total_and_per_group(fresh: CoordinatorProcess) -> None:
    """A restarted static member takes over ``i-0``; its predecessor's heartbeats are answered FENCED_INSTANCE_ID,
    each one counted (the journal notes the episode once), in the total and in the group's own series."""
    form(fresh, "ledger")
    form(fresh, "quiet")  # another group: its series stays at 0
    first = scrape(fresh)
    assert value(first, "berth_fenced_members_total", "berth_fenced_members_total", "") == 0
    assert value(first, "berth_group_fenced_members_total", "berth_group_fenced_members_total", '{group="ledger"}') == 0
    described = send(fresh.url, "GET", "/v1/groups/ledger")[1]
    (member,) = described["members"]
    old_member_id = member["member_id"]
    rejoin = {
        "member_id": "",
        "group_instance_id": "i-0",
        "session_timeout_ms": 30_000,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": ""}],
    }
    joined = post_json(fresh.url, "/v1/groups/ledger/join", rejoin)[1]
    assert joined["error"] == "NONE" and joined["member_id"] != old_member_id
    stale = {"member_id": old_member_id, "group_instance_id": "i-0", "generation_id": joined["generation_id"]}
    for _ in range(3):
        assert post_json(fresh.url, "/v1/groups/ledger/heartbeat", stale)[1]["error"] == "FENCED_INSTANCE_ID"
    found = scrape(fresh)
    assert value(found, "berth_fenced_members_total", "berth_fenced_members_total", "") == 3
    assert value(found, "berth_group_fenced_members_total", "berth_group_fenced_members_total", '{group="ledger"}') == 3
    assert value(found, "berth_group_fenced_members_total", "berth_group_fenced_members_total", '{group="quiet"}') == 0
    fenced_events = [e for e in send(fresh.url, "GET", "/v1/journal")[1]["events"] if e["type"] == "member_fenced"]
    assert len(fenced_events) == 1, "the journal notes the episode once; the counter counts every answer"


def test_store_transactions_count_every_committed_write_once(fresh: CoordinatorProcess) -> None:
    """Each committed transaction is one observation of the store's time; the writes they carried and the writer's
    preparing time add up; a histogram's buckets are cumulative up to its count."""

    def figures() -> tuple[float, float, float, float, list[float]]:
        found = scrape(fresh)
        family, name = found["berth_store_transaction_seconds"], "berth_store_transaction_seconds"
        buckets = [number for sample, _, number in family["samples"] if sample == f"{name}_bucket"]
        return (
            value(found, name, f"{name}_count", "") or 0,
            value(found, name, f"{name}_sum", "") or 0,
            value(found, "berth_store_transaction_writes_total", "berth_store_transaction_writes_total", "") or 0,
            value(found, "berth_store_preparing_seconds_total", "berth_store_preparing_seconds_total", "") or 0,
            buckets,
        )

    count, seconds, writes, preparing, _ = figures()
    for k in range(20):  # one at a time: a transaction each
        body = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": k}]}]}
        assert post_json(fresh.url, "/v1/groups/g/offsets", body)[1]["error"] == "NONE"
    after = figures()
    assert after[0] - count == 20 and after[2] - writes == 20
    assert after[1] > seconds and after[3] > preparing
    buckets = after[4]
    assert buckets == sorted(buckets) and buckets[-1] == after[0]


def segment_bytes(proc: CoordinatorProcess) -> int:
    return sum(p.stat().st_size for p in (proc.data_dir / "journal").glob("segment-*.jsonl"))


def test_journal_size_against_its_bound_and_the_oldest_event(fresh: CoordinatorProcess) -> None:
    """Bytes retained are the segments' size on disk, never far beyond the bound once retention acts; the oldest
    event's time is the ``ts_ms`` of the first event the journal still serves."""
    empty = scrape(fresh)
    assert value(empty, "berth_journal_bytes", "berth_journal_bytes", "") == 0
    assert value(empty, "berth_journal_retention_bytes", "berth_journal_retention_bytes", "") == RETENTION_BYTES
    family = empty["berth_journal_oldest_event_timestamp_seconds"]
    assert family["type"] == "gauge" and family["samples"] == [], "no sample while the journal holds no event"
    for k in range(60):
        body = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": k}]}]}
        assert post_json(fresh.url, f"/v1/groups/g-{k:03d}/offsets", body)[1]["error"] == "NONE"
        assert post_json(fresh.url, "/v1/debug/clock", {"advance_ms": 1_000})[0] == 200
    found = scrape(fresh)
    retained = value(found, "berth_journal_bytes", "berth_journal_bytes", "")
    assert retained == segment_bytes(fresh)
    assert RETENTION_BYTES * 0.8 < retained <= RETENTION_BYTES, "retention keeps the journal at its bound"
    journal = send(fresh.url, "GET", "/v1/journal?after=0&limit=1")[1]
    assert journal["first"] > 1, "retention dropped the oldest events"
    oldest = value(
        found, "berth_journal_oldest_event_timestamp_seconds", "berth_journal_oldest_event_timestamp_seconds", ""
    )
    assert oldest == journal["events"][0]["ts_ms"] / 1000


def test_journal_figures_survive_a_restart(tmp_path: Path) -> None:
    """After a restart the figures come from the segments the store reconciles (their first lines), not from zero."""
    data = tmp_path / "data"
    args = ("--journal-retention-bytes", str(RETENTION_BYTES))
    with CoordinatorProcess(data, *args) as proc:
        for k in range(5):
            body = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": k}]}]}
            assert post_json(proc.url, f"/v1/groups/r-{k}/offsets", body)[1]["error"] == "NONE"
        before = scrape(proc)
        proc.stop()
    with CoordinatorProcess(data, *args) as proc:
        after = scrape(proc)
        for name in ("berth_journal_bytes", "berth_journal_oldest_event_timestamp_seconds"):
            assert value(after, name, name, "") == value(before, name, name, "") != 0, name


def test_a_rebalance_lasts_from_its_first_start_to_the_assignment_and_one_that_empties_has_no_duration() -> None:
    groups = GroupMetrics(max_groups=1)
    groups.rebalance("orders", "new_member", 1_000)
    groups.rebalance("orders", "new_member", 1_400)  # superseded: the members' pause started at 1,000
    groups.rebalanced("orders", 3_500)
    groups.rebalanced("orders", 9_000)  # an assignment stored with no rebalance since: nothing to time
    groups.rebalance("payments", "member_left", 2_000)  # no slot left: counted among all groups only
    groups.rebalanced("payments", 2_250)
    groups.rebalance("ledger", "member_left", 5_000)
    groups.stopped("ledger")  # emptied: not a duration
    groups.rebalanced("ledger", 6_000)
    assert (groups.durations.counts, groups.durations.sum) == (
        [0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0],
        2.5 + 0.25,
    )
    assert groups.series["orders"].durations.sum == 2.5 and "payments" not in groups.series
