"""A Kubernetes pod of deploy/kubernetes, run on the Docker engine as a kubelet would.

No cluster runs here, so a pod is containers sharing one network namespace that is
not the host's (the first joins ``--network none``, the others join it), each with
what its spec says: the image's entrypoint and the spec's args, its environment
(Secret values made up as the README says they are made), its security context
(user and group, read-only root, capabilities dropped, no privilege escalation), its
volumes (a ConfigMap's files, an emptyDir or a claim as a fresh directory the pod's
fsGroup owns), and its probes, run inside it: an exec probe as it is, an httpGet
probe as the image's Python fetching the pod's address. The backends a pod's
Secret points at (Postgres, and S3 for checkpoint blobs) run in the same namespace,
from the images compose uses.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.compose import load
from tests.support.docker import Container, docker, run_container, wait_for

#: Inside the pod's own namespace: not the machine's Postgres, whatever the number.
POD_POSTGRES_PORT, POD_S3_PORT = 5432, 9000
POD_DATABASE = "bridge_store"
BUCKET = "agent-checkpoints"


@dataclass
class Pod:
    """The containers of one pod, in start order; the first holds the namespace."""

    directory: Path
    fs_group: int | None
    containers: list[Container] = field(default_factory=list)

    def run(self, image: str, *args: str, options: tuple[str, ...] = ()) -> Container:
        network = (
            ("--network", "none")
            if not self.containers
            else ("--network", f"container:{self.containers[0].name}")
        )
        container = run_container(image, *args, options=(*network, *options))
        self.containers.append(container)
        return container

    def volume_options(
        self,
        workload: dict[str, Any],
        spec: dict[str, Any],
        config_map: Callable[[str], dict[str, str]],
    ) -> list[str]:
        """``--volume`` options for a container's mounts, made as the kubelet makes them:
        a ConfigMap's files, or a fresh directory for an emptyDir or a claim."""
        claims = {
            claim["metadata"]["name"] for claim in workload["spec"].get("volumeClaimTemplates", [])
        }
        volumes = {
            volume["name"]: volume
            for volume in workload["spec"]["template"]["spec"].get("volumes", [])
        }
        options = []
        for mount in spec.get("volumeMounts", []):
            name = mount["name"]
            if name in claims or "emptyDir" in volumes.get(name, {}):
                source = self.volume_directory(name)
            else:
                source = self.directory / f"config-{name}"
                source.mkdir()
                for file_name, text in config_map(volumes[name]["configMap"]["name"]).items():
                    (source / file_name).write_text(text)
            mode = ":ro" if mount.get("readOnly") else ""
            options += ["--volume", f"{source}:{mount['mountPath']}{mode}"]
        return options

    def volume_directory(self, name: str) -> Path:
        """A fresh directory for a volume: the fsGroup's and group-writable, as the
        kubelet makes an emptyDir or a new claim for a pod with an fsGroup."""
        path = self.directory / name
        path.mkdir(parents=True)
        if self.fs_group is not None:
            os.chown(path, 0, self.fs_group)
        path.chmod(0o2770)
        return path


@dataclass(frozen=True)
class Backends:
    """What a pod's Secret and config point at, in the pod's namespace."""

    store_url: str
    checkpoints_url: str


def start_backends(pod: Pod) -> Backends:
    """Postgres and an S3 server (the images compose names) in the pod, bucket made."""
    services = load()["services"]
    password = secrets.token_hex(8)
    postgres = pod.run(
        services["postgres"]["image"],
        options=(
            "--env",
            f"POSTGRES_PASSWORD={password}",
            "--env",
            f"POSTGRES_USER={POD_DATABASE}",
            "--env",
            f"POSTGRES_DB={POD_DATABASE}",
        ),
    )
    s3 = pod.run(
        services["minio"]["image"],
        "server",
        "/data",
        "--address",
        f"127.0.0.1:{POD_S3_PORT}",
    )
    alias = f"MC_HOST_pod=http://key:secret@127.0.0.1:{POD_S3_PORT}"
    wait_for(
        lambda: (
            ran(s3, "pg_isready", "-q", "-h", "127.0.0.1", where=postgres)
            and ran(s3, "env", alias, "mc", "ready", "pod")
        ),
        "the pod's Postgres and S3 answer",
        60,
    )
    docker("exec", "--env", alias, s3.name, "mc", "mb", "--ignore-existing", f"pod/{BUCKET}")
    return Backends(
        store_url=f"postgresql://{POD_DATABASE}:{password}@127.0.0.1:{POD_POSTGRES_PORT}/{POD_DATABASE}",
        checkpoints_url=f"s3://{BUCKET}/team?endpoint_url=http://127.0.0.1:{POD_S3_PORT}"
        "&addressing_style=path",
    )


def ran(container: Container, *command: str, where: Container | None = None) -> bool:
    """Whether ``command`` succeeds inside ``where`` (default ``container``)."""
    target = where or container
    result = subprocess.run(
        ["docker", "exec", target.name, *command], capture_output=True, timeout=30, check=False
    )
    return result.returncode == 0


def security_options(pod_spec: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """``docker run`` options for the pod's and the container's security context."""
    pod_security = pod_spec.get("securityContext", {})
    security = spec.get("securityContext", {})
    options = ["--user", f"{pod_security['runAsUser']}:{pod_security['runAsGroup']}"]
    if "fsGroup" in pod_security:
        options += ["--group-add", str(pod_security["fsGroup"])]
    if security.get("readOnlyRootFilesystem"):
        options.append("--read-only")
    if security.get("allowPrivilegeEscalation") is False:
        options += ["--security-opt", "no-new-privileges"]
    options += [f"--cap-drop={cap}" for cap in security.get("capabilities", {}).get("drop", [])]
    return options


def probe_command(probe: dict[str, Any], ports: dict[str, int]) -> list[str]:
    """The probe as a command to run inside the container."""
    if "exec" in probe:
        return list(probe["exec"]["command"])
    get = probe["httpGet"]
    port = ports[get["port"]] if isinstance(get["port"], str) else get["port"]
    # The kubelet GETs the pod's address; inside the namespace that is any of its
    # addresses, loopback included, for a server on 0.0.0.0.
    url = f"http://127.0.0.1:{port}{get['path']}"
    timeout = probe.get("timeoutSeconds", 1)
    return [
        "python",
        "-c",
        f"import urllib.request; urllib.request.urlopen({url!r}, timeout={timeout})",
    ]


def passes(container: Container, probe: dict[str, Any], ports: dict[str, int]) -> bool:
    result = subprocess.run(
        ["docker", "exec", container.name, *probe_command(probe, ports)],
        capture_output=True,
        timeout=probe.get("timeoutSeconds", 1) + 30,
        check=False,
    )
    return result.returncode == 0


def wait_started(container: Container, spec: dict[str, Any], ports: dict[str, int]) -> None:
    """Until the startup probe passes, within its period x failure threshold."""
    probe = spec.get("startupProbe") or spec["livenessProbe"]
    budget = probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)

    def started() -> bool:
        assert container.state()["Running"], container.logs()[-3000:]
        return passes(container, probe, ports)

    wait_for(started, f"{container.name} passes its startup probe", budget)


@contextmanager
def timed() -> Iterator[Callable[[], float]]:
    started = time.monotonic()
    yield lambda: time.monotonic() - started
