"""GPU-hour budgets and named terms, as instructors and admins write them in the catalog.

Design notes: docs/design/policy.md, "gpuspawner.policy.budget_spec".
"""

from __future__ import annotations

from datetime import date
from fractions import Fraction
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator
from pydantic.functional_validators import AfterValidator

from .units import format_fraction


def parse_gpu_hours(value: object) -> Fraction:
    """``6``, ``2.5`` or ``"1/2"`` GPU-hours as an exact fraction above zero."""
    amount: Fraction | None = None
    if isinstance(value, bool):
        amount = None
    elif isinstance(value, int):
        amount = Fraction(value)
    elif isinstance(value, float):
        amount = Fraction(repr(value))  # 2.5 as written, not its binary neighbour
    elif isinstance(value, str):
        try:
            amount = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            amount = None
    if amount is None or amount <= 0:
        raise ValueError(
            f"expected a number of GPU-hours above zero, such as 6 or 2.5, got {value!r}"
        )
    if amount > 1_000_000:
        raise ValueError(f"expected at most 1000000 GPU-hours, got {value!r}")
    return amount


GPUHours = Annotated[Fraction, BeforeValidator(parse_gpu_hours)]


def format_gpu_hours(amount: Fraction, places: int = 1, *, down: bool = False) -> str:
    """``6.0``, ``2.5``, ``0.1``: GPU-hours rounded (half up, or ``down``) to ``places``
    decimals. What is left is rounded down: never promise more than there is."""
    scale = 10**places
    rounded = amount * scale // 1 if down else (amount * scale * 2 + 1) // 2  # exact
    whole, part = divmod(int(rounded), scale)
    return f"{whole}.{part:0{places}d}" if places else str(whole)


def budget_text(amount: Fraction) -> str:
    """A budget as written: ``6``, ``2.5``, ``1/3``."""
    if amount.denominator == 1:
        return str(amount.numerator)
    decimal = format_gpu_hours(amount, 2).rstrip("0").rstrip(".")
    return decimal if Fraction(decimal) == amount else format_fraction(amount)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class CourseBudget(_Spec):
    """A course's GPU-hours per student per week (Monday 00:00 in the course's zone)."""

    gpu_hours_per_student_per_week: GPUHours


class ResearchBudget(_Spec):
    """A research allocation's GPU-hours, all holders together, from starts to expires."""

    gpu_hours_per_term: GPUHours


def _check_term_name(value: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 64:
        raise ValueError(f"expected a short term name such as autumn-2026, got {value!r}")
    return value.strip()


class NamedTerm(_Spec):
    """A term for usage reports: its name and its first and last day (both included)."""

    name: Annotated[str, AfterValidator(_check_term_name)]
    first_day: date
    last_day: date

    @model_validator(mode="after")
    def _ordered(self) -> NamedTerm:
        if self.first_day > self.last_day:
            raise ValueError(
                f"the term's first_day ({self.first_day}) comes after its last_day "
                f"({self.last_day})"
            )
        return self
