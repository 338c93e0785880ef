"""docker-compose.yml and the Dockerfile stay in step with the CLI and the package.

No Docker engine runs here, so the compose file is checked as data: every command of
the project's image parses with the real CLI parser, every BRIDGE_STORE_* variable is
one the CLI reads and names in its help, store URLs resolve to installed backends,
and the services' dependencies, health checks and ports fit together.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from bridge_store.cli import build_parser
from bridge_store.cli.store_options import STORE_FLAG_ENV, routes_from
from bridge_store.plugins import get_plugin_manager
from bridge_store.stores import resolve
from bridge_store.tokens import TOKEN_ENV

ROOT = Path(__file__).resolve().parent.parent
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
SIDECAR_PAIRS = {"bridge-alice": "store-alice", "bridge-bob": "store-bob"}


def own_image_services() -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in SERVICES.items() if svc.get("build") == "."}


def parse(service: str) -> argparse.Namespace:
    return build_parser().parse_args(SERVICES[service]["command"])


def help_text(*command: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser().parse_args([*command, "--help"])
    return out.getvalue()


def healthcheck_port(service: str) -> int:
    """The loopback port a service's health check probes (an URL or a socket address)."""
    test = " ".join(SERVICES[service]["healthcheck"]["test"])
    (port,) = re.findall(r"127\.0\.0\.1(?::|', )(\d+)", test)
    return int(port)


def test_every_command_of_the_image_parses_and_its_store_urls_resolve() -> None:
    services = own_image_services()
    assert {"migrate", "store", *SIDECAR_PAIRS, *SIDECAR_PAIRS.values()} <= set(services)
    for name, service in services.items():
        args = build_parser().parse_args(service["command"])
        if args.command in ("serve", "db"):
            # Opening checks scheme, parameters and extras without connecting.
            routes = routes_from(args, service["environment"])
            backends = resolve(get_plugin_manager(), routes).backends
            assert backends, name


def test_every_bridge_store_variable_is_read_and_documented_by_its_command() -> None:
    known = {TOKEN_ENV, *STORE_FLAG_ENV.values()}
    for name, service in own_image_services().items():
        command = service["command"][0]
        documented = help_text(command) + help_text(*service["command"][:2])
        for variable in service.get("environment", {}):
            if variable.startswith("BRIDGE_STORE_"):
                assert variable in known, (name, variable)
                assert variable in documented, (name, variable)


def test_store_servers_share_one_configuration_by_environment() -> None:
    servers = [name for name, svc in own_image_services().items() if svc["command"][0] == "serve"]
    assert sorted(servers) == ["store", "store-alice", "store-bob"]
    environments = [SERVICES[name]["environment"] for name in servers]
    assert all(env == environments[0] for env in environments)
    # The migrate job reaches the same backends; it serves nothing, so it has no token.
    assert SERVICES["migrate"]["environment"] == {
        name: value for name, value in environments[0].items() if name != TOKEN_ENV
    }
    routes = routes_from(parse("store"), environments[0])
    # Rows in Postgres, the event log in Redis, blobs in the bucket.
    assert urlsplit(routes.agents).hostname == urlsplit(routes.runs).hostname == "postgres"
    assert urlsplit(routes.run_events).hostname == "redis"
    assert routes.checkpoints.startswith("s3://")
    for name in servers:
        args = parse(name)
        # The migrate job upgraded the schema; servers never race to.
        assert not args.migrate, name
        assert all(flag is None for flag in (args.store, args.agents, args.checkpoints)), name
        assert healthcheck_port(name) == args.port == 8787
        assert SERVICES[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )
    assert parse("migrate").db_command == "upgrade"


def test_each_bridge_runs_beside_its_own_store_server() -> None:
    for bridge, store in SIDECAR_PAIRS.items():
        service = SERVICES[bridge]
        args = parse(bridge)
        # The bridge listens on loopback only, so it shares its store's network.
        assert service["network_mode"] == f"service:{store}"
        callback = urlsplit(args.store_callback_url)
        assert (callback.hostname, callback.port) == ("127.0.0.1", parse(store).port)
        assert parse(store).host == "127.0.0.1"
        assert service["depends_on"] == {store: {"condition": "service_healthy"}}
        assert service["init"] is True
        assert healthcheck_port(bridge) == args.port
        # The token comes from the environment, which bridge-store keeps from the bridge.
        assert TOKEN_ENV in service["environment"]
        assert args.store_auth_token_file is None
    assert parse("store").host == "0.0.0.0"
    assert SERVICES["store"]["ports"] == ["127.0.0.1:8787:8787"]


def test_dependencies_wait_for_health_or_completion() -> None:
    for name, service in SERVICES.items():
        for dependency, condition in service.get("depends_on", {}).items():
            assert dependency in SERVICES, (name, dependency)
            if condition["condition"] == "service_healthy":
                assert "healthcheck" in SERVICES[dependency], (name, dependency)
            else:
                assert condition["condition"] == "service_completed_successfully"
                # A one-shot job: restarting it would never complete.
                assert "restart" not in SERVICES[dependency], dependency


def test_the_checkpoint_bucket_is_created_and_redis_persists() -> None:
    routes = routes_from(parse("store"), SERVICES["store"]["environment"])
    bucket = urlsplit(routes.checkpoints).hostname
    create = " ".join(SERVICES["create-bucket"]["entrypoint"])
    assert f"mc mb --ignore-existing store/{bucket}" in create
    assert "http://minio:9000" in create
    assert "endpoint_url=http://minio:9000" in routes.checkpoints
    assert SERVICES["create-bucket"]["depends_on"]["minio"]["condition"] == "service_healthy"
    redis_command = SERVICES["redis"]["command"]
    assert redis_command[redis_command.index("--appendonly") + 1] == "yes"


def test_dockerfile_copies_every_packaged_directory() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    package_dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    top_dirs = {path.split("/")[0] for path in package_dirs.values()}
    for directory in top_dirs:
        assert f"COPY {directory} ./{directory}" in dockerfile, directory
    assert 'ENTRYPOINT ["bridge-store"]' in dockerfile
    extras = re.search(r'pip install [^\n]*"\.\[([^\]]*)\]"', dockerfile)
    assert extras is not None
    # The image runs the bridge too.
    assert "client" in extras.group(1).split(",")
