"""``berth-groups``: list, describe, remove members from, delete, and read the offsets of coordinator groups.

Owns the command line (``main``). Rules:

- ``--coordinator`` defaults to ``BERTH_COORDINATOR_URL``, then ``http://127.0.0.1:9094``; ``--token`` to
  ``BERTH_TOKEN``. Options may come before or after the subcommand.
- Output goes to stdout: aligned tables by default, ``--output json`` for scripts.
- Any failure — unknown group, a member that was not in the group, 401/403, connection refused — is one line on
  stderr (``berth-groups: error: ...``) and exit status 1 (2 for usage errors, as argparse does). A partial
  result (some members removed, some not members) is still printed before the error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from berth.coordinator.client import groups_render as render
from berth.coordinator.client.admin import CoordinatorAdmin
from berth.coordinator.client.config import DEFAULT_COORDINATOR_URL, ENV_COORDINATOR_URL, ENV_TOKEN
from berth.coordinator.client.errors import AuthorizationError, BerthClientError
from berth.coordinator.protocol import Error

PROG = "berth-groups"


class CliError(Exception):
    """A failure to report as one line and exit status 1."""


@dataclass(frozen=True)
class Outcome:
    """What a subcommand printed, and the error to report after it (exit 1) if any."""

    text: str
    error: str | None = None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        outcome = asyncio.run(run(args))
    except AuthorizationError as error:
        return _fail(f"{error}{_token_hint(args)}")
    except (BerthClientError, CliError) as error:
        return _fail(str(error))
    print(outcome.text)
    if outcome.error is not None:
        return _fail(outcome.error)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Inspect and manage groups on a Berth coordinator.")
    _add_common_options(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    listing = _subcommand(commands, "list", "list the groups")
    listing.add_argument("--state", action="append", default=[], help="only groups in this state (repeatable)")

    describe = _subcommand(commands, "describe", "show a group's state, generation, leader and members")
    describe.add_argument("group")

    remove = _subcommand(commands, "remove-members", "remove static members by group.instance.id (one batch leave)")
    remove.add_argument("group")
    remove.add_argument(
        "--instance-ids", required=True, help="comma-separated group.instance.ids, e.g. orders-3,orders-4"
    )
    remove.add_argument("--reason", default="removed with berth-groups", help="the leave reason (journaled)")

    delete = _subcommand(commands, "delete", "delete an empty group and its offsets")
    delete.add_argument("group")

    offsets = _subcommand(commands, "offsets", "show a group's committed offsets")
    offsets.add_argument("group")
    offsets.add_argument("--topic", action="append", default=None, help="only this topic (repeatable)")
    return parser


async def run(args: argparse.Namespace) -> Outcome:
    url = args.coordinator or os.environ.get(ENV_COORDINATOR_URL) or DEFAULT_COORDINATOR_URL
    token = args.token if args.token is not None else os.environ.get(ENV_TOKEN) or None
    as_json = args.output == "json"
    async with CoordinatorAdmin(url, token=token, request_timeout_s=args.timeout) as admin:
        if args.command == "list":
            groups = await admin.list_groups(args.state)
            return Outcome(render.to_json(render.listing_json(groups)) if as_json else render.listing_table(groups))
        if args.command == "describe":
            group = await admin.describe_group(args.group)
            if not group.exists:
                raise CliError(f"group {args.group!r} does not exist")
            return Outcome(
                render.to_json(render.description_json(group)) if as_json else render.description_table(group)
            )
        if args.command == "remove-members":
            return await _remove_members(admin, args.group, _instance_ids(args.instance_ids), args.reason, as_json)
        if args.command == "delete":
            return await _delete(admin, args.group, as_json)
        if args.command == "offsets":
            return await _offsets(admin, args.group, args.topic, as_json)
    raise CliError(f"unknown command {args.command!r}")  # argparse rejects these first; kept for mypy


async def _remove_members(
    admin: CoordinatorAdmin, group_id: str, instance_ids: list[str], reason: str, as_json: bool
) -> Outcome:
    removals = await admin.leave_instances(group_id, instance_ids, reason=reason)
    text = render.to_json(render.removals_json(group_id, removals)) if as_json else render.removals_table(removals)
    not_members = [r.group_instance_id or r.member_id for r in removals if r.error is Error.UNKNOWN_MEMBER_ID]
    other = [
        f"{r.group_instance_id}: {r.error.name}"
        for r in removals
        if r.error not in (Error.NONE, Error.UNKNOWN_MEMBER_ID)
    ]
    problems = []
    if not_members:
        problems.append(f"not members of group {group_id!r} (UNKNOWN_MEMBER_ID): {', '.join(not_members)}")
    if other:
        problems.append(f"could not remove from group {group_id!r}: {', '.join(other)}")
    return Outcome(text, "; ".join(problems) or None)


async def _delete(admin: CoordinatorAdmin, group_id: str, as_json: bool) -> Outcome:
    outcome = await admin.delete_group(group_id)
    if outcome is Error.GROUP_ID_NOT_FOUND:
        raise CliError(f"group {group_id!r} does not exist (GROUP_ID_NOT_FOUND)")
    if outcome is Error.NON_EMPTY_GROUP:
        raise CliError(f"group {group_id!r} still has members (NON_EMPTY_GROUP): remove them first (remove-members)")
    if as_json:
        return Outcome(render.to_json({"group_id": group_id, "deleted": True, "error": outcome.name}))
    return Outcome(f"deleted group {group_id}")


async def _offsets(admin: CoordinatorAdmin, group_id: str, topics: list[str] | None, as_json: bool) -> Outcome:
    offsets = await admin.fetch_offsets(group_id, topics)
    # An unknown group answers "no offsets" (docs/api.md §11); tell that apart from an existing group without any.
    if not offsets and not (await admin.describe_group(group_id)).exists:
        raise CliError(f"group {group_id!r} does not exist")
    return Outcome(
        render.to_json(render.offsets_json(group_id, offsets)) if as_json else render.offsets_table(group_id, offsets)
    )


def _instance_ids(text: str) -> list[str]:
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise CliError("--instance-ids names no instance id (expected e.g. orders-3,orders-4)")
    return ids


def _subcommand(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str
) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=summary, description=summary)
    _add_common_options(parser, suppress=True)
    return parser


def _add_common_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    # On subcommands the defaults are SUPPRESS, so an option given before the subcommand is not overwritten.
    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--coordinator",
        metavar="URL",
        default=default(None),
        help=f"coordinator URL (default: ${ENV_COORDINATOR_URL} or {DEFAULT_COORDINATOR_URL})",
    )
    parser.add_argument("--token", default=default(None), help=f"bearer token (default: ${ENV_TOKEN})")
    parser.add_argument("--output", "-o", choices=["table", "json"], default=default("table"), help="output format")
    parser.add_argument("--timeout", type=float, default=default(10.0), help="seconds per request (default 10)")


def _token_hint(args: argparse.Namespace) -> str:
    if args.token is None and not os.environ.get(ENV_TOKEN):
        return f" (no token given: pass --token or set {ENV_TOKEN})"
    return ""


def _fail(message: str) -> int:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
