"""Redis store URLs: what they configure, what they reject, and the missing-extra hint."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.backend.substores import DEFAULT_BACKEND_TIMEOUT, BackendOptions
from bridge_store.errors import ConfigurationError
from bridge_store_redis.settings import DEFAULT_PREFIX, parse_url


def test_defaults() -> None:
    settings = parse_url("redis://")
    assert (settings.host, settings.port, settings.db) == ("localhost", 6379, 0)
    assert settings.prefix == DEFAULT_PREFIX
    assert settings.run_events_ttl is None
    assert settings.connect_timeout == DEFAULT_BACKEND_TIMEOUT
    assert settings.socket_timeout == DEFAULT_BACKEND_TIMEOUT
    assert not settings.tls


def test_the_server_backend_timeout_is_the_default_and_url_parameters_win() -> None:
    options = BackendOptions(timeout=1.5)
    backend = open_backend(get_plugin_manager(), "redis://127.0.0.1/0", options)
    assert (backend.settings.connect_timeout, backend.settings.socket_timeout) == (1.5, 1.5)  # type: ignore[attr-defined]
    url = "redis://127.0.0.1/0?socket_timeout=9&socket_connect_timeout=0.25"
    backend = open_backend(get_plugin_manager(), url, options)
    assert (backend.settings.connect_timeout, backend.settings.socket_timeout) == (0.25, 9.0)  # type: ignore[attr-defined]
    pool = backend._client.connection_pool  # type: ignore[attr-defined]
    assert pool.connection_kwargs["socket_keepalive"] is True
    assert pool.connection_kwargs["socket_keepalive_options"] == options.tcp_keepalive()


def test_every_part_of_a_url() -> None:
    settings = parse_url(
        "rediss://svc:p%40ss@cache.internal:6380/3?prefix=team-a/prod&run_events_ttl=86400"
        "&socket_connect_timeout=0.5&socket_timeout=1.5&max_connections=8"
        "&ssl_cert_reqs=none&ssl_ca_certs=/etc/ca.pem&ssl_check_hostname=false"
    )
    assert (settings.host, settings.port, settings.db) == ("cache.internal", 6380, 3)
    assert (settings.username, settings.password) == ("svc", "p@ss")
    assert settings.tls
    assert settings.prefix == "team-a/prod"
    assert settings.run_events_ttl == 86400
    assert (settings.connect_timeout, settings.socket_timeout) == (0.5, 1.5)
    assert settings.max_connections == 8
    assert settings.tls_options == {
        "ssl_cert_reqs": "none",
        "ssl_ca_certs": "/etc/ca.pem",
        "ssl_check_hostname": False,
    }


def test_a_cluster_url_names_seed_nodes_and_may_wait_for_replicas() -> None:
    settings = parse_url(
        "redis+cluster://svc:p%40ss@n1.internal:7000,n2.internal:7001,[::1]:7002/"
        "?prefix=team-a&wait_replicas=1&max_connections=8",
        timeout=2.0,
    )
    assert settings.cluster
    assert settings.nodes == (("n1.internal", 7000), ("n2.internal", 7001), ("::1", 7002))
    assert (settings.host, settings.port, settings.db) == ("n1.internal", 7000, 0)
    assert (settings.username, settings.password) == ("svc", "p@ss")
    assert (settings.prefix, settings.wait_replicas, settings.max_connections) == ("team-a", 1, 8)
    assert settings.socket_timeout == 2.0
    plain = parse_url("redis://n1.internal:7000/0")
    assert not plain.cluster
    assert plain.wait_replicas == 0
    assert parse_url("redis+cluster://a:1").wait_replicas == 0


def test_the_plugin_opens_a_cluster_url_in_the_cluster_layout_without_connecting() -> None:
    backend = open_backend(get_plugin_manager(), "redis+cluster://127.0.0.1:1,127.0.0.1:2/")
    assert backend.keys.spread  # type: ignore[attr-defined]
    assert not open_backend(get_plugin_manager(), "redis://127.0.0.1:1/").keys.spread  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://localhost/abc", "database number"),
        ("redis://localhost:99999/0", "invalid port"),
        ("redis://?prefix=", "key prefix"),
        ("redis://?prefix=has{brace}", "key prefix"),
        ("redis://?prefix=glob*", "key prefix"),
        ("redis://?prefix=-leading-dash", "key prefix"),
        ("redis://?run_events_ttl=0", "run_events_ttl"),
        ("redis://?run_events_ttl=1.5", "run_events_ttl"),
        ("redis://?socket_timeout=-1", "socket_timeout"),
        ("redis://?socket_connect_timeout=never", "socket_connect_timeout"),
        ("redis://?max_connections=0", "max_connections"),
        ("redis://?prefix=a&prefix=b", "given twice"),
        ("redis://?pool=3", "unknown Redis URL parameter(s): pool"),
        # TLS options only mean something on rediss://.
        ("redis://?ssl_cert_reqs=none", "unknown Redis URL parameter(s): ssl_cert_reqs"),
        ("rediss://?ssl_cert_reqs=maybe", "ssl_cert_reqs"),
        ("redis+cluster://cache.internal/", "host:port"),
        ("redis+cluster://a:1,b/", "host:port"),
        ("redis+cluster://a:1,:2/", "host:port"),
        ("redis+cluster://a:99999/", "host:port"),
        ("redis+cluster://a:1/3", "names no database"),
        ("redis+cluster://a:1/?wait_replicas=one", "wait_replicas"),
        # WAIT after every write is offered on clusters only.
        ("redis://a/?wait_replicas=1", "unknown Redis URL parameter(s): wait_replicas"),
    ],
)
def test_bad_urls_are_configuration_errors(url: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_url(url)


def test_the_plugin_claims_redis_and_rediss_without_connecting() -> None:
    manager = get_plugin_manager()
    # Nothing listens on port 1; opening must still succeed, since it does not connect.
    for url in ("redis://127.0.0.1:1/0", "rediss://127.0.0.1:1/0"):
        backend = open_backend(manager, url)
        assert backend.agents is not None
    with pytest.raises(ConfigurationError, match="unknown Redis URL parameter"):
        open_backend(manager, "redis://localhost/0?nope=1")


def test_without_redis_py_the_error_names_the_extra() -> None:
    # A child interpreter in which `import redis` fails, as without the extra.
    script = textwrap.dedent(
        """
        import sys
        sys.modules["redis"] = None
        from bridge_store.errors import ConfigurationError
        from bridge_store.backend.plugins import get_plugin_manager, open_backend
        try:
            open_backend(get_plugin_manager(), "redis://localhost:6379/0")
        except ConfigurationError as error:
            print(error)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert "pip install 'bridge-store[redis]'" in result.stdout
    assert "Traceback" not in result.stderr


def test_the_core_and_the_plugin_module_do_not_import_redis_py() -> None:
    script = (
        "import sys, bridge_store.backend.plugins, bridge_store_redis; "
        "print('redis' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
