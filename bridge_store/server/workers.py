"""``serve --workers N``: N server processes answering on one port, each on its own core.

The parent binds the port, then forks the workers; each inherits the listening socket
and runs the whole server on it (its own event loop, its own backend pools, its own
metrics), and the kernel hands each new connection to one of them. That is how
uvicorn's and gunicorn's own ``--workers`` share a port; it is done here rather than
through uvicorn's supervisor, which starts workers with ``spawn`` and so needs an app
it can import by name.

The first worker starts alone, so migrations run once and a backend that cannot be
reached stops the start with one line, as with one process; the others follow once
it is ready. The parent prints the ready line when every worker is accepting, passes
SIGTERM and SIGHUP on to them, and exits once they have. A worker that dies
unexpectedly stops the others, and the parent exits non-zero, so the process
supervisor restarts the whole server rather than running it short of a worker.

SIGINT reaches the workers as SIGTERM. A terminal's Ctrl-C goes to the whole process
group, workers included, and uvicorn takes a second SIGINT as "quit now, drop the
calls in flight": forwarding the parent's own SIGINT as such would make every Ctrl-C
that. A second Ctrl-C still forces the stop, as with one process.

The workers end with their parent, whatever ends it (SIGKILL included): each holds
the read end of a pipe whose write end only the parent holds, and a thread of the
worker that reads it sees end-of-file once the parent is gone and sends the worker
SIGTERM: a graceful stop once it serves, the end of its start before. Otherwise they
would keep serving, re-parented to init, and the supervisor's restart would find the
port taken.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, NamedTuple

from ..errors import EXIT_INTERRUPTED, ConfigurationError
from ..stack.stores import Routes
from .config import READY_PREFIX
from .serving import GRACEFUL_SHUTDOWN_SECONDS

#: Longest a worker may take to start (open its backends, migrate) before the start
#: is given up.
WORKER_START_SECONDS = 120.0
#: How long workers may take to stop after their graceful shutdown before they are killed.
WORKER_STOP_SECONDS = GRACEFUL_SHUTDOWN_SECONDS + 10.0
#: How often the parent looks at its workers while it waits.
_POLL_SECONDS = 0.1
#: Stores that live in one process's memory: every worker would have its own.
PROCESS_LOCAL_SCHEMES = ("memory:",)

#: A worker's whole life: serve, calling ``announce`` once it accepts connections;
#: returns the exit status.
Worker = Callable[[Callable[[], None]], int]


def check_workers(workers: int, routes: Routes) -> None:
    """Refuse several workers over a store they cannot share, before anything is
    written or bound (:class:`~.config.ServingConfig` checks the count itself)."""
    if workers == 1:
        return
    local = [url for url in routes.urls() if url.startswith(PROCESS_LOCAL_SCHEMES)]
    if local:
        raise ConfigurationError(
            f"--workers {workers} needs a store every worker shares; {local[0]} lives in "
            "one process's memory: use --workers 1, or a sqlite://, postgresql:// or "
            "redis:// store"
        )


def serve_workers(workers: int, worker: Worker, ready: dict[str, str]) -> int:
    """Run ``worker`` in ``workers`` forked processes; print the ready line once all run."""
    announcements, announcer = os.pipe()
    # The parent alone holds lifeline's write end; the kernel closes it when it dies.
    lifeline, lifeline_holder = os.pipe()
    children: list[int] = []
    stopping: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        if signum != signal.SIGHUP:
            stopping.append(signum)
        # The workers have the terminal's SIGINT already, if it came from there.
        passed = signal.SIGTERM if signum == signal.SIGINT else signum
        for pid in children:
            _signal(pid, passed)

    previous = {
        number: signal.signal(number, forward)
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    }
    try:
        for _ in range(workers):
            pipes = _Pipes(announcements, announcer, lifeline, lifeline_holder)
            children.append(_fork(worker, pipes, previous))
            failure = _wait_ready(announcements, children, stopping)
            if failure is not None:
                return _stop(children, failure)
        print(READY_PREFIX + json.dumps({**ready, "workers": workers}), file=sys.stderr, flush=True)
        return _supervise(children, stopping)
    finally:
        for end in (announcements, announcer, lifeline, lifeline_holder):
            os.close(end)
        for number, handler in previous.items():
            signal.signal(number, handler)


class _Pipes(NamedTuple):
    """The parent's pipes to its workers: each end, read and write."""

    announcements: int
    announcer: int
    lifeline: int
    lifeline_holder: int


def _fork(worker: Worker, pipes: _Pipes, handlers: dict[signal.Signals, Any]) -> int:
    pid = os.fork()
    if pid:
        return pid
    # The worker: the parent's signal handlers and its ends of the pipes are not its own.
    status = 1
    try:
        os.close(pipes.announcements)
        os.close(pipes.lifeline_holder)
        threading.Thread(
            target=_end_with_parent, args=(pipes.lifeline,), name="parent-watch", daemon=True
        ).start()
        for number, handler in handlers.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)

        def announce() -> None:
            os.write(pipes.announcer, b".")

        status = worker(announce)
    except ConfigurationError as error:
        _say(str(error))
        status = 2
    except KeyboardInterrupt:  # Ctrl-C before it served: the parent says nothing either
        status = EXIT_INTERRUPTED
    except BaseException:  # a traceback from a worker still ends that worker only
        import traceback

        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(status)


def _end_with_parent(lifeline: int) -> None:
    """In a worker: wait until the parent is gone (end-of-file: nothing is ever written
    on the lifeline), then stop this worker as SIGTERM does."""
    while os.read(lifeline, 1):
        pass
    os.kill(os.getpid(), signal.SIGTERM)


def _wait_ready(announcements: int, children: list[int], stopping: list[int]) -> int | None:
    """Wait until the newest worker says it accepts connections (None), or the exit
    status the server gives up with: a worker's that died, 1 for a start that took too
    long, 128 + its number for a stop signal (130 for Ctrl-C, as with one process)."""
    deadline = time.monotonic() + WORKER_START_SECONDS
    while not stopping:
        if time.monotonic() > deadline:
            _say(f"a worker did not start within {WORKER_START_SECONDS:g} s")
            return 1
        readable, _, _ = select.select([announcements], [], [], _POLL_SECONDS)
        if readable:
            os.read(announcements, 1)
            return None
        for pid in children:
            if (status := _exited(pid)) is not None:
                children.remove(pid)
                if stopping:  # it ended on the stop signal passed on to it
                    break
                # The worker has said why on stderr.
                return _exit_code(status) or 1
    return 128 + stopping[0]


def _supervise(children: list[int], stopping: list[int]) -> int:
    """Until a stop signal or a worker's death; then every worker is stopped."""
    while not stopping:
        for pid in children:
            if _exited(pid) is not None:
                children.remove(pid)
                _say("a worker exited unexpectedly; stopping the others")
                return _stop(children, 1)
        time.sleep(_POLL_SECONDS)
    return _stop(children, 0)


def _say(line: str) -> None:
    print(f"bridge-store: {line}", file=sys.stderr, flush=True)


def _stop(children: list[int], status: int) -> int:
    """SIGTERM every worker still running and wait for them, killing laggards. The exit
    status: ``status`` if it is not 0, else 1 if a worker did not stop cleanly."""
    for pid in children:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + WORKER_STOP_SECONDS
    clean = True
    for pid in children:
        while (exited := _exited(pid)) is None:
            if time.monotonic() > deadline:
                _signal(pid, signal.SIGKILL)
                exited = os.waitpid(pid, 0)[1]
                break
            time.sleep(0.05)
        clean = clean and _exit_code(exited) == 0
    return status or (0 if clean else 1)


def _exit_code(status: int) -> int:
    """A worker's exit code; 128 + N for one killed by signal N, as shells report it
    (passed on as it is, -N would leave the parent as 256 - N)."""
    code = os.waitstatus_to_exitcode(status) if status >= 0 else 0
    return 128 - code if code < 0 else code


def _exited(pid: int) -> int | None:
    """The wait status of a worker that has exited (-1 if already reaped); None if it runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -1
    return status if done else None


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it has exited already
        os.kill(pid, signum)
