"""``berth-groups``: list, describe, remove members from, delete, and read the offsets of coordinator groups.

Owns the command line (``main``). Rules:

- ``--coordinator`` defaults to ``BERTH_COORDINATOR_URL``, then ``http://127.0.0.1:9094``. The token comes from
  ``--token-file`` (or ``BERTH_TOKEN_FILE``) or ``BERTH_TOKEN``: not from the command line, where every user of the
  machine reads it (``ps``); ``--token`` still works for old scripts, with a warning. ``--ca-file`` (or
  ``BERTH_CA_FILE``) is the CA an https coordinator is verified against. Options may come before or after the
  subcommand.
- Output goes to stdout: aligned tables by default, ``--output json`` for scripts. Everything the coordinator said
  is shown escaped (``groups_render``): a group id cannot move the cursor, clear the screen or forge a line.
- Any failure — unknown group, a member that was not in the group, 401/403, connection refused — is one line on
  stderr (``berth-groups: error: ...``) and exit status 1 (2 for usage errors, as argparse does). A partial
  result (some members removed, some not members) is still printed before the error.
- A closed stdout (``berth-groups list | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

from berth.coordinator.client import groups_render as render
from berth.coordinator.client.admin import CoordinatorAdmin
from berth.coordinator.client.config import (
    DEFAULT_COORDINATOR_URL,
    ENV_COORDINATOR_URL,
    ENV_TOKEN,
    ENV_TOKEN_FILE,
    read_token_file,
)
from berth.coordinator.client.errors import AuthorizationError, BerthClientError, CoordinatorHttpError, untrusted_text
from berth.coordinator.client.tls import ENV_CA_FILE
from berth.coordinator.client.transport import DEFAULT_MAX_RESPONSE_BYTES
from berth.coordinator.protocol import Error

PROG = "berth-groups"
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a command stopped by a closed pipe
TOKEN_IN_ARGV_WARNING = (
    f"{PROG}: warning: --token shows the token to every user of this machine (ps, /proc); "
    f"use --token-file or {ENV_TOKEN} instead"
)


class CliError(Exception):
    """A failure to report as one line and exit status 1."""


@dataclass(frozen=True)
class Outcome:
    """What a subcommand printed, and the error to report after it (exit 1) if any."""

    text: str
    error: str | None = None


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep Python's exit flush from complaining too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLOSED_PIPE


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.token is not None and args.token_file is not None:
        parser.error("--token and --token-file: give one")
    if args.token is not None:
        print(TOKEN_IN_ARGV_WARNING, file=sys.stderr)
    try:
        outcome = asyncio.run(run(args))
    except AuthorizationError as error:
        return _fail(f"{_explained(error)}{_token_hint(args)}")
    except CoordinatorHttpError as error:
        return _fail(_explained(error))
    except (BerthClientError, CliError) as error:
        return _fail(str(error))
    print(outcome.text, flush=True)
    if outcome.error is not None:
        return _fail(outcome.error)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Inspect and manage groups on a Berth coordinator.")
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
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
    as_json = args.output == "json"
    admin = CoordinatorAdmin(
        url,
        token=_token(args),
        request_timeout_s=args.timeout,
        ca_file=args.ca_file or os.environ.get(ENV_CA_FILE) or None,
        max_response_bytes=args.max_response_bytes,
    )
    async with admin:
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


def _token(args: argparse.Namespace) -> str | None:
    """--token-file, --token, $BERTH_TOKEN_FILE, $BERTH_TOKEN: the first one given."""
    if args.token_file is not None:
        return read_token_file(args.token_file, source="--token-file")
    if args.token is not None:
        return str(args.token)
    if os.environ.get(ENV_TOKEN_FILE):
        return read_token_file(os.environ[ENV_TOKEN_FILE], source=ENV_TOKEN_FILE)
    return os.environ.get(ENV_TOKEN) or None


def _explained(error: CoordinatorHttpError) -> str:
    """The error, and what the coordinator said about it (escaped, cut short: it is the server's text)."""
    return f"{error} (the coordinator said: {error.detail})" if error.detail else str(error)


def _version() -> str:
    try:
        return metadata.version("berth")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


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
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        default=default(None),
        help=f"file holding the bearer token (default: ${ENV_TOKEN_FILE}, else the token in ${ENV_TOKEN})",
    )
    parser.add_argument(
        "--token", default=default(None), help=f"bearer token; visible in ps: prefer --token-file or ${ENV_TOKEN}"
    )
    parser.add_argument(
        "--ca-file",
        metavar="FILE",
        default=default(None),
        help=f"PEM CA bundle to verify an https coordinator with (default: ${ENV_CA_FILE}, else the system's CAs)",
    )
    parser.add_argument("--output", "-o", choices=["table", "json"], default=default("table"), help="output format")
    parser.add_argument("--timeout", type=float, default=default(10.0), help="seconds per request (default 10)")
    parser.add_argument(
        "--max-response-bytes",
        type=_positive,
        metavar="N",
        default=default(DEFAULT_MAX_RESPONSE_BYTES),
        help=f"refuse answers larger than this (default {DEFAULT_MAX_RESPONSE_BYTES})",
    )


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of bytes, got {text!r}")
    return int(text)


def _token_hint(args: argparse.Namespace) -> str:
    if _token_given(args):
        return ""
    return f" (no token given: pass --token-file or set {ENV_TOKEN} or {ENV_TOKEN_FILE})"


def _token_given(args: argparse.Namespace) -> bool:
    given = args.token is not None or args.token_file is not None
    return given or bool(os.environ.get(ENV_TOKEN_FILE) or os.environ.get(ENV_TOKEN))


def _fail(message: str) -> int:
    print(f"{PROG}: error: {untrusted_text(message, limit=2000)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
