"""``bridge-store config show``: the settings serve would run with, secrets left out."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from typing import Any

from ..security.tokens import DEFAULT_TOKEN_FILE, TOKEN_ENV
from ..urls import redact
from .shared.parsers import advise
from .shared.serve_options import add_arguments
from .shared.settings import SETTING_ENV, key_of, settings_of
from .shared.store_options import DEFAULT_STORE_URL, STORE_FLAG_ENV, routes_from


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = commands.add_parser(
        "config",
        help="show serve's effective configuration",
        description="Inspect the configuration of 'bridge-store serve'.",
    )
    advise(config, _options_go_after_show)
    actions = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    show = actions.add_parser(
        "show",
        help="print serve's effective settings as TOML, secrets redacted",
        description=(
            "Print, as a TOML config file, the settings 'bridge-store serve' would run with "
            "given the same options, environment variables and --config file (flags, then "
            "environment, then the file, then defaults). Passwords and secret parameters in "
            "store URLs show as ***; the auth token itself is never printed."
        ),
    )
    add_arguments(show)


def _options_go_after_show(given: list[str], message: str) -> str:
    """``config --port 18100``: config's one command is show, and serve's options are its."""
    example = (
        " ".join(["bridge-store config show", *given]) if given else "bridge-store config show"
    )
    return (
        "config shows the settings serve would run with, with its one command, show; "
        f"serve's options go after it: {example}"
    )


def run(args: argparse.Namespace) -> int:
    print(render(args, os.environ), end="")
    return 0


def render(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """The TOML text for ``args`` (parsed by ``config show``, the config file applied)."""
    serve_options = argparse.ArgumentParser(add_help=False)
    add_arguments(serve_options)
    values = {
        action.dest: getattr(args, action.dest) for action in settings_of(serve_options).values()
    }
    # A setting's environment variable counts where no flag (or file) gives it.
    for dest, variable in SETTING_ENV.items():
        if dest in values and values[dest] is None:
            values[dest] = environ.get(variable) or None
    # Store URLs as serve resolves them: flag, then environment, then --store, then the default.
    routes = routes_from(args, environ)
    values["store"] = values["store"] or environ.get(STORE_FLAG_ENV["store"]) or DEFAULT_STORE_URL
    for substore in ("agents", "runs", "run_events", "checkpoints"):
        values[substore] = getattr(routes, substore)
    lines = [
        "# bridge-store serve: effective settings (flags, then environment, then --config,",
        "# then defaults). Secrets in URLs show as ***; the token is never shown.",
    ]
    for dest, value in values.items():
        if value is None:
            lines.append(f"# {key_of(dest)}: not set")
        else:
            lines.append(f"{key_of(dest)} = {_toml(value)}")
    lines.append(f"# auth token: {_token_source(values, environ)}")
    return "\n".join(lines) + "\n"


def _token_source(values: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    if values.get("tokens_file"):
        return f"the named tokens in {values['tokens_file']}"
    if environ.get(TOKEN_ENV, "").strip():
        return f"from {TOKEN_ENV}"
    path = values["auth_token_file"]
    if path is None:
        return f"generated into ./{DEFAULT_TOKEN_FILE} at start"
    return f"read from {path} (generated there if missing)"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    text = redact(str(value)) if "://" in str(value) else str(value)
    # JSON's string escapes are TOML's, but for U+007F, which TOML wants escaped too.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
