"""What every object a fleet owns shares on Kubernetes: the hash of what was applied, and the controller check.

Rules:

- An object is stamped with ``berth.dev/applied-hash``, a short hash of the planned manifest
  (``planners.manifest_hash``); an existing object is patched only when the plan's hash differs.
- A patch adds our labels and the hash annotation to whatever others put in the object's metadata.
- An object with the fleet's name that the fleet does not control is never touched: :class:`NotOurs`.
- :func:`ensure_owned` is the one create-or-patch of an owned object (Service, budget, CA ConfigMap): created
  stamped; a 409 on create (made meanwhile, or by an earlier attempt that timed out) is read back through the API
  (``reread``: the first read may come from a cache that has not seen it yet); patched only when the hash moved.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from berth.operator.adapters.kube.calls import is_conflict
from berth.operator.planners.manifest_hash import planned_hash
from berth.operator.ports import Applied, NotOurs
from berth.operator.spec.names import APPLIED_HASH_ANNOTATION

Obj = dict[str, Any]


def stamped(planned: Mapping[str, Any], annotations: Mapping[str, str]) -> dict[str, Any]:
    """``planned`` with ``annotations`` added to its own."""
    metadata = dict(planned["metadata"])
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
    return {**planned, "metadata": metadata}


def annotation(live: Mapping[str, Any], key: str) -> str | None:
    value = ((live.get("metadata") or {}).get("annotations") or {}).get(key)
    return value if isinstance(value, str) else None


def applied_hash(live: Mapping[str, Any]) -> str | None:
    return annotation(live, APPLIED_HASH_ANNOTATION)


def metadata_ops(
    live: Mapping[str, Any], planned: Mapping[str, Any], applied: str, annotations: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Our labels and the hash annotation (and ``annotations``) added to whatever others put there ("add" replaces an
    existing map)."""
    metadata = live.get("metadata") or {}
    return [
        {
            "op": "add",
            "path": "/metadata/labels",
            "value": {**(metadata.get("labels") or {}), **planned["metadata"]["labels"]},
        },
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {**(metadata.get("annotations") or {}), **(annotations or {}), APPLIED_HASH_ANNOTATION: applied},
        },
    ]


def controlled_by(live: Mapping[str, Any], fleet_uid: str | None) -> bool:
    owners = (live.get("metadata") or {}).get("ownerReferences") or []
    return any(owner.get("controller") and owner.get("uid") == fleet_uid for owner in owners)


def check_ours(kind: str, live: Mapping[str, Any], fleet_uid: str | None) -> None:
    """Raise :class:`NotOurs` unless the fleet controls ``live``."""
    if not controlled_by(live, fleet_uid):
        metadata = live.get("metadata") or {}
        raise NotOurs(
            f"{kind} {metadata.get('namespace')}/{metadata.get('name')} already exists and is not controlled by"
            " this fleet: rename the fleet or remove that object"
        )


async def ensure_owned(
    kind: str,
    planned: Mapping[str, Any],
    fleet_uid: str | None,
    *,
    read: Callable[[], Awaitable[Obj | None]],
    create: Callable[[Obj], Awaitable[object]],
    patch: Callable[[list[Obj]], Awaitable[object]],
    changes: Callable[[Mapping[str, Any]], list[Obj]],
    reread: Callable[[], Awaitable[Obj | None]] | None = None,
) -> Applied:
    """Make the object ``planned`` describes exist as planned: created, unchanged, or patched with our metadata
    and ``changes(planned)`` (the JSON patch operations of the fields the plan owns)."""
    wanted = planned_hash(planned)
    live = await read()
    if live is None:
        try:
            await create(stamped(planned, {APPLIED_HASH_ANNOTATION: wanted}))
            return Applied.CREATED
        except Exception as error:
            if not is_conflict(error):
                raise
        live = await (reread or read)()
        if live is None:
            name = planned["metadata"]["name"]
            raise RuntimeError(f"{kind} {name} exists and does not: the API server disagrees")
    check_ours(kind, live, fleet_uid)
    if applied_hash(live) == wanted:
        return Applied.UNCHANGED
    await patch([*metadata_ops(live, planned, wanted), *changes(planned)])
    return Applied.UPDATED
