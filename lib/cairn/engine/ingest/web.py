"""Web sources: a list of URLs, or a sitemap, fetched through httpx with robots.txt respected.

Each page is parsed by the parser for its extension or, failing that, its ``Content-Type``
(HTML, PDF, Office files, ...), exactly as a file in a folder would be, and placed at
``{host}/{path}`` below the ingest root (``docs.example.com/guide/install.html``; a path ending in
``/`` becomes ``index.html``). Re-ingesting the same URLs syncs the tree like a folder does: pages
whose content did not change are neither embedded nor written again, pages no longer listed are
removed.

What is fetched (:class:`Fetcher`, one per ingest):

* only public addresses: every request's host — the URL's, each redirect's, each sitemap's and
  each robots.txt's — is resolved and checked before a connection, and the connection goes to the
  address checked (:mod:`cairn.engine.ingest.fetchguard`); internal hosts only where the operator allows
  them (``CAIRN_FETCH_ALLOW_HOSTS``);
* robots.txt of every host a URL, a redirect or a sitemap leads to, read once per host; a URL it
  disallows for our user agent is reported, never fetched;
* each sitemap once, however often sitemap indexes list it (indexes followed 3 levels deep);
* ``http``/``https`` URLs without credentials: a URL holding ``user:password@`` is refused (cairn
  never sends, stores or shows them; reports show ``***@``);
* within bounds: at most ``max_pages`` URLs, each response at most ``Limits.max_bytes`` (streamed,
  abandoned past it), redirects followed at most 5 times, a timeout per request, and one budget
  per ingest of HTTP requests and bytes (``CAIRN_FETCH_MAX_REQUESTS``, ``CAIRN_FETCH_MAX_BYTES``);
  what the budget leaves unfetched is reported.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

from cairn.core.errors import FetchRefused
from cairn.engine.ingest.fetchguard import Budget, FetchPolicy, GuardedTransport
from cairn.engine.ingest.parsers import parser_for
from cairn.engine.ingest.parsers.base import Limits
from cairn.engine.ingest.sources import Document, Rejected, read_file

USER_AGENT = "cairn-ingest/0.1 (+https://github.com/cairn)"
MAX_PAGES = 10_000
MAX_SITEMAP_DEPTH = 3
MAX_SITEMAP_BYTES = 50_000_000
MAX_REDIRECTS = 5
ROBOTS_BYTES = 500_000  # RFC 9309: at least 500 KiB parsed; the rest is ignored
ROBOTS_REFUSAL = "disallowed by the site's robots.txt; not fetched"
_EXT_BY_MIME = {"text/html": ".html", "application/xhtml+xml": ".html", "application/pdf": ".pdf", "text/plain": ".txt",
                "text/markdown": ".md"}


def redact(url: str) -> str:
    """``url`` with any credentials (``user:password@``) replaced by ``***@``: what reports show."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("@", 1)[-1] if "@" in url else url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def check_url(url: str) -> Any:
    """The :class:`httpx.URL` to fetch; :class:`FetchRefused` for a scheme other than http(s), a URL
    httpx cannot read, or credentials in the URL (never sent, never stored: refused)."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise FetchRefused(f"not fetched: not a valid URL ({exc})") from None
    if parsed.scheme not in ("http", "https"):
        raise FetchRefused("only http and https URLs are fetched")
    if parsed.userinfo:
        raise FetchRefused("not fetched: the URL holds credentials (user:password@), which cairn neither sends nor "
                           "stores; remove them (a page behind a login cannot be ingested by URL)")
    if not parsed.host:
        raise FetchRefused("not fetched: the URL has no host")
    return parsed


@dataclass(frozen=True)
class Page:
    body: bytes
    mime: str
    url: str  # after redirects


class HTTPStatus(ValueError):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class Fetcher:
    """One ingest's HTTP: every request through a :class:`~cairn.engine.ingest.fetchguard.GuardedTransport`
    (host checked, connection pinned), redirects followed here (each hop's URL checked again, and its
    host's robots.txt read), and one :class:`~cairn.engine.ingest.fetchguard.Budget` of requests and bytes
    for pages, robots.txt files and sitemaps together."""

    def __init__(self, policy: FetchPolicy | None = None, *, user_agent: str = USER_AGENT, timeout_s: float = 20.0,
                 verify: Any = True) -> None:
        import httpx

        self.policy = policy or FetchPolicy()
        self.budget = Budget(self.policy.max_requests, self.policy.max_bytes)
        self.user_agent = user_agent
        self.transport = GuardedTransport(self.policy, self.budget, verify=verify)
        self.client = httpx.Client(transport=self.transport, headers={"User-Agent": user_agent},  # type: ignore[arg-type]
                                   follow_redirects=False, timeout=timeout_s)
        self._robots: dict[str, RobotFileParser | None] = {}

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, url: str, limit: int, *, robots: bool = True, cut: bool = False) -> Page:
        """The page at ``url`` after at most 5 redirects; :class:`FetchRefused` (not fetched, and why),
        :class:`ValueError` (an HTTP error status, too large) or an ``httpx`` error."""
        for hop in range(MAX_REDIRECTS + 1):
            try:
                target = check_url(url)
                if robots and not self.allowed(target):
                    raise FetchRefused(ROBOTS_REFUSAL)
                location, page = self._one(target, limit, cut)
            except FetchRefused as exc:
                if hop:
                    raise FetchRefused(f"redirected to {redact(url)}: {exc.message}") from None
                raise
            if page is not None:
                return page
            url = urljoin(str(target), location)
        raise ValueError(f"more than {MAX_REDIRECTS} redirects")

    def _one(self, url: Any, limit: int, cut: bool) -> tuple[str, Page | None]:
        with self.client.stream("GET", url) as resp:
            if resp.is_redirect and resp.headers.get("location"):
                return resp.headers["location"], None
            if resp.status_code >= 400:
                raise HTTPStatus(resp.status_code)
            declared = resp.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > limit and not cut:
                raise ValueError(f"response is {int(declared):,} bytes; the limit is {limit:,}")
            body = bytearray()
            for part in resp.iter_bytes():
                self.budget.read(len(part))
                body += part
                if len(body) > limit:
                    if cut:
                        del body[limit:]
                        break
                    raise ValueError(f"response passed {limit:,} bytes; the limit")
            mime = resp.headers.get("content-type", "").split(";")[0].strip().lower()
            return "", Page(bytes(body), mime, str(url))

    def allowed(self, url: Any) -> bool:
        """robots.txt of ``url``'s origin (read once) allows our user agent; a missing file allows
        everything, an unreachable one (a server error) disallows the host (RFC 9309)."""
        origin = f"{url.scheme}://{url.netloc.decode('ascii')}"
        if origin not in self._robots:
            self._robots[origin] = self._load_robots(origin)
        rp = self._robots[origin]
        return True if rp is None else rp.can_fetch(self.user_agent, str(url))

    def _load_robots(self, origin: str) -> RobotFileParser | None:
        import httpx

        rp = RobotFileParser()
        try:
            page = self.get(origin + "/robots.txt", ROBOTS_BYTES, robots=False, cut=True)
        except HTTPStatus as exc:
            if exc.status < 500:
                return None
            rp.parse(["User-agent: *", "Disallow: /"])
            return rp
        except (httpx.HTTPError, ValueError):  # unreachable: disallow all
            rp.parse(["User-agent: *", "Disallow: /"])
            return rp
        rp.parse(page.body.decode("utf-8", "replace").splitlines())
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
    return (parts.netloc.rpartition("@")[2].replace(":", "_"), *segments)


def sitemap_urls(fetcher: Fetcher, url: str, *, limit: int = MAX_PAGES) -> tuple[list[str], list[Rejected]]:
    """The page URLs a sitemap (or a sitemap index, followed up to 3 levels) lists, and the sitemaps
    that could not be read. Each sitemap is fetched once, however often indexes list it."""
    import defusedxml.ElementTree as DET

    out: list[str] = []
    problems: list[Rejected] = []
    seen: set[str] = set()

    def visit(where: str, depth: int) -> None:
        if where in seen or len(out) >= limit:
            return
        seen.add(where)
        try:
            root = DET.fromstring(fetcher.get(where, MAX_SITEMAP_BYTES).body, forbid_dtd=True)
        except FetchRefused as exc:
            problems.append(Rejected(redact(where), f"sitemap {exc.message}"))
            return
        except Exception as exc:  # noqa: BLE001 - a bad sitemap is reported; the others still go on
            problems.append(Rejected(redact(where), f"sitemap could not be read: {type(exc).__name__}: {exc}"))
            return
        index = root.tag.rsplit("}", 1)[-1] == "sitemapindex"
        for loc in root.iter():
            if not (isinstance(loc.tag, str) and loc.tag.rsplit("}", 1)[-1] == "loc" and loc.text):
                continue
            target = urljoin(where, loc.text.strip())
            if not index:
                out.append(target)
            elif depth < MAX_SITEMAP_DEPTH:
                visit(target, depth + 1)
            if len(out) >= limit:
                return

    visit(url, 0)
    return out[:limit], problems


def read_urls(
    urls: Iterable[str], *, fetcher: Fetcher | None = None, policy: FetchPolicy | None = None,
    limits: Limits | None = None, runner: Any = None, max_pages: int = MAX_PAGES,
) -> Iterator[Document | Rejected]:
    """Fetch and parse each URL (robots.txt first); each page is a :class:`Document` placed at
    ``host/path``, or a :class:`Rejected` with the reason. ``fetcher`` (default: one for ``policy``)
    carries the budget and the robots.txt files read so far."""
    limits = limits or Limits()
    own = fetcher is None
    fetcher = fetcher or Fetcher(policy)
    seen: dict[tuple[str, ...], str] = {}
    try:
        for n, url in enumerate(dict.fromkeys(u.strip() for u in urls if u.strip())):
            if n >= max_pages:
                yield Rejected(redact(url), f"not fetched: at most {max_pages:,} pages per ingest")
                continue
            yield from _read_one(fetcher, url, limits, runner, seen)
    finally:
        if own:
            fetcher.close()


def _read_one(fetcher: Fetcher, url: str, limits: Limits, runner: Any,
              seen: dict[tuple[str, ...], str]) -> Iterator[Document | Rejected]:
    import httpx

    shown = redact(url)
    try:
        page = fetcher.get(url, limits.max_bytes)
    except FetchRefused as exc:
        yield Rejected(shown, exc.message)
        return
    except (httpx.HTTPError, ValueError) as exc:
        yield Rejected(shown, f"could not be fetched: {exc}")
        return
    path = _place(page.url, page.mime)
    if path in seen:
        yield Rejected(shown, f"is the same page as {seen[path]} (after redirects); ingested once")
        return
    seen[path] = shown
    suffix = _suffix_for(path[-1], page.mime)
    if suffix is None:
        yield Rejected(shown, f"unsupported content type {page.mime or '(none)'!r}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / ("page" + suffix)
        file.write_bytes(page.body)
        named = path if path[-1].lower().endswith(suffix) else path[:-1] + (Path(path[-1]).stem + suffix,)
        item = read_file(file, named, limits=limits, runner=runner, shown=shown)
    if isinstance(item, Document):
        item = Document(item.path, item.text, item.title, {**item.metadata, "source.url": page.url},
                        item.sections, item.notes)
    yield item


def _suffix_for(name: str, mime: str) -> str | None:
    """The extension whose parser reads this page: the name's own, else the first one for its MIME type."""
    from cairn.engine.ingest.parsers import PARSERS

    own = Path(name).suffix.lower()
    if own in PARSERS and (not mime or mime == "application/octet-stream" or mime in PARSERS[own].mime
                           or not any(mime in spec.mime for spec in PARSERS.values())):
        return own
    spec = parser_for("", mime)
    if spec is None:
        return own if own in PARSERS else None
    return next(ext for ext, s in PARSERS.items() if s is spec)
