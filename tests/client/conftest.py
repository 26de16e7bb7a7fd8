"""Fixtures for the member library and admin client tests: members that are always closed after the test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from member_harness import MemberFactory, member_config
from support.coordinator import CoordinatorProcess

from berth.coordinator.client import GroupMember, MemberClosedError, MemberFatalError


@pytest.fixture
async def new_member(coordinator: CoordinatorProcess) -> AsyncIterator[MemberFactory]:
    """``new_member(group_id, instance_id=None, **config_overrides_or_member_kwargs)``: a member, not yet started.

    Config fields (``heartbeat_interval_ms``...) go to ``member_config``; ``on_assigned``, ``on_revoked``,
    ``assignors`` and ``backoff`` to ``GroupMember``. Every member is closed when the test ends.
    """
    created: list[GroupMember] = []
    member_kwargs = {"on_assigned", "on_revoked", "assignors", "backoff"}

    def factory(group_id: str, instance_id: str | None = None, **options: Any) -> GroupMember:
        kwargs = {key: options.pop(key) for key in list(options) if key in member_kwargs}
        member = GroupMember(member_config(coordinator.url, group_id, instance_id, **options), **kwargs)
        created.append(member)
        return member

    yield factory
    for member in created:
        with contextlib.suppress(MemberClosedError, MemberFatalError):
            await member.close()
