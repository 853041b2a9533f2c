"""Expected refusals in the hub's log: one line at info level, not an error with a traceback.

Design notes: docs/design/hub.md, "gpuspawner.spawners.refusal_log".
"""

from __future__ import annotations

import logging
from collections import OrderedDict

import tornado.log

MARK = "gpuspawner_expected_refusal"
"""The attribute of a SpawnException that is an expected refusal: its reason code."""

_HUB_LOGGER = "JupyterHub"
"""The logger of JupyterHub's application, its handlers, users and spawners."""

_REMEMBERED = 512
"""Sentences of recent refusals kept, to know JupyterHub's own one-line error for them."""


class ExpectedRefusals(logging.Filter):
    """Turns JupyterHub's records of an expected refusal into one info line (see :func:`install`).

    JupyterHub logs a refused start as ``Not starting <user>'s server <name>: <sentence>``
    (an error), then, from the spawn form, ``Error starting server`` and the exception with
    its traceback, or, from the REST API, tornado's warning with the sentence. The first
    becomes an info line that names the refusal's code; the others say nothing more and
    are dropped. A record is known as a refusal's by the mark on its exception or by the
    sentence of a refusal made a moment ago.
    """

    def __init__(self) -> None:
        super().__init__()
        self._recent: OrderedDict[str, str] = OrderedDict()

    def remember(self, message: str, code: str) -> None:
        self._recent[message] = code
        self._recent.move_to_end(message)
        while len(self._recent) > _REMEMBERED:
            self._recent.popitem(last=False)

    def _code_of(self, record: logging.LogRecord) -> str | None:
        error = record.exc_info[1] if record.exc_info else None
        code = getattr(error, MARK, None)
        if code is not None:
            return str(code)
        text = record.getMessage()
        for message, code in reversed(self._recent.items()):
            if text.endswith(message):
                return code
        return None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.INFO or record.name != _HUB_LOGGER:
            return True
        code = self._code_of(record)
        if code is None:
            return True
        if not record.exc_info and record.getMessage().startswith("Not starting "):
            record.msg, record.args = f"{record.getMessage()} (refused: {code})", None
            record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
            return True
        return False


_FILTER = ExpectedRefusals()


def install() -> None:
    """Put the filter on the hub's loggers, once: its own (handlers, spawners) and tornado's
    application and general loggers, which JupyterHub renames to its own name and through
    which its users and tornado's error answers log (a logger's filters see only the
    records made on that logger, not those its children pass up)."""
    for logger in (logging.getLogger(_HUB_LOGGER), tornado.log.app_log, tornado.log.gen_log):
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def mark_expected(error: BaseException, code: str, message: str) -> None:
    """Mark ``error`` as the expected refusal ``code`` whose sentence is ``message``."""
    setattr(error, MARK, code)
    _FILTER.remember(message, code)
