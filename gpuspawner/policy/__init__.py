"""The hub's decisions, in plain Python (no JupyterHub, no Kubernetes).

Both spawners and the job service call these, so no path can grant what
another would refuse.
"""

from .admission import StartDecision, active_reservations, admit, seats_left
from .capacity import Allocation, CapacityPool, Refusal, Reservation
from .catalog import Catalog, CatalogError, CatalogProblem, Course, load_catalog
from .entitlements import Entitlement, Profile, ProfileKind, Role, UserIdentity, evaluate
from .schedule import ClassSession, CourseSchedule, Phase, WeeklyWindow
from .share import GPUDevice, GPUShare

__all__ = [
    "Allocation",
    "CapacityPool",
    "Catalog",
    "CatalogError",
    "CatalogProblem",
    "ClassSession",
    "Course",
    "CourseSchedule",
    "Entitlement",
    "GPUDevice",
    "GPUShare",
    "Phase",
    "Profile",
    "ProfileKind",
    "Refusal",
    "Reservation",
    "Role",
    "StartDecision",
    "UserIdentity",
    "WeeklyWindow",
    "active_reservations",
    "admit",
    "evaluate",
    "load_catalog",
    "seats_left",
]
