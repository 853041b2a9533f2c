"""Moments on the hub's pages, told in the reader's own time zone.

The server writes each moment as a ``<time datetime="...">`` element whose text is the
moment in the zone the hub knows (the course's): "12:10 CET". ``templates/local_times.html``
then tells it again in the browser's zone, with that zone's short name ("06:10 EST"), in
the same words :func:`~gpuspawner.policy.wording.when` uses ("tomorrow 10:00", "Mon 10:00").
Without scripts the server's text stays, and it names its zone.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, tzinfo

from markupsafe import Markup, escape

from .policy.wording import Told


def zone_name(moment: datetime, zone: tzinfo) -> str:
    """The short name of ``zone`` at ``moment``: "CET", "CEST", "UTC"; the zone's key
    ("Europe/Zurich") where it has none."""
    return moment.astimezone(zone).tzname() or str(zone)


def time_element(moment: datetime, words: str, zone: tzinfo) -> Markup:
    """``<time datetime="2026-11-18T11:10:00+00:00" data-local-time>12:10 CET</time>``:
    ``words`` (the moment as told in ``zone``) followed by the zone's short name."""
    return Markup('<time datetime="{}" data-local-time>{} {}</time>').format(
        moment.astimezone(UTC).isoformat(), words, zone_name(moment, zone)
    )


def clock_element(moment: datetime, zone: tzinfo, *, day: date | None = None) -> Markup:
    """A clock time that recurs or belongs to a listed day: ``<time datetime="..."
    data-local-time="clock">03:00 CET</time>``. The page tells it again as a clock time
    in the reader's zone ("21:00 EST"), with the weekday ("Sun 21:00 EST") where ``day``,
    the day of ``zone`` it is listed under, is not the reader's day of that moment."""
    local = moment.astimezone(zone)
    listed = Markup(' data-day="{}"').format(day.isoformat()) if day is not None else ""
    return Markup('<time datetime="{}" data-local-time="clock"{}>{:%H:%M} {}</time>').format(
        moment.astimezone(UTC).isoformat(), listed, local, zone_name(moment, zone)
    )


def told_html(told: Told, zone: tzinfo) -> Markup:
    """A sentence with its moments as ``<time>`` elements ("Open until <time ...>12:10
    CET</time>"); the rest of the sentence is escaped."""
    pieces = [
        time_element(moment, words, zone)
        for moment, words in zip(told.moments, told.words, strict=True)
    ]
    return Markup(escape(told.pattern)).format(*pieces)
