"""Reading one key of one ConfigMap by name (the analytics job's ``advice.json``).

Rules: only ``get`` by name, never list or watch (the chart grants exactly that, for exactly that ConfigMap); a
missing ConfigMap or key is ``None`` (the analytics job has not run yet), anything else raises.
"""

from __future__ import annotations

import kubernetes

from berth.operator.kube.calls import port_errors, read_or_none


class ConfigMapReader:
    def __init__(self, api_client: kubernetes.client.ApiClient) -> None:
        self.core = kubernetes.client.CoreV1Api(api_client)

    async def read_key(self, namespace: str, name: str, key: str) -> str | None:
        with port_errors():
            config_map = await read_or_none(self.core.read_namespaced_config_map, name, namespace)
        if config_map is None:
            return None
        value = (config_map.get("data") or {}).get(key)
        return value if isinstance(value, str) else None
