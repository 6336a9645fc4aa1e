"""A self-signed CA and a serving certificate it signs, made with ``cryptography``.

Why: kube-apiserver calls admission webhooks (and kube-scheduler may call the extender) only
over HTTPS, verifying the server against the ``caBundle`` of the webhook configuration. Go's
TLS stack ignores the Common Name, so every name a client dials must be a SAN: DNS names for
the Service (``groupless-webhook.groupless.svc``) and IP SANs for addresses
(``https://127.0.0.1:8443`` needs ``IP:127.0.0.1``). The layout of a bundle on disk and in a
Secret is the one cert-controller (Gatekeeper) and knative use: ``ca.crt``, ``ca.key``,
``tls.crt``, ``tls.key``, PEM, keys mode 0600.

Keys are ECDSA P-256 (fast to make, accepted everywhere). The CA is valid for 10 years and the
serving certificate for 1 year by default; :meth:`CertBundle.needs_rotation` says when to make
new ones (expiring within 90 days, or missing a wanted name).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT_FILE = "ca.crt"
CA_KEY_FILE = "ca.key"
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
FILES = (CA_CERT_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE)

CA_VALIDITY = datetime.timedelta(days=3650)
SERVING_VALIDITY = datetime.timedelta(days=365)
ROTATION_LOOKAHEAD = datetime.timedelta(days=90)
#: Certificates start an hour in the past so a client with a slightly slow clock accepts them.
CLOCK_SKEW = datetime.timedelta(hours=1)


#: One DNS label (RFC 1123 section 2.1): letters, digits and hyphens, not at either end, 1-63 long.
_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
MAX_DNS_NAME_LENGTH = 253


def dns_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a DNS SAN, or None when it can.

    A hostname as RFC 1123 writes it (dot-separated labels of letters, digits and inner hyphens,
    63 characters at most each, 253 in all, no trailing dot), optionally with a wildcard
    ``*.`` as its whole first label (``*.groupless.svc``), as RFC 6125 and Go's crypto/x509
    (which checks kube-apiserver's calls) match it. IP addresses belong in IP SANs, not here.
    """
    if not name:
        return "it is empty"
    if len(name) > MAX_DNS_NAME_LENGTH:
        return f"longer than {MAX_DNS_NAME_LENGTH} characters"
    labels = name.split(".")
    if labels[0] == "*" and len(labels) > 1:
        labels = labels[1:]
    for label in labels:
        if not label:
            return "empty label (two dots in a row, or a leading or trailing dot)"
        if len(label) > 63:
            return f"label {label[:20]!r}... is longer than 63 characters"
        if not _LABEL.fullmatch(label):
            return (f"label {label!r} may hold only letters, digits and '-', and not start or end with '-'"
                    if label != "*" else "'*' may only be the whole first label")
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return None
    return "an IP address belongs in an IP SAN (--ip)"


class CertError(ValueError):
    """Bad input for a certificate (an invalid IP address, no names at all) or unreadable PEM."""


@dataclass(frozen=True, slots=True)
class CertBundle:
    """PEM bytes of a CA certificate and key, and of a serving certificate and key signed by it."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    # ------------------------------------------------------------------ files and Secrets
    def write(self, directory: str | os.PathLike[str]) -> dict[str, Path]:
        """Write ``ca.crt ca.key tls.crt tls.key`` into ``directory`` (created; keys mode 0600).

        Returns the path of each file by name. Each file is replaced atomically, and all four
        renames happen back to back after the data is written, so a server that loads the
        certificate per connection (gunicorn's gthread worker does) picks up a renewal with
        at most a microseconds-wide window of a mismatched pair.
        """
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        staged: list[tuple[Path, Path]] = []
        for name, data in self.to_files().items():
            tmp = out / f".{name}.tmp"
            mode = 0o600 if name.endswith(".key") else 0o644
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, mode)
            staged.append((tmp, out / name))
        for tmp, path in staged:
            os.replace(tmp, path)
        return {path.name: path for _, path in staged}

    @classmethod
    def read(cls, directory: str | os.PathLike[str]) -> CertBundle:
        """The bundle written by :meth:`write`; CertError when a file is missing or not PEM."""
        files: dict[str, bytes] = {}
        for name in FILES:
            try:
                files[name] = (Path(directory) / name).read_bytes()
            except OSError as error:
                raise CertError(f"cannot read {Path(directory) / name}: {error.strerror}") from error
        return cls.from_files(files)

    def to_files(self) -> dict[str, bytes]:
        """``{"ca.crt": ..., "ca.key": ..., "tls.crt": ..., "tls.key": ...}`` (PEM bytes)."""
        return {CA_CERT_FILE: self.ca_cert, CA_KEY_FILE: self.ca_key, CERT_FILE: self.cert, KEY_FILE: self.key}

    @classmethod
    def from_files(cls, files: Mapping[str, bytes]) -> CertBundle:
        """A bundle from the four PEM blobs by file name; CertError when one is missing or not PEM."""
        missing = [name for name in FILES if not files.get(name)]
        if missing:
            raise CertError(f"certificate bundle is missing {', '.join(missing)}")
        bundle = cls(files[CA_CERT_FILE], files[CA_KEY_FILE], files[CERT_FILE], files[KEY_FILE])
        bundle.certificate()  # parse once so a corrupt bundle fails here
        bundle.ca_certificate()
        return bundle

    # ------------------------------------------------------------------ inspection
    def certificate(self) -> x509.Certificate:
        """The parsed serving certificate; CertError when it is not PEM."""
        return _parse(self.cert, CERT_FILE)

    def ca_certificate(self) -> x509.Certificate:
        """The parsed CA certificate; CertError when it is not PEM."""
        return _parse(self.ca_cert, CA_CERT_FILE)

    def names(self) -> tuple[frozenset[str], frozenset[str]]:
        """The serving certificate's SANs: (DNS names, IP addresses as strings)."""
        try:
            san = self.certificate().extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return frozenset(), frozenset()
        dns = frozenset(san.get_values_for_type(x509.DNSName))
        ips = frozenset(str(ip) for ip in san.get_values_for_type(x509.IPAddress))
        return dns, ips

    def not_after(self) -> datetime.datetime:
        """When the first of the CA and serving certificate expires (UTC)."""
        return min(self.certificate().not_valid_after_utc, self.ca_certificate().not_valid_after_utc)

    def ca_expires_within(self, lookahead: datetime.timedelta, *, now: datetime.datetime | None = None) -> bool:
        """True when the CA expires within ``lookahead`` of ``now`` (or cannot be read)."""
        now = now or datetime.datetime.now(datetime.UTC)
        try:
            return self.ca_certificate().not_valid_after_utc - lookahead <= now
        except CertError:
            return True

    def needs_rotation(
        self,
        dns_names: Iterable[str] = (),
        ip_addresses: Iterable[str] = (),
        *,
        now: datetime.datetime | None = None,
        lookahead: datetime.timedelta = ROTATION_LOOKAHEAD,
    ) -> str | None:
        """Why new certificates are needed (expiring within ``lookahead``, a name missing), or None."""
        now = now or datetime.datetime.now(datetime.UTC)
        try:
            expires = self.not_after()
            dns, ips = self.names()
        except CertError as error:
            return str(error)
        if expires - lookahead <= now:
            return f"certificates expire at {expires.isoformat()}"
        missing = sorted(set(dns_names) - dns) + sorted({str(ipaddress.ip_address(i)) for i in ip_addresses} - ips)
        if missing:
            return f"serving certificate lacks the name(s) {', '.join(missing)}"
        return None


def _parse(pem: bytes, name: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as error:
        raise CertError(f"{name} is not a PEM certificate") from error


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def new_ca(
    common_name: str = "groupless-ca",
    *,
    now: datetime.datetime | None = None,
    validity: datetime.timedelta = CA_VALIDITY,
) -> tuple[bytes, bytes]:
    """A new self-signed CA: ``(ca_cert_pem, ca_key_pem)``, ECDSA P-256, PKCS#8 key.

    The CA may sign leaf certificates only (pathLen 0, keyCertSign and cRLSign); it is valid
    from ``now - CLOCK_SKEW`` for ``validity``. Pass the pair as ``ca=`` to :func:`generate` or
    :func:`client_certificate` to sign with it.
    """
    now = now or datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _load_ca(ca_cert_pem: bytes, ca_key_pem: bytes) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = _parse(ca_cert_pem, CA_CERT_FILE)
    try:
        key = serialization.load_pem_private_key(ca_key_pem, password=None)
    except (ValueError, TypeError) as error:
        raise CertError(f"{CA_KEY_FILE} is not an unencrypted PEM private key") from error
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{CA_KEY_FILE} is not an ECDSA key")
    if key.public_key() != cert.public_key():
        raise CertError(f"{CA_KEY_FILE} does not belong to {CA_CERT_FILE}")
    return cert, key


def _sign_leaf(
    ca: tuple[bytes, bytes],
    *,
    common_name: str,
    organizations: Iterable[str],
    usages: list[x509.ObjectIdentifier],
    sans: list[x509.GeneralName],
    now: datetime.datetime,
    validity: datetime.timedelta,
) -> CertBundle:
    """A leaf certificate (not a CA; digitalSignature; ``usages`` as extended key usages) signed by ``ca``.

    It never outlives its CA; CertError when the CA pair does not load or match.
    """
    ca_cert_pem, ca_key_pem = ca
    ca_cert, ca_key = _load_ca(ca_cert_pem, ca_key_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])]
    subject += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
    ).sign(ca_key, hashes.SHA256())
    return CertBundle(
        ca_cert=ca_cert_pem, ca_key=ca_key_pem, cert=cert.public_bytes(serialization.Encoding.PEM), key=_key_pem(key)
    )


def generate(
    dns_names: Iterable[str],
    ip_addresses: Iterable[str] = (),
    *,
    common_name: str | None = None,
    organizations: Iterable[str] = (),
    ca_common_name: str = "groupless-ca",
    now: datetime.datetime | None = None,
    ca_validity: datetime.timedelta = CA_VALIDITY,
    validity: datetime.timedelta = SERVING_VALIDITY,
    client_auth: bool = False,
    ca: tuple[bytes, bytes] | None = None,
) -> CertBundle:
    """A serving certificate for every DNS name and IP address given, signed by a new CA.

    ``dns_names``: e.g. ``["groupless.groupless.svc", "localhost"]``; ``ip_addresses``: e.g.
    ``["127.0.0.1", "::1"]`` (written as IP SANs). The serving certificate's Common Name is
    ``common_name`` or the first name, its Organizations ``organizations``; with
    ``client_auth`` it may also be used as a TLS client certificate (mutual TLS). ``ca``:
    ``(ca_cert_pem, ca_key_pem)`` of an existing CA to sign with instead of a new one (a
    renewal that keeps every ``caBundle`` valid); the serving certificate never outlives its
    CA. Raises CertError for an invalid DNS name (:func:`dns_name_problem`) or IP address, no
    name at all, or a CA pair that does not load or match.
    """
    dns = list(dict.fromkeys(dns_names))
    for name in dns:
        problem = dns_name_problem(name)
        if problem:
            raise CertError(f"--dns {name!r}: not a valid DNS name: {problem}")
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for address in dict.fromkeys(ip_addresses):
        try:
            ips.append(ipaddress.ip_address(address))
        except ValueError as error:
            raise CertError(f"--ip {address!r}: not a valid IPv4 or IPv6 address") from error
    if not dns and not ips:
        raise CertError("a serving certificate needs at least one DNS name or IP address")
    now = now or datetime.datetime.now(datetime.UTC)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, *([ExtendedKeyUsageOID.CLIENT_AUTH] if client_auth else [])]
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns] + [x509.IPAddress(ip) for ip in ips]
    return _sign_leaf(
        ca if ca is not None else new_ca(ca_common_name, now=now, validity=ca_validity),
        common_name=common_name or (dns[0] if dns else str(ips[0])),
        organizations=organizations,
        usages=usages,
        sans=sans,
        now=now,
        validity=validity,
    )


def client_certificate(
    common_name: str,
    organizations: Iterable[str] = (),
    *,
    ca: tuple[bytes, bytes],
    now: datetime.datetime | None = None,
    validity: datetime.timedelta = SERVING_VALIDITY,
) -> CertBundle:
    """A TLS client certificate (clientAuth only, no SANs) signed by ``ca`` (``(cert_pem, key_pem)``).

    kube-apiserver's x509 authenticator takes the Common Name as the user name and each
    Organization as a group (e.g. ``common_name="admin", organizations=["system:masters"]``).
    Never outlives its CA; CertError when the CA pair does not load or match.
    """
    return _sign_leaf(
        ca,
        common_name=common_name,
        organizations=organizations,
        usages=[ExtendedKeyUsageOID.CLIENT_AUTH],
        sans=[],
        now=now or datetime.datetime.now(datetime.UTC),
        validity=validity,
    )


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names a Service is dialled by: ``svc``, ``svc.ns``, ``svc.ns.svc``, ``svc.ns.svc.cluster.local``."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]
