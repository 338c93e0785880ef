"""Signing in to the viewer: the bearer token in an encrypted, HttpOnly session cookie.

The sign-in form takes a store token. It is kept in a cookie that is HttpOnly (no
script reads it), SameSite=Strict (no other site's page sends it) and sealed with
Fernet (``cryptography``: AES plus an HMAC) under a secret made when the server
starts: the cookie cannot be forged, read or replayed past :data:`SESSION_SECONDS`,
and a restart signs everyone out. Each request opens the cookie and checks the token
again, so a token that stops being valid stops the session with it.

Only viewer pages read the cookie. CallStore authenticates by its
``Authorization`` header alone, so a session never authorises a store call.

The viewer changes no data; its only forms are sign-in and sign-out, and both carry
a token that must match a SameSite=Strict cookie (double submit) and come from this
origin, so another site can neither sign a visitor out nor into its own account.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken
from starlette.requests import Request
from starlette.responses import Response

SESSION_COOKIE = "bridge_store_session"
CSRF_COOKIE = "bridge_store_csrf"
CSRF_FIELD = "csrf"
#: A session lasts a working day; signing in again is one paste.
SESSION_SECONDS = 12 * 60 * 60

#: Who a valid token speaks for. Today one kind (the store token's holder); named
#: tokens with tenants and scopes will bring theirs, through ``authenticate``.
Principal = TypeVar("Principal")


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


@dataclass
class Sessions(Generic[Principal]):
    """Seals tokens into session cookies and finds the principal behind a request."""

    authenticate: Callable[[str], Awaitable[Principal | None]]
    secret: bytes

    @classmethod
    def with_new_secret(
        cls, authenticate: Callable[[str], Awaitable[Principal | None]]
    ) -> Sessions[Principal]:
        return cls(authenticate, secrets.token_bytes(32))

    def __post_init__(self) -> None:
        self._fernet = Fernet(base64.urlsafe_b64encode(self.secret))

    async def principal(self, request: Request) -> Principal | None:
        """Who makes this request: its bearer token (scripts) or its session cookie."""
        token = bearer_token(request) or self._open(request.cookies.get(SESSION_COOKIE))
        if token is None:
            return None
        return await self.authenticate(token)

    def _open(self, cookie: str | None) -> str | None:
        if not cookie:
            return None
        try:
            return self._fernet.decrypt(cookie.encode("ascii"), ttl=SESSION_SECONDS).decode()
        except (InvalidToken, UnicodeError):
            return None

    def sign_in(self, response: Response, token: str, *, path: str, secure: bool) -> None:
        sealed = self._fernet.encrypt(token.encode()).decode("ascii")
        response.set_cookie(
            SESSION_COOKIE,
            sealed,
            max_age=SESSION_SECONDS,
            path=path,
            secure=secure,
            httponly=True,
            samesite="strict",
        )

    def sign_out(self, response: Response, *, path: str, secure: bool) -> None:
        response.delete_cookie(
            SESSION_COOKIE, path=path, secure=secure, httponly=True, samesite="strict"
        )


def csrf_token(request: Request) -> str:
    """The request's CSRF token: its cookie's, or a new one (set it with ``keep_csrf``)."""
    return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)


def keep_csrf(response: Response, token: str, *, path: str, secure: bool) -> None:
    response.set_cookie(
        CSRF_COOKIE, token, path=path, secure=secure, httponly=True, samesite="strict"
    )


def same_origin(request: Request) -> bool:
    """Whether a form post comes from a page of this server.

    Browsers send ``Origin`` on every POST; ``Sec-Fetch-Site`` where they support it.
    A post naming another origin is refused even with a valid CSRF token.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return urlsplit(origin).netloc == host


def csrf_ok(request: Request, submitted: str | None) -> bool:
    cookie = request.cookies.get(CSRF_COOKIE)
    return (
        bool(cookie and submitted)
        and hmac.compare_digest(str(cookie), str(submitted))
        and same_origin(request)
    )
