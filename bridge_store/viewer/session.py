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
is refused from then on.

The secret and the ended ids are :class:`~.session_keys.SessionKeys`, made once per
server: under ``serve --workers N`` the parent makes them before it forks, so every
worker opens every cookie the server sealed, and a sign-out on one worker ends the
session on all of them (the ended ids live in memory the workers share, never on
disk). The set is bounded (:data:`~.session_keys.MAX_ENDED_SESSIONS`): past it the
key's generation moves on, which signs everyone out on every worker rather than forget
an ended session.

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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from starlette.requests import Request
from starlette.responses import Response

from .session_keys import ID_BYTES, SessionKeys, TableLocked

logger = logging.getLogger(__name__)

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
    keys: SessionKeys

    @classmethod
    def with_new_secret(
        cls, authenticate: Callable[[str], Awaitable[Principal | None]]
    ) -> Sessions[Principal]:
        """Sessions of a server of one process."""
        return cls(authenticate, SessionKeys.new())

    def __post_init__(self) -> None:
        self._generation = -1
        self._fernet = self._fernet_of(self.keys.ended.generation())

    async def principal(self, request: Request) -> Principal | None:
        """Who makes this request: its bearer token (scripts) or its session cookie."""
        token = bearer_token(request)
        if token is None:
            session = self._open(request.cookies.get(SESSION_COOKIE))
            token = session[1] if session is not None else None
        if token is None:
            return None
        return await self.authenticate(token)

    def _open(self, cookie: str | None) -> tuple[bytes, str] | None:
        """The session id and token a live, not ended cookie holds."""
        if not cookie:
            return None
        generation = self.keys.ended.generation()
        try:
            payload = self._fernet_of(generation).decrypt(
                cookie.encode("ascii"), ttl=SESSION_SECONDS
            )
            session_hex, colon, token = payload.decode().partition(":")
            session_id = bytes.fromhex(session_hex)
        except (InvalidToken, UnicodeError, ValueError):
            return None
        if not colon or len(session_id) != ID_BYTES:
            return None
        try:
            if self.keys.ended.is_ended(session_id, generation):
                return None
        except TableLocked:
            logger.warning("viewer sessions refused: the ended-session table stays locked")
            return None
        return session_id, token

    def sign_in(self, response: Response, token: str, *, path: str, secure: bool) -> None:
        session_id = secrets.token_hex(ID_BYTES)
        fernet = self._fernet_of(self.keys.ended.generation())
        sealed = fernet.encrypt(f"{session_id}:{token}".encode()).decode("ascii")
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
        """End ``request``'s session on every worker (every copy of its cookie) and in
        the browser."""
        cookie = request.cookies.get(SESSION_COOKIE)
        session = self._open(cookie)
        if cookie and session is not None:
            # _open has just opened it with this key, the current generation's.
            issued = self._fernet.extract_timestamp(cookie.encode("ascii"))
            self._end(session[0], issued + SESSION_SECONDS)
        response.delete_cookie(
            SESSION_COOKIE, path=path, secure=secure, httponly=True, samesite="strict"
        )

    def _end(self, session_id: bytes, expires: float) -> None:
        try:
            remembered = self.keys.ended.end(session_id, expires)
        except TableLocked:
            # Its reads fail closed meanwhile: no session, this one included, is accepted.
            logger.warning(
                "a viewer sign-out was not recorded: the ended-session table stays locked"
            )
            return
        if not remembered:
            # Forgetting an ended session would bring its cookie back: all of them ended.
            logger.warning(
                "%d viewer sessions ended within %d hours: every session is signed out",
                self.keys.ended.capacity,
                SESSION_SECONDS // 3600,
            )

    def _fernet_of(self, generation: int) -> Fernet:
        """The cookie key of ``generation``: derived from the server's secret, so every
        worker derives the same one, and a new generation ends every session."""
        if generation != self._generation:
            key = HKDF(
                algorithm=hashes.SHA256(),
                length=32,
                salt=None,
                info=b"bridge-store viewer session cookies, generation %d" % generation,
            ).derive(self.keys.secret)
            self._fernet = Fernet(base64.urlsafe_b64encode(key))
            self._generation = generation
        return self._fernet


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
