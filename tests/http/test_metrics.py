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


def value(found: dict[str, dict[str, Any]], family: str, sample: str, labels: str) -> float | None:
    for name, label_text, number in found[family]["samples"]:
        if name == sample and label_text == labels:
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
    join_count = value(
        found, "berth_group_join_duration_seconds", "berth_group_join_duration_seconds_count", group + "}"
    )
    sync_count = value(
        found, "berth_group_sync_duration_seconds", "berth_group_sync_duration_seconds_count", group + "}"
    )
    assert join_count == 1 and sync_count == 1


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
