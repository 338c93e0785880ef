"""docker-compose.yml and the Dockerfile stay in step with the CLI and the package."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from bridge_store.cli import build_parser, routes_from
from bridge_store.plugins import get_plugin_manager
from bridge_store.routing import resolve

ROOT = Path(__file__).resolve().parent.parent


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def own_image_services() -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in compose()["services"].items() if svc.get("build") == "."}


def test_every_bridge_store_command_parses_and_its_urls_resolve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    services = own_image_services()
    assert {"migrate", "store-alice", "store-bob", "bridge-alice", "bridge-bob"} <= set(services)
    for name, service in services.items():
        for key, value in service.get("environment", {}).items():
            if key == "BRIDGE_STORE_URL":
                monkeypatch.setenv(key, value)
        args = build_parser().parse_args(service["command"])
        if args.command in ("serve", "db"):
            # Opening checks scheme, parameters and extras without connecting.
            backends, _ = resolve(get_plugin_manager(), routes_from(args))
            assert backends, name
        monkeypatch.delenv("BRIDGE_STORE_URL", raising=False)


def test_sidecars_share_one_backend_and_skip_migrations() -> None:
    services = own_image_services()
    parser = build_parser()
    store_args = [
        parser.parse_args(services[name]["command"]) for name in ("store-alice", "store-bob")
    ]
    assert all(not args.migrate for args in store_args)
    assert store_args[0].checkpoints == store_args[1].checkpoints
    urls = {
        services[name]["environment"]["BRIDGE_STORE_URL"]
        for name in ("migrate", "store-alice", "store-bob")
    }
    assert len(urls) == 1
    bridges = {
        name: parser.parse_args(services[name]["command"])
        for name in ("bridge-alice", "bridge-bob")
    }
    assert bridges["bridge-alice"].store_url == "http://store-alice:8787/"
    assert bridges["bridge-bob"].store_url == "http://store-bob:8787/"


def test_dockerfile_copies_every_packaged_directory() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    package_dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    top_dirs = {path.split("/")[0] for path in package_dirs.values()}
    for directory in top_dirs:
        assert f"COPY {directory} ./{directory}" in dockerfile, directory
