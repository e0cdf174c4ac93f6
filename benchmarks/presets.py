"""Per-data-set knowledge the library must not carry: title rules and word lists for the shared
benchmark collections. The library learns a tenant's domain from the tenant's content; a benchmark
passes these in as a user would (``Ingestor(title_rules=...)``, ``SessionRewritePlanner(stop_words=...)``).
"""

from __future__ import annotations

from cairn.engine.ingest import DirTitleRule

# Directory titles for the DSTC11 track-5 corpus (domain / entity / faq|review / review id / sentence).
DSTC11_TITLE_RULES = (
    DirTitleRule(2, "{entity_name} ({domain})"),
    DirTitleRule("*/*/faq", "FAQ of {entity_name}"),
    DirTitleRule("*/*/review", "Reviews of {entity_name}"),
    DirTitleRule("*/*/review/*", "Review of {entity_name} by {review_metadata.traveler_type}"),
    DirTitleRule("*/*/review/*", "Review of {entity_name}"),
)

# MTRAG (benchmarks/convert_mtrag.py): domain / source document / passage; a source document's folder
# carries the document's title, as a customer's folder of a web page or an article would
MTRAG_TITLE_RULES = (DirTitleRule(2, "{doc_title}"),)

# Optional leaf titles that name the entity ("ACORN GUEST HOUSE — Is there parking?"), so that a
# leaf found by a flat search says whose it is.
DSTC11_LEAF_TITLE_RULES = (
    DirTitleRule("*/*/faq/*", "{entity_name} — {title}"),
    DirTitleRule("*/*/review/*/*", "{entity_name} — review: {title}"),
)

# Words of the DSTC11 (hotel / restaurant booking) domain that are never entity names. The library's
# planner used to carry them for every tenant; a benchmark may pass them as extra stop words.
DSTC11_STOP_WORDS = frozenset(
    str.split(
        """
        gbp north south east west centre center cheap moderate expensive free wifi parking star stars
        hotel hotels restaurant restaurants guesthouse guesthouses guest house place internet wi-fi
        booking booked reference english british american indian chinese italian french spanish thai
        japanese korean mexican turkish european asian african mediterranean
        """
    )
)
