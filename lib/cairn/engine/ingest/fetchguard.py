"""What URL ingestion may reach: every host resolved and checked before a connection, and the
connection made to the address that was checked.

A fetch that a user (or a page's redirect, or a sitemap) points at could otherwise read what
the machine running cairn can reach and the internet cannot: its own services on loopback, the
private network, a cloud's instance metadata (credentials). So :class:`GuardedTransport`, the
httpx transport every fetch of :mod:`cairn.engine.ingest.web` goes through, for each request — the first
one and every redirect, robots.txt and sitemaps included:

1. resolves the URL's host with ``getaddrinfo`` (so every notation the system resolver accepts —
   ``2130706433``, ``0x7f000001``, ``127.1``, ``[::ffff:127.0.0.1]``, ``localhost`` — is judged by
   the address it means, not by how it is spelt);
2. refuses the request when ANY address is not a public one (:func:`address_class`): loopback,
   private (RFC 1918), link-local, unique-local, site-local, carrier-grade NAT, unspecified,
   multicast, reserved or otherwise not globally routable, a cloud metadata address, or an IPv6
   form that embeds one of those (IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo);
3. connects to the first checked address, with the ``Host`` header and, for HTTPS, the TLS server
   name (SNI, and so the certificate check) of the name in the URL. The name is not resolved again,
   so a DNS answer that changes between the check and the connection (DNS rebinding) cannot move
   the connection. Each origin (scheme, host, port) has its own connection pool, so a connection
   opened for one name is never reused for another name on the same address.

An operator allows internal hosts with :attr:`FetchPolicy.allow_hosts` (``CAIRN_FETCH_ALLOW_HOSTS``,
comma-separated): ``wiki.corp`` or ``wiki.corp:8080`` (a host name as written in the URL, any or
one port), ``10.0.0.5`` / ``[fd00::5]:8443`` (an address, however the URL spells it), or a network
``10.0.0.0/8``. Environment proxies are not used (a proxy would resolve the name itself).
"""

from __future__ import annotations

import ipaddress
import socket
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from cairn.core.errors import FetchRefused
from cairn.core.tls import verified_context

ALLOW_SETTING = "CAIRN_FETCH_ALLOW_HOSTS"
MAX_REQUESTS = 30_000  # HTTP requests per ingest: pages, redirects, robots.txt files, sitemaps
MAX_BYTES = 2_000_000_000  # bytes read per ingest, all responses together
MAX_POOLS = 16  # origins with open connections at once

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
# instance metadata services: AWS/GCP/Azure/OpenStack/DigitalOcean, AWS over IPv6, AWS ECS tasks,
# Alibaba, Oracle, Azure's platform endpoint (public-looking, but the host's own)
METADATA = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "fd00:ec2::254", "169.254.170.2", "169.254.170.23", "100.100.100.200", "192.0.0.192",
    "168.63.129.16",
))
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT (RFC 6598)
_RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4, Teredo client)."""
    if ip.ipv4_mapped:
        return ip.ipv4_mapped
    if int(ip) >> 32 == 0 and int(ip) > 1:  # ::a.b.c.d (deprecated IPv4-compatible form)
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour:
        return ip.sixtofour
    if ip.teredo:
        return ip.teredo[1]
    return None


def address_class(ip: IP) -> str | None:
    """What kind of non-public address ``ip`` is (``"loopback"``, ...), or None for a public one."""
    if ip in METADATA:
        return "cloud metadata"
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None:
            return address_class(inner)
    checks: tuple[tuple[bool, str], ...] = (
        (ip.is_loopback, "loopback"),
        (ip.is_unspecified, "unspecified"),
        (ip.is_link_local, "link-local"),
        (ip in _SHARED if ip.version == 4 else False, "carrier-grade NAT (RFC 6598)"),
        (any(ip in n for n in _RFC1918) if ip.version == 4 else False, "private (RFC 1918)"),
        (ip in _UNIQUE_LOCAL if ip.version == 6 else False, "unique-local (RFC 4193)"),
        (getattr(ip, "is_site_local", False), "site-local"),
        (ip.is_multicast, "multicast"),
        (ip.is_reserved, "reserved"),
        (not ip.is_global, "not globally routable"),
    )
    return next((name for hit, name in checks if hit), None)


def _parse_ip(text: str) -> IP | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _host_port(entry: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]`` / ``[v6]:port``, a bare IPv6 address or a network."""
    entry = entry.strip().lower().rstrip(".")
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        if port.isdigit():
            return host, int(port)
    return entry, None


Resolver = Callable[[str, int], Sequence[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, through the system resolver (``getaddrinfo``)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class FetchPolicy:
    """Which hosts URL ingestion may reach beyond the public internet, and each ingest's budget."""

    allow_hosts: tuple[str, ...] = ()
    max_requests: int = MAX_REQUESTS
    max_bytes: int = MAX_BYTES
    resolver: Resolver = field(default=system_resolver, compare=False, repr=False)

    def _entries(self) -> list[tuple[str, int | None]]:
        return [_host_port(e) for e in self.allow_hosts if e.strip()]

    def allows_host(self, host: str, port: int) -> bool:
        """True if the operator listed ``host`` (a name as written in a URL, or an address) for ``port``."""
        name = host.strip("[]").lower().rstrip(".")
        ip = _parse_ip(name)
        return any(self._matches(entry, entry_port, name, ip, port) for entry, entry_port in self._entries())

    @staticmethod
    def _matches(entry: str, entry_port: int | None, name: str, ip: IP | None, port: int) -> bool:
        if entry_port is not None and entry_port != port:
            return False
        if entry == name:
            return True
        if ip is None:
            return False
        if "/" in entry:
            try:
                return ip in ipaddress.ip_network(entry, strict=False)
            except ValueError:
                return False
        return _parse_ip(entry) == ip

    def resolve(self, host: str, port: int) -> list[str]:
        """The addresses to connect to for ``host:port``, every one checked; :class:`FetchRefused`
        (naming the address class and the setting) if any is not public and not allowed."""
        name = unquote(host.strip("[]")).lower()
        try:
            addresses = list(self.resolver(name.rstrip(".") or name, port))
        except (OSError, UnicodeError) as exc:
            raise FetchRefused(f"not fetched: host {host!r} could not be resolved ({exc})") from None
        if not addresses:
            raise FetchRefused(f"not fetched: host {host!r} resolved to no address")
        if self.allows_host(name, port):
            return addresses
        for text in addresses:
            ip = _parse_ip(text)
            kind = "unparseable" if ip is None else address_class(ip)
            if kind and not (ip is not None and self.allows_host(str(ip), port)):
                raise FetchRefused(_refusal(name, text, kind, port))
        return addresses


def _refusal(name: str, address: str, kind: str, port: int) -> str:
    shown = f"[{name}]" if ":" in name else name
    said = "is" if address == name else f"resolves to {address}, which is"
    ip = _parse_ip(address)
    inner = _embedded_v4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    where = f" (the IPv4 address {inner} inside IPv6)" if inner else ""
    article = "an" if kind[0] in "aeiou" else "a"
    return (f"not fetched: {shown} {said} {article} {kind} address{where}; URL ingestion fetches only public "
            f"addresses unless the operator allows the host ({ALLOW_SETTING}={shown}:{port})")


class Budget:
    """Requests and bytes one ingest may still spend; :class:`FetchRefused` once spent."""

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        self.max_requests, self.max_bytes = max_requests, max_bytes
        self.requests = 0
        self.bytes = 0
        self.hit: str | None = None  # what was spent, once it was

    def request(self) -> None:
        if self.requests >= self.max_requests:
            self._spent(f"this ingest's budget of {self.max_requests:,} HTTP requests is spent (CAIRN_FETCH_MAX_REQUESTS)")
        self.requests += 1

    def read(self, n: int) -> None:
        self.bytes += n
        if self.bytes > self.max_bytes:
            self._spent(f"this ingest's budget of {self.max_bytes:,} bytes is spent (CAIRN_FETCH_MAX_BYTES)")

    def _spent(self, what: str) -> None:
        self.hit = what
        raise FetchRefused(f"not fetched: {what}")


class GuardedTransport:
    """An httpx transport that checks each request's host (:meth:`FetchPolicy.resolve`) and
    connects to the checked address, keeping the ``Host`` header and the TLS server name."""

    def __init__(self, policy: FetchPolicy, budget: Budget | None = None, **transport_options: Any) -> None:
        self.policy = policy
        self.budget = budget
        self._options = {"trust_env": False, **transport_options}
        if self._options.get("verify", True) is True:  # one shared context, not a CA bundle read per origin
            self._options["verify"] = verified_context(trust_env=bool(self._options["trust_env"]))
        self._pools: OrderedDict[tuple[str, str, int], Any] = OrderedDict()

    def handle_request(self, request: Any) -> Any:
        import httpx

        url = request.url
        host = url.raw_host.decode("ascii")
        port = url.port or (443 if url.scheme == "https" else 80)
        address = self.policy.resolve(host, port)[0]
        if self.budget is not None:
            self.budget.request()
        extensions = dict(request.extensions)
        if url.scheme == "https":
            extensions["sni_hostname"] = host  # SNI and the certificate's name: the URL's host, not the address
        pinned = httpx.Request(request.method, url.copy_with(host=address), headers=request.headers,
                               stream=request.stream, extensions=extensions)
        return self._pool(url.scheme, host, port).handle_request(pinned)

    def _pool(self, scheme: str, host: str, port: int) -> Any:
        """The origin's connection pool; the least recently used is closed past ``MAX_POOLS`` (a
        sitemap listing thousands of hosts must not keep thousands of sockets open)."""
        import httpx

        key = (scheme, host, port)
        if key in self._pools:
            self._pools.move_to_end(key)
            return self._pools[key]
        while len(self._pools) >= MAX_POOLS:
            self._pools.popitem(last=False)[1].close()
        pool = self._pools[key] = httpx.HTTPTransport(**self._options)
        return pool

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()

    def __enter__(self) -> GuardedTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
