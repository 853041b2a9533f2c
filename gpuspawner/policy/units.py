"""Parsing of the quantities instructors write: sizes, durations and fractions.

Every parser raises ``ValueError`` with a sentence that says what is expected,
so catalog validation can show it next to the file, line and field.
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT])?(i?B?)?\s*$", re.IGNORECASE)
_POWERS = {"K": 1, "M": 2, "G": 3, "T": 4}

_DURATION_RE = re.compile(
    r"^\s*(?:(\d+)\s*h(?:ours?)?)?\s*(?:(\d+)\s*m(?:in(?:utes?)?)?)?\s*(?:(\d+)\s*s(?:ec(?:onds?)?)?)?\s*$",
    re.IGNORECASE,
)

SIZE_HINT = "a size with a unit, such as 512MiB, 6GiB or 10G (K, M, G and T are powers of 1024)"
DURATION_HINT = "a duration such as 10m, 90s or 1h30m (a bare number means minutes)"
FRACTION_HINT = "a fraction of a GPU greater than 0 and at most 1, such as 1/4, 0.25 or 25%"


def parse_size_bytes(value: object) -> int:
    """Return a size in bytes from ``"6GiB"``, ``"6G"``, ``"512Mi"`` or ``"1.5 GB"``.

    All units are binary (``G`` and ``GiB`` both mean 1024**3): it is what GPU
    vendors print, and mixing the two conventions confuses everyone.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected {SIZE_HINT}, got {value!r}")
    if isinstance(value, int | float):
        raise ValueError(f"expected {SIZE_HINT}; a bare number {value!r} has no unit")
    if not isinstance(value, str):
        raise ValueError(f"expected {SIZE_HINT}, got {value!r}")
    match = _SIZE_RE.match(value)
    if not match or not match.group(2):
        raise ValueError(f"expected {SIZE_HINT}, got {value!r}")
    number = float(match.group(1))
    size = int(number * 1024 ** _POWERS[match.group(2).upper()])
    if size <= 0:
        raise ValueError(f"expected a size greater than zero, got {value!r}")
    return size


def parse_size_mib(value: object) -> int:
    """Return a size in MiB (rounded up), the unit GPU sharing back ends use."""
    size = parse_size_bytes(value)
    return -(-size // 1024**2)


def parse_duration(value: object) -> timedelta:
    """Return a duration from ``"10m"``, ``"1h30m"``, ``"90s"`` or a number of minutes."""
    if isinstance(value, bool):
        raise ValueError(f"expected {DURATION_HINT}, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a duration that is not negative, got {value!r}")
        return timedelta(minutes=value)
    if isinstance(value, timedelta):
        return value
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected {DURATION_HINT}, got {value!r}")
    if value.strip().isdigit():
        return timedelta(minutes=int(value))
    match = _DURATION_RE.match(value)
    if not match or not any(match.groups()):
        raise ValueError(f"expected {DURATION_HINT}, got {value!r}")
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


def parse_fraction(value: object) -> Fraction:
    """Return a GPU fraction from ``"1/4"``, ``0.25``, ``"0.25"`` or ``"25%"``.

    Decimals are snapped to the nearest fraction with a denominator of at most
    100, so ``0.33`` stays ``33/100`` and ``"1/3"`` stays exact.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected {FRACTION_HINT}, got {value!r}")
    try:
        if isinstance(value, int | float):
            result = Fraction(value).limit_denominator(100)
        elif isinstance(value, str):
            text = value.strip()
            if text.endswith("%"):
                result = Fraction(text[:-1].strip()) / 100
            else:
                result = Fraction(text).limit_denominator(100) if "." in text else Fraction(text)
        else:
            raise ValueError
    except (ValueError, ZeroDivisionError, OverflowError):  # OverflowError: YAML's .inf
        raise ValueError(f"expected {FRACTION_HINT}, got {value!r}") from None
    if not 0 < result <= 1:
        raise ValueError(f"expected {FRACTION_HINT}, got {value!r}")
    return result


def format_mib(mib: int) -> str:
    """Render MiB the way people read GPU memory: ``6 GiB``, ``1.5 GiB``, ``512 MiB``."""
    if mib >= 1024:
        gib = mib / 1024
        return f"{gib:.0f} GiB" if gib == int(gib) else f"{gib:.1f} GiB"
    return f"{mib} MiB"


def format_bytes(size: int) -> str:
    """Render a byte count as GiB or MiB."""
    return format_mib(-(-size // 1024**2))


def format_fraction(fraction: Fraction) -> str:
    """``1/4``, ``1/2``, ``3/10``: the share as a person would say it."""
    if fraction.denominator == 1:
        return str(fraction.numerator)
    return f"{fraction.numerator}/{fraction.denominator}"
