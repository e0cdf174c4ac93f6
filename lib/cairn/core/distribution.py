"""What cairn is installed as: its version, its distribution's name, and how to add one extra."""

__version__ = "0.1.0"

DISTRIBUTION = "cairn-context"
"""The name cairn is installed by (``pip install 'cairn-context[docs]'``); the package imports as ``cairn``."""


def install_hint(extra: str) -> str:
    """The command that installs one optional extra, e.g. ``pip install 'cairn-context[docs]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
