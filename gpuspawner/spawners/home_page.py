"""What the hub's home page says of a running server: its profile, its GPU share, when it stops.

Design notes: docs/design/hub.md, "gpuspawner.spawners.home_page".
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from markupsafe import Markup

from ..local_times import time_element
from ..policy import Allocation, Catalog
from ..policy.course_overrides import course_overrides
from ..policy.schedule import parse_timezone
from ..policy.share import WHOLE


@dataclass(frozen=True)
class RunningServer:
    """One running server as its owner's home page shows it."""

    title: str
    """The profile's title: "Machine Learning 101"."""
    share: str
    """The GPU share in words: "1/4 of an RTX 4090 (24 GiB)", or "No GPU"."""
    stops_at: datetime | None
    """When the hub stops it (class end plus grace); None: it is not stopped on a schedule."""
    zone: tzinfo = UTC
    """The zone its times are told in: the course's, else the catalog's."""
    course: bool = False
    """A course server: another course can be chosen after stopping it."""

    @property
    def stops(self) -> str:
        """ "12:10 CET", in the course's zone; empty when it has no end."""
        if self.stops_at is None:
            return ""
        local = self.stops_at.astimezone(self.zone)
        return f"{local:%H:%M} {local.tzname() or self.zone}"

    @property
    def stops_html(self) -> Markup:
        """The stop time as a ``<time>`` the page tells again in its reader's zone."""
        if self.stops_at is None:
            return Markup("")
        return time_element(
            self.stops_at, f"{self.stops_at.astimezone(self.zone):%H:%M}", self.zone
        )

    @property
    def stops_iso(self) -> str:
        """The stop time for the page's countdown script (UTC, ISO 8601)."""
        return self.stops_at.astimezone(UTC).isoformat() if self.stops_at else ""


def running_server(
    catalog: Catalog | None,
    profile_id: str,
    *,
    allocation: Allocation | None,
    share_description: str | None,
    session_end: datetime | None,
    owner: str = "",
    server_name: str = "",
    started: datetime | None = None,
) -> RunningServer:
    """The home page's view of a server of ``profile_id`` (a course, research or standing
    profile); ``share_description`` is the Grant's words for the share when the hub
    granted it in this process, else the share is told from the saved allocation.
    ``owner``'s server ``server_name`` started at ``started`` stops later than
    ``session_end`` when an instructor extended it on the course page."""
    title, course = profile_id, False
    zone: tzinfo = UTC
    if catalog is not None:
        zone = parse_timezone(catalog.settings.timezone)
        if profile_id in catalog.courses_by_id:
            found = catalog.courses_by_id[profile_id]
            title, zone, course = found.title, found.course_schedule.timezone, True
            if session_end is not None:
                session_end += course_overrides(found).extension_for(owner, server_name, started)
        elif profile_id in catalog.research_by_id:
            title = catalog.research_by_id[profile_id].title
        elif profile_id in catalog.standing_by_id:
            title = catalog.standing_by_id[profile_id].title
    if share_description:
        share = share_description
    elif allocation is None:
        share = "No GPU"
    elif allocation.fraction == WHOLE:
        count = len(allocation.device_ids)
        share = "1 whole GPU" if count == 1 else f"{count} whole GPUs"
    else:
        share = f"{allocation.fraction} of a GPU"
    return RunningServer(title, share, session_end, zone, course)


def ended_unasked(exit_status: int | None, at: datetime, zone: tzinfo = UTC) -> str:
    """What a server's owner is told when it ended at ``at`` without the hub stopping it:
    ``exit_status`` as ``Popen.returncode`` gives it (negative: killed by that signal),
    None when the hub could not learn it (the server started before the hub's last
    restart). Empty for a server that exited by itself without an error (JupyterLab's
    File > Shut Down)."""
    local = at.astimezone(zone)
    when = f"{local:%H:%M} {local.tzname() or zone}"
    lost = "Work not saved before then is lost."
    if exit_status is None:
        return (
            f"Your last server ended by {when} without the hub stopping it (it had started "
            "before the hub last restarted, so the hub cannot tell how it ended). "
            f"{lost} Start it again; if this happens again, tell the hub admins."
        )
    if exit_status < 0:
        number = -exit_status
        try:
            name = f"{signal.Signals(number).name}, signal {number}"
        except ValueError:
            name = f"signal {number}"
        return (
            f"Your last server was stopped from outside the hub at {when} ({name}). "
            f"{lost} Start it again; if this happens again, tell the hub admins."
        )
    if exit_status > 0:
        return (
            f"Your last server ended with an error at {when} (exit code {exit_status}). "
            f"{lost} Start it again; if this happens again, tell the hub admins."
        )
    return ""
