"""Where a webhook may send (docs/behaviour.md#webhooks-ssrf-guard): http or https to a public
address only. Private, loopback, link-local, reserved, multicast, unspecified and carrier-grade
NAT addresses are refused unless ``HINDSIGHT_API_WEBHOOK_ALLOWED_HOSTS`` names the host, its
address or a range holding it.

Twice: when a webhook is created or its URL changed (``url_check``: the scheme, the host, and a
host written as an address — the legacy numeric spellings ``2130706433``, ``0x7f.1`` included —
without resolving names, so a request never waits on DNS), and at every delivery
(``addresses_resolve``: the name resolved, every address it resolves to checked, and the
connection made to those checked addresses only, so a name rebound meanwhile cannot reach an
internal one).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Not every Python classifies it as private (3.11 does not): refused explicitly.
_CARRIER_GRADE_NAT = ipaddress.ip_network("100.64.0.0/10")


class DestinationRefused(ValueError):
    """A webhook URL that may not be sent to (the message says why)."""


@dataclass(frozen=True)
class Allowlist:
    hostnames: frozenset[str]
    networks: tuple[IPNetwork, ...]

    @classmethod
    def of(cls, entries: Iterable[str]) -> Allowlist:
        """Entries that read as an address or a CIDR range are ranges; the rest hostnames."""
        hostnames: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in (e.strip() for e in entries):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hostnames.add(entry.lower())
        return cls(frozenset(hostnames), tuple(networks))

    def names(self, host: str) -> bool:
        return host.lower() in self.hostnames

    def holds(self, address: IPAddress) -> bool:
        return any(address in network for network in self.networks)


def allowlist() -> Allowlist:
    return Allowlist.of(settings.HINDSIGHT.webhook_allowed_hosts)


def _internal(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (address in _CARRIER_GRADE_NAT or address.is_private or address.is_loopback
            or address.is_link_local or address.is_reserved or address.is_multicast
            or address.is_unspecified)


def _literal(host: str) -> IPAddress | None:
    """The address a host written as one stands for, legacy IPv4 spellings included."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _refuse_internal(host: str, address: IPAddress, allowed: Allowlist) -> None:
    if _internal(address) and not allowed.holds(address) and not allowed.names(host):
        raise DestinationRefused(
            f"webhook URL host '{host}' is a private, loopback or link-local address "
            f"({address}); HINDSIGHT_API_WEBHOOK_ALLOWED_HOSTS may name it")


def url_parse(url: str) -> SplitResult:
    """The URL's parts: http or https, with a host; no control characters."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise DestinationRefused("webhook URL holds control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 — a bad port raises only when read
    except ValueError as exc:
        raise DestinationRefused(f"webhook URL is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise DestinationRefused(
            f"webhook URL scheme must be http or https, got '{parts.scheme or 'none'}'")
    if not parts.hostname:
        raise DestinationRefused("webhook URL has no host")
    return parts


def url_check(url: str, allowed: Allowlist | None = None) -> None:
    """At create and update: refuse a URL whose host is written as an internal address."""
    allowed = allowlist() if allowed is None else allowed
    host = url_parse(url).hostname or ""
    address = _literal(host)
    if address is not None:
        _refuse_internal(host, address, allowed)


def addresses_resolve(host: str, port: int, allowed: Allowlist | None = None) -> list[str]:
    """At delivery: the addresses to connect to, every one checked; refused when any is
    internal and not allowed (a partly rebound answer refuses the whole name)."""
    allowed = allowlist() if allowed is None else allowed
    address = _literal(host)
    if address is not None:
        _refuse_internal(host, address, allowed)
        return [str(address)]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise DestinationRefused(f"webhook host '{host}' does not resolve: {exc}") from None
    found = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not found:
        raise DestinationRefused(f"webhook host '{host}' resolves to no address")
    for text in found:
        _refuse_internal(host, ipaddress.ip_address(text.split("%", 1)[0]), allowed)
    return found
