"""How fast a 10,000-event run's transcript opens in the viewer (issue 17: under 1 s).

    python -m bench viewer-first-screen [--events 10000] [--store URL] [--repeat 30]
                                        [--browser-repeat 10]

Fills a store (a fresh SQLite file unless ``--store`` names another) with one agent
and one finished run of ``--events`` events in a realistic mix (thinking and
assistant deltas, tool calls with ~2 KB results, usage, status changes), starts
``bridge-store serve`` on it, and times the transcript's first screen:

- ``html``: the server's answer to ``GET /ui/run`` (the page with its first 200
  events rendered), wall time seen by an HTTP client on the same machine;
- ``json``: the same page's ``?format=json`` twin;
- ``browser``: Chromium opening the page (``/usr/bin/chromium``, as the browser tests
  use it), from navigation start, by the browser's own timings: ``fcp`` (first
  contentful paint), ``lcp`` (largest contentful paint: the first screen is there) and
  ``load`` (the load event: HTML, stylesheet, script). Skipped without Chromium or
  Playwright.

Each figure is the median (and p95, max) of its repetitions, after three warm-ups.
Older events load on scroll, 200 at a time, through the fragment view; its time is
reported too (``fragment``, the page from the middle of the run), and, for scale,
``whole``: the whole run at once, as the Markdown export renders it (3 repetitions).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.client import start_serve
from bridge_store.rpc.dispatch import call_store
from bridge_store.security.auth import local_principal
from bridge_store.stack.stores import Routes, open_stores
from bridge_store.types import Document

AGENT_ID = "agent-bench"
RUN_ID = "run-bench"
T0 = 1_780_000_000_000
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
#: Paint entries are delivered to observers asynchronously; a buffered observer gets
#: those already recorded. The largest contentful paint is final once the page loaded
#: and nothing else changed.
PAINT_TIMINGS = """() => {
  const latest = (type) => new Promise((done) => {
    new PerformanceObserver((list) => {
      const entries = list.getEntries();
      done(entries[entries.length - 1].startTime);
    }).observe({type, buffered: true});
  });
  return Promise.all([latest('paint'), latest('largest-contentful-paint')])
    .then(([fcp, lcp]) => ({fcp, lcp}));
}"""
RESULT = "\n".join(f"{n:4} | some source line number {n}" for n in range(60))  # ~2 KB


def _message(body: Document) -> Document:
    return {
        "runId": RUN_ID,
        "eventType": "run_stream_event",
        "payload": {
            "schemaVersion": 1,
            "type": "sdk_message",
            "agentId": AGENT_ID,
            "runId": RUN_ID,
            "message": {**body, "agent_id": AGENT_ID, "run_id": RUN_ID},
        },
    }


def _text(role: str, text: str) -> Document:
    return {"type": role, "message": {"role": role, "content": [{"type": "text", "text": text}]}}


def turn_messages(count: int) -> list[Document]:
    """``count`` messages shaped like a long agent turn."""
    messages: list[Document] = [
        {"type": "request", "request_id": "req-bench"},
        {"type": "status", "status": "RUNNING"},
        _text("user", "Refactor the storage layer and keep every test green"),
    ]
    step = 0
    while len(messages) < count - 1:
        call = f"call-{step}"
        messages += [
            {"type": "thinking", "text": f"Step {step}: looking at the next module"},
            {"type": "thinking", "text": " and what depends on it."},
            {"type": "thinking", "text": "", "thinking_duration_ms": 900 + step % 500},
            *(_text("assistant", f"Part {n} of step {step}. ") for n in range(4)),
            {
                "type": "tool_call",
                "call_id": call,
                "name": "read_file",
                "status": "running",
                "args": {"path": f"src/module_{step}.py"},
            },
            {
                "type": "tool_call",
                "call_id": call,
                "name": "read_file",
                "status": "completed",
                "args": {"path": f"src/module_{step}.py"},
                "result": RESULT,
            },
        ]
        if step % 10 == 9:
            messages.append(
                {
                    "type": "usage",
                    "usage": {
                        "inputTokens": step * 100,
                        "outputTokens": step * 10,
                        "totalTokens": step * 110,
                    },
                }
            )
        step += 1
    return [*messages[: count - 1], {"type": "status", "status": "FINISHED"}]


async def fill(url: str, events: int) -> float:
    started = time.perf_counter()
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        stores = opened.stores
        agent = {
            "agentId": AGENT_ID,
            "cwd": "/src/app",
            "name": "large run",
            "status": "idle",
            "createdAt": T0,
            "updatedAt": T0,
            "sdkMetadata": {},
        }
        await call_store(stores, "agents", "create", {"agent": agent}, principal=local_principal())
        run = {
            "runId": RUN_ID,
            "agentId": AGENT_ID,
            "turnNumber": 1,
            "status": "finished",
            "model": {"id": "composer-2"},
            "createdAt": T0,
            "updatedAt": T0,
            "startedAt": T0,
            "endedAt": T0 + 3_600_000,
        }
        await call_store(stores, "runs", "create", {"run": run}, principal=local_principal())
        for body in turn_messages(events):
            await call_store(
                stores, "runEvents", "append", _message(body), principal=local_principal()
            )
    finally:
        await opened.close()
    return time.perf_counter() - started


def _fetch(client: httpx.Client, address: str) -> None:
    client.get(address).raise_for_status()


def timed(repeat: int, action: Callable[[], Any]) -> list[float]:
    for _ in range(3):
        action()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"median {statistics.median(ordered) * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms"
        f"   max {ordered[-1] * 1000:7.1f} ms   (n={len(ordered)})"
    )


def browser_samples(url: str, token: str, repeat: int) -> dict[str, list[float]] | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not os.path.exists(CHROMIUM):
        return None
    loads: list[float] = []
    first_paints: list[float] = []
    shown: list[float] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {token}"})
        for attempt in range(repeat + 3):
            page = context.new_page()
            page.goto(url, wait_until="load")
            assert page.locator("#transcript > .block").count() > 0, "no transcript blocks"
            # The browser's own paint timings, from the start of the navigation:
            # first contentful paint and largest contentful paint (the first screen).
            painted = page.evaluate(PAINT_TIMINGS)
            load = page.evaluate(
                "() => { const nav = performance.getEntriesByType('navigation')[0];"
                " return nav.loadEventEnd - nav.startTime; }"
            )
            page.close()
            if attempt >= 3:
                first_paints.append(painted["fcp"] / 1000)
                shown.append(painted["lcp"] / 1000)
                loads.append(load / 1000)
        browser.close()
    return {"load": loads, "fcp": first_paints, "lcp": shown}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench viewer-first-screen")
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--store", help="store URL (default: a fresh SQLite file)")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--browser-repeat", type=int, default=10)
    args = parser.parse_args(argv)

    directory = Path(tempfile.mkdtemp(prefix="bench-viewer-"))
    try:
        store = args.store or f"sqlite:///{directory / 'store.db'}"
        took = fill(store, args.events)
        print(f"filled {args.events:,} events in {asyncio.run(took):.1f} s", flush=True)
        sidecar = start_serve(["--port", "0", "--store", store, "--log-level", "warning"])
        try:
            base = f"{sidecar.url}ui/run?agent={AGENT_ID}&id={RUN_ID}"
            headers = {"Authorization": f"Bearer {sidecar.auth_token}"}
            with httpx.Client(headers=headers, timeout=60) as client:
                first = client.get(base)
                first.raise_for_status()
                blocks = first.text.count('class="block ')
                kib = len(first.content) / 1024
                print(f"first screen: {blocks} blocks, {kib:.0f} KiB of HTML")
                middle = f"{base}&format=fragment&after={args.events // 2}"
                for name, address in (
                    ("html", base),
                    ("json", base + "&format=json"),
                    ("fragment", middle),
                ):
                    samples = timed(args.repeat, partial(_fetch, client, address))
                    print(f"{name:9} {summary(samples)}", flush=True)
                # For scale: the whole run at once, as its Markdown export renders it.
                whole = base.replace("/ui/run?agent=", "/ui/export/transcript.md?agent=")
                whole = whole.replace("&id=", "&run=")
                samples = timed(3, partial(_fetch, client, whole))
                print(f"{'whole':9} {summary(samples)}", flush=True)
            measured = browser_samples(base, sidecar.auth_token, args.browser_repeat)
            if measured is None:
                print("browser   skipped (no Chromium or Playwright)")
            else:
                print(f"browser   fcp   {summary(measured['fcp'])}")
                print(f"browser   lcp   {summary(measured['lcp'])}")
                print(f"browser   load  {summary(measured['load'])}")
        finally:
            sidecar.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0
