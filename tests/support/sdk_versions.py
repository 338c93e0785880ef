"""Published ``cursor-sdk`` versions, each installed in a venv of its own, cached.

bridge-store serves every published bridge from cursor-sdk 0.1.9 on; the suite runs
the oldest, one from the middle and the newest against it. ``sdk_install(version)``
returns that version's venv, creating it on first use:

    $BRIDGE_STORE_TEST_CACHE/cursor-sdk-VERSION    (default ~/.cache/bridge-store-tests)

Creating one downloads the wheel (57 MB, Node included) from the package index, or
finds it in pip's cache, and takes about 10 s; later runs find the venv ready. A
venv that no longer works (its Python was replaced, say) is built again. Several
test sessions may ask at once (engineers share a machine): a file lock makes one
build while the others wait.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .cache import locked

#: Oldest published bridge with store callbacks; the first that writes sdkMetadata
#: (1.0.30; the middle of the range); the newest. README states this range.
OLDEST, MIDDLE, NEWEST = "0.1.9", "1.0.30", "1.1.0"
TESTED_VERSIONS = (OLDEST, MIDDLE, NEWEST)
#: Bridges before this one write no ``sdkMetadata`` into agent documents.
FIRST_WITH_SDK_METADATA = (1, 0, 30)

INSTALL_TIMEOUT_SECONDS = 600.0
#: Variables that make the SDK run another bridge than the one it bundles.
BRIDGE_OVERRIDES = ("CURSOR_SDK_BRIDGE_BIN", "CURSOR_SDK_USE_REMOTE_BRIDGE")
_PROBE = (
    "import importlib.metadata, json; from cursor_sdk._vendor import resolve_bridge_path; "
    "print(json.dumps({'version': importlib.metadata.version('cursor-sdk'), "
    "'launcher': resolve_bridge_path()}))"
)


@dataclass(frozen=True)
class SdkInstall:
    """A ``cursor-sdk`` installation: its Python and its bundled bridge."""

    version: str
    python: Path
    launcher: Path

    @property
    def bridge_dir(self) -> Path:
        """The vendored bridge (``.../cursor_sdk/_vendor/bridge``)."""
        return self.launcher.resolve().parent.parent

    @property
    def writes_sdk_metadata(self) -> bool:
        return version_tuple(self.version) >= FIRST_WITH_SDK_METADATA


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def probe(python: Path | str) -> SdkInstall | None:
    """The installation ``python`` sees, or None if it does not work."""
    env = {k: v for k, v in os.environ.items() if k not in BRIDGE_OVERRIDES}
    try:
        result = subprocess.run(
            [str(python), "-c", _PROBE], capture_output=True, text=True, env=env, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    found = json.loads(result.stdout)
    return SdkInstall(found["version"], Path(python), Path(found["launcher"]))


def current_install() -> SdkInstall:
    """The ``cursor-sdk`` installed with bridge-store (the ``client`` extra)."""
    install = probe(sys.executable)
    assert install is not None, "cursor-sdk is not installed: pip install -e '.[all]'"
    return install


def sdk_install(version: str) -> SdkInstall:
    """``cursor-sdk==version`` in its cached venv, created if missing or broken."""
    with locked(f"cursor-sdk-{version}") as root:
        venv = root / f"cursor-sdk-{version}"
        install = probe(venv / "bin" / "python") if venv.exists() else None
        if install is not None and install.version == version:
            return install
        # Built in place under the lock: a half-built venv (an interrupted run) fails
        # the probe above and is built again.
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                f"cursor-sdk=={version}",
            ],
            check=True,
            timeout=INSTALL_TIMEOUT_SECONDS,
        )
        install = probe(venv / "bin" / "python")
    assert install is not None, f"cursor-sdk {version} does not work in {venv}"
    assert install.version == version, install
    return install
