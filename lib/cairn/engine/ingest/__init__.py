"""Ingestion: sources → an L0/L1/L2 tree of context records → embedded and upserted.

Build a tree from Python::

    from cairn.engine.ingest import DirTitleRule, Ingestor, LocalContentStore, read_beir, split_items
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

from cairn.engine.ingest.chunking import Chunk, ChunkingConfig
from cairn.engine.ingest.fetchguard import FetchPolicy
from cairn.engine.ingest.parsers import ParseFailed, parser_for
from cairn.engine.ingest.parsers.base import Limits
from cairn.engine.ingest.reader import ReadResult, read
from cairn.engine.ingest.s3 import parse_s3_url, read_prefix
from cairn.engine.ingest.service import Ingestor, IngestReport
from cairn.engine.ingest.sources import (
    Document,
    IngestPayload,
    Rejected,
    context_root,
    read_beir,
    read_folder,
    split_items,
)
from cairn.engine.ingest.summarizer import DirectorySummarizer, ExtractiveSummarizer, LLMSummarizer
from cairn.engine.ingest.titles import DirTitleRule
from cairn.ports.content import ContentNotFound, ContentStore, LocalContentStore, S3ContentStore

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
