"""Follow the README's first minute literally: from its first command to a populated viewer.

Run as ``python -m tests.support.first_minute CLONE WHEELHOUSE WORKDIR`` (by
``tests/test_first_minute.py``, in a network namespace of its own so the README's
fixed ports, 8787 and 8789, are always free). The README's shell blocks and inline
commands are taken from the README itself, as tests/test_readme.py reads them, so
the two cannot drift:

1. the first minute's first block (install, then ``bridge-store demo``) runs in the
   background until its ready line;
2. its second block (the token, then ``python3 -m webbrowser``) runs; ``$BROWSER`` is
   a script that records the address, which Chromium then opens, and the token the
   block printed signs in; the clock stops when the sample team's agents are on
   screen, which must pass axe-core's WCAG 2 A/AA checks (their time not counted);
3. the inline ``.venv/bin/bridge-store agents ...`` line prints the same agents;
4. "Connect your own bridge": its block (``launch()`` a bridge and an agent on the
   demo's server) runs, with the real bridge on the stand-in Cursor API
   (``CURSOR_BACKEND_URL``); the viewer, reloaded, must show the agent the README
   names, created by the token's person;
5. the quick start's first block (install, then ``bridge-store serve``) runs until its
   ready line: its empty page must show the command that connects a bridge, as it
   will run (``.venv/bin/bridge-store bridge ...``), and the same with ``--offline``;
6. the inline ``.venv/bin/bridge-store bridge --offline ...`` line runs literally with
   no Cursor key and no ``CURSOR_BACKEND_URL``: it must print the bridge's discovery
   JSON and the line naming its store's viewer and token file (a 0600 file beside the
   database whose token signs in to that viewer); an agent made through the discovery
   JSON runs, and its run ends with the offline stand-in's error.

``pip`` installs from a local wheelhouse (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``): the
package index's speed is not the README's to answer for. The seconds from the first
command to the populated viewer, and each step's, are written as JSON to
``WORKDIR/result.json``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import cursor_sdk
import httpx
from playwright.sync_api import Browser, Page, expect, sync_playwright

from bridge_store.server.config import READY_PREFIX
from testkit.cursor_api import MODEL_ID, CursorApiStub

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
#: What any one step may take before the run is called broken (installs included);
#: the time that matters is measured, not bounded, here.
STEP_TIMEOUT_SECONDS = 300.0
UI_TIMEOUT_MS = 60_000
#: Stands for the reader's Cursor API key; the stand-in API takes any.
API_KEY = "key-of-the-first-minute"
#: An agent of the demo's sample team (bridge_store/demo), in the tenant the README's
#: token signs in to, and who that token is.
DEMO_AGENT = "Fix the login redirect"
DEMO_PERSON = "alice"
#: axe-core, where scripts/ensure-browser puts it (as tests/test_viewer_browser.py finds it).
AXE = (
    Path(
        os.environ.get("BRIDGE_STORE_TEST_CACHE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bridge-store"
    )
    / "node_modules"
    / "axe-core"
    / "axe.min.js"
)


def accessibility_violations(page: Page) -> list[str]:
    """The ids of axe-core's WCAG 2 A/AA violations on the page as it is now."""
    page.evaluate(AXE.read_text(encoding="utf-8") + "\n;undefined")
    tags = ["wcag2a", "wcag2aa", "best-practice"]
    result = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})", tags
    )
    return [violation["id"] for violation in result["violations"]]


def shell_blocks(text: str) -> list[str]:
    """The text of every ```sh block, in order (as tests/test_readme.py reads them)."""
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def first_minute_heading(text: str) -> str:
    headings: list[str] = re.findall(r"^## (The first minute.*)$", text, re.M)
    (heading,) = headings
    return heading


def environment(workdir: Path, wheelhouse: Path, api_url: str) -> dict[str, str]:
    """A new user's shell: Python 3.11 on the PATH, an empty home, the stand-in Cursor
    API and a ``$BROWSER`` that records what it is asked to open. Nothing else is
    inherited (no BRIDGE_STORE_* variable, no virtualenv)."""
    bin_dir = workdir / "bin"
    bin_dir.mkdir(exist_ok=True)
    python = bin_dir / "python3"
    if not python.exists():
        python.symlink_to(Path(getattr(sys, "_base_executable", sys.executable)).resolve())
    browser = bin_dir / "record-browser"
    browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> "{workdir / "opened"}"\n')
    browser.chmod(0o755)
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    tmp = workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    return {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "BROWSER": str(browser),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheelhouse),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "CURSOR_BACKEND_URL": api_url,
        "CURSOR_API_KEY": API_KEY,
    }


def _pump(stream: IO[str], into: Path, ready: list[str], seen: threading.Event) -> None:
    with into.open("a") as log:
        for line in stream:
            log.write(line)
            log.flush()
            if not ready and line.startswith(READY_PREFIX):
                ready.append(line)
                seen.set()
    seen.set()


@contextmanager
def serving(
    command: str, clone: Path, env: dict[str, str], logs: Path, name: str
) -> Iterator[dict[str, Any]]:
    """A README command that serves, in the background until its ready line; stopped after."""
    process = subprocess.Popen(
        ["bash", "-e", "-c", command],
        cwd=clone,
        env=env,
        stdout=(logs / f"{name}.out").open("w"),
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # bash and serve behind it stop together
    )
    assert process.stderr is not None
    ready: list[str] = []
    seen = threading.Event()
    threading.Thread(
        target=_pump, args=(process.stderr, logs / f"{name}.err", ready, seen), daemon=True
    ).start()
    try:
        if not seen.wait(STEP_TIMEOUT_SECONDS) or not ready:
            raise AssertionError(
                f"{command!r} printed no ready line:\n{tail(logs / f'{name}.err')}"
            )
        yield json.loads(ready[0].removeprefix(READY_PREFIX))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(STEP_TIMEOUT_SECONDS)


def run_block(block: str, clone: Path, env: dict[str, str], logs: Path, name: str) -> str:
    """One README block in bash, as a reader pastes it; its stdout."""
    done = subprocess.run(
        ["bash", "-e", "-c", block],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_SECONDS,
        check=False,
    )
    (logs / f"{name}.out").write_text(done.stdout)
    (logs / f"{name}.err").write_text(done.stderr)
    if done.returncode != 0:
        raise AssertionError(f"{name} exited with {done.returncode}:\n{done.stderr[-4000:]}")
    return done.stdout


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text().splitlines()[-lines:])
    except OSError:
        return "(nothing)"


#: What ``bridge-store bridge`` prints on stderr once its embedded store is up.
VIEWER_LINE = re.compile(
    r"^bridge-store: history viewer at (\S+) \(sign in with the token in (.+)\)$"
)


def inline_command(text: str, subcommand: str) -> str:
    """The ``.venv/bin/bridge-store SUBCOMMAND ...`` line ``text`` quotes inline."""
    quoted = re.findall(r"`(\.venv/bin/bridge-store [^`]+)`", text, re.S)
    (command,) = (
        " ".join(found.split())
        for found in quoted
        if found.split()[1:2] == [subcommand] and len(found.split()) > 2
    )
    return command


def offline_env(env: dict[str, str]) -> dict[str, str]:
    """The reader's shell with no Cursor key and no Cursor API of the suite's."""
    return {
        name: value
        for name, value in env.items()
        if name not in ("CURSOR_API_KEY", "CURSOR_BACKEND_URL")
    }


def run_offline_bridge(
    command: str, clone: Path, env: dict[str, str], logs: Path
) -> dict[str, Any]:
    """The README's offline bridge line, as typed in the clone, until its discovery JSON
    and viewer line; an agent made and run through the discovery JSON; then SIGTERM,
    which must end it cleanly."""
    workspace = re.search(r"--workspace (\S+)", command)
    if workspace is not None:  # the reader's project: any directory of theirs
        Path(workspace.group(1).replace("~", env["HOME"], 1)).mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        ["bash", "-e", "-c", f"exec {command}"],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    lines: list[str] = []
    errors: list[str] = []
    found: list[re.Match[str]] = []
    seen = threading.Event()

    def read_stderr(stream: IO[str]) -> None:
        with (logs / "bridge-command.err").open("w") as log:
            for line in stream:
                log.write(line)
                log.flush()
                errors.append(line)
                match = VIEWER_LINE.match(line.rstrip("\n"))
                if match is not None and not found:
                    found.append(match)
                    seen.set()
        seen.set()

    def read_stdout(stream: IO[str]) -> None:
        for line in stream:
            lines.append(line)

    threads = [
        threading.Thread(target=read_stderr, args=(process.stderr,), daemon=True),
        threading.Thread(target=read_stdout, args=(process.stdout,), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        if not seen.wait(STEP_TIMEOUT_SECONDS) or not found:
            raise AssertionError(
                f"{command!r} named no viewer:\n{tail(logs / 'bridge-command.err')}"
            )
        viewer_url, token_file = found[0].groups()
        deadline = time.monotonic() + STEP_TIMEOUT_SECONDS
        while not lines and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        token_path = Path(token_file) if Path(token_file).is_absolute() else clone / token_file
        token = token_path.read_text().strip()
        signed_in = httpx.get(
            viewer_url + "?format=json", headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        discovery = json.loads(lines[0])
        # What a Connect client does with the discovery JSON, with no key of its own.
        endpoint = cursor_sdk.BridgeEndpoint.from_discovery(discovery)
        with cursor_sdk.Client(endpoint, allow_api_key_env_fallback=True) as client:
            agent = client.agents.create(model=MODEL_ID, api_key="offline", name="offline")
            run = agent.send("hello").wait()
        result = {
            "discovery": discovery,
            "viewerUrl": viewer_url,
            "tokenFile": str(token_path),
            "tokenFileMode": oct(stat.S_IMODE(token_path.stat().st_mode)),
            "viewerStatus": signed_in.status_code,
            "offlineLine": any(line.startswith("bridge-store: offline: ") for line in errors),
            "runStatus": run.status,
            "runError": run.error_message,
        }
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        result_code = process.wait(STEP_TIMEOUT_SECONDS)
    for thread in threads:
        thread.join(STEP_TIMEOUT_SECONDS)
    shown = "".join(lines) + tail(logs / "bridge-command.err", 10_000)
    return {**result, "tokenShown": token in shown, "exitCode": result_code}


def sign_in(browser: Browser, address: str, token: str) -> Page:
    page = browser.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    page.goto(address)
    # The address the README opens lands on the viewer, which asks for the token.
    page.get_by_label("Store token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    return page


def empty_store(
    serve_command: str,
    clone: Path,
    env: dict[str, str],
    logs: Path,
    browser: Browser,
    workdir: Path,
) -> dict[str, Any]:
    """The quick start's server, up to its empty page: the commands it shows."""
    with serving(serve_command, clone, env, logs, "serve") as ready:
        token = (clone / "bridge-store.token").read_text().strip()
        page = sign_in(browser, ready["viewerUrl"], token)
        expect(
            page.get_by_role("heading", name="No agents to show in tenant default")
        ).to_be_visible()
        commands = page.locator("section.welcome pre code").all_text_contents()
        page.screenshot(path=str(workdir / "empty-store.png"), full_page=True)
        violations = accessibility_violations(page)
        page.close()
    return {"url": ready["url"], "commands": commands, "violations": violations}


def follow(clone: Path, wheelhouse: Path, workdir: Path) -> dict[str, Any]:
    readme = (clone / "README.md").read_text()
    serve_command, test_command = (
        block.strip() for block in shell_blocks(section(readme, "Quick start"))
    )
    assert test_command == "./scripts/test"  # the suite itself, which runs this
    first_minute = section(readme, first_minute_heading(readme))
    demo_command, open_viewer, run_bridge = (block.strip() for block in shell_blocks(first_minute))
    agents_line = inline_command(first_minute, "agents")
    bridge_line = inline_command(first_minute, "bridge")
    (agent_name,) = re.findall(r'name="([^"]+)"', run_bridge)
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    steps: dict[str, float] = {}
    with CursorApiStub() as api, sync_playwright() as playwright:
        env = environment(workdir, wheelhouse, api.url)
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        started = time.monotonic()
        with serving(demo_command, clone, env, logs, "demo") as ready:
            steps["installed and serving the demo"] = time.monotonic() - started
            printed = run_block(open_viewer, clone, env, logs, "open-the-viewer")
            token = printed.splitlines()[0].strip()
            (address,) = (workdir / "opened").read_text().split()
            page = sign_in(browser, address, token)
            expect(page.get_by_role("link", name=DEMO_AGENT)).to_be_visible()
            seconds = time.monotonic() - started
            page.screenshot(path=str(workdir / "demo-in-the-viewer.png"), full_page=True)
            demo_violations = accessibility_violations(page)
            signed_in_as = page.locator("p.who strong").inner_text()
            on_a_terminal = run_block(agents_line, clone, env, logs, "agents-on-a-terminal")
            run_block(run_bridge, clone, env, logs, "connect-your-own-bridge")
            page.reload()
            row = page.locator("table.agents tbody tr").filter(has_text=agent_name)
            expect(row).to_be_visible()
            created_by = row.locator("td.creator").inner_text()
            page.screenshot(path=str(workdir / "agent-in-the-viewer.png"), full_page=True)
            page.close()
        cursor_api_paths = api.paths()
        quick_start = empty_store(serve_command, clone, env, logs, browser, workdir)
        browser.close()
        offline = run_offline_bridge(bridge_line, clone, offline_env(env), logs)
    return {
        "seconds": seconds,
        "steps": steps,
        "viewerUrl": ready.get("viewerUrl"),
        "authTokenFile": ready.get("authTokenFile"),
        "address": address,
        "signedInAs": signed_in_as,
        "demoViolations": demo_violations,
        "demoAgentOnATerminal": DEMO_AGENT in on_a_terminal,
        "agent": agent_name,
        "createdBy": created_by,
        "cursorApiPaths": cursor_api_paths,
        "emptyStore": quick_start,
        "clone": str(clone),
        "bridgeCommand": {"command": bridge_line, **offline},
    }


def main(argv: list[str]) -> int:
    clone, wheelhouse, workdir = (Path(arg) for arg in argv)
    result = follow(clone, wheelhouse, workdir)
    (workdir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
