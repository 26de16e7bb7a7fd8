"""Publishing advice.json to the operator's ConfigMap: patch, else create; refusals named; nothing oversized sent.

The Kubernetes API cannot run here: a recording stand-in answers as the API server would (404 for a missing
ConfigMap, 403 without the right), raising the client library's own ``ApiException``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from berth.pipeline.main import main
from berth.pipeline.publish import (
    ADVICE_KEY,
    CONFIGMAP_MAX_BYTES,
    PublishError,
    own_namespace,
    publish_advice,
)

ADVICE = '{"version": 1, "groups": {}}\n'


class ConfigMaps:
    """What the API server holds for one namespace, and every call made."""

    def __init__(self, existing: dict[str, dict[str, str]] | None = None, refuse: int | None = None) -> None:
        self.data = dict(existing or {})
        self.refuse = refuse
        self.calls: list[tuple[str, str]] = []

    def patch_namespaced_config_map(self, name: str, namespace: str, body: Any) -> Any:
        self.calls.append(("patch", name))
        if self.refuse:
            raise ApiException(status=self.refuse, reason="Forbidden")
        if name not in self.data:
            raise ApiException(status=404, reason="Not Found")
        self.data[name].update(body["data"])

    def create_namespaced_config_map(self, namespace: str, body: Any) -> Any:
        self.calls.append(("create", body["metadata"]["name"]))
        self.data[body["metadata"]["name"]] = dict(body["data"])


def test_the_first_run_creates_the_configmap_and_later_runs_patch_its_key() -> None:
    api = ConfigMaps()

    assert publish_advice(api, "berth", "berth-advice", ADVICE) == "created"
    assert publish_advice(api, "berth", "berth-advice", ADVICE.replace("{}", '{"orders": {}}')) == "updated"

    assert api.calls == [("patch", "berth-advice"), ("create", "berth-advice"), ("patch", "berth-advice")]
    assert api.data == {"berth-advice": {ADVICE_KEY: '{"version": 1, "groups": {"orders": {}}}\n'}}


def test_a_refusal_is_one_line_naming_the_configmap_and_nothing_is_created() -> None:
    api = ConfigMaps(refuse=403)

    with pytest.raises(PublishError, match=r"^ConfigMap berth/berth-advice: HTTP 403 Forbidden$"):
        publish_advice(api, "berth", "berth-advice", ADVICE)
    assert api.calls == [("patch", "berth-advice")]


def test_advice_over_a_configmaps_size_is_refused_before_any_call() -> None:
    api = ConfigMaps()
    oversized = "x" * (CONFIGMAP_MAX_BYTES + 1)

    with pytest.raises(PublishError, match="over a ConfigMap's 1 MiB"):
        publish_advice(api, "berth", "berth-advice", oversized)
    assert api.calls == []


def test_the_namespace_is_the_flag_else_pod_namespace_else_the_service_account_file(tmp_path: Path) -> None:
    account_file = tmp_path / "namespace"
    account_file.write_text("from-file\n")

    assert own_namespace("flag", {"POD_NAMESPACE": "env"}, account_file) == "flag"
    assert own_namespace(None, {"POD_NAMESPACE": "env"}, account_file) == "env"
    assert own_namespace(None, {}, account_file) == "from-file"
    with pytest.raises(PublishError, match="namespace is unknown"):
        own_namespace(None, {}, tmp_path / "missing")


def test_without_credentials_the_cli_fails_in_one_line_before_reading_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    out = tmp_path / "out"

    code = main(["--journal", str(tmp_path), "--out", str(out), "--publish-configmap", "advice", "--namespace", "b"])

    assert code == 1
    error = capsys.readouterr().err
    assert error.startswith("berth-analyze: error: --publish-configmap: no Kubernetes credentials")
    assert error.count("\n") == 1
    assert not out.exists()
