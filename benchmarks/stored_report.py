"""The issue-22 section of docs/reliability.md (``benchmarks.reliability``), from ``stored_floods``' figures and the
other bounds floods' ``at_rest`` (``bounds_floods``)."""

from __future__ import annotations

from typing import Any

from benchmarks.bounds_floods import CHART_MEMORY_MIB
from benchmarks.stored_floods import COMMITS, METADATA, PARTITIONS, SLOW_PER_SOURCE, SLOW_SOURCES

TITLES = {
    "journal_bloat": "journal bloat",
    "many_groups": "many groups",
    "big_metadata": "big metadata",
    "offsets_one_group": "offsets, one group's token",
    "offsets_glob_token": "offsets, a glob token",
    "offsets_admin": "offsets, the admin token",
    "metadata_across_groups": "metadata across groups",
}


def report(figures: dict[str, Any]) -> list[str]:
    """The issue-22 section of docs/reliability.md (``benchmarks.reliability``)."""
    rows = []
    for name, title in TITLES.items():
        rest = figures.get(name, {}).get("at_rest")
        if rest is None:
            continue
        rows.append(
            f"| {title} | {rest['rss_mib']:.0f} MiB (peak {rest['peak_rss_mib']:.0f}) | {rest['disk_mib']:.0f} MiB |"
            f" {rest['reload_s']:.1f} s, {rest['reload_rss_mib']:.0f} MiB (peak {rest['reload_peak_rss_mib']:.0f}) |"
        )
    lines = [
        "### What the coordinator keeps, against the chart's limits",
        "",
        "After each flood, the coordinator's RSS and data dir, then a restart on the same data dir: seconds to ready,",
        f"RSS once ready and the most it held while loading (VmHWM). The chart's limits: {CHART_MEMORY_MIB} MiB of",
        "memory, a 1 GiB volume.",
        "",
        "| flood | RSS after | disk after | reload |",
        "|---|---|---|---|",
        *rows,
        "",
    ]
    one, glob, admin = (figures.get(k) for k in ("offsets_one_group", "offsets_glob_token", "offsets_admin"))
    if one and glob and admin:
        fetch = one["fetch"]
        lines += [
            f"**Offsets** (issue 22, point 1): {COMMITS} commits, a new topic each, of {PARTITIONS} partitions with",
            f"{len(METADATA):,} bytes of metadata. The issue's flood took the coordinator to 545 MiB, 570 MiB on disk",
            "and a reload of 549 MiB: a crash loop under the chart's limit.",
            "",
            f"- One group's token: the group stops at `--offsets-max-bytes-per-group` (16 MiB), {_partitions(one)}."
            f" One fetch of it is {fetch['pages']} pages of at most {fetch['largest_page_mib']:.2f} MiB (the",
            f"  issue's one answer was 688 MiB), RSS after it {fetch['rss_after_mib']:.0f} MiB.",
            "- A glob token, each commit to a new group: its groups stop at `--max-stored-bytes-per-token`"
            f" (24 MiB), {_partitions(glob)}.",
            f"- The admin token (no tenant): all groups stop at `--max-stored-bytes` (192 MiB), {_partitions(admin)};"
            " commits",
            f"  {_join(admin['answers'])} (a new group without room: COORDINATOR_NOT_AVAILABLE). This is the",
            "  coordinator at its total bound, and what it reloads.",
            "",
        ]
    meta = figures.get("metadata_across_groups")
    if meta:
        lines += [
            f"**Metadata across groups** (point 2): {meta['groups']} groups, each of {meta['members_each']} static"
            f" members with {meta['metadata_bytes_each'] // 1024} KiB of",
            "metadata (under the 8 MiB group bound; the issue's flood reached 790 MiB RSS and a reload at 692 MiB),"
            " joined",
            f"with the admin token: {_join(meta['answers'])}. The members beyond `--max-stored-bytes` were turned"
            " away.",
            "",
        ]
    joins, probes, slots = (figures.get(k) for k in ("anonymous_joins", "probe_flood", "metric_slots"))
    if joins:
        flood, newcomer = joins["flood"], joins["newcomer"]
        lines += [
            f"**Anonymous joins** (the first round's finding): {flood['joins']:,} KIP-394 joins asking for 30-minute"
            f" sessions in {flood['seconds']:.1f} s",
            f"({_join(flood['answers'])}); then a new dynamic member is answered {newcomer['first']} and joins",
            f"({newcomer['join']}) a generation {newcomer['seconds_to_generation']:.1f} s later. Before, it was"
            " locked out (GROUP_MAX_SIZE_REACHED)",
            "for 30 minutes. The flood's ids push out its own oldest (`--max-pending-members-per-group`,",
            "`--max-pending-members`) and live at most `--pending-member-timeout-ms` (30 s).",
            "",
        ]
    if probes:
        answered = {path: f"{p['ok']} of {sum(p['statuses'].values())}" for path, p in probes["probes"].items()}
        lines += [
            f"**The probe listener** (point 8): {probes['slow_connections']} slow connections from {SLOW_SOURCES}"
            f" clients ({SLOW_PER_SOURCE} each, the per-client limit)",
            f"fill its places for {probes['seconds']} s, each reopened as soon as it is closed"
            f" ({probes['slow_connections_opened']} opened). Probed as the kubelet",
            f"does, `/healthz` answered {answered['/healthz']} and `/readyz` {answered['/readyz']} (the issue: 266 of"
            " 277 were 503): a newcomer",
            "takes the place of the oldest connection that is not being answered.",
            "",
        ]
    if slots:
        fleet = "has" if slots["fleet_group_has_series"] else "does not have"
        lines += [
            f"**Metric slots** (point 7): a glob token's 205 commits to new groups ({_join(slots['glob_commits'])});"
            f" its groups hold {slots['glob_groups_with_series']}",
            "of the 200 per-group series (`--metrics-max-groups-per-token`), and a fleet's group formed after them"
            f" {fleet} its series,",
            "and so its alerts (the issue: no slot was left).",
            "",
        ]
    return lines


def _join(answers: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v:,}" for k, v in answers.items())


def _partitions(figures: dict[str, Any]) -> str:
    return f"partitions {_join(figures['partitions'])}"
