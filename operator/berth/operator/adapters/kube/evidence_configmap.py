"""The Kafka evidence journal kept in one ConfigMap (``--evidence-configmap``) in the operator's own namespace.

The analytics job mounts it (key ``evidence.jsonl``, one event a line) and ``berth-analyze --journal`` reads the
mounted folder like any journal. Rules: bounded — the newest events whose lines fit ``max_bytes`` are kept (a
ConfigMap holds at most 1 MiB); read and written by name only (get, create once, patch), so the chart grants no
list or watch; sequence numbers continue from the last one kept.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import kubernetes

from berth.operator.adapters.kube.calls import MERGE_PATCH, call_json, port_errors, read_or_none
from berth.operator.planners.evidence import EvidenceEvent, encode_line, numbered

EVIDENCE_KEY = "evidence.jsonl"
DEFAULT_MAX_BYTES = 512 * 1024


class ConfigMapJournal:
    def __init__(
        self, api_client: kubernetes.client.ApiClient, namespace: str, name: str, *, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.max_bytes = max_bytes

    async def append(self, events: Sequence[EvidenceEvent]) -> None:
        if not events:
            return
        with port_errors():
            await self._append(events)

    async def _append(self, events: Sequence[EvidenceEvent]) -> None:
        existing = await self._read()
        lines = [] if existing is None else [line for line in existing.splitlines() if line.strip()]
        last = 0
        if lines:
            try:
                last = int(json.loads(lines[-1]).get("seq", 0))
            except (ValueError, AttributeError):
                last = 0
        lines += [encode_line(event) for event in numbered(events, last)]
        kept: list[str] = []
        size = 0
        for line in reversed(lines):  # the newest events that fit
            size += len(line.encode()) + 1
            if size > self.max_bytes:
                break
            kept.append(line)
        text = "\n".join(reversed(kept)) + "\n"
        if existing is None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": self.name, "labels": {"app.kubernetes.io/managed-by": "berth-operator"}},
                "data": {EVIDENCE_KEY: text},
            }
            await call_json(self.core.create_namespaced_config_map, self.namespace, body)
        else:
            await call_json(
                self.core.patch_namespaced_config_map,
                self.name,
                self.namespace,
                {"data": {EVIDENCE_KEY: text}},
                _content_type=MERGE_PATCH,
            )

    async def _read(self) -> str | None:
        config_map = await read_or_none(self.core.read_namespaced_config_map, self.name, self.namespace)
        if config_map is None:
            return None
        return str((config_map.get("data") or {}).get(EVIDENCE_KEY) or "")
