"""Ingestion: sources → an L0/L1/L2 tree of context records → embedded and upserted.

Build the DSTC11 tree from Python::

    from cairn.ingest import DirTitleRule, Ingestor, LocalContentStore, read_beir, split_items
    docs, rejected = split_items(read_beir(Path("../shared/data/dstc11_track5")))
    ingestor = Ingestor(store, embedder, "default", content=LocalContentStore(".cairn/content"),
                        title_rules=DSTC11_TITLE_RULES)  # leaf_title_rules=DSTC11_LEAF_TITLE_RULES: optional
    report = ingestor.ingest(docs, "cairn://resources/dstc11")
"""

from .content import ContentNotFound, ContentStore, LocalContentStore, S3ContentStore
from .reader import ReadResult, read
from .service import Ingestor, IngestReport
from .sources import (
    Document,
    IngestPayload,
    Rejected,
    context_root,
    read_beir,
    read_folder,
    split_items,
)
from .summarizer import DirectorySummarizer, ExtractiveSummarizer, LLMSummarizer
from .titles import DirTitleRule

# Directory titles for the DSTC11 track-5 corpus (domain / entity / faq|review / review id / sentence).
DSTC11_TITLE_RULES = (
    DirTitleRule(2, "{entity_name} ({domain})"),
    DirTitleRule("*/*/faq", "FAQ of {entity_name}"),
    DirTitleRule("*/*/review", "Reviews of {entity_name}"),
    DirTitleRule("*/*/review/*", "Review of {entity_name} by {review_metadata.traveler_type}"),
    DirTitleRule("*/*/review/*", "Review of {entity_name}"),
)

# Optional leaf titles that name the entity ("ACORN GUEST HOUSE — Is there parking?"), so that a
# leaf found by a flat search says whose it is.
DSTC11_LEAF_TITLE_RULES = (
    DirTitleRule("*/*/faq/*", "{entity_name} — {title}"),
    DirTitleRule("*/*/review/*/*", "{entity_name} — review: {title}"),
)

__all__ = [
    "DSTC11_LEAF_TITLE_RULES",
    "DSTC11_TITLE_RULES",
    "ContentNotFound",
    "ContentStore",
    "DirTitleRule",
    "DirectorySummarizer",
    "Document",
    "ExtractiveSummarizer",
    "IngestPayload",
    "IngestReport",
    "Ingestor",
    "LLMSummarizer",
    "LocalContentStore",
    "ReadResult",
    "Rejected",
    "S3ContentStore",
    "context_root",
    "read",
    "read_beir",
    "read_folder",
    "split_items",
]
