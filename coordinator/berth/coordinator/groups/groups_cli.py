"""``berth-groups``: list, describe, remove members from, delete, read and reset the offsets of coordinator groups.

The commands follow ``kafka-consumer-groups.sh``'s habits (docs/member-library.md has the side-by-side table):
``describe GROUP... | --all-groups`` with ``--state``, ``--members [--verbose]`` and ``--offsets`` views,
``reset-offsets`` with a dry run by default (``groups_reset`` plans it), ``remove-members`` by instance id, by member
id or ``--all``.

Owns the command line (``main``). Rules:

- ``--coordinator`` defaults to ``BERTH_COORDINATOR_URL``, then ``http://127.0.0.1:9094``. The token comes from
  ``--token-file`` (or ``BERTH_TOKEN_FILE``) or ``BERTH_TOKEN``: not from the command line, where every user of the
  machine reads it (``ps``); ``--token`` still works for old scripts, with a warning. ``--ca-file`` (or
  ``BERTH_CA_FILE``) is the CA an https coordinator is verified against. Options may come before or after the
  subcommand.
- Output goes to stdout: aligned tables by default, ``--output json`` for scripts. Everything the coordinator said
  is shown escaped (``groups_render``): a group id cannot move the cursor, clear the screen or forge a line.
- Any failure — unknown group, a member that was not in the group, a reset refused, 401/403, connection refused —
  is one line on stderr (``berth-groups: error: ...``) and an exit status that says its class (``groups_exit``: 3
  not found, 4 refused by the group's state, 5 not allowed, 6 unavailable, 7 refused; 2 for usage errors, as
  argparse does; 1 when part of the work was done). A partial result (some members removed, some not members; the
  groups of a describe that exist) is still printed before the error. Notes that are not errors (a dry run changed
  nothing) go to stderr, so stdout stays the result.
- A closed stdout (``berth-groups list | head``) ends the command quietly (exit status 141).
- Every network call is one attempt bounded by ``--timeout`` (default :data:`DEFAULT_TIMEOUT_S`; kafka-python's
  bootstrap too): a coordinator or cluster that does not answer (a blackholed address, a listener that accepts and
  says nothing) is exit 6 after at most that long, a refused connection at once; never a hang, and no retry to
  wait out (run the command again).
- ``--bootstrap-server HOST:PORT`` reads a Kafka cluster's groups instead (``list`` and ``describe`` with the
  LAG column, as ``kafka-consumer-groups.sh``; ``groups_kafka``); the commands that change a group stay Berth's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

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
from berth.coordinator.groups import groups_kafka
from berth.coordinator.groups import groups_render as render
from berth.coordinator.groups.groups_exit import ExitCode, exit_code_of
from berth.coordinator.groups.groups_reset import (
    LATEST_REFUSAL,
    MAX_OFFSET,
    ResetError,
    ResetMethod,
    parse_topic,
    plan_reset,
    selected_partitions,
)
from berth.coordinator.protocol import DescribeResponse, Error

PROG = "berth-groups"
DESCRIBE_CONCURRENCY = 8  # groups described at once by describe --all-groups
#: --timeout's default: an unreachable coordinator or cluster is exit 6 within 10 s of starting, the process's own
#: start included (about a second; more on a busy machine).
DEFAULT_TIMEOUT_S = 6.0
MAX_TIMEOUT_S = 3600.0
DRY_RUN_NOTE = f"{PROG}: dry run, nothing changed: add --execute to commit these offsets"
TOKEN_IN_ARGV_WARNING = (
    f"{PROG}: warning: --token shows the token to every user of this machine (ps, /proc); "
    f"use --token-file or {ENV_TOKEN} instead"
)


class CliError(Exception):
    """A failure to report as one line, with the exit status of its class."""

    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Outcome:
    """What a subcommand printed, a note for stderr, and the error to report after it (with its exit status)."""

    text: str
    error: str | None = None
    note: str | None = None
    code: ExitCode = ExitCode.PARTIAL


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep Python's exit flush from complaining too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.CLOSED_PIPE


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.token is not None and args.token_file is not None:
        parser.error("--token and --token-file: give one")
    _check_usage(parser, args)
    if args.token is not None:
        print(TOKEN_IN_ARGV_WARNING, file=sys.stderr)
    try:
        outcome = asyncio.run(run_kafka(args) if args.bootstrap_server else run(args))
    except groups_kafka.KafkaCliError as error:
        return _fail(str(error), error.code)
    except AuthorizationError as error:
        return _fail(f"{_explained(error)}{_token_hint(args)}", exit_code_of(error))
    except CoordinatorHttpError as error:
        return _fail(_explained(error), exit_code_of(error))
    except BerthClientError as error:
        return _fail(str(error), exit_code_of(error))
    except CliError as error:
        return _fail(str(error), error.code)
    if outcome.text:
        print(outcome.text, flush=True)
    if outcome.note is not None:
        print(outcome.note, file=sys.stderr)
    if outcome.error is not None:
        return _fail(outcome.error, outcome.code)
    return ExitCode.OK


def _check_usage(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What argparse cannot say by itself; a usage error (exit 2)."""
    if args.command == "describe" and args.all_groups == bool(args.groups or args.group):
        parser.error("describe: name groups (GROUP... or --group G) or give --all-groups, not both")
    if args.bootstrap_server and args.command not in ("list", "describe"):
        parser.error(f"{args.command}: with --bootstrap-server only list and describe (reading a Kafka cluster)")
    if args.command_config and not args.bootstrap_server:
        parser.error("--command-config is for a Kafka cluster: give --bootstrap-server too")
    if args.command == "remove-members":
        named = args.instance_id or args.member_id or args.instance_ids is not None
        if args.all == bool(named):
            parser.error("remove-members: give --instance-id and/or --member-id, or --all")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Inspect and manage groups on a Berth coordinator.")
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    _add_common_options(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    listing = _subcommand(commands, "list", "list the groups")
    listing.add_argument("--state", action="append", default=[], help="only groups in this state (repeatable)")

    describe = _subcommand(
        commands, "describe", "show groups: state, owner, expected members, members and their partitions, offsets"
    )
    describe.add_argument("groups", nargs="*", metavar="GROUP", help="the groups to describe")
    describe.add_argument("--group", action="append", default=[], help="a group to describe (repeatable; Kafka's form)")
    describe.add_argument("--all-groups", action="store_true", help="describe every group")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--state", action="store_true", help="one line per group: state, members, expected, owner")
    view.add_argument("--members", action="store_true", help="one line per member, with its partition count")
    view.add_argument("--offsets", action="store_true", help="committed offsets and who holds each partition")
    describe.add_argument("--verbose", action="store_true", help="with --members: each member's partitions too")

    remove = _subcommand(
        commands, "remove-members", "remove members by instance id, member id or all of them (one batch leave)"
    )
    remove.add_argument("group")
    remove.add_argument(
        "--instance-id", nargs="+", action="extend", default=[], metavar="ID", help="group.instance.ids to remove"
    )
    remove.add_argument("--instance-ids", metavar="A,B", help="comma-separated group.instance.ids (older form)")
    remove.add_argument(
        "--member-id", nargs="+", action="extend", default=[], metavar="ID", help="member ids (dynamic members too)"
    )
    remove.add_argument(
        "--all", action="store_true", help="every member: static ones by instance id, dynamic ones by member id"
    )
    remove.add_argument(
        "--reason", default="removed with berth-groups", help="the leave reason, journaled (default: %(default)s)"
    )

    delete = _subcommand(commands, "delete", "delete an empty group and its offsets")
    delete.add_argument("group")

    offsets = _subcommand(commands, "offsets", "show a group's committed offsets")
    offsets.add_argument("group")
    offsets.add_argument("--topic", action="append", default=None, help="only this topic (repeatable)")

    reset = _subcommand(
        commands, "reset-offsets", "reset an Empty group's committed offsets (a dry run unless --execute)"
    )
    reset.add_argument("group")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,...]",
        help="a topic's committed partitions, or the partitions named (orders:0,1 or orders:0-3); repeatable",
    )
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    method = reset.add_mutually_exclusive_group(required=True)
    method.add_argument("--to-earliest", action="store_true", help="offset 0 (the coordinator knows no log start)")
    method.add_argument(
        "--to-latest", action="store_true", help="refused: the coordinator does not know the logs' ends"
    )
    method.add_argument("--to-offset", type=_offset, metavar="N", help="offset N")
    method.add_argument("--shift-by", type=_shift, metavar="N", help="the committed offset plus N, at least 0")
    method.add_argument("--to-current", action="store_true", help="the committed offset (re-commit it)")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets, change nothing (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    return parser


async def run_kafka(args: argparse.Namespace) -> Outcome:
    text, error = await groups_kafka.run(args, args.output == "json")
    return Outcome(text, error)


async def run(args: argparse.Namespace) -> Outcome:
    url = args.coordinator or os.environ.get(ENV_COORDINATOR_URL) or DEFAULT_COORDINATOR_URL
    as_json = args.output == "json"
    admin = CoordinatorAdmin(
        url,
        token=_token(args),
        request_timeout_s=args.timeout,
        attempts=1,  # one attempt per call, within --timeout: a command never waits for a coordinator longer
        ca_file=args.ca_file or os.environ.get(ENV_CA_FILE) or None,
        max_response_bytes=args.max_response_bytes,
    )
    async with admin:
        if args.command == "list":
            groups = await admin.list_groups(args.state)
            return Outcome(render.to_json(render.listing_json(groups)) if as_json else render.listing_table(groups))
        if args.command == "describe":
            return await _describe(admin, args, as_json)
        if args.command == "remove-members":
            return await _remove_members(admin, args, as_json)
        if args.command == "delete":
            return await _delete(admin, args.group, as_json)
        if args.command == "offsets":
            return await _offsets(admin, args.group, args.topic, as_json)
        if args.command == "reset-offsets":
            return await _reset_offsets(admin, args, as_json)
    raise CliError(f"unknown command {args.command!r}", ExitCode.USAGE)  # argparse rejects these first; for mypy


# ------------------------------------------------------------------------------------------------------ describe


async def _describe(admin: CoordinatorAdmin, args: argparse.Namespace, as_json: bool) -> Outcome:
    named = list(dict.fromkeys([*args.groups, *args.group]))
    names = sorted(g.group_id for g in await admin.list_groups()) if args.all_groups else named
    with_expected = as_json or not (args.members or args.offsets)
    with_offsets = as_json or args.offsets
    limit = asyncio.Semaphore(DESCRIBE_CONCURRENCY)

    async def report(name: str) -> render.GroupReport | None:
        async with limit:
            return await _report(admin, name, with_expected=with_expected, with_offsets=with_offsets)

    found = await asyncio.gather(*(report(name) for name in names))
    reports = [r for r in found if r is not None]
    # A group listed by --all-groups may be gone by the time it is described: that is not an error.
    missing = [] if args.all_groups else [name for name, r in zip(names, found, strict=True) if r is None]
    error = f"group {missing[0]!r} does not exist" if len(missing) == 1 else None
    if len(missing) > 1:
        error = f"groups {', '.join(repr(m) for m in missing)} do not exist"
    if not reports and not args.all_groups:
        return Outcome("", error, code=ExitCode.NOT_FOUND)
    if not reports:
        return Outcome(render.to_json(render.descriptions_json([])) if as_json else "no groups")
    if as_json:
        single = not args.all_groups and len(named) == 1
        document = render.description_json(reports[0]) if single else render.descriptions_json(reports)
        return Outcome(render.to_json(document), error, code=ExitCode.NOT_FOUND)
    if args.state:
        text = render.state_table(reports)
    elif args.members:
        text = render.members_table(reports, verbose=args.verbose)
    elif args.offsets:
        text = render.offsets_view_table(reports)
    else:
        text = "\n\n".join(render.description_table(r) for r in reports)
    return Outcome(text, error, code=ExitCode.NOT_FOUND)


async def _report(
    admin: CoordinatorAdmin, group_id: str, *, with_expected: bool, with_offsets: bool
) -> render.GroupReport | None:
    """One group's description, expected members and offsets as asked; None when it does not exist."""
    description = await admin.describe_group(group_id)
    if not description.exists:
        return None
    expected: tuple[str, ...] | None = None
    if with_expected:
        try:
            expected = await admin.get_expected_members(group_id)
        except AuthorizationError:
            expected = None  # a group token may describe its group, but expected members need an admin token
    offsets = await admin.fetch_offsets(group_id) if with_offsets else {}
    return render.GroupReport(description, expected, offsets)


# ------------------------------------------------------------------------------------------------ remove-members


async def _remove_members(admin: CoordinatorAdmin, args: argparse.Namespace, as_json: bool) -> Outcome:
    group_id = args.group
    instance_ids = [*args.instance_id, *(_instance_ids(args.instance_ids) if args.instance_ids is not None else [])]
    member_ids = list(args.member_id)
    if args.all:
        group = await admin.describe_group(group_id)
        if not group.exists:
            raise CliError(f"group {group_id!r} does not exist", ExitCode.NOT_FOUND)
        # As Kafka's admin client removes "all members" (KIP-571): static members by instance id, others by id.
        targets = [
            ("", m.group_instance_id) if m.group_instance_id is not None else (m.member_id, None) for m in group.members
        ]
        if not targets:
            text = (
                render.to_json(render.removals_json(group_id, ()))
                if as_json
                else f"group {render.shown(group_id)} has no members"
            )
            return Outcome(text)
    else:
        targets = [*(("", i) for i in dict.fromkeys(instance_ids)), *((m, None) for m in dict.fromkeys(member_ids))]
    removals = await admin.leave_members(group_id, targets, reason=args.reason)
    text = render.to_json(render.removals_json(group_id, removals)) if as_json else render.removals_table(removals)
    not_members = [r.group_instance_id or r.member_id for r in removals if r.error is Error.UNKNOWN_MEMBER_ID]
    other = [
        f"{r.group_instance_id or r.member_id}: {r.error.name}"
        for r in removals
        if r.error not in (Error.NONE, Error.UNKNOWN_MEMBER_ID)
    ]
    problems = []
    if not_members:
        problems.append(f"not members of group {group_id!r} (UNKNOWN_MEMBER_ID): {', '.join(not_members)}")
    if other:
        problems.append(f"could not remove from group {group_id!r}: {', '.join(other)}")
    # Ids that were not members are "not found"; a removal that failed otherwise leaves the command half done.
    return Outcome(text, "; ".join(problems) or None, code=ExitCode.PARTIAL if other else ExitCode.NOT_FOUND)


# ------------------------------------------------------------------------------------------- delete and offsets


async def _delete(admin: CoordinatorAdmin, group_id: str, as_json: bool) -> Outcome:
    outcome = await admin.delete_group(group_id)
    if outcome is Error.GROUP_ID_NOT_FOUND:
        raise CliError(f"group {group_id!r} does not exist (GROUP_ID_NOT_FOUND)", ExitCode.NOT_FOUND)
    if outcome is Error.NON_EMPTY_GROUP:
        raise CliError(
            f"group {group_id!r} still has members (NON_EMPTY_GROUP): remove them first (remove-members)",
            ExitCode.REFUSED_BY_STATE,
        )
    if as_json:
        return Outcome(render.to_json({"group_id": group_id, "deleted": True, "error": outcome.name}))
    return Outcome(f"deleted group {group_id}")


async def _offsets(admin: CoordinatorAdmin, group_id: str, topics: list[str] | None, as_json: bool) -> Outcome:
    offsets = await admin.fetch_offsets(group_id, topics)
    # An unknown group answers "no offsets" (docs/api.md §11); tell that apart from an existing group without any.
    if not offsets and not (await admin.describe_group(group_id)).exists:
        raise CliError(f"group {group_id!r} does not exist", ExitCode.NOT_FOUND)
    return Outcome(
        render.to_json(render.offsets_json(group_id, offsets)) if as_json else render.offsets_table(group_id, offsets)
    )


# ------------------------------------------------------------------------------------------------- reset-offsets


async def _reset_offsets(admin: CoordinatorAdmin, args: argparse.Namespace, as_json: bool) -> Outcome:
    group_id = args.group
    how = _reset_method(args)
    if how.method == "to-latest":
        raise CliError(LATEST_REFUSAL, ExitCode.USAGE)  # before asking anything: no answer could change it
    try:
        selections = None if args.all_topics else [parse_topic(text) for text in args.topic]
    except ResetError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    group = await admin.describe_group(group_id)
    if group.exists and group.state != "Empty":
        raise CliError(_not_empty(group), ExitCode.REFUSED_BY_STATE)
    if not group.exists and how.method in ("shift-by", "to-current"):
        raise CliError(
            f"group {group_id!r} does not exist: there is no committed offset to --{how.method} from",
            ExitCode.NOT_FOUND,
        )
    if not group.exists and selections is None:
        raise CliError(
            f"group {group_id!r} does not exist: name the partitions to commit (--topic T:0,1)", ExitCode.NOT_FOUND
        )
    fetched = await admin.fetch_offsets(group_id) if group.exists else {}
    committed = {tp: c.offset for tp, c in fetched.items() if c.error is Error.NONE}
    try:
        plan = plan_reset(selected_partitions(selections, committed), committed, how)
    except ResetError as error:
        raise CliError(f"group {group_id!r}: {error}", ExitCode.NOT_FOUND) from None  # no offset to start from
    if not args.execute:
        text = (
            render.to_json(render.reset_json(group_id, plan, None))
            if as_json
            else render.reset_table(group_id, plan, None)
        )
        return Outcome(text, note=DRY_RUN_NOTE)
    results = await admin.commit_offsets(group_id, {(p.topic, p.partition): p.new for p in plan})
    text = (
        render.to_json(render.reset_json(group_id, plan, results))
        if as_json
        else render.reset_table(group_id, plan, results)
    )
    failed = {tp: e for tp, e in results.items() if e is not Error.NONE}
    if not failed:
        return Outcome(text)
    if set(failed.values()) == {Error.UNKNOWN_MEMBER_ID}:
        # The coordinator takes a simple commit only while the group is Empty: a member joined since the check.
        return Outcome(
            text,
            f"group {group_id!r} is no longer Empty (a member joined): nothing was committed",
            code=ExitCode.REFUSED_BY_STATE,
        )
    names = ", ".join(f"{t}:{p} {e.name}" for (t, p), e in sorted(failed.items())[:10])
    return Outcome(text, f"group {group_id!r}: {len(failed)} of {len(results)} partitions not committed: {names}")


def _reset_method(args: argparse.Namespace) -> ResetMethod:
    if args.to_offset is not None:
        return ResetMethod("to-offset", args.to_offset)
    if args.shift_by is not None:
        return ResetMethod("shift-by", args.shift_by)
    if args.to_earliest:
        return ResetMethod("to-earliest")
    if args.to_latest:
        return ResetMethod("to-latest")
    return ResetMethod("to-current")


def _not_empty(group: DescribeResponse) -> str:
    members = [m.group_instance_id or m.member_id for m in group.members]
    shown = ", ".join(members[:10]) + (f" and {len(members) - 10} more" if len(members) > 10 else "")
    who = f" with {len(members)} member{'s' if len(members) != 1 else ''} ({shown})" if members else ""
    if not members and group.state == "PreparingRebalance":
        who = " without members (its join phase waits for expected members, at most the rebalance timeout)"
    return (
        f"group {group.group_id!r} is {group.state}{who}: offsets can only be reset while the group is Empty, "
        f"as Kafka requires; stop its consumers, or remove them (remove-members {group.group_id} --all)"
    )


def _instance_ids(text: str) -> list[str]:
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise CliError("--instance-ids names no instance id (expected e.g. orders-3,orders-4)", ExitCode.USAGE)
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
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT,...",
        default=default(None),
        help="read a Kafka cluster's groups instead (list, describe with LAG), as kafka-consumer-groups.sh",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        default=default(None),
        help="with --bootstrap-server: client properties for a secured cluster (security.protocol, sasl.*, ssl.*)",
    )
    parser.add_argument("--output", "-o", choices=["table", "json"], default=default("table"), help="output format")
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=default(DEFAULT_TIMEOUT_S),
        help=f"the longest one call waits for the coordinator or cluster (one attempt): an unreachable one is exit 6"
        f" after at most this long (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--max-response-bytes",
        type=_positive,
        metavar="N",
        default=default(DEFAULT_MAX_RESPONSE_BYTES),
        help=f"refuse answers larger than this (default {DEFAULT_MAX_RESPONSE_BYTES})",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds in (0, {MAX_TIMEOUT_S:g}]")
    return value


def _offset(text: str) -> int:
    if not text.isdigit() or int(text) > MAX_OFFSET:
        raise argparse.ArgumentTypeError(f"must be an offset from 0 to {MAX_OFFSET}, got {text!r}")
    return int(text)


def _shift(text: str) -> int:
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isdigit() or int(digits) > MAX_OFFSET:
        raise argparse.ArgumentTypeError(f"must be a whole number of offsets, e.g. -100 or 50, got {text!r}")
    return int(text)


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


def _fail(message: str, code: ExitCode) -> int:
    print(f"{PROG}: error: {untrusted_text(message, limit=2000)}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
