"""What both daemons share (berth.coordinator.daemon): every flag from its BERTH_* variable, read as the flag would
be, the flag winning; a bad value named in one line; and one log format, text or JSON, for both."""

from __future__ import annotations

import argparse
import io
import json
import logging
from pathlib import Path

import pytest

from berth.coordinator.daemon.environment import EnvironmentValueError, apply_environment, variable_of
from berth.coordinator.daemon.logs import add_logging_flags, configure_logging


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="daemon")
    p.add_argument("--version", action="version", version="1")
    p.add_argument("--data-dir", type=Path, required=True, help="where")
    p.add_argument("--max-body-bytes", type=int, default=1024, help="largest body")
    p.add_argument("--manual-clock", action="store_true", help="tests only")
    p.add_argument("--follow-journal", action=argparse.BooleanOptionalAction, default=True, help="follow")
    p.add_argument("--trusted", action="append", default=[], help="repeatable")
    p.add_argument("--bootstrap", action="append", default=[], help="lists separated by ;")
    p.add_argument("--namespace", help="no variable")
    add_logging_flags(p)
    return p


def test_the_variable_of_a_flag() -> None:
    assert variable_of("--max-body-bytes") == "BERTH_MAX_BODY_BYTES"
    assert variable_of("--etcd-lease-ttl-s") == "BERTH_ETCD_LEASE_TTL_S"


def test_each_variable_stands_in_for_its_flag_read_as_the_flag_would_be_and_the_flag_wins() -> None:
    environ = {
        "BERTH_DATA_DIR": "/var/lib/berth",
        "BERTH_MAX_BODY_BYTES": "2048",
        "BERTH_MANUAL_CLOCK": "true",
        "BERTH_FOLLOW_JOURNAL": "off",
        "BERTH_TRUSTED": "http://a:9094, http://b:9094",
        "BERTH_BOOTSTRAP": "k0:9092,k1:9092;k2:9092",
        "BERTH_NAMESPACE": "ignored",
        "BERTH_LOG_FORMAT": "json",
        "BERTH_LOG_LEVEL": "",  # set but empty: not set
    }
    p = parser()
    used = apply_environment(p, environ, separators={"--bootstrap": ";"}, skip=frozenset({"--namespace"}))
    args = p.parse_args([])
    assert args.data_dir == Path("/var/lib/berth") and args.max_body_bytes == 2048
    assert args.manual_clock is True and args.follow_journal is False
    assert args.trusted == ["http://a:9094", "http://b:9094"]
    assert args.bootstrap == ["k0:9092,k1:9092", "k2:9092"]
    assert args.namespace is None and (args.log_format, args.log_level) == ("json", "info")
    assert "BERTH_NAMESPACE" not in used and used["BERTH_MAX_BODY_BYTES"] == "--max-body-bytes"
    flags = p.parse_args(["--max-body-bytes", "4096", "--log-format", "text", "--trusted", "http://c:9094"])
    assert (flags.max_body_bytes, flags.log_format, flags.trusted) == (4096, "text", ["http://c:9094"])
    assert "[env BERTH_MAX_BODY_BYTES]" in p.format_help() and "BERTH_NAMESPACE" not in p.format_help()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("BERTH_MAX_BODY_BYTES", "2k", "BERTH_MAX_BODY_BYTES: invalid value '2k'"),
        ("BERTH_MANUAL_CLOCK", "maybe", "BERTH_MANUAL_CLOCK: 'maybe' is not true or false"),
        ("BERTH_LOG_FORMAT", "xml", "BERTH_LOG_FORMAT: invalid choice: 'xml' (choose from 'text', 'json')"),
    ],
)
def test_a_value_its_flag_would_refuse_names_the_variable(variable: str, value: str, message: str) -> None:
    with pytest.raises(EnvironmentValueError) as refused:
        apply_environment(parser(), {variable: value})
    assert str(refused.value) == message


def log_lines(log_format: str, emit: logging.Logger | logging.LoggerAdapter[logging.Logger]) -> str:
    stream = io.StringIO()
    configure_logging(log_format, "info", stream=stream)
    configure_logging(log_format, "info", stream=stream)  # again: still one handler, one line per record
    try:
        emit.debug("not shown")
        emit.info("fleet %s reconciled", "orders", extra={"k8s_ref": {"namespace": "shop", "name": "orders"}})
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            emit.exception("a pass failed")
    finally:
        logging.getLogger().handlers.clear()
    return stream.getvalue()


def test_json_lines_have_one_shape_with_the_object_and_the_traceback() -> None:
    first, second = (json.loads(line) for line in log_lines("json", logging.getLogger("berth.test")).splitlines())
    assert set(first) == {"timestamp", "severity", "logger", "message", "object"}
    assert (first["severity"], first["logger"], first["message"]) == ("info", "berth.test", "fleet orders reconciled")
    assert first["object"] == {"namespace": "shop", "name": "orders"} and first["timestamp"].endswith("+00:00")
    assert second["severity"] == "error" and "RuntimeError: boom" in second["exception"]


def test_text_lines_name_the_object_and_the_level() -> None:
    text = log_lines("text", logging.getLogger("berth.test"))
    first = text.splitlines()[0]
    assert " INFO berth.test [shop/orders] fleet orders reconciled" in first and "not shown" not in text


# --- both daemons, one convention ----------------------------------------------------------------------------------


def test_every_flag_of_both_daemons_has_its_variable_named_in_help() -> None:
    from berth.coordinator.command.main import build_parser as coordinator_parser
    from berth.operator.command.options import build_parser as operator_parser

    for parser in (coordinator_parser(), operator_parser()):
        apply_environment(parser, {})
        for action in parser._actions:
            flags = [o for o in action.option_strings if o.startswith("--") and o not in ("--help", "--version")]
            if flags:
                assert f"[env {variable_of(flags[0])}]" in (action.help or ""), (parser.prog, flags[0])
        assert {"--log-format", "--log-level"} <= set(parser._option_string_actions), parser.prog


def test_the_operator_reads_every_flag_from_the_environment_and_keeps_its_older_names(tmp_path: Path) -> None:
    from berth.operator.command.options import OptionsError, parse_options

    ca = Path(__file__).resolve().parents[2] / "support" / "network" / "certs.py"  # any readable file: PEM-checked
    environ = {
        "BERTH_COORDINATOR_URL": "http://berth-coordinator.berth:9094",
        "BERTH_METRICS_PORT": "9100",
        "BERTH_LOG_FORMAT": "json",
        "BERTH_LOG_LEVEL": "debug",
        "BERTH_FOLLOW_JOURNAL": "false",
        "BERTH_RECONCILE_INTERVAL_S": "5",
        "BERTH_KAFKA_TRUSTED_BOOTSTRAP": "k0:9092,k1:9092;k2:9092",
        "BERTH_TRUSTED_COORDINATORS": "http://other.team:9094",  # the older, plural name
        "BERTH_TOKEN": "the-admin-token",
    }
    options = parse_options([], environ, service_account_namespace_file=tmp_path / "none")
    assert (options.metrics_port, options.log_format, options.log_level) == (9100, "json", "debug")
    assert options.follow_journal is False and options.reconcile_interval_s == 5.0
    assert options.kafka_trusted == ("k0:9092,k1:9092", "k2:9092")
    assert options.trusted_coordinators == ("http://other.team:9094",)
    assert options.admin_token == "the-admin-token" and options.token_source == "from BERTH_TOKEN"
    flags = parse_options(["--metrics-port", "0", "--trusted-coordinator", "http://mine:9094"], environ)
    assert flags.metrics_port == 0 and flags.trusted_coordinators == ("http://mine:9094",)  # the flag wins
    with pytest.raises(OptionsError, match=r"^BERTH_METRICS_PORT: invalid value 'lots'$"):
        parse_options([], {"BERTH_METRICS_PORT": "lots"})
    with pytest.raises(OptionsError, match=r"^--coordinator-ca-file names .*certs.py.*, which is not a PEM file"):
        parse_options([], {"BERTH_CA_FILE": str(ca)})  # the older name of BERTH_COORDINATOR_CA_FILE, read as a flag
