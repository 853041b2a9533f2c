"""A notebook cell that trains with a checkpoint, for the checkpoint-and-resume scenarios
(local processes and Kubernetes alike)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from . import eventually
from .notebooks import wait_for_file


def training_cell(hold_at: int) -> str:
    """Twenty steps with a checkpoint after each, resuming from the checkpoint there is.

    Each attempt marks its start (``attempt-<n>`` in the checkpoint folder); the first holds
    after step ``hold_at`` (it writes ``held-1`` there) until the test takes it away. Every
    step's number goes once into ``steps.txt`` beside the checkpoint; the sum of the steps
    is printed at the end.
    """
    return (
        "import json, os, pathlib, time\n"
        "folder = pathlib.Path(os.environ['JUPYTER_TO_JOB_CHECKPOINT_DIR'])\n"
        "attempt = int(os.environ['JUPYTER_TO_JOB_ATTEMPT'])\n"
        "checkpoint = folder / 'state.json'\n"
        "state = json.loads(checkpoint.read_text()) if checkpoint.exists() "
        "else {'step': 0, 'total': 0}\n"
        "(folder / f'attempt-{attempt}').touch()\n"
        "print(f'attempt {attempt} starts after step {state[\"step\"]}', flush=True)\n"
        "while state['step'] < 20:\n"
        "    step = state['step'] + 1\n"
        "    with open(folder / 'steps.txt', 'a') as steps:\n"
        "        steps.write(f'{step}\\n')\n"
        "    state = {'step': step, 'total': state['total'] + step}\n"
        "    (folder / 'state.tmp').write_text(json.dumps(state))\n"
        "    (folder / 'state.tmp').replace(checkpoint)\n"
        f"    if step == {hold_at} and attempt == 1:\n"
        "        (folder / 'held-1').touch()\n"
        "        while True:\n"
        "            time.sleep(0.05)\n"
        "    time.sleep(0.01)\n"
        "print(f'total {state[\"total\"]}')\n"
    )


def attempt_noting_cell(gate: Path) -> str:
    """A cell that adds its attempt number to ``held.txt`` in its checkpoint folder, then
    waits for ``gate`` (which the tests never make) until it is taken away."""
    return (
        "import os, pathlib\n"
        "folder = pathlib.Path(os.environ['JUPYTER_TO_JOB_CHECKPOINT_DIR'])\n"
        "with open(folder / 'held.txt', 'a') as f:\n"
        "    f.write(os.environ['JUPYTER_TO_JOB_ATTEMPT'] + '\\n')\n" + wait_for_file(gate)
    )


async def take_away_two_attempts(held: Path, take_away: Callable[[], Awaitable[None]]) -> None:
    """Wait for attempt 1 to note itself in ``held`` (see :func:`attempt_noting_cell`) and
    ``take_away`` it (kill, evict), then the same for attempt 2."""

    def attempts_held() -> list[str]:
        return held.read_text().split() if held.exists() else []

    await eventually(lambda: attempts_held() == ["1"], what="the first attempt to run")
    await take_away()
    await eventually(lambda: attempts_held() == ["1", "2"], what="the second attempt to run")
    await take_away()
