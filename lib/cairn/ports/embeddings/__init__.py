"""Embedders: one interface; the local ONNX model is the embedded default."""

from cairn.ports.embeddings.base import Embedder

__all__ = ["Embedder"]
