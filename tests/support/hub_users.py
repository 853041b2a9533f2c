"""The user object a spawner is given when a test builds it without a hub."""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any
from unittest.mock import Mock

from jupyterhub.objects import Server


class HubUser(Mock):
    """A JupyterHub user as a spawner sees it: name, groups, admin flag and server."""

    server = Server()

    def __init__(
        self, name: str = "mock", groups: Iterable[str] = (), admin: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.name = name
        self.groups = [SimpleNamespace(name=group) for group in groups]
        self.admin = admin

    @property
    def escaped_name(self) -> str:
        return self.name

    @property
    def url(self) -> str:
        return self.server.url
