"""Timing helpers: per-call samples with time.perf_counter, summarised as median and p95."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Warm-up calls before recording (fewer when they are slow); they also size the rounds.
WARMUP_CALLS = 5


@dataclass(frozen=True)
class Timing:
    """Per-call durations of one measured operation, in seconds."""

    samples: tuple[float, ...]

    @property
    def count(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _rounds(warmup_seconds: float, warmup_calls: int, calls_per_round: int, budget: float) -> int:
    per_round = warmup_seconds / max(warmup_calls, 1) * calls_per_round
    return max(1, min(50, int(budget / per_round) if per_round > 0 else 50))


def time_calls(call: Callable[[Any], object], inputs: Sequence[Any], budget: float) -> Timing:
    """Time ``call(x)`` for every ``x`` of ``inputs``, round after round, for about ``budget`` s.

    A few unrecorded calls first warm caches (imports, template compilation), so
    the samples show the steady state of a running hub; at least one full round
    is always recorded.
    """
    clock = time.perf_counter
    start = clock()
    warmed = 0
    for item in inputs[:WARMUP_CALLS]:
        call(item)
        warmed += 1
        if clock() - start > budget / 10:
            break
    rounds = _rounds(clock() - start, warmed, len(inputs), budget)
    gc.collect()
    samples = []
    for _ in range(rounds):
        for item in inputs:
            start = clock()
            call(item)
            samples.append(clock() - start)
    return Timing(tuple(samples))


async def time_async_calls(
    call: Callable[[Any], Awaitable[object]], inputs: Sequence[Any], budget: float
) -> Timing:
    """:func:`time_calls` for coroutines, awaited one at a time on the running loop."""
    clock = time.perf_counter
    start = clock()
    warmed = 0
    for item in inputs[:WARMUP_CALLS]:
        await call(item)
        warmed += 1
        if clock() - start > budget / 10:
            break
    rounds = _rounds(clock() - start, warmed, len(inputs), budget)
    gc.collect()
    samples = []
    for _ in range(rounds):
        for item in inputs:
            start = clock()
            await call(item)
            samples.append(clock() - start)
    return Timing(tuple(samples))


def time_once(call: Callable[[], object], repeats: int) -> Timing:
    """Time ``call()`` ``repeats`` times with no warm-up (one-off work such as loading a file)."""
    samples = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return Timing(tuple(samples))
