"""Store URLs as people see them: redacted by allow-list, so no secret ever shows.

The deny-list it replaced missed ``sslpassword=`` (an asyncpg parameter), parameter
names written percent-encoded (``pass%77ord=``) and credentials in a URL nested in a
parameter (``endpoint_url=http://user:pw@host``): in ``/readyz``, ``config show``,
logs and errors. Hypothesis plants a secret in every place a URL can carry one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge_store.urls import NAMED_PARAMETERS, SHOWN_PARAMETERS, redact, redact_nested
from bridge_store_s3.settings import parse_url

SECRET = "zqSECRETzq0123456789"
#: Upper case, as SECRET: the strategies below never draw it by chance.
PASSWORD_START = "zqSTARTzq"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://app:pw@db:5432/bridge?sslmode=verify-full&sslpassword=" + SECRET,
            "postgresql://app:***@db:5432/bridge?sslmode=verify-full&sslpassword=***",
        ),
        (
            "postgresql://app@db/bridge?pass%77ord=" + SECRET + "&pool_size=5",
            "postgresql://app@db/bridge?password=***&pool_size=5",
        ),
        (
            "s3://bucket/p?region=eu-west-1&secret%5Faccess%5Fkey=" + SECRET,
            "s3://bucket/p?region=eu-west-1&secret_access_key=***",
        ),
        (
            f"s3://bucket/p?endpoint_url=http://user:{SECRET}@minio:9000&access_key_id=AKIA1",
            "s3://bucket/p?endpoint_url=http://***@minio:9000&access_key_id=***",
        ),
        (
            f"s3://bucket/p?endpoint_url=http%3A%2F%2Fuser%3A{SECRET}%40minio%3A9000%2Fx",
            "s3://bucket/p?endpoint_url=http://***@minio:9000/***",
        ),
        (
            f"redis://:{SECRET}@cache:6379/2?prefix=team-a:bs&ssl_keyfile=/k.pem&{SECRET}=1",
            "redis://:***@cache:6379/2?prefix=team-a:bs&ssl_keyfile=***&***",
        ),
        # A driver that splits values on ";" must not see a shown value carry a secret.
        (
            f"postgresql://db/x?sslmode=require;sslpassword={SECRET}",
            "postgresql://db/x?sslmode=***",
        ),
        (f"sqlite:///x.db#{SECRET}", "sqlite:///x.db#***"),
        (f"postgresql://u:pa/{SECRET}@h/db", "postgresql://u:***@h/db"),
        ("sqlite:///var/lib/x.db?busy_timeout=500", "sqlite:///var/lib/x.db?busy_timeout=500"),
        (
            "postgresql://db/x?search_path=team_a,public&sslkey=/k.pem",
            "postgresql://db/x?search_path=team_a,public&sslkey=***",
        ),
        (f"plugin://host/db?timeout={SECRET}", "plugin://host/db?***"),
        # An unencoded "#" or "?" in a password: SQLAlchemy reads the password up to the
        # "@" and connects; its start showed as "app:pa#***".
        (
            f"postgresql://app:pa#{SECRET}@db/x?sslmode=require",
            "postgresql://app:***@db/x?sslmode=require",
        ),
        (f"postgresql+asyncpg://app:pa?{SECRET}@db/x", "postgresql+asyncpg://app:***@db/x"),
        (f"redis://:pa#{SECRET}@cache:6379/0", "redis://:***@cache:6379/0"),
        # Fail-safe where a port and a password cannot be told apart.
        ("redis://cache:6379/0?prefix=a@b", "redis://cache:***@b"),
    ],
)
def test_redact_shows_only_allow_listed_parameters(url: str, shown: str) -> None:
    assert redact(url) == shown
    assert SECRET not in redact(url)
    assert redact(redact(url)) == redact(url)


def test_the_s3_store_described_in_messages_hides_an_endpoints_credentials() -> None:
    settings = parse_url(f"s3://b/p?endpoint_url=http://u:{SECRET}@minio:9000", environ={})
    assert settings.describe() == "s3://b/p/ at http://***@minio:9000"
    assert redact_nested("not a url " + SECRET) == "***"


def _all_shown() -> set[str]:
    return {name for names in SHOWN_PARAMETERS.values() for name in names}


names = st.sampled_from(
    sorted(_all_shown() | NAMED_PARAMETERS | {"x", "token", "sslpassword", "api-key"})
) | st.text("abcdefghijklmnopqrstuvwxyz_-%0123456789", min_size=1, max_size=12)
values = st.text("abcdefghijklmnopqrstuvwxyz0123456789-._:/", max_size=12)
schemes = st.sampled_from([*SHOWN_PARAMETERS, "http", "plugin"])


def _encode(name: str, how: int) -> str:
    """``name`` as written in a URL: plain, one letter percent-encoded, or all of it."""
    if how == 0 or not name:
        return name
    if how == 1:
        return "%" + format(ord(name[0]), "02X") + name[1:]
    return "".join("%" + format(ord(char), "02X") for char in name)


@st.composite
def urls_with_a_planted_secret(draw: st.DrawFn) -> str:
    scheme = draw(schemes)
    shown = SHOWN_PARAMETERS.get(scheme, frozenset())
    pairs = [f"{quote(n)}={quote(v)}" for n, v in draw(st.lists(st.tuples(names, values)))]
    where = draw(
        st.sampled_from(
            [
                "password",
                "password-with-a-delimiter",
                "value",
                "name",
                "nested-userinfo",
                "nested-query",
                "fragment",
            ]
        )
    )
    userinfo = "user@"
    fragment = ""
    if where == "password":
        userinfo = f"user:{SECRET}@"
    elif where == "password-with-a-delimiter":
        # Unencoded: SQLAlchemy ends the password at the "@", urlsplit at "#?/".
        delimiter = draw(st.sampled_from("#?/"))
        userinfo = f"user:{PASSWORD_START}{delimiter}{SECRET}@"
    elif where == "value":
        name = draw(names.filter(lambda n: n.replace("%", "") and n not in shown))
        pairs.append(f"{_encode(name, draw(st.integers(0, 2)))}={quote(SECRET)}")
    elif where == "name":
        pairs.append(f"{_encode(SECRET, draw(st.integers(0, 2)))}={draw(values)}")
    elif where == "nested-userinfo":
        pairs.append(f"endpoint_url={quote(f'http://u:{SECRET}@minio:9000', safe=':/@')}")
    elif where == "nested-query":
        pairs.append(f"endpoint_url={quote(f'http://minio/?k={SECRET}', safe='')}")
    else:
        fragment = f"#{SECRET}"
    draw(st.randoms()).shuffle(pairs)
    return f"{scheme}://{userinfo}host:1234/db?{'&'.join(pairs)}{fragment}"


@settings(max_examples=400, deadline=None)
@given(urls_with_a_planted_secret())
def test_a_planted_secret_never_shows_whatever_its_name_or_position(url: str) -> None:
    shown = redact(url)
    assert SECRET not in shown
    assert PASSWORD_START not in shown  # nor the start of a password cut by a delimiter
    assert quote(SECRET) not in shown
    assert SECRET.lower() not in shown.lower()


def config_show(*args: str, env: dict[str, str]) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_STORE_")}
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", "config", "show", *args],
        capture_output=True,
        text=True,
        env={**environ, **env},
        timeout=60,
        check=True,
    ).stdout


def test_config_show_hides_sslpassword_from_flags_environment_and_config(tmp_path: Path) -> None:
    def url(where: str) -> str:
        return f"postgresql://app@db/{where}?sslmode=require&sslpassword={SECRET}{where}"

    config = tmp_path / "bridge-store.toml"
    config.write_text(f'checkpoints = "{url("file")}"\n')
    shown = config_show(
        "--config", str(config), "--agents", url("flag"), env={"BRIDGE_STORE_URL": url("env")}
    )
    assert SECRET not in shown
    settings = tomllib.loads(shown)
    assert settings["agents"] == "postgresql://app@db/flag?sslmode=require&sslpassword=***"
    assert settings["store"] == "postgresql://app@db/env?sslmode=require&sslpassword=***"
    assert settings["checkpoints"] == "postgresql://app@db/file?sslmode=require&sslpassword=***"
