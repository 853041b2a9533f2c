"""The course-sessions service: a hub-managed service that pre-warms course servers before
class and warns about, then reclaims, them after the class and its grace period.

Run by the hub as ``python -m gpuspawner.sessions --catalog PATH`` (see
:func:`course_sessions_service` and :func:`sessions_service_role`).
"""

from .registration import SERVICE_NAME, course_sessions_service, sessions_service_role

__all__ = ["SERVICE_NAME", "course_sessions_service", "sessions_service_role"]
