"""docker-compose.yml run as it is, plus an override that puts it on loopback.

The override (a second ``-f`` file, written per test) changes only where things
listen: every service on the host network, each on a free port, never the machine's
own Postgres (5432) or Redis (6379); the store servers on the session's image
(``up --no-build``); the bridges' workspaces in the test's directory. Everything else
(images, commands, environment, health checks, dependencies, volumes, jobs) is the
file users run. The compose command is the plugin's (``docker compose``) where there
is one, else Debian's ``docker-compose``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testkit.services import free_port
from tests.support.docker import DockerError, docker
from tests.support.dockerfile import ROOT, Dockerfile

COMPOSE_FILE = ROOT / "docker-compose.yml"
#: Where the file's services listen inside their own networks.
POSTGRES_AT, REDIS_AT, MINIO_AT = "postgres:5432", "redis:6379", "minio:9000"
STORE_PORT, BRIDGE_PORT = 8787, 8765
COMPOSE_TIMEOUT_SECONDS = 600.0
PROJECT_LABEL = "com.docker.compose.project"


def compose_command() -> list[str]:
    plugin = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, timeout=30, check=False
    )
    if plugin.returncode == 0:
        return ["docker", "compose"]
    standalone = shutil.which("docker-compose")
    assert standalone, "no compose command: run scripts/ensure-docker"
    return [standalone]


def load() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return compose


def replace_all(value: str, replacements: Mapping[str, str]) -> str:
    for old, new in replacements.items():
        value = value.replace(old, new)
    return value


def with_port(command: list[str], port: int) -> list[str]:
    """``command`` listening on loopback at ``port`` (its --host and --port replaced)."""
    replaced = list(command)
    replaced[replaced.index("--port") + 1] = str(port)
    if "--host" in replaced:
        replaced[replaced.index("--host") + 1] = "127.0.0.1"
    return replaced


def host_network_override(image: str, workspaces: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """The override, and the free port each listening service got."""
    services = load()["services"]
    ports = {name: free_port() for name in ("postgres", "redis", "minio")}
    addresses = {
        POSTGRES_AT: f"127.0.0.1:{ports['postgres']}",
        REDIS_AT: f"127.0.0.1:{ports['redis']}",
        MINIO_AT: f"127.0.0.1:{ports['minio']}",
    }
    override: dict[str, dict[str, Any]] = {name: {"network_mode": "host"} for name in services}
    override["postgres"] |= {
        "environment": {"PGPORT": str(ports["postgres"])},
        "command": ["postgres", "-c", "listen_addresses=127.0.0.1"],
    }
    redis = ["--bind", "127.0.0.1", "--port", str(ports["redis"])]
    override["redis"] |= {
        "command": services["redis"]["command"] + redis,
        "healthcheck": {
            "test": [*services["redis"]["healthcheck"]["test"], "-p", str(ports["redis"])]
        },
    }
    credentials = services["minio"]["environment"]
    override["minio"] |= {
        "command": [*services["minio"]["command"], "--address", addresses[MINIO_AT]],
        # Where `mc ready local` (its health check) finds the moved server.
        "environment": {
            "MC_HOST_local": f"http://{credentials['MINIO_ROOT_USER']}:"
            f"{credentials['MINIO_ROOT_PASSWORD']}@{addresses[MINIO_AT]}"
        },
    }
    override["create-bucket"]["entrypoint"] = [
        replace_all(part, addresses) for part in services["create-bucket"]["entrypoint"]
    ]
    # The store servers first, so each bridge can be pointed at its own.
    own = sorted(
        (name for name, service in services.items() if service.get("build") == "."),
        key=lambda name: services[name]["command"][0] == "bridge",
    )
    for name in own:
        service = services[name]
        override[name] |= {
            "image": image,
            "environment": {
                key: replace_all(str(value), addresses)
                for key, value in service.get("environment", {}).items()
            },
        }
        command = service["command"]
        if command[0] == "serve":
            ports[name] = free_port()
            override[name]["command"] = with_port(command, ports[name])
            override[name]["healthcheck"] = {
                "test": [
                    part.replace(f":{STORE_PORT}/", f":{ports[name]}/")
                    for part in service["healthcheck"]["test"]
                ]
            }
        elif command[0] == "bridge":
            ports[name] = free_port()
            (store,) = (dependency for dependency in service["depends_on"])
            bridge = with_port(command, ports[name])
            at = bridge.index("--store-callback-url") + 1
            bridge[at] = bridge[at].replace(f":{STORE_PORT}/", f":{ports[store]}/")
            workspace = workspaces / name
            workspace.mkdir(parents=True)
            # As the file's comment has users do: the bridges' user owns it.
            os.chown(workspace, Dockerfile.read().uid, Dockerfile.read().uid)
            override[name] |= {
                "command": bridge,
                "healthcheck": {
                    "test": [
                        part.replace(f", {BRIDGE_PORT})", f", {ports[name]})")
                        for part in service["healthcheck"]["test"]
                    ]
                },
                "volumes": [f"{workspace}:/workspace"],
            }
    return {"services": override}, ports


@dataclass
class ComposeProject:
    """One compose project: docker-compose.yml and the override, merged by compose.

    Compose merges the two files (``config``); the merged file, less its published
    ``ports`` (meaningless on the host network, and refused there by Debian's
    docker-compose, whose overrides can add to a list but not remove it), is what
    runs.
    """

    name: str
    directory: Path
    environment: dict[str, str]

    @property
    def merged(self) -> Path:
        return self.directory / "compose.merged.yml"

    def write_override(self, override: dict[str, Any]) -> None:
        path = self.directory / "compose.override.yml"
        path.write_text(yaml.safe_dump(override, sort_keys=False))
        merged = yaml.safe_load(
            self.compose("--file", str(COMPOSE_FILE), "--file", str(path), "config")
        )
        for service in merged["services"].values():
            service.pop("ports", None)
        self.merged.write_text(yaml.safe_dump(merged, sort_keys=False))

    def run(self, *args: str, timeout: float = COMPOSE_TIMEOUT_SECONDS) -> str:
        return self.compose("--file", str(self.merged), *args, timeout=timeout)

    def compose(self, *args: str, timeout: float = COMPOSE_TIMEOUT_SECONDS) -> str:
        command = [*compose_command(), "--project-name", self.name, *args]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.environment,
            cwd=ROOT,
            check=False,
        )
        if result.returncode != 0:
            raise DockerError(f"compose {' '.join(args)} failed: {result.stderr.strip()[-3000:]}")
        return result.stdout

    def containers(self, *, all_states: bool = True) -> list[str]:
        flags = ["--all"] if all_states else []
        out = docker("ps", *flags, "--quiet", "--filter", f"label={PROJECT_LABEL}={self.name}")
        return out.split()

    def container_of(self, service: str) -> str:
        (container,) = docker(
            "ps",
            "--all",
            "--quiet",
            "--filter",
            f"label={PROJECT_LABEL}={self.name}",
            "--filter",
            f"label=com.docker.compose.service={service}",
        ).split()
        return container

    def leftovers(self) -> dict[str, list[str]]:
        """What of the project is still on the machine: containers, volumes, networks."""
        label = f"label={PROJECT_LABEL}={self.name}"
        return {
            "containers": self.containers(),
            "volumes": docker("volume", "ls", "--quiet", "--filter", label).split(),
            "networks": docker("network", "ls", "--quiet", "--filter", label).split(),
        }
