"""Throwaway TLS certificates: a private CA and the certificates it signs, as PEM files.

Built with ``cryptography`` in-process, so the TLS tests need no openssl binary.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Long enough for any test run, short enough that nothing mistakes these for real ones.
VALIDITY = datetime.timedelta(days=2)


@dataclass(frozen=True, slots=True)
class Issued:
    """A certificate and its private key, each in a PEM file."""

    certfile: Path
    keyfile: Path


class Authority:
    """A self-signed CA whose certificate is ``self.certfile``."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.name = name
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self._certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        self.certfile = directory / f"{name}-ca.pem"
        self.certfile.write_bytes(self._certificate.public_bytes(serialization.Encoding.PEM))

    def issue_server(self, name: str, ips: tuple[str, ...], dns: tuple[str, ...] = ()) -> Issued:
        """A server certificate for these addresses and host names."""
        names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        names += [x509.DNSName(host) for host in dns]
        return self._issue(name, ExtendedKeyUsageOID.SERVER_AUTH, names)

    def issue_client(self, name: str) -> Issued:
        """A client certificate (for mutual TLS)."""
        return self._issue(name, ExtendedKeyUsageOID.CLIENT_AUTH, [])

    def _issue(
        self, name: str, usage: x509.ObjectIdentifier, names: list[x509.GeneralName]
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self._certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        issued = Issued(self.directory / f"{name}.pem", self.directory / f"{name}-key.pem")
        issued.certfile.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        issued.keyfile.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        issued.keyfile.chmod(0o600)
        return issued
