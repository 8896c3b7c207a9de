"""The testbed's own certificate authority and server certificates, made fresh at every start.

Nothing here is installed anywhere: the CA's certificate is written to ``ca.pem`` in the testbed's TLS
directory (its path is in the ready file) and only a crawler told to trust it (``fetch.tls_ca_bundle``)
does. The CA's private key never leaves memory. Keys are ECDSA P-256 (fast to make; every TLS stack a
peer crawler uses accepts them).

Certificates, chosen per connection by SNI (``TlsPki.context_for``):

======================  ==========================================================================
server name             certificate
======================  ==========================================================================
site{i}, i % 3 == 0     "group 0": every such host named in its subjectAltName
site{i}, i % 3 == 1     "group 1": the same for its hosts
site{i}, i % 3 == 2     the wildcard ``*.crawl.test``
expired.crawl.test      valid name, expired a day ago (``tls_cert_expired``)
wrongname.crawl.test    a certificate for ``other.invalid`` (``tls_cert_hostname``)
anything else           group 0's (a client that checks names refuses it)
======================  ==========================================================================
"""

from __future__ import annotations

import datetime as dt
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pipeline.harness.testbed.model import DOMAIN, EXPIRED_HOST, WRONGNAME_HOST, host_index, host_name

BAD_CERT_HOSTS = (EXPIRED_HOST, WRONGNAME_HOST)
GROUPS = 3  # group GROUPS - 1 is served the wildcard certificate
_DAY = dt.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class CertFiles:
    name: str  # "group0", "wildcard", "expired", ...
    cert: Path
    key: Path


@dataclass(slots=True)
class TlsPki:
    """The files of one testbed start: ``ca`` (PEM) and the server certificates, by name."""

    directory: Path
    ca: Path
    certs: dict[str, CertFiles]
    _contexts: dict[str, ssl.SSLContext] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: Path) -> TlsPki:
        """The files ``make_pki`` wrote to ``directory`` (a forked worker reads them, it does not remake)."""
        certs = {p.stem: CertFiles(p.stem, p, p.with_suffix(".key")) for p in sorted(directory.glob("*.crt"))}
        return cls(directory, directory / "ca.pem", certs)

    def server_context(self, name: str) -> ssl.SSLContext:
        ctx = self._contexts.get(name)
        if ctx is None:
            files = self.certs[name]
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(files.cert, files.key)
            ctx.set_alpn_protocols(["http/1.1"])
            self._contexts[name] = ctx
        return ctx

    def cert_name_for(self, server_name: str | None, hosts: int) -> str:
        """Which certificate answers a ClientHello naming ``server_name`` (None: no SNI)."""
        name = (server_name or "").lower().rstrip(".")
        if name == EXPIRED_HOST:
            return "expired"
        if name == WRONGNAME_HOST:
            return "wrongname"
        i = host_index(name, hosts)
        if i < 0:
            return "group0"
        return "wildcard" if i % GROUPS == GROUPS - 1 else f"group{i % GROUPS}"

    def listening_context(self, hosts: int) -> ssl.SSLContext:
        """The context a TLS listener starts with; its SNI callback switches to the named host's one."""
        default = self.server_context("group0")

        def pick(sslobj: ssl.SSLObject, server_name: str | None, _ctx: ssl.SSLContext) -> None:
            sslobj.context = self.server_context(self.cert_name_for(server_name, hosts))

        default.sni_callback = pick  # type: ignore[assignment]
        return default


def make_pki(directory: Path, hosts: int, *, now: dt.datetime | None = None) -> TlsPki:
    """A new CA and every server certificate of the table above, written to ``directory`` (keys mode 600)."""
    now = now or dt.datetime.now(dt.UTC)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "crawlfleet testbed CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + 30 * _DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )  # fmt: skip
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = directory / "ca.pem"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    groups: dict[str, list[str]] = {f"group{g}": [] for g in range(GROUPS - 1)}
    for i in range(hosts):
        if i % GROUPS != GROUPS - 1:
            groups[f"group{i % GROUPS}"].append(host_name(i))
    plan: dict[str, tuple[list[str], dt.datetime, dt.datetime]] = {
        name: (names or [f"unused-{name}.{DOMAIN}"], now - _DAY, now + 30 * _DAY) for name, names in groups.items()
    }
    plan["wildcard"] = ([f"*.{DOMAIN}"], now - _DAY, now + 30 * _DAY)
    plan["expired"] = ([EXPIRED_HOST], now - 30 * _DAY, now - _DAY)
    plan["wrongname"] = (["other.invalid"], now - _DAY, now + 30 * _DAY)
    certs = {}
    for name, (names, not_before, not_after) in plan.items():
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        files = CertFiles(name, directory / f"{name}.crt", directory / f"{name}.key")
        files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        fd = os.open(files.key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))  # fmt: skip
        certs[name] = files
    return TlsPki(directory, ca_path, certs)
