"""A private certificate authority and the local broker's certificate, made with ``cryptography``.

The local stack's client listener speaks TLS with a certificate for 127.0.0.1 and localhost, signed by a CA
made for this stack alone. Clients (aiokafka, kcat, the probe) trust ``ca.pem`` and nothing else. The CA's
private key is thrown away once it has signed: nobody can mint another certificate the clients would trust.
The broker reads its key and chain as one PEM file (Kafka's ``ssl.keystore.type=PEM``), readable by us only.
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

from myolo.common.files import atomic_write
from myolo.coordinator.localstack.broker.ports import HOST

VALID_DAYS = 825


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA certificate clients trust (public)
    keystore: Path  # the broker's private key, certificate and the CA's, PEM, mode 0600

    def exist(self) -> bool:
        return self.ca.is_file() and self.keystore.is_file()


def files_in(folder: Path) -> TlsFiles:
    return TlsFiles(ca=folder / "ca.pem", keystore=folder / "broker.pem")


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Myolotrain local stack"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])  # fmt: skip


def ensure_tls(folder: Path) -> TlsFiles:
    """The CA and broker certificate in ``folder``, made the first time (kept afterwards: clients already
    configured with this ``ca.pem`` keep working across restarts)."""
    files = files_in(folder)
    if files.exist():
        return files
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("myolo local CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("myolo local broker")).issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST)),
                                                    x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    chain = cert.public_bytes(pem) + ca_cert.public_bytes(pem)
    atomic_write(files.keystore, key_pem + chain, durable=False, mode=0o600)
    atomic_write(files.ca, ca_cert.public_bytes(pem), durable=False, mode=0o644)
    return files
