"""The JupyterHub side of course-time profiles, shared by the local and Kubernetes spawners.

Design notes: docs/design/hub.md, "gpuspawner.spawners.course_profiles".
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from jupyterhub.spawner import SpawnException
from sqlalchemy.exc import SQLAlchemyError
from traitlets import Bool, Instance, default
from traitlets.config import LoggingConfigurable

from ..core.admission import GPUAdmission
from ..core.grant import Grant, Target
from ..core.ledger import AllocationLedger, ProcessHolder
from ..gpu_map import gpu_map, map_viewer
from ..local_times import told_html
from ..metrics import observe_server_start, watch_spawner
from ..policy import (
    Allocation,
    CapacityPool,
    Catalog,
    GPUDevice,
    Refusal,
    UserIdentity,
    active_reservations,
    evaluate,
    seats_left,
)
from ..policy.entitlements import Entitlement
from ..policy.instructors import taught_courses
from . import refusal_log
from .home_page import RunningServer, running_server
from .spawn_page import ProfileCard, render_profile_cards

STATE_VERSION = 1
ALLOWED_OPTION_KEYS = frozenset({"profile", "prewarm_token", "environment"})
ENVIRONMENT_FIELD = "environment-"
"""The spawn form names each card's environment choice ``environment-<profile id>``; only
the chosen profile's is kept, as ``environment``."""


def refusal_exception(code: str, message: str, status: int) -> SpawnException:
    """A SpawnException whose text shows as-is on the spawn page and in the REST error."""
    error = SpawnException(message, reason=code, status_code=status)
    error.jupyterhub_message = message  # type: ignore[attr-defined]
    error.jupyterhub_html_message = html.escape(message)  # type: ignore[attr-defined]
    if status < 500:
        refusal_log.mark_expected(error, code, message)
    return error


class CourseProfilesMixin(LoggingConfigurable):
    """Course-time profiles and GPU shares for a JupyterHub spawner.

    Listed before the concrete spawner class in the bases, as in
    ``class LocalGPUSpawner(LocalGPUSpawnerMixin, LocalProcessSpawner)``.
    """

    admission_target: Target = "local"
    """Where this spawner's servers run, for rendering their grants."""

    admission = Instance(
        GPUAdmission,
        help="""The one admission of the hub (``c.GPUAdmission.*``): catalog, sharing back
        end, ledger, inventory. Every start is a Grant from it, applied as it is.""",
    )

    @default("admission")
    def _default_admission(self) -> GPUAdmission:
        # Every start asks the admission first: its refusals are logged as one info line.
        refusal_log.install()
        return GPUAdmission(parent=self, target=self.admission_target)

    show_unavailable_profiles = Bool(
        True,
        config=True,
        help="""
        Show closed or expired profiles on the spawn page, greyed out with the
        reason and when they open. False hides them.

        Example::

            c.LocalGPUSpawner.show_unavailable_profiles = False
        """,
    )

    # Shared by every spawner of this hub process: allocations must be seen by all.
    _pools: dict[tuple, CapacityPool] = {}

    # Per server, set by start() or load_state().
    _grant: Grant | None = None
    _allocation: Allocation | None = None
    _holder: ProcessHolder | None = None
    _profile_id: str | None = None
    _shown: dict[str, Any] | None = None
    """What the hub's admin page shows of this server (see :func:`admin_view`)."""
    _progress_messages: list[str]
    _decided_at = 0.0
    _start_observer: asyncio.Future | None = None
    """Waits for the server to answer, to count its start (record_started)."""

    # -- inventory, implemented by subclasses --------------------------------------

    def gpu_devices(self) -> list[GPUDevice]:
        """The GPUs this spawner hands out; subclasses read NVML, config or node labels.

        Without any, only profiles without a GPU can start (GPU profiles are refused).
        """
        return []

    @property
    def ledger_path(self) -> str:
        return self.admission.allocation_ledger

    @property
    def capacity_pool(self) -> CapacityPool:
        """The pool for this spawner's GPU inventory (a snapshot when a ledger is shared)."""
        devices = self.gpu_devices()
        if self.ledger_path:
            return AllocationLedger(self.ledger_path, self.log).snapshot(devices)
        signature = tuple(devices)
        pool = self._pools.get(signature)
        if pool is None:
            pool = self._pools[signature] = CapacityPool(devices)
        return pool

    @contextlib.contextmanager
    def capacity_transaction(self) -> Iterator[CapacityPool]:
        """The pool to decide in: locked and saved when shared through a ledger."""
        if self.ledger_path:
            ledger = AllocationLedger(self.ledger_path, self.log)
            with ledger.transaction(self.gpu_devices()) as pool:
                yield pool
        else:
            yield self.capacity_pool

    def hold_allocation(self, pid: int | None, *, start_time: float | None = None) -> None:
        """Hand this server's GPU slice in the shared ledger to its process ``pid``.

        Until then the hub holds the booking, and a hub killed before the server
        started leaves nothing behind: the next decision drops a booking whose holder is
        gone. From then on the slice lives exactly as long as the server's process.
        ``start_time``: that process's start time as spawner state recorded it, so that
        after a reboot a pid now used by another process is not taken for the server.
        A no-op without a ledger, without a GPU slice, or when the process no longer
        runs (the hub's poll then notices the server is gone and releases the slice).
        """
        if not self.ledger_path or self._allocation is None or not pid:
            return
        if start_time is None:
            holder = ProcessHolder.of_pid(pid)
        else:
            holder = ProcessHolder(pid, start_time)
            if not holder.is_alive():
                holder = None
        if holder is None:
            return
        self._holder = holder
        ledger = AllocationLedger(self.ledger_path, self.log)
        for warning in ledger.hold(self.gpu_devices(), self._allocation, holder):
            self.log.warning("Holding GPU allocation: %s", warning)

    # -- policy inputs ---------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        try:
            return self.admission.catalog()
        except Refusal as refusal:
            raise refusal_exception(refusal.code, refusal.message, refusal.status) from None

    def identity(self) -> UserIdentity:
        user = self.user
        groups = frozenset(g.name for g in getattr(user, "groups", []) or [])
        return UserIdentity(user.name, groups, bool(getattr(user, "admin", False)))

    def now(self) -> datetime:
        return datetime.now(UTC)

    @property
    def allocation_key(self) -> str:
        return f"server:{self.user.name}/{self.name or ''}"

    # -- spawn page ------------------------------------------------------------------

    @default("options_form")
    def _default_options_form(self):
        return CourseProfilesMixin._render_course_profiles_form

    @staticmethod
    def _render_course_profiles_form(spawner) -> str:
        return spawner.render_profile_page()

    def profile_cards(self) -> list[ProfileCard]:
        """The cards of the spawn page, for this user, now."""
        catalog, now = self.catalog, self.now()
        pool = self.capacity_pool
        cards = []
        reservations = active_reservations(catalog, now)
        for entitlement in evaluate(catalog, self.identity(), now):
            if not entitlement.available and not self.show_unavailable_profiles:
                continue
            seats = (
                seats_left(catalog, pool, entitlement, now, reservations)
                if entitlement.available
                else None
            )
            budget = (
                self.admission.server_budget(catalog, entitlement, self.identity(), now)
                if entitlement.available
                else None
            )
            cards.append(
                ProfileCard.build(
                    entitlement,
                    seats,
                    pool.devices,
                    local=self.admission_target == "local",
                    budget=budget.line() if budget else "",
                    budget_html=told_html(budget.told(), budget.zone) if budget else None,
                    budget_exhausted=bool(budget and budget.exhausted),
                    experimental_zone=catalog.settings.experimental_zone,
                    timezone=catalog.settings.timezone,
                    now=now,
                )
            )
        return cards

    def render_profile_page(self) -> str:
        cards = self.profile_cards()
        previous = (self.user_options or {}).get("profile") if self.user_options else None
        environment = (self.user_options or {}).get("environment") if self.user_options else None
        identity = self.identity()
        # Names as on the GPU map page: instructors see their own courses' students.
        viewer = map_viewer(self.admission.catalog_in_force(), identity)
        gpus = gpu_map(self.capacity_pool, viewer=viewer)
        return render_profile_cards(
            cards,
            selected=previous if isinstance(previous, str) else None,
            selected_environment=environment if isinstance(environment, str) else None,
            gpus=gpus,
            notice=getattr(self, "stop_notice", ""),
        )

    def options_from_form(self, formdata: dict) -> dict:
        """Keep the submitted fields as single values; start() decides what is allowed.

        Each card's environment choice (``environment-<profile>``) is kept only for the
        chosen profile, as ``environment``; the other cards' choices are dropped.
        """
        options = {}
        for key, values in formdata.items():
            if key == "_xsrf" or key.startswith(ENVIRONMENT_FIELD):
                continue
            if isinstance(values, list):
                options[key] = values[0] if len(values) == 1 else values
            else:
                options[key] = values
        profile = options.get("profile")
        if isinstance(profile, str) and "environment" not in options:
            chosen = formdata.get(ENVIRONMENT_FIELD + profile)
            if isinstance(chosen, list):
                chosen = chosen[0] if len(chosen) == 1 else chosen
            if chosen is not None:
                options["environment"] = chosen
        return options

    # -- start -----------------------------------------------------------------------

    def _requested_profile(self, options: object) -> tuple[str, str | None]:
        """Validate the shape of user_options: only a profile id, an optional token and an
        optional environment (checked by the admission against what the profile offers)."""
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise refusal_exception(
                "invalid",
                'The start request must be a JSON object such as {"profile": "ml101"}.',
                400,
            )
        unknown = sorted(str(k)[:40] for k in options if k not in ALLOWED_OPTION_KEYS)
        if unknown:
            raise refusal_exception(
                "invalid",
                f"Unexpected start option(s): {', '.join(unknown)}. Only a profile (and an "
                "environment it offers) can be chosen; its resources come from the course "
                "catalog.",
                400,
            )
        profile = options.get("profile")
        token = options.get("prewarm_token")
        if token is not None and not isinstance(token, str):
            raise refusal_exception("invalid", "The pre-warm token must be a string.", 400)
        if profile is None or profile == "":
            default = next(
                (
                    e
                    for e in evaluate(self.catalog, self.identity(), self.now())
                    if e.profile.default and e.available
                ),
                None,
            )
            if default is None:
                raise refusal_exception("invalid", "Choose a profile on the start page.", 400)
            return default.profile.id, token
        if not isinstance(profile, str) or len(profile) > 100:
            raise refusal_exception(
                "invalid", "The profile must be one of the profile ids on the start page.", 400
            )
        return profile, token

    @property
    def grant_object_name(self) -> str:
        """The name objects the grant's plan creates are named after (the pod's)."""
        return ""

    def expand_storage(self, text: str) -> str:
        """``{username}`` and ``{servername}`` in a catalog storage claim or path."""
        return text.replace("{username}", self.user.name).replace("{servername}", self.name or "")

    def ask_admission(self, pool: CapacityPool) -> Grant:
        """This start's request (``user_options``, checked) answered by the admission over
        ``pool``: a Grant, its slice booked there, or a refusal as a SpawnException."""
        profile_id, token = self._requested_profile(self.user_options)
        environment = (self.user_options or {}).get("environment")
        try:
            return self.admission.grant_server(
                pool,
                self.identity(),
                profile_id,
                key=self.allocation_key,
                now=self.now(),
                server_name=self.name or "",
                prewarm_token=token,
                object_name=self.grant_object_name,
                expand=self.expand_storage,
                environment=environment,
            )
        except Refusal as refusal:
            # JupyterHub logs the refusal, as one info line (see refusal_log).
            raise refusal_exception(refusal.code, refusal.message, refusal.status) from None

    def decide_start(self) -> Grant:
        """Ask the admission for this start: a Grant (its GPU slice booked) or a refusal.

        Synchronous on purpose: the check and the booking happen with no await
        in between, so two concurrent spawns can never take the same slice.
        """
        watch_spawner(self)
        self._decided_at = time.monotonic()
        with self.capacity_transaction() as pool:
            self.close_dangling_usage(pool)
            grant = self.ask_admission(pool)
        self._grant = grant
        self._allocation = grant.allocation
        self._profile_id = grant.subject
        self._shown = admin_view(grant)
        return grant

    def progress_note(self, message: str) -> None:
        if not hasattr(self, "_progress_messages") or self._progress_messages is None:
            self._progress_messages = []
        self._progress_messages.append(message)

    async def progress(self):
        """Spawn progress events: the decision, the device, then the server start."""
        sent = 0
        percent = 10
        while True:
            messages = getattr(self, "_progress_messages", None) or []
            while sent < len(messages):
                percent = min(percent + 20, 90)
                yield {"progress": percent, "message": messages[sent]}
                sent += 1
            if self._spawn_future is not None and self._spawn_future.done():
                return
            await asyncio.sleep(0.2)

    def record_started(self) -> None:
        """Count this GPU server's start in the hub's metrics, from the admission's decision
        to the server answering, as its owner waits: JupyterHub still waits for the server
        to answer after ``start()`` returns (on one machine ``start()`` returns as soon as
        the process is launched, a tenth of a second into a start of several seconds).
        Observed once JupyterHub's start is no longer pending, if the server is then ready."""
        grant, decided_at = self._grant, self._decided_at
        self._decided_at = 0.0
        if grant is None or grant.allocation is None or not decided_at:
            return
        self._start_observer = asyncio.ensure_future(self._observe_start(grant, decided_at))

    async def _observe_start(self, grant: Grant, decided_at: float) -> None:
        while self.pending == "spawn":
            await asyncio.sleep(0.1)
        if self.ready:
            observe_server_start(grant.subject, grant.course_id, decided_at)

    # -- the GPU-hour usage record ---------------------------------------------------------

    # Usage records whose dangling servers this hub process has closed (once, after it starts).
    _usage_reconciled: set[str] = set()

    def start_polling(self):
        """JupyterHub calls this once the spawner has started a server (and for each server
        still running after a hub restart): its GPU-hours count from here in the usage
        record. A server that then never answers is stopped, which closes its interval."""
        if self._grant is not None:
            self.admission.record_start(
                self._grant, name=self.name or "", groups=self.identity().groups, now=self.now()
            )
        return super().start_polling()

    def close_dangling_usage(self, pool: CapacityPool) -> None:
        """Once per hub process: close the usage intervals of servers that are not in
        ``pool`` (rebuilt from spawner state, the ledger or the pods) any more, such as
        servers that ended while the hub was down."""
        url = self.admission.usage_db_url
        if not url or url in self._usage_reconciled:
            return
        usage = self.admission.usage_record()
        if usage is None:
            return  # it cannot be opened now (logged); the next decision tries again
        try:
            gone = usage.close_dangling(pool.allocations, self.now(), kinds=("server",))
        except SQLAlchemyError:
            self.log.exception("Could not close the usage intervals of servers that ended")
            return
        CourseProfilesMixin._usage_reconciled.add(url)
        if gone:
            self.log.info("Usage record: closed %d servers that no longer run", len(gone))

    def release_allocation(self) -> None:
        if self._allocation is not None:
            self.admission.record_end(self._allocation.key, self.now())
            with self.capacity_transaction() as pool:
                pool.release(self._allocation.key)
        self._allocation = None
        self._holder = None
        self._grant = None
        self._shown = None

    def teaches_a_course(self) -> bool:
        """True when this user teaches a course of the catalog in force (the catalog's
        instructors and instructor groups, the user's groups now) or is an admin: the
        hub's home page then links to the course page (``templates/home.html``)."""
        catalog = self.admission.catalog_in_force()
        return catalog is not None and bool(taught_courses(catalog, self.identity()))

    def running_server(self) -> RunningServer | None:
        """What the hub's home page says of this server (``templates/home.html``): its
        profile, GPU share and stop time; None before a profile was granted."""
        if self._profile_id is None:
            return None
        grant, allocation = self._grant, self._allocation
        return running_server(
            self.admission.catalog_in_force(),
            self._profile_id,
            allocation=allocation,
            share_description=grant.share_description if grant else None,
            session_end=grant.session_end
            if grant
            else (allocation.session_end if allocation else None),
            owner=self.user.name,
            server_name=self.name or "",
            started=self.orm_spawner.started.replace(tzinfo=UTC)
            if self.orm_spawner is not None and self.orm_spawner.started
            else None,
        )

    # -- state -------------------------------------------------------------------------

    def course_state(self) -> dict:
        if self._profile_id is None:
            return {}
        grant = self._grant
        session_end = (
            grant.session_end
            if grant
            else (self._allocation.session_end if self._allocation else None)
        )
        return {
            "version": STATE_VERSION,
            "profile": self._profile_id,
            "allocation": self._allocation.to_dict() if self._allocation else None,
            "session_end": session_end.isoformat() if session_end else None,
            "environment": grant.environment_id if grant else None,
            # The process holding the slice, by pid and start time (see hold_allocation).
            "server_process": self._holder.to_dict() if self._holder else None,
            # Read by the hub's admin page (templates/admin.html) from the server model.
            **(self._shown or {}),
        }

    def restore_course_state(self, state: dict, *, pid: int | None = None) -> None:
        """Rebuild the server's profile and GPU allocation from spawner state.

        ``pid``: the server's process, when the spawner knows it; with a shared ledger
        the slice is recorded as held by it, or not at all if that process is gone.
        """
        data = state.get("gpuspawner") if isinstance(state, dict) else None
        if not isinstance(data, dict):
            return
        watch_spawner(self)
        self._profile_id = data.get("profile")
        self._shown = {key: data[key] for key in ADMIN_VIEW_KEYS if key in data} or None
        if data.get("allocation"):
            allocation = Allocation.from_dict(data["allocation"])
            self._allocation = allocation
            if self.ledger_path and pid:
                recorded = data.get("server_process")
                same_pid = isinstance(recorded, dict) and recorded.get("pid") == pid
                start_time = float(recorded["start_time"]) if same_pid else None
                self.hold_allocation(pid, start_time=start_time)
                return
            with self.capacity_transaction() as pool:
                warnings = pool.restore(allocation)
            for warning in warnings:
                self.log.warning("Restoring GPU allocation: %s", warning)


ADMIN_VIEW_KEYS = ("title", "share", "gpus")


def admin_view(grant: Grant) -> dict[str, Any]:
    """What the hub's admin page shows of a granted server, kept in its spawner state (the
    server model's ``state.gpuspawner``, for readers with ``admin:server_state``): the
    profile's title where the table shows ``user_options.profile`` (the id stays there, as
    the spawn API takes it), and the GPU share with the GPUs it is on."""
    return {
        "title": grant.title,
        "share": grant.share_description,
        "gpus": list(grant.gpu_labels),
    }


def entitlement_summary(entitlement: Entitlement) -> str:
    """One line for logs."""
    state = "available" if entitlement.available else "unavailable"
    return f"{entitlement.profile.id} ({state}: {entitlement.status})"
