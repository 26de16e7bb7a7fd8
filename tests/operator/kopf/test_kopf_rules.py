"""The operator's own rules around the planners, without Kopf or Kubernetes: session-timeout bounds and hysteresis,
which fleet holds a group, advice sources, status trimming, and the command line's defaults and environment."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from berth.coordinator.formats.advice import GroupAdvice
from berth.operator.adapters.advice_source import AdviceSource
from berth.operator.command.options import OptionsError, parse_options
from berth.operator.planners.claims import claim_key, claims_of, holder_of
from berth.operator.planners.fleet_status import only_changes
from berth.operator.planners.observations import CoordinatorBounds
from berth.operator.planners.session_timeout import (
    OperatorSessionBounds,
    allowed_range,
    choose_session_timeout,
    decide_session_timeout,
    is_meaningful_change,
)
from berth.operator.planners.sizing import SessionTimeoutDecision, SessionTimeoutError, SessionTimeoutSource
from berth.operator.spec.fleet import OperatorDefaults, SessionTimeoutPolicy, SessionTimeoutSpec

COORDINATOR = CoordinatorBounds(6_000, 1_800_000)
OPERATOR = OperatorSessionBounds(6_000, 1_800_000)
TEMPLATE = {"spec": {"terminationGracePeriodSeconds": 10, "containers": [{"name": "c", "image": "i"}]}}
AUTO = SessionTimeoutSpec()


def _decision(ms: int) -> SessionTimeoutDecision:
    return SessionTimeoutDecision(ms, f"new {ms}", SessionTimeoutSource.ADVICE)


# ------------------------------------------------------------------------------------------ session timeout


def test_operator_bounds_clamp_a_computed_timeout_and_say_so() -> None:
    raised = decide_session_timeout(AUTO, TEMPLATE, None, COORDINATOR, OperatorSessionBounds(45_000, 600_000))
    assert raised.ms == 45_000 and raised.reason.endswith("raised to 45.0 s, --session-min-ms")
    lowered = decide_session_timeout(AUTO, TEMPLATE, None, COORDINATOR, OperatorSessionBounds(6_000, 20_000))
    assert lowered.ms == 20_000 and lowered.reason.endswith("lowered to 20.0 s, --session-max-ms")


def test_operator_bounds_do_not_touch_a_fixed_timeout() -> None:
    fixed = SessionTimeoutSpec(policy=SessionTimeoutPolicy.FIXED, fixed_ms=8_000)
    assert decide_session_timeout(fixed, TEMPLATE, None, COORDINATOR, OperatorSessionBounds(45_000, 60_000)).ms == 8_000


def test_a_fleet_range_outside_the_operators_is_an_error_naming_the_fleet_field() -> None:
    narrow = SessionTimeoutSpec(min_ms=6_000, max_ms=8_000)
    with pytest.raises(SessionTimeoutError) as raised:
        decide_session_timeout(narrow, TEMPLATE, None, COORDINATOR, OperatorSessionBounds(10_000, 60_000))
    assert raised.value.field == "spec.sessionTimeout.maxMs" and "--session-min-ms" in str(raised.value)


def test_confident_advice_is_used_as_is() -> None:
    advice = GroupAdvice(advised_session_timeout_ms=45_000, samples=240, confident=True, reason="p99 ...")
    assert decide_session_timeout(AUTO, TEMPLATE, advice, COORDINATOR, OPERATOR).ms == 45_000


@pytest.mark.parametrize(
    ("current", "new", "meaningful"),
    [
        (30_000, 32_999, False),
        (30_000, 33_000, True),
        (30_000, 27_001, False),
        (30_000, 27_000, True),
        (6_000, 6_999, False),
        (6_000, 7_000, True),
    ],
)
def test_a_meaningful_change_is_ten_percent_and_at_least_a_second(current: int, new: int, meaningful: bool) -> None:
    assert is_meaningful_change(current, new) is meaningful


def test_a_small_wobble_keeps_the_value_and_reason_the_pods_have() -> None:
    choice = choose_session_timeout(
        _decision(31_000),
        policy=SessionTimeoutPolicy.AUTO,
        current_ms=30_000,
        current_reason="old reason",
        allowed=(6_000, 1_800_000),
        pods_roll_anyway=False,
    )
    assert (choice.ms, choice.reason, choice.changed) == (30_000, "old reason", False)


@pytest.mark.parametrize(
    ("policy", "rolls_anyway", "allowed"),
    [
        (SessionTimeoutPolicy.FIXED, False, (6_000, 1_800_000)),  # the user's own number
        (SessionTimeoutPolicy.AUTO, True, (6_000, 1_800_000)),  # the pods restart anyway
        (SessionTimeoutPolicy.AUTO, False, (35_000, 1_800_000)),  # the kept value left the bounds
    ],
)
def test_a_small_change_is_applied_when_it_costs_nothing_extra_or_must_be(
    policy: SessionTimeoutPolicy, rolls_anyway: bool, allowed: tuple[int, int]
) -> None:
    choice = choose_session_timeout(
        _decision(31_000),
        policy=policy,
        current_ms=30_000,
        current_reason="old",
        allowed=allowed,
        pods_roll_anyway=rolls_anyway,
    )
    assert (choice.ms, choice.changed) == (31_000, True)


def test_the_first_value_and_a_big_change_are_applied() -> None:
    first = choose_session_timeout(
        _decision(31_000),
        policy=AUTO.policy,
        current_ms=None,
        current_reason=None,
        allowed=(0, 9**9),
        pods_roll_anyway=False,
    )
    assert (first.ms, first.changed) == (31_000, True)
    big = choose_session_timeout(
        _decision(60_000),
        policy=AUTO.policy,
        current_ms=30_000,
        current_reason="x",
        allowed=(0, 9**9),
        pods_roll_anyway=False,
    )
    assert (big.ms, big.changed) == (60_000, True)


def test_allowed_range_intersects_every_bound_that_applies() -> None:
    spec = SessionTimeoutSpec(min_ms=10_000, max_ms=100_000)
    assert allowed_range(spec, CoordinatorBounds(6_000, 90_000), OperatorSessionBounds(8_000, 95_000)) == (
        10_000,
        90_000,
    )
    fixed = SessionTimeoutSpec(policy=SessionTimeoutPolicy.FIXED, fixed_ms=45_000)
    assert allowed_range(fixed, CoordinatorBounds(6_000, 90_000), OperatorSessionBounds(50_000, 60_000)) == (
        6_000,
        90_000,
    )


# --------------------------------------------------------------------------------------------------- claims


def _fleet(
    name: str, created: str, *, group: str = "orders", url: str | None = None, established: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 1, "groupId": group, "template": TEMPLATE}
    if url:
        spec["coordinator"] = {"url": url}
    status = {"selector": "x=y", "observedGeneration": 1} if established else {}
    metadata = {"name": name, "namespace": "shop", "uid": f"uid-{name}", "generation": 1, "creationTimestamp": created}
    return {"metadata": metadata, "spec": spec, "status": status}


DEFAULTS = OperatorDefaults(coordinator_url="http://coordinator:9094")


def test_the_oldest_fleet_holds_a_group_unless_another_is_established() -> None:
    older, newer = _fleet("a", "2026-01-01T00:00:00Z"), _fleet("b", "2026-01-02T00:00:00Z")
    key = claim_key("http://coordinator:9094", "orders")
    claims = [*claims_of(older, DEFAULTS).values(), *claims_of(newer, DEFAULTS).values()]
    assert list(claims_of(older, DEFAULTS)) == [key]
    assert (holder_of(claims) or claims[0]).name == "a"
    established = _fleet("b", "2026-01-02T00:00:00Z", established=True)
    claims = [*claims_of(older, DEFAULTS).values(), *claims_of(established, DEFAULTS).values()]
    assert (holder_of(claims) or claims[0]).name == "b"


def test_claims_compare_coordinators_in_canonical_form_and_invalid_or_untrusted_fleets_claim_nothing() -> None:
    defaults = OperatorDefaults(
        coordinator_url="http://berth-coordinator.berth:9094", coordinators_trusted=("http://other.berth:9094",)
    )
    aliases = ["HTTP://Berth-Coordinator.berth.svc.cluster.local.:09094", "http://berth-coordinator.berth.svc:9094/"]
    keys = set()
    for alias in aliases:
        fleet = _fleet("a", "2026-01-01T00:00:00Z")
        fleet["spec"]["coordinator"] = {"url": alias}
        keys |= set(claims_of(fleet, defaults))
    assert keys == {("http://berth-coordinator.berth:9094", "orders")}
    other = _fleet("b", "t")
    other["spec"]["coordinator"] = {"url": "http://other.berth:9094"}
    assert list(claims_of(other, defaults)) == [("http://other.berth:9094", "orders")]
    broken = _fleet("a", "2026-01-01T00:00:00Z")
    broken["spec"]["replicas"] = -1
    assert claims_of(broken, DEFAULTS) == {}
    assert claims_of(_fleet("a", "t"), OperatorDefaults()) == {}  # no coordinator URL at all
    hostile = _fleet("c", "t")
    hostile["spec"]["coordinator"] = {"url": "http://attacker.example:9094"}
    assert claims_of(hostile, defaults) == {}  # untrusted: claims nothing, so it cannot block anyone
    assert holder_of([]) is None


# ---------------------------------------------------------------------------------------------------- advice


def _document(generated_at_ms: int, **groups: int) -> str:
    entries = {
        group: {"advised_session_timeout_ms": ms, "samples": 100, "confident": True, "reason": f"{group} {ms}"}
        for group, ms in groups.items()
    }
    return json.dumps({"version": 1, "generated_at_ms": generated_at_ms, "groups": entries})


async def test_advice_from_a_file_and_a_config_map_takes_each_group_from_the_newer(tmp_path: Path) -> None:
    file = tmp_path / "advice.json"
    file.write_text(_document(2_000, orders=45_000))

    async def config_map(namespace: str, name: str, key: str) -> str | None:
        assert (namespace, name, key) == ("berth", "berth-advice", "advice.json")
        return _document(1_000, orders=30_000, payments=20_000)

    source = AdviceSource(read_config_map_key=config_map, config_map=("berth", "berth-advice"), file=file)
    reading = await source.current()
    assert reading.problems == ()
    assert (reading.for_group("orders") or _never()).advised_session_timeout_ms == 45_000
    assert (reading.for_group("payments") or _never()).advised_session_timeout_ms == 20_000


async def test_missing_advice_is_no_advice_and_broken_advice_is_a_problem(tmp_path: Path) -> None:
    missing = AdviceSource(file=tmp_path / "nothing.json")
    assert (await missing.current()).advice is None
    broken_file = tmp_path / "broken.json"
    broken_file.write_text("{not json")
    broken = await AdviceSource(file=broken_file).current()
    assert broken.advice is None and len(broken.problems) == 1 and str(broken_file) in broken.problems[0]
    assert (await AdviceSource().current()).advice is None


async def test_advice_is_read_at_most_once_per_ttl(tmp_path: Path) -> None:
    now = [0.0]
    file = tmp_path / "advice.json"
    file.write_text(_document(1, orders=45_000))
    source = AdviceSource(file=file, ttl_s=10.0, clock=lambda: now[0])
    assert (await source.current()).for_group("orders") is not None
    file.write_text(_document(2, payments=45_000))
    assert (await source.current()).for_group("orders") is not None
    now[0] = 10.0
    assert (await source.current()).for_group("orders") is None


async def test_a_rewritten_advice_file_is_read_at_once_and_names_only_the_groups_whose_entry_changed(
    tmp_path: Path,
) -> None:
    file = tmp_path / "advice.json"
    file.write_text(_document(1, orders=45_000, payments=30_000, audit=20_000))
    told: list[frozenset[str]] = []
    source = AdviceSource(file=file, ttl_s=0.05, on_changed=told.append)
    assert (await source.current()).for_group("orders") is not None  # read, and cached for the TTL
    source.start()
    try:
        await asyncio.sleep(0.2)
        assert told == []  # the file did not change
        # orders changed, payments gone, shipping new, audit the same.
        file.write_text(_document(2, orders=60_000, audit=20_000, shipping=10_000))
        for _ in range(100):
            if told:
                break
            await asyncio.sleep(0.05)
    finally:
        await source.stop()
    assert told == [frozenset({"orders", "payments", "shipping"})]
    assert ((await source.current()).for_group("orders") or _never()).advised_session_timeout_ms == 60_000


async def test_a_burst_of_advice_changes_is_one_read_and_a_change_during_a_read_one_more() -> None:
    reads: list[int] = []
    release = asyncio.Event()

    async def config_map(namespace: str, name: str, key: str) -> str | None:
        reads.append(len(reads))
        await release.wait()
        return _document(len(reads), orders=45_000 + len(reads))

    told: list[frozenset[str]] = []
    source = AdviceSource(read_config_map_key=config_map, config_map=("berth", "berth-advice"), on_changed=told.append)
    source.changed()
    await asyncio.sleep(0)
    for _ in range(5):
        source.changed()  # while the first read is under way
    release.set()
    for _ in range(100):
        if len(told) == 2:
            break
        await asyncio.sleep(0.01)
    await source.stop()
    assert len(reads) == 2 and told == [frozenset({"orders"})] * 2


def _never() -> GroupAdvice:
    raise AssertionError("expected advice")


# ---------------------------------------------------------------------------------------------------- status


def test_only_changes_treats_a_null_like_an_absent_key() -> None:
    status = {"group": {"state": "Empty", "members": []}, "replicas": 1}
    assert only_changes(status, {"group": {"state": "Empty", "leader": None, "members": []}, "replicas": 1}) == {}
    assert only_changes(status, {"replicas": 2, "observedGeneration": None}) == {"replicas": 2}


# ------------------------------------------------------------------------------------------------- options


def test_options_defaults_and_environment(tmp_path: Path) -> None:
    options = parse_options(
        [],
        {"BERTH_COORDINATOR_URL": "http://c:9094", "BERTH_TOKEN": "t0ken"},
        service_account_namespace_file=tmp_path / "none",
    )
    assert options.namespace is None and options.coordinator_url == "http://c:9094"
    assert (
        options.admin_token == "t0ken" and "t0ken" not in repr(options) and "t0ken" not in "".join(options.describe())
    )
    assert (options.session_min_ms, options.session_max_ms, options.liveness_port) == (6_000, 1_800_000, 8080)
    flagged = parse_options(
        ["--coordinator-url", "http://flag:1"],
        {"BERTH_COORDINATOR_URL": "http://env:1"},
        service_account_namespace_file=tmp_path / "none",
    )
    assert flagged.coordinator_url == "http://flag:1"


def test_the_advice_config_map_lives_in_the_operators_own_namespace(tmp_path: Path) -> None:
    namespace_file = tmp_path / "namespace"
    namespace_file.write_text("berth\n")
    options = parse_options(["--advice-configmap", "berth-advice"], {}, service_account_namespace_file=namespace_file)
    assert options.operator_namespace == "berth"
    assert (
        parse_options([], {"POD_NAMESPACE": "ops"}, service_account_namespace_file=namespace_file).operator_namespace
        == "ops"
    )
    with pytest.raises(OptionsError, match="operator's namespace is unknown"):
        parse_options(["--advice-configmap", "x"], {}, service_account_namespace_file=tmp_path / "none")
