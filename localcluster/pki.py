"""The local cluster's PKI: one CA, serving certificates, client certificates, the SA key pair.

Why its own small PKI rather than kubeadm's full tree: every component of the local cluster
runs on 127.0.0.1 under one user, so one CA can sign everything (kube-apiserver's serving
certificate, the admin client certificate that every component uses, and the serving
certificates of Groupless's webhook and extender). The API server only talks HTTPS and Go
checks IP SANs, so every serving certificate carries ``IP:127.0.0.1`` and ``DNS:localhost``.

The CA and the certificates come from :mod:`certs.bundle` (the same code that makes the
webhook's and extender's certificates in a real cluster: EC P-256 keys, PKCS#8 PEM); this
module only lays them out as kube-apiserver's flags want them (one ``<name>.crt``/``<name>.key``
pair per identity) and adds the RSA service-account key pair. Keys are written with mode 0600.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from certs.bundle import CertBundle, client_certificate, generate, new_ca

#: Certificates are valid for a year; the cluster directory is throw-away.
VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class KeyPair:
    """Paths of a PEM certificate and its PEM private key."""

    cert: Path
    key: Path


def _write(pair: KeyPair, cert_pem: bytes, key_pem: bytes) -> KeyPair:
    pair.key.write_bytes(key_pem)
    os.chmod(pair.key, 0o600)
    pair.cert.write_bytes(cert_pem)
    return pair


def create_ca(directory: Path, common_name: str = "groupless-local-ca") -> KeyPair:
    """Create (or reuse) ``ca.crt``/``ca.key`` in ``directory`` (:func:`certs.bundle.new_ca`, valid a year)."""
    pair = KeyPair(directory / "ca.crt", directory / "ca.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    directory.mkdir(parents=True, exist_ok=True)
    cert_pem, key_pem = new_ca(common_name, validity=VALIDITY)
    return _write(pair, cert_pem, key_pem)


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

    ``server`` adds the serverAuth usage and requires SANs (:func:`certs.bundle.generate`);
    ``client`` adds clientAuth (the API server maps CN to the user name and O to groups, e.g.
    O=system:masters; :func:`certs.bundle.client_certificate` when not also a server).
    ValueError when neither usage is asked for, or a serving certificate has no name.
    """
    pair = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    if not (server or client):
        raise ValueError(f"certificate {name!r} needs server or client usage")
    if server and not (dns_names or ip_addresses):
        raise ValueError(f"serving certificate {name!r} needs at least one DNS name or IP address")
    signer = (ca.cert.read_bytes(), ca.key.read_bytes())
    bundle: CertBundle
    if server:
        bundle = generate(dns_names, ip_addresses, common_name=common_name, organizations=organizations,
                          validity=VALIDITY, client_auth=client, ca=signer)
    else:
        bundle = client_certificate(common_name, organizations, ca=signer, validity=VALIDITY)
    return _write(pair, bundle.cert, bundle.key)


def service_account_keys(directory: Path) -> KeyPair:
    """The service-account token signing key pair (``sa.key`` private, ``sa.pub`` public), RSA 2048."""
    pair = KeyPair(directory / "sa.pub", directory / "sa.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return _write(
        pair,
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        ),
    )


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
