"""Certificates from ``certs``: SANs, the CA's signature, key files, rotation, and the CLI."""

from __future__ import annotations

import datetime
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.bundle import CertBundle, CertError, client_certificate, generate, new_ca, service_dns_names
from provisioner.cli import main

NOW = datetime.datetime(2026, 11, 30, 10, 0, tzinfo=datetime.UTC)


def test_serving_certificate_has_every_dns_and_ip_san_and_is_signed_by_the_ca() -> None:
    bundle = generate(["groupless.groupless.svc", "localhost"], ["127.0.0.1", "::1"], now=NOW)
    cert, ca = bundle.certificate(), bundle.ca_certificate()
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["groupless.groupless.svc", "localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    cert.verify_directly_issued_by(ca)  # raises when the signature or issuer is wrong
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH]
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.not_valid_before_utc == NOW - datetime.timedelta(hours=1)
    assert cert.not_valid_after_utc == NOW + datetime.timedelta(days=365)
    assert ca.not_valid_after_utc == NOW + datetime.timedelta(days=3650)
    assert bundle.names() == (frozenset({"groupless.groupless.svc", "localhost"}), frozenset({"127.0.0.1", "::1"}))


def test_client_auth_adds_the_client_usage() -> None:
    cert = generate(["client"], client_auth=True).certificate()
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]


def test_client_certificate_carries_user_and_groups_and_only_the_client_usage() -> None:
    ca = new_ca("test-ca", now=NOW, validity=datetime.timedelta(days=30))
    bundle = client_certificate("admin", ["system:masters", "ops"], ca=ca, now=NOW)
    cert = bundle.certificate()
    cert.verify_directly_issued_by(bundle.ca_certificate())
    assert bundle.ca_cert == ca[0]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["admin"]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters", "ops"]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    # capped at the CA's expiry (30 days), not the default year
    assert cert.not_valid_after_utc == NOW + datetime.timedelta(days=30)
    with pytest.raises(CertError, match="does not belong"):
        client_certificate("admin", ca=(ca[0], new_ca(now=NOW)[1]), now=NOW)


def test_serving_certificate_may_carry_organizations() -> None:
    cert = generate(["kubernetes"], common_name="kube-apiserver", organizations=["groupless"], now=NOW).certificate()
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["kube-apiserver"]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["groupless"]


def test_bad_input_is_a_cert_error() -> None:
    with pytest.raises(CertError, match="^--ip '10.0.0.300': not a valid IPv4 or IPv6 address$"):
        generate(["a"], ["10.0.0.300"])
    with pytest.raises(CertError, match="at least one DNS name or IP address"):
        generate([], [])


def test_write_and_read_round_trip_with_private_keys_0600(tmp_path: Path) -> None:
    bundle = generate(["localhost"], ["127.0.0.1"])
    paths = bundle.write(tmp_path / "certs")
    assert sorted(p.name for p in (tmp_path / "certs").iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert stat.S_IMODE(paths["tls.key"].stat().st_mode) == 0o600
    assert stat.S_IMODE(paths["ca.key"].stat().st_mode) == 0o600
    assert stat.S_IMODE(paths["tls.crt"].stat().st_mode) == 0o644
    assert CertBundle.read(tmp_path / "certs") == bundle


def test_read_reports_missing_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(CertError, match="cannot read .*ca.crt"):
        CertBundle.read(tmp_path)
    files = generate(["a"]).to_files()
    with pytest.raises(CertError, match="tls.crt is not a PEM certificate"):
        CertBundle.from_files({**files, "tls.crt": b"garbage"})
    with pytest.raises(CertError, match="certificate bundle is missing ca.key"):
        CertBundle.from_files({k: v for k, v in files.items() if k != "ca.key"})


def test_needs_rotation() -> None:
    bundle = generate(["a.svc"], ["10.0.0.1"], now=NOW)
    assert bundle.needs_rotation(["a.svc"], ["10.0.0.1"], now=NOW) is None
    assert bundle.needs_rotation(["a.svc", "b.svc"], now=NOW) == "serving certificate lacks the name(s) b.svc"
    assert bundle.needs_rotation(ip_addresses=["10.0.0.2"], now=NOW) == \
        "serving certificate lacks the name(s) 10.0.0.2"
    late = NOW + datetime.timedelta(days=276)
    assert bundle.needs_rotation(["a.svc"], now=late) == "certificates expire at 2027-11-30T10:00:00+00:00"
    assert bundle.needs_rotation(["a.svc"], now=NOW + datetime.timedelta(days=274)) is None


def test_service_dns_names() -> None:
    assert service_dns_names("groupless", "kube-system") == [
        "groupless", "groupless.kube-system", "groupless.kube-system.svc", "groupless.kube-system.svc.cluster.local"]


def test_cli_generate_writes_the_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["certs", "generate", "--dns", "localhost", "--dns", "groupless.groupless.svc",
                 "--ip", "127.0.0.1", "--out", str(out)]) == 0
    bundle = CertBundle.read(out)
    assert bundle.names() == (frozenset({"localhost", "groupless.groupless.svc"}), frozenset({"127.0.0.1"}))
    assert capsys.readouterr().out == (
        f"Wrote {out}/ca.crt, {out}/ca.key, {out}/tls.crt, {out}/tls.key "
        "(SANs: DNS:localhost, DNS:groupless.groupless.svc, IP:127.0.0.1)\n")


def test_cli_generate_rejects_bad_addresses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "generate", "--ip", "localhost", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "groupless certs generate: --ip 'localhost': not a valid IPv4 or IPv6 address\n")
    assert list(tmp_path.iterdir()) == []


def test_signing_with_an_existing_ca() -> None:
    first = generate(["a"], now=NOW)
    second = generate(["b"], now=NOW + datetime.timedelta(days=3600), ca=(first.ca_cert, first.ca_key))
    assert (second.ca_cert, second.ca_key) == (first.ca_cert, first.ca_key)
    second.certificate().verify_directly_issued_by(first.ca_certificate())
    # never outlives its CA
    assert second.certificate().not_valid_after_utc == first.ca_certificate().not_valid_after_utc
    other = generate(["c"])
    with pytest.raises(CertError, match="ca.key does not belong to ca.crt"):
        generate(["d"], ca=(first.ca_cert, other.ca_key))
    with pytest.raises(CertError, match="ca.key is not an unencrypted PEM private key"):
        generate(["d"], ca=(first.ca_cert, b"junk"))


@pytest.mark.parametrize(("name", "problem"), [
    ("bad name!", "label 'bad name!' may hold only letters, digits and '-', and not start or end with '-'"),
    ("-a.svc", "label '-a' may hold only letters, digits and '-', and not start or end with '-'"),
    ("a..svc", "empty label (two dots in a row, or a leading or trailing dot)"),
    ("a.svc.", "empty label (two dots in a row, or a leading or trailing dot)"),
    ("a.*.svc", "'*' may only be the whole first label"),
    ("x" * 64, f"label {'x' * 20!r}... is longer than 63 characters"),
    (".".join(["a" * 63] * 4), "longer than 253 characters"),
    ("10.0.0.1", "an IP address belongs in an IP SAN (--ip)"),
    ("", "it is empty"),
])
def test_invalid_dns_names_are_refused(name: str, problem: str) -> None:
    with pytest.raises(CertError) as error:
        generate([name])
    assert str(error.value) == f"--dns {name!r}: not a valid DNS name: {problem}"


def test_valid_dns_names_are_kept() -> None:
    names = ["localhost", "*.groupless.svc", "ip-10-0-0-1.ec2.internal", "Groupless.Example.COM", "a" * 63]
    assert generate(names).names()[0] == frozenset(names)


def test_cli_generate_rejects_a_bad_dns_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "generate", "--dns", "bad name!", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "groupless certs generate: --dns 'bad name!': not a valid DNS name: label 'bad name!' may hold only "
        "letters, digits and '-', and not start or end with '-'\n")
    assert list(tmp_path.iterdir()) == []


def test_cli_generate_keeps_an_existing_ca_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "generate", "--dns", "a", "--out", str(tmp_path)]) == 0
    before = CertBundle.read(tmp_path)
    capsys.readouterr()
    assert main(["certs", "generate", "--dns", "b", "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"groupless certs generate: {tmp_path} already holds ca.crt, ca.key, tls.crt, tls.key; a new CA would "
        "break every caBundle that trusts the old one: pass --force to replace them\n")
    assert CertBundle.read(tmp_path) == before
    assert main(["certs", "generate", "--dns", "b", "--out", str(tmp_path), "--force"]) == 0
    after = CertBundle.read(tmp_path)
    assert after.ca_cert != before.ca_cert and after.names()[0] == {"b"}
