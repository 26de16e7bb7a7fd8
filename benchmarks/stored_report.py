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
            f"**Offsets** (issue 22, point 1): {COMMITS} commits, a new topic each, of {PARTITIONS} partitions with"
            f" {len(METADATA):,} bytes of metadata (the issue's flood: 545 MiB RSS, 570 MiB on disk, a reload of",
            "549 MiB, a crash loop under the chart's limit). With one group's token the group stops at",
            f"`--offsets-max-bytes-per-group` (16 MiB): {_partitions(one)}; one fetch of it is"
            f" {fetch['pages']} pages of at most {fetch['largest_page_mib']:.2f} MiB (the issue's one answer was",
            f"688 MiB), RSS after it {fetch['rss_after_mib']:.0f} MiB. A glob token, each commit to a new group, stops",
            f"at `--max-stored-bytes-per-token` (24 MiB): {_answers(glob)}. The admin token (no tenant) stops at",
            f"`--max-stored-bytes` (192 MiB): {_answers(admin)}: what the coordinator holds at its total bound, and",
            "reloads, within the limit.",
            "",
        ]
    meta = figures.get("metadata_across_groups")
    if meta:
        lines += [
            f"**Metadata across groups** (point 2): {meta['groups']} groups, each of {meta['members_each']} static"
            f" members with {meta['metadata_bytes_each'] // 1024} KiB of metadata (under the 8 MiB group bound; the",
            "issue's flood reached 790 MiB RSS and a reload at 692 MiB): "
            f"{', '.join(f'{k}: {v}' for k, v in meta['answers'].items())}.",
            "",
        ]
    joins, probes, slots = (figures.get(k) for k in ("anonymous_joins", "probe_flood", "metric_slots"))
    if joins:
        flood, newcomer = joins["flood"], joins["newcomer"]
        lines += [
            f"**Anonymous joins** (first round): {flood['joins']:,} KIP-394 joins asking for 30-minute sessions in"
            f" {flood['seconds']:.1f} s ({_join(flood['answers'])}), then a new dynamic member: {newcomer['first']},",
            f"then {newcomer['join']} in a generation {newcomer['seconds_to_generation']:.1f} s later (before: locked",
            "out, GROUP_MAX_SIZE_REACHED, for 30 minutes). The flood's ids push out its own oldest",
            "(`--max-pending-members-per-group`, `--max-pending-members`) and live at most",
            "`--pending-member-timeout-ms` (30 s).",
            "",
        ]
    if probes:
        answered = {path: f"{p['ok']} of {sum(p['statuses'].values())}" for path, p in probes["probes"].items()}
        lines += [
            f"**The probe listener** (point 8): {probes['slow_connections']} slow connections from"
            f" {SLOW_SOURCES} clients ({SLOW_PER_SOURCE} each, the per-client limit) fill its places for"
            f" {probes['seconds']} s, each reopened as soon as it is closed ({probes['slow_connections_opened']}",
            f"opened); probed as the kubelet does, `/healthz` answered {answered['/healthz']} and `/readyz`",
            f"{answered['/readyz']} (the issue: 266 of 277 were 503). A newcomer takes the place of the oldest",
            "connection that is not being answered.",
            "",
        ]
    if slots:
        lines += [
            f"**Metric slots** (point 7): a glob token's 205 commits to new groups ({_join(slots['glob_commits'])});"
            f" its groups hold {slots['glob_groups_with_series']} of the 200 per-group series",
            "(`--metrics-max-groups-per-token`), and a fleet's group formed after them has its series, so its alerts:"
            f" {'yes' if slots['fleet_group_has_series'] else 'no'} (the issue: no slot left).",
            "",
        ]
    return lines


def _join(answers: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v:,}" for k, v in answers.items())


def _answers(figures: dict[str, Any]) -> str:
    return f"commits {_join(figures['answers'])}; partitions {_join(figures['partitions'])}"


def _partitions(figures: dict[str, Any]) -> str:
    return f"partitions {_join(figures['partitions'])}"
