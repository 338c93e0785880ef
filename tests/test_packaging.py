"""A plain wheel is self-contained: migrations included, serving from a clean venv.

The clean venv gets the wheel's dependencies from a wheelhouse the suite keeps
(tests/support/cache.py: ``~/.cache/bridge-store-tests/wheelhouse``), installed with
``--no-index``: only the first run, or one after the dependencies changed, needs
the package index, to fill it with ``pip download``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .support.cache import locked
from .support.server import CALL_STORE_PATH

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # pip builds in the source tree and setuptools reuses build/lib, where files
    # deleted since the last build linger; build from a copy of the working tree's
    # files that git tracks or would track.
    source = tmp_path_factory.mktemp("source")
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for relative in filter(None, tracked.split("\0")):
        if (ROOT / relative).is_file():
            (source / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / relative, source / relative)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(out),
            str(source),
        ],
        check=True,
    )
    (built,) = out.glob("bridge_store-*.whl")
    return built


def test_wheel_ships_migrations_backends_and_generated_code(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "bridge_store/cli/__init__.py",
        "bridge_store/py.typed",
        "bridge_store/_generated/sdk/v1/sdk_store_callback_service_pb2.py",
        "bridge_store/conformance/suite.py",
        # bridge-store demo's sample, and the offline stand-in bridge --offline starts.
        "bridge_store/demo/history.py",
        "bridge_store/demo/stories.py",
        "bridge_store/client/offline_api.py",
        # The history viewer's templates and assets: no CDN, no build step.
        "bridge_store/viewer/templates/base.html",
        "bridge_store/viewer/templates/run.html",
        "bridge_store/viewer/templates/_blocks.html",
        "bridge_store/viewer/static/viewer.css",
        "bridge_store/viewer/static/viewer.js",
        "bridge_store_migrations/env.py",
        "bridge_store_migrations/script.py.mako",
        "bridge_store_memory/__init__.py",
        "bridge_store_sql/__init__.py",
        "bridge_store_redis/__init__.py",
        "bridge_store_s3/__init__.py",
    ):
        assert required in names, required
    assert any(
        name.startswith("bridge_store_migrations/versions/")
        and name.endswith(".py")
        and not name.endswith("__init__.py")
        for name in names
    )
    # The tests, the benchmarks and the infrastructure they share stay in the tree.
    for development in ("tests/", "bench/", "testkit/"):
        assert not any(name.startswith(development) for name in names), development
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[bridge_store.backends]" in text
    assert "bridge-store = bridge_store.entry:main" in text


def install_from_the_wheelhouse(python: Path, wheel: Path, scratch: Path) -> None:
    """Install ``wheel`` and its dependencies with no index, filling the wheelhouse first
    (from the index) when it lacks one of them."""
    with locked("wheelhouse") as root:
        wheelhouse = root / "wheelhouse"
        pip = [str(python), "-m", "pip"]
        offline = [*pip, "install", "--quiet", "--no-index", "--find-links", str(wheelhouse)]
        if subprocess.run([*offline, str(wheel)], capture_output=True, check=False).returncode:
            # The dependencies alone: a bridge_store wheel of the same name kept in the
            # wheelhouse would stand in for this one, with its older requirements.
            requirements = scratch / "requirements.txt"
            requirements.write_text("\n".join(requires(wheel)) + "\n")
            subprocess.run(
                [*pip, "download", "--quiet", "--dest", str(wheelhouse), "-r", str(requirements)],
                check=True,
                timeout=600,
            )
            subprocess.run([*offline, str(wheel)], check=True)


def requires(wheel: Path) -> list[str]:
    """The wheel's own requirements (``Requires-Dist`` without an extra), markers kept."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(metadata).decode().splitlines()
    return [
        line.removeprefix("Requires-Dist: ")
        for line in lines
        if line.startswith("Requires-Dist: ") and "extra ==" not in line
    ]


@pytest.mark.slow
def test_wheel_serves_from_a_clean_venv(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install_from_the_wheelhouse(venv / "bin" / "python", wheel, tmp_path)
    workdir = tmp_path / "run"
    workdir.mkdir()
    process = subprocess.Popen(
        [str(venv / "bin" / "bridge-store"), "serve", "--port", "0"],
        cwd=workdir,  # away from the source tree, so only the installed wheel can be imported
        env={"PATH": str(venv / "bin"), "HOME": str(tmp_path)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = next(line for line in process.stderr if line.startswith("bridge-store ready "))
        ready = json.loads(line.removeprefix("bridge-store ready "))
        token = Path(ready["authTokenFile"]).read_text().strip()
        agent = {"agentId": "a1", "cwd": "/w", "updatedAt": 1, "createdAt": 1, "status": "idle"}
        headers = {"Authorization": f"Bearer {token}"}
        created = httpx.post(
            ready["url"] + CALL_STORE_PATH,
            headers=headers,
            json={"substore": "agents", "method": "create", "input": {"agent": agent}},
        )
        assert created.json() == {"output": agent}
        fetched = httpx.post(
            ready["url"] + CALL_STORE_PATH,
            headers=headers,
            json={"substore": "agents", "method": "get", "input": {"agentId": "a1"}},
        )
        assert fetched.json() == {"output": agent}
        # The viewer's pages and assets come out of the wheel too.
        sign_in = httpx.get(ready["url"] + "ui/sign-in")
        assert sign_in.status_code == 200
        assert 'name="token"' in sign_in.text
        script = httpx.get(ready["url"] + "ui/static/viewer.js")
        assert script.status_code == 200
        assert "IntersectionObserver" in script.text
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert process.returncode == 0
    assert (workdir / "bridge-store.db").exists()
    current = subprocess.run(
        [str(venv / "bin" / "bridge-store"), "db", "current"],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "(no schema)" not in current.stdout


#: The Pythons bridge-store supports; each is on the machine image (pyenv).
SUPPORTED_PYTHONS = ("3.11", "3.12", "3.13")


def interpreter(minor: str) -> Path:
    """The newest ``minor``.x Python on this machine: pyenv's, else ``pythonX.Y``."""
    found: list[tuple[int, Path]] = []
    for python in (Path.home() / ".pyenv" / "versions").glob(f"{minor}.*/bin/python"):
        patch = re.fullmatch(rf"{re.escape(minor)}\.(\d+)", python.parent.parent.name)
        if patch is not None:
            found.append((int(patch.group(1)), python))
    if found:
        return max(found)[1]
    on_path = shutil.which(f"python{minor}")
    assert on_path is not None, f"no Python {minor} on this machine (pyenv or PATH)"
    return Path(on_path)


def extras_of(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(metadata).decode().splitlines()
    return [line.removeprefix("Provides-Extra: ") for line in lines if "Provides-Extra:" in line]


def extra_requirements(wheel: Path) -> list[Requirement]:
    """Every requirement of the wheel that an extra brings."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(metadata).decode().splitlines()
    return [
        Requirement(line.removeprefix("Requires-Dist: "))
        for line in lines
        if line.startswith("Requires-Dist: ") and "extra ==" in line
    ]


def resolve(pip: list[str], report: Path, requirement: str) -> Any:
    """What ``pip install requirement`` would install (pip's --report), or a failure."""
    resolved = subprocess.run(
        [*pip, "install", "--dry-run", "--quiet", "--report", str(report), requirement],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    return json.loads(report.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("minor", SUPPORTED_PYTHONS)
def test_every_extra_resolves_with_the_pip_a_new_venv_ships(
    wheel: Path, tmp_path: Path, minor: str
) -> None:
    """``pip install 'bridge-store[otel]'`` (and ``[all]``) on a stock venv's pip.

    The pip Python 3.11's venv ships (23.2) stopped with ResolutionImpossible on the
    open OpenTelemetry ranges. pip resolves every extra together here, as an install
    does (``--dry-run``: the resolution is the test; installing adds minutes and
    proves nothing more), from the index through pip's own cache.
    """
    python = interpreter(minor)
    venv = tmp_path / "venv"
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    bundled = subprocess.run(
        [str(python), "-m", "ensurepip", "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    shipped = subprocess.run([*pip, "--version"], capture_output=True, text=True, check=True)
    assert shipped.stdout.split()[1] == bundled  # the venv's own pip, not upgraded
    extras = extras_of(wheel)
    assert {"otel", "all"} <= set(extras)
    # [otel] alone first, as the command was; then every extra at once, which
    # is what [all] brings.
    alone = resolve(pip, tmp_path / "otel.json", f"{wheel}[otel]")
    assert "opentelemetry-sdk" in {
        canonicalize_name(item["metadata"]["name"]) for item in alone["install"]
    }
    answer = resolve(pip, tmp_path / "report.json", f"{wheel}[{','.join(extras)}]")
    chosen = {
        canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
        for item in answer["install"]
    }
    environment = {**default_environment(), **answer["environment"]}
    for requirement in extra_requirements(wheel):
        extra_markers = [{**environment, "extra": extra} for extra in extras]
        if requirement.marker is not None and not any(
            requirement.marker.evaluate(markers) for markers in extra_markers
        ):
            continue
        name = canonicalize_name(requirement.name)
        if name == "bridge-store":
            continue  # [all] names the other extras
        assert name in chosen, (minor, requirement)
        assert requirement.specifier.contains(chosen[name], prereleases=True), (
            minor,
            requirement,
            chosen[name],
        )
