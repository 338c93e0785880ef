"""Child processes that announce themselves with a JSON ready line on stderr.

Both children of the client (``bridge-store serve`` and ``cursor-sdk-bridge``) print
one ``<prefix>{JSON}`` line on stderr once they serve. Each runs in its own session
and is stopped as a process group: the bridge's launcher is a shell script that runs
Node as its child, so signalling the launcher alone would orphan Node.
:class:`ReadyProcess` is what both children have in common once started.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Any, ClassVar, Protocol, Self

from ..errors import BackendUnreachable, ConfigurationError

#: Diagnostic lines kept from a child's stderr for error messages.
TAIL_LINES = 200
#: Starting the bridge loads a Node runtime; on a busy two-core machine that takes seconds.
START_TIMEOUT_SECONDS = 60.0


class Echo(Protocol):
    """Where a child's stderr lines are passed on: a text stream, or a filter before one."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class StderrPump:
    """Reads a child's stderr for its whole life, so a chatty child never blocks.

    Remembers the first line starting with ``prefix`` (the ready line) and the last
    lines for error messages; ``echo`` gets every line as it arrives.
    """

    def __init__(self, stream: IO[str], prefix: str, echo: Echo | None) -> None:
        self._prefix = prefix
        self._echo = echo
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._lock = threading.Lock()
        self._settled = threading.Event()
        self.ready_line: str | None = None
        #: Every process holding the pipe has closed it (usually: the child exited).
        self.closed = False
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            with self._lock:
                self._tail.append(line)
            if self.ready_line is None and line.startswith(self._prefix):
                self.ready_line = line
                self._settled.set()
            if self._echo is not None:
                # A closed or broken echo target must not stop the draining.
                with contextlib.suppress(OSError, ValueError):
                    self._echo.write(line)
                    self._echo.flush()
        stream.close()
        self.closed = True
        self._settled.set()

    def wait_ready(self, timeout: float) -> str | None:
        """The ready line, or None if the child closed stderr or ``timeout`` passed."""
        self._settled.wait(timeout)
        return self.ready_line

    def tail(self) -> list[str]:
        with self._lock:
            return list(self._tail)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def alive(self) -> bool:
        """Whether some process still holds the stderr pipe open."""
        return self._thread.is_alive()


@dataclass(kw_only=True)
class ReadyProcess:
    """A child that has printed its ready line; a context manager that stops it on exit.

    ``ready`` is the ready line's JSON. Stopping signals the child's whole process group
    and waits for it, SIGKILL after :attr:`stop_timeout` seconds.
    """

    #: How long the child may take to exit after SIGTERM before it gets SIGKILL.
    stop_timeout: ClassVar[float]

    process: subprocess.Popen[str]
    ready: dict[str, Any]
    pump: StderrPump = field(repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr_tail(self) -> list[str]:
        """The child's last stderr lines."""
        return self.pump.tail()

    def wait(self) -> int:
        """Wait for the child to exit; its exit status."""
        return self.process.wait()

    def ended(self, what: str, status: int, when: str) -> str:
        """``{what} (pid N) exited with status 3 {when}``, then the child's last words.

        For a child that has exited: its last lines follow its exit by a moment.
        """
        self.pump.join(1.0)
        return with_output(f"{what} (pid {self.pid}) {describe_status(status)} {when}", self.pump)

    def close(self) -> int:
        """SIGTERM the group, SIGKILL what outlives ``stop_timeout``; the exit status."""
        return stop(self.process, self.pump, self.stop_timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _signal_group(process: subprocess.Popen[str], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


def stop(process: subprocess.Popen[str], pump: StderrPump, timeout: float) -> int:
    """Stop the child and everything it started; returns the child's exit status.

    The group is done when every process holding the stderr pipe has closed it; one
    that ignores SIGTERM for ``timeout`` seconds gets SIGKILL.
    """
    if process.poll() is None or pump.alive():
        _signal_group(process, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout)
        pump.join(timeout)
        if process.poll() is None or pump.alive():
            _signal_group(process, signal.SIGKILL)
    status = process.wait()
    pump.join(timeout)
    return status


def describe_status(status: int) -> str:
    """``exited with status 3`` or ``was killed by SIGKILL``."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"was killed by {name}"
    return f"exited with status {status}"


def with_output(message: str, pump: StderrPump) -> str:
    """``message``, followed by the child's last stderr lines if it wrote any."""
    output = "".join(pump.tail()).rstrip()
    return message + (f":\n{output}" if output else "")


def start(
    argv: Sequence[str],
    env: Mapping[str, str],
    prefix: str,
    echo: Echo | None,
    timeout: float,
    what: str,
    stop_timeout: float,
    *,
    unreachable_status: int | None = None,
) -> tuple[subprocess.Popen[str], StderrPump, dict[str, Any]]:
    """Start a child and wait for its ready line; returns it with the line's JSON.

    A child that fails to get ready is stopped before the ConfigurationError that
    says why is raised, also when the wait is interrupted; a BackendUnreachable when it
    exited with ``unreachable_status`` (a bridge-store child's way of saying so).
    """
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=dict(env),
            start_new_session=True,
        )
    except OSError as error:
        raise ConfigurationError(f"cannot start {what} ({argv[0]}): {error}") from None
    assert process.stderr is not None
    pump = StderrPump(process.stderr, prefix, echo)
    try:
        return (
            process,
            pump,
            _await_ready(
                process,
                pump,
                prefix,
                timeout,
                what,
                stop_timeout,
                echoed=echo is not None,
                unreachable_status=unreachable_status,
            ),
        )
    except BaseException:
        # Also when interrupted (Ctrl-C, a signal handler): never leave the child behind.
        stop(process, pump, stop_timeout)
        raise


def _await_ready(
    process: subprocess.Popen[str],
    pump: StderrPump,
    prefix: str,
    timeout: float,
    what: str,
    stop_timeout: float,
    *,
    echoed: bool = False,
    unreachable_status: int | None = None,
) -> dict[str, Any]:
    """The ready line's JSON; otherwise a ConfigurationError saying why, with the child's
    last words unless they were ``echoed`` already (they would show twice)."""
    line = pump.wait_ready(timeout)
    payload: Any = None
    if line is not None:
        try:
            payload = json.loads(line[len(prefix) :])
        except json.JSONDecodeError:
            payload = None
    if isinstance(payload, dict):
        return payload
    if line is not None:
        reason = f"printed an unreadable ready line {line.strip()!r}"
    elif pump.closed:
        # The pipe closes a moment before the exit status can be collected.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(stop_timeout)
        status = process.poll()
        reason = (
            "closed its stderr before it was ready"
            if status is None
            else f"{describe_status(status)} before it was ready"
        )
    else:
        reason = f"printed no ready line within {timeout:g}s"
    message = f"{what} {reason}" if echoed else with_output(f"{what} {reason}", pump)
    # A child bridge-store that could not reach a backend says so by its status; the
    # caller's own status then says the same (cli: 3 rather than 2).
    if unreachable_status is not None and process.poll() == unreachable_status:
        raise BackendUnreachable(message)
    raise ConfigurationError(message)
