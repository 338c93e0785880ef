"""TLS: the certificate files a server serves HTTPS with, checked at start-up, then
handed to uvicorn. Errors name serve's flags (``--ssl-certfile`` ...), which set them."""

from __future__ import annotations

import ssl
from typing import Any

from ..errors import ConfigurationError


def uvicorn_tls(
    certfile: str | None, keyfile: str | None = None, ca_certs: str | None = None
) -> dict[str, Any]:
    """uvicorn's TLS settings for these files; none without ``certfile``.

    The files are loaded here first, so a wrong path, a key that does not belong to
    the certificate or a file that is not PEM is one ConfigurationError naming the
    flag, before anything listens, rather than a traceback from inside uvicorn.
    """
    if certfile is None:
        for flag, value in (("--ssl-keyfile", keyfile), ("--ssl-ca-certs", ca_certs)):
            if value is not None:
                raise ConfigurationError(f"{flag} needs --ssl-certfile, the server's certificate")
        return {}
    _check_pem(certfile, keyfile, ca_certs)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        # A password callback, so an encrypted key fails here instead of OpenSSL
        # prompting for its passphrase on the terminal.
        context.load_cert_chain(certfile, keyfile, password=_no_password)
    except ssl.SSLError as error:
        key = f"--ssl-keyfile {keyfile}" if keyfile is not None else "its key"
        raise ConfigurationError(
            f"--ssl-certfile {certfile} with {key}: {_reason(error)}; give the private key "
            f"that belongs to this certificate"
        ) from None
    if ca_certs is not None:
        try:
            context.load_verify_locations(cafile=ca_certs)
        except ssl.SSLError as error:
            raise ConfigurationError(
                f"--ssl-ca-certs {ca_certs}: {_reason(error)}; give PEM CA certificates"
            ) from None
    return {
        "ssl_certfile": certfile,
        "ssl_keyfile": keyfile,
        "ssl_ca_certs": ca_certs,
        "ssl_cert_reqs": ssl.CERT_REQUIRED if ca_certs is not None else ssl.CERT_NONE,
    }


def _check_pem(certfile: str, keyfile: str | None, ca_certs: str | None) -> None:
    """Each file readable and holding what its flag needs, by its PEM labels.

    OpenSSL reports most of these mistakes as a bare "PEM lib" error.
    """
    cert_text = _read(certfile, "--ssl-certfile")
    if _CERTIFICATE not in cert_text:
        raise ConfigurationError(f"--ssl-certfile {certfile} holds no PEM certificate")
    key_flag, key_path = ("--ssl-keyfile", keyfile) if keyfile else ("--ssl-certfile", certfile)
    key_text = _read(key_path, key_flag) if keyfile else cert_text
    if _ENCRYPTED_KEY in key_text or _LEGACY_ENCRYPTED in key_text:
        raise ConfigurationError(
            f"{key_flag} {key_path}: the private key is encrypted; serve needs it unencrypted"
        )
    if _PRIVATE_KEY not in key_text:
        hint = "" if keyfile else "; give the key with --ssl-keyfile"
        raise ConfigurationError(f"{key_flag} {key_path} holds no PEM private key{hint}")
    if ca_certs is not None and _CERTIFICATE not in _read(ca_certs, "--ssl-ca-certs"):
        raise ConfigurationError(f"--ssl-ca-certs {ca_certs} holds no PEM certificate")


_CERTIFICATE = "-----BEGIN CERTIFICATE-----"
#: PKCS#8 (``PRIVATE KEY``) and the older ``RSA``/``EC PRIVATE KEY`` labels.
_PRIVATE_KEY = "PRIVATE KEY-----"
_ENCRYPTED_KEY = "-----BEGIN ENCRYPTED PRIVATE KEY-----"
_LEGACY_ENCRYPTED = "Proc-Type: 4,ENCRYPTED"


def _read(path: str, flag: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError as error:
        raise ConfigurationError(f"cannot read {flag} {path}: {error.strerror}") from None


def _no_password() -> bytes:
    return b""


def _reason(error: ssl.SSLError) -> str:
    """OpenSSL's reason (``KEY_VALUES_MISMATCH``) in words, else the whole message."""
    reason = getattr(error, "reason", None)
    return reason.replace("_", " ").lower() if reason else str(error)
