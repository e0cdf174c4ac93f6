"""Retrievers: quick (one scoped search) and thinking (hierarchical)."""
