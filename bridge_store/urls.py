"""Store URLs shown to people (logs, ``/readyz``, ``config show``, errors): never a secret.

Redaction is by allow-list. Only the query parameters known to be harmless for the
URL's scheme (a Redis key prefix, a pool size, a timeout, ``sslmode``, an S3 region)
show their values; every other parameter shows as ``name=***`` when its name is one of
the backends' own, and as ``***`` when it is not (a planted name is no safer than a
planted value). Names are compared after percent-decoding, as the backends read them,
so ``pass%77ord=`` is ``password=``. The password of the URL is masked, and a URL
nested in a parameter (``endpoint_url=http://user:pw@host``) shows only its scheme,
host and port. The fragment, which no backend reads, is masked.

A deny-list of secret names missed every parameter nobody had thought of
(``sslpassword``, ``sslkey`` passphrases, a driver's next option); an allow-list fails
safe: a new harmless parameter merely shows as ``***`` until it is added here.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus, urlsplit

MASK = "***"
#: What a harmless value looks like (numbers, words, a key prefix); anything else, say
#: ``sslmode=require;sslpassword=...`` to a driver that splits on ``;``, is masked.
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9._:/,-]{0,200}")

_POSTGRES = frozenset(
    {
        # The backend's own (backends/bridge_store_sql/settings.py).
        "pool_size",
        "max_overflow",
        "pool_timeout",
        "pool_recycle",
        "pool_pre_ping",
        "connect_timeout",
        "command_timeout",
        # asyncpg's that say how to connect, never with what, and server settings
        # that name a schema or a bound.
        "sslmode",
        "target_session_attrs",
        "search_path",
        "statement_timeout",
    }
)
_REDIS = frozenset(
    {
        "prefix",
        "run_events_ttl",
        "socket_connect_timeout",
        "socket_timeout",
        "max_connections",
        "wait_replicas",
        "ssl_cert_reqs",
        "ssl_check_hostname",
    }
)
_S3 = frozenset(
    {
        "region",
        "addressing_style",
        "max_attempts",
        "max_connections",
        "connect_timeout",
        "request_timeout",
        "blob_timeout",
    }
)

#: Per scheme, the parameters whose values are shown. A scheme not here (a plugin's)
#: shows none.
SHOWN_PARAMETERS: dict[str, frozenset[str]] = {
    "sqlite": frozenset({"busy_timeout"}),
    "postgresql": _POSTGRES,
    "postgres": _POSTGRES,
    "postgresql+asyncpg": _POSTGRES,
    "redis": _REDIS,
    "rediss": _REDIS,
    "redis+cluster": _REDIS,
    "rediss+cluster": _REDIS,
    "s3": _S3,
}

#: Parameters named in the shown URL with their values masked: the backends' own
#: names, so a reader sees which were given. Nothing a caller makes up is shown.
NAMED_PARAMETERS = frozenset(
    {
        "password",
        "passfile",
        "sslpassword",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "sslcrl",
        "ssl_ca_certs",
        "ssl_certfile",
        "ssl_keyfile",
        "endpoint_url",
        "profile",
        "access_key_id",
        "secret_access_key",
        "session_token",
        "user",
        "host",
        "port",
        "database",
        "dbname",
    }
)

#: Parameters holding a URL of their own, shown as its scheme, host and port.
_NESTED_URLS = frozenset({"endpoint_url"})


#: Where SQLAlchemy's URL parser ends a password: at the first ``@`` after ``user:``,
#: whatever comes between (``#``, ``?`` and ``/`` included).
_SQLALCHEMY_USERINFO = re.compile(r"[^:/@?#]*:[^@]*@")


def redact(url: str) -> str:
    """``url`` with nothing shown but its scheme, user, hosts, path and harmless settings.

    Split by hand rather than rebuilt with urlunsplit, which drops the empty host of
    ``sqlite:///x.db``. A password holding ``/``, ``?`` or ``#`` (unencoded) is still
    masked whole: the backends disagree on where it ends (urlsplit at the last ``@``
    before ``/?#``, SQLAlchemy at the first ``@`` after ``user:``), so the user
    information shown ends at the later of the two.
    """
    scheme, separator, rest = url.partition("://")
    prefix = ""
    if separator:
        prefix = f"{scheme}://"
        at = _userinfo_end(rest)
        if at >= 0:
            prefix += f"{_userinfo(rest[:at])}@"
            rest = rest[at + 1 :]
    else:
        scheme, rest = "", url
    head, hashmark, fragment = rest.partition("#")
    base, qmark, query = head.partition("?")
    shown = SHOWN_PARAMETERS.get(scheme.lower(), frozenset())
    if query:
        query = "&".join(_pair(piece, shown) for piece in query.split("&"))
    return prefix + base + qmark + query + (hashmark + MASK if fragment else hashmark)


def _userinfo_end(rest: str) -> int:
    """The index of the ``@`` ending the user information of ``rest``; -1 if none."""
    authority_and_path = rest.partition("#")[0].partition("?")[0]
    end = authority_and_path.rfind("@")
    sqlalchemy = _SQLALCHEMY_USERINFO.match(rest)
    if sqlalchemy is not None:
        end = max(end, sqlalchemy.end() - 1)
    return end


def redact_nested(url: str) -> str:
    """A URL given inside another's parameter: its scheme, host and port only."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return MASK
    host = parts.netloc.rsplit("@", 1)[-1]
    userinfo = f"{MASK}@" if "@" in parts.netloc else ""
    rest = "/" + MASK if parts.path.strip("/") or parts.query or parts.fragment else ""
    return f"{parts.scheme}://{userinfo}{host}{rest}"


def _userinfo(userinfo: str) -> str:
    """The user shown, the password (after the first ``:``) masked."""
    user, colon, _ = userinfo.partition(":")
    return f"{user}:{MASK}" if colon else user


def _pair(piece: str, shown: frozenset[str]) -> str:
    raw_name, equals, value = piece.partition("=")
    name = unquote_plus(raw_name)
    if name in shown and _PLAIN_VALUE.fullmatch(unquote_plus(value)):
        return piece
    if name in _NESTED_URLS and equals:
        return f"{name}={redact_nested(unquote_plus(value))}"
    if name in NAMED_PARAMETERS or name in shown:
        return f"{name}={MASK}" if equals else name
    return MASK
