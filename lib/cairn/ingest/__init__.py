"""Ingestion: sources → an L0/L1/L2 tree of context records → embedded and upserted."""

from .service import IngestReport, Ingestor
from .sources import Document

__all__ = ["Document", "IngestReport", "Ingestor"]
