"""The spawn page: one card per profile, rendered from the user's entitlements."""

from __future__ import annotations

from dataclasses import dataclass

from jinja2 import Environment, PackageLoader, select_autoescape

from .policy.entitlements import Entitlement, ProfileKind
from .policy.share import GPUDevice
from .policy.storage import parse_mounts
from .policy.units import format_bytes

_templates = Environment(
    loader=PackageLoader("gpuspawner", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


@dataclass(frozen=True)
class ProfileCard:
    """What one card shows."""

    id: str
    title: str
    description: str
    kind: str
    available: bool
    status: str
    gpu: str
    resources: str
    seats: str
    full: bool
    role: str
    default: bool
    storage: str = ""
    """The folders it mounts: "course-data at /data (read-only), scratch at /scratch"."""
    budget: str = ""
    """The GPU-hours left: "4.5 of your 6 GPU-hours left this week (renews ...)"."""
    budget_exhausted: bool = False

    @classmethod
    def build(
        cls,
        entitlement: Entitlement,
        seats_left: int | None,
        devices: list[GPUDevice],
        *,
        local: bool = False,
        budget: str = "",
        budget_exhausted: bool = False,
    ) -> ProfileCard:
        """The card of one entitlement; ``local``: storage shows where it appears on one
        machine (folders in the home); ``budget``: its budget line, if one applies."""
        profile = entitlement.profile
        share = profile.share
        if share is None:
            gpu = "No GPU"
        else:
            matching = [d for d in devices if d.matches_model(share.models)]
            models = sorted({d.model for d in matching})
            model = models[0] if len(models) == 1 else None
            memory = matching[0].memory_mib if model else None
            gpu = share.describe(model, memory)
            if matching and all(d.simulated for d in matching):
                gpu += " (simulated GPU)"
        parts = []
        if profile.resources.cpu:
            cpu = profile.resources.cpu
            parts.append(f"{cpu:g} CPU" + ("s" if cpu != 1 else ""))
        if profile.resources.memory:
            parts.append(f"{format_bytes(profile.resources.memory)} RAM")
        if seats_left is None:
            seats = ""
        elif seats_left == 0:
            seats = "No GPU seats left right now"
        else:
            seats = f"{seats_left} GPU seat{'s' if seats_left != 1 else ''} left"
        return cls(
            id=profile.id,
            title=profile.title,
            description=profile.description,
            kind=profile.kind.value,
            available=entitlement.available,
            status=entitlement.status,
            gpu=gpu,
            resources=", ".join(parts),
            seats=seats,
            full=seats_left == 0,
            role=entitlement.role.value if profile.kind is ProfileKind.COURSE else "",
            default=profile.default,
            storage=", ".join(m.describe(local=local) for m in parse_mounts(profile.storage)),
            budget=budget,
            budget_exhausted=budget_exhausted,
        )


def render_profile_cards(
    cards: list[ProfileCard],
    selected: str | None = None,
    gpus: list | None = None,
    notice: str = "",
) -> str:
    """HTML for JupyterHub's spawn form (inserted inside its <form>).

    ``notice``: why the user's last server ended without being asked to (out of memory).
    """
    startable = [c for c in cards if c.available]
    ids = {c.id for c in startable}
    if selected not in ids:
        selected = next((c.id for c in startable if c.default), None)
        if selected is None and startable:
            open_courses = [c for c in startable if c.kind == "course" and not c.full]
            selected = (open_courses or startable)[0].id
    return _templates.get_template("profiles.html").render(
        cards=cards, selected=selected, gpus=gpus or [], notice=notice
    )
