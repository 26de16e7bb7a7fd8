"""Kubernetes Events on a ConsumerFleet, each also written to the operator's log.

Rules: an Event says what happened in words a person understands and names the instance ids involved; its
``reason`` is one CamelCase word (``LeftGroup``, ``CoordinatorUnreachable``). What a pass says is logged at once and
held until the pass flushes its sink (once, however it ends); then what it said is posted as at most one Event per
type (``planners.announcements.coalesced``: several things said become one Event named for the first, each part
after its reason). Events go through Kopf's poster (core/v1 Events, posted in the background, never failing a
reconcile) and so only work inside a running operator; the log line carries the fleet's reference for JSON logs.
No token or other secret is ever part of a message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from berth.operator.planners.announcements import Said, coalesced

logger = logging.getLogger("berth.operator.events")


class FleetEvents:
    """An :class:`~berth.operator.ports.EventSink` for one fleet (its body as last read), posted through Kopf."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        # Only what an Event's involvedObject needs: the body itself may change (or be gone) by posting time.
        ref = {
            "apiVersion": str(body.get("apiVersion") or ""),
            "kind": str(body.get("kind") or ""),
            "name": str(metadata.get("name") or ""),
            "namespace": str(metadata.get("namespace") or ""),
            "uid": str(metadata.get("uid") or ""),
        }
        self._body = kopf.Body(
            {
                "apiVersion": ref["apiVersion"],
                "kind": ref["kind"],
                "metadata": {"name": ref["name"], "namespace": ref["namespace"], "uid": ref["uid"]},
            }
        )
        self._log_extra = {"k8s_ref": ref, "k8s_skip": True}
        self._held: list[Said] = []

    def info(self, reason: str, message: str) -> None:
        logger.info("%s: %s", reason, message, extra={**self._log_extra, "event_reason": reason})
        self._held.append(("Normal", reason, message))

    def warning(self, reason: str, message: str) -> None:
        logger.warning("%s: %s", reason, message, extra={**self._log_extra, "event_reason": reason})
        self._held.append(("Warning", reason, message))

    def flush(self) -> None:
        held, self._held = self._held, []
        for event_type, reason, message in coalesced(held):
            kopf.event(self._body, type=event_type, reason=reason, message=message)
