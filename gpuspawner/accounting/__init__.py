"""GPU-hour accounting: the usage record, budgets and usage reports.

- :mod:`.intervals`: share × time as exact fractions, clipping, weeks in a time zone (pure);
- :mod:`.store`: the usage record (SQLAlchemy; SQLite or PostgreSQL), one row per interval;
- :mod:`.budgets`: what a start is charged to, what is left, and the refusal past a budget;
- :mod:`.report`: GPU-hours per user, course, research allocation, group or term, as CSV
  and JSON (``gpuspawner usage``, the course-sessions service's usage API).

The record is configured once, ``c.GPUAdmission.usage_db_url``; the hub's spawners and
the job service write to it through :class:`~gpuspawner.core.admission.GPUAdmission`.
"""
