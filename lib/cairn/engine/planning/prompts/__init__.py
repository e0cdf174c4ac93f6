"""Versioned prompt files with declared variables, selected per model.

A prompt file is ``<name>.v<version>[.<variant>].md``: a front matter, then a ``# system``
section and a ``# user`` section. The front matter declares the variables (each used as
``{{variable}}``) and the models the file targets (glob patterns, ``*`` for any)::

    ---
    name: intent_analysis
    version: 1
    variables: [query, summary, recent_messages, context_types]
    models: ["*"]
    ---

Loading checks that the template uses exactly the declared variables; rendering checks that
every declared variable is given. Selection for a model takes the highest version, then the
variant whose model pattern matches most specifically (so a ``*mini*`` variant wins over ``*``
for ``gpt-4o-mini``).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from cairn.core.errors import ConfigError, PlanningError

_FILE = re.compile(r"^(?P<name>[a-z0-9_]+)\.v(?P<version>\d+)(?:\.(?P<variant>[a-z0-9_-]+))?\.md$")
_VAR = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
_SECTION = re.compile(r"^# (system|user)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    variant: str
    variables: tuple[str, ...]
    models: tuple[str, ...]
    system: str
    user: str

    @property
    def id(self) -> str:
        return f"{self.name}.v{self.version}" + (f".{self.variant}" if self.variant != "default" else "")

    def matches(self, model: str) -> int:
        """How specifically this prompt targets ``model``: 0 = not at all, 1 = by ``*``, 2+ = by name."""
        best = 0
        for pattern in self.models:
            if fnmatch.fnmatch(model.lower(), pattern.lower()):
                best = max(best, 1 if pattern == "*" else 1 + len(pattern.replace("*", "")))
        return best

    def render(self, **values: object) -> str:
        missing = [v for v in self.variables if v not in values]
        extra = [v for v in values if v not in self.variables]
        if missing or extra:
            raise PlanningError(
                f"prompt {self.id}: "
                + "; ".join(
                    p for p in (
                        f"missing variables {missing}" if missing else "",
                        f"undeclared variables {extra}" if extra else "",
                    ) if p
                )
                + f"; declared: {list(self.variables)}"
            )
        return _VAR.sub(lambda m: str(values[m.group(1)]), self.user)


def _front_matter(text: str, source: str) -> tuple[dict[str, str], str]:
    if not text.startswith("---\n"):
        raise ConfigError(f"prompt {source}: must start with a '---' front matter")
    head, sep, body = text[4:].partition("\n---\n")
    if not sep:
        raise ConfigError(f"prompt {source}: the front matter is not closed by '---'")
    meta = {}
    for line in head.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, colon, value = line.partition(":")
            if not colon:
                raise ConfigError(f"prompt {source}: front matter line {line!r} is not 'key: value'")
            meta[key.strip()] = value.strip()
    return meta, body


def _list(value: str) -> tuple[str, ...]:
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    return tuple(v.strip().strip("\"'") for v in value.split(",") if v.strip())


def parse_prompt(text: str, filename: str) -> Prompt:
    m = _FILE.match(filename)
    if not m:
        raise ConfigError(f"prompt file {filename!r}: name it <name>.v<version>[.<variant>].md")
    meta, body = _front_matter(text, filename)
    problems = []
    if meta.get("name") != m["name"]:
        problems.append(f"front matter name {meta.get('name')!r} differs from the file name {m['name']!r}")
    if meta.get("version") != m["version"]:
        problems.append(f"front matter version {meta.get('version')!r} differs from the file name v{m['version']}")
    variables = _list(meta.get("variables", ""))
    models = _list(meta.get("models", "*")) or ("*",)
    parts = _SECTION.split(body)
    sections = dict(zip(parts[1::2], (p.strip() for p in parts[2::2])))
    if "user" not in sections:
        problems.append("no '# user' section")
    user = sections.get("user", "")
    used = set(_VAR.findall(user))
    if _VAR.search(sections.get("system", "")):
        problems.append("the system section must not use variables (it is sent as it is)")
    if used - set(variables):
        problems.append(f"uses undeclared variables {sorted(used - set(variables))}")
    if set(variables) - used:
        problems.append(f"declares unused variables {sorted(set(variables) - used)}")
    if problems:
        raise ConfigError(f"prompt file {filename}: " + "; ".join(problems))
    return Prompt(m["name"], int(m["version"]), m["variant"] or "default", variables, models, sections.get("system", ""), user)


class PromptLibrary:
    """Every prompt file of a folder, validated at load."""

    def __init__(self, prompts: list[Prompt]) -> None:
        self.prompts = prompts

    @classmethod
    def from_folder(cls, folder: str | Path) -> PromptLibrary:
        folder = Path(folder)
        return cls([parse_prompt(f.read_text(encoding="utf-8"), f.name) for f in sorted(folder.glob("*.md"))])

    @classmethod
    def default(cls) -> PromptLibrary:
        return _default_library()

    def select(self, name: str, model: str = "", version: int | None = None) -> Prompt:
        """The prompt ``name`` for ``model``: the highest version (or ``version``), most specific variant."""
        candidates = [p for p in self.prompts if p.name == name and (version is None or p.version == version)]
        scored = [(p.version, p.matches(model or "*"), p) for p in candidates]
        scored = [s for s in scored if s[1] > 0]
        if not scored:
            have = sorted({p.id for p in self.prompts if p.name == name}) or sorted({p.name for p in self.prompts})
            raise ConfigError(f"no prompt {name!r} (version {version or 'latest'}) for model {model!r}; available: {have}")
        return max(scored, key=lambda s: (s[0], s[1]))[2]


@lru_cache(maxsize=1)
def _default_library() -> PromptLibrary:
    root = resources.files(__name__)
    prompts = [
        parse_prompt(entry.read_text(encoding="utf-8"), entry.name)
        for entry in sorted(root.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".md")
    ]
    return PromptLibrary(prompts)
