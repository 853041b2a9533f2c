"""Helpers every test folder shares (a test folder never imports another's test modules)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

WAIT = 120.0
"""How long a scenario waits for something before it fails: a bound for a broken test,
never a timing assertion."""


def until(check: Callable[[], T], what: str, *, timeout: float = WAIT, interval: float = 0.2) -> T:
    """Poll ``check`` until it returns something truthy, and return that; fail saying
    ``what`` never came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"gave up waiting for {what}")


async def eventually(
    check: Callable[[], Any | Awaitable[Any]], *, what: str, timeout: float = WAIT
) -> Any:
    """Poll ``check`` (plain or async) on the running loop until it returns something
    truthy, and return that; fail saying ``what`` never came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        await asyncio.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")
