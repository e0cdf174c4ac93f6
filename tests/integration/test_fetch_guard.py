"""URL ingestion reaches only public addresses, against real servers on loopback: every spelling of
an internal address is refused before a connection, at the first URL and at every redirect; an
allowed host is fetched on the address that was checked, with its name kept for Host and TLS."""

from __future__ import annotations

import datetime
import ipaddress
import ssl

import httpx
import pytest

from cairn.engine.ingest import Ingestor, LocalContentStore
from cairn.engine.ingest.fetchguard import FetchPolicy
from cairn.engine.ingest.web import Fetcher, read_urls
from cairn.ports.vectorstores.local import LocalVectorStore
from tests.sites import page, redirect, serve

pytestmark = pytest.mark.integration
ROOT = "cairn://resources/web"
SETTING = "CAIRN_FETCH_ALLOW_HOSTS"

# (URL with {port} for the loopback server's port, the address class the refusal names; None: the
# URL is refused before any address exists — it is not a URL httpx accepts, or the name does not resolve)
SPELLINGS = [
    ("http://127.0.0.1:{port}/", "loopback"),
    ("http://localhost:{port}/", "loopback"),
    ("http://LOCALHOST:{port}/", "loopback"),
    ("http://2130706433:{port}/", "loopback"),  # decimal
    ("http://0x7f000001:{port}/", "loopback"),  # hex
    ("http://0x7f.0.0.1:{port}/", "loopback"),  # hex octet
    ("http://017700000001:{port}/", "loopback"),  # octal
    ("http://127.1:{port}/", "loopback"),  # short form
    ("http://127.0.1:{port}/", "loopback"),
    ("http://[::1]:{port}/", "loopback"),
    ("http://[0:0:0:0:0:0:0:1]:{port}/", "loopback"),
    ("http://[::ffff:127.0.0.1]:{port}/", "loopback"),  # IPv4-mapped
    ("http://[::ffff:7f00:1]:{port}/", "loopback"),
    ("http://[::127.0.0.1]:{port}/", "loopback"),  # IPv4-compatible
    ("http://[64:ff9b::7f00:1]:{port}/", "loopback"),  # NAT64
    ("http://0:{port}/", "unspecified"),
    ("http://0.0.0.0:{port}/", "unspecified"),
    ("http://[::]:{port}/", "unspecified"),
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),  # AWS, GCP, Azure
    ("http://[fd00:ec2::254]/latest/meta-data/", "cloud metadata"),  # AWS over IPv6
    ("http://100.100.100.200/latest/meta-data/", "cloud metadata"),  # Alibaba
    ("http://[::ffff:169.254.169.254]/", "cloud metadata"),
    ("http://169.254.1.1/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://10.0.0.1/", "private"),
    ("http://172.16.5.4/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://[fc00::1]/", "unique-local"),
    ("http://100.64.0.1/", "carrier-grade NAT"),
    ("http://224.0.0.1/", "multicast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://0177.0.0.1:{port}/", None),  # octal octets: httpx refuses the URL
    ("http://127.0.0.1.:{port}/", "loopback"),  # trailing dot
    ("http://localhost.:{port}/", "loopback"),
    ("http://[fe80::1%251]/", "link-local"),  # with a zone (interface 1)
    ("http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ:{port}/", None),  # IDNA look-alike: not a valid IDNA name
]


@pytest.fixture
def loopback():
    with serve({"/": page("Internal", "the admin console")}) as site:
        yield site


@pytest.mark.parametrize(("spelling", "kind"), SPELLINGS, ids=[s for s, _ in SPELLINGS])
def test_every_spelling_of_an_internal_address_is_refused_before_a_connection(loopback, spelling, kind):
    url = spelling.format(port=loopback.port)
    [item] = list(read_urls([url]))
    assert item.reason.startswith("not fetched"), item
    if kind is not None:
        assert f"{kind}" in item.reason and SETTING in item.reason, item.reason
    assert loopback.requests == []  # not even robots.txt


def test_an_allowed_host_is_fetched_and_only_on_the_port_allowed(loopback):
    with serve({"/": page("Other", "another service")}) as other:
        policy = FetchPolicy((f"127.0.0.1:{loopback.port}",))
        items = list(read_urls([f"{loopback.base}/", f"{other.base}/"], policy=policy))
    assert [type(i).__name__ for i in items] == ["Document", "Rejected"]
    assert "Internal" in items[0].title
    assert f"{SETTING}=127.0.0.1:{other.port}" in items[1].reason
    assert loopback.paths == ["/robots.txt", "/"] and other.requests == []


def test_a_redirect_from_an_allowed_host_to_loopback_is_refused(loopback):
    with serve() as allowed:
        allowed.routes["/go"] = redirect(f"http://localhost:{loopback.port}/")
        allowed.routes["/chain"] = redirect("/go", 301)
        policy = FetchPolicy((f"127.0.0.1:{allowed.port}",))
        items = list(read_urls([f"{allowed.base}/go", f"{allowed.base}/chain"], policy=policy))
    for item in items:
        assert item.reason.startswith(f"redirected to http://localhost:{loopback.port}/: not fetched: localhost resolves to")
        assert "loopback address" in item.reason and SETTING in item.reason
    assert loopback.requests == []


def test_robots_txt_is_read_for_every_host_a_redirect_leads_to():
    with serve({"/robots.txt": (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n")}) as b:
        b.routes["/private/x.html"] = page("Secret", "never fetched")
        with serve({"/moved": redirect(f"{b.base}/private/x.html")}) as a:
            policy = FetchPolicy((f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"))
            [item] = list(read_urls([f"{a.base}/moved"], policy=policy))
    assert item.reason == f"redirected to {b.base}/private/x.html: disallowed by the site's robots.txt; not fetched"
    assert b.paths == ["/robots.txt"] and a.paths == ["/robots.txt", "/moved"]


def test_robots_txt_is_read_for_every_host_a_sitemap_leads_to(tmp_path, embedder):
    robots = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n")
    with serve({"/robots.txt": robots, "/private/p.html": page("P", "never"), "/open.html": page("O", "open")}) as b:
        urlset = ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                  f"<url><loc>{b.base}/private/p.html</loc></url><url><loc>{b.base}/open.html</loc></url></urlset>")
        with serve({"/map.xml": (200, {"Content-Type": "application/xml"}, urlset.encode())}) as a:
            policy = FetchPolicy((f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"))
            store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
            report = Ingestor(store, embedder, "acme", isolate_parsers=False).ingest_urls(
                [], ROOT, sitemap=f"{a.base}/map.xml", policy=policy)
    assert report.documents == 1
    assert [(r.source, r.reason) for r in report.rejected] == [
        (f"{b.base}/private/p.html", "disallowed by the site's robots.txt; not fetched")]
    assert a.paths == ["/robots.txt", "/map.xml"] and b.paths == ["/robots.txt", "/open.html"]


def test_the_connection_goes_to_the_address_checked_with_the_name_kept(loopback):
    asked: list[str] = []

    def resolver(host: str, port: int) -> list[str]:  # a name only this resolver knows
        asked.append(host)
        return ["127.0.0.1"] if host == "docs.test" else []

    policy = FetchPolicy(("127.0.0.1",), resolver=resolver)
    [doc] = list(read_urls([f"http://docs.test:{loopback.port}/"], policy=policy))
    assert doc.path == (f"docs.test_{loopback.port}", "index.html")  # placed by the name, not the address
    assert doc.metadata["source.url"] == f"http://docs.test:{loopback.port}/"
    assert loopback.requests == [("/robots.txt", f"docs.test:{loopback.port}"), ("/", f"docs.test:{loopback.port}")]
    assert asked == ["docs.test", "docs.test"]  # one resolution per request; the connection did not resolve again


def _tls(tmp_path, name: str):
    """A CA, and a server context whose certificate is the CA's for ``name`` only."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject: str, key, issuer, issuer_key, *, ca: bool):
        builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(issuer).public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cairn test CA")])
    ca_cert = cert("cairn test CA", ca_key, ca_name, ca_key, ca=True)
    leaf = cert(name, leaf_key, ca_name, ca_key, ca=False)
    (tmp_path / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "leaf.key").write_bytes(leaf_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "leaf.pem", tmp_path / "leaf.key")
    client = ssl.create_default_context(cadata=ca_cert.public_bytes(serialization.Encoding.PEM).decode())
    return server, client


def test_https_to_the_checked_address_still_verifies_the_certificate_for_the_name(tmp_path):
    server_ctx, client_ctx = _tls(tmp_path, "docs.test")
    policy = FetchPolicy(("127.0.0.1",), resolver=lambda host, port: ["127.0.0.1"])
    with serve({"/a.html": page("Secure", "served over TLS")}, tls=server_ctx) as site:
        with Fetcher(policy, verify=client_ctx) as fetcher:
            ok = fetcher.get(f"https://docs.test:{site.port}/a.html", 1_000_000)
            with pytest.raises(httpx.ConnectError, match="certificate verify failed"):
                fetcher.get(f"https://other.test:{site.port}/a.html", 1_000_000, robots=False)  # same address, another name
    assert b"served over TLS" in ok.body
    assert ("/a.html", f"docs.test:{site.port}") in site.requests
    assert not any(host.startswith("other.test") for _, host in site.requests)


def test_an_ingest_of_refused_urls_stores_nothing(tmp_path, embedder, loopback):
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    ing = Ingestor(store, embedder, "acme", content=LocalContentStore(tmp_path / "content"), isolate_parsers=False)
    report = ing.ingest_urls([f"{loopback.base}/", f"http://[::ffff:{ipaddress.IPv4Address('127.0.0.1')}]:{loopback.port}/"], ROOT)
    assert report.documents == 0 and len(report.rejected) == 2
    assert all(SETTING in r.reason for r in report.rejected)
    assert store.count("acme", {}) == 0 and loopback.requests == []
