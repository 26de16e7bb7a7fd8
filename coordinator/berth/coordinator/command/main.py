"""``berth-coordinator``: run the coordinator (docs/api.md §10), or ``berth-coordinator copy-to-etcd``.

Every flag may come from the environment instead (``BERTH_<FLAG>``, ``berth.coordinator.daemon.environment``: the
convention both daemons share), and its logs are text or JSON (``--log-format``, ``daemon.logs``). Exit status 2
with one line on stderr for bad flags or variables, an unusable data dir or etcd prefix, a bad tokens file or a
certificate that cannot be used. The line ``listening on http(s)://HOST:PORT`` goes to stdout once ``/readyz``
answers 200 (after ``probes on http://HOST:PORT`` with ``--probe-port``); a replica on etcd first prints
``standby on http(s)://HOST:PORT`` once it listens, and the ready line when it first becomes the active replica. A
closed stdout is not an error. SIGTERM (or SIGINT): stop accepting, answer parked requests
COORDINATOR_NOT_AVAILABLE, flush the store (and step down: a standby takes over at once), exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from berth.coordinator.core import Coordinator, CoordinatorConfig, RecordFormatError
from berth.coordinator.daemon import failpoints
from berth.coordinator.daemon.environment import EnvironmentValueError, apply_environment
from berth.coordinator.daemon.logs import add_logging_flags, configure_logging
from berth.coordinator.http.auth import TokenSet, TokensFileError
from berth.coordinator.http.clock import Clock, ManualClock, SystemClock
from berth.coordinator.http.config import ServerConfig, TlsFiles
from berth.coordinator.http.engine import WritesDone
from berth.coordinator.http.leadership import Leadership, SoleLeadership, SoleTerm
from berth.coordinator.http.replicas import add_replication_arguments, open_replicated, replication_config
from berth.coordinator.http.server import Listening, create_app
from berth.coordinator.http.state import JournalReader
from berth.coordinator.http.tls import TlsError
from berth.coordinator.http.uuids import RandomUuids
from berth.coordinator.protocol import Limits
from berth.coordinator.store import GroupCommitWriter, SqliteStore, StoreConfig, StoreError
from berth.coordinator.store.etcd import copy as copy_command

log = logging.getLogger("berth.coordinator")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(message)


def fail(message: str) -> NoReturn:
    print(f"berth-coordinator: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def one_line(exc: BaseException | None) -> str:
    """The exception as the command's one line: its message, or its type when it has none (a bug)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, StoreError) and text:
        return text
    return f"loading persisted state failed: {type(exc).__name__}: {text}" if text else f"{type(exc).__name__}"


def _positive(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


class _HelpFormatter(argparse.HelpFormatter):
    """Every flag's help ends with its default (``(default: 9094)``); a flag that is off unless given says so."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "%(default)" in text or action.required or action.default in (None, False, argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="berth-coordinator",
        description="Berth's group coordinator (Kafka classic groups over HTTP). See docs/api.md §10."
        " `berth-coordinator copy-to-etcd --help`: move a data dir into etcd (docs/high-availability.md).",
        formatter_class=_HelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"berth-coordinator {version()}")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the SQLite store and journal live (required, unless --etcd-endpoints)",
    )
    p.add_argument(
        copy_command.SERVE_COPIED_FLAG,
        action="store_true",
        help="serve a data dir that copy-to-etcd copied (by default refused: the replicas on etcd moved on from it)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=_positive, default=9094, help="port of the API; 0 picks a free port")
    p.add_argument(
        "--group-min-session-timeout-ms",
        type=_positive,
        default=6_000,
        help="shortest session timeout a member may ask for",
    )
    p.add_argument(
        "--group-max-session-timeout-ms",
        type=_positive,
        default=1_800_000,
        help="longest session timeout a member may ask for",
    )
    p.add_argument(
        "--group-initial-rebalance-delay-ms",
        type=_positive,
        default=3_000,
        help="how long the first rebalance of an empty group waits for more members",
    )
    p.add_argument(
        "--group-max-size", type=_positive, default=None, help="KIP-389 cap on members per group (default: unlimited)"
    )
    p.add_argument(
        "--group-new-member-join-timeout-ms",
        type=_positive,
        default=300_000,
        help="how long a new member's join may wait in a rebalance before it is dropped",
    )
    p.add_argument(
        "--offset-metadata-max-bytes", type=_positive, default=4_096, help="longest commit metadata, in UTF-8 bytes"
    )
    p.add_argument(
        "--max-pending-members-per-group",
        type=_positive,
        default=1_000,
        help="KIP-394 pending ids one group holds; a newcomer beyond it pushes out the group's oldest",
    )
    p.add_argument(
        "--max-pending-members",
        type=_positive,
        default=100_000,
        help="KIP-394 pending ids of all groups together; a newcomer beyond it pushes out the oldest of all",
    )
    p.add_argument(
        "--pending-member-timeout-ms",
        type=_positive,
        default=30_000,
        help="longest a KIP-394 pending id lives, whatever session timeout its join asked for",
    )
    p.add_argument(
        "--tokens-file", type=Path, default=None, help="YAML/JSON bearer tokens; enables auth (default: no auth)"
    )
    p.add_argument("--max-body-bytes", type=_positive, default=1_048_576, help="largest request body accepted")
    p.add_argument("--idle-timeout-s", type=float, default=120.0, help="close connections idle this long")
    p.add_argument("--body-timeout-s", type=float, default=30.0, help="a request body must arrive within this")
    p.add_argument("--max-connections", type=_positive, default=10_000, help="beyond this, 503 and close")
    p.add_argument("--max-id-bytes", type=_positive, default=1024, help="longest id/name accepted, in UTF-8 bytes")
    p.add_argument("--max-list-items", type=_positive, default=100_000, help="longest list accepted in a request")
    p.add_argument("--manual-clock", action="store_true", help="tests only: time moves via POST /v1/debug/clock")
    add_logging_flags(p)
    _add_edge_flags(p)
    add_store_arguments(p)
    add_replication_arguments(p)
    return p


def _add_edge_flags(p: argparse.ArgumentParser) -> None:
    """The network edge: per-client limit, header timeout, the probe listener, TLS, per-group metrics."""
    p.add_argument(
        "--max-connections-per-client",
        type=_positive,
        default=1_000,
        help="connections one client (an IPv4 address, an IPv6 /64) may hold; beyond it 503 and close; 0: no limit",
    )
    p.add_argument(
        "--header-timeout-s",
        type=float,
        default=10.0,
        help="a request head must be complete this long after its first byte",
    )
    p.add_argument(
        "--probe-port",
        type=_positive,
        default=None,
        help="also serve /healthz, /readyz and /metrics on this port, answered while the API port is at its "
        "connection limit (plain HTTP; 0 picks a free port; default: off)",
    )
    p.add_argument("--tls-cert-file", type=Path, default=None, help="serve HTTPS with this PEM certificate (chain)")
    p.add_argument("--tls-key-file", type=Path, default=None, help="the PEM private key of --tls-cert-file")
    p.add_argument(
        "--tls-reload-interval-s",
        type=float,
        default=10.0,
        help="how often the certificate files are checked; a changed pair is loaded without closing the listener",
    )
    p.add_argument(
        "--metrics-max-groups",
        type=_positive,
        default=200,
        help="groups that get per-group series on /metrics; the rest appear only in the aggregates",
    )
    p.add_argument(
        "--metrics-max-groups-per-token",
        type=_positive,
        default=10,
        help="per-group series the groups one non-admin token created may hold (and all such groups together at"
        " most half of --metrics-max-groups); groups with an owner or an admin's are not limited; 0: no limit",
    )


def version() -> str:
    try:
        return metadata.version("berth")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


# --------------------------------------------------------------------------- the store: start-up and bounds


def add_store_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of the store's start-up checks and bounds (docs/api.md §6, §10)."""
    p.add_argument(
        "--integrity-check",
        default="quick",
        choices=["quick", "full", "off"],
        help="check the database's pages at start (PRAGMA quick_check or integrity_check); refuse a damaged one",
    )

    p.add_argument(
        "--offsets-retention-ms",
        type=_positive,
        default=7 * 86_400_000,
        help="Kafka's offsets retention: an empty group's offsets expire this long after it emptied, then the"
        " group; 0: never",
    )
    p.add_argument(
        "--offsets-retention-check-interval-ms",
        type=_positive,
        default=600_000,
        help="how often expired offsets and empty groups are looked for",
    )
    p.add_argument(
        "--max-groups",
        type=_positive,
        default=50_000,
        help="most groups at once; a request that would create one more is answered COORDINATOR_NOT_AVAILABLE;"
        " 0: unlimited",
    )
    p.add_argument(
        "--member-metadata-max-bytes",
        type=_positive,
        default=262_144,
        help="a join's metadata (its protocols together) or one assignment of a sync beyond this is HTTP 400",
    )
    p.add_argument(
        "--offsets-max-per-group",
        type=_positive,
        default=100_000,
        help="committed offsets (partitions) one group keeps; one more is INVALID_COMMIT_OFFSET_SIZE; 0: unlimited",
    )
    p.add_argument(
        "--offsets-max-bytes-per-group",
        type=_positive,
        default=16 * 2**20,
        help="stored bytes of one group's offsets (128 per offset, its topic and metadata); beyond it"
        " INVALID_COMMIT_OFFSET_SIZE; 0: unlimited",
    )
    p.add_argument(
        "--max-stored-bytes",
        type=_positive,
        default=192 * 2**20,
        help="stored bytes of every group together (members, metadata, offsets: docs/api.md §6), sized so that what"
        " is accepted runs and reloads within the chart's 512 MiB and fits its 1 GiB volume beside the journal;"
        " beyond it growth is refused in-band; 0: unlimited",
    )
    p.add_argument(
        "--max-stored-bytes-per-token",
        type=_positive,
        default=24 * 2**20,
        help="stored bytes of the groups one non-admin token created; beyond it growth is refused in-band; 0: no bound",
    )
    p.add_argument(
        "--max-groups-per-token",
        type=_positive,
        default=1_000,
        help="groups one non-admin token may create; one more is COORDINATOR_NOT_AVAILABLE; 0: no bound",
    )
    p.add_argument(
        "--offset-fetch-page-max-bytes",
        type=_positive,
        default=2**20,
        help="an offset fetch answers in pages of about this many bytes (stored bytes of its offsets; at least one)",
    )
    p.add_argument(
        "--group-metadata-max-bytes",
        type=_positive,
        default=8 * 2**20,
        help="every member's metadata and assignment in one group: a join beyond it is GROUP_MAX_SIZE_REACHED,"
        " an assignment beyond it UNKNOWN_SERVER_ERROR; 0: unlimited",
    )
    p.add_argument(
        "--journal-retention-bytes",
        type=_positive,
        default=256 * 2**20,
        help="journal kept, in bytes of events (the oldest segments go first); 0: no bound",
    )
    p.add_argument(
        "--journal-retention-ms",
        type=_positive,
        default=7 * 86_400_000,
        help="events older than this before the newest event go; 0: no bound",
    )
    p.add_argument(
        "--journal-event-max-bytes",
        type=_positive,
        default=256 * 1024,
        help="a larger assignment_stored or rebalance_completed event is summarised (docs/formats.md)",
    )
    p.add_argument(
        "--journal-page-max-bytes",
        type=_positive,
        default=1_048_576,
        help="a GET /v1/journal page stops before this many bytes of events (it always holds at least one)",
    )


def core_bounds(args: argparse.Namespace) -> dict[str, Any]:
    """The core's part of the bounds (``CoordinatorConfig`` fields)."""
    return {
        "journal_event_max_bytes": max(1, args.journal_event_max_bytes),
        "offsets_retention_ms": args.offsets_retention_ms or None,
        "offsets_retention_check_interval_ms": max(1, args.offsets_retention_check_interval_ms),
        "max_groups": args.max_groups or None,
        "group_metadata_max_bytes": args.group_metadata_max_bytes or None,
        "offsets_max_per_group": args.offsets_max_per_group or None,
        "offsets_max_bytes_per_group": args.offsets_max_bytes_per_group or None,
        "max_stored_bytes": args.max_stored_bytes or None,
        "max_stored_bytes_per_tenant": args.max_stored_bytes_per_token or None,
        "max_groups_per_tenant": args.max_groups_per_token or None,
        "offset_fetch_page_max_bytes": max(1, args.offset_fetch_page_max_bytes),
    }


def store_config(args: argparse.Namespace) -> StoreConfig:
    return StoreConfig(
        integrity_check=args.integrity_check,
        journal_retention_bytes=args.journal_retention_bytes or None,
        journal_retention_ms=args.journal_retention_ms or None,
    )


def parse_arguments(argv: Sequence[str] | None, environ: Mapping[str, str]) -> argparse.Namespace:
    """The command line, each flag's ``BERTH_*`` variable standing in for it when it is not given."""
    parser = build_parser()
    try:
        apply_environment(parser, environ)
    except EnvironmentValueError as exc:
        fail(str(exc))
    return parser.parse_args(argv)


def parse_config(argv: Sequence[str] | None, environ: Mapping[str, str] | None = None) -> ServerConfig:
    return server_config(parse_arguments(argv, os.environ if environ is None else environ))


def server_config(args: argparse.Namespace) -> ServerConfig:
    replication = replication_config(args)
    if (args.data_dir is None) == (replication is None):
        fail("give either --data-dir (one replica, SQLite) or --etcd-endpoints (replicas on etcd)")
    try:
        core = CoordinatorConfig(
            group_min_session_timeout_ms=args.group_min_session_timeout_ms,
            group_max_session_timeout_ms=args.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms=args.group_initial_rebalance_delay_ms,
            group_max_size=args.group_max_size,
            new_member_join_timeout_ms=args.group_new_member_join_timeout_ms,
            offset_metadata_max_bytes=args.offset_metadata_max_bytes,
            max_pending_members_per_group=max(1, args.max_pending_members_per_group),
            max_pending_members=max(1, args.max_pending_members),
            pending_member_timeout_ms=max(1, args.pending_member_timeout_ms),
            **core_bounds(args),
        )
    except ValueError as exc:
        fail(str(exc))
    if args.idle_timeout_s <= 0 or args.body_timeout_s <= 0:
        fail("--idle-timeout-s and --body-timeout-s must be positive")
    if args.port > 65535:
        fail(f"--port {args.port} is not a TCP port")
    if replication is not None and (problems := replication.problems(core.group_metadata_max_bytes)):
        fail("; ".join(problems))
    tls = _tls_files(args)
    if args.header_timeout_s <= 0:
        fail("--header-timeout-s must be positive")
    if args.probe_port is not None and args.probe_port > 65535:
        fail(f"--probe-port {args.probe_port} is not a TCP port")
    tokens = None
    if args.tokens_file is not None:
        try:
            tokens = TokenSet.from_file(args.tokens_file)
        except TokensFileError as exc:
            fail(str(exc))
    return ServerConfig(
        data_dir=args.data_dir,
        host=args.host,
        port=args.port,
        max_body_bytes=args.max_body_bytes,
        idle_timeout_s=args.idle_timeout_s,
        body_timeout_s=args.body_timeout_s,
        max_connections=args.max_connections,
        manual_clock=args.manual_clock,
        tokens=tokens,
        limits=Limits(
            max_id_bytes=args.max_id_bytes,
            max_list_items=args.max_list_items,
            max_member_metadata_bytes=args.member_metadata_max_bytes,
        ),
        core=core,
        max_connections_per_client=args.max_connections_per_client,
        header_timeout_s=args.header_timeout_s,
        probe_port=args.probe_port,
        tls=tls,
        metrics_max_groups=args.metrics_max_groups,
        metrics_max_groups_per_token=args.metrics_max_groups_per_token,
        store=store_config(args),
        journal_page_max_bytes=max(1, args.journal_page_max_bytes),
        replication=replication,
    )


def _tls_files(args: argparse.Namespace) -> TlsFiles | None:
    if (args.tls_cert_file is None) != (args.tls_key_file is None):
        fail("--tls-cert-file and --tls-key-file go together")
    if args.tls_cert_file is None:
        return None
    if args.tls_reload_interval_s <= 0:
        fail("--tls-reload-interval-s must be positive")
    return TlsFiles(args.tls_cert_file, args.tls_key_file, args.tls_reload_interval_s)


def sole_leadership(store: SqliteStore) -> SoleLeadership:
    """The single replica's one term over its SQLite store."""

    def make_writer(on_done: WritesDone) -> GroupCommitWriter:
        return GroupCommitWriter(store, on_done)

    def load_records(target: Coordinator) -> None:
        try:
            for record in store.load():
                failpoints.hit("load.record")
                target.replay(record)
        except RecordFormatError as exc:
            raise StoreError(f"database {store.db_path} holds a record this Berth cannot load: {exc}") from exc

    return SoleLeadership(SoleTerm(load_records, make_writer, store.load_group))


async def serve(config: ServerConfig, leadership: Leadership, journal: JournalReader) -> None:
    clock: Clock = ManualClock() if config.manual_clock else SystemClock()

    def new_core() -> Coordinator:
        return Coordinator(config.core, new_uuid=RandomUuids())

    app = create_app(config, clock, new_core(), leadership, journal, new_core)
    try:
        server = await Listening.start(app, config)
    except OSError as exc:
        fail(f"cannot listen on {config.host}:{config.port} (or --probe-port): {exc.strerror or exc}")
    except TlsError as exc:
        fail(str(exc))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ready = asyncio.create_task(server.state.wait_loaded())
    stopping = asyncio.create_task(stop.wait())
    if leadership.replicated:
        _announce_probes(server)
        say(f"standby on {server.url}")
    announced = False
    while not stopping.done():
        await asyncio.wait({ready, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            continue
        if ready.exception() is not None:
            # Never "up but never ready": a store that cannot be loaded is one line on stderr and exit 2.
            stopping.cancel()
            await server.stop()
            fail(one_line(ready.exception()))
        if announced:
            break  # the terms ended without an error: the server is stopping
        announced = True
        if not leadership.replicated:
            _announce_probes(server)
        say(f"listening on {server.url}")
        log.info("ready: listening on %s (manual clock: %s)", server.url, config.manual_clock)
        # A later term that cannot load is as fatal as the first (a replicated store's takeover).
        ready = asyncio.create_task(server.state.wait_failed())
    ready.cancel()
    log.info("stopping: answering parked requests and flushing the store")
    await server.stop()


def _announce_probes(server: Listening) -> None:
    probes = server.probe_address
    if probes is not None:
        say(f"probes on http://{probes[0]}:{probes[1]}")


def say(line: str) -> None:
    """A line on stdout; a closed stdout (``| head``) is not an error for a server that keeps running."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # later writes (and the flush at exit) go nowhere, quietly


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] == [copy_command.COMMAND]:
        return copy_command.main(arguments[1:])
    try:
        args = parse_arguments(argv, os.environ)
    except BrokenPipeError:  # --help or --version into a closed pipe
        say("")
        return 0
    config = server_config(args)
    configure_logging(args.log_format, args.log_level)
    store: SqliteStore | None = None
    leadership: Leadership
    journal: JournalReader
    try:
        if config.replication is not None:
            journal, leadership = open_replicated(config.replication, config.store)
        else:
            assert config.data_dir is not None
            copied = copy_command.copied_refusal(config.data_dir)
            if copied is not None and not args.serve_copied_data_dir:
                fail(copied)
            store = SqliteStore(config.data_dir, config.store)
            journal, leadership = store, sole_leadership(store)
    except StoreError as exc:
        fail(str(exc))
    tune_garbage_collector()
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(serve(config, leadership, journal))
    finally:
        if store is not None:
            store.close()
    return 0


# Every request allocates a few hundred container objects that reference counting frees at once, yet they count
# towards the cyclic collector's trigger (700 by default): at thousands of requests per second it ran a young
# collection every few requests and, as the member map grew, ever more full ones. Measured with
# ``python -m benchmarks rebalance``: coordinator CPU for a 1,000-member rebalance 330 ms -> 150 ms.
GC_THRESHOLDS = (50_000, 20, 20)


def tune_garbage_collector() -> None:
    """Collect cycles less often (see ``GC_THRESHOLDS``); the memory they may hold meanwhile is a few MiB."""
    gc.set_threshold(*GC_THRESHOLDS)


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop (a dependency off Windows; it roughly halves the event loop's cost per request), else asyncio's own.

    ``BERTH_EVENT_LOOP=asyncio`` forces the standard loop (for comparisons and debugging).
    """
    if os.environ.get("BERTH_EVENT_LOOP", "").lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


if __name__ == "__main__":
    raise SystemExit(main())
