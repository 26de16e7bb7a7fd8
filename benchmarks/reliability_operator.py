"""docs/reliability.md's section on the operator's leadership (``benchmarks.reliability`` renders it), from
``robustness_operator.json`` (``python -m benchmarks.operator_robustness``) and ``operator_takeover.json``
(``python -m benchmarks operator_takeover``)."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from benchmarks.common import RESULTS

#: How each fault kind of the campaign reads in a sentence.
WORDS = {
    "kill": "kill -9",
    "graceful": "SIGTERM",
    "freeze": "SIGSTOP (0.3 to 2.5 leases)",
    "cut": "partitioned from everything",
    "cut_api": "partitioned from the API server",
    "reset": "connections reset",
    "lease_delete": "Lease deleted",
    "lease_expire": "Lease edited to look expired",
    "crash_before_leave": "crash before the leave",
    "crash_after_leave": "crash after the leave",
    "stall_before_leave": "event loop stalled before the leave",
    "reinstall": "helm uninstall + install",
    "standby_kill": "the standby killed",
}


INTRO = (
    "`python -m benchmarks.operator_robustness --runs N` (`make robustness`; a fixed-seed subset in `make test`:"
    " `tests/robustness/test_operator_leadership.py`): two `berth-operator` replicas, each in a network namespace of"
    " its own on a private network with the control plane and the coordinator, serve a fleet of real member"
    " processes. Each run scales the fleet down and, at a moment drawn from its seed (printed; a failing seed reruns"
    " alone with `--seeds`), strikes the leader: kill -9, SIGTERM, SIGSTOP past its Lease or not, a partition from"
    " the API server or from everything (iptables DROP), its connections reset, the Lease deleted or edited to look"
    " expired, a crash or a stall of its event loop right before or after the batch leave (failpoints), `helm"
    " uninstall` and `helm install` in the middle of it; or it kills the standby. Afterwards a checker reads the API"
    " server's audit log (every request of the replicas, each Lease write with the holder it asked for and the"
    " answer), the Lease's history and the coordinator's journal (each replica has an admin token of its own, so the"
    " journal names the replica behind each write) and checks: no write of a replica without its Lease; no write"
    " arriving after another replica took the Lease over (a deposed leader takes no step once a newer one could"
    " act); exactly one batch leave per scale-down, naming exactly the departed instances; a graceful stop releases"
    " the Lease; the fleet converges. The failpoint switch `bug.operator_no_release` brings back issue 28's leader"
    " (no deadline on the gate, no release on a stop), and the checker reports it (`tests/robustness`)."
)


#: What the operator's leadership got wrong, where it was found, and the test that fails if it comes back.
TRACK_RECORD = [
    (
        "`kubectl delete lease` made two leaders (17 ms in 1 of 5): the standby created the Lease at once while the"
        " leader acted on until its next renewal.",
        "outside review of 2b669ce (issue 28 R5)",
        "`tests/operator/unit/test_leader_lease.py::test_a_deleted_lease_makes_no_second_leader`",
    ),
    (
        "`helm uninstall` + `helm install`: the new operator acted 53 s later. Helm deleted the operator's"
        " ServiceAccount and rights before its pods stopped, so the leader could not release its Lease (403).",
        "outside review of 2b669ce (issue 28 R5); the campaign's release rule reports it on 2b669ce's chart",
        "`tests/robustness/test_operator_leadership.py` (the `reinstall` run), `tests/kube/test_chart.py`",
    ),
    (
        "A stopping leader's release was refused (409) when a renewal still on its way had changed the Lease: a"
        " graceful stop then cost the whole lease duration.",
        "this campaign (a `reinstall` run, seed 605654980)",
        "`tests/operator/unit/test_leader_lease.py::"
        "test_a_stopping_leader_releases_the_lease_a_renewal_still_on_its_way_changed`",
    ),
    (
        "A renewal that hung was retried by urllib3 three times, past the renew deadline: a leader partitioned for"
        " 1.7 s lost its Lease (a needless takeover).",
        "this campaign (`cut` runs)",
        "`tests/operator/unit/test_leader_lease.py::test_the_leases_calls_are_made_once_and_their_connections_bounded`",
    ),
    (
        "After a takeover, a fleet's status said its group was rebalancing for up to the 10-minute resync: the"
        " journal follower the new leader's first pass started began at the journal's end, after the rebalance it"
        " should have reported.",
        "this campaign (2 runs in the first 10)",
        "`tests/operator/unit/test_journal_follower.py::"
        "test_once_it_found_the_end_every_fleet_on_the_coordinator_is_passed_again`",
    ),
    (
        "A write checked at the gate could still leave long after: a new connection's handshake, the coordinator"
        " client's retries for 10 s, and bytes a partition held back, delivered once it healed.",
        "reading the write path while building the campaign (issue 28)",
        "`tests/operator/unit/test_gated_http.py`",
    ),
]


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _median(figures: dict[str, float] | None) -> str:
    return "-" if figures is None else f"{figures['median']:.1f} s"


def _spread(figures: dict[str, float] | None) -> str:
    return "-" if figures is None else f"{figures['median']:.1f} / {figures['max']:.1f} s"


def section() -> list[str]:
    lines = ["## The operator's leadership", "", *textwrap.wrap(INTRO, 115), ""]
    campaign = _load("robustness_operator")
    if campaign:
        summary = campaign["summary"]
        timing = campaign["timing"]
        faults = ", ".join(f"{WORDS.get(k, k)} {n}" for k, n in summary["faults_by_kind"].items())
        said = (
            f"Campaigns so far: **{summary['runs']} runs**, **{summary['violations']} violations**"
            f" and {summary.get('runs_late', 0)} runs late (safe, but slow: a departed member's session expired"
            " before any leader's batch leave named it, or the fleet converged past the run's deadline),"
            f" {summary['operations_checked']:,} writes and batch leaves checked (lease {timing['lease_s']:g} s,"
            f" renew deadline {timing['renew_deadline_s']:g} s, retry {timing['retry_s']:g} s; "
            f"{summary['runs_per_hour']:.0f} runs an hour on 2 busy cores). Faults: {faults}. The smallest gap between"
            f" a deposed leader's last write and the next leader's takeover: {summary['smallest_margin_s']:.2f} s."
        )
        lines += [
            *textwrap.wrap(said, 115, break_on_hyphens=False),
            "",
            "| fault | runs | takeovers | Lease taken (median / max) | new leader's first write (median / max) |",
            "|---|---|---|---|---|",
        ]
        for kind, figures in summary["takeover_by_kind"].items():
            taken, first = figures["lease_taken_s"], figures["first_write_s"]
            lines.append(
                f"| {WORDS.get(kind, kind)} | {figures['runs']} | {figures['takeovers']} | "
                + (f"{taken['median']:.1f} / {taken['max']:.1f} s" if taken else "-")
                + " | "
                + (f"{first['median']:.1f} / {first['max']:.1f} s" if first else "-")
                + " |"
            )
        lines += [
            "",
            "Times are from the fault (for a reinstall, from `helm install` returning, the new process's start",
            "included). Runs without a takeover: the leader kept its Lease (a freeze or a partition shorter than",
            "the renew deadline, an expired-looking Lease, which the leader renews, a deleted Lease, which its next",
            "renewal creates again) or the fault was the standby's.",
            "",
        ]
    takeover = _load("operator_takeover")
    if takeover:
        figures = takeover["figures"]
        timing = figures["timing"]
        said = (
            f"With the chart's timings (lease {timing['lease_s']:g} s, renew deadline"
            f" {timing['renew_deadline_s']:g} s, retry {timing['retry_s']:g} s; `python -m benchmarks"
            " operator_takeover`, medians of"
            f" {(figures['graceful']['first_write_s'] or {}).get('runs', 0):g}),"
            " from the fault to the new leader's first write:"
        )
        lines += [
            *textwrap.wrap(said, 115, break_on_hyphens=False),
            "",
            "| the leader | Lease taken | first write (median / max) |",
            "|---|---|---|",
        ]
        for kind, words in (
            ("graceful", "stopped (SIGTERM)"),
            ("kill", "killed (kill -9)"),
            ("freeze", "frozen past its Lease"),
            ("reinstall", "helm uninstall + install"),
        ):
            taken, first = figures[kind]["lease_taken_s"], figures[kind]["first_write_s"]
            up = figures[kind].get("first_write_after_up_s")
            after_up = f"; {up['median']:.1f} / {up['max']:.1f} s after the new replica was up" if up else ""
            missing = figures[kind].get("without_first_write")
            without = f"; {missing} without a first write of the new leader within the round" if missing else ""
            lines.append(f"| {words} | {_median(taken)} | {_spread(first)}{after_up}{without} |")
        lines += [
            "",
            "A reinstall is counted from `helm install` returning; most of it is the new process starting (Python's",
            "imports on 2 busy cores, as a new pod's start would be), and the hand-over from there is the Lease",
            "released by the stopping leader (the chart keeps its rights through `helm uninstall` for that).",
            "",
        ]
    lines += [
        "### Track record (the operator's leadership)",
        "",
        "| bug | found by | regression test |",
        "|---|---|---|",
        *(f"| {bug} | {found} | {test} |" for bug, found, test in TRACK_RECORD),
        "",
    ]
    return lines
