"""cairn: context retrieval for AI agents.

The public entry points are :func:`cairn.pipeline.find` and the ``cairn`` command.
Heavy dependencies (onnxruntime, SDKs of vector stores, litellm) are imported lazily
by the one module that needs them, so importing ``cairn`` stays cheap.
"""

__version__ = "0.1.0"
