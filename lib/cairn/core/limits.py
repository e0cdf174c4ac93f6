"""A rate limit as the settings write it: ``N/period`` (``"20/second, 100000/day"``), parsed and checked.

The counting lives with the counters (:mod:`cairn.ports.ratelimit`); the settings check their
limits here, with nothing below them to import.
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn.core.errors import ConfigError

PERIODS: dict[str, int] = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_UNITS = {**{p: p for p in PERIODS}, **{p + "s": p for p in PERIODS}, "s": "second", "sec": "second",
          "min": "minute", "m": "minute", "h": "hour", "hr": "hour", "d": "day"}
NONE = ("", "none", "unlimited", "off")


@dataclass(frozen=True)
class Limit:
    """At most ``count`` requests per ``period``."""

    count: int
    period: str

    @property
    def seconds(self) -> int:
        return PERIODS[self.period]

    def __str__(self) -> str:
        return f"{self.count}/{self.period}"


def parse_limits(text: str, *, setting: str) -> tuple[Limit, ...]:
    """``"20/second, 100000/day"`` as limits, shortest period first; ``""`` or ``"none"``: none.
    A ConfigError names the setting, the bad item and the form allowed."""
    if text.strip().lower() in NONE:
        return ()
    limits: dict[str, Limit] = {}
    for item in (i.strip() for i in text.split(",")):
        number, sep, unit = item.partition("/")
        period = _UNITS.get(unit.strip().lower())
        count = number.strip().replace("_", "")
        if not sep or period is None or not count.isdigit() or int(count) < 1:
            raise ConfigError(f"{setting}: {item!r} is not a limit; write COUNT/PERIOD with a whole COUNT >= 1 and a "
                              f"PERIOD of {', '.join(PERIODS)} (e.g. \"20/second, 100000/day\"), or \"none\"")
        if period in limits:
            raise ConfigError(f"{setting}: two limits per {period} ({limits[period]} and {item}); keep one")
        limits[period] = Limit(int(count), period)
    return tuple(sorted(limits.values(), key=lambda lim: lim.seconds))
