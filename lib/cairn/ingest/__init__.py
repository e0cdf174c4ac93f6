"""Ingestion: sources → an L0/L1/L2 tree of context records → embedded and upserted.

Build a tree from Python::

    from cairn.ingest import DirTitleRule, Ingestor, LocalContentStore, read_beir, split_items
    docs, rejected = split_items(read_beir(Path("corpus_dir")))
    ingestor = Ingestor(store, embedder, "default", content=LocalContentStore(".cairn/content"),
                        title_rules=(DirTitleRule(2, "{entity_name}"),))  # folder titles from metadata
    report = ingestor.ingest(docs, "cairn://resources/corpus")

Ingest a folder of documents (PDF, HTML, Office, tables, code, ...; ``pip install 'cairn-context[docs]'``)::

    ingestor = Ingestor(store, embedder, "default", content=LocalContentStore(".cairn/content"),
                        chunking=ChunkingConfig(chunk_chars=1200, overlap_chars=150))
    report = ingestor.ingest_path(Path("handbook"), "cairn://resources/handbook")
    for r in report.rejected:
        print(r.source, r.reason)

Ingest every object under an S3 prefix (a boto3 client passed in, or the default session's)::

    report = ingestor.ingest_s3("docs-bucket", "handbook/", "cairn://resources/handbook", client=s3)
"""

from .chunking import Chunk, ChunkingConfig
from .content import ContentNotFound, ContentStore, LocalContentStore, S3ContentStore
from .fetchguard import FetchPolicy
from .parsers import ParseFailed, parser_for
from .parsers.base import Limits
from .reader import ReadResult, read
from .s3 import parse_s3_url, read_prefix
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

__all__ = [
    "Chunk",
    "ChunkingConfig",
    "ContentNotFound",
    "ContentStore",
    "DirTitleRule",
    "DirectorySummarizer",
    "Document",
    "ExtractiveSummarizer",
    "FetchPolicy",
    "IngestPayload",
    "IngestReport",
    "Ingestor",
    "LLMSummarizer",
    "Limits",
    "ParseFailed",
    "LocalContentStore",
    "ReadResult",
    "Rejected",
    "S3ContentStore",
    "context_root",
    "parse_s3_url",
    "parser_for",
    "read",
    "read_beir",
    "read_folder",
    "read_prefix",
    "split_items",
]
