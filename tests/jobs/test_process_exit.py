"""The executor learns that a runner ended from the process itself (a pidfd), not at its next
look: a wait returns as the process ends, whoever started it."""

from __future__ import annotations

import subprocess
import sys

from jupyter_to_job.executors.process_exit import ProcessExit

from ..support import WAIT

WAITS_FOR_INPUT = [sys.executable, "-c", "import sys; sys.stdin.read()"]


async def test_a_wait_ends_when_the_process_ends_and_not_before() -> None:
    # Given a process that runs until its input closes
    process = subprocess.Popen(WAITS_FOR_INPUT, stdin=subprocess.PIPE)
    ended = ProcessExit(process.pid)
    try:
        # While it runs, a short wait says it has not ended
        assert await ended.wait(0.05) is False
        assert process.poll() is None

        # When its input closes, the wait (however long it may be) returns: it has ended
        assert process.stdin is not None
        process.stdin.close()
        assert await ended.wait(WAIT) is True
        assert process.wait(WAIT) == 0
    finally:
        ended.close()
        if process.poll() is None:
            process.kill()
            process.wait()
