"""``make test``'s two workers (pytest-xdist, ``-n 2 --dist loadgroup``): which tests run together on one worker.

A test that uses one of the session's shared servers (the control plane, the real node, Spark, the Kafka broker, the
etcd cluster; ``SHARED_SERVERS``: by the fixtures that start them, the node's by its mark) runs on the same worker
as every other test of that server, so each server starts once per session, as without workers; every other test
stays with the rest of its module (module-scoped fixtures start once). The shared servers' groups are handed out
first, in ``SHARED_SERVERS``' order (the control plane's is the longest, the node's next), so that neither is the
run's tail.

How: xdist's own ``loadgroup`` reads ``xdist_group`` marks through the test ids, which pytest 9.2's structured ids
no longer let it rewrite (pytest-xdist issue 1386: the marks are silently ignored). Here each worker writes, once
its collection is done and before it tells the controller so, every test's group to a file of the run
(``groups_file``: the run's id names it), and the controller's scheduler (``GroupScheduling``, from the
``pytest_xdist_make_scheduler`` hook) reads it when it first splits the tests into groups, which it does only
after every worker's collection is in. Without workers nothing of this runs.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

#: The shared servers' groups, in the order they are handed out, by the fixtures that start each. The node's is
#: every test marked ``node`` instead, the tier's own mark (``support.node_fixtures`` keys its set-up on it too).
SHARED_SERVERS = {
    "control-plane": ("control_plane", "kube"),
    "node": (),
    "spark": ("spark",),
    "kafka": ("kafka_bootstrap",),
    "etcd": ("etcd_cluster",),
}
#: Each collected test's group, kept by the worker between sorting its tests and telling the controller.
_GROUPS = pytest.StashKey[dict[str, str]]()


def worker_group(item: pytest.Item) -> str:
    """The group ``item`` runs in: its shared server's (the node tier whole: its order matters), else its module."""
    if item.get_closest_marker("node"):
        return "node"
    names = set(getattr(item, "fixturenames", ()))
    for group, fixtures in SHARED_SERVERS.items():
        if names.intersection(fixtures):
            return group
    return item.nodeid.split("::")[0]


def groups_file(testrunuid: str) -> Path:
    return Path(tempfile.gettempdir()) / f"berth-worker-groups-{testrunuid}.json"


def _worker_input(config: pytest.Config) -> dict[str, Any] | None:
    """What xdist gave this process when it is a worker of ``--dist loadgroup`` (None otherwise)."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    return workerinput if workerinput is not None and getattr(config.option, "loadgroup", False) else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: the shared servers' tests first, in ``SHARED_SERVERS``' order (``--no-loadscope-reorder`` keeps
    it; the sort is stable, and so is ``support.node_fixtures``' that moves some node tests after the others)."""
    if _worker_input(config) is None:
        return
    groups = config.stash[_GROUPS] = {item.nodeid: worker_group(item) for item in items}
    first = list(SHARED_SERVERS)
    items.sort(key=lambda item: first.index(g) if (g := groups[item.nodeid]) in first else len(first))


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which tells the controller the collection is done
def pytest_collection_finish(session: pytest.Session) -> None:
    workerinput = _worker_input(session.config)
    if workerinput is None:
        return
    path = groups_file(workerinput["testrunuid"])
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(session.config.stash[_GROUPS]))
    partial.replace(path)  # whole: both workers write the same


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own scheduler; a hook of xdist's
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class GroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
        """xdist's loadgroup, with each test's group as its worker wrote it (``groups_file``)."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                path = groups_file(self.nodes[0].workerinput["testrunuid"])
                self.groups = json.loads(path.read_text())
                path.unlink(missing_ok=True)
            return self.groups.get(nodeid) or str(super()._split_scope(nodeid))

    return GroupScheduling(config, log)
