"""Parsers that misbehave on purpose, run by the isolated parser worker in the ingestion tests."""

from __future__ import annotations

from pathlib import Path


def loop_forever(path: Path, limits: object) -> object:
    while True:
        pass


def allocate_without_end(path: Path, limits: object) -> object:
    chunks = []
    while True:
        chunks.append(bytearray(50_000_000))
