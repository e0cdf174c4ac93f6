"""Walking a folder to ingest: only what it was given.

* Hidden files and folders (a name starting with ``.``) are skipped, as before.
* A symbolic link is followed only when its target lies inside the ingested folder; a link that
  leaves it (``docs/passwd.txt -> /etc/passwd``), a dangling link and a link loop are reported with
  the reason, never read.
* A folder reached twice (two links to it) is read once; a device, socket or pipe is reported.
* Files are later opened with ``O_NOFOLLOW`` (:func:`cairn.engine.ingest.parsers.base.read_bytes`), so a
  file swapped for a link between the walk and the read is refused too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FoundFile:
    path: Path  # the file to open (a link's target, resolved, inside the root)
    rel: tuple[str, ...]  # where it goes below the root (the name the user sees)
    shown: str  # the path as the user would write it (the link's own path for a link)


@dataclass(frozen=True)
class Skipped:
    source: str
    reason: str


def _inside(target: Path, root: Path) -> bool:
    return target == root or root in target.parents


def walk(root: Path) -> Iterator[FoundFile | Skipped]:
    """Every regular file under ``root`` (sorted by name), and every entry skipped with its reason."""
    if root.is_symlink() or not root.is_dir():
        real = root.resolve()
        if real.is_file():
            yield FoundFile(real, (root.name,), str(root))
        else:
            yield Skipped(str(root), "is not a regular file or folder")
        return
    real_root = root.resolve()
    seen: set[Path] = {real_root}
    yield from _walk_dir(root, real_root, real_root, (), seen, (real_root,))


def _walk_dir(
    shown_dir: Path, real_dir: Path, real_root: Path, rel: tuple[str, ...], seen: set[Path], chain: tuple[Path, ...]
) -> Iterator[FoundFile | Skipped]:
    try:
        entries = sorted(os.scandir(real_dir), key=lambda e: e.name)
    except OSError as exc:
        yield Skipped(str(shown_dir), f"cannot be listed: {exc.strerror or exc}")
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        shown = shown_dir / entry.name
        here = rel + (entry.name,)
        if entry.is_symlink():
            yield from _link(entry, shown, here, real_root, seen, chain)
        elif entry.is_dir(follow_symlinks=False):
            real = Path(entry.path)
            seen.add(real)
            yield from _walk_dir(shown, real, real_root, here, seen, chain + (real,))
        elif entry.is_file(follow_symlinks=False):
            yield FoundFile(Path(entry.path), here, str(shown))
        else:
            yield Skipped(str(shown), "is not a regular file (a device, socket or pipe)")


def _link(
    entry: os.DirEntry[str], shown: Path, here: tuple[str, ...], real_root: Path, seen: set[Path], chain: tuple[Path, ...]
) -> Iterator[FoundFile | Skipped]:
    try:
        pointed = os.readlink(entry.path)
    except OSError:
        pointed = "?"
    try:
        target = Path(entry.path).resolve(strict=True)
    except FileNotFoundError:
        yield Skipped(str(shown), f"is a dangling symbolic link (to {pointed!r}, which does not exist)")
        return
    except (RuntimeError, OSError):  # ELOOP: the link resolves to itself
        yield Skipped(str(shown), f"is a symbolic link loop (to {pointed!r})")
        return
    if not _inside(target, real_root):
        yield Skipped(
            str(shown),
            f"is a symbolic link to {str(target)!r}, outside the ingested folder: not followed "
            "(links are followed only inside the folder you ingest)",
        )
        return
    if target.is_dir():
        if target in chain:
            yield Skipped(str(shown), f"is a symbolic link loop (to {pointed!r}, a folder that contains the link)")
            return
        if target in seen:
            yield Skipped(str(shown), f"is a symbolic link to {pointed!r}, a folder that is already ingested")
            return
        seen.add(target)
        yield from _walk_dir(shown, target, real_root, here, seen, chain + (target,))
    elif target.is_file():
        yield FoundFile(target, here, str(shown))
    else:
        yield Skipped(str(shown), "is a symbolic link to something that is not a regular file")
