"""Directory titles taken from the documents' metadata.

Some corpora name their folders with ids (``shop/17/review/3``) and keep the names in the
documents' metadata (``entity_name``, ``doc_type``). A directory's title and abstract are what the
global search matches before it descends, so a :class:`DirTitleRule` lets a directory take its
title from a template over the metadata that *every* document below it shares::

    DirTitleRule.parse("2={entity_name} ({domain})")          # depth 2 below the root
    DirTitleRule.parse("*/*/review=Reviews of {entity_name}")  # a glob over the relative path

Placeholders: any shared metadata key (dotted keys for nested objects, e.g.
``{review_metadata.traveler_type}``), ``{name}`` (the folder's own name) and ``{path}`` (its path
below the root). A rule whose keys are not shared by all the documents below a directory does not
apply to it; the first rule that applies wins; with none the title is the README heading or the name.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cairn.core.errors import RequestError
from cairn.core.models import MetadataValue

_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
MAX_TITLE_CHARS = 200


@dataclass(frozen=True)
class DirTitleRule:
    """``match`` is a depth below the ingest root (the root is 0) or a ``/``-separated glob over
    the directory's path below the root (one glob per segment)."""

    match: int | str
    template: str

    def __post_init__(self) -> None:
        if isinstance(self.match, int) and self.match < 0:
            raise RequestError(f"title rule depth must be 0 or more, got {self.match}")
        if not _PLACEHOLDER.search(self.template) and not self.template.strip():
            raise RequestError("title rule template is empty; e.g. '{entity_name} ({domain})'")

    @classmethod
    def parse(cls, spec: str) -> DirTitleRule:
        """``DEPTH=TEMPLATE`` or ``GLOB=TEMPLATE``, e.g. ``2={entity_name}`` or ``*/*/faq=FAQ of {entity_name}``."""
        if "=" not in spec:
            raise RequestError(
                f"title rule {spec!r} has no '='; write DEPTH=TEMPLATE or GLOB=TEMPLATE, "
                "e.g. '2={entity_name} ({domain})' or '*/*/review=Reviews of {entity_name}'"
            )
        left, template = spec.split("=", 1)
        left = left.strip()
        if not left:
            raise RequestError(f"title rule {spec!r} has nothing before '='; give a depth or a path glob")
        return cls(int(left) if left.isdigit() else left.strip("/"), template.strip())

    def matches(self, rel: Sequence[str]) -> bool:
        if isinstance(self.match, int):
            return len(rel) == self.match
        globs = self.match.split("/") if self.match else []
        return len(globs) == len(rel) and all(fnmatch.fnmatchcase(s, g) for s, g in zip(rel, globs))

    def render(self, rel: Sequence[str], metadata: Mapping[str, MetadataValue]) -> str | None:
        """The title, or None when a placeholder names a key the directory's documents do not share."""
        values: dict[str, str] = {"name": rel[-1] if rel else "", "path": "/".join(rel)}
        for key, value in metadata.items():
            values.setdefault(key, ", ".join(value) if isinstance(value, list) else str(value))
        missing = False

        def sub(m: re.Match[str]) -> str:
            nonlocal missing
            key = m.group(1).strip()
            if key not in values:
                missing = True
                return ""
            return values[key]

        out = _PLACEHOLDER.sub(sub, self.template).strip()
        return None if missing or not out else out[:MAX_TITLE_CHARS]


def title_for(rules: Sequence[DirTitleRule], rel: Sequence[str], metadata: Mapping[str, MetadataValue]) -> str | None:
    for rule in rules:
        if rule.matches(rel):
            title = rule.render(rel, metadata)
            if title:
                return title
    return None


def shared_metadata(
    current: dict[str, MetadataValue] | None, new: Mapping[str, MetadataValue]
) -> dict[str, MetadataValue]:
    """The metadata two sets share (same key, same value); ``None`` means "nothing seen yet"."""
    if current is None:
        return dict(new)
    return {k: v for k, v in current.items() if k in new and new[k] == v}
