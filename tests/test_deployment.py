"""docker-compose.yml and the Dockerfile stay in step with the CLI and the package.

Both are checked here as data (tests/test_container.py and tests/test_compose.py run
them on the engine): every command of the project's image parses with the real CLI
parser, every BRIDGE_STORE_* variable is one the CLI reads and names in its help,
store URLs resolve to installed backends, the services' dependencies, health checks
and ports fit together, images are pinned, and the health checks, run against real
servers, pass only when serve is ready. deploy/kubernetes is checked the same way by
tests/test_kubernetes.py.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import tomllib
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import yaml

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.cli import build_parser
from bridge_store.cli.shared.store_options import DEFAULT_STORE_URL, STORE_FLAG_ENV, routes_from
from bridge_store.ops.readiness import READY_PATH
from bridge_store.security.tokens import DEFAULT_TOKEN_FILE, TOKEN_ENV
from bridge_store.stack.stores import resolve
from tests.support.dockerfile import ROOT, Dockerfile
from tests.support.probes import LOOPBACK_URL, ProbeTargets, probe_targets

PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
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
    package_dirs = PYPROJECT["tool"]["setuptools"]["package-dir"]
    top_dirs = {path.split("/")[0] for path in package_dirs.values()}
    for directory in top_dirs:
        assert f"COPY {directory} ./{directory}" in dockerfile, directory
    assert 'ENTRYPOINT ["bridge-store"]' in dockerfile
    extras = re.search(r'pip install [^\n]*"\.\[([^\]]*)\]"', dockerfile)
    assert extras is not None
    # The image runs the bridge too.
    assert "client" in extras.group(1).split(",")


# -- the image ------------------------------------------------------------------------

DOCKERFILE = Dockerfile.read()


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeTargets]:
    with probe_targets(tmp_path_factory.mktemp("probes")) as servers:
        yield servers


def test_the_base_image_is_pinned_to_a_python_the_project_supports() -> None:
    (base,) = DOCKERFILE.all("FROM")
    pinned = re.fullmatch(r"python:(\d+)\.(\d+)\.(\d+)-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base)
    assert pinned, f"FROM {base} is not pinned to a full Python version"
    requires = PYPROJECT["project"]["requires-python"]
    minimum = re.fullmatch(r">=(\d+)\.(\d+)", requires)
    assert minimum is not None
    assert (int(pinned[1]), int(pinned[2])) >= (int(minimum[1]), int(minimum[2]))


def test_the_image_keeps_its_history_on_a_volume_owned_by_a_fixed_non_root_user() -> None:
    uid = DOCKERFILE.uid
    assert uid > 0
    (volume,) = json.loads(DOCKERFILE.last("VOLUME"))
    install = " ".join(DOCKERFILE.all("RUN"))
    assert f"useradd --uid {uid}" in install
    assert f"chown {uid}:{uid} {volume}" in install
    # serve's relative defaults (the SQLite file, a generated token) land on the volume.
    assert DOCKERFILE.last("WORKDIR") == volume
    assert DEFAULT_STORE_URL.startswith("sqlite:///")
    assert not DEFAULT_STORE_URL.startswith("sqlite:////")
    assert "/" not in DEFAULT_TOKEN_FILE
    # An ENV would beat a --config file; the default store comes from the directory.
    assert not [env for env in DOCKERFILE.all("ENV") if "BRIDGE_STORE_" in env]


def test_the_image_serves_on_the_port_it_exposes() -> None:
    assert DOCKERFILE.exec_form("ENTRYPOINT") == ["bridge-store"]
    args = build_parser().parse_args(DOCKERFILE.exec_form("CMD"))
    assert (args.command, args.host) == ("serve", "0.0.0.0")
    assert DOCKERFILE.all("EXPOSE") == [str(args.port)]


def test_the_health_check_asks_readyz_and_follows_readiness(targets: ProbeTargets) -> None:
    command = DOCKERFILE.exec_form("HEALTHCHECK")
    asked = LOOPBACK_URL.search(command[-1])
    assert asked is not None
    args = build_parser().parse_args(DOCKERFILE.exec_form("CMD"))
    assert (int(asked["port"]), asked["path"]) == (args.port, READY_PATH)
    # The standard library only: the image has no curl.
    assert command[:2] == ["python", "-c"]
    assert targets.run_command(targets.ready, command) == 0
    assert targets.run_command(targets.unready, command) != 0


# -- compose --------------------------------------------------------------------------

#: A version tag: numbers (16.10, 7.4.6) or MinIO's release stamps.
VERSION_TAG = re.compile(r"\d+(\.\d+)+|RELEASE\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ")


def test_compose_images_are_pinned_to_versions() -> None:
    images = {name: svc["image"] for name, svc in SERVICES.items() if "image" in svc}
    assert images
    for name, image in images.items():
        _, _, tag = image.rpartition(":")
        assert VERSION_TAG.fullmatch(tag), f"{name}: {image} is not pinned to a version"


def test_the_projects_services_share_the_image_the_kubernetes_manifests_name() -> None:
    version = PYPROJECT["project"]["version"]
    for name, service in own_image_services().items():
        assert service["image"] == f"bridge-store:{version}", name


def test_the_migrate_job_waits_until_every_backend_it_upgrades_is_there() -> None:
    # `db upgrade` opens every route, the bucket included: run before the create-bucket
    # job it exited 2 ("bucket 'agent-checkpoints' does not exist") and nothing started.
    routes = routes_from(parse("migrate"), SERVICES["migrate"]["environment"])
    hosts = {
        urlsplit(routes.agents).hostname,
        urlsplit(routes.run_events).hostname,
        urlsplit(dict(parse_qsl(urlsplit(routes.checkpoints).query))["endpoint_url"]).hostname,
    }
    assert hosts == {"postgres", "redis", "minio"}
    depends = SERVICES["migrate"]["depends_on"]
    for host in hosts:
        ready = depends.get(host, {}).get("condition") == "service_healthy"
        # Or a job that waited for it and made what the upgrade needs (the bucket).
        prepared = [
            job
            for job, condition in depends.items()
            if condition["condition"] == "service_completed_successfully"
            and host in SERVICES[job].get("depends_on", {})
        ]
        assert ready or prepared, host


def test_postgres_is_healthy_only_once_it_answers_over_tcp() -> None:
    # On its first start the image makes the database with a server listening on its
    # socket only (seen answering pg_isready there while TCP was refused); the jobs
    # and servers that wait for health connect over TCP.
    test = SERVICES["postgres"]["healthcheck"]["test"]
    assert test[:2] == ["CMD", "pg_isready"]
    assert test[test.index("-h") + 1] == "127.0.0.1"


def test_compose_store_servers_are_healthy_when_ready(targets: ProbeTargets) -> None:
    for name, service in own_image_services().items():
        if service["command"][0] != "serve":
            continue
        command = service["healthcheck"]["test"][1:]
        assert LOOPBACK_URL.search(command[-1])["path"] == READY_PATH, name  # type: ignore[index]
        assert targets.run_command(targets.ready, command) == 0, name
        assert targets.run_command(targets.unready, command) != 0, name
