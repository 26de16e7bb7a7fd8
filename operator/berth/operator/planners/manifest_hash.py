"""The hash of a planned manifest: how a workload tells whether what is planned is what was last applied.

Rules: a short, stable hash of the JSON (keys sorted); ``spec.replicas`` is left out, because the scaling planner
changes the size on its own (``WorkloadPort.scale``), so a resize never counts as a change of the template. The
Kubernetes adapter stamps it on every object it applies (``berth.dev/applied-hash``) and patches only when it
moved; the reconcile pass compares it with the workload's to tell whether the pods roll anyway.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def canonical_hash(value: object) -> str:
    """A short, stable hash of a JSON-able value (keys sorted)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def template_hash(statefulset: Mapping[str, Any]) -> str:
    """A short hash of a planned StatefulSet's pod template: what, changed, rolls its pods."""
    return canonical_hash((statefulset.get("spec") or {}).get("template") or {})


def planned_hash(manifest: Mapping[str, Any]) -> str:
    """A short hash of a planned object, ``spec.replicas`` left out."""
    spec = {key: value for key, value in (manifest.get("spec") or {}).items() if key != "replicas"}
    return canonical_hash({**manifest, "spec": spec})
