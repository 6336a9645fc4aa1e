"""The local cluster's PKI: one CA, serving certificates, client certificates, the SA key pair.

Why its own small PKI rather than kubeadm's full tree: every component of the local cluster
runs on 127.0.0.1 under one user, so one CA can sign everything (kube-apiserver's serving
certificate, the admin client certificate that every component uses, and the serving
certificates of Groupless's webhook and extender). The API server only talks HTTPS and Go
checks IP SANs, so every serving certificate carries ``IP:127.0.0.1`` and ``DNS:localhost``.

Made with ``cryptography`` (EC P-256 keys: fast to generate, accepted by Go's TLS stack).
Files are PEM; keys are written with mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Certificates are valid for a year; the cluster directory is throw-away.
VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class KeyPair:
    """Paths of a PEM certificate and its PEM private key."""

    cert: Path
    key: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    path.write_bytes(data)
    os.chmod(path, 0o600)


def _load(pair: KeyPair) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
    key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{pair.key}: expected an EC private key")
    return cert, key


def create_ca(directory: Path, common_name: str = "groupless-local-ca") -> KeyPair:
    """Create (or reuse) ``ca.crt``/``ca.key`` in ``directory``."""
    pair = KeyPair(directory / "ca.crt", directory / "ca.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    _write_key(pair.key, key)
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pair


def issue(
    ca: KeyPair,
    directory: Path,
    name: str,
    common_name: str,
    *,
    organizations: tuple[str, ...] = (),
    dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
) -> KeyPair:
    """Issue ``<name>.crt``/``<name>.key`` signed by ``ca`` (reused when already present).

    ``server`` adds the serverAuth usage and requires SANs; ``client`` adds clientAuth (the
    API server maps CN to the user name and O to groups, e.g. O=system:masters).
    """
    pair = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    if server and not (dns_names or ip_addresses):
        raise ValueError(f"serving certificate {name!r} needs at least one DNS name or IP address")
    ca_cert, ca_key = _load(ca)
    key = ec.generate_private_key(ec.SECP256R1())
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attributes))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_encipherment=False, key_cert_sign=False, crl_sign=False,
                content_commitment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_key(pair.key, key)
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pair


def service_account_keys(directory: Path) -> KeyPair:
    """The service-account token signing key pair (``sa.key`` private, ``sa.pub`` public), RSA 2048."""
    pair = KeyPair(directory / "sa.pub", directory / "sa.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pair.key, key)
    pair.cert.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pair


@dataclass(frozen=True)
class ClusterPKI:
    """Everything the local cluster needs, under one directory."""

    ca: KeyPair
    apiserver: KeyPair
    admin: KeyPair
    service_account: KeyPair
    groupless: KeyPair  # serving certificate of the webhook and the extender


LOOPBACK_DNS = ("localhost",)
LOOPBACK_IPS = ("127.0.0.1",)


def create_cluster_pki(directory: Path) -> ClusterPKI:
    """Create (or reuse) the whole PKI of a local cluster in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = create_ca(directory)
    return ClusterPKI(
        ca=ca,
        apiserver=issue(
            ca, directory, "apiserver", "kube-apiserver", server=True,
            dns_names=(*LOOPBACK_DNS, "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
            ip_addresses=(*LOOPBACK_IPS, "10.96.0.1"),
        ),
        admin=issue(ca, directory, "admin", "admin", organizations=("system:masters",), client=True),
        service_account=service_account_keys(directory),
        groupless=issue(
            ca, directory, "groupless", "groupless", server=True,
            dns_names=LOOPBACK_DNS, ip_addresses=LOOPBACK_IPS,
        ),
    )
