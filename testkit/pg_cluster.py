"""A private PostgreSQL primary, optionally with a streaming standby, in a temp directory.

For the tests and benchmarks that must stop, promote or measure a database server:
the machine's Postgres (``testkit.services``) is shared by everyone and is never
stopped or reconfigured. :class:`PostgresCluster` runs ``initdb``, ``pg_ctl`` and
``pg_basebackup`` from the installed server (``pg_config --bindir``) on free loopback
ports, as the ``postgres`` user when this process is root (the server refuses to run
as root), with trust authentication on loopback only.

With a standby, replication is synchronous (``synchronous_standby_names = '*'``:
a commit is acknowledged once the standby has flushed it) unless ``synchronous`` is
False. :meth:`failover` promotes the standby and then stops the primary, the order a
failover tool follows; :meth:`multi_host_url` lists both, primary first, with
``target_session_attrs=read-write`` so clients find whichever one takes writes.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .services import fetch, free_port

START_TIMEOUT_SECONDS = 60
#: Server settings for a small, quick throwaway cluster. fsync is off: these servers
#: are only ever stopped cleanly or killed as processes, never lose their OS, so
#: nothing they acknowledged depends on it, and the shared disk is spared.
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "max_connections": "60",
    "shared_buffers": "32MB",
    "wal_level": "replica",
    "max_wal_senders": "4",
    "fsync": "off",
    "full_page_writes": "off",
    "log_min_messages": "warning",
}


class ClusterError(RuntimeError):
    """A cluster command failed; the message has its output."""


def bin_dir() -> Path:
    """Where the installed server's programs are (Debian keeps them off PATH)."""
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        path = Path(found.stdout.strip())
        if (path / "pg_ctl").exists():
            return path
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not candidates:
        raise ClusterError("no PostgreSQL server programs found (apt-get install postgresql)")
    return candidates[-1].parent


@dataclass
class Node:
    """One server of the cluster: its data directory and port."""

    name: str
    directory: Path
    port: int = field(default_factory=free_port)

    @property
    def log(self) -> Path:
        return self.directory.parent / f"{self.name}.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


class PostgresCluster:
    """A primary (and a standby, with ``standby=True``) in a fresh temp directory."""

    def __init__(self, *, standby: bool = False, synchronous: bool = True) -> None:
        self._bin = bin_dir()
        self._as_postgres = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="bridge-store-pg-"))
        if self._as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self.primary = Node("primary", self.root / "primary")
        self.standby = Node("standby", self.root / "standby") if standby else None
        self.synchronous = synchronous and standby

    # -- commands --------------------------------------------------------------------

    def _run(self, program: str, *args: str, timeout: float = START_TIMEOUT_SECONDS) -> str:
        argv = [str(self._bin / program), *args]
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        completed = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, cwd=self.root
        )
        if completed.returncode != 0:
            raise ClusterError(f"{program} failed:\n{completed.stdout}{completed.stderr}")
        return completed.stdout

    def _configure(self, node: Node, settings: dict[str, str]) -> None:
        # Appended last, so these win over what initdb or pg_basebackup wrote.
        lines = [f"{name} = {value}" for name, value in settings.items()]
        with (node.directory / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n" + "\n".join(lines) + "\n")

    def _start(self, node: Node) -> None:
        self._run("pg_ctl", "-D", str(node.directory), "-l", str(node.log), "-w", "start")

    def _stop(self, node: Node, mode: str) -> None:
        if (node.directory / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(node.directory), "-m", mode, "-w", "stop")

    # -- life cycle ------------------------------------------------------------------

    def start(self) -> None:
        """initdb the primary, start it; then base-backup and start the standby."""
        self._run(
            "initdb", "-D", str(self.primary.directory), "-U", "postgres",
            "-A", "trust", "-N", "--no-instructions",
        )  # fmt: skip
        settings = {
            **SETTINGS,
            "port": str(self.primary.port),
            "unix_socket_directories": f"'{self.root}'",
        }
        if self.synchronous:
            settings["synchronous_standby_names"] = "'*'"
        self._configure(self.primary, settings)
        self._start(self.primary)
        if self.standby is None:
            return
        self._run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres",
            "-D", str(self.standby.directory), "-R", "-X", "stream", "-c", "fast",
        )  # fmt: skip
        self._configure(
            self.standby, {"port": str(self.standby.port), "synchronous_standby_names": "''"}
        )
        self._start(self.standby)
        self._wait_for_replication()

    def _wait_for_replication(self) -> None:
        wanted = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            rows = fetch(self.primary.url(), "SELECT state, sync_state FROM pg_stat_replication")
            if any(row["state"] == "streaming" and row["sync_state"] == wanted for row in rows):
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"the standby is not streaming ({wanted}): {rows}")
            time.sleep(0.1)

    def failover(self) -> None:
        """Promote the standby (it then takes writes), then stop the old primary."""
        self.promote()
        self._stop(self.primary, "fast")

    def promote(self) -> None:
        """Make the standby a primary; returns once it takes writes."""
        if self.standby is None:
            raise ClusterError("this cluster has no standby")
        self._run("pg_ctl", "-D", str(self.standby.directory), "-w", "promote")

    def crash_primary(self) -> None:
        """Stop the primary as a crash would: at once, without handing over its WAL."""
        self._stop(self.primary, "immediate")

    def multi_host_url(self, database: str) -> str:
        """Both servers, primary first, for a client that must follow a failover."""
        if self.standby is None:
            raise ClusterError("this cluster has no standby")
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
        return f"postgresql://postgres@{hosts}/{database}?target_session_attrs=read-write"

    def close(self) -> None:
        """Stop every server at once and delete the directory."""
        for node in (self.standby, self.primary):
            if node is not None:
                with contextlib.suppress(ClusterError, subprocess.TimeoutExpired):
                    self._stop(node, "immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def postgres_cluster(
    *, standby: bool = False, synchronous: bool = True
) -> Iterator[PostgresCluster]:
    """A started :class:`PostgresCluster`, closed afterwards."""
    cluster = PostgresCluster(standby=standby, synchronous=synchronous)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
