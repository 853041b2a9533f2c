"""Helpers every test folder shares (a test folder never imports another's test modules)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

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
