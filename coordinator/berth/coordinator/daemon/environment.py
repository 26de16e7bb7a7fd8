"""Every flag of a daemon from the environment: ``--max-body-bytes 2048`` or ``BERTH_MAX_BODY_BYTES=2048``.

Rules:

- The variable of a flag is ``BERTH_`` and the flag's long name in upper case, dashes as underscores. A flag given on
  the command line wins over its variable; the variable wins over the built-in default.
- A variable is read exactly as its flag's value would be (the flag's type and choices); a switch takes ``true`` or
  ``false`` (also ``1``/``0``, ``yes``/``no``, ``on``/``off``); a repeatable flag takes a list separated by ``,``
  (or the separator its daemon declares). A variable that is set but empty counts as not set.
- A value that its flag would refuse is an :class:`EnvironmentValueError` naming the variable, so the daemon says it
  in one line and exits 2, as for a bad flag; nothing is half applied.
- A daemon may keep an older name of a flag's variable as an alias (the operator's ``BERTH_CA_FILE`` for
  ``--coordinator-ca-file``): read only when the flag's own variable is not set.
- Each flag's help says its variable, so ``--help`` documents both.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

PREFIX = "BERTH_"
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


class EnvironmentValueError(ValueError):
    """A BERTH_* variable holds a value its flag would refuse; the message names the variable."""


def variable_of(flag: str) -> str:
    """``--max-body-bytes`` -> ``BERTH_MAX_BODY_BYTES``."""
    return PREFIX + flag.removeprefix("--").replace("-", "_").upper()


def apply_environment(
    parser: argparse.ArgumentParser,
    environ: Mapping[str, str],
    *,
    separators: Mapping[str, str] | None = None,
    skip: frozenset[str] = frozenset(),
    aliases: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Make each flag's ``BERTH_*`` variable its default and name it in the flag's help. ``separators``: the list
    separator of a repeatable flag when it is not ``,``; ``skip``: flags without a variable; ``aliases``: a flag's
    older variable, read when its own is unset. Returns the variables that were used (variable -> flag), for a
    start-up log."""
    used: dict[str, str] = {}
    defaults: dict[str, Any] = {}
    for action in _flags(parser):
        flag = _long(action)
        if flag is None or flag in skip:
            continue
        variable = variable_of(flag)
        action.help = f"{action.help or ''} [env {variable}]".strip()
        text = environ.get(variable, "")
        alias = (aliases or {}).get(flag)
        if not text.strip() and alias is not None and environ.get(alias, "").strip():
            variable, text = alias, environ[alias]
        if not text.strip():
            continue
        defaults[action.dest] = _value(action, variable, text, (separators or {}).get(flag, ","))
        action.required = False
        used[variable] = flag
    parser.set_defaults(**defaults)
    return used


def _flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        action
        for action in parser._actions
        if action.option_strings
        and not isinstance(action, argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction)
    ]


def _long(action: argparse.Action) -> str | None:
    return next((option for option in action.option_strings if option.startswith("--")), None)


def _value(action: argparse.Action, variable: str, text: str, separator: str) -> Any:
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction | argparse.BooleanOptionalAction):
        word = text.strip().lower()
        if word not in _TRUE | _FALSE:
            raise EnvironmentValueError(f"{variable}: {text!r} is not true or false")
        on = word in _TRUE
        return (not on) if isinstance(action, argparse._StoreFalseAction) else on
    if isinstance(action, argparse._AppendAction | argparse._ExtendAction):
        items = [item.strip() for item in text.split(separator) if item.strip()]
        # Given on the command line too, the flag's values replace the variable's instead of adding to them.
        action.__class__ = _replacing(type(action))  # type: ignore[assignment]
        return _FromEnvironment(_one(action, variable, item) for item in items)
    if isinstance(action, argparse._StoreAction):
        return _one(action, variable, text.strip())
    raise EnvironmentValueError(f"{variable}: its flag cannot be given in the environment")


def _one(action: argparse.Action, variable: str, text: str) -> Any:
    convert = action.type if callable(action.type) else str
    try:
        value = convert(text)
    except (ValueError, TypeError, argparse.ArgumentTypeError) as error:
        reason = str(error) if isinstance(error, argparse.ArgumentTypeError) else f"invalid value {text!r}"
        raise EnvironmentValueError(f"{variable}: {reason}") from None
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(repr(choice) for choice in action.choices)
        raise EnvironmentValueError(f"{variable}: invalid choice: {text!r} (choose from {choices})")
    return value


class _FromEnvironment(list[Any]):
    """A repeatable flag's values taken from its variable."""


def _replacing(kind: type[argparse.Action]) -> type[argparse.Action]:
    """``kind`` (append or extend) starting from an empty list when the first value on the command line comes."""

    class Replacing(kind):  # type: ignore[valid-type,misc]
        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: Any,
            option_string: str | None = None,
        ) -> None:
            if isinstance(getattr(namespace, self.dest, None), _FromEnvironment):
                setattr(namespace, self.dest, [])
            super().__call__(parser, namespace, values, option_string)

    return Replacing
