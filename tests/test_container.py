"""The image the Dockerfile builds, run by the engine (scripts/ensure-docker).

The image runs as its user with the Dockerfile's defaults and its HEALTHCHECK turns
healthy; `docker stop` ends it by itself within its grace period. Then the real
bridge on the host drives an agent's life cycle against a container keeping SQLite
on a volume; the container is killed with SIGKILL, started again on the volume, and
the whole history is there. Every container is on the host network or on none, so
all traffic stays on loopback.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import time
from pathlib import Path

import pytest

from bridge_store import __version__
from bridge_store.server.serving import GRACEFUL_SHUTDOWN_SECONDS
from testkit.cursor_api import CursorApiStub
from testkit.services import free_port
from tests.support.container_history import assert_history_served, life_cycle
from tests.support.docker import BuiltImage, docker, inspect, make_volume, run_container
from tests.support.dockerfile import Dockerfile

pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.usefixtures("docker_cleanup"),
]

DOCKERFILE = Dockerfile.read()
CONTAINER_DOCS = Path(__file__).resolve().parent.parent / "docs" / "container.md"
#: The documented run's port, replaced by a free one here.
DOCUMENTED_PORT = "8787"


def documented_run(*, volume: str, token: str, port: int) -> tuple[tuple[str, ...], list[str]]:
    """docs/container.md's ``docker run`` of a server keeping SQLite on a volume, as
    this suite runs it: its options (but ``-d`` and ``--name``, which ``run_container``
    gives) with this test's volume and token, and serve's arguments with a free port."""
    blocks = re.findall(r"```sh\n(.*?)```", CONTAINER_DOCS.read_text(), re.S)
    (run,) = (
        line
        for block in blocks
        for line in block.replace("\\\n", " ").splitlines()
        if line.startswith("docker run ") and ":/data" in line
    )
    argv = shlex.split(run)[2:]
    at = argv.index(f"bridge-store:{__version__}")
    options, args = argv[:at], argv[at + 1 :]
    assert options[:3] == ["-d", "--name", "bridge-store"], run
    replaced = {
        "bridge-store-data:/data": f"{volume}:/data",
        "BRIDGE_STORE_AUTH_TOKEN=$(openssl rand -hex 32)": f"BRIDGE_STORE_AUTH_TOKEN={token}",
    }
    assert set(replaced) <= set(options), run
    assert args[-2:] == ["--port", DOCUMENTED_PORT], run
    return tuple(replaced.get(option, option) for option in options[3:]), [*args[:-1], str(port)]


def test_the_image_runs_as_its_user_turns_healthy_and_stops_within_its_grace(
    project_image: BuiltImage,
) -> None:
    # The defaults as a user gets them: no arguments; on a network of its own, so the
    # image's port (8787) is its own and the HEALTHCHECK probes it as written.
    container = run_container(project_image.tag, options=("--network", "none"))
    container.wait_healthy()
    assert container.exec("id", "-u") == str(DOCKERFILE.uid)
    server_uid = container.exec("stat", "-c", "%u", "/proc/1")
    assert server_uid == str(DOCKERFILE.uid)
    # The database and the generated token on the volume, the user's and private.
    listing = container.exec("stat", "-c", "%n %u %a", "bridge-store.db", "bridge-store.token")
    assert listing.splitlines() == [
        f"bridge-store.db {DOCKERFILE.uid} 600",
        f"bridge-store.token {DOCKERFILE.uid} 600",
    ]

    grace = GRACEFUL_SHUTDOWN_SECONDS + 10
    started = time.monotonic()
    docker("stop", "--time", str(grace), container.name, timeout=grace + 30)
    took = time.monotonic() - started
    state = container.state()
    # Exit 0 by itself on SIGTERM: not killed when the grace period ran out (137).
    assert (state["ExitCode"], state["OOMKilled"]) == (0, False), container.logs()[-2000:]
    assert took < grace
    assert "Finished server process" in container.logs()


def test_the_real_bridge_keeps_its_history_in_the_container_across_a_sigkill(
    project_image: BuiltImage, cursor_api: CursorApiStub, tmp_path: Path
) -> None:
    volume = make_volume()
    port = free_port()
    token = secrets.token_hex(16)
    url = f"http://127.0.0.1:{port}/"
    # docs/container.md's command, literally but for the names, the token and the port.
    options, args = documented_run(volume=volume, token=token, port=port)
    assert options == (
        "--network",
        "host",
        "-v",
        f"{volume}:/data",
        "-e",
        f"BRIDGE_STORE_AUTH_TOKEN={token}",
    )
    assert args == ["serve", "--host", "127.0.0.1", "--port", str(port)]
    container = run_container(project_image.tag, *args, options=options)
    container.wait_ready(url)
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    before = life_cycle(url, token, workspace, cursor_api)
    assert len(before["agents"]) == 1
    assert len(before["events"]) == 1

    docker("kill", "--signal", "KILL", container.name)
    state = container.state()
    assert (state["Running"], state["ExitCode"]) == (False, 137)
    docker("start", container.name)
    container.wait_ready(url)
    assert_history_served(url, token, workspace, cursor_api, before)
    # The history is in SQLite on the volume (the container's /data), nowhere else.
    mounts = inspect("container", container.name)["Mounts"]
    assert [(m["Name"], m["Destination"]) for m in mounts] == [(volume, "/data")]
    files = container.exec("ls", "/data").split()
    assert "bridge-store.db" in files
    # The ready line names the store; printed again on the second start.
    ready_lines = [
        json.loads(line.partition("bridge-store ready ")[2])
        for line in container.logs().splitlines()
        if line.startswith("bridge-store ready ")
    ]
    assert [line["url"] for line in ready_lines] == [url, url]
