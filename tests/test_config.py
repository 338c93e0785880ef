"""serve's config file (--config) and ``bridge-store config show``."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import pytest

from bridge_store.cli import build_parser, main, parse_args
from bridge_store.cli.shared.serve_options import DEFAULT_PORT
from bridge_store.cli.shared.settings import (
    SETTING_ENV,
    chosen_parser,
    read_config_file,
    settings_of,
)
from bridge_store.cli.shared.store_options import routes_from
from bridge_store.client import start_serve
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.security.tokens import TOKEN_ENV


def config_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bridge-store.toml"
    path.write_text(text)
    return str(path)


def serve_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    return chosen_parser(parser, parser.parse_args(["serve"]))


def test_a_config_file_sets_any_serve_setting(tmp_path: Path) -> None:
    config = config_file(
        tmp_path,
        """
        host = "0.0.0.0"
        port = 9000
        store = "memory://"
        run-events = "sqlite:///events.db"
        max-request-bytes = 1048576
        migrate = false
        access-log = true
        log-level = "warning"
        log-format = "json"
        ssl-certfile = "/etc/bridge-store/tls.pem"
        """,
    )
    args = parse_args(["serve", "--config", config], environ={})
    assert (args.host, args.port, args.store, args.run_events) == (
        "0.0.0.0",
        9000,
        "memory://",
        "sqlite:///events.db",
    )
    assert (args.max_request_bytes, args.migrate, args.access_log) == (1048576, False, True)
    assert (args.log_level, args.log_format, args.ssl_certfile) == (
        "warning",
        "json",
        "/etc/bridge-store/tls.pem",
    )
    # What the file does not set keeps its default.
    assert (args.gzip_min_bytes, args.metrics) == (65536, True)


def test_flags_then_environment_then_the_file(tmp_path: Path) -> None:
    config = config_file(
        tmp_path,
        """
        port = 9000
        migrate = true
        store = "sqlite:///from-file.db"
        runs = "memory://"
        """,
    )
    environ = {"BRIDGE_STORE_URL": "sqlite:///from-env.db"}
    args = parse_args(["serve", "--config", config, "--port", "8787", "--no-migrate"], environ)
    # A flag wins, even one that says what the default says.
    assert (args.port, args.migrate) == (DEFAULT_PORT, False)
    routes = routes_from(args, environ)
    # The environment wins over the file; what only the file sets, it sets.
    assert (routes.agents, routes.checkpoints) == ("sqlite:///from-env.db",) * 2
    assert routes.runs == "memory://"
    flagged = parse_args(["serve", "--config", config, "--store", "memory://flag"], environ)
    assert routes_from(flagged, environ).agents == "memory://flag"
    assert routes_from(parse_args(["serve", "--config", config], {}), {}).agents == (
        "sqlite:///from-file.db"
    )


def test_an_option_added_to_serve_is_a_setting_with_no_second_list(tmp_path: Path) -> None:
    parser = serve_parser()
    # What another engineer's new flag looks like: nothing else needs to know of it.
    parser.add_argument("--backend-timeout-ms", type=int, default=5000)
    parser.add_argument("--keep-rule", action="append", metavar="RULE")
    config = config_file(tmp_path, 'backend-timeout-ms = 250\nkeep-rule = ["a", "b"]\n')
    assert read_config_file(config, settings_of(parser)) == {
        "backend_timeout_ms": 250,
        "keep_rule": ["a", "b"],
    }
    assert "config" not in settings_of(parser)


UNKNOWN = {
    "max_request_bytes = 5": (
        "unknown setting 'max_request_bytes'; did you mean 'max-request-bytes'?"
    ),
    "prot = 8000": "unknown setting 'prot'; did you mean 'port'?",
    "[serve]\nport = 1": "[serve] is a table; the settings go at the top level",
    "colour = 1": "unknown setting 'colour'; the settings are: host, port, store,",
}
BAD_VALUES = {
    'port = "eighty"': "port = 'eighty': not a value --port takes (invalid literal for int()",
    'migrate = "no"': "migrate = 'no': give true or false",
    "access-log = 1": "access-log = 1: give true or false",
    'log-level = "loud"': "log-level = 'loud': give one of critical, error, warning, info, debug",
    "port = true": "port = True: give what --port takes, as a string or a number",
    'store = ["memory://"]': "store = ['memory://']: give what --store takes",
    "port = ": ": not TOML: Invalid value (at line 1, column 8)",
}


@pytest.mark.parametrize(
    ("text", "message"), [*UNKNOWN.items(), *BAD_VALUES.items()], ids=[*UNKNOWN, *BAD_VALUES]
)
def test_file_mistakes_are_one_line_naming_the_file_and_the_key(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, text + "\n")
    assert main(["serve", "--config", config]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bridge-store: --config {config}")
    assert message in err
    assert err.count("\n") == 1


def test_a_missing_config_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere.toml"
    assert main(["config", "show", "--config", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"bridge-store: --config {missing}: cannot read it: No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"port = 8000\nhost = '\xff\xfe'\n", "not UTF-8 text"),
        (
            b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
            "nested too deeply to be a settings file",
        ),
    ],
    ids=["not-utf8", "nested-100000-deep"],
)
@pytest.mark.parametrize("command", [["serve"], ["config", "show"]])
def test_a_hostile_config_file_is_one_line_not_a_traceback(
    content: bytes,
    message: str,
    command: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "hostile.toml"
    config.write_bytes(content)
    assert main([*command, "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err == f"bridge-store: --config {config}: {message}\n"


def test_every_variable_serve_reads_for_a_setting_beats_the_file() -> None:
    """An option read from the environment must be in SETTING_ENV, or the file would
    silently win over its variable."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    named = set(re.findall(r"\b(BRIDGE_STORE_[A-Z_]+)", out.getvalue()))
    assert named
    # The token variable holds the token itself, which no config key carries.
    unlisted = named - {TOKEN_ENV} - set(SETTING_ENV.values())
    assert not unlisted, f"add {unlisted} to bridge_store.cli.shared.settings.SETTING_ENV"


def test_serve_runs_on_its_config_file(tmp_path: Path) -> None:
    database = tmp_path / "history.db"
    config = config_file(
        tmp_path, f'host = "127.0.0.1"\nport = 0\nstore = "sqlite:///{database}"\n'
    )
    with start_serve(["--config", config]) as server:
        assert server.url.startswith("http://127.0.0.1:")
        answer = httpx.post(
            server.url.rstrip("/") + CALL_STORE_PATH,
            json={"substore": "agents", "method": "list", "input": {}},
            headers={"Authorization": f"Bearer {server.auth_token}"},
        )
        assert answer.json() == {"output": {"items": []}}
    assert database.exists()


def config_show(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_STORE_")}
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", "config", "show", *args],
        env={**keep, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_config_show_prints_the_effective_settings_without_secrets(tmp_path: Path) -> None:
    config = config_file(
        tmp_path,
        """
        port = 9000
        checkpoints = "s3://blobs/team?region=eu-west-1&secret_access_key=S3-SECRET"
        log-format = "json"
        """,
    )
    env = {"BRIDGE_STORE_URL": "postgresql://store:hunter2@db/bridge_store", TOKEN_ENV: "t0ken"}
    shown = config_show("--config", config, "--port", "9001", env=env).stdout
    for secret in ("hunter2", "S3-SECRET", "t0ken"):
        assert secret not in shown
    settings = tomllib.loads(shown)
    assert settings["port"] == 9001
    assert settings["store"] == settings["runs"] == "postgresql://store:***@db/bridge_store"
    assert settings["checkpoints"] == "s3://blobs/team?region=eu-west-1&secret_access_key=***"
    assert (settings["log-format"], settings["migrate"]) == ("json", True)
    assert "# auth token: from BRIDGE_STORE_AUTH_TOKEN" in shown
    assert "# ssl-certfile: not set" in shown


def test_config_show_writes_a_config_file_serve_reads_back(tmp_path: Path) -> None:
    flags = ["--store", "memory://", "--runs", "sqlite:///runs.db", "--port", "0", "--no-ui"]
    flags += ["--auth-token-file", "store.token", "--log-level", "debug"]
    shown = config_show(*flags, env={}).stdout
    assert "# auth token: read from store.token" in shown
    saved = config_file(tmp_path, shown)
    from_flags = parse_args(["serve", *flags], {})
    from_file = parse_args(["serve", "--config", saved], {})
    assert routes_from(from_file, {}) == routes_from(from_flags, {})
    for action in settings_of(serve_parser()).values():
        if action.dest not in ("agents", "runs", "run_events", "checkpoints", "store"):
            assert getattr(from_file, action.dest) == getattr(from_flags, action.dest), action.dest


def test_config_show_counts_a_settings_environment_variable(tmp_path: Path) -> None:
    tokens = str(tmp_path / "tokens.toml")
    shown = config_show(env={"BRIDGE_STORE_TOKENS_FILE": tokens}).stdout
    assert tomllib.loads(shown)["tokens-file"] == tokens
    assert f"# auth token: the named tokens in {tokens}" in shown
