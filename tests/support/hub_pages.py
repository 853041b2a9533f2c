"""What a hub shows a person, read the way the tests need it: the spawn page's profile cards,
its error, and a user's server process environment."""

from __future__ import annotations

import html
import re
from pathlib import Path


def cards(page_text: str) -> dict[str, dict]:
    """The profile cards on a spawn page: id -> {available, status, text}."""
    found = {}
    for match in re.finditer(
        r'<label class="gpus-card[^"]*"\s+data-profile="([^"]+)" data-available="(\w+)">(.*?)</label>',
        page_text,
        re.S,
    ):
        status = re.search(r'class="gpus-line gpus-status"[^>]*>(.*?)</p>', match.group(3), re.S)
        found[match.group(1)] = {
            "available": match.group(2) == "true",
            "status": html.unescape(status.group(1).strip()) if status else "",
            "text": html.unescape(re.sub(r"<[^>]+>", " ", match.group(3))),
        }
    return found


def page_error(page_text: str) -> str:
    match = re.search(r'class="alert alert-danger"[^>]*>(.*?)</div>', page_text, re.S)
    if not match:
        match = re.search(r"alert-danger[^>]*>(.*?)</", page_text, re.S)
    return html.unescape(re.sub(r"\s+", " ", match.group(1))).strip() if match else ""


def process_environment(hub, user: str, server: str = "") -> dict[str, str]:
    """The real environment of a user's server process (pid from the spawner state)."""
    model = hub.api("GET", f"/users/{user}").json()
    state = model["servers"][server]["state"]
    raw = Path(f"/proc/{state['pid']}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
