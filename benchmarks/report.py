"""The printed results: one table per benchmark, ours against the anchor of the same run."""

from __future__ import annotations

from dataclasses import dataclass, field

from .timing import Timing


@dataclass(frozen=True)
class Row:
    """One measured case: our timing and, where there is one, the anchor's."""

    case: str
    ours: Timing
    anchor: Timing | None = None

    @property
    def ratio(self) -> float | None:
        """Our median over the anchor's: below 1 means we are faster."""
        if self.anchor is None or self.anchor.median == 0:
            return None
        return self.ours.median / self.anchor.median


@dataclass
class Section:
    """What one benchmark reports."""

    title: str
    anchor: str
    """What the anchor is, in a few words ("none" if the benchmark has none)."""
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def duration(seconds: float) -> str:
    """``812 ns``, ``41.3 us``, ``2.47 ms`` or ``1.18 s``."""
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def render(section: Section) -> str:
    """The section as a fixed-width table followed by its notes."""
    header = ("case", "n", "median", "p95", "anchor median", "anchor p95", "ours/anchor")
    lines = []
    for row in section.rows:
        anchor = row.anchor
        ratio = row.ratio
        lines.append(
            (
                row.case,
                str(row.ours.count),
                duration(row.ours.median),
                duration(row.ours.p95),
                duration(anchor.median) if anchor else "-",
                duration(anchor.p95) if anchor else "-",
                f"{ratio:.2f}x" if ratio is not None else "-",
            )
        )
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]

    def line(cells: tuple[str, ...]) -> str:
        first, *rest = cells
        return "  ".join(
            [first.ljust(widths[0])] + [c.rjust(w) for c, w in zip(rest, widths[1:], strict=True)]
        )

    out = [f"== {section.title}", f"   anchor: {section.anchor}", line(header)]
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(cells) for cells in lines)
    out.extend(f"   {note}" for note in section.notes)
    return "\n".join(out)
