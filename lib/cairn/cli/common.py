"""What every ``cairn`` command shares: the composition root it builds, its principal, its progress lines."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from cairn.inprocess import Cairn

if TYPE_CHECKING:
    from cairn.app import Application, Principal
    from cairn.app.services import Services
    from cairn.inprocess import Cairn


def _progress(stage: str, done: int, total: int) -> None:
    if sys.stderr.isatty() or os.environ.get("CAIRN_PROGRESS") == "1":
        end = "\n" if done >= total else "\r"
        print(f"  {stage}: {done}/{total} records", end=end, file=sys.stderr, flush=True)


def _services(args: argparse.Namespace) -> Services:
    """The composition root for this command (services are built when first used)."""
    from cairn.app.services import Services
    from cairn.core.config import load_settings

    return Services(load_settings(home=args.home, tenant=args.tenant))


def _service(args: argparse.Namespace) -> Cairn:
    return Cairn(_services(args))


def _ops(args: argparse.Namespace) -> tuple[Application, Principal]:
    """The application layer and the CLI's principal: the tenant's admin (whoever runs the command
    owns the home it reads and writes)."""
    from cairn.app import Principal

    services = _services(args)
    return services.application, Principal(services.settings.tenant)


def _rate_progress() -> Any:
    """Progress on stderr with records/s and an ETA (on a terminal, or with CAIRN_PROGRESS=1)."""
    import time

    started: dict[str, float] = {}

    def report(stage: str, done: int, total: int) -> None:
        if not (sys.stderr.isatty() or os.environ.get("CAIRN_PROGRESS") == "1") or total <= 0:
            return
        t0 = started.setdefault(stage, time.perf_counter())
        elapsed = time.perf_counter() - t0
        rate = done / elapsed if elapsed > 0 and done else 0.0
        eta = f", ETA {(total - done) / rate:.0f}s" if rate and done < total else ""
        end = "\n" if done >= total else "\r"
        print(f"  {stage}: {done}/{total} records ({rate:.1f} records/s{eta})   ", end=end, file=sys.stderr, flush=True)

    return report
