"""serve's settings from a TOML file (``--config``), under flags and the environment.

The keys are serve's own options, found in its parser: an option's destination with
dashes (``max-request-bytes``, ``run-events``, ``migrate`` for ``--no-migrate``), so
every option added to serve can be set in the file without a second list. A value is
what the flag would take (``port = 8787``, ``store = "postgresql://..."``); on/off
options take ``true``/``false``. A flag given on the command line wins over the file,
and so does a setting's environment variable (:data:`SETTING_ENV`).
"""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ConfigurationError
from ...run_traces import EXPORT_RUNS_ENV
from ...security.encryption import KEY_FILE_ENV
from ...security.tokens_file import TOKENS_FILE_ENV
from ...toml_files import load_toml
from .price_options import PRICES_ENV
from .store_options import STORE_FLAG_ENV

#: Settings read from an environment variable when their flag is not given; each
#: variable wins over the config file. An option that reads one must be listed here
#: (tests/test_config.py checks serve's help against it).
SETTING_ENV: dict[str, str] = {
    **STORE_FLAG_ENV,
    "tokens_file": TOKENS_FILE_ENV,
    "encryption_key_file": KEY_FILE_ENV,
    "export_runs": EXPORT_RUNS_ENV,
    "prices": PRICES_ENV,
}

#: The option that names the file; it is not a setting itself.
CONFIG_DEST = "config"


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="PATH",
        help=(
            "read settings from this TOML file, keyed by serve's option names without '--' "
            '(port = 8787, store = "postgresql://...", migrate = false); flags and '
            "environment variables override it"
        ),
    )


def settings_of(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The parser's options a config file may set, by key (``max-request-bytes``)."""
    settings: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", CONFIG_DEST):
            continue
        settings.setdefault(key_of(action.dest), action)
    return settings


def key_of(dest: str) -> str:
    return dest.replace("_", "-")


def apply_config_file(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    args: argparse.Namespace,
    environ: Mapping[str, str] | None = None,
) -> argparse.Namespace:
    """``args`` again, with the settings of the ``--config`` file where neither a flag
    nor an environment variable gives them."""
    path = getattr(args, CONFIG_DEST, None)
    if path is None:
        return args
    environ = os.environ if environ is None else environ
    command = chosen_parser(parser, args)
    values = read_config_file(path, settings_of(command))
    overridden = {dest for dest, env in SETTING_ENV.items() if environ.get(env)}
    # Defaults, so that a flag on the command line still wins.
    command.set_defaults(**{d: v for d, v in values.items() if d not in overridden})
    return parser.parse_args(argv)


def chosen_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The (sub)parser of the command ``args`` were parsed for (``config show`` ...)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices[getattr(args, action.dest)]
            return chosen_parser(chosen, args)
    return parser


def read_config_file(path: str, settings: Mapping[str, argparse.Action]) -> dict[str, Any]:
    """The settings in the TOML file at ``path``, by destination, converted like flags."""
    document = load_toml(path, "--config", "a settings file")
    values: dict[str, Any] = {}
    for key, value in document.items():
        action = settings.get(key)
        if action is None and isinstance(value, dict):
            raise ConfigurationError(
                f"--config {path}: [{key}] is a table; the settings go at the top level"
            )
        if action is None:
            raise ConfigurationError(f"--config {path}: {_unknown(key, settings)}")
        try:
            values[action.dest] = _convert(action, value)
        except ValueError as error:
            raise ConfigurationError(f"--config {path}: {key} = {value!r}: {error}") from None
    return values


def _unknown(key: str, settings: Mapping[str, argparse.Action]) -> str:
    close = difflib.get_close_matches(key.replace("_", "-"), list(settings), n=1, cutoff=0.6)
    hint = (
        f"; did you mean {close[0]!r}?" if close else f"; the settings are: {', '.join(settings)}"
    )
    return f"unknown setting {key!r}{hint}"


def _convert(action: argparse.Action, value: Any) -> Any:
    flag = action.option_strings[-1]
    if action.nargs == 0:
        # store_true / store_false: the key is the destination, so the value is the
        # setting itself (migrate = false is --no-migrate).
        if not isinstance(value, bool):
            raise ValueError("give true or false")
        return value
    if isinstance(action, argparse._AppendAction) or action.nargs not in (None, "?"):
        if not isinstance(value, list):
            raise ValueError(f"give a list of what {flag} takes")
        return [_convert_one(action, flag, item) for item in value]
    return _convert_one(action, flag, value)


def _convert_one(action: argparse.Action, flag: str, value: Any) -> Any:
    # Numbers are written as TOML numbers, everything else as strings; either way the
    # value goes through the flag's own type and choices.
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"give what {flag} takes, as a string or a number")
    try:
        converted = action.type(str(value)) if callable(action.type) else str(value)
    except (ValueError, TypeError, argparse.ArgumentTypeError) as error:
        raise ValueError(f"not a value {flag} takes ({error})") from None
    if action.choices is not None and converted not in action.choices:
        raise ValueError(f"give one of {', '.join(map(str, action.choices))}")
    return converted
