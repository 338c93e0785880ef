"""The Docker engine for the container tests: the CLI, the session's image, cleanup.

A pytest plugin (``tests/conftest.py``). ``scripts/ensure-docker`` (run by
``scripts/test``) installs and starts the engine and makes the base images; these
fixtures only use them. Everything a test makes carries the session's label
(:data:`TEST_LABEL`), so cleanup removes exactly that, even after a failure, and
never anything else on the machine.

``project_image`` builds the repository's Dockerfile once per session, on the host
network (so the build's own traffic stays off any bridge network), under a test-only
tag. The last build also keeps the tag :data:`CACHE_TAG`: its layers are the build
cache, so the next session's build of unchanged sources takes seconds.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.support.dockerfile import ROOT

#: The label on every container, volume and image the suite makes; its value is the session.
TEST_LABEL = "org.bridge-store.test"
SESSION = uuid.uuid4().hex[:12]
#: The one test image kept between sessions, for its layers (the build cache).
CACHE_TAG = "bridge-store-test:build-cache"
#: Bounds every docker command; builds and compose runs get their own, longer ones.
DOCKER_TIMEOUT_SECONDS = 120.0
BUILD_TIMEOUT_SECONDS = 900.0
#: How long a container may take to answer, or to turn healthy.
READY_TIMEOUT_SECONDS = 90.0
ENSURE = "scripts/ensure-docker"


class DockerError(AssertionError):
    """A docker command failed; the message carries its stderr."""


def docker(*args: str, timeout: float = DOCKER_TIMEOUT_SECONDS, check: bool = True) -> str:
    """Run ``docker ARGS`` and return its stdout (stripped)."""
    result = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise DockerError(f"docker {' '.join(args)} failed: {result.stderr.strip()[-2000:]}")
    return result.stdout.strip()


def engine_answers() -> bool:
    try:
        subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def inspect(kind: str, name: str) -> dict[str, Any]:
    """``docker KIND inspect NAME`` as JSON (container, volume, image)."""
    (found,) = json.loads(docker(kind, "inspect", name))
    assert isinstance(found, dict)
    return found


def labelled(kind: str, session: str = SESSION) -> list[str]:
    """The containers, volumes or networks this session made (by their label)."""
    listing = {"container": ["ps", "--all", "--quiet"], "volume": ["ls", "--quiet"]}
    args = listing.get(kind, ["ls", "--quiet"])
    out = docker(kind, *args, "--filter", f"label={TEST_LABEL}={session}")
    return out.split()


def remove_labelled(session: str = SESSION) -> None:
    """Remove this session's containers (with their anonymous volumes), then volumes."""
    containers = labelled("container", session)
    if containers:
        docker("container", "rm", "--force", "--volumes", *containers, check=False)
    volumes = labelled("volume", session)
    if volumes:
        docker("volume", "rm", "--force", *volumes, check=False)


def wait_for(condition: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting until {what}")
        time.sleep(0.25)


@dataclass
class Container:
    """A container this session runs, by name."""

    name: str
    started: float = field(default_factory=time.monotonic)

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = inspect("container", self.name)["State"]
        return state

    def health(self) -> str | None:
        health = self.state().get("Health")
        return None if health is None else str(health["Status"])

    def logs(self) -> str:
        result = subprocess.run(
            ["docker", "logs", self.name],
            capture_output=True,
            text=True,
            timeout=DOCKER_TIMEOUT_SECONDS,
            check=False,
        )
        return result.stdout + result.stderr

    def exec(self, *command: str, check: bool = True) -> str:
        return docker("exec", self.name, *command, check=check)

    def wait_healthy(self, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        def healthy() -> bool:
            state = self.state()
            assert state["Running"], f"{self.name} exited: {self.logs()[-2000:]}"
            return self.health() == "healthy"

        wait_for(healthy, f"{self.name} is healthy", timeout)

    def wait_ready(self, url: str, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        """Until ``url``/readyz answers 200 (for a container whose port is not 8787)."""

        def ready() -> bool:
            assert self.state()["Running"], f"{self.name} exited: {self.logs()[-2000:]}"
            try:
                return httpx.get(url.rstrip("/") + "/readyz", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(ready, f"{self.name} answers {url}readyz", timeout)


def run_container(image: str, *args: str, options: tuple[str, ...] = ()) -> Container:
    """``docker run --detach`` with this session's label and a unique name."""
    name = f"bridge-store-test-{SESSION}-{uuid.uuid4().hex[:6]}"
    docker(
        "run",
        "--detach",
        "--name",
        name,
        "--label",
        f"{TEST_LABEL}={SESSION}",
        *options,
        image,
        *args,
    )
    return Container(name)


def make_volume() -> str:
    name = f"bridge-store-test-{SESSION}-{uuid.uuid4().hex[:6]}"
    docker("volume", "create", "--label", f"{TEST_LABEL}={SESSION}", name)
    return name


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    #: How long the build took, in seconds (shown in the test run's summary).
    build_seconds: float


def build_image(tag: str) -> float:
    """Build the repository's Dockerfile as ``tag`` (and CACHE_TAG); the seconds it took."""
    started = time.monotonic()
    previous = docker("image", "ls", "--quiet", CACHE_TAG)
    docker(
        "build",
        "--network",
        "host",
        "--label",
        f"{TEST_LABEL}={SESSION}",
        "--tag",
        tag,
        "--tag",
        CACHE_TAG,
        str(ROOT),
        timeout=BUILD_TIMEOUT_SECONDS,
    )
    built = docker("image", "ls", "--quiet", CACHE_TAG)
    if previous and previous != built:
        # The last build's layers, now superseded (those still shared stay).
        docker("image", "rm", previous, check=False)
    return time.monotonic() - started


@pytest.fixture(scope="session")
def project_image() -> Iterator[BuiltImage]:
    """The repository's image, built once per session under a test-only tag."""
    if not engine_answers():
        pytest.fail(f"no Docker engine answers: run {ENSURE} (scripts/test does)")
    tag = f"bridge-store-test:{SESSION}"
    try:
        yield BuiltImage(tag, build_image(tag))
    finally:
        remove_labelled()
        # The tag only: CACHE_TAG keeps the layers for the next session's build.
        docker("image", "rm", tag, check=False)


@pytest.fixture
def docker_cleanup() -> Iterator[None]:
    """Whatever this test started or made is gone after it, pass or fail."""
    try:
        yield
    finally:
        remove_labelled()
