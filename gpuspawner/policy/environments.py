"""Environments to choose from: which one a start runs, and whether its GPU can run it.

Design notes: docs/design/policy.md, "gpuspawner.policy.environments".
"""

from __future__ import annotations

from collections.abc import Iterable

from .capacity import Refusal
from .catalog_models import SoftwareEnvironment
from .entitlements import Profile
from .share import GPUDevice

MAX_ID_LENGTH = 100


def choose_environment(profile: Profile, requested: object) -> SoftwareEnvironment | None:
    """The environment a start of ``profile`` runs: ``requested`` (an id) if the profile
    offers it, its first one when nothing is requested, None for a profile without a
    choice. Anything else is a :class:`Refusal` saying what to do."""
    offered = profile.environments
    if requested is None or requested == "":
        return offered[0] if offered else None
    if not isinstance(requested, str) or len(requested) > MAX_ID_LENGTH:
        raise Refusal(
            "invalid",
            "The environment must be one of the environment ids on the start page, "
            'as a string, such as {"profile": "ml101", "environment": "pytorch"}.',
            status=400,
        )
    if not offered:
        raise Refusal(
            "invalid",
            f"{profile.title} offers no choice of environment, so it cannot run "
            f"{requested[:80]!r}. Start it without choosing an environment.",
            status=400,
        )
    chosen = next((e for e in offered if e.id == requested), None)
    if chosen is None:
        choices = ", ".join(f"{e.title} ({e.id})" for e in offered)
        raise Refusal(
            "environment-not-offered",
            f"{profile.title} does not offer the environment {requested[:80]!r}. "
            f"Choose one of its environments on the start page: {choices}.",
            status=403,
        )
    return chosen


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def unmet_requirement(environment: SoftwareEnvironment, device: GPUDevice) -> str | None:
    """Why ``device`` cannot run ``environment`` (a clause such as "has CUDA 12.2"), or None
    when it can, or when its versions are not known."""
    requires = environment.requires
    if requires is None:
        return None
    if requires.cuda and device.cuda and _version(device.cuda) < _version(requires.cuda):
        return f"its driver supports CUDA {device.cuda}"
    if requires.driver and device.driver and _version(device.driver) < _version(requires.driver):
        return f"its driver is version {device.driver}"
    return None


def requirement_refusal(
    environment: SoftwareEnvironment,
    profile_title: str,
    devices: Iterable[GPUDevice],
    *,
    given: bool = True,
) -> Refusal | None:
    """The refusal of a start whose GPU (``devices``: those it was ``given``, or else all
    it could get) is known not to meet ``environment``'s requirement; None when some device
    meets it or its versions are unknown (``given``: when every device does)."""
    reasons = [(d, unmet_requirement(environment, d)) for d in devices]
    unmet = [(d, why) for d, why in reasons if why is not None]
    if not unmet or (not given and len(unmet) < len(reasons)):
        return None
    device, why = unmet[0]
    assert environment.requires is not None
    which = (
        f"the GPU {profile_title} was given ({device.label}) cannot run it: {why}"
        if given
        else f"none of the GPUs {profile_title} can use here can run it ({device.label}: {why})"
    )
    return Refusal(
        "environment-requirement",
        f"The environment {environment.title} needs {environment.requires.describe()}, "
        f"and {which}. Choose another environment on the start page, or ask the hub admins "
        "which GPUs have a newer driver.",
        status=409,
    )


def devices_that_cannot_run(
    environment: SoftwareEnvironment, devices: Iterable[GPUDevice]
) -> frozenset[str]:
    """Ids of the devices known not to meet ``environment``'s requirement."""
    return frozenset(d.id for d in devices if unmet_requirement(environment, d) is not None)
