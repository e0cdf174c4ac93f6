"""Directory summarizers: the L0 abstract and L1 overview of a directory, from its children.

:class:`ExtractiveSummarizer` is the embedded default (no model). :class:`LLMSummarizer` asks any
object with a ``complete(prompt, *, system=None, timeout_s=None, json=False) -> str`` method (the
``cairn.ports.llm`` clients) using the versioned prompt ``prompts/directory_summary.<version>.md``. Its
input is bounded (children listed up to a character budget), its output is validated and
bounded, and any failure falls back to the extractive summary — logged and counted, never silent.

A summarizer's ``version`` is part of every directory's content hash: switching summarizer or
prompt version re-summarizes the directories on the next ingest; otherwise an unchanged
directory is never sent to the model again.
"""

from __future__ import annotations

import json
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal, Protocol

from cairn.engine.ingest import summaries
from cairn.engine.ingest.summaries import ChildSummary

log = logging.getLogger("cairn.engine.ingest")

PROMPT_BUDGET_CHARS = 6000  # the children listing sent to the model
CHILD_LINE_CHARS = 300
INTRO_CHARS = 1500


@dataclass(frozen=True)
class DirectorySummary:
    abstract: str
    overview: str


class CompletesText(Protocol):
    def complete(
        self, prompt: str, *, system: str | None = None, timeout_s: float | None = None, json: bool = False
    ) -> str: ...


class DirectorySummarizer(ABC):
    """Writes a directory's abstract and overview from its children (bottom-up)."""

    version: str = "abstract"

    @abstractmethod
    def summarize_directory(
        self, title: str, children: Sequence[ChildSummary], *, intro: str | None = None, path: str = ""
    ) -> DirectorySummary: ...

    def summarize(
        self,
        kind: Literal["abstract", "overview"],
        title: str,
        children: Sequence[ChildSummary],
        *,
        intro: str | None = None,
    ) -> str:
        """One of the two texts; ``summarize_directory`` writes both at once (one model call)."""
        s = self.summarize_directory(title, children, intro=intro)
        return s.abstract if kind == "abstract" else s.overview


class ExtractiveSummarizer(DirectorySummarizer):
    """The abstract from a README's first sentences or the children's titles; the overview lists them."""

    version = "extractive-v1"

    def summarize_directory(
        self, title: str, children: Sequence[ChildSummary], *, intro: str | None = None, path: str = ""
    ) -> DirectorySummary:
        kids = list(children)
        name = path.rsplit("/", 1)[-1] if path else title
        abstract = summaries.directory_abstract(name, title, kids, intro)
        return DirectorySummary(abstract, summaries.directory_overview(title, abstract, kids))


def load_prompt(version: str = "v1") -> tuple[str, str]:
    """(system, user template) of ``prompts/directory_summary.<version>.md``."""
    text = (resources.files("cairn.engine.ingest") / "prompts" / f"directory_summary.{version}.md").read_text("utf-8")
    _, rest = text.split("=== system ===", 1)
    system, user = rest.split("=== user ===", 1)
    return system.strip(), user.strip()


def children_listing(children: Sequence[ChildSummary], budget: int = PROMPT_BUDGET_CHARS) -> str:
    """One line per child, each bounded, the whole bounded; says how many were left out."""
    lines: list[str] = []
    used = 0
    for n, c in enumerate(children):
        kind = "folder" if c.is_dir else "document"
        line = f"- {c.name} ({kind}): {c.title}" + (f" — {c.abstract}" if c.abstract and c.abstract != c.title else "")
        line = line[:CHILD_LINE_CHARS]
        if used + len(line) > budget:
            lines.append(f"- ... and {len(children) - n} more")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


_PLACEHOLDER = re.compile(r"\{(?:title|path|intro|count|children)\}")


class LLMSummarizer(DirectorySummarizer):
    """Summaries written by a language model, one call per directory, with an extractive fallback."""

    def __init__(
        self,
        llm: CompletesText,
        *,
        prompt_version: str = "v1",
        timeout_s: float = 30.0,
        fallback: DirectorySummarizer | None = None,
        max_calls: int | None = 500,
    ) -> None:
        """``max_calls`` bounds the model calls (and so the cost) of one summarizer: past it, the
        remaining directories get extractive summaries, and ``capped`` counts them."""
        self.llm = llm
        self.max_calls = max_calls
        self.capped = 0
        self.timeout_s = timeout_s
        self.system, self.template = load_prompt(prompt_version)
        self.version = f"llm-directory_summary.{prompt_version}"
        self.fallback = fallback or ExtractiveSummarizer()
        self.calls = 0
        self.fallbacks = 0

    def prompt(self, title: str, children: Sequence[ChildSummary], intro: str | None, path: str) -> str:
        fields = {
            "{title}": title,
            "{path}": path or title,
            "{intro}": f"Its README says:\n{intro.strip()[:INTRO_CHARS]}\n" if intro else "",
            "{count}": str(len(children)),
            "{children}": children_listing(children),
        }
        # one pass over the template: a value that holds "{children}" (a folder title, a README) stays literal
        return _PLACEHOLDER.sub(lambda m: fields.get(m.group(0), m.group(0)), self.template)

    def summarize_directory(
        self, title: str, children: Sequence[ChildSummary], *, intro: str | None = None, path: str = ""
    ) -> DirectorySummary:
        if self.max_calls is not None and self.calls >= self.max_calls:
            self.capped += 1
            return self.fallback.summarize_directory(title, children, intro=intro, path=path)
        self.calls += 1
        try:
            raw = self.llm.complete(
                self.prompt(title, children, intro, path), system=self.system, timeout_s=self.timeout_s, json=True
            )
            return _parse(raw)
        except Exception as exc:  # noqa: BLE001 - any failure of the model degrades to the extractive summary
            self.fallbacks += 1
            log.warning(
                "directory summary fell back to extractive",
                extra={"directory": path or title, "reason": f"{type(exc).__name__}: {exc}"[:300]},
            )
            return self.fallback.summarize_directory(title, children, intro=intro, path=path)


def _parse(raw: str) -> DirectorySummary:
    text = raw.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("{") :]
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("the model did not answer with a JSON object")
    data = json.loads(text[start : end + 1])
    abstract = str(data.get("abstract") or "").strip()
    overview = str(data.get("overview") or "").strip()
    if not abstract:
        raise ValueError("the model's answer has no 'abstract'")
    return DirectorySummary(
        abstract[: summaries.ABSTRACT_CHARS].rstrip(), (overview or abstract)[: summaries.OVERVIEW_CHARS].rstrip()
    )
