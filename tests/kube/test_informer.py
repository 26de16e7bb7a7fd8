"""The watch cache's informer against a real kube-apiserver: what happens when a watch ends, and when it expires.

The operator's informer (``kube.informer``) lists, then watches from the list's resourceVersion. These tests drive
one in-process, as the cluster's admin, on ConfigMaps carrying the labels the operator selects by:

- a watch the server ends (its ``timeoutSeconds``, shortened here) is resumed from the last resourceVersion, without
  listing again, and misses nothing;
- a watch resumed from a resourceVersion the server no longer has (after a long absence: etcd's history compacted
  past it, and the real server answers 410 Gone; ConfigMaps are not in this server's watch cache, so etcd answers
  their watches) lists again, and what was deleted meanwhile is told as deleted;
- an official-client call sent on the same session (``ApiSession.call``, how the operator writes) goes out with
  the content type the client itself would send, and the server accepts it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from support.kube import Kube
from support.kube_cluster import ControlPlane

from berth.operator.adapters.kube import informer as informer_module
from berth.operator.adapters.kube.api_session import ApiSession
from berth.operator.adapters.kube.identity import load_identity
from berth.operator.adapters.kube.informer import Informer
from berth.operator.adapters.kube.watch_cache import CONFIG_MAPS, SELECTOR, project_owned

pytestmark = pytest.mark.kube

Obj = dict[str, Any]
LABELS = {"app.kubernetes.io/name": "berth-consumer", "berth.dev/fleet": "orders"}


def config_map(name: str, labels: dict[str, str] | None = None) -> Obj:
    metadata = {"name": name, "labels": LABELS if labels is None else labels}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": name}}


class Seen:
    def __init__(self) -> None:
        self.changes: list[tuple[str | None, str | None]] = []
        self.lists: list[str] = []

    def changed(self, old: Obj | None, new: Obj | None) -> None:
        self.changes.append((name_of(old), name_of(new)))


def name_of(obj: Obj | None) -> str | None:
    return None if obj is None else str(obj["metadata"]["name"])


async def until(predicate: Any, what: str, timeout_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.fixture
async def api(kube: Kube, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ApiSession]:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    session = ApiSession(load_identity(), user_agent="berth-informer-test", gate=None)
    yield session
    await session.close()


async def test_a_watch_the_server_ends_is_resumed_where_it_was_without_listing_again(
    kube: Kube, namespace: str, api: ApiSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(informer_module, "WATCH_TIMEOUT_S", (1, 1))  # the server ends each watch after 1 s
    seen = Seen()
    informer = Informer(
        api, CONFIG_MAPS, namespace=namespace, selector=SELECTOR, project=project_owned,
        on_change=seen.changed, on_relist=seen.lists.append,
    )  # fmt: skip
    kube.apply(config_map("a"), config_map("someone-elses", labels={"team": "a"}), namespace=namespace)
    informer.start()
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        assert set(informer.objects) == {(namespace, "a")}  # filtered by the server: only what carries the labels
        for name in ("b", "c"):
            await asyncio.sleep(1.5)  # the watch the change would have gone to has ended by now
            kube.apply(config_map(name), namespace=namespace)
            await until(lambda n=name: (namespace, n) in informer.objects, f"{name} seen")
        kube.kubectl("delete", "configmap", "a", "-n", namespace)
        await until(lambda: (namespace, "a") not in informer.objects, "a's deletion seen")
    finally:
        await informer.stop()
    assert seen.lists == ["start"]
    assert seen.changes == [(None, "a"), (None, "b"), (None, "c"), ("a", None)]


async def test_a_watch_resumed_after_the_servers_window_lists_again_and_tells_what_was_deleted(
    kube: Kube, control_plane: ControlPlane, namespace: str, api: ApiSession
) -> None:
    seen = Seen()
    informer = Informer(
        api, CONFIG_MAPS, namespace=namespace, selector=SELECTOR, project=project_owned,
        on_change=seen.changed, on_relist=seen.lists.append,
    )  # fmt: skip
    kube.apply(config_map("a"), config_map("b"), namespace=namespace)
    informer.start()
    await asyncio.wait_for(informer.synced.wait(), 30)
    await informer.stop()
    # Away for long: meanwhile a is deleted and c made, and the history the watch would resume from is compacted
    # away (the API server does it every few minutes).
    kube.kubectl("delete", "configmap", "a", "-n", namespace)
    kube.apply(config_map("c"), namespace=namespace)
    assert int(informer.resource_version or 0) < control_plane.compact()
    informer.start()
    try:
        await until(lambda: seen.lists == ["start", "expired"], "a second list after the watch expired")
        assert set(informer.objects) == {(namespace, "b"), (namespace, "c")}
    finally:
        await informer.stop()
    assert seen.changes == [(None, "a"), (None, "b"), ("a", None), (None, "c")]


async def test_official_client_calls_sent_on_the_session_create_and_patch_as_the_client_would(
    kube: Kube, namespace: str, api: ApiSession
) -> None:
    """``ApiSession.call`` sends a create (no content type declared: JSON), a built-in object's patch with an object
    body (declared JSON Patch: a strategic merge, as the client's REST layer sends it) and a custom object's merge
    patch; the API server accepts each (it answers 415 to a body aiohttp would label ``text/plain``)."""
    import kubernetes

    client = kubernetes.client.ApiClient()
    core = kubernetes.client.CoreV1Api(client)
    created = await api.call(core.create_namespaced_config_map, namespace, config_map("called"))
    assert created["data"] == {"k": "called"}
    patched = await api.call(core.patch_namespaced_config_map, "called", namespace, {"data": {"more": "1"}})
    assert patched["data"] == {"k": "called", "more": "1"}  # merged, not replaced
    with pytest.raises(kubernetes.client.ApiException) as refused:
        await api.call(core.create_namespaced_config_map, namespace, config_map("called"))
    assert refused.value.status == 409
