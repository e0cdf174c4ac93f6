"""`cairn serve` serves the console's files at /console/: only those files, no key needed for them
(the API behind them still wants one), with a policy that lets the page load nothing else."""

from __future__ import annotations

import httpx
import pytest

from cairn.api import ApiKeys
from cairn.api.server import running
from cairn.app.services import Services
from cairn.console import files
from cairn.core.config import load_settings

pytestmark = pytest.mark.e2e
KEY = "console-serving-key-0123456789"


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("console-serving")
    services = Services(load_settings(env={"CAIRN_HOME": str(home)}), embedder=embedder)
    with running(services, ApiKeys({KEY: "acme"})) as url:
        yield url


def test_console_redirects_to_its_folder_and_serves_the_page_without_a_key(server):
    r = httpx.get(f"{server}/console")
    assert r.status_code == 308 and r.headers["location"] == "/console/"
    page = httpx.get(f"{server}/console/", follow_redirects=True)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="js/app.js">' in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert httpx.post(f"{server}/v1/find", json={"query": "x"}).status_code == 401  # the API still wants a key


def test_every_module_the_page_imports_is_served_as_javascript(server):
    modules = [name for name in files() if name.endswith(".js")]
    assert {"js/app.js", "js/api.js", "js/trace.js"} <= set(modules)
    for name in modules:
        r = httpx.get(f"{server}/console/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript"), name
        assert r.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("path", ["/console/__init__.py", "/console/%2e%2e/api/server.py", "/console/js/%2e%2e/%2e%2e/config.py",
                                  "/console/missing.js"])
def test_nothing_but_the_console_files_is_served(server, path):
    r = httpx.get(f"{server}{path}")
    assert r.status_code == 404
    assert "def " not in r.text and "import" not in r.text


def test_the_console_is_only_read(server):
    r = httpx.post(f"{server}/console/index.html", content=b"x")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"


def test_the_favicon_answers_without_a_key(server):
    r = httpx.get(f"{server}/favicon.ico")
    assert r.status_code == 200 and r.headers["content-type"] == "image/svg+xml" and r.text.startswith("<svg")


def test_files_come_gzipped_and_a_browser_revalidates_instead_of_downloading_again(server):
    r = httpx.get(f"{server}/console/js/app.js", headers={"accept-encoding": "gzip"})
    assert r.status_code == 200 and r.headers["content-encoding"] == "gzip"
    assert r.num_bytes_downloaded < len(files()["js/app.js"]) / 2  # what travelled, compressed
    assert r.content == files()["js/app.js"]  # httpx undid the gzip: the same bytes
    assert r.headers["cache-control"] == "no-cache" and r.headers["vary"] == "accept-encoding"
    again = httpx.get(f"{server}/console/js/app.js", headers={"if-none-match": r.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    plain = httpx.get(f"{server}/console/js/app.js", headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.content == files()["js/app.js"]
