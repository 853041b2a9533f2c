"""The in-job notebook runner: ``python -m jupyter_to_job.runner --job-dir DIR``.

Design notes: docs/design/jobs.md, "jupyter_to_job.runner".
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .models import JobErrorInfo, JobStatus
from .pod_rank import ATTEMPT_VARIABLE, CHECKPOINT_VARIABLE, count_attempt, sends_outputs
from .runfiles import (
    EXIT_COMPLETED,
    EXIT_FAILED,
    EXIT_INVALID_JOB,
    EXIT_STOPPED,
    PIPELINE_DIR_VARIABLE,
    STATUS_MARKER,
    JobFiles,
    RunnerSpec,
    RunnerStatus,
    atomic_write_text,
    compact_status,
    read_spec,
    write_model,
)

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from .notebook_client import JobNotebookClient
    from .warm_start import WarmKernel

DEFAULT_KERNEL = "python3"
_Outcome = tuple[JobStatus, int, str, JobErrorInfo | None]
_EARLY_EXIT_VALUES = ("", "0", "None")
INJECTED_TAG = "injected-parameters"
"""papermill's tag on the cell it adds with the job's parameters."""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JobLog:
    """The job's log file, written through an append-only descriptor.

    Each write is one ``write(2)`` on an ``O_APPEND`` descriptor, so lines from
    the runner and from the executor (which appends the process's stdout and
    stderr to the same file) never overwrite each other. There is one write per
    output message, not per line: the kernel already gathers what a cell prints
    (about 0.2 s of it) into one message, and the ``[cell N]`` prefixes are put in
    with one string operation over the whole message.

    What a kill of the runner keeps: every whole line of every message handled
    before the kill, in order, each line once; nothing is buffered but a line a
    cell has not ended yet. That unfinished line is written when the cell ends it,
    when the cell or the writer changes (then it is ended with a newline), at
    :meth:`close`, or after ``partial_delay`` seconds (a progress bar that redraws
    itself with ``\\r`` is shown while it runs). So a killed runner leaves whole
    lines, and at most the last one without its newline, holding only what the
    cell printed.
    """

    def __init__(self, path: Path, *, max_bytes: int, partial_delay: float = 0.5):
        if str(path) == "-":
            # The executor opened the log for us (stdout, O_APPEND): a job that runs as its
            # owner has no right to open the service's log file by name.
            self._fd = os.dup(1)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        self._max_bytes = max_bytes
        self._partial_delay = partial_delay
        self._written = 0
        self._capped = False
        self._at_line_start = True
        self._line_owner: object = None
        self._unfinished = ""
        """The start of a line not ended yet, prefixed, not yet written."""
        self._unfinished_timer: asyncio.TimerHandle | None = None

    def cell(self, index: int, text: str) -> None:
        """Output of cell ``index``; partial lines continue where they stopped."""
        if self._capped:
            return
        if self._written + len(self._unfinished) + len(text) > self._max_bytes:
            self._capped = True
            self.job(
                f"the log reached its limit of {self._max_bytes // (1024 * 1024)} MiB; "
                "further cell output is kept only in the output notebook"
            )
            return
        self._write(f"[cell {index}] ", text, owner=index)

    def job(self, line: str) -> None:
        """One line from the runner itself."""
        self._write("[job] ", line.rstrip("\n") + "\n", owner="job")

    def flush(self) -> None:
        """Write the unfinished line too (as it is, without a newline)."""
        if self._unfinished_timer is not None:
            self._unfinished_timer.cancel()
            self._unfinished_timer = None
        if self._unfinished:
            data, self._unfinished = self._unfinished, ""
            self._append(data)

    def close(self) -> None:
        self.flush()
        os.close(self._fd)

    def _write(self, prefix: str, text: str, *, owner: object) -> None:
        if not text:
            return
        parts = [self._unfinished]
        if not self._at_line_start and owner != self._line_owner:
            parts.append("\n")  # another writer: end the line it left unfinished
            self._at_line_start = True
        if self._at_line_start:
            parts.append(prefix)
        # Every newline but a last one starts a prefixed line.
        body = text[:-1].replace("\n", "\n" + prefix) + text[-1] if "\n" in text[:-1] else text
        parts.append(body)
        self._at_line_start = text.endswith("\n")
        self._line_owner = owner
        data = "".join(parts)
        end = data.rfind("\n") + 1
        self._unfinished = data[end:]
        if end:
            self._append(data[:end])
        if self._unfinished:
            self._flush_later()
        elif self._unfinished_timer is not None:
            self._unfinished_timer.cancel()
            self._unfinished_timer = None

    def _flush_later(self) -> None:
        if self._unfinished_timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop to come back: write it now
            self.flush()
            return
        self._unfinished_timer = loop.call_later(self._partial_delay, self.flush)

    def _append(self, text: str) -> None:
        data = text.encode("utf-8", errors="replace")
        self._written += len(data)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]


class _LogHandler(logging.Handler):
    """Warnings from nbclient and jupyter_client go to the job log as ``[job]`` lines."""

    def __init__(self, log: JobLog):
        super().__init__(logging.WARNING)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        self._log.job(record.getMessage())


def _executable(cell: Any, skip_tag: str) -> bool:
    return (
        cell.cell_type == "code"
        and bool(cell.source.strip())
        and skip_tag not in cell.metadata.get("tags", [])
    )


class NotebookRun:
    """One execution of one job's notebook."""

    warm_kernel: WarmKernel | None = None
    """A kernel started before the job came (a warm start), used when it is the job's."""

    def __init__(self, files: JobFiles, spec: RunnerSpec, log: JobLog):
        self.files = files
        self.spec = spec
        self.log = log
        self.status = RunnerStatus(
            job_id=spec.job_id,
            state=JobStatus.RUNNING,
            runner_pid=os.getpid(),
            start_time=utc_now(),
        )
        self.stop_reason: str | None = None
        self._interrupting: asyncio.Future[None] | None = None
        self.nb: NotebookNode | None = None
        self.client: JobNotebookClient | None = None
        self._logger = logging.getLogger(f"jupyter_to_job.runner.{spec.job_id}")
        self._logger.propagate = False

    # -- reporting -------------------------------------------------------------------

    def report(self, **changes: Any) -> None:
        self.status = self.status.model_copy(update={**changes, "update_time": utc_now()})
        write_model(self.files.status, self.status)

    def save(self) -> None:
        """Write the executed notebook as it is now (atomically)."""
        import nbformat

        if self.nb is None:
            return
        # Outputs stay one string each (nbformat allows that) rather than a list of lines:
        # a cell that printed 200,000 lines saves in a tenth of the time.
        text = nbformat.writes(self.nb, split_lines=False)
        atomic_write_text(self.files.output("ipynb"), text)
        if self.client is not None:
            self.client.unsaved_output = False

    def export_html(self) -> None:
        if self.nb is None or "html" not in self.spec.output_formats:
            return
        try:
            from nbconvert import HTMLExporter

            body, _ = HTMLExporter().from_notebook_node(self.nb)
            atomic_write_text(self.files.output("html"), body)
        except Exception as error:  # the notebook itself is saved; HTML is a convenience
            self.log.job(f"could not export HTML: {error}")

    # -- stopping -----------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        """Interrupt the running cell and stop after it (signal handler)."""
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        self.log.job(f"stop requested ({reason}); interrupting the kernel")
        if self.client is not None:
            self._interrupting = asyncio.ensure_future(self.client.interrupt())

    # -- the run ------------------------------------------------------------------------

    async def execute(self) -> int:
        handler = _LogHandler(self.log)
        self._logger.addHandler(handler)
        try:
            self.report()
            return await self._execute()
        except Exception as error:  # never leave a job RUNNING without saying why
            return self._finish(
                JobStatus.FAILED,
                EXIT_FAILED,
                f"The job runner failed: {type(error).__name__}: {error}",
            )
        finally:
            self._logger.removeHandler(handler)

    def _finish(
        self, state: JobStatus, exit_code: int, message: str, error: JobErrorInfo | None = None
    ) -> int:
        """Write the final status (the last thing the runner does) and return the exit code."""
        self.log.job(f"{state.value.lower()}: {message}")
        self.report(
            state=state,
            exit_code=exit_code,
            message=message,
            error=error,
            current_cell=None,
            end_time=utc_now(),
        )
        return exit_code

    def _prepare(self) -> tuple[NotebookNode, str, str] | str:
        """The parameterised notebook, kernel name and working directory, or why not."""
        import nbformat
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

        try:
            nb = nbformat.read(self.files.input_notebook, as_version=4)
        except Exception as error:
            return f"The notebook could not be read: {error}"
        kernelspec = nb.metadata.get("kernelspec", {})
        kernel_name = self.spec.kernel_name or kernelspec.get("name") or DEFAULT_KERNEL
        manager = KernelSpecManager()
        try:
            spec = manager.get_kernel_spec(kernel_name)
        except NoSuchKernel:
            found = ", ".join(sorted(manager.find_kernel_specs())) or "none"
            return (
                f"The kernel {kernel_name!r} is not installed where the job runs "
                f"(available: {found}). Choose one of these kernels in the notebook, "
                "or ask the hub admins to add yours to the job image."
            )
        if kernel_name != kernelspec.get("name"):
            nb.metadata["kernelspec"] = {
                "name": kernel_name,
                "display_name": spec.display_name,
                "language": spec.language,
            }
        if self.spec.parameters:
            from papermill.parameterize import parameterize_notebook

            for cell in nb.cells:  # papermill expects a tags list on every cell
                cell.metadata.setdefault("tags", [])
            if not any("parameters" in cell.metadata.tags for cell in nb.cells):
                self.log.job(
                    "the notebook has no cell tagged 'parameters'; "
                    "the parameters are set in a new first cell"
                )
            nb.metadata.setdefault("papermill", {})
            nb = parameterize_notebook(
                nb, self.spec.parameters, kernel_name=kernel_name, language=spec.language
            )
        if self.spec.working_dir and os.path.isdir(self.spec.working_dir):
            cwd = self.spec.working_dir
        else:
            if self.spec.working_dir:
                self.log.job(
                    f"the notebook's folder {self.spec.working_dir} is not there any more; "
                    "running in the job's own folder instead"
                )
            self.files.work.mkdir(exist_ok=True)
            cwd = str(self.files.work)
        shared = os.environ.get(PIPELINE_DIR_VARIABLE)
        if shared:
            # Made by the job, as its owner, before its kernel starts.
            folder = os.path.abspath(os.path.join(cwd, shared))
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as error:
                return (
                    f"The pipeline's shared folder {folder} could not be made "
                    f"({error.strerror}); choose another shared folder."
                )
            os.environ[PIPELINE_DIR_VARIABLE] = folder
        return nb, kernel_name, cwd

    async def _execute(self) -> int:
        prepared = self._prepare()
        if isinstance(prepared, str):
            return self._finish(JobStatus.FAILED, EXIT_INVALID_JOB, prepared)
        nb, kernel_name, cwd = prepared
        self.nb = nb
        autosave = asyncio.ensure_future(self._autosave())
        try:
            outcome = await self._run_cells(nb, kernel_name, cwd)
        finally:
            autosave.cancel()
            self.save()
            self.export_html()
        return self._finish(*outcome)

    async def _run_cells(self, nb: NotebookNode, kernel_name: str, cwd: str) -> _Outcome:
        from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

        from .notebook_client import JobNotebookClient

        client = JobNotebookClient(
            nb,
            on_output=self.log.cell,
            kernel_name=kernel_name,
            timeout=self.spec.cell_timeout_seconds,
            startup_timeout=self.spec.kernel_startup_timeout,
            interrupt_on_timeout=False,
            record_timing=True,
            log=self._logger,
        )
        self.client = client
        runnable = [i for i, c in enumerate(nb.cells) if _executable(c, client.skip_cells_with_tag)]
        # papermill's injected-parameters cell runs first among them but is not one of the
        # user's code cells: it is not counted, and the log names it for what it is.
        injected = {i for i in runnable if INJECTED_TAG in nb.cells[i].metadata.get("tags", [])}
        total = len(runnable) - len(injected)
        # What people read counts the user's code cells from 1, as the log's "(1 of n)"
        # and the Jobs panel do; JobErrorInfo.cell_index stays the notebook index.
        ordinal = {index: n for n, index in enumerate(i for i in runnable if i not in injected)}

        def cell(index: int | None) -> str:
            if index is None:
                return "a cell"
            if index in injected:
                return "the parameters cell"
            return f"cell {ordinal[index] + 1}" if index in ordinal else f"cell {index + 1}"

        self.report(cells_total=total, kernel_name=kernel_name)
        self.save()
        if self.stop_reason:
            return self._stopped()
        self.log.job(f"starting kernel {kernel_name!r}: {total} code cells to run")
        current: int | None = None
        try:
            async with self._kernel(client, kernel_name, cwd):
                self.report(kernel_pid=client.kernel_pid)
                for index in runnable:
                    if self.stop_reason:
                        break
                    current = index
                    done = self.status.cells_completed
                    if index in injected:
                        self.log.job(f"setting parameters (cell {index}, injected-parameters)")
                        self.report(current_cell=None)
                    else:
                        self.log.job(f"cell {index} started ({done + 1} of {total})")
                        self.report(current_cell=index)
                    try:
                        await client.async_execute_cell(
                            nb.cells[index], index, execution_count=client.code_cells_executed + 1
                        )
                    finally:
                        self.save()
                    if index not in injected:
                        self.report(cells_completed=done + 1)
                    current = None
                client.graceful_shutdown = True
        except CellExecutionError as error:
            client.graceful_shutdown = False
            if self.stop_reason:
                return self._stopped()
            if error.ename == "SystemExit" and error.evalue.strip() in _EARLY_EXIT_VALUES:
                return (
                    JobStatus.COMPLETED,
                    EXIT_COMPLETED,
                    f"The notebook ended itself in {cell(current)} (SystemExit); "
                    f"{self.status.cells_completed} of {total} code cells ran.",
                    None,
                )
            evalue = error.evalue if len(error.evalue) <= 300 else error.evalue[:297] + "..."
            return (
                JobStatus.FAILED,
                EXIT_FAILED,
                f"{cell(current).capitalize()} raised {error.ename}: {evalue}",
                JobErrorInfo(
                    cell_index=current,
                    ename=error.ename,
                    evalue=error.evalue,
                    traceback=self._traceback(current) or str(error),
                ),
            )
        except CellTimeoutError:
            client.graceful_shutdown = False
            timeout = self.spec.cell_timeout_seconds
            evalue = f"{cell(current)} did not finish within {timeout} s"
            return self._failed_in_cell(
                current,
                "CellTimeoutError",
                evalue,
                f"{cell(current).capitalize()} ran longer than the cell timeout of {timeout} s "
                "and was stopped.",
            )
        except DeadKernelError:
            client.graceful_shutdown = False
            evalue = "the kernel died (out of memory?)"
            where = f"while running {cell(current)}" if current is not None else "between cells"
            return self._failed_in_cell(
                current,
                "DeadKernelError",
                evalue,
                f"The kernel died {where} (out of memory?). The output notebook keeps the "
                "cells that ran before; try a flavor with more memory, or smaller batches.",
            )
        except Exception as error:
            client.graceful_shutdown = False
            if self.stop_reason:
                return self._stopped()
            where = f" in {cell(current)}" if current is not None else ""
            return (
                JobStatus.FAILED,
                EXIT_FAILED,
                f"The job failed{where}: {type(error).__name__}: {error}",
                JobErrorInfo(cell_index=current, ename=type(error).__name__, evalue=str(error)),
            )
        if self.stop_reason and self.status.cells_completed < total:
            return self._stopped()
        ran = "The one code cell ran." if total == 1 else f"All {total} code cells ran."
        return (JobStatus.COMPLETED, EXIT_COMPLETED, ran, None)

    @asynccontextmanager
    async def _kernel(
        self, client: JobNotebookClient, kernel_name: str, cwd: str
    ) -> AsyncIterator[None]:
        """The kernel the cells run in: the warm one when it is this job's kernel (see
        :mod:`.warm_start`), else one started now in ``cwd``."""
        warm, self.warm_kernel = self.warm_kernel, None
        if warm is not None and (warm.kernel_name != kernel_name or not warm.is_python):
            await warm.shut_down()
            warm = None
        if warm is None:
            async with client.running_kernel(cwd):
                yield
            return
        self.log.job("the kernel was started ahead of the job (a warm start)")
        # The job's id and the hub's descriptions of its share (this process has the job's
        # environment since the hand-over); the rest the kernel was started with.
        from .warm_start import JOB_ID_VARIABLE, set_late

        late = {name: value for name, value in os.environ.items() if set_late(name)}
        async with warm.running_for(client, cwd, {**late, JOB_ID_VARIABLE: self.spec.job_id}):
            yield

    def _stopped(self) -> _Outcome:
        total = self.status.cells_total
        ran = f"{self.status.cells_completed} of {total}" if total is not None else "no"
        return (
            JobStatus.STOPPED,
            EXIT_STOPPED,
            f"Stopped ({self.stop_reason}) after {ran} code cells; the output notebook keeps them.",
            None,
        )

    def _traceback(self, index: int | None) -> str:
        from .notebook_client import strip_ansi

        if index is None or self.nb is None:
            return ""
        for output in self.nb.cells[index].get("outputs", []):
            if output.get("output_type") == "error":
                return strip_ansi("\n".join(output.get("traceback", [])))
        return ""

    def _failed_in_cell(self, index: int | None, ename: str, evalue: str, message: str) -> _Outcome:
        """A failure the kernel could not report itself (a cell timeout, the kernel's death):
        the cell where the run ended gets the error as an output, so the output notebook
        shows why, and the job fails with ``message``."""
        import nbformat

        if index is not None and self.nb is not None:
            self.nb.cells[index].setdefault("outputs", []).append(
                nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[])
            )
        error = JobErrorInfo(cell_index=index, ename=ename, evalue=evalue)
        return (JobStatus.FAILED, EXIT_FAILED, message, error)

    async def _autosave(self) -> None:
        interval = self.spec.autosave_seconds
        if interval <= 0:
            return
        while True:
            await asyncio.sleep(interval)
            if self.client is not None and self.client.unsaved_output:
                self.save()


UPLOAD_ATTEMPTS = 3
UPLOAD_TIMEOUT = 60.0


def read_upload_token(token_file: Path, log: JobLog) -> str | None:
    """The job's upload token, read at the start (its Secret may be gone by the end, when
    the job is stopped or preempted); None, with a log line, when it cannot be read."""
    try:
        return token_file.read_text(encoding="utf-8").strip() or None
    except OSError as error:
        log.job(f"could not read the upload token ({error.strerror}); outputs stay in the pod")
        return None


def upload_outputs(files: JobFiles, spec: RunnerSpec, url: str, token: str, log: JobLog) -> None:
    """Send the job's outputs to ``url`` + ``ipynb`` / ``html`` (PUT, the job's token)."""
    import time
    import urllib.error
    import urllib.request

    formats = ["ipynb", *(fmt for fmt in spec.output_formats if fmt != "ipynb")]
    for fmt in formats:
        path = files.output(fmt)
        if not path.is_file():
            continue
        body = path.read_bytes()
        request = urllib.request.Request(
            url.rstrip("/") + "/" + fmt,
            data=body,
            method="PUT",
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/octet-stream",
            },
        )
        for attempt in range(1, UPLOAD_ATTEMPTS + 1):
            try:
                with urllib.request.urlopen(request, timeout=UPLOAD_TIMEOUT):
                    pass
                log.job(f"sent output.{fmt} to the job service ({len(body)} bytes)")
                break
            except urllib.error.HTTPError as error:  # refused: trying again will not help
                log.job(f"the job service refused output.{fmt}: HTTP {error.code}")
                break
            except (urllib.error.URLError, OSError) as error:
                if attempt == UPLOAD_ATTEMPTS:
                    log.job(f"could not send output.{fmt} to the job service: {error}")
                else:
                    time.sleep(attempt)


async def run_job(
    job_dir: Path,
    *,
    log_file: Path | None = None,
    handle_signals: bool = False,
    termination_log: Path | None = None,
    upload_url: str | None = None,
    upload_token_file: Path | None = None,
    warm_kernel: WarmKernel | None = None,
) -> int:
    """Run the job in ``job_dir`` to its end; returns the runner's exit code.

    ``termination_log`` (in a Kubernetes pod): also report the final status there and
    as the log's last line (see ``runfiles.STATUS_MARKER``). ``upload_url`` and
    ``upload_token_file``: send the outputs back to the job service at the end.
    ``warm_kernel``: a kernel started before the job came (:mod:`.warm_start`).
    """
    files = JobFiles(Path(job_dir))
    log_path = log_file or files.directory / "job.log"
    try:
        spec = read_spec(files)
    except (OSError, ValueError) as error:
        log = JobLog(log_path, max_bytes=1024 * 1024)
        log.job(f"failed: the job's instructions (job.json) could not be read: {error}")
        log.close()
        return EXIT_INVALID_JOB
    log = JobLog(log_path, max_bytes=spec.max_log_bytes)
    run = NotebookRun(files, spec, log)
    run.warm_kernel = warm_kernel
    token = None
    if upload_url and upload_token_file is not None:
        token = read_upload_token(upload_token_file, log)
    loop = asyncio.get_running_loop()
    if handle_signals:
        loop.add_signal_handler(signal.SIGTERM, run.request_stop, "SIGTERM")
        loop.add_signal_handler(signal.SIGINT, run.request_stop, "SIGINT")
    try:
        code = await run.execute()
        if upload_url and token and sends_outputs(log):
            await asyncio.to_thread(upload_outputs, files, spec, upload_url, token, log)
        if termination_log is not None:
            _report_final_status(run.status, termination_log, log)
        return code
    finally:
        if handle_signals:
            loop.remove_signal_handler(signal.SIGTERM)
            loop.remove_signal_handler(signal.SIGINT)
        log.close()


def _report_final_status(status: RunnerStatus, path: Path, log: JobLog) -> None:
    """The final status, where a Kubernetes executor reads it: the termination message
    and, should that be missing or cut, the log's last line."""
    text = compact_status(status)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:  # the log line below still carries it
        log.job(f"could not write the termination message to {path}: {error.strerror}")
    log.job(STATUS_MARKER.removeprefix("[job] ") + text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_to_job.runner",
        description="Run a job's notebook: reads DIR/job.json and DIR/input.ipynb, writes "
        "DIR/output.ipynb, DIR/status.json and the log.",
    )
    parser.add_argument("--job-dir", type=Path, help="the job's directory")
    parser.add_argument(
        "--log-file",
        type=Path,
        default=None,
        help="append the log here (default: DIR/job.log; '-': standard output)",
    )
    parser.add_argument(
        "--termination-log",
        type=Path,
        default=None,
        help="in a Kubernetes pod: also write the final status, as compact JSON, here (the "
        "container's terminationMessagePath) and as the log's last line",
    )
    parser.add_argument(
        "--upload-url",
        default=None,
        help="send output.ipynb and output.html here at the end (PUT URL/ipynb, URL/html)",
    )
    parser.add_argument(
        "--upload-token-file",
        type=Path,
        default=None,
        help="the file holding the job's upload token (with --upload-url)",
    )
    parser.add_argument(
        "--checkpoint-dir",
        type=Path,
        default=None,
        help="in a Kubernetes pod of a job with a checkpoint: its folder (made if missing), "
        "given to the notebook as $JUPYTER_TO_JOB_CHECKPOINT_DIR, with the attempt counted "
        "there as $JUPYTER_TO_JOB_ATTEMPT",
    )
    warm = parser.add_argument_group(
        "warm start", "start ahead and wait for one job (see jupyter_to_job.warm_start)"
    )
    warm.add_argument(
        "--warm-control",
        type=int,
        default=None,
        metavar="FD",
        help="the control socket (an inherited descriptor) the job will come through",
    )
    warm.add_argument(
        "--warm-dir", type=Path, default=None, help="the warm kernel's folder until then"
    )
    warm.add_argument("--warm-kernel", default=DEFAULT_KERNEL, help="the kernel to start ahead")
    args = parser.parse_args(argv)
    if (args.job_dir is None) == (args.warm_control is None):
        parser.error("give either --job-dir or --warm-control (with --warm-dir)")
    # jsonschema, which nbformat imports, compiles an IRI grammar from rfc3987_syntax
    # when that package is installed: about 1.3 s per job for a format notebooks never
    # use. A None entry makes that optional import fail fast, in this process only.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    logging.getLogger("papermill").setLevel(logging.ERROR)
    if args.warm_control is not None:
        from .warm_start import serve_one_job

        folder = args.warm_dir or Path.cwd()
        return asyncio.run(serve_one_job(args.warm_control, folder, args.warm_kernel, run_job))
    if args.checkpoint_dir is not None:
        os.environ[CHECKPOINT_VARIABLE] = str(args.checkpoint_dir)
        os.environ[ATTEMPT_VARIABLE] = str(count_attempt(args.checkpoint_dir))
    return asyncio.run(
        run_job(
            args.job_dir,
            log_file=args.log_file,
            handle_signals=True,
            termination_log=args.termination_log,
            upload_url=args.upload_url,
            upload_token_file=args.upload_token_file,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
