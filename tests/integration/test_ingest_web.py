"""URL lists and sitemaps fetched from a local HTTP server (allowed by the fetch policy, as an
operator allows an internal host): robots.txt respected, pages parsed like files, re-ingesting
unchanged pages embeds nothing, each sitemap fetched once, the budget kept, credentials never kept."""

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchmarks.docs_corpus import write_html, write_pdf
from cairn.engine.ingest import Ingestor, LocalContentStore
from cairn.engine.ingest.fetchguard import FetchPolicy
from cairn.ports.vectorstores.local import LocalVectorStore
from tests.sites import page, serve, xml

pytestmark = pytest.mark.integration
ROOT = "cairn://resources/site"
LOCAL = FetchPolicy(("127.0.0.1",))  # the operator allows the loopback servers of these tests


@pytest.fixture
def site(tmp_path):
    www = tmp_path / "www"
    (www / "private").mkdir(parents=True)
    write_html(www / "guide.html", "Install guide", [("Download", "Get the installer from the portal."),
                                                     ("Run", "Run the installer as an administrator.")])
    write_pdf(www / "report.pdf", ["Page one of the report.", "Revenue grew by twelve percent in the second quarter."],
              "Site report")
    write_html(www / "private" / "secret.html", "Secret", [("Keys", "Never fetch me.")])
    (www / "robots.txt").write_text("User-agent: *\nDisallow: /private/\n")
    requested: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            requested.append(self.path)

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(www)))
    base = f"http://127.0.0.1:{server.server_address[1]}"
    (www / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<url><loc>{base}/{p}</loc></url>" for p in ("guide.html", "report.pdf", "private/secret.html", "gone.html"))
        + "</urlset>"
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield base, requested
    server.shutdown()
    server.server_close()


def test_a_sitemap_is_fetched_with_robots_txt_respected_and_synced_incrementally(site, tmp_path, embedder):
    base, requested = site
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    ing = Ingestor(store, embedder, "acme", content=LocalContentStore(tmp_path / "content"))
    report = ing.ingest_urls([], ROOT, sitemap=f"{base}/sitemap.xml", policy=LOCAL)

    reasons = {r.source.rsplit("/", 1)[1]: r.reason for r in report.rejected}
    assert set(reasons) == {"secret.html", "gone.html"}
    assert "robots.txt" in reasons["secret.html"] and "HTTP 404" in reasons["gone.html"]
    assert not any(p.startswith("/private/") for p in requested)  # never fetched
    host = base.split("//", 1)[1].replace(":", "_")
    assert store.count("acme", {"uri": f"{ROOT}/{host}/report.pdf#1", "metadata.citation.page": 2}) == 1
    assert store.count("acme", {"uri": f"{ROOT}/{host}/guide.html", "metadata.source.format": "html"}) == 1
    assert store.count("acme", {"parent_uri": f"{ROOT}/{host}", "level": 2}) >= 3  # guide (1+) and report (2 pages)

    again = ing.ingest_urls([], ROOT, sitemap=f"{base}/sitemap.xml", policy=LOCAL)
    assert again.embedded == 0 and again.unchanged == again.records > 0


def test_a_url_list_reports_what_is_not_http_and_what_is_not_parseable(site, tmp_path, embedder):
    base, _ = site
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    report = Ingestor(store, embedder, "acme", isolate_parsers=False).ingest_urls(
        [f"{base}/guide.html", "file:///etc/passwd", f"{base}/robots.txt"], ROOT, policy=LOCAL
    )
    reasons = {r.source: r.reason for r in report.rejected}
    assert reasons == {"file:///etc/passwd": "only http and https URLs are fetched"}
    assert report.documents == 2  # the guide, and robots.txt as a text page


def _urlset(urls):
    return xml('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               + "".join(f"<url><loc>{u}</loc></url>" for u in urls) + "</urlset>")


def _index(urls):
    return xml('<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               + "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in urls) + "</sitemapindex>")


def test_a_sitemap_index_that_lists_itself_is_fetched_once(tmp_path, embedder):
    with serve({"/a.html": page("A", "the first page"), "/b.html": page("B", "the second page")}) as site:
        site.routes["/index.xml"] = _index([f"{site.base}/index.xml"] * 10 + ["/pages.xml", "/pages.xml"])
        site.routes["/pages.xml"] = _urlset([f"{site.base}/a.html", f"{site.base}/b.html"])
        store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
        report = Ingestor(store, embedder, "acme", isolate_parsers=False).ingest_urls(
            [], ROOT, sitemap=f"{site.base}/index.xml", policy=LOCAL)
    assert report.documents == 2 and not report.rejected
    assert sorted(site.paths) == ["/a.html", "/b.html", "/index.xml", "/pages.xml", "/robots.txt"]


def test_the_fetch_budget_stops_the_ingest_and_says_so(tmp_path, embedder):
    with serve({f"/{n}.html": page(f"Page {n}", f"text of page {n}") for n in range(5)}) as site:
        store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
        budget = FetchPolicy(("127.0.0.1",), max_requests=3)
        report = Ingestor(store, embedder, "acme", isolate_parsers=False).ingest_urls(
            [f"{site.base}/{n}.html" for n in range(5)], ROOT, policy=budget)
    assert report.documents == 2  # robots.txt, then two pages
    assert [r.reason for r in report.rejected] == [
        "not fetched: this ingest's budget of 3 HTTP requests is spent (CAIRN_FETCH_MAX_REQUESTS)"] * 3
    assert any("budget of 3 HTTP requests is spent" in w for w in report.warnings)
    assert len(site.requests) == 3


def test_a_byte_budget_counts_every_response(tmp_path, embedder):
    with serve({f"/{n}.html": page(f"Page {n}", "x" * 4000) for n in range(3)}) as site:
        budget = FetchPolicy(("127.0.0.1",), max_bytes=6000)
        report = Ingestor(LocalVectorStore(tmp_path / "s", dimension=embedder.dimension), embedder, "acme",
                          isolate_parsers=False).ingest_urls([f"{site.base}/{n}.html" for n in range(3)], ROOT, policy=budget)
    assert report.documents == 1
    assert {r.reason for r in report.rejected} == {
        "not fetched: this ingest's budget of 6,000 bytes is spent (CAIRN_FETCH_MAX_BYTES)"}


def test_credentials_in_a_url_are_never_sent_stored_or_shown(tmp_path, embedder):
    with serve({"/a.html": page("A", "public page")}) as site:
        secret = f"http://ann:hunter2@127.0.0.1:{site.port}"
        site.routes["/moved"] = (302, {"Location": f"{secret}/a.html"}, b"")
        site.routes["/map.xml"] = _urlset([f"{secret}/a.html", f"{site.base}/a.html"])
        store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
        content = LocalContentStore(tmp_path / "content")
        report = Ingestor(store, embedder, "acme", content=content, isolate_parsers=False).ingest_urls(
            [f"{secret}/a.html", f"{site.base}/moved"], ROOT, sitemap=f"{secret}/map.xml", policy=LOCAL)
        asked = list(site.paths)
        report_again = Ingestor(store, embedder, "acme", content=content, isolate_parsers=False).ingest_urls(
            [], ROOT, sitemap=f"{site.base}/map.xml", policy=LOCAL)
    shown = repr(report) + repr(report_again)
    assert "hunter2" not in shown and "ann:" not in shown
    assert "holds credentials (user:password@)" in shown and f"http://***@127.0.0.1:{site.port}/a.html" in shown
    assert report_again.documents == 1  # the URL without credentials, from the same sitemap
    assert asked == ["/robots.txt", "/moved"]  # nothing was asked of a URL with credentials
    uris = content.list("acme", ROOT)
    assert uris and not any("hunter2" in u or "ann" in u for u in uris)
    assert not any("hunter2" in (content.get("acme", u) or "") for u in uris)
