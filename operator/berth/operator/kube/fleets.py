"""Reading a ConsumerFleet fresh and writing its status through the ``status`` subresource, at once.

Rules: status is written with a JSON merge patch on ``/status`` (``null`` removes a key), never through Kopf's
deferred ``patch``: the scaling planner's departing ids must be durable before the StatefulSet shrinks. Each write
returns the object as stored, so the caller always plans from what the API server holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kubernetes

from berth.operator.kube.calls import MERGE_PATCH, call_json, is_not_found
from berth.operator.names import GROUP, PLURAL, VERSION


class FleetApi:
    def __init__(self, api_client: kubernetes.client.ApiClient) -> None:
        self.custom = kubernetes.client.CustomObjectsApi(api_client)

    async def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The fleet as stored now; None when it is gone."""
        try:
            return await call_json(self.custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name)
        except Exception as error:
            if is_not_found(error):
                return None
            raise

    async def patch_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into ``.status``; returns the whole object after the write."""
        return await call_json(
            self.custom.patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            {"status": dict(patch)},
            _content_type=MERGE_PATCH,
        )
