"""How a fleet process reaches its broker safely: TLS options for kombu, Celery and pika, the plain-AMQP
rule, the broker password from a file, and secret files read with their permissions checked.

- ``check_broker(fleet)``: ``amqps://`` needs ``fleet.tls_ca`` (the broker's certificate is verified,
  hostname included) and, for the broker's peer verification (``fail_if_no_peer_cert``), a client
  certificate and key; plain ``amqp://`` is refused unless the broker host is loopback (127.0.0.0/8,
  ::1, localhost), where nothing crosses a wire. Raises ``BrokerPolicyError`` naming the problem
  (never the password).
- ``kombu_ssl(fleet)``: the ``ssl=`` of a kombu ``Connection`` / Celery's ``broker_use_ssl``; None
  for plain AMQP. ``pika_ssl(fleet, host)``: pika's ``SSLOptions`` (same verification).
- ``broker_url(fleet)``: ``fleet.broker_url`` with the password of ``fleet.broker_password_file`` (when
  the URL carries none).
- ``read_secret(path)``: a secret file's text, refused when group or others may read it (as ssh
  refuses a private key), so a key does not sit world-readable on a shared machine.
- ``describe(exc, fleet)``: a failed connection's message, with what to do when the TLS certificates
  do not match the broker's CA (``tls_hint``): the one line ``submit`` prints and the fleet processes log.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import stat
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from pipeline.settings import FleetSettings
from pipeline.settings.security import redact_url

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class BrokerPolicyError(ValueError):
    """A broker URL or TLS setting this fleet refuses; the message names it without secrets."""


def read_secret(path: str, *, what: str) -> str:
    """The stripped text of the secret file ``path`` (``what`` names it in errors); BrokerPolicyError
    when it is missing, empty, or readable by group or others."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
        text = p.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise BrokerPolicyError(f"{what} {path}: cannot read it ({type(exc).__name__})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise BrokerPolicyError(f"{what} {path}: group or others may read it (chmod 600 {path})")
    if not text:
        raise BrokerPolicyError(f"{what} {path}: empty")
    return text


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _parts(url: str) -> tuple[str, str]:
    try:
        parts = urlsplit(url)
        return parts.scheme.lower(), parts.hostname or "localhost"
    except ValueError:
        raise BrokerPolicyError(f"fleet.broker_url {redact_url(url)!r} is not a URL") from None


def check_broker(fleet: FleetSettings) -> None:
    """Raise BrokerPolicyError unless the broker URL and the TLS settings make a safe connection."""
    scheme, host = _parts(fleet.broker_url)
    shown = redact_url(fleet.broker_url)
    if scheme in ("amqp", "pyamqp"):
        if not is_loopback(host):
            raise BrokerPolicyError(f"fleet.broker_url {shown}: plain AMQP to {host}, which is not loopback; "
                                    "use amqps:// with fleet.tls_ca, tls_cert, tls_key (docs/SECURITY.md)")  # fmt: skip
        return
    if scheme != "amqps":
        raise BrokerPolicyError(f"fleet.broker_url {shown}: expected amqp:// or amqps://")
    if not fleet.tls_ca:
        raise BrokerPolicyError(f"fleet.broker_url {shown}: amqps:// needs fleet.tls_ca (the CA file)")
    if bool(fleet.tls_cert) != bool(fleet.tls_key):
        raise BrokerPolicyError(
            "fleet.tls_cert and fleet.tls_key go together (a client certificate and its key)"
        )
    for name in ("tls_ca", "tls_cert"):
        path = getattr(fleet, name)
        if path and not os.path.isfile(path):
            raise BrokerPolicyError(f"fleet.{name} {path}: no such file")
    if fleet.tls_key:
        read_secret(fleet.tls_key, what="fleet.tls_key")  # owner-only, as a private key must be


def uses_tls(fleet: FleetSettings) -> bool:
    return _parts(fleet.broker_url)[0] == "amqps"


def broker_url(fleet: FleetSettings) -> str:
    """The broker URL to connect with: a URL without a password gets the one of
    ``fleet.broker_password_file`` (when set); a URL that carries one keeps it (an explicit URL, e.g. a
    test's private vhost, overrides a settings file's user and its password file together)."""
    parts = urlsplit(fleet.broker_url)
    if not fleet.broker_password_file or parts.password is not None:
        return fleet.broker_url
    password = read_secret(fleet.broker_password_file, what="fleet.broker_password_file")
    user = parts.username or "guest"
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{quote(user, safe='')}:{quote(password, safe='')}@{host}").geturl()


def kombu_ssl(fleet: FleetSettings) -> dict[str, Any] | None:
    """py-amqp's TLS options (kombu ``Connection(ssl=...)``, Celery ``broker_use_ssl``); None = plain."""
    if not uses_tls(fleet):
        return None
    check_broker(fleet)
    opts: dict[str, Any] = {"ca_certs": fleet.tls_ca, "cert_reqs": ssl.CERT_REQUIRED,
                            "server_hostname": _parts(fleet.broker_url)[1]}  # fmt: skip
    if fleet.tls_cert:
        opts.update(certfile=fleet.tls_cert, keyfile=fleet.tls_key)
    return opts


def client_context(fleet: FleetSettings) -> ssl.SSLContext:
    """A client context that verifies the broker (CA and hostname) and presents our certificate."""
    check_broker(fleet)
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=fleet.tls_ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if fleet.tls_cert:
        ctx.load_cert_chain(fleet.tls_cert, fleet.tls_key)
    return ctx


def pika_ssl(fleet: FleetSettings) -> Any:
    """pika ``SSLOptions`` for an amqps:// broker, None for plain AMQP."""
    if not uses_tls(fleet):
        return None
    import pika

    return pika.SSLOptions(client_context(fleet), server_hostname=_parts(fleet.broker_url)[1])


# Where OpenSSL's messages say which side refused the other's certificate.
_WE_REFUSE = ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed")
_BROKER_REFUSES = ("TLSV1_ALERT_UNKNOWN_CA", "alert unknown ca", "TLSV1_ALERT_BAD_CERTIFICATE")


def _texts(exc: BaseException) -> str:
    """The messages of ``exc`` and of the exceptions it wraps (cause, context, exception arguments)."""
    seen: dict[int, BaseException] = {}
    todo = [exc]
    while todo and len(seen) < 16:
        e = todo.pop()
        if id(e) not in seen:
            seen[id(e)] = e
            todo += [x for x in (e.__cause__, e.__context__, *e.args) if isinstance(x, BaseException)]
    return " ".join(f"{type(e).__name__} {e}" for e in seen.values())


def tls_hint(exc: BaseException, fleet: FleetSettings) -> str:
    """What to do about a connection that failed on the TLS certificates ("" for any other failure)."""
    text = _texts(exc)
    why = "set up with another CA, e.g. from another clone on its machine: scripts/fleet-files.sh check there; docs/SECURITY.md"
    if isinstance(exc, ssl.SSLCertVerificationError) or any(t in text for t in _WE_REFUSE):
        return f"CA mismatch: fleet.tls_ca {fleet.tls_ca} does not verify the broker's certificate (the broker was {why})"
    if any(t in text for t in _BROKER_REFUSES):
        return f"CA mismatch: the broker does not trust fleet.tls_cert {fleet.tls_cert} (it was {why})"
    return ""


def describe(exc: BaseException, fleet: FleetSettings) -> str:
    """``exc`` as one line, with ``tls_hint`` after it when the certificates are the cause."""
    hint = tls_hint(exc, fleet)
    return f"{exc}; {hint}" if hint else str(exc)
