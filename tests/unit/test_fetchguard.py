"""The fetch policy's rules as tables: which addresses are internal (and of what class), which hosts
an operator's allow-list lets through, and the refusal a user reads."""

from __future__ import annotations

import ipaddress

import pytest

from cairn.core.errors import FetchRefused
from cairn.engine.ingest.fetchguard import Budget, FetchPolicy, address_class

CLASSES = [
    ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"), ("::1", "loopback"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("169.254.169.254", "cloud metadata"), ("fd00:ec2::254", "cloud metadata"), ("100.100.100.200", "cloud metadata"),
    ("169.254.170.2", "cloud metadata"), ("168.63.129.16", "cloud metadata"), ("192.0.0.192", "cloud metadata"),
    ("169.254.0.1", "link-local"), ("fe80::1", "link-local"),
    ("10.1.2.3", "private (RFC 1918)"), ("172.31.255.255", "private (RFC 1918)"), ("192.168.0.1", "private (RFC 1918)"),
    ("100.64.0.1", "carrier-grade NAT (RFC 6598)"), ("100.127.255.254", "carrier-grade NAT (RFC 6598)"),
    ("fc00::1", "unique-local (RFC 4193)"), ("fdff::1", "unique-local (RFC 4193)"), ("fec0::1", "site-local"),
    ("224.0.0.251", "multicast"), ("ff02::1", "multicast"), ("240.0.0.1", "reserved"),
    ("192.0.2.1", "not globally routable"), ("198.18.0.1", "not globally routable"),
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.0.0.1", "private (RFC 1918)"), ("::ffff:169.254.169.254", "cloud metadata"),
    ("::127.0.0.1", "loopback"), ("64:ff9b::a00:1", "private (RFC 1918)"), ("2002:7f00:1::", "loopback"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo, client 127.0.0.1 (obfuscated)
    ("8.8.8.8", None), ("93.184.215.14", None), ("2606:4700:4700::1111", None), ("::ffff:8.8.8.8", None),
    ("100.128.0.1", None), ("172.32.0.1", None),
]


@pytest.mark.parametrize(("address", "kind"), CLASSES, ids=[a for a, _ in CLASSES])
def test_address_classes(address, kind):
    assert address_class(ipaddress.ip_address(address)) == kind


ALLOW = [
    (("wiki.corp",), "wiki.corp", 8080, True),
    (("wiki.corp",), "WIKI.corp.", 443, True),
    (("wiki.corp:8080",), "wiki.corp", 8080, True),
    (("wiki.corp:8080",), "wiki.corp", 8081, False),
    (("wiki.corp",), "www.wiki.corp", 80, False),
    (("127.0.0.1:9",), "127.0.0.1", 9, True),
    (("127.0.0.1:9",), "127.0.0.1", 10, False),
    (("127.0.0.1",), "2130706433", 80, False),  # a name is matched as written; its address is checked on resolving
    (("[::1]:8443",), "::1", 8443, True),
    (("[::1]:8443",), "[0:0::1]", 8443, True),
    (("::1",), "::1", 1, True),
    (("10.0.0.0/8",), "10.2.3.4", 80, True),
    (("10.0.0.0/8",), "11.2.3.4", 80, False),
    ((), "127.0.0.1", 80, False),
]


@pytest.mark.parametrize(("entries", "host", "port", "allowed"), ALLOW)
def test_allow_list_entries(entries, host, port, allowed):
    assert FetchPolicy(entries).allows_host(host, port) is allowed


def fixed(*addresses):
    return lambda host, port: list(addresses)


def test_a_host_is_refused_if_any_of_its_addresses_is_internal():
    policy = FetchPolicy(resolver=fixed("93.184.215.14", "10.0.0.7"))
    with pytest.raises(FetchRefused) as caught:
        policy.resolve("docs.example.com", 443)
    assert caught.value.message == (
        "not fetched: docs.example.com resolves to 10.0.0.7, which is a private (RFC 1918) address; URL ingestion "
        "fetches only public addresses unless the operator allows the host (CAIRN_FETCH_ALLOW_HOSTS=docs.example.com:443)")
    assert FetchPolicy(resolver=fixed("93.184.215.14")).resolve("docs.example.com", 443) == ["93.184.215.14"]


def test_an_address_allowed_by_the_operator_is_allowed_whatever_name_leads_there():
    policy = FetchPolicy(("10.0.0.7",), resolver=fixed("10.0.0.7"))
    assert policy.resolve("wiki.corp", 80) == ["10.0.0.7"]
    with pytest.raises(FetchRefused, match="inside IPv6"):
        FetchPolicy(resolver=fixed("::ffff:10.0.0.7")).resolve("wiki.corp", 80)


def test_an_unresolvable_host_is_refused():
    def fail(host, port):
        raise OSError("Name or service not known")

    with pytest.raises(FetchRefused, match="could not be resolved"):
        FetchPolicy(resolver=fail).resolve("nowhere.invalid", 80)


def test_the_budget_refuses_once_spent_and_remembers_why():
    budget = Budget(max_requests=2, max_bytes=10)
    budget.request()
    budget.request()
    with pytest.raises(FetchRefused, match="2 HTTP requests"):
        budget.request()
    budget.read(10)
    with pytest.raises(FetchRefused, match="10 bytes"):
        budget.read(1)
    assert budget.hit == "this ingest's budget of 10 bytes is spent (CAIRN_FETCH_MAX_BYTES)"


def test_connection_pools_are_kept_for_a_bounded_number_of_origins():
    from cairn.engine.ingest.fetchguard import MAX_POOLS, GuardedTransport

    transport = GuardedTransport(FetchPolicy())
    first = transport._pool("https", "host0.example", 443)
    for n in range(1, 3 * MAX_POOLS):
        transport._pool("https", f"host{n}.example", 443)
    assert len(transport._pools) == MAX_POOLS  # a sitemap of thousands of hosts keeps few sockets open
    assert transport._pool("https", "host0.example", 443) is not first  # the evicted pool was closed, a new one made
    transport.close()
    assert not transport._pools
