"""Six concurrent 100 MB checkpoint uploads never hold the event loop.

Decoding one such body on the loop (UTF-8, the JSON parse, the base64 decode: each one
C call that keeps the GIL) held it for over a second, and a normal call meanwhile took
up to 3.2 s. Large bodies are now decoded on one worker thread in short steps
(bridge_store/wire/large_bodies.py).

What is measured is the loop's longest stall that the server itself caused: for each
gap between two ticks of a task on the server's loop, the server process's CPU time
within it (capped at the gap). A stall where the machine ran other processes (the
suite shares two CPUs with others) costs the server no CPU, so the number does not
flake with the machine's load; a stall where the loop or a worker holding the GIL
decoded a body counts in full. The normal calls' latencies are taken by a second
process, and their p99 is reported beside it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import uvicorn

from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.security.encryption import Keyring
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.wire.http_limits import DEFAULT_MAX_REQUEST_BYTES

pytestmark = pytest.mark.slow

TOKEN = "large-body-loop-test-token-0123456789"
UPLOADS = 6
#: Each upload's request body, in bytes (the blob is three quarters of it).
BODY_BYTES = 100_000_000
#: The issue's bound on a normal call's p99 during the uploads; no stall the server
#: causes may be longer.
STALL_BOUND_SECONDS = 0.100
TICK_SECONDS = 0.002

UPLOADER = r"""
import base64, json, os, sys, threading, httpx
url, token, count, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
head = b'{"substore":"checkpoints","method":"create","input":{"agentId":"a","blobId":"b%d","data":"'
data = base64.b64encode(os.urandom((size - len(head) - 4) // 4 * 3))
bodies = [head % number + data + b'"}}' for number in range(count)]
del data
headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
statuses = []
def upload(body):
    statuses.append(httpx.post(url, content=body, headers=headers, timeout=600).status_code)
print("ready", flush=True)
sys.stdin.readline()
threads = [threading.Thread(target=upload, args=(body,)) for body in bodies]
for thread in threads: thread.start()
for thread in threads: thread.join()
print(json.dumps(statuses), flush=True)
"""

CALLER = r"""
import json, sys, threading, time, httpx
url, token = sys.argv[1], sys.argv[2]
headers = {"Authorization": f"Bearer {token}"}
latencies, failures = [], []
stop = threading.Event()
def call_in_a_loop():
    with httpx.Client(timeout=60) as client:
        while not stop.is_set():
            started = time.perf_counter()
            response = client.post(
                url, json={"substore": "agents", "method": "list", "input": {}}, headers=headers
            )
            latencies.append(time.perf_counter() - started)
            if response.status_code != 200:
                failures.append(response.status_code)
            time.sleep(0.01)
thread = threading.Thread(target=call_in_a_loop)
thread.start()
print("ready", flush=True)
sys.stdin.readline()
stop.set()
thread.join()
print(json.dumps({"latencies": latencies, "failures": failures}), flush=True)
"""


async def client(script: str, *args: str) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert await asyncio.wait_for(process.stdout.readline(), 120) == b"ready\n"
    return process


async def finish(process: asyncio.subprocess.Process) -> object:
    out, _ = await asyncio.wait_for(process.communicate(b"go\n"), 600)
    assert process.returncode == 0
    return json.loads(out)


Measured = tuple[float, float, list[int], dict[str, list[float]]]

ROOT = Path(__file__).resolve().parent.parent
#: Runs :func:`uploads_meanwhile` in a fresh process and prints what it measured.
MEASURE = """
import asyncio, json, os, sys
from bridge_store.security.encryption import Keyring
from tests.test_large_body_loop import uploads_meanwhile
keyring = Keyring([os.urandom(32)]) if sys.argv[1] == "sealed" else None
print(json.dumps(asyncio.run(uploads_meanwhile(keyring))))
"""


async def uploads_meanwhile(keyring: Keyring | None = None) -> Measured:
    app = create_app(
        ServerConfig(
            routes=Routes.single("memory://"),
            auth_token=TOKEN,
            max_request_bytes=DEFAULT_MAX_REQUEST_BYTES,
            ui=False,
            keyring=keyring,
        )
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="on")
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:
        assert not serving.done(), "uvicorn did not start"
        await asyncio.sleep(0.01)
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}{CALL_STORE_PATH}"
    worst = [0.0, 0.0]  # the server's CPU in the worst gap, that gap's length

    async def tick() -> None:
        last_wall, last_cpu = time.perf_counter(), time.process_time()
        while True:
            await asyncio.sleep(TICK_SECONDS)
            wall, cpu = time.perf_counter(), time.process_time()
            gap = wall - last_wall - TICK_SECONDS
            caused = min(gap, cpu - last_cpu)
            if caused > worst[0]:
                worst[:] = [caused, gap]
            last_wall, last_cpu = wall, cpu

    try:
        uploader = await client(UPLOADER, url, TOKEN, str(UPLOADS), str(BODY_BYTES))
        caller = await client(CALLER, url, TOKEN)
        ticker = asyncio.create_task(tick())
        statuses = await finish(uploader)
        ticker.cancel()
        calls = await finish(caller)
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 60)
    assert isinstance(statuses, list)
    assert isinstance(calls, dict)
    return worst[0], worst[1], statuses, calls


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "encrypted"])
def test_six_concurrent_100mb_uploads_never_hold_the_loop(sealed: bool) -> None:
    """Encrypted too: AES-GCM of a 75 MB blob in one call held the GIL ~200 ms."""
    # The server runs in a process of its own, as serve does: in the suite's process,
    # beside every object and thread the tests before it left there, two whole-suite
    # runs measured 109-382 ms where this test alone measured 46-66 ms.
    completed = subprocess.run(
        [sys.executable, "-c", MEASURE, "sealed" if sealed else "plain"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    caused, gap, statuses, calls = json.loads(completed.stdout.splitlines()[-1])
    assert statuses == [200] * UPLOADS
    latencies = sorted(calls["latencies"])
    assert latencies
    assert not calls["failures"]
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    assert caused < STALL_BOUND_SECONDS, (
        f"the server held its loop {caused * 1000:.0f} ms (a gap of {gap * 1000:.0f} ms); "
        f"normal calls: {len(latencies)}, p99 {p99 * 1000:.0f} ms"
    )
