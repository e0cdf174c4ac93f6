"""Observability: retrieval statistics, metric names, structured logs.

Import the submodule you need (``cairn.ports.observability.stats``, ``.metrics``, ``.logging``);
none of them imports Powertools until it emits something.
"""
