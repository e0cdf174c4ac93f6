"""Embedders: one interface; the local ONNX model is the embedded default."""

from .base import Embedder

__all__ = ["Embedder"]
