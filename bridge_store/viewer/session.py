"""Signing in to the viewer: the bearer token in an encrypted, HttpOnly session cookie.

The sign-in form takes a store token. It is kept in a cookie that is HttpOnly (no
script reads it), SameSite=Strict (no other site's page sends it) and sealed with
Fernet (``cryptography``: AES plus an HMAC) under a secret made when the server
starts: the cookie cannot be forged, read or replayed past :data:`SESSION_SECONDS`,
and a restart signs everyone out. Each request opens the cookie and checks the token
again, so a token that stops being valid stops the session with it.

Signing out ends the session on the server too, not only in the browser: each cookie
seals a random session id beside the token, and sign-out records that id as ended
until the cookie would have expired anyway, so a copy of the cookie (saved, stolen)
is refused from then on. The ended ids live in this process's memory, like the
sealing secret: a session and its end have the same reach, one server process (a
restart ends both). Servers that came to share the secret across processes would
have to share the ended ids too (in the store). The set is bounded
(:data:`MAX_ENDED_SESSIONS`): past it the secret is replaced, which signs everyone
out rather than forget an ended session.

Only viewer pages read the cookie. CallStore authenticates by its
``Authorization`` header alone, so a session never authorises a store call.

The viewer changes no data; its only forms are sign-in and sign-out, and both carry
a token that must match a SameSite=Strict cookie (double submit) and come from this
origin, so another site can neither sign a visitor out nor into its own account.
"""

from __future__ import annotations

import base64
import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken
from starlette.requests import Request
from starlette.responses import Response

logger = logging.getLogger(__name__)

SESSION_COOKIE = "bridge_store_session"
CSRF_COOKIE = "bridge_store_csrf"
CSRF_FIELD = "csrf"
#: A session lasts a working day; signing in again is one paste.
SESSION_SECONDS = 12 * 60 * 60

#: Ended sessions remembered at once (about 100 bytes each); past it, every session ends.
MAX_ENDED_SESSIONS = 100_000

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
        #: Session id -> when its cookie expires anyway (time.time() seconds).
        self._ended: dict[str, float] = {}

    async def principal(self, request: Request) -> Principal | None:
        """Who makes this request: its bearer token (scripts) or its session cookie."""
        token = bearer_token(request)
        if token is None:
            session = self._open(request.cookies.get(SESSION_COOKIE))
            token = session[1] if session is not None else None
        if token is None:
            return None
        return await self.authenticate(token)

    def _open(self, cookie: str | None) -> tuple[str, str] | None:
        """The session id and token a live, not ended cookie holds."""
        if not cookie:
            return None
        try:
            payload = self._fernet.decrypt(cookie.encode("ascii"), ttl=SESSION_SECONDS).decode()
        except (InvalidToken, UnicodeError):
            return None
        session_id, colon, token = payload.partition(":")
        if not colon or session_id in self._ended:
            return None
        return session_id, token

    def sign_in(self, response: Response, token: str, *, path: str, secure: bool) -> None:
        session_id = secrets.token_hex(16)
        sealed = self._fernet.encrypt(f"{session_id}:{token}".encode()).decode("ascii")
        response.set_cookie(
            SESSION_COOKIE,
            sealed,
            max_age=SESSION_SECONDS,
            path=path,
            secure=secure,
            httponly=True,
            samesite="strict",
        )

    def sign_out(self, request: Request, response: Response, *, path: str, secure: bool) -> None:
        """End ``request``'s session here (every copy of its cookie) and in the browser."""
        cookie = request.cookies.get(SESSION_COOKIE)
        session = self._open(cookie)
        if cookie and session is not None:
            issued = self._fernet.extract_timestamp(cookie.encode("ascii"))
            self._end(session[0], issued + SESSION_SECONDS)
        response.delete_cookie(
            SESSION_COOKIE, path=path, secure=secure, httponly=True, samesite="strict"
        )

    def _end(self, session_id: str, expires: float) -> None:
        if len(self._ended) >= MAX_ENDED_SESSIONS:
            now = time.time()
            self._ended = {sid: at for sid, at in self._ended.items() if at > now}
        if len(self._ended) >= MAX_ENDED_SESSIONS:
            # Forgetting an ended session would bring its cookie back: end them all.
            logger.warning(
                "%d viewer sessions ended within %d hours: every session is signed out",
                MAX_ENDED_SESSIONS,
                SESSION_SECONDS // 3600,
            )
            self.secret = secrets.token_bytes(32)
            self._fernet = Fernet(base64.urlsafe_b64encode(self.secret))
            self._ended = {}
            return
        self._ended[session_id] = expires


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
