"""One HTTP attempt of a delivery: the headers (upstream's names and signatures), the request to
an address the guard checked (``hindsight.webhooks.guard``), the answer.

Signatures, over the exact bytes sent: ``X-Hindsight-Signature`` and its copy
``X-Hub-Signature-256`` are ``sha256=`` and the hex HMAC-SHA256 of the body under the secret;
``X-Hindsight-Signature-V2`` is ``t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``,
signed at each attempt, so a receiver can refuse an old one. A webhook without a secret sends
none of the three. The webhook's own headers come first, so none of them can stand in for the
event's or a signature (``Content-Type`` alone may be replaced).

The connection goes to the checked address while the request names the host (``Host``, and for
https the certificate checked against the host name); redirects are not followed (a 3xx is a
failed attempt) and no proxy from the environment is used.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

import urllib3

from hindsight.webhooks.guard import Allowlist, addresses_resolve, url_parse

# What a delivery keeps of a receiver's answer.
RESPONSE_EXCERPT_CHARS = 2048
_READ_BYTES = 64 * 1024


@dataclass(frozen=True)
class Answer:
    status: int
    body: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signature_v2(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def delivery_headers(*, event_type: str, event_id: str, delivery_id: str, body: bytes,
                     secret: str | None, extra: Mapping[str, str],
                     now: float | None = None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", **extra,
               "X-Hindsight-Event": event_type, "X-Hindsight-Event-Id": event_id,
               "X-Hindsight-Delivery-Id": delivery_id}
    if secret:
        signed = signature(secret, body)
        headers["X-Hindsight-Signature"] = signed
        headers["X-Hub-Signature-256"] = signed
        headers["X-Hindsight-Signature-V2"] = signature_v2(
            secret, body, int(time.time() if now is None else now))
    return headers


def request_send(*, url: str, method: str, headers: Mapping[str, str],
                 params: Mapping[str, str], body: bytes | None, timeout: float,
                 allowed: Allowlist | None = None) -> Answer:
    """Send once; the answer whatever its status. Raises ``DestinationRefused`` (never worth a
    retry) or urllib3's errors (no answer: refused, reset, timed out)."""
    parts = url_parse(url)
    host = parts.hostname or ""
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    path = parts.path or "/"
    query = "&".join(q for q in (parts.query, urlencode(dict(params))) if q)
    target = path + (f"?{query}" if query else "")
    shown_host = f"[{host}]" if ":" in host else host
    sent = {**headers, "Host": shown_host if parts.port is None else f"{shown_host}:{port}"}
    last: Exception | None = None
    for address in addresses_resolve(host, port, allowed):
        pool: urllib3.HTTPConnectionPool
        limit = urllib3.Timeout(connect=min(timeout, 10.0), read=timeout)
        if https:
            pool = urllib3.HTTPSConnectionPool(address, port, timeout=limit, retries=False,
                                               server_hostname=host, assert_hostname=host)
        else:
            pool = urllib3.HTTPConnectionPool(address, port, timeout=limit, retries=False)
        try:
            response = pool.urlopen(method, target, body=body, headers=sent, redirect=False,
                                    retries=False, preload_content=False, assert_same_host=False)
            try:
                raw = response.read(_READ_BYTES)
            finally:
                response.release_conn()
            text = raw.decode(errors="replace")[:RESPONSE_EXCERPT_CHARS]
            return Answer(response.status, text)
        except (urllib3.exceptions.NewConnectionError,
                urllib3.exceptions.ConnectTimeoutError) as exc:
            last = exc  # the next address the name resolved to
        finally:
            pool.close()
    assert last is not None
    raise last
