"""The job API behind the REST handlers: who asks, what they may do, and the manager's answer.

Design notes: docs/design/jobs.md, "jupyter_to_job.jobs_api".
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol

from pydantic import ValidationError

from gpuspawner.accounting.budgets import BudgetStatus
from gpuspawner.core.cgroups import ResourceLimits
from gpuspawner.policy import Catalog, FlavorEntitlement, JobFlavor, UserIdentity
from gpuspawner.policy.catalog_models import Settings
from gpuspawner.policy.flavors import default_flavor, flavor_entitlements
from gpuspawner.policy.units import format_bytes

from . import __version__
from .access import (
    Access,
    Caller,
    Roster,
    groups_to_expand,
    job_access,
    needs_owner_groups,
    readable_owners,
    teaching_roster,
)
from .describe import iso_utc, job_outputs
from .errors import OutputNotFound
from .manager import JobManager
from .models import (
    CreateJob,
    CreateJobResponse,
    DescribeJob,
    JobFeatures,
    JobFlavorInfo,
    JobLogChunk,
    JobServiceConfig,
    JobStatus,
    ListFlavorsResponse,
    ListJobsQuery,
    ListJobsResponse,
    NotificationSettings,
    UpdateJob,
)
from .notifications import new_webhook_secret
from .rest import ApiError, json_object, parse_create_body, validation_error
from .runfiles import open_job_file
from .scopes import READ_JOBS_SCOPE, WRITE_JOBS_SCOPE

log = logging.getLogger(__name__)

FlavorBudget = Callable[[Catalog, UserIdentity, JobFlavor, datetime], BudgetStatus | None]
"""The GPU-hour budget a caller's jobs on a flavor draw on (``GPUAdmission.job_budget``)."""

LOCAL_FLAVOR_ID = "local"
DEFAULT_TAIL_LINES = 100
MAX_TAIL_LINES = 10_000


def local_catalog() -> Catalog:
    """The built-in catalog of standalone mode: one CPU flavor, "local", open to everyone."""
    flavor = JobFlavor.model_validate(
        {
            "id": LOCAL_FLAVOR_ID,
            "title": "This server",
            "description": "Runs beside your notebook server, with the same CPUs, memory and "
            "GPU (if any).",
            "default_deadline": "1h",
            "max_deadline": "24h",
            "max_running_per_user": 2,
            "access": {"everyone": True},
        }
    )
    return Catalog(settings=Settings(), courses=[], research=[], standing=[], flavors=[flavor])


class Directory(Protocol):
    """Group membership, for ``!group=`` scopes and courses that enrol groups."""

    async def groups_of(self, user: str) -> frozenset[str]: ...

    async def members_of(self, group: str) -> frozenset[str]: ...


class NoGroups:
    """A directory without groups (standalone mode)."""

    async def groups_of(self, user: str) -> frozenset[str]:
        return frozenset()

    async def members_of(self, group: str) -> frozenset[str]:
        return frozenset()


@dataclass(frozen=True)
class Download:
    """An output file to send."""

    path: Path
    filename: str
    format: str

    def open(self) -> BinaryIO:
        """The file, opened as a job's file must be (see ``runfiles.open_job_file``)."""
        try:
            return open_job_file(self.path)
        except OSError:
            raise OutputNotFound(f"The job's {self.format} output cannot be read.") from None


def _resources_in_words(flavor: JobFlavor) -> str:
    parts = []
    cpu = flavor.resources.cpu
    if cpu:
        parts.append(f"{cpu:g} CPU" + ("" if cpu == 1 else "s"))
    if flavor.resources.memory:
        parts.append(f"{format_bytes(flavor.resources.memory)} memory")
    return ", ".join(parts)


def _int_argument(params: dict[str, str], name: str, *, minimum: int = 0) -> int | None:
    text = params.get(name)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ApiError(
            400,
            f"{name} must be a whole number of at least {minimum}; got {text[:40]!r}.",
            "invalid",
        )
    return value


def working_dir_beside(
    root: str | Callable[[str], str | None],
) -> Callable[[CreateJob, str], str | None]:
    """Run each job in its notebook's own folder, so relative paths work and the files it
    writes land beside the notebook.

    ``root`` is the folder notebook paths are relative to (the server's root folder), or a
    function from the job owner's name to it (the job service: the owner's home).
    """

    def working_dir(request: CreateJob, owner: str) -> str | None:
        base = root(owner) if callable(root) else root
        if not base:
            return None
        return os.path.join(base, *PurePosixPath(request.input_path).parent.parts)

    return working_dir


class JobsAPI:
    """Job operations for identified callers; raises :class:`ApiError` and job errors."""

    def __init__(
        self,
        manager: JobManager,
        *,
        mode: str,
        catalog: Callable[[], Catalog | None],
        directory: Directory | None = None,
        max_notebook_bytes: int = 10 * 1024 * 1024,
        remember_identity: Callable[[UserIdentity], None] | None = None,
        working_dir: Callable[[CreateJob, str], str | None] | None = None,
        gpu_flavors: bool = False,
        save_outputs: bool = False,
        clock: Callable[[], datetime] | None = None,
        budget: FlavorBudget | None = None,
    ):
        self.manager = manager
        self.mode = mode
        self._catalog = catalog
        self.directory: Directory = directory or NoGroups()
        self.max_notebook_bytes = max_notebook_bytes
        self._remember_identity = remember_identity
        self._working_dir = working_dir
        self.gpu_flavors = gpu_flavors
        self.save_outputs = save_outputs
        self._clock = clock or (lambda: datetime.now(UTC))
        self._budget = budget

    # -- who may do what --------------------------------------------------------------

    def catalog(self) -> Catalog:
        catalog = self._catalog()
        if catalog is None:
            raise ApiError(
                503,
                "The job flavors cannot be loaded right now (the course catalog has errors). "
                "Try again later; the hub admins can see the details in the service's log.",
                "no-catalog",
            )
        return catalog

    def _roster(self, caller: Caller) -> Roster:
        if not caller.is_user:
            return Roster()
        return teaching_roster(self._catalog(), caller.name, caller.groups)

    @staticmethod
    def _require_scope(caller: Caller, level: Access = Access.READ) -> None:
        if caller.holds(level):
            return
        scope = READ_JOBS_SCOPE if level is Access.READ else WRITE_JOBS_SCOPE
        raise ApiError(
            403,
            f"This token cannot use Run as Job: it lacks the {scope} scope. Use Run as Job "
            "from your own JupyterLab, or ask the hub admins for the scope.",
            "missing-scope",
        )

    async def access(self, caller: Caller, owner: str) -> Access:
        """What ``caller`` may do with ``owner``'s jobs."""
        roster = self._roster(caller)
        if owner == caller.name and caller.is_user:
            groups = caller.groups
        elif needs_owner_groups(caller, roster):
            groups = await self.directory.groups_of(owner)
        else:
            groups = frozenset()
        return job_access(caller, owner, groups, roster)

    async def _job(self, caller: Caller, job_id: str, need: Access) -> DescribeJob:
        job, _ = await self._job_and_access(caller, job_id, need)
        return job

    async def _job_and_access(
        self, caller: Caller, job_id: str, need: Access
    ) -> tuple[DescribeJob, Access]:
        self._require_scope(caller)
        job = self.manager.describe(job_id)
        access = await self.access(caller, job.owner)
        if access < Access.READ:
            raise ApiError(
                403,
                "This job is not yours: you can read only your own jobs, and those of the "
                "students of the courses you teach.",
                "not-yours",
            )
        if access < need:
            raise ApiError(
                403,
                f"You can follow {job.owner}'s job {job.name!r}, but not stop or delete it: "
                "only its owner and the hub admins can.",
                "read-only",
            )
        return job, access

    def flavor_titles(self) -> dict[str, str]:
        """Each flavor's title for people, by id, as the catalog has them now."""
        catalog = self._catalog()
        if catalog is None:
            return {}
        return {flavor.id: flavor.title for flavor in catalog.flavors}

    @staticmethod
    def _as_seen_by(
        caller: Caller, job: DescribeJob, access: Access, titles: dict[str, str]
    ) -> DescribeJob:
        """``job`` with what this caller may do with it, and its flavor's title."""
        own = caller.is_user and job.owner == caller.name
        write = access >= Access.WRITE
        return job.model_copy(
            update={
                "flavor_title": titles.get(job.flavor) if job.flavor else None,
                "own": own,
                "can_stop": write,
                "can_delete": write,
                "can_rerun": own and caller.grants[Access.WRITE].covers(caller.name, caller.groups),
            }
        )

    async def _seen(self, caller: Caller, job: DescribeJob) -> DescribeJob:
        access = await self.access(caller, job.owner)
        return self._as_seen_by(caller, job, access, self.flavor_titles())

    # -- jobs --------------------------------------------------------------------------

    async def list_jobs(self, caller: Caller, params: dict[str, str]) -> ListJobsResponse:
        """``owner`` absent: every job the caller may read; ``owner=X``: X's jobs only."""
        self._require_scope(caller)
        params = dict(params)
        owner = params.pop("owner", None) or None
        try:
            query = ListJobsQuery.model_validate(params)
        except ValidationError as error:
            raise validation_error(error, "job listing") from None
        if owner is not None:
            if await self.access(caller, owner) < Access.READ:
                raise ApiError(
                    403,
                    f"You cannot list {owner[:80]}'s jobs: only your own, and those of the "
                    "students of the courses you teach.",
                    "forbidden-owner",
                )
            listing = self.manager.list_jobs(query.model_copy(update={"owner": owner}))
        else:
            roster = self._roster(caller)
            members = {
                group: await self.directory.members_of(group)
                for group in sorted(groups_to_expand(caller, roster))
            }
            owners = readable_owners(caller, roster, members)
            listing = self.manager.list_jobs(query, owners=owners)
        titles = self.flavor_titles()
        access: dict[str, Access] = {}
        seen = []
        for job in listing.jobs:
            if job.owner not in access:
                access[job.owner] = await self.access(caller, job.owner)
            seen.append(self._as_seen_by(caller, job, access[job.owner], titles))
        return listing.model_copy(update={"jobs": seen})

    async def create_job(self, caller: Caller, body: bytes) -> CreateJobResponse:
        """A create from the wire: CreateJob fields plus ``notebook`` (its JSON content)."""
        self._require_create(caller)
        request, notebook = parse_create_body(body, self.max_notebook_bytes)
        return await self.create(caller, request, notebook)

    def _require_create(self, caller: Caller) -> None:
        self._require_scope(caller, Access.WRITE)
        if not caller.is_user:
            raise ApiError(403, "Only users can create jobs; services cannot.", "users-only")
        if not caller.grants[Access.WRITE].covers(caller.name, caller.groups):
            raise ApiError(
                403,
                "This token cannot create jobs for you: its write scope covers other "
                "users' jobs only.",
                "missing-scope",
            )

    async def create(
        self, caller: Caller, request: CreateJob, notebook: dict[str, Any] | None
    ) -> CreateJobResponse:
        """Check the flavor and deadline, then create the job for ``caller``. A rerun
        without ``notebook`` runs the notebook snapshot of the job it reruns."""
        self._require_create(caller)
        if request.rerun_of is not None:
            await self.check_rerun(caller, request.rerun_of)
            if notebook is None:
                notebook = self._snapshot(request.rerun_of)
        if notebook is None:
            raise ApiError(
                400,
                "The request carries no notebook: send its content as 'notebook'.",
                "invalid",
            )
        request, working_dir = self.admitted_request(caller, request)
        created = await self.manager.create(
            caller.name, request, notebook=notebook, working_dir=working_dir
        )
        return created.model_copy(update={"job": await self._seen(caller, created.job)})

    def admitted_request(self, caller: Caller, request: CreateJob) -> tuple[CreateJob, str | None]:
        """``request`` as ``caller`` may create it now (its flavor and deadline filled in, both
        checked), and the folder it runs in; a 4xx with the reason otherwise. Schedules check
        their job with this when they are created."""
        self._require_create(caller)
        identity = caller.identity
        entitlement = self._entitlement(identity, request.flavor)
        flavor = entitlement.flavor
        max_deadline = int(flavor.max_deadline.total_seconds())
        deadline = request.deadline_seconds or int(flavor.default_deadline.total_seconds())
        if deadline > max_deadline:
            raise ApiError(
                400,
                f"The deadline of {deadline} seconds is longer than {flavor.title} allows "
                f"({max_deadline} seconds). Choose a shorter one.",
                "deadline-too-long",
            )
        if self._remember_identity is not None:
            self._remember_identity(identity)
        if request.notify is not None and request.notify.webhook_url is not None:
            self._require_webhook_secret(caller.name)
        request = request.model_copy(update={"flavor": flavor.id, "deadline_seconds": deadline})
        working_dir = self._working_dir(request, caller.name) if self._working_dir else None
        return request, working_dir

    # -- notifications --------------------------------------------------------------------

    def _require_webhook_secret(self, owner: str) -> None:
        settings = self.manager.store.owner_notify(owner)
        if settings is None or not settings.webhook_secret:
            raise ApiError(
                400,
                "Webhooks are signed with a secret of yours, and you have none yet. Save a "
                "webhook in your notification settings first (PUT api/notification-settings), "
                "keep the secret it shows you once, then create the job again.",
                "no-webhook-secret",
            )

    def _require_own_settings(self, caller: Caller, level: Access) -> None:
        self._require_scope(caller, level)
        if not caller.is_user or not caller.grants[level].covers(caller.name, caller.groups):
            raise ApiError(
                403,
                "Notification settings are each user's own: use a token of the user whose "
                "settings these are, with the scope on their own jobs.",
                "users-only",
            )

    def notification_settings(self, caller: Caller) -> NotificationSettings:
        """The caller's default notifications (``GET api/notification-settings``)."""
        self._require_own_settings(caller, Access.READ)
        row = self.manager.store.owner_notify(caller.name)
        if row is None:
            return NotificationSettings()
        return NotificationSettings.model_validate(
            {"default": row.settings or {}, "webhook_secret_set": bool(row.webhook_secret)}
        )

    def put_notification_settings(self, caller: Caller, body: bytes) -> NotificationSettings:
        """Save the caller's default; makes their webhook secret when they save a webhook
        without one (or ask ``rotate_secret``), and shows it in this answer only."""
        self._require_own_settings(caller, Access.WRITE)
        try:
            wanted = NotificationSettings.model_validate(json_object(body))
        except ValidationError as error:
            raise validation_error(error, "notification settings") from None
        if wanted.webhook_secret is not None or wanted.webhook_secret_set:
            raise ApiError(
                400,
                "The webhook secret is made by the job service, not sent to it. Leave out "
                "webhook_secret and webhook_secret_set; send rotate_secret: true for a new one.",
                "invalid",
            )
        store = self.manager.store
        existing = store.owner_notify(caller.name)
        secret = existing.webhook_secret if existing is not None else None
        shown = None
        if wanted.rotate_secret or (wanted.default.webhook_url is not None and not secret):
            secret = shown = new_webhook_secret()
        store.set_owner_notify(caller.name, wanted.default.model_dump(mode="json"), secret)
        return NotificationSettings(
            default=wanted.default, webhook_secret_set=bool(secret), webhook_secret=shown
        )

    async def check_rerun(self, caller: Caller, job_id: str) -> DescribeJob:
        """The job ``caller`` asks to run again, when it is theirs; a 403 naming its owner
        when they may only read it (an instructor and a student's job)."""
        job = await self._job(caller, job_id, Access.READ)
        if not (caller.is_user and job.owner == caller.name):
            raise ApiError(
                403,
                f"This is {job.owner}'s job; you can read it but not rerun it. Only "
                f"{job.owner} can run it again, from their own files.",
                "not-yours",
            )
        return job

    def _entitlement(self, identity: UserIdentity, flavor_id: str | None) -> FlavorEntitlement:
        entitlements = flavor_entitlements(self.catalog(), identity, self._clock())
        if flavor_id is None:
            default = default_flavor(entitlements)
            chosen = next((e for e in entitlements if e.flavor.id == default), None)
            if chosen is None:
                raise ApiError(
                    403,
                    "No job flavor is offered to you now, so notebooks cannot run as jobs. "
                    "Ask your instructor or the hub admins.",
                    "not-entitled",
                )
            return chosen
        chosen = next((e for e in entitlements if e.flavor.id == flavor_id), None)
        if chosen is None:
            offered = ", ".join(e.flavor.id for e in entitlements if e.available) or "none"
            raise ApiError(
                400,
                f"There is no job flavor {flavor_id!r} here (yours: {offered}). Choose one "
                "of the flavors the Run as Job dialog offers.",
                "unknown-flavor",
            )
        if not chosen.available:
            raise ApiError(
                403,
                f"{chosen.reason} Choose another flavor in the Run as Job dialog.",
                "not-entitled",
            )
        return chosen

    async def describe(self, caller: Caller, job_id: str) -> DescribeJob:
        job, access = await self._job_and_access(caller, job_id, Access.READ)
        return self._as_seen_by(caller, job, access, self.flavor_titles())

    async def update(self, caller: Caller, job_id: str, body: bytes) -> DescribeJob:
        """PATCH ``{"status": "STOPPED"}``: stop the job."""
        _, access = await self._job_and_access(caller, job_id, Access.WRITE)
        try:
            UpdateJob.model_validate(json_object(body))
        except ValidationError as error:
            raise validation_error(error) from None
        stopped = await self.manager.stop(job_id)
        return self._as_seen_by(caller, stopped, access, self.flavor_titles())

    async def delete(self, caller: Caller, job_id: str) -> None:
        await self._job(caller, job_id, Access.WRITE)
        await self.manager.delete(job_id)

    # -- logs and outputs ---------------------------------------------------------------

    async def read_log(self, caller: Caller, job_id: str, params: dict[str, str]) -> JobLogChunk:
        """``offset``/``limit`` (bytes) or ``tail`` (lines)."""
        await self._job(caller, job_id, Access.READ)
        tail = _int_argument(params, "tail", minimum=1)
        if tail is not None:
            return self.manager.tail_log(job_id, lines=min(tail, MAX_TAIL_LINES))
        offset = _int_argument(params, "offset") or 0
        limit = _int_argument(params, "limit", minimum=1)
        return self.manager.read_log(job_id, offset=offset, limit=limit)

    async def follow_log(
        self, caller: Caller, job_id: str, params: dict[str, str]
    ) -> AsyncIterator[JobLogChunk]:
        """Chunks from ``offset`` as they are written, until the job is final (checked first)."""
        await self._job(caller, job_id, Access.READ)
        offset = _int_argument(params, "offset") or 0
        return self.manager.follow_log(job_id, offset=offset)

    async def input_notebook(self, caller: Caller, job_id: str) -> dict[str, Any]:
        """The notebook the job ran, as it was when the job was created (its snapshot):
        what a rerun runs, and where the dialog reads the rerun's parameters from."""
        await self._job(caller, job_id, Access.READ)
        return self._snapshot(job_id)

    def _snapshot(self, job_id: str) -> dict[str, Any]:
        path = self.manager.job_files(job_id).input_notebook
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict):
            raise ApiError(
                404,
                "The notebook this job ran is no longer kept, so it cannot be run again from "
                "here. Open the notebook in JupyterLab and use Run as Job.",
                "not-found",
            )
        return data

    async def output(self, caller: Caller, job_id: str, fmt: str) -> Download:
        job = await self._job(caller, job_id, Access.READ)
        path = self.manager.output_path(job_id, fmt)
        row = self.manager.store.get(job_id)
        assert row is not None
        name = next(
            (
                o.name
                for o, _ in job_outputs(row, self.manager.job_files(job_id))
                if o.format == fmt
            ),
            f"{job.name}.{fmt}",
        )
        return Download(path, name, fmt)

    # -- flavors and capabilities --------------------------------------------------------

    async def flavors(self, caller: Caller) -> ListFlavorsResponse:
        self._require_scope(caller)
        catalog, now = self.catalog(), self._clock()
        entitlements = flavor_entitlements(catalog, caller.identity, now)
        budgets: dict[str, BudgetStatus] = {}
        if self._budget is not None and caller.is_user:
            for e in entitlements:
                status = (
                    self._budget(catalog, caller.identity, e.flavor, now) if e.available else None
                )
                if status is not None:
                    budgets[e.flavor.id] = status
        running: dict[str | None, int] = {}
        queued: dict[str | None, int] = {}
        for row in self.manager.store.with_status(
            JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.STOPPING
        ):
            counts = queued if row.job_status is JobStatus.QUEUED else running
            counts[row.flavor] = counts.get(row.flavor, 0) + 1
        default = default_flavor(entitlements)
        if default is not None and caller.is_user and self.manager.warm_pool is not None:
            # The Run as Job dialog asks: a job of the default flavor is likely soon.
            flavor = next(e.flavor for e in entitlements if e.flavor.id == default)
            resources = flavor.resources
            # Its kernel starts with the GPU a job would get now: a job granted the same
            # runs in it, one granted another starts its own (the imports still saved).
            self.manager.prewarm(
                caller.name,
                default,
                environment=self.manager.capacity.expected_environment(caller.name, default),
                limits=ResourceLimits(cpu=resources.cpu, memory_bytes=resources.memory),
            )
        # Would the caller's job start now? Not asked for a used-up budget (the budget line
        # says the job would be refused) nor for a service, which runs no jobs of its own.
        forecasts = self.manager.capacity.forecasts(
            caller.identity.name,
            {
                e.flavor.id: queued.get(e.flavor.id, 0)
                for e in entitlements
                if e.available
                and caller.is_user
                and not (e.flavor.id in budgets and budgets[e.flavor.id].exhausted)
            },
        )
        told = {flavor: budget.told() for flavor, budget in budgets.items()}
        return ListFlavorsResponse(
            flavors=[
                JobFlavorInfo(
                    id=e.flavor.id,
                    title=e.flavor.title,
                    description=e.flavor.description,
                    gpu=e.flavor.share.describe() if e.flavor.share else None,
                    resources=_resources_in_words(e.flavor),
                    available=e.available,
                    reason=e.reason,
                    default=e.flavor.id == default,
                    default_deadline_seconds=int(e.flavor.default_deadline.total_seconds()),
                    max_deadline_seconds=int(e.flavor.max_deadline.total_seconds()),
                    max_running_per_user=e.flavor.max_running_per_user,
                    running=running.get(e.flavor.id, 0),
                    queued=queued.get(e.flavor.id, 0),
                    budget=budgets[e.flavor.id].line() if e.flavor.id in budgets else None,
                    budget_pattern=told[e.flavor.id].pattern if e.flavor.id in told else None,
                    budget_moments=[
                        iso_utc(m.astimezone(UTC)) or "" for m in told[e.flavor.id].moments
                    ]
                    if e.flavor.id in told
                    else [],
                    budget_exhausted=e.flavor.id in budgets and budgets[e.flavor.id].exhausted,
                    starts_now=forecasts[e.flavor.id].starts_now
                    if e.flavor.id in forecasts
                    else None,
                    forecast=forecasts[e.flavor.id].message if e.flavor.id in forecasts else None,
                )
                for e in entitlements
            ]
        )

    def _mail_ready(self) -> bool:
        """Whether jobs can ask for a finish mail here (a manager that sends none: no)."""
        notifier = getattr(self.manager, "notifier", None)
        return bool(notifier is not None and notifier.mail_ready)

    def config(self, caller: Caller) -> JobServiceConfig:
        self._require_scope(caller)
        return JobServiceConfig(
            mode="hub" if self.mode == "hub" else "standalone",
            version=__version__,
            features=JobFeatures(
                gpu_flavors=self.gpu_flavors,
                save_outputs=self.save_outputs,
                notify_email=self._mail_ready(),
            ),
            max_notebook_bytes=self.max_notebook_bytes,
        )
