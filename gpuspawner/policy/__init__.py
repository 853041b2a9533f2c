"""The hub's decisions, in plain Python (no JupyterHub, no Kubernetes).

Both spawners and the job service call these, so no path can grant what
another would refuse.
"""

from .admission import (
    JobDecision,
    JobForecast,
    StartDecision,
    active_reservations,
    admit,
    admit_job,
    forecast_job,
    seats_left,
)
from .capacity import Allocation, CapacityPool, Refusal, Reservation
from .catalog import Catalog, CatalogError, CatalogProblem
from .catalog_loading import load_catalog
from .catalog_models import Course, JobFlavor
from .entitlements import Entitlement, Profile, ProfileKind, Role, UserIdentity, evaluate
from .flavors import FlavorEntitlement, flavor_entitlements, flavor_for
from .schedule import ClassSession, CourseSchedule, Phase, WeeklyWindow
from .share import GPUDevice, GPUShare

__all__ = [
    "FlavorEntitlement",
    "JobDecision",
    "JobFlavor",
    "admit_job",
    "forecast_job",
    "JobForecast",
    "flavor_entitlements",
    "flavor_for",
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
