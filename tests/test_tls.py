"""serve over TLS: certificates checked at start-up, HTTPS for clients, the real bridge.

The certificates come from a throwaway CA made in-process (tests/support/certificates).
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cursor_sdk.errors
import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from bridge_store.cli import main
from bridge_store.client import (
    Sidecar,
    bridge_endpoint,
    check_store,
    launch,
    launch_bridge,
    local_options,
    start_serve,
)
from bridge_store.client.trust import NODE_CA_ENV
from bridge_store.errors import ConfigurationError
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.security.tokens import TOKEN_ENV
from testkit.cursor_api import MODEL_ID, CursorApiStub
from tests.support.certificates import Authority, Issued
from tests.support.sdk_versions import BRIDGE_OVERRIDES


@dataclass(frozen=True)
class Pki:
    ca: Authority
    server: Issued
    #: The CA whose client certificates a mutual-TLS store accepts, and one of them.
    clients: Authority
    client: Issued


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = Authority(directory, "store")
    clients = Authority(directory, "clients")
    return Pki(
        ca=ca,
        server=ca.issue_server("server", ips=("127.0.0.1",), dns=("localhost",)),
        clients=clients,
        client=clients.issue_client("bridge-host"),
    )


def tls_args(pki: Pki) -> list[str]:
    return ["--ssl-certfile", str(pki.server.certfile), "--ssl-keyfile", str(pki.server.keyfile)]


@pytest.fixture(scope="module")
def tls_store(pki: Pki) -> Iterator[Sidecar]:
    with start_serve(["--port", "0", "--store", "memory://", *tls_args(pki)]) as sidecar:
        yield sidecar


def trusting(pki: Pki, client: Issued | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca.certfile))
    if client is not None:
        context.load_cert_chain(client.certfile, client.keyfile)
    return context


def call(
    url: str, token: str, verify: ssl.SSLContext | bool = True, agent_id: str = "agent-1"
) -> httpx.Response:
    """``agents.get`` over its own connection."""
    with httpx.Client(verify=verify, timeout=30) as http:
        return http.post(
            url.rstrip("/") + CALL_STORE_PATH,
            json={"substore": "agents", "method": "get", "input": {"agentId": agent_id}},
            headers={"Authorization": f"Bearer {token}"},
        )


# -- the listener ---------------------------------------------------------------------


def test_serve_announces_https_and_answers_over_tls(tls_store: Sidecar, pki: Pki) -> None:
    assert tls_store.url.startswith("https://127.0.0.1:")
    answer = call(tls_store.url, tls_store.auth_token, trusting(pki))
    assert (answer.status_code, answer.json()) == (200, {})
    with httpx.Client(verify=trusting(pki)) as http:
        assert http.get(tls_store.url + "healthz").status_code == 200


def test_under_tls_every_response_carries_hsts(tls_store: Sidecar, pki: Pki) -> None:
    """CallStore (answered and refused), health, readiness, metrics, the viewer, a 404."""
    with httpx.Client(verify=trusting(pki), timeout=30) as http:
        responses = [
            call(tls_store.url, tls_store.auth_token, trusting(pki)),
            call(tls_store.url, "not-the-token-0123456789", trusting(pki)),
            http.get(tls_store.url + "healthz"),
            http.get(tls_store.url + "readyz"),
            http.get(tls_store.url + "metrics"),
            http.get(tls_store.url + "ui/"),
            http.get(tls_store.url + "ui/sign-in"),
            http.get(tls_store.url + "no-such-page"),
        ]
    assert [r.status_code for r in responses] == [200, 401, 200, 200, 401, 303, 200, 404]
    for response in responses:
        assert response.headers["strict-transport-security"] == "max-age=31536000"
    # Plain HTTP: no such header (it would mean nothing to a browser there).
    with start_serve(["--port", "0", "--store", "memory://"]) as plain:
        assert "strict-transport-security" not in httpx.get(plain.url + "healthz").headers


def test_clients_that_do_not_trust_the_ca_or_speak_plain_http_get_nothing(
    tls_store: Sidecar,
) -> None:
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        call(tls_store.url, tls_store.auth_token)
    with pytest.raises(httpx.TransportError):
        call(tls_store.url.replace("https://", "http://"), tls_store.auth_token)


def handshake(url: str, context: ssl.SSLContext) -> str:
    """The cipher suite a TLS handshake with ``url`` settles on."""
    host, port = url.removeprefix("https://").rstrip("/").split(":")
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        cipher = tls.cipher()
        assert cipher is not None
        return cipher[0]


def test_tls_1_2_clients_get_no_sha1_cbc_suites(tls_store: Sidecar, pki: Pki) -> None:
    context = trusting(pki)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    suite = handshake(tls_store.url, context)
    assert suite.startswith("ECDHE-ECDSA-")
    assert "GCM" in suite or "CHACHA20" in suite
    # uvicorn before 0.48 offered TLS 1.2 clients only suites like this one.
    context.set_ciphers("ECDHE-ECDSA-AES128-SHA")
    with pytest.raises(ssl.SSLError):
        handshake(tls_store.url, context)


def test_with_ssl_ca_certs_only_clients_with_a_certificate_from_those_cas_get_in(
    pki: Pki,
) -> None:
    args = ["--port", "0", "--store", "memory://", *tls_args(pki)]
    with start_serve([*args, "--ssl-ca-certs", str(pki.clients.certfile)]) as store:
        answer = call(store.url, store.auth_token, trusting(pki, pki.client))
        assert answer.status_code == 200
        # A certificate from another CA, or none: TLS 1.3 reports the refusal on the
        # first read, after the handshake.
        elsewhere = pki.ca.issue_client("not-from-the-client-ca")
        for context in (trusting(pki), trusting(pki, elsewhere)):
            with pytest.raises(httpx.TransportError):
                call(store.url, store.auth_token, context)


# -- start-up errors ------------------------------------------------------------------


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("bad")
    key = ec.generate_private_key(ec.SECP256R1())
    files = {
        "other key": key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        "encrypted key": key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"passphrase"),
        ),
        "not pem": b"certificate? no\n",
    }
    paths = {}
    for name, content in files.items():
        paths[name] = directory / (name.replace(" ", "-") + ".pem")
        paths[name].write_bytes(content)
    return paths


BAD_TLS = {
    "missing certificate": (
        ["--ssl-certfile", "{missing}", "--ssl-keyfile", "{key}"],
        "cannot read --ssl-certfile {missing}: No such file or directory",
    ),
    "missing key": (
        ["--ssl-certfile", "{cert}", "--ssl-keyfile", "{missing}"],
        "cannot read --ssl-keyfile {missing}: No such file or directory",
    ),
    "key of another certificate": (
        ["--ssl-certfile", "{cert}", "--ssl-keyfile", "{other key}"],
        "--ssl-certfile {cert} with --ssl-keyfile {other key}: key values mismatch; "
        "give the private key that belongs to this certificate",
    ),
    "encrypted key": (
        ["--ssl-certfile", "{cert}", "--ssl-keyfile", "{encrypted key}"],
        "--ssl-keyfile {encrypted key}: the private key is encrypted; serve needs it unencrypted",
    ),
    "certificate and key swapped": (
        ["--ssl-certfile", "{key}", "--ssl-keyfile", "{cert}"],
        "--ssl-certfile {key} holds no PEM certificate",
    ),
    "certificate without its key": (
        ["--ssl-certfile", "{cert}"],
        "--ssl-certfile {cert} holds no PEM private key; give the key with --ssl-keyfile",
    ),
    "client CAs that are not PEM": (
        ["--ssl-certfile", "{cert}", "--ssl-keyfile", "{key}", "--ssl-ca-certs", "{not pem}"],
        "--ssl-ca-certs {not pem} holds no PEM certificate",
    ),
    "key without a certificate": (
        ["--ssl-keyfile", "{key}"],
        "--ssl-keyfile needs --ssl-certfile, the server's certificate",
    ),
}


@pytest.mark.parametrize(("args", "message"), BAD_TLS.values(), ids=BAD_TLS.keys())
def test_bad_tls_files_are_one_line_naming_the_flag_and_exit_2(
    args: list[str],
    message: str,
    pki: Pki,
    bad_files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BRIDGE_STORE_AUTH_TOKEN", raising=False)
    paths = {
        "cert": str(pki.server.certfile),
        "key": str(pki.server.keyfile),
        "missing": str(tmp_path / "missing.pem"),
        **{name: str(path) for name, path in bad_files.items()},
    }
    argv = ["serve", "--store", "memory://", "--port", "0", *(a.format(**paths) for a in args)]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"bridge-store: {message.format(**paths)}\n"
    # The check comes before anything is set up: no token file was written.
    assert not (tmp_path / "bridge-store.token").exists()


# -- the client side ------------------------------------------------------------------


def test_the_store_check_trusts_the_ca_it_is_given(tls_store: Sidecar, pki: Pki) -> None:
    with pytest.raises(ConfigurationError, match=r"does not trust.*--store-ca-file"):
        check_store(tls_store.url, tls_store.auth_token)
    check_store(tls_store.url, tls_store.auth_token, ca_file=pki.ca.certfile)
    with pytest.raises(ConfigurationError, match="rejected the auth token"):
        check_store(tls_store.url, "wrong", ca_file=pki.ca.certfile)
    # http:// to a server that speaks TLS: it hangs up; the check says what to try.
    plain = tls_store.url.replace("https://", "http://", 1)
    with pytest.raises(ConfigurationError) as raised:
        check_store(plain, tls_store.auth_token, ca_file=pki.ca.certfile)
    assert str(raised.value) == (
        f"the server at {plain} hung up without answering plain HTTP; if it serves TLS, "
        f"give {tls_store.url}"
    )


@pytest.fixture
def bridge_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    for name in BRIDGE_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    with CursorApiStub() as cursor_api:
        yield {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(home)}


def node_environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    pairs = (item.decode().split("=", 1) for item in raw if b"=" in item)
    return dict(pairs)


@pytest.mark.bridge
@pytest.mark.slow
def test_the_real_bridge_keeps_its_agents_in_a_store_over_https(
    tls_store: Sidecar,
    pki: Pki,
    bridge_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Node reads one extra CA file: one set already (here, another CA's) is bundled
    # with the store's for the bridge, not replaced.
    elsewhere = Authority(tmp_path, "elsewhere")
    monkeypatch.setenv(NODE_CA_ENV, str(elsewhere.certfile))
    with launch(
        store_url=tls_store.url,
        auth_token=tls_store.auth_token,
        store_ca_file=pki.ca.certfile,
        workspace=tmp_path,
        env=bridge_env,
    ) as session:
        bundle = Path(node_environment(session.bridge.pid)[NODE_CA_ENV])
        assert bundle.read_text() == (elsewhere.certfile.read_text() + pki.ca.certfile.read_text())
        agent = session.client.agents.create(
            session.agent_options(model=MODEL_ID, api_key="tls-key"), name="over https"
        )
        run = agent.send("hello").wait()
        assert run.status == "error"  # the stand-in Cursor API runs no models
    with httpx.Client(verify=trusting(pki), timeout=30) as http:
        headers = {"Authorization": f"Bearer {tls_store.auth_token}"}

        def store(substore: str, method: str, data: object) -> object:
            body = {"substore": substore, "method": method, "input": data}
            answer = http.post(
                tls_store.url + CALL_STORE_PATH.lstrip("/"), json=body, headers=headers
            )
            return answer.json()["output"]

        stored = store("agents", "get", {"agentId": agent.agent_id})
        assert isinstance(stored, dict)
        assert stored["name"] == "over https"
        events = store("runEvents", "list", {"runId": run.id})
        assert isinstance(events, dict)
        assert events["items"]
    assert not bundle.exists()


@pytest.mark.bridge
@pytest.mark.slow
def test_without_the_ca_the_real_bridge_cannot_reach_the_store(
    tls_store: Sidecar, bridge_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(NODE_CA_ENV, raising=False)
    with (
        launch_bridge(
            tls_store.url, tls_store.auth_token, workspace=tmp_path, env=bridge_env
        ) as bridge,
        bridge.client() as client,
        pytest.raises(cursor_sdk.errors.CursorAgentError, match="verify the first certificate"),
    ):
        client.agents.create(
            {"model": MODEL_ID, "api_key": "k", "local": local_options(tmp_path)}, name="x"
        )


@pytest.mark.bridge
@pytest.mark.slow
def test_the_bridge_command_gives_the_bridge_the_stores_ca(
    tls_store: Sidecar, pki: Pki, bridge_env: dict[str, str], tmp_path: Path
) -> None:
    token_file = tmp_path / "store.token"
    token_file.write_text(tls_store.auth_token)
    inherited = {k: v for k, v in os.environ.items() if k not in (TOKEN_ENV, NODE_CA_ENV)}
    command = [sys.executable, "-m", "bridge_store", "bridge"]
    command += ["--store-callback-url", tls_store.url, "--store-auth-token-file", str(token_file)]
    command += ["--store-ca-file", str(pki.ca.certfile), "--workspace", str(tmp_path)]
    environment = {**inherited, **bridge_env}
    with (
        (tmp_path / "stderr").open("w") as stderr,
        subprocess.Popen(
            command, env=environment, stdout=subprocess.PIPE, stderr=stderr, text=True
        ) as process,
    ):
        assert process.stdout is not None
        try:
            # The command prints the discovery JSON once the bridge is up, or exits.
            line = process.stdout.readline()
            assert line, (tmp_path / "stderr").read_text()
            discovery = json.loads(line)
            assert node_environment(discovery["pid"])[NODE_CA_ENV] == str(pki.ca.certfile)
            url, token = bridge_endpoint(discovery)
            with cursor_sdk.Client(base_url=url, auth_token=token) as client:
                options = {"model": MODEL_ID, "api_key": "k", "local": local_options(tmp_path)}
                agent = client.agents.create(options, name="through the command")
            answer = call(tls_store.url, tls_store.auth_token, trusting(pki), agent.agent_id)
            assert answer.json()["output"]["name"] == "through the command"
        finally:
            process.terminate()
            assert process.wait(30) == 0


def test_the_stores_ca_goes_with_a_running_store_only(
    pki: Pki, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bridge", "--store", "memory://", "--store-ca-file", str(pki.ca.certfile)]) == 2
    assert capsys.readouterr().err == (
        "bridge-store: --store-ca-file goes with --store-callback-url\n"
    )
    with pytest.raises(ConfigurationError, match="for an existing store"):
        launch("memory://", store_ca_file=pki.ca.certfile)
