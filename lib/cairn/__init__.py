"""cairn: context retrieval for AI agents.

The public entry points are :class:`cairn.pipeline.Cairn` (``Cairn.from_settings()``), the HTTP
client :class:`cairn.client.CairnClient` and the ``cairn`` command. The distribution is
``cairn-context`` on PyPI (``pip install 'cairn-context[local]'``); it installs the ``cairn`` package.
Heavy dependencies (onnxruntime, SDKs of vector stores, litellm) are imported lazily
by the one module that needs them, so importing ``cairn`` stays cheap.
"""

__version__ = "0.1.0"

DISTRIBUTION = "cairn-context"
"""The name cairn is installed by (``pip install 'cairn-context[docs]'``); the package imports as ``cairn``."""


def install_hint(extra: str) -> str:
    """The command that installs one optional extra, e.g. ``pip install 'cairn-context[docs]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
