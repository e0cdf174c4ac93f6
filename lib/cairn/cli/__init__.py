"""The ``cairn`` command: :mod:`cairn.cli.main` (its parser and commands), :mod:`cairn.cli.access`
(keys and principals), :mod:`cairn.cli.demo`, :mod:`cairn.cli.output` and :mod:`cairn.cli.common`."""

from typing import Any


def __getattr__(name: str) -> Any:
    """``from cairn.cli import main`` (the console script's former entry point)."""
    if name == "main":
        from cairn.cli.main import main

        return main
    raise AttributeError(f"module 'cairn.cli' has no attribute {name!r}")
