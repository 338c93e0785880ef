"""docker-compose.yml brought up whole, on the engine (scripts/ensure-docker).

The file as users run it, moved onto loopback by an override (tests/support/compose.py):
`up` brings every service up healthy and both jobs to a clean exit; the real bridge
on the host drives an agent's life cycle against the `store` service, and each kind
of document lands where the file routes it (rows in Postgres, run events in Redis,
checkpoint blobs in the bucket); `down -v` then leaves no container, volume or
network of the project behind.
"""

from __future__ import annotations

import base64
import os
import secrets
from pathlib import Path

import botocore.session
import pytest

from testkit.cursor_api import CursorApiStub
from tests.support.compose import ComposeProject, host_network_override, load
from tests.support.container_history import life_cycle
from tests.support.docker import SESSION, BuiltImage, Container, DockerError, docker, inspect
from tests.support.server import StoreHttpClient

pytestmark = [pytest.mark.docker, pytest.mark.slow]

GRACE_SECONDS = "40"


@pytest.fixture
def project(tmp_path: Path, project_image: BuiltImage) -> tuple[ComposeProject, dict[str, int]]:
    token = secrets.token_hex(32)
    project = ComposeProject(
        f"bridge-store-test-{SESSION}", tmp_path, {**os.environ, "BRIDGE_STORE_AUTH_TOKEN": token}
    )
    override, ports = host_network_override(project_image.tag, tmp_path / "workspaces")
    project.write_override(override)
    return project, ports


def test_compose_up_serves_the_real_bridge_on_every_backend_and_down_leaves_nothing(
    project: tuple[ComposeProject, dict[str, int]],
    cursor_api: CursorApiStub,
    tmp_path: Path,
) -> None:
    compose, ports = project
    services = load()["services"]
    token = compose.environment["BRIDGE_STORE_AUTH_TOKEN"]
    try:
        # Dependencies wait for health or completion, as the file says.
        compose.run("up", "--detach", "--no-build")
        jobs = {"migrate", "create-bucket"}
        for name in jobs:
            state = inspect("container", compose.container_of(name))["State"]
            assert (state["Status"], state["ExitCode"]) == ("exited", 0), name
        for name in set(services) - jobs:
            assert "healthcheck" in services[name], name
            Container(compose.container_of(name)).wait_healthy()

        url = f"http://127.0.0.1:{ports['store']}/"
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        before = life_cycle(url, token, workspace, cursor_api)
        (agent,) = before["agents"]
        store = StoreHttpClient(url, token)
        blob = {"agentId": agent["agentId"], "blobId": "root"}
        data = base64.b64encode(os.urandom(4096)).decode("ascii")
        store.call("checkpoints", "create", {**blob, "data": data})
        store.close()

        # Where the file routes each kind: agents and runs in Postgres ...
        postgres = compose.container_of("postgres")
        rows = docker(
            "exec",
            postgres,
            "psql",
            "-U",
            "postgres",
            "-d",
            "bridge_store",
            "-tAc",
            "select (select count(*) from agents), (select count(*) from runs)",
        )
        assert rows == f"1|{len(before['runs'][agent['agentId']])}"
        # ... run events under the prefix in Redis ...
        redis = compose.container_of("redis")
        keys = docker(
            "exec",
            redis,
            "redis-cli",
            "-p",
            str(ports["redis"]),
            "--scan",
            "--pattern",
            "{team:runEvents}*",
        ).split()
        assert keys, "no run events in Redis"
        # ... checkpoint blobs in the bucket.
        s3 = botocore.session.get_session().create_client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{ports['minio']}",
            aws_access_key_id="bridge-store",
            aws_secret_access_key="bridge-store-secret",
            region_name="us-east-1",
        )
        listed = s3.list_objects_v2(Bucket="agent-checkpoints", Prefix="team")
        assert listed.get("KeyCount", 0) >= 1

        # The sidecar bridges answer on their own ports, each beside its store.
        for bridge in ("bridge-alice", "bridge-bob"):
            logs = docker("logs", compose.container_of(bridge))
            assert f'"port":{ports[bridge]}' in logs, bridge

        compose.run("down", "--volumes", "--timeout", GRACE_SECONDS)
        assert compose.leftovers() == {"containers": [], "volumes": [], "networks": []}
    except Exception as error:
        # What each service said last: a failure here is read from CI's log alone.
        try:
            error.add_note(compose.run("logs", "--no-color", "--tail", "20"))
        except DockerError as logs_failed:
            error.add_note(str(logs_failed))
        error.add_note(f"ports: {ports}")
        raise
    finally:
        if any(compose.leftovers().values()):
            compose.run("down", "--volumes", "--timeout", "5")
