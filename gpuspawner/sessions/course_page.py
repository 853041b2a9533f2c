"""The course page: instructors run their own courses in the browser.

Design notes: docs/design/sessions.md, "gpuspawner.sessions.course_page".
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from jupyterhub.services.auth import HubOAuthenticated
from markupsafe import Markup
from tornado import web

from gpuspawner.accounting.usage_command import UsageCommandError, build_report
from gpuspawner.local_times import clock_element
from gpuspawner.policy import Catalog, Course
from gpuspawner.policy.budget_spec import format_gpu_hours
from gpuspawner.policy.course_overrides import (
    TIMING_WORDS,
    TIMINGS,
    ExtraSession,
    OverrideRefused,
    bounds_for,
    cancel_change,
    classes_between,
    course_overrides,
    extension_change,
    extra_change,
    notice_change,
    remove_extra_change,
    restore_change,
    timing_change,
)
from gpuspawner.policy.entitlements import UserIdentity
from gpuspawner.policy.instructor_bounds import InstructorBounds
from gpuspawner.policy.instructors import (
    InstructorRefusal,
    course_to_manage,
    profile_of,
    taught_courses,
)
from gpuspawner.policy.instructors import server_to_stop as check_server_of_course

from .course_api import CourseAPI, identity_of
from .course_changes import CourseChanges
from .hub_page import page_vars, templates, viewer_services
from .hub_time import parse_hub_time
from .plan import session_end_of
from .student_jobs import JobsUnavailable, StudentJob, StudentJobs

log = logging.getLogger("gpuspawner.sessions.course_page")

DAYS_SHOWN = 14
MAX_MINUTES = 7 * 24 * 60
"""Minutes beyond a week are refused before any arithmetic (a bound no admin would set)."""
FLASH_COOKIE = "course-page-message"
TIMING_HELP = {
    "lead_time": "students may start their servers this long before class",
    "grace": "servers keep running this long after class",
    "prewarm": "the hub starts students' servers this long before class (0: it does not)",
}
ACTIONS = ("cancel", "restore", "extra", "remove-extra", "timing", "notice", "extend", "stop")


@dataclass
class ServerRow:
    user: str
    server: str
    started: str
    stops: str
    student: bool
    extended_minutes: int
    extend_left: int
    started_html: Markup = Markup("")
    stops_html: Markup = Markup("")
    """``started`` and ``stops`` as ``<time>`` elements the page tells in its reader's zone."""


@dataclass
class RosterRow:
    """One student of the course: their server of it (if any), its share, and their
    GPU-hours of the course this week."""

    user: str
    server: str
    """ "Running since 10:05, stops 12:10" or "No server"."""
    running: bool
    share: str
    gpu_hours_week: str | None
    """None: this hub keeps no usage record."""
    server_html: Markup = Markup("")
    """``server`` with its times as ``<time>`` elements."""


@dataclass
class CourseView:
    """What the page shows of one course."""

    course: Course
    bounds: InstructorBounds
    """What the course's instructors may change (the catalog's bounds, narrowed by the
    course's own)."""
    zone: str
    days: list[dict[str, Any]]
    timings: list[dict[str, Any]]
    notice: str
    seats_used: int
    seat_limit: int | None
    holders: list[str]
    servers: list[ServerRow]
    gpu_hours: str | None
    history: list[dict[str, Any]] = field(default_factory=list)
    roster: list[RosterRow] = field(default_factory=list)
    environments: list[str] = field(default_factory=list)
    """The environments its students choose among, in words ("Standard Python (JupyterLab
    4, Run as Job)"); empty: the course's own environment only."""
    storage_zone: str = "production"
    """``production`` or ``experimental`` (its storage wiped every day)."""
    jobs: list[StudentJob] | None = None
    """The students' latest jobs; None: not read (no job service, or it failed)."""
    jobs_note: str = ""


def _clock(moment: datetime, zone: Any) -> str:
    return f"{moment.astimezone(zone):%H:%M}"


def _clock_html(moment: datetime | None, zone: Any) -> Markup:
    """A server's start or stop as a ``<time>`` of today ("10:05 CET"); empty if unknown."""
    if moment is None:
        return Markup("")
    return clock_element(moment, zone, day=moment.astimezone(zone).date())


def course_view(
    catalog: Catalog,
    course: Course,
    users: list[dict[str, Any]],
    now: datetime,
    history: list[dict[str, Any]],
    gpu_hours: str | None,
    students: list[str] | None = None,
    week_hours: dict[str, str] | None = None,
) -> CourseView:
    """The page's view of ``course`` at ``now`` (pure, given the hub's user models).

    ``students``: who takes it now (enrolled users and members of its student groups);
    ``week_hours``: their GPU-hours of the course this week, by name (None: no usage
    record)."""
    schedule = course.course_schedule
    zone = schedule.timezone
    bounds = bounds_for(catalog, course)
    overrides = course_overrides(course)
    today = now.astimezone(zone).date()
    days = []
    for day, found in classes_between(course, today, today + timedelta(days=DAYS_SHOWN - 1)):
        classes = []
        for session, cancelled in found:
            classes.append(
                {
                    "start": _clock(session.start, zone),
                    "end": _clock(session.end, zone),
                    "start_html": clock_element(session.start, zone, day=day),
                    "end_html": clock_element(session.end, zone, day=day),
                    "cancelled": bool(cancelled),
                    "extra": cancelled is None,
                    "to_come": session.start > now,
                }
            )
        days.append({"date": day.isoformat(), "label": f"{day:%a %d %b}", "classes": classes})
    timings = []
    for name in TIMINGS:
        value = getattr(schedule, name)
        allowed = getattr(bounds, name) if bounds.enabled else None
        timings.append(
            {
                "name": name,
                "label": TIMING_WORDS[name].capitalize(),
                "help": TIMING_HELP[name],
                "minutes": int(value.total_seconds() // 60) if value else 0,
                "changed": overrides.timing(name) is not None,
                "min": int(allowed.min.total_seconds() // 60) if allowed else None,
                "max": int(allowed.max.total_seconds() // 60) if allowed else None,
            }
        )
    rows: list[ServerRow] = []
    holders: list[str] = []
    limit_minutes = int(bounds.extension.total_seconds() // 60) if bounds.enabled else 0
    for user in sorted(users, key=lambda u: str(u.get("name"))):
        name = str(user.get("name"))
        for server_name, server in sorted((user.get("servers") or {}).items()):
            if profile_of(server) != course.id or server.get("pending") == "stop":
                continue
            holders.append(name if not server_name else f"{name} ({server_name})")
            started = parse_hub_time(server.get("started"))
            end = session_end_of(catalog, user, server_name)
            extended = overrides.extension_for(name, server_name, started)
            done = int(extended.total_seconds() // 60)
            rows.append(
                ServerRow(
                    user=name,
                    server=server_name,
                    started=_clock(started, zone) if started else "",
                    stops=_clock(end, zone) if end else "",
                    student=end is not None,
                    extended_minutes=done,
                    extend_left=max(0, limit_minutes - done) if end is not None else 0,
                    started_html=_clock_html(started, zone),
                    stops_html=_clock_html(end, zone),
                )
            )
    share = course.share.describe() if course.share is not None else "No GPU"
    running = {row.user: row for row in rows}
    roster = []
    for student in sorted(set(students or ())):
        row = running.get(student)
        if row is None:
            told, told_html = "No server", Markup("No server")
        elif row.stops:
            told = f"Running since {row.started}, stops {row.stops}"
            told_html = Markup("Running since {}, stops {}").format(
                row.started_html, row.stops_html
            )
        else:
            told = f"Running since {row.started}"
            told_html = Markup("Running since {}").format(row.started_html)
        roster.append(
            RosterRow(
                user=student,
                server=told,
                running=row is not None,
                share=share if row is not None else "",
                gpu_hours_week=None if week_hours is None else week_hours.get(student, "0.0"),
                server_html=told_html,
            )
        )
    environments = [
        e.title + (f" ({', '.join(e.contains)})" if e.contains else "")
        for e in course.offered_environments
    ]
    return CourseView(
        course=course,
        bounds=bounds,
        zone=str(zone),
        roster=roster,
        environments=environments,
        storage_zone=course.zone,
        days=days,
        timings=timings,
        notice=overrides.notice,
        seats_used=len(holders) if course.gpu is not None else 0,
        seat_limit=course.max_gpu_servers,
        holders=holders if course.gpu is not None else [],
        servers=rows,
        gpu_hours=gpu_hours,
        history=history,
    )


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise OverrideRefused(
            f"Give the day as a date such as 2026-11-30, not {text[:20]!r}."
        ) from None


def _time(text: str, what: str) -> time:
    try:
        return time.fromisoformat(text[:5])
    except ValueError:
        raise OverrideRefused(
            f"Give the {what} as a time of day such as 14:00, not {text[:20]!r}."
        ) from None


def _minutes(text: str, what: str) -> int:
    minutes = int(text) if text.strip().lstrip("-").isdigit() else None
    if minutes is None or abs(minutes) > MAX_MINUTES:
        raise OverrideRefused(
            f"Give the {what} as a whole number of minutes, such as 15 (at most a week)."
        )
    return minutes


class CoursePageBase(HubOAuthenticated, web.RequestHandler):
    """What the course page and its actions share: the viewer, and errors as a page or JSON."""

    def initialize(
        self,
        hub_auth: Any,
        course_api: CourseAPI,
        changes: CourseChanges,
        student_jobs: StudentJobs | None,
        page_base: str,
    ) -> None:
        self.hub_auth = hub_auth
        self.course_api = course_api
        self.sessions = course_api.service
        self.changes = changes
        self.student_jobs = student_jobs
        self.page_base = page_base

    async def viewer(self) -> tuple[Catalog, UserIdentity]:
        """The catalog and the viewer, with their groups as the hub has them now."""
        try:
            catalog = self.course_api.current_catalog()
        except InstructorRefusal as refusal:
            raise web.HTTPError(refusal.status, refusal.message) from None
        model = await self.sessions.client.get_user(self.current_user["name"])
        if model is None:
            raise web.HTTPError(404, "The hub does not know you; sign in again.")
        return catalog, identity_of(model)

    def wants_json(self) -> bool:
        """A request of the page's own script, which asks for JSON."""
        return "application/json" in self.request.headers.get("Accept", "")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = kwargs.get("exc_info", (None, None))[1]
        message = getattr(error, "log_message", None) or (
            "The form was refused: it came from an old page or another site (its XSRF "
            "token did not match). Reload the course page and try again."
            if status_code == 403
            else "The course page failed; the hub admins see why in the service's log."
        )
        if self.wants_json():
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"status": status_code, "message": message}))
            return
        self.finish(
            templates.get_template("course_page.html").render(
                error=message,
                status=status_code,
                hub_prefix=self.hub_auth.hub_prefix,
                page_url=f"{self.page_base}/courses",
                **page_vars(self.hub_auth.hub_prefix, self.current_user, ""),
            )
        )


class CoursePage(CoursePageBase):
    """The instructor's page: each course they teach, its servers, roster and changes."""

    @web.authenticated
    async def get(self) -> None:
        catalog, viewer = await self.viewer()
        courses = taught_courses(catalog, viewer)
        if not courses:
            raise web.HTTPError(
                403,
                "You teach no course on this hub, so there is no course page for you: it "
                "is for the instructors the catalog names (or members of a course's "
                "instructor group) and for hub admins.",
            )
        now = self.sessions.clock()
        users = await self.sessions.client.list_users(state="active")
        views = []
        for course in courses:
            students = await self._students(catalog, course)
            views.append(
                course_view(
                    catalog,
                    course,
                    users,
                    now,
                    self._history(course),
                    self._gpu_hours(catalog, course, now),
                    students,
                    self._week_hours(catalog, course, now),
                )
            )
        for view in views:
            await self._jobs(catalog, view)
        message = self.get_signed_cookie(FLASH_COOKIE)
        if message:
            self.clear_cookie(FLASH_COOKIE, path=self.page_base)
        self.set_header("Cache-Control", "no-store")
        self.finish(
            templates.get_template("course_page.html").render(
                **page_vars(
                    self.hub_auth.hub_prefix,
                    self.current_user,
                    self.xsrf_token.decode(),
                    await viewer_services(self.sessions.client, self.current_user),
                ),
                views=views,
                bounds=catalog.settings.instructor_bounds,
                viewer=viewer,
                message=message.decode() if message else "",
                problems=catalog.override_problems if viewer.admin else [],
                hub_prefix=self.hub_auth.hub_prefix,
                page_url=f"{self.page_base}/courses",
                xsrf=self.xsrf_token.decode(),
            )
        )

    async def _jobs(self, catalog: Catalog, view: CourseView) -> None:
        """The latest jobs of the course's students (enrolment users and the members
        of its student groups now)."""
        if self.student_jobs is None:
            view.jobs_note = (
                "This hub's course page does not read Run as Job jobs (the "
                "course-sessions service has no job_service_url)."
            )
            return
        students = {row.user for row in view.roster}
        try:
            view.jobs = await self.student_jobs.recent(students)
        except JobsUnavailable as error:
            view.jobs_note = str(error)

    async def _students(self, catalog: Catalog, course: Course) -> list[str]:
        """Who takes ``course`` now: its enrolment's users and the members of its
        student groups as the hub has them."""
        groups = await self.sessions.client.group_members(list(catalog.student_groups(course)))
        return list(catalog.students_of(course, groups))

    def _week_hours(self, catalog: Catalog, course: Course, now: datetime) -> dict | None:
        """Each student's GPU-hours of ``course`` since Monday (the course's zone)."""
        if self.course_api.usage is None:
            return None
        today = now.astimezone(course.course_schedule.timezone).date()
        monday = today - timedelta(days=today.weekday())
        report = self._usage(catalog, course, now, monday, today, "this week")
        if report is None:
            return None
        return {line.name: format_gpu_hours(line.gpu_hours, 1) for line in report.lines}

    def _history(self, course: Course) -> list[dict[str, Any]]:
        found = [
            e for e in self.sessions.audit.recent if e.get("course") == course.id and e.get("by")
        ]
        return list(reversed(found))[:10]

    def _gpu_hours(self, catalog: Catalog, course: Course, now: datetime) -> str | None:
        if self.course_api.usage is None:
            return None
        schedule = course.course_schedule
        today = now.astimezone(schedule.timezone).date()
        last = max(schedule.first_day, min(today, schedule.last_day))
        report = self._usage(catalog, course, now, schedule.first_day, last, "")
        if report is None:
            return None
        return format_gpu_hours(report.total.gpu_hours, 2)

    def _usage(
        self, catalog: Catalog, course: Course, now: datetime, first: date, last: date, span: str
    ) -> Any:
        """The course's GPU-hours by user from ``first`` to ``last``; None (logged) when the
        usage record cannot say."""
        try:
            return build_report(
                self.course_api.usage,
                catalog=catalog,
                first_day=first,
                last_day=last,
                term=None,
                by="user",
                now=now,
                course=course.id,
            )
        except (UsageCommandError, ValueError) as error:
            log.warning("No GPU-hours%s for %s: %s", f" {span}" if span else "", course.id, error)
            return None


class CourseAction(CoursePageBase):
    """A form action of the page on one course (cancel, extra session, stop, extend...)."""

    @web.authenticated
    async def post(self, course_id: str, action: str) -> None:
        catalog, viewer = await self.viewer()
        try:
            course = course_to_manage(catalog, viewer, course_id)
        except InstructorRefusal as refusal:
            raise web.HTTPError(refusal.status, refusal.message) from None
        if action not in ACTIONS:
            raise web.HTTPError(404, f"The course page has no action {action[:30]!r}.")
        try:
            message = await self._do(catalog, course, viewer, action)
        except OverrideRefused as refusal:
            raise web.HTTPError(refusal.status, refusal.message) from None
        except InstructorRefusal as refusal:
            raise web.HTTPError(refusal.status, refusal.message) from None
        if self.wants_json():
            # The page's script (stop without reloading the page): the sentence only.
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"message": message}))
            return
        self.set_signed_cookie(FLASH_COOKIE, message, path=self.page_base, expires_days=None)
        self.redirect(f"{self.page_base}/courses#course-{course.id}", status=303)

    async def _do(self, catalog: Catalog, course: Course, viewer: UserIdentity, action: str) -> str:
        now = self.sessions.clock()
        bounds = bounds_for(catalog, course)
        argument = self.get_body_argument
        by = viewer.name

        def change(detail: str, update: Any, **where: Any) -> str:
            self.changes.change(
                catalog,
                course,
                by=by,
                now=now,
                action=f"instructor-{action}",
                detail=detail,
                update=update,
                **where,
            )
            return detail

        if action == "cancel":
            day = _day(argument("day", ""))
            return change(
                f"{by} cancelled the class of {day:%a %d %b %Y} of {course.title}.",
                lambda o: cancel_change(course, bounds, o, day, now),
            )
        if action == "restore":
            day = _day(argument("day", ""))
            return change(
                f"{by} restored the class of {day:%a %d %b %Y} of {course.title}.",
                lambda o: restore_change(o, day),
            )
        if action in ("extra", "remove-extra"):
            session = ExtraSession(
                day=_day(argument("day", "")),
                start=_time(argument("start", ""), "start"),
                end=_time(argument("end", ""), "end"),
            )
            if action == "extra":
                return change(
                    f"{by} added an extra session of {course.title}: {session.describe()}.",
                    lambda o: extra_change(course, bounds, o, session, now),
                )
            return change(
                f"{by} removed the extra session of {course.title} {session.describe()}.",
                lambda o: remove_extra_change(o, session),
            )
        if action == "timing":
            name = argument("name", "")
            text = argument("minutes", "").strip()
            value = None if text == "" else timedelta(minutes=_minutes(text, "time"))
            words = TIMING_WORDS.get(name, name[:30])
            said = "the catalog's" if value is None else f"{text} minutes"
            return change(
                f"{by} set the {words} of {course.title} to {said}.",
                lambda o: timing_change(bounds, o, name, value),
            )
        if action == "notice":
            text = argument("notice", "")
            cleaned = " ".join(text.split())
            detail = (
                f"{by} posted a notice for {course.title}: “{cleaned}”"
                if cleaned
                else f"{by} took down the notice of {course.title}."
            )
            return change(detail, lambda o: notice_change(bounds, o, text))
        owner = argument("user", "")
        server_name = argument("server", "")
        user = await self.sessions.client.get_user(owner)
        check_server_of_course(catalog, viewer, course, user, owner, server_name)
        assert user is not None
        label = f"{owner}'s {course.title} server" + (f" {server_name!r}" if server_name else "")
        if action == "stop":
            reply = await self.sessions.client.stop_server(owner, server_name)
            if not reply.ok:
                raise web.HTTPError(
                    502 if reply.status >= 500 else reply.status,
                    f"The hub did not stop {label}: {reply.message}",
                )
            detail = f"{by} stopped {label}."
            self.sessions.audit.record(
                now,
                "instructor-stop",
                user=owner,
                server=server_name,
                course=course.id,
                detail=detail,
                by=by,
            )
            return detail
        minutes = _minutes(argument("minutes", ""), "extension")
        server = (user.get("servers") or {})[server_name]
        started = parse_hub_time(server.get("started"))
        end = session_end_of(catalog, user, server_name)
        if started is None or end is None:
            raise OverrideRefused(
                f"{label} is not stopped at the end of class, so there is nothing to extend.",
                409,
            )
        new_end = end + timedelta(minutes=minutes)
        zone = course.course_schedule.timezone
        return change(
            f"{by} extended {label} by {minutes} minutes: it now stops at "
            f"{new_end.astimezone(zone):%H:%M} instead of {end.astimezone(zone):%H:%M}.",
            lambda o: extension_change(bounds, o, owner, server_name, started, minutes),
            user=owner,
            server=server_name,
        )


def course_page_handlers(
    prefix: str,
    api: CourseAPI,
    hub_auth: Any,
    changes: CourseChanges,
    jobs: StudentJobs | None = None,
) -> list[tuple]:
    """The page and its form actions, under ``prefix`` (OAuth callback: the reclaim page's)."""
    base = prefix.rstrip("/")
    settings = {
        "hub_auth": hub_auth,
        "course_api": api,
        "changes": changes,
        "student_jobs": jobs,
        "page_base": base,
    }
    name = r"([^/]+)"
    return [
        (f"{base}/courses", CoursePage, settings),
        (f"{base}/courses/{name}/{name}", CourseAction, settings),
    ]
