"""Kubernetes resource quantities ("500m", "2", "16Gi", "1e3") as exact fractions."""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?\d+))?$"
)


class QuantityError(ValueError):
    """A string is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Return the exact value of a quantity; raise QuantityError if it is malformed."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise QuantityError(
            f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {value!r}"
        )
    number = Fraction(match["number"])
    if match["exp"] is not None:
        return number * Fraction(10) ** int(match["exp"])
    suffix = match["suffix"] or ""
    return number * (_BINARY.get(suffix) or _DECIMAL[suffix])


def is_integer_quantity(value: str | int | float) -> bool:
    """True if the quantity is a whole number (extended resources must be)."""
    try:
        return parse_quantity(value).denominator == 1
    except QuantityError:
        return False


def format_quantity(value: Fraction) -> str:
    """A short rendering for messages: whole numbers plainly, fractions in milli-units."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{round(value * 1000)}m"
