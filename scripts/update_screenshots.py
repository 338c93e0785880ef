"""Take the README's screenshot again, from ``bridge-store demo``, so it shows the viewer as it is.

Runs the demo in a temporary directory (its own store, any free port), signs in with
the token its ready line names, opens the first turn of "Fix the login redirect" with
its failing test run expanded, and writes ``docs/viewer-transcript.png``. Chromium is
Debian's (``scripts/ensure-browser`` installs it), driven by Playwright as the
browser tests drive it. Run from the repository with the dev install:

    .venv/bin/python scripts/update_screenshots.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
from playwright.sync_api import Page, ViewportSize, sync_playwright

from bridge_store.server.config import READY_PREFIX

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOT = ROOT / "docs" / "viewer-transcript.png"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
VIEWPORT: ViewportSize = {"width": 1280, "height": 900}
AGENT = "Fix the login redirect"
#: The failing tool call the picture opens, among the turn's cards.
OPENED_CALL = "run_terminal_cmd"
START_TIMEOUT_SECONDS = 120


def demo(directory: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """``bridge-store demo`` on a free port in ``directory``, and its ready line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge_store", "demo", "--port", "0", "--log-level", "warning"],
        cwd=directory,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith(READY_PREFIX):
            ready: dict[str, str] = json.loads(line.removeprefix(READY_PREFIX))
            return process, ready
    process.wait(START_TIMEOUT_SECONDS)
    raise SystemExit(f"bridge-store demo ended (status {process.returncode}) before it was ready")


def first_turn(viewer: str, token: str) -> str:
    """The address of the first turn of :data:`AGENT`, from the pages' JSON twins."""
    headers = {"Authorization": f"Bearer {token}"}
    agents = httpx.get(viewer, params={"format": "json"}, headers=headers, timeout=30).json()
    (agent,) = (found for found in agents["agents"] if found["displayName"] == AGENT)
    page = httpx.get(
        viewer + "agent", params={"id": agent["agentId"], "format": "json"}, headers=headers
    ).json()
    (run,) = (found for found in page["runs"] if found["turnNumber"] == 1)
    return f"{viewer}run?agent={agent['agentId']}&id={run['runId']}"


def picture(page: Page, viewer: str, token: str) -> None:
    page.goto(viewer)
    page.get_by_label("Store token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name=AGENT).wait_for()
    page.goto(first_turn(viewer, token))
    cards = page.locator("article.tool").filter(has_text=OPENED_CALL)
    cards.first.locator("summary").click()
    page.screenshot(path=str(SCREENSHOT), full_page=True)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bridge-store-screenshots-") as directory:
        process, ready = demo(Path(directory))
        try:
            token = Path(ready["authTokenFile"]).read_text(encoding="utf-8").strip()
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
                picture(browser.new_page(viewport=VIEWPORT), ready["viewerUrl"], token)
                browser.close()
        finally:
            process.terminate()
            process.wait(START_TIMEOUT_SECONDS)
    print(f"wrote {SCREENSHOT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
