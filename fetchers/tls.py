"""HTTPS for the fetchers: the client TLS context the settings ask for, and certificate failures as
error classes of their own.

``fetch.tls_verify`` (default true) verifies every server's certificate chain, name and dates against the
system's CAs plus ``fetch.tls_ca_bundle`` (a PEM file of extra CAs, "" = none). A certificate that fails
verification ends the exchange with one of these error classes (final: not retried, since the same
certificate fails the same way again):

=====================  ====================================================================
error class            the certificate ...
=====================  ====================================================================
tls_cert_expired       is past its notAfter date, or not yet valid
tls_cert_hostname      does not name the host that was asked for
tls_cert_untrusted     does not chain to a trusted CA (self-signed, unknown issuer)
tls_cert_invalid       fails verification in another way (revoked, bad signature, wrong use)
=====================  ====================================================================

Other handshake failures (no common protocol or cipher, the server's alert) are ``tls_error``. With
``tls_verify`` false nothing is checked and every page of a server with a bad certificate is fetched.
Why true is the default: docs/HTTPS.md.
"""

from __future__ import annotations

import ssl

from pipeline.settings import FetchSettings

CERT_ERRORS = frozenset({"tls_cert_expired", "tls_cert_hostname", "tls_cert_untrusted", "tls_cert_invalid"})

# OpenSSL's X509_V_ERR_* codes (x509_vfy.h), grouped by what they tell a crawl's operator.
_EXPIRED = frozenset({9, 10})  # CERT_NOT_YET_VALID, CERT_HAS_EXPIRED
_HOSTNAME = frozenset({62, 64})  # HOSTNAME_MISMATCH, IP_ADDRESS_MISMATCH
# UNABLE_TO_GET_ISSUER_CERT, DEPTH_ZERO_SELF_SIGNED_CERT, SELF_SIGNED_CERT_IN_CHAIN,
# UNABLE_TO_GET_ISSUER_CERT_LOCALLY, UNABLE_TO_VERIFY_LEAF_SIGNATURE, CERT_UNTRUSTED
_UNTRUSTED = frozenset({2, 18, 19, 20, 21, 27})


def client_context(fetch: FetchSettings) -> ssl.SSLContext:
    """The TLS context every HTTPS exchange of a fetcher uses. Raises OSError/ssl.SSLError when
    ``tls_ca_bundle`` cannot be read as PEM certificates."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if fetch.tls_ca_bundle:
        ctx.load_verify_locations(cafile=fetch.tls_ca_bundle)
    if not fetch.tls_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def cert_error_class(exc: BaseException | None) -> str:
    """The tls_cert_* class of a certificate verification failure found in ``exc`` or its causes, else ""."""
    seen = 0
    while exc is not None and seen < 10:
        inner = getattr(exc, "certificate_error", None)  # aiohttp's wrapper subclasses the error it wraps
        if isinstance(inner, BaseException) and inner is not exc:
            exc, seen = inner, seen + 1
            continue
        code = getattr(exc, "verify_code", None)
        if isinstance(exc, ssl.SSLCertVerificationError) and isinstance(code, int):
            if code in _EXPIRED:
                return "tls_cert_expired"
            if code in _HOSTNAME:
                return "tls_cert_hostname"
            if code in _UNTRUSTED:
                return "tls_cert_untrusted"
            return "tls_cert_invalid"
        nxt = getattr(exc, "reason", None)
        exc = nxt if isinstance(nxt, BaseException) else (exc.__cause__ or exc.__context__)
        seen += 1
    return ""
