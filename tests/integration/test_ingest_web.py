"""URL lists and sitemaps fetched from a local HTTP server: robots.txt respected, pages parsed like
files, re-ingesting unchanged pages embeds nothing."""

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from benchmarks.docs_corpus import write_html, write_pdf
from cairn.ingest import Ingestor, LocalContentStore
from cairn.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.integration
ROOT = "cairn://resources/site"


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
    report = ing.ingest_urls([], ROOT, sitemap=f"{base}/sitemap.xml")

    reasons = {r.source.rsplit("/", 1)[1]: r.reason for r in report.rejected}
    assert set(reasons) == {"secret.html", "gone.html"}
    assert "robots.txt" in reasons["secret.html"] and "HTTP 404" in reasons["gone.html"]
    assert not any(p.startswith("/private/") for p in requested)  # never fetched
    host = base.split("//", 1)[1].replace(":", "_")
    assert store.count("acme", {"uri": f"{ROOT}/{host}/report.pdf#1", "metadata.citation.page": 2}) == 1
    assert store.count("acme", {"uri": f"{ROOT}/{host}/guide.html", "metadata.source.format": "html"}) == 1
    assert store.count("acme", {"parent_uri": f"{ROOT}/{host}", "level": 2}) >= 3  # guide (1+) and report (2 pages)

    again = ing.ingest_urls([], ROOT, sitemap=f"{base}/sitemap.xml")
    assert again.embedded == 0 and again.unchanged == again.records > 0


def test_a_url_list_reports_what_is_not_http_and_what_is_not_parseable(site, tmp_path, embedder):
    base, _ = site
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    report = Ingestor(store, embedder, "acme", isolate_parsers=False).ingest_urls(
        [f"{base}/guide.html", "file:///etc/passwd", f"{base}/robots.txt"], ROOT
    )
    reasons = {r.source: r.reason for r in report.rejected}
    assert reasons == {"file:///etc/passwd": "only http and https URLs are fetched"}
    assert report.documents == 2  # the guide, and robots.txt as a text page
