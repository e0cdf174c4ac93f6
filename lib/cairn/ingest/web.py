"""Web sources: a list of URLs, or a sitemap, fetched through httpx with robots.txt respected.

Each page is parsed by the parser for its extension or, failing that, its ``Content-Type``
(HTML, PDF, Office files, ...), exactly as a file in a folder would be, and placed at
``{host}/{path}`` below the ingest root (``docs.example.com/guide/install.html``; a path ending in
``/`` becomes ``index.html``). Re-ingesting the same URLs syncs the tree like a folder does: pages
whose content did not change are neither embedded nor written again, pages no longer listed are
removed.

Bounds: at most ``max_pages`` URLs, each response at most ``Limits.max_bytes`` (streamed, and
abandoned past it), a timeout per request, redirects followed at most 5 times, ``http``/``https``
only. A URL that robots.txt disallows for our user agent is reported, never fetched.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit
from urllib.robotparser import RobotFileParser

from .parsers import parser_for
from .parsers.base import Limits
from .sources import Document, Rejected, read_file

USER_AGENT = "cairn-ingest/0.1 (+https://github.com/cairn)"
MAX_PAGES = 10_000
MAX_SITEMAP_DEPTH = 3
_EXT_BY_MIME = {"text/html": ".html", "application/xhtml+xml": ".html", "application/pdf": ".pdf", "text/plain": ".txt",
                "text/markdown": ".md"}


class Robots:
    """robots.txt of each host, fetched once; a missing file allows everything, an unreachable one
    (a server error) disallows the host, as the robots exclusion standard (RFC 9309) says."""

    def __init__(self, client: Any, user_agent: str = USER_AGENT) -> None:
        self.client = client
        self.user_agent = user_agent
        self._parsers: dict[str, RobotFileParser | None] = {}

    def allowed(self, url: str) -> bool:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self._parsers:
            self._parsers[origin] = self._load(origin)
        rp = self._parsers[origin]
        return True if rp is None else rp.can_fetch(self.user_agent, url)

    def _load(self, origin: str) -> RobotFileParser | None:
        rp = RobotFileParser()
        try:
            resp = self.client.get(origin + "/robots.txt")
        except Exception:  # noqa: BLE001 - unreachable: treated as "disallow all" below
            rp.parse(["User-agent: *", "Disallow: /"])
            return rp
        if resp.status_code >= 500:
            rp.parse(["User-agent: *", "Disallow: /"])
            return rp
        if resp.status_code >= 400:
            return None
        rp.parse(resp.text[:500_000].splitlines())
        return rp


def _place(url: str, mime: str) -> tuple[str, ...]:
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if not segments or parts.path.endswith("/"):
        segments.append("index" + _EXT_BY_MIME.get(mime, ".html"))
    elif not Path(segments[-1]).suffix and mime in _EXT_BY_MIME:
        segments[-1] += _EXT_BY_MIME[mime]
    if parts.query:
        stem, dot, ext = segments[-1].rpartition(".")
        tag = hashlib.sha256(parts.query.encode()).hexdigest()[:8]
        segments[-1] = f"{stem}-{tag}.{ext}" if dot else f"{segments[-1]}-{tag}"
    return (parts.netloc.replace(":", "_"), *segments)


def _fetch(client: Any, url: str, limit: int) -> tuple[bytes, str, str]:
    """(body, MIME type, final URL); raises ValueError with a reason."""
    with client.stream("GET", url) as resp:
        if resp.status_code >= 400:
            raise ValueError(f"HTTP {resp.status_code}")
        declared = resp.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise ValueError(f"response is {int(declared):,} bytes; the limit is {limit:,}")
        body = bytearray()
        for part in resp.iter_bytes():
            body += part
            if len(body) > limit:
                raise ValueError(f"response passed {limit:,} bytes; the limit")
        mime = resp.headers.get("content-type", "").split(";")[0].strip().lower()
        return bytes(body), mime, str(resp.url)


def sitemap_urls(client: Any, url: str, *, limit: int = MAX_PAGES, depth: int = 0) -> list[str]:
    """The page URLs a sitemap (or a sitemap index, followed up to 3 levels) lists."""
    import defusedxml.ElementTree as DET

    body, _, _ = _fetch(client, url, 50_000_000)
    root = DET.fromstring(body, forbid_dtd=True)
    out: list[str] = []
    for loc in root.iter():
        if not (isinstance(loc.tag, str) and loc.tag.rsplit("}", 1)[-1] == "loc" and loc.text):
            continue
        target = urljoin(url, loc.text.strip())
        if root.tag.rsplit("}", 1)[-1] == "sitemapindex":
            if depth < MAX_SITEMAP_DEPTH:
                out += sitemap_urls(client, target, limit=limit - len(out), depth=depth + 1)
        else:
            out.append(target)
        if len(out) >= limit:
            break
    return out[:limit]


def read_urls(
    urls: Iterable[str], *, client: Any = None, limits: Limits | None = None, runner: Any = None,
    user_agent: str = USER_AGENT, max_pages: int = MAX_PAGES, timeout_s: float = 20.0,
) -> Iterator[Document | Rejected]:
    """Fetch and parse each URL (robots.txt first); each page is a :class:`Document` placed at
    ``host/path``, or a :class:`Rejected` with the reason."""
    import httpx

    limits = limits or Limits()
    own = client is None
    client = client or httpx.Client(
        headers={"User-Agent": user_agent}, follow_redirects=True, max_redirects=5, timeout=timeout_s
    )
    robots = Robots(client, user_agent)
    seen: dict[tuple[str, ...], str] = {}
    try:
        for n, url in enumerate(dict.fromkeys(u.strip() for u in urls if u.strip())):
            if n >= max_pages:
                yield Rejected(url, f"not fetched: at most {max_pages:,} pages per ingest")
                continue
            if urlsplit(url).scheme not in ("http", "https"):
                yield Rejected(url, "only http and https URLs are fetched")
                continue
            if not robots.allowed(url):
                yield Rejected(url, "disallowed by the site's robots.txt; not fetched")
                continue
            try:
                body, mime, final = _fetch(client, url, limits.max_bytes)
            except (httpx.HTTPError, ValueError) as exc:
                yield Rejected(url, f"could not be fetched: {exc}")
                continue
            path = _place(final, mime)
            if path in seen:
                yield Rejected(url, f"is the same page as {seen[path]} (after redirects); ingested once")
                continue
            seen[path] = url
            suffix = _suffix_for(path[-1], mime)
            if suffix is None:
                yield Rejected(url, f"unsupported content type {mime or '(none)'!r}")
                continue
            with tempfile.TemporaryDirectory() as tmp:
                file = Path(tmp) / ("page" + suffix)
                file.write_bytes(body)
                item = read_file(file, path[:-1] + (Path(path[-1]).stem + suffix,) if not path[-1].lower().endswith(suffix) else path,
                                 limits=limits, runner=runner, shown=url)
            if isinstance(item, Document):
                item = Document(item.path, item.text, item.title, {**item.metadata, "source.url": final},
                                item.sections, item.notes)
            yield item
    finally:
        if own:
            client.close()


def _suffix_for(name: str, mime: str) -> str | None:
    """The extension whose parser reads this page: the name's own, else the first one for its MIME type."""
    from .parsers import PARSERS

    own = Path(name).suffix.lower()
    if own in PARSERS and (not mime or mime == "application/octet-stream" or mime in PARSERS[own].mime
                           or not any(mime in spec.mime for spec in PARSERS.values())):
        return own
    spec = parser_for("", mime)
    if spec is None:
        return own if own in PARSERS else None
    return next(ext for ext, s in PARSERS.items() if s is spec)
