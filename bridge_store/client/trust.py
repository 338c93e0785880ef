"""Trusting an ``https://`` store whose certificate a private CA signed.

The store check (Python) gets an SSL context with the CA; the bridge (Node) gets it
through ``NODE_EXTRA_CA_CERTS``, which Node reads once, at start, and which names a
single file: when the environment already names one (a proxy's CA, say), both go into
a private bundle that lives as long as the bridge.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ..errors import ConfigurationError

NODE_CA_ENV = "NODE_EXTRA_CA_CERTS"


def tls_context(ca_file: str | os.PathLike[str] | None) -> ssl.SSLContext:
    """The system's trusted CAs, plus those in ``ca_file`` (PEM) when given."""
    context = ssl.create_default_context()
    if ca_file is not None:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ValueError) as error:
            raise ConfigurationError(
                f"cannot use {os.fspath(ca_file)} as the store's CA file: {error}"
            ) from None
    return context


def node_trust(
    ca_file: str | os.PathLike[str], env: Mapping[str, str] | None
) -> tuple[dict[str, str], Path | None]:
    """``env`` for a Node process that must trust ``ca_file`` too, and the bundle
    file made for it (None if none was needed), which the caller removes once the
    process has ended."""
    store_ca = _read_pem(Path(ca_file).absolute(), "the store's CA file")
    current = {**os.environ, **(env or {})}.get(NODE_CA_ENV, "").strip()
    if not current or Path(current).absolute() == Path(ca_file).absolute():
        return {**(env or {}), NODE_CA_ENV: str(Path(ca_file).absolute())}, None
    inherited = _read_pem(Path(current), NODE_CA_ENV)
    descriptor, name = tempfile.mkstemp(prefix="bridge-store-ca-", suffix=".pem")
    bundle = Path(name)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(inherited.rstrip("\n") + "\n" + store_ca)
    except BaseException:
        remove_bundle(bundle)
        raise
    return {**(env or {}), NODE_CA_ENV: str(bundle)}, bundle


def remove_bundle(bundle: Path | None) -> None:
    if bundle is not None:
        with contextlib.suppress(FileNotFoundError):
            bundle.unlink()


def _read_pem(path: Path, what: str) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(f"cannot read {what} {path}: {error}") from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise ConfigurationError(f"{what} {path} holds no PEM certificate")
    return text
