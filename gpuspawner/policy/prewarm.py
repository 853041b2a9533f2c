"""Tokens that let the sessions service, and only it, start servers before a class opens.

The sessions service and the hub share a secret. A pre-warm request carries an
HMAC over who, which server, which course and which class; the spawner
recomputes it. A student who adds ``prewarm`` to a form or REST request cannot
forge the token, so cannot start early.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime


def prewarm_token(
    secret: str, username: str, server_name: str, profile_id: str, class_start: datetime
) -> str:
    """The token for one pre-warmed start."""
    message = f"{username}\n{server_name}\n{profile_id}\n{class_start.isoformat()}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify_prewarm_token(
    token: object,
    secret: str,
    username: str,
    server_name: str,
    profile_id: str,
    class_start: datetime,
) -> bool:
    """True only for a well-formed token made with ``secret`` for exactly this start."""
    if not secret or not isinstance(token, str) or len(token) != 64:
        return False
    expected = prewarm_token(secret, username, server_name, profile_id, class_start)
    return hmac.compare_digest(expected, token)
