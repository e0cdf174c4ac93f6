"""language_test: how often the evidence gate's language test (:func:`cairn.engine.retrieval.evidence.reads_as_language`)
reads random letters and real questions as language, with each embedded model's vocabulary.

* random strings: ``cairn.engine.retrieval.evidence.random_strings`` with the agent_day benchmark's seed
  (424242), 3, 7 and 100-119: 23,000 strings of 1-3 words of random letters (the target is none);
* the English chat turns of agent_day's help-centre, staff and product sets (223);
* questions in other languages: agent_day's ``languages`` set (Chinese and German) and
  :data:`OTHER_LANGUAGES`, written for this suite.

MiniLM (the default, English WordPiece) and multilingual-e5-small (SentencePiece, through its
engine's token count); no store, no search.

    python -m benchmarks.run language_test
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cairn.engine.retrieval.evidence import random_strings, reads_as_language, tokenizer_of

from .agent_day import load

SUITE = "language_test"
SEEDS = (424242, 3, 7, *range(100, 120))
OTHER_LANGUAGES = (
    "Wie lange dauert eine Rückerstattung?",
    "¿Cuánto tarda un reembolso?",
    "Combien coûte le parking pour les employés ?",
    "Quanto tempo dura o reembolso?",
    "Где можно оставить машину?",
    "駐車場はありますか？",
)


def run(data: Path, limit_queries: int | None = None) -> dict[str, Any]:
    from cairn.ports.embeddings.local import LocalEmbedder
    from cairn.ports.embeddings.local_e5 import LocalE5Embedder

    english = [t["u"] for name in ("helpdesk", "staff", "product") for c in load(name)[1]["conversations"] for t in c["turns"]]
    other = [t["u"] for c in load("languages")[1]["conversations"] for t in c["turns"]] + list(OTHER_LANGUAGES)
    strings = [s for seed in SEEDS for s in random_strings(1000, seed=seed)]
    out: dict[str, Any] = {"random_strings": len(strings), "english_turns": len(english), "other_language_questions": len(other)}
    for name, embedder in (("minilm", LocalEmbedder()), ("multilingual-e5-small", LocalE5Embedder())):
        tok = tokenizer_of(embedder)
        read = [s for s in strings if reads_as_language(s, tok)]
        out[name] = {
            "random_read_as_language": len(read),
            "random_read_as_language_examples": read[:5],
            "benchmark_seed_read_as_language": sum(reads_as_language(s, tok) for s in random_strings(1000, seed=424242)),
            "english_turns_read_as_language": sum(reads_as_language(t, tok) for t in english),
            "other_language_questions_read_as_language": sum(reads_as_language(t, tok) for t in other),
        }
        print(f"  {name}: {out[name]}", flush=True)
    return out
