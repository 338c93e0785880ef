"""deploy/kubernetes stays in step with the CLI, the app and the image.

No cluster runs here, so the manifests are checked as data, against the real thing:
every container of the project's image runs a command the real CLI parser accepts
(its --config file read by the real config reader), its ports and probes are where
that command listens, every probe is tried on two real servers (one ready, one alive
but not ready) and must behave as liveness or readiness, every variable is one the
command reads, and the pod runs as the image's user. Then each layout's pod runs on
the image the Dockerfile builds (tests/support/pods.py): its args, environment,
security context, volumes and probes as the spec gives them, its backends beside it.
"""

from __future__ import annotations

import argparse
import posixpath
import re
import secrets
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.cli import parse_args
from bridge_store.cli.shared.settings import SETTING_ENV
from bridge_store.cli.shared.store_options import DEFAULT_STORE_URL, STORE_ENV, routes_from
from bridge_store.ops.readiness import READY_PATH
from bridge_store.security.tokens import TOKEN_ENV
from bridge_store.server.app import HEALTH_PATH
from bridge_store.server.serving import GRACEFUL_SHUTDOWN_SECONDS
from bridge_store.stack.stores import resolve
from bridge_store.urls import redact
from tests.support.docker import BuiltImage, docker
from tests.support.dockerfile import ROOT, Dockerfile
from tests.support.pods import Pod, passes, security_options, start_backends, timed, wait_started
from tests.support.probes import LOOPBACK_URL, ProbeTargets, probe_targets

KUBERNETES = ROOT / "deploy" / "kubernetes"
LAYOUTS = ("shared", "sqlite", "sidecar")
IMAGE = "bridge-store:" + tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
WORKLOADS = ("Deployment", "StatefulSet")
#: The one Secret the manifests read, and its keys as deploy/kubernetes/README.md makes them.
SECRET = "bridge-store"
SECRET_KEYS = set(re.findall(r"--from-literal=([\w-]+)=", (KUBERNETES / "README.md").read_text()))
#: What the README says the store-url key holds, for resolving store URLs here.
SECRET_STAND_INS = {"store-url": "postgresql://bridge_store:secret@postgres/bridge_store"}


def layout(name: str) -> list[dict[str, Any]]:
    """The documents of a layout's kustomization, in its resources' order."""
    directory = KUBERNETES / name
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    documents: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        documents += yaml.safe_load_all((directory / resource).read_text())
    return documents


@dataclass
class Container:
    layout: str
    workload: dict[str, Any]
    spec: dict[str, Any]
    #: A native sidecar: an init container that keeps running beside the others.
    sidecar: bool

    @property
    def pod(self) -> dict[str, Any]:
        pod: dict[str, Any] = self.workload["spec"]["template"]["spec"]
        return pod

    @property
    def name(self) -> str:
        return f"{self.layout}/{self.workload['metadata']['name']}/{self.spec['name']}"

    def environ(self) -> dict[str, str]:
        """The container's environment, secrets replaced by what the README says they hold."""
        environ = {}
        for variable in self.spec.get("env", []):
            if "value" in variable:
                environ[variable["name"]] = variable["value"]
            else:
                reference = variable["valueFrom"]["secretKeyRef"]
                environ[variable["name"]] = SECRET_STAND_INS.get(reference["key"], "secret")
        return environ

    def args(self, tmp_path: Path) -> argparse.Namespace:
        """The command line as the CLI parses it, its --config file read from the ConfigMap."""
        argv = list(self.spec["args"])
        if "--config" in argv:
            at = argv.index("--config") + 1
            argv[at] = str(self.config_file(argv[at], tmp_path))
        return parse_args(argv, self.environ())

    def config_file(self, path: str, tmp_path: Path) -> Path:
        directory, name = posixpath.split(path)
        (mount,) = [m for m in self.spec["volumeMounts"] if m["mountPath"] == directory]
        (volume,) = [v for v in self.pod["volumes"] if v["name"] == mount["name"]]
        config_map = document(self.layout, "ConfigMap", volume["configMap"]["name"])
        copy = tmp_path / name
        copy.write_text(config_map["data"][name])
        return copy

    def port(self, name: str) -> int:
        (port,) = [p["containerPort"] for p in self.spec["ports"] if p["name"] == name]
        return int(port)


def document(layout_name: str, kind: str, name: str) -> dict[str, Any]:
    (found,) = [
        doc
        for doc in layout(layout_name)
        if doc["kind"] == kind and doc["metadata"]["name"] == name
    ]
    return found


def containers() -> Iterator[Container]:
    for name in LAYOUTS:
        for workload in layout(name):
            if workload["kind"] not in WORKLOADS:
                continue
            pod = workload["spec"]["template"]["spec"]
            for init in pod.get("initContainers", []):
                yield Container(name, workload, init, init.get("restartPolicy") == "Always")
            for container in pod["containers"]:
                yield Container(name, workload, container, False)


CONTAINERS = list(containers())
SERVERS = [c for c in CONTAINERS if c.spec["args"][0] == "serve"]


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeTargets]:
    with probe_targets(tmp_path_factory.mktemp("probes")) as servers:
        yield servers


def test_each_layout_is_a_kustomization_of_exactly_its_files() -> None:
    for name in LAYOUTS:
        directory = KUBERNETES / name
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
        files = {path.name for path in directory.glob("*.yaml")} - {"kustomization.yaml"}
        assert sorted(kustomization["resources"]) == sorted(files), name
        for doc in layout(name):
            assert {"apiVersion", "kind", "metadata"} <= set(doc), (name, doc)
    assert {c.layout for c in SERVERS} == set(LAYOUTS)


def test_every_container_runs_this_versions_image_and_a_command_the_cli_accepts(
    tmp_path: Path,
) -> None:
    assert CONTAINERS
    for container in CONTAINERS:
        assert container.spec["image"] == IMAGE, container.name
        # The image's entrypoint is bridge-store: manifests give only its arguments.
        assert "command" not in container.spec, container.name
        args = container.args(tmp_path)
        if args.command == "serve":
            # Scheme, parameters and installed extras of every store URL, unconnected.
            assert resolve(get_plugin_manager(), routes_from(args, container.environ()))


def test_servers_listen_where_their_ports_and_services_say(tmp_path: Path) -> None:
    for server in SERVERS:
        args = server.args(tmp_path)
        if args.host == "127.0.0.1":
            # On loopback, for its pod alone: nothing outside may point at it.
            assert "ports" not in server.spec, server.name
            continue
        assert args.host == "0.0.0.0", server.name
        assert server.port("http") == args.port, server.name
        services = [doc for doc in layout(server.layout) if doc["kind"] == "Service"]
        labels = server.workload["spec"]["template"]["metadata"]["labels"]
        (service,) = [s for s in services if s["spec"]["selector"].items() <= labels.items()]
        assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"], server.name
        assert service["spec"]["ports"][0]["port"] == args.port


def probes(container: Container) -> dict[str, dict[str, Any]]:
    return {
        kind: container.spec[f"{kind}Probe"]
        for kind in ("startup", "liveness", "readiness")
        if f"{kind}Probe" in container.spec
    }


def test_servers_are_probed_on_healthz_for_life_and_readyz_for_traffic(
    tmp_path: Path,
) -> None:
    for server in SERVERS:
        args = server.args(tmp_path)
        found = probes(server)
        assert set(found) == {"startup", "liveness", "readiness"}, server.name
        for kind, probe in found.items():
            expected = READY_PATH if kind == "readiness" else HEALTH_PATH
            if "httpGet" in probe:
                get = probe["httpGet"]
                assert get["path"] == expected, (server.name, kind)
                port = get["port"]
                assert (server.port(port) if isinstance(port, str) else port) == args.port
            else:
                # The kubelet cannot reach a loopback listener: the probe runs inside.
                asked = LOOPBACK_URL.search(probe["exec"]["command"][-1])
                assert asked is not None, (server.name, kind)
                assert (asked["path"], int(asked["port"])) == (expected, args.port)


def test_every_probe_passes_on_a_ready_server_and_readiness_fails_on_an_unready_one(
    targets: ProbeTargets,
) -> None:
    for server in SERVERS:
        for kind, probe in probes(server).items():
            if "httpGet" in probe:
                ready = targets.http_status(targets.ready, probe["httpGet"]["path"]) == 200
                unready = targets.http_status(targets.unready, probe["httpGet"]["path"]) == 200
            else:
                command = probe["exec"]["command"]
                ready = targets.run_command(targets.ready, command) == 0
                unready = targets.run_command(targets.unready, command) == 0
            assert ready, (server.name, kind)
            # A backend problem takes a server out of the Service; it never restarts it.
            assert unready == (kind != "readiness"), (server.name, kind)


def test_the_environment_is_what_the_commands_read_and_the_token_is_a_secret() -> None:
    known = {TOKEN_ENV, *SETTING_ENV.values()}
    assert {"auth-token"} <= SECRET_KEYS
    for container in CONTAINERS:
        for variable in container.spec.get("env", []):
            if variable["name"].startswith("BRIDGE_STORE_"):
                assert variable["name"] in known, (container.name, variable["name"])
            if "valueFrom" in variable:
                reference = variable["valueFrom"]["secretKeyRef"]
                assert reference["name"] == SECRET, container.name
                assert reference["key"] in SECRET_KEYS, (container.name, reference["key"])
        (token,) = [v for v in container.spec["env"] if v["name"] == TOKEN_ENV]
        assert token["valueFrom"]["secretKeyRef"]["key"] == "auth-token", container.name


def test_config_maps_hold_no_secrets_and_only_known_settings(tmp_path: Path) -> None:
    for server in SERVERS:
        if "--config" not in server.spec["args"]:
            continue
        path = server.config_file(
            server.spec["args"][server.spec["args"].index("--config") + 1], tmp_path
        )
        for key, value in tomllib.loads(path.read_text()).items():
            assert not isinstance(value, str) or redact(value) == value, (server.name, key)
        # The store URL, with its password, comes from the Secret instead.
        assert STORE_ENV in server.environ(), server.name


def test_pods_run_as_the_images_user_with_resources_and_time_to_drain() -> None:
    uid = Dockerfile.read().uid
    for container in CONTAINERS:
        pod_security = container.pod["securityContext"]
        assert pod_security["runAsNonRoot"] is True, container.name
        assert pod_security["runAsUser"] == uid, container.name
        security = container.spec["securityContext"]
        assert security["allowPrivilegeEscalation"] is False, container.name
        assert security["capabilities"]["drop"] == ["ALL"], container.name
        resources = container.spec["resources"]
        assert {"cpu", "memory"} <= set(resources["requests"]), container.name
        assert "memory" in resources["limits"], container.name
        assert container.pod["terminationGracePeriodSeconds"] > GRACEFUL_SHUTDOWN_SECONDS


def test_the_sqlite_layout_keeps_its_file_on_the_volume(tmp_path: Path) -> None:
    dockerfile = Dockerfile.read()
    (server,) = [s for s in SERVERS if s.layout == "sqlite"]
    statefulset = server.workload
    assert statefulset["kind"] == "StatefulSet"
    # One SQLite file, one server.
    assert statefulset["spec"]["replicas"] == 1
    args = server.args(tmp_path)
    assert routes_from(args, server.environ()).agents == DEFAULT_STORE_URL
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    (mount,) = [m for m in server.spec["volumeMounts"] if m["name"] == claim["metadata"]["name"]]
    # The default file is relative to the image's working directory, the volume.
    assert mount["mountPath"] == dockerfile.last("WORKDIR")
    assert server.pod["securityContext"]["fsGroup"] == dockerfile.uid
    service = document("sqlite", "Service", statefulset["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"


def test_the_sidecar_pod_pairs_a_bridge_with_its_own_store_on_loopback(tmp_path: Path) -> None:
    (store,) = [s for s in SERVERS if s.layout == "sidecar"]
    assert store.sidecar, "the store starts before the bridge and stops after it"
    store_args = store.args(tmp_path)
    assert store_args.host == "127.0.0.1"
    (bridge,) = [c for c in CONTAINERS if c.layout == "sidecar" and c.spec["args"][0] == "bridge"]
    assert bridge.workload is store.workload
    bridge_args = bridge.args(tmp_path)
    assert bridge_args.store_callback_url == f"http://127.0.0.1:{store_args.port}/"
    # The token from the environment, which bridge-store keeps from the bridge's tools.
    assert bridge_args.store_auth_token_file is None
    assert TOKEN_ENV in bridge.environ()
    probe = bridge.spec["livenessProbe"]["exec"]["command"][-1]
    assert f"('127.0.0.1', {bridge_args.port})" in probe
    # The same backends as the shared layout: every such pod sees the team's agents.
    (shared,) = [s for s in SERVERS if s.layout == "shared"]
    assert store.spec["env"] == shared.spec["env"]


# -- on the built image ---------------------------------------------------------------


def config_map_of(layout_name: str) -> Callable[[str], dict[str, str]]:
    return lambda name: dict(document(layout_name, "ConfigMap", name)["data"])


#: The AWS chain's credentials, as a pod's service account would provide them.
POD_AWS_ENV = {"AWS_ACCESS_KEY_ID": "pod-key", "AWS_SECRET_ACCESS_KEY": "pod-secret"}


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("docker_cleanup")
@pytest.mark.parametrize("name", LAYOUTS)
def test_each_layout_runs_on_the_built_image_as_its_pod_would(
    name: str, project_image: BuiltImage, tmp_path: Path
) -> None:
    # The image the manifests name is what the Dockerfile builds, at this version.
    version = docker("run", "--rm", "--network", "none", project_image.tag, "--version")
    assert f"bridge-store:{version}" == IMAGE
    members = [c for c in CONTAINERS if c.layout == name]
    (pod_spec,) = {id(c.pod): c.pod for c in members}.values()
    pod = Pod(tmp_path, pod_spec["securityContext"].get("fsGroup"))
    made_up = {"auth-token": secrets.token_hex(16)}
    checkpoints: dict[str, str] = {}
    if any(
        v.get("valueFrom", {}).get("secretKeyRef", {}).get("key") == "store-url"
        for c in members
        for v in c.spec.get("env", [])
    ):
        backends = start_backends(pod)
        made_up["store-url"] = backends.store_url
        checkpoints = {"BRIDGE_STORE_CHECKPOINTS_URL": backends.checkpoints_url, **POD_AWS_ENV}

    running = []
    # Init sidecars first, each started (its startup probe passed) before the next.
    for member in members:
        environment = {
            v["name"]: v.get("value") or made_up[v["valueFrom"]["secretKeyRef"]["key"]]
            for v in member.spec.get("env", [])
        }
        if "--config" in member.spec["args"]:
            # The config's bucket is in AWS; the pod's S3 server stands in for it.
            environment |= checkpoints
        options = [
            *security_options(member.pod, member.spec),
            *pod.volume_options(member.workload, member.spec, config_map_of(member.layout)),
        ]
        for variable, value in environment.items():
            options += ["--env", f"{variable}={value}"]
        container = pod.run(project_image.tag, *member.spec["args"], options=tuple(options))
        ports = {p["name"]: p["containerPort"] for p in member.spec.get("ports", [])}
        wait_started(container, member.spec, ports)
        running.append((member, container, ports))

    for member, container, ports in running:
        for kind, probe in probes(member).items():
            assert passes(container, probe, ports), (member.name, kind, container.logs()[-2000:])

    # Stopped as the kubelet stops a pod: the app, then its sidecar, each by itself
    # (exit 0) within the pod's grace period.
    grace = pod_spec["terminationGracePeriodSeconds"]
    for member, container, _ in reversed(running):
        with timed() as took:
            docker("stop", "--time", str(grace), container.name, timeout=grace + 30)
        state = container.state()
        assert (state["ExitCode"], state["OOMKilled"]) == (0, False), (
            member.name,
            container.logs()[-2000:],
        )
        assert took() < grace, member.name
