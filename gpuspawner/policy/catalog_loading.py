"""Loading a catalog: its YAML files read with line numbers, validated and assembled into
one :class:`~.catalog.Catalog`, the instructors' overrides applied; an error names the
file, the line and the field."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from .catalog import Catalog, CatalogError, CatalogProblem, Origin, field_label
from .catalog_fields import FieldError
from .catalog_models import (
    CatalogFile,
    Course,
    JobFlavor,
    ProfileSection,
    ResearchAllocation,
    Settings,
    SoftwareEnvironment,
    StandingProfile,
)
from .course_overrides import with_overrides
from .schedule import CourseSchedule, parse_timezone
from .yaml_source import LineMap, YAMLSourceError, line_for, load_with_lines


def load_catalog(path: str | Path) -> Catalog:
    """Read and validate a catalog file or folder; raises :class:`CatalogError`."""
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        if not files:
            raise CatalogError(
                [CatalogProblem(root, None, "", "contains no .yaml or .yml catalog files")]
            )
    elif root.is_file():
        files = [root]
    else:
        raise CatalogError(
            [CatalogProblem(root, None, "", "does not exist; give a catalog file or folder")]
        )
    problems: list[CatalogProblem] = []
    parsed: list[tuple[Path, CatalogFile, LineMap]] = []
    for file in files:
        try:
            data, lines = load_with_lines(file)
        except YAMLSourceError as error:
            problems.append(CatalogProblem(file, error.line, error.field, error.message))
            continue
        if data is None:
            data = {}
        if not isinstance(data, dict):
            problems.append(
                CatalogProblem(
                    file,
                    lines.get(()),
                    "",
                    "must be a mapping with settings, standing, courses and/or research at "
                    "the top (and flavors and environments, if any)",
                )
            )
            continue
        try:
            parsed.append((file, CatalogFile.model_validate(data), lines))
        except ValidationError as error:
            for item in error.errors():
                loc = tuple(item["loc"]) + _located_field(item)
                problems.append(
                    CatalogProblem(
                        file,
                        line_for(lines, loc),
                        field_label(loc),
                        _clean_message(item, _allowed_fields(loc)),
                    )
                )
    if problems:
        raise CatalogError(problems)
    catalog = _assemble(parsed)
    if not (catalog.courses or catalog.standing or catalog.research or catalog.flavors):
        # Most likely a file emptied by mistake: refusing it keeps the hub on its last good
        # catalog instead of taking every profile away from everyone.
        raise CatalogError(
            [
                CatalogProblem(
                    root,
                    None,
                    "",
                    "holds no courses, standing profiles, research allocations or job "
                    "flavors (it is empty, or only has comments or settings), so nobody "
                    "could start anything; add at least one, such as a standing profile "
                    "with an id and a title",
                )
            ]
        )
    return with_overrides(catalog)


def _profile_ids(content: CatalogFile) -> list[tuple[str, int, str]]:
    """``(section, index, id)`` of every profile in one file."""
    return [
        *(("standing", i, p.id) for i, p in enumerate(content.standing)),
        *(("courses", i, c.id) for i, c in enumerate(content.courses)),
        *(("research", i, r.id) for i, r in enumerate(content.research)),
        *(("flavors", i, f.id) for i, f in enumerate(content.flavors)),
    ]


def _profile_sections(content: CatalogFile) -> list[tuple[str, int, ProfileSection]]:
    """``(section, index, profile)`` of every standing, course and research profile in one
    file (the sections that offer environments and storage)."""
    return [
        (section, index, entry)
        for section, entries in (
            ("standing", content.standing),
            ("courses", content.courses),
            ("research", content.research),
        )
        for index, entry in enumerate(entries)
    ]


def _assemble(parsed: list[tuple[Path, CatalogFile, LineMap]]) -> Catalog:
    problems: list[CatalogProblem] = []
    settings: Settings | None = None
    settings_file: Path | None = None
    courses: list[Course] = []
    research: list[ResearchAllocation] = []
    standing: list[StandingProfile] = []
    flavors: list[tuple[Path, int, JobFlavor, LineMap]] = []
    sources: dict[str, Path] = {}
    origins: dict[str, Origin] = {}
    settings_origin: Origin | None = None
    seen: dict[str, tuple[Path, int | None]] = {}
    defaults: list[tuple[str, Path, int, int | None]] = []
    environments: dict[str, SoftwareEnvironment] = {}
    environment_origins: dict[str, Origin] = {}
    for file, content, lines in parsed:
        for index, software in enumerate(content.environments):
            if software.id in environments:
                other = environment_origins[software.id]
                problems.append(
                    CatalogProblem(
                        file,
                        lines.get(("environments", index, "id")),
                        f"environments[{index}].id",
                        f"the environment id {software.id!r} is already used at "
                        f"{other.path}:{other.line('id')}; environment ids must be unique",
                    )
                )
                continue
            environments[software.id] = software
            environment_origins[software.id] = Origin(file, ("environments", index), lines)
        if content.settings is not None:
            if settings is not None:
                problems.append(
                    CatalogProblem(
                        file,
                        lines.get(("settings",)),
                        "settings",
                        f"settings are already defined in {settings_file}; keep them in one file",
                    )
                )
            settings, settings_file = content.settings, file
            settings_origin = Origin(file, ("settings",), lines)
        for section, index, profile_id in _profile_ids(content):
            line = lines.get((section, index, "id")) or lines.get((section, index))
            if profile_id in seen:
                other_file, other_line = seen[profile_id]
                problems.append(
                    CatalogProblem(
                        file,
                        line,
                        f"{section}[{index}].id",
                        f"the id {profile_id!r} is already used at {other_file}:{other_line}; "
                        "profile ids must be unique across the catalog",
                    )
                )
                continue
            seen[profile_id] = (file, line)
            sources[profile_id] = file
            origins[profile_id] = Origin(file, (section, index), lines)
        for index, profile in enumerate(content.standing):
            if profile.default:
                where = lines.get(("standing", index, "default"))
                defaults.append((profile.id, file, index, where))
        courses.extend(content.courses)
        research.extend(content.research)
        standing.extend(content.standing)
        flavors.extend((file, i, f, lines) for i, f in enumerate(content.flavors))
    known_courses = {c.id for c in courses}
    known_research = {r.id for r in research}
    for file, index, flavor, lines in flavors:
        for kind, names, known in (
            ("courses", flavor.access.courses, known_courses),
            ("research", flavor.access.research, known_research),
        ):
            for position, name in enumerate(names):
                if name not in known:
                    loc = ("flavors", index, "access", kind, position)
                    problems.append(
                        CatalogProblem(
                            file,
                            line_for(lines, loc),
                            field_label(loc),
                            f"there is no {'course' if kind == 'courses' else 'research allocation'}"
                            f" with the id {name!r} in the catalog",
                        )
                    )
    for file, content, lines in parsed:
        for section, index, entry in _profile_sections(content):
            for position, wanted in enumerate(entry.environments):
                if wanted in environments:
                    continue
                env_loc = (section, index, "environments", position)
                ids = ", ".join(sorted(environments)) or "none"
                problems.append(
                    CatalogProblem(
                        file,
                        line_for(lines, env_loc),
                        field_label(env_loc),
                        f"there is no environment with the id {wanted!r} in the catalog "
                        f"(its environments: {ids}); add it under environments: or "
                        "fix the id",
                    )
                )
            entry._offered = tuple(environments[e] for e in entry.environments if e in environments)
    if len(defaults) > 1:
        (first_id, first_file, _, first_line), (second_id, file, index, line) = defaults[:2]
        problems.append(
            CatalogProblem(
                file,
                line,
                f"standing[{index}].default",
                f"only one standing profile may be the default; both {first_id!r} "
                f"({first_file}:{first_line}) and {second_id!r} say default: true",
            )
        )
    settings = settings or Settings()
    for file, content, lines in parsed:
        for index, course in enumerate(content.courses):
            if course.instructor_bounds is None:
                continue
            for key, message in settings.instructor_bounds.outside(course.instructor_bounds):
                bounds_loc = ("courses", index, "instructor_bounds", key)
                problems.append(
                    CatalogProblem(
                        file, line_for(lines, bounds_loc), field_label(bounds_loc), message
                    )
                )
    if settings.experimental_zone is None:
        for file, content, lines in parsed:
            for section, index, entry in _profile_sections(content):
                for position, mount in enumerate(entry.storage):
                    if mount.source != "experimental":
                        continue
                    zone_loc = (section, index, "storage", position, "source")
                    problems.append(
                        CatalogProblem(
                            file,
                            line_for(lines, zone_loc),
                            field_label(zone_loc),
                            "the catalog has no experimental zone to mount; add "
                            "settings.experimental_zone (wipe_at, warning, and on "
                            "Kubernetes its volume)",
                        )
                    )
    if problems:
        raise CatalogError(problems)
    for course in courses:
        spec = course.schedule
        zone = parse_timezone(spec.timezone or settings.timezone)
        windows = tuple(w for ws in spec.windows for w in ws.weekly())
        course._schedule = CourseSchedule(
            timezone=zone,
            windows=windows,
            first_day=spec.term.first_day,
            last_day=spec.term.last_day,
            no_class=frozenset(spec.no_class),
            lead_time=spec.lead_time if spec.lead_time is not None else settings.lead_time,
            grace=spec.grace if spec.grace is not None else settings.grace,
            prewarm=spec.prewarm,
        )
    return Catalog(
        settings,
        courses,
        research,
        standing,
        sources,
        [f for _, _, f, _ in flavors],
        origins,
        settings_origin,
        list(environments.values()),
        environment_origins,
    )


def _located_field(error: Mapping[str, Any]) -> tuple[Any, ...]:
    """The field a block's check was about (:class:`FieldError`), below the error's loc."""
    raised = (error.get("ctx") or {}).get("error")
    return tuple(raised.field) if isinstance(raised, FieldError) else ()


def _clean_message(error: Mapping[str, Any], allowed: list[str] | None) -> str:
    kind = error.get("type", "")
    message = str(error.get("msg", ""))
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if kind == "extra_forbidden":
        name = error["loc"][-1]
        hint = f"; expected one of: {', '.join(allowed)}" if allowed else ""
        return f"unknown field {name!r} (a typo?){hint}"
    if kind == "missing":
        return "is required but missing"
    if kind in ("date_from_datetime_parsing", "date_parsing", "date_type"):
        return f"expected a date as YYYY-MM-DD, got {error.get('input')!r}"
    if kind in ("list_type",):
        return f"expected a list, got {error.get('input')!r}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a block of fields (a mapping), got {error.get('input')!r}"
    if kind.startswith(
        ("int_", "float_", "greater_than", "less_than", "bool_", "string_", "too_short")
    ):
        return f"{message[0].lower()}{message[1:]}, got {error.get('input')!r}"
    return message


def _allowed_fields(loc: tuple) -> list[str] | None:
    """The field names allowed at the parent of ``loc``, for 'unknown field' hints."""
    model: Any = CatalogFile
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return None
        annotation = fields[part].annotation
        model = _unwrap_model(annotation)
        if model is None:
            return None
    fields = getattr(model, "model_fields", None)
    return sorted(fields) if fields else None


def _unwrap_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _unwrap_model(arg)
        if found is not None:
            return found
    return None


# -- the assembled catalog --------------------------------------------------------------
