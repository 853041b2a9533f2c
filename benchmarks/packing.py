"""Packing over a term: a week of classes, research servers and jobs on a mixed fleet.

A seeded generator writes a term's catalog (courses with 1/8, 1/4 and 1/2 shares and
memory-only shares, research allocations with whole GPUs, job flavors) and its demand:
which student starts which class server at which hour and leaves when, which researcher
holds a whole GPU from when to when, which job arrives when and runs how long. The demand
is then placed hour by hour, with departures first, queued jobs next and arrivals last:

- **ours**: the real admission, ``admit`` / ``admit_job`` of :mod:`gpuspawner.policy`
  on a :class:`~gpuspawner.policy.CapacityPool` (entitlements, per-user and per-course
  limits, reserved seats; a slice on the GPU where it costs least, then best fit);
- **first-fit**: each request on the first GPU (by index) where its fraction and memory
  still fit, no limits and no reservations;
- **whole GPU**: each request takes a whole free GPU.

A refused server asks again every hour until its owner would have left (the refusal says
"Try again in a few minutes"); a job that cannot start waits in a first-in, first-out
queue and is retried every hour. Refused servers ask before the hour's new arrivals.

**What is counted.** Every request has a *nominal* size, the least it could take on any
GPU it may use: its fraction of the GPU's time (a memory-only share on the largest card,
a whole GPU 1) and its memory (a fraction share on the smallest card, a whole GPU that
card's memory). Packing sums the nominal sizes of what runs, hour by hour, as GPU-hours
(time) and GiB-hours (memory).

**The physical limit** (a fluid bound: no placement of these requests can serve more) is
the smaller of ``sum over hours of min(fleet, servers wanting a GPU + jobs arrived so
far)`` and ``sum over hours of min(fleet, servers wanting a GPU) + every job run in
full``: a request holds at least its nominal size wherever it runs, a device holds at most
itself, and a job runs only once, after it arrives. The benchmark asserts that every
placement stays under it, hour by hour and over the term.

**MIG.** The A100s are split into MIG slices (``GPUDevice.mig``). The capacity pool books a
share there as the MIG slice the MIG back end will give it: one function,
:func:`gpuspawner.policy.mig_profiles.choose_mig_profile`, decides both (a 1/4 share on an
A100 80 GB is a ``2g.20gb``: 2 of 7 compute slices and 20 GB, so three fit, not four), and
it books no whole GPU on a split card (the back end asks for an unpartitioned
``nvidia.com/gpu``, which a split card does not offer). The anchors keep their own rules:
first-fit books shares there by fraction and memory as on any card, and whole GPU takes the
card (checked as its ``7g.80gb`` slice). After each hour the shares held on every A100 are
turned into their slices; those that no longer fit the card's 7 compute slices and 80 GB (in
booking order) are *stranded*: admitted, but their pods could not be scheduled. Ours strands
none (the check stays, as a guard). Slice positions (which slices can sit side by side) are
modelled neither by the pool nor by the check, and both assume slices are made to order
(dynamic MIG), not a fixed layout set by the MIG Manager.

**The target** (95% of the limit "where the mix allows") is judged on the hours in which
the whole demand (nominal sizes, jobs started on arrival) fits the fleet in time and in
memory: there the limit runs every server, so the number is the servers' nominal time and
memory ours runs, after MIG, over all the servers want. Crowded hours count in the week's
totals, which are printed too.

**Where ours loses** is printed per fitting hour, by cause: servers refused in a fitting
hour and not yet started by a retry, and servers refused in an earlier crowded hour and not
yet started by a retry (the limit runs them as soon as demand fits the fleet).

The generator is this module's own, not :mod:`benchmarks.synthetic_catalog`: that catalog
has no memory-only shares and no job flavors, and its 20,000 enrolments would swamp any
fleet, so nothing would measure packing rather than refusals.
"""

from __future__ import annotations

import random
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

import yaml

from gpuspawner.backends import make_backend
from gpuspawner.core.inventory import simulated_gpus
from gpuspawner.policy import CapacityPool, Catalog, GPUShare, Refusal, UserIdentity, admit
from gpuspawner.policy.admission import WAIT_CODES, JobDecision, StartDecision, admit_job
from gpuspawner.policy.catalog_fields import GPUSpec
from gpuspawner.policy.catalog_loading import load_catalog
from gpuspawner.policy.mig_profiles import MIGProfile, UnknownMIGModel, find_mig_model
from gpuspawner.policy.share import WHOLE, GPUDevice

from .report import Row, Section
from .timing import Timing

SEED = 20260323
WEEK_START = datetime(2026, 3, 23, tzinfo=UTC)
HOURS = 7 * 24
TARGET = 0.95

FLEET = (
    {"model": "RTX A5000", "memory": "24GiB", "count": 8},
    {"model": "A100-SXM4-80GB", "memory": "80GiB", "count": 4, "mig": True},
    {"model": "H100 80GB HBM3", "memory": "80GiB", "count": 4},
)
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri")
COURSE_SHARES = (
    {"fraction": "1/8"},
    {"fraction": "1/4"},
    {"fraction": "1/2"},
    {"memory": "6GiB"},
    {"memory": "10GiB"},
)


@dataclass(frozen=True)
class Request:
    """One server or job: who, what, when it arrives and when it leaves (hours of the week)."""

    key: str
    user: UserIdentity
    subject: str
    """The course or research id (servers), or the flavor id (jobs)."""
    share: GPUShare
    arrive: int
    leave: int
    """Servers: the hour they stop. Jobs: ``leave - arrive`` is how long they run."""
    job: bool = False

    @property
    def duration(self) -> int:
        return self.leave - self.arrive


@dataclass
class Term:
    """The generated catalog and demand."""

    catalog_data: dict
    requests: list[Request]


def generate_term(
    seed: int = SEED,
    *,
    courses: int = 22,
    class_size: tuple[int, int] = (10, 36),
    researchers: int = 6,
    jobs: int = 90,
) -> Term:
    """A week of demand, the same for the same arguments."""
    rng = random.Random(seed)
    term = {
        "first_day": WEEK_START.date() - timedelta(days=40),
        "last_day": WEEK_START.date() + timedelta(days=60),
    }
    course_entries: list[dict] = []
    requests: list[Request] = []
    for index in range(courses):
        course_id = f"class-{index:02d}"
        share = COURSE_SHARES[index % len(COURSE_SHARES)]
        size = rng.randint(*class_size)
        students = [f"{course_id}-s{n:02d}" for n in range(size)]
        windows = []
        for day in rng.sample(range(len(DAYS)), rng.randint(1, 2)):
            start = rng.randint(8, 16)
            length = rng.choice((2, 2, 3))
            windows.append(
                {"day": DAYS[day], "start": f"{start:02d}:00", "end": f"{start + length:02d}:00"}
            )
            first = day * 24 + start
            for name in students:
                if rng.random() > 0.85:  # absent
                    continue
                arrive = first + (1 if rng.random() < 0.2 else 0)
                leave = first + length - (1 if rng.random() < 0.15 else 0)
                if leave > arrive:
                    user = UserIdentity(name, frozenset())
                    requests.append(
                        Request(f"server:{name}/", user, course_id, _share(share), arrive, leave)
                    )
        entry: dict = {
            "id": course_id,
            "title": f"Lab {index:02d}",
            "enrolment": {"users": students},
            "gpu": share,
            "schedule": {"timezone": "UTC", "term": term, "windows": windows},
        }
        if index % 7 == 3:
            entry["reserved_seats"] = 4
        if index % 5 == 1:
            entry["max_gpu_servers"] = size
        course_entries.append(entry)

    research_entries = []
    names = [f"res-{n:02d}" for n in range(researchers)]
    for index, name in enumerate(names):
        gpu: dict = {"count": 1}
        if index % 2 == 0:
            gpu["model"] = ["A100", "H100"]
        research_entries.append(
            {
                "id": f"lab-{index:02d}",
                "title": f"Research {index:02d}",
                "users": [name],
                "expires": WEEK_START.date() + timedelta(days=200),
                "gpu": gpu,
            }
        )
        for day in range(7):
            if rng.random() < (0.75 if day < 5 else 0.25):
                arrive = day * 24 + rng.randint(8, 12)
                leave = min(arrive + rng.randint(3, 9), HOURS)
                requests.append(
                    Request(
                        f"server:{name}/",
                        UserIdentity(name, frozenset()),
                        f"lab-{index:02d}",
                        _share(gpu),
                        arrive,
                        leave,
                    )
                )
    flavors: list[dict] = [
        {
            "id": "train-whole",
            "title": "Whole GPU",
            "gpu": {"count": 1},
            "max_running_per_user": 4,
            "access": {"research": [e["id"] for e in research_entries]},
        },
        {
            "id": "train-half",
            "title": "Half GPU",
            "gpu": {"fraction": "1/2"},
            "max_running_per_user": 4,
            "access": {"research": [e["id"] for e in research_entries]},
        },
        {
            "id": "homework",
            "title": "Homework",
            "gpu": {"memory": "8GiB"},
            "max_running_per_user": 2,
            "access": {"courses": [c["id"] for c in course_entries]},
        },
    ]
    enrolled = [name for entry in course_entries for name in entry["enrolment"]["users"]]
    for number in range(jobs):
        flavor = rng.choices(flavors, (3, 3, 4))[0]
        owner = rng.choice(names) if flavor["id"] != "homework" else rng.choice(enrolled)
        arrive = rng.randrange(0, HOURS - 6)
        duration = rng.randint(1, 6)
        requests.append(
            Request(
                f"job:{number:04d}",
                UserIdentity(owner, frozenset()),
                flavor["id"],
                _share(flavor["gpu"]),
                arrive,
                arrive + duration,
                job=True,
            )
        )
    catalog = {
        "settings": {
            "timezone": "UTC",
            "lead_time": "10m",
            "grace": "0m",
            "max_gpu_servers_per_user": 1,
        },
        "courses": course_entries,
        "research": research_entries,
        "flavors": flavors,
    }
    requests.sort(key=lambda r: (r.arrive, r.key))
    return Term(catalog, requests)


def _share(spec: dict) -> GPUShare:
    return GPUSpec.model_validate(spec).to_share()


def fleet(specs: Iterable[dict] = FLEET) -> list[GPUDevice]:
    """Simulated GPUs; ``"mig": True`` marks an entry's cards as split into MIG slices."""
    specs = [dict(s) for s in specs]
    devices = simulated_gpus(specs)
    split = [bool(s.get("mig")) for s in specs for _ in range(int(s.get("count", 1)))]
    return [replace(d, mig=True) if mig else d for d, mig in zip(devices, split, strict=True)]


def nominal(share: GPUShare, devices: list[GPUDevice]) -> tuple[Fraction, int]:
    """The least time fraction and memory (MiB) ``share`` takes on any GPU it may use."""
    matching = [d for d in devices if d.matches_model(share.models)]
    demands = [share.demand_on(d) for d in matching]
    return min(d.fraction for d in demands), min(d.memory_mib for d in demands)


# -- placements -----------------------------------------------------------------------------


@dataclass
class Held:
    device_ids: tuple[str, ...]
    fraction: Fraction
    memory_mib: int


class Placement(ABC):
    """One way of placing requests; subclasses say where a request goes, or why not."""

    name = ""

    def __init__(self, devices: list[GPUDevice]):
        self.devices = devices
        self.used: dict[str, list] = {d.id: [Fraction(0), 0] for d in devices}
        self.held: dict[str, Held] = {}

    @abstractmethod
    def place(self, request: Request, now: datetime, running_jobs: list[str]) -> Held | str:
        """The slice held, or the refusal code."""

    def _book(self, request: Request, held: Held) -> Held:
        for device_id in held.device_ids:
            self.used[device_id][0] += held.fraction
            self.used[device_id][1] += held.memory_mib
        self.held[request.key] = held
        return held

    def release(self, request: Request) -> None:
        held = self.held.pop(request.key)
        for device_id in held.device_ids:
            self.used[device_id][0] -= held.fraction
            self.used[device_id][1] -= held.memory_mib

    def free(self, share: GPUShare) -> tuple[Fraction, int]:
        """The fleet's free time and memory, pooled over the GPUs ``share`` may use."""
        matching = [d for d in self.devices if d.matches_model(share.models)]
        return (
            sum((WHOLE - self.used[d.id][0] for d in matching), Fraction(0)),
            sum(d.memory_mib - self.used[d.id][1] for d in matching),
        )


class Ours(Placement):
    """The real admission: ``admit`` / ``admit_job`` on the policy's capacity pool."""

    name = "ours (admission)"

    def __init__(self, devices: list[GPUDevice], catalog: Catalog):
        super().__init__(devices)
        self.catalog = catalog
        self.pool = CapacityPool(devices)

    def place(self, request: Request, now: datetime, running_jobs: list[str]) -> Held | str:
        try:
            decision: JobDecision | StartDecision
            if request.job:
                decision = admit_job(
                    self.catalog,
                    self.pool,
                    request.user,
                    request.subject,
                    key=request.key,
                    now=now,
                    running_jobs=running_jobs,
                )
            else:
                decision = admit(
                    self.catalog,
                    self.pool,
                    request.user,
                    request.subject,
                    key=request.key,
                    now=now,
                )
        except Refusal as refusal:
            return refusal.code
        allocation = decision.allocation
        assert allocation is not None
        return self._book(
            request, Held(allocation.device_ids, allocation.fraction, allocation.memory_mib)
        )

    def release(self, request: Request) -> None:
        super().release(request)
        self.pool.release(request.key)


class FirstFit(Placement):
    """The first GPU by index where the slice fits; whole GPUs on the first empty ones."""

    name = "first-fit"

    def place(self, request: Request, now: datetime, running_jobs: list[str]) -> Held | str:
        share = request.share
        matching = [d for d in self.devices if d.matches_model(share.models)]
        if share.is_whole:
            empty = [d for d in matching if self.used[d.id] == [0, 0]][: share.count]
            if len(empty) < share.count:
                return "full"
            return self._book(request, Held(tuple(d.id for d in empty), WHOLE, empty[0].memory_mib))
        for device in matching:
            demand = share.demand_on(device)
            fraction, memory = self.used[device.id]
            if (
                fraction + demand.fraction <= WHOLE
                and memory + demand.memory_mib <= device.memory_mib
            ):
                return self._book(request, Held((device.id,), demand.fraction, demand.memory_mib))
        return "full"


class WholeGPU(Placement):
    """Every request takes a whole free GPU (no sharing)."""

    name = "whole GPU"

    def place(self, request: Request, now: datetime, running_jobs: list[str]) -> Held | str:
        share = request.share
        count = max(share.count, 1)
        matching = [d for d in self.devices if d.matches_model(share.models)]
        empty = [d for d in matching if self.used[d.id][0] == 0][:count]
        if len(empty) < count:
            return "full"
        return self._book(request, Held(tuple(d.id for d in empty), WHOLE, empty[0].memory_mib))


# -- MIG ------------------------------------------------------------------------------------


class MIGCheck:
    """The MIG profile the MIG back end renders for a share on an A100, cached per share."""

    def __init__(self) -> None:
        self.backend = make_backend("mig", strategy="mixed")
        self.profiles: dict[tuple[GPUShare, str], MIGProfile] = {}

    def is_mig(self, device: GPUDevice) -> bool:
        if not device.mig:
            return False
        try:
            find_mig_model(device.model, device.memory_mib)
        except UnknownMIGModel:
            return False
        return True

    def profile(self, share: GPUShare, device: GPUDevice) -> MIGProfile:
        cached = self.profiles.get((share, device.id))
        if cached is None:
            model = find_mig_model(device.model, device.memory_mib)
            if share.is_whole:
                cached = max(model.profiles, key=lambda p: (p.slices, p.memory_gb))
            else:
                plan = self.backend.render(
                    share,
                    gpu_model=f"NVIDIA {device.model}",
                    gpu_memory_mib=device.memory_mib,
                    name="bench-gpu",
                )
                cached = MIGProfile.parse(plan.environment["GPUSPAWNER_GPU_MIG_PROFILE"])
            self.profiles[(share, device.id)] = cached
        return cached

    def stranded(self, held: list[tuple[Request, Held]], devices: dict[str, GPUDevice]) -> set[str]:
        """Keys booked on a MIG card whose profiles no longer fit it (in booking order)."""
        per_device: dict[str, list[Request]] = {}
        for request, slot in held:
            for device_id in slot.device_ids:
                if self.is_mig(devices[device_id]):
                    per_device.setdefault(device_id, []).append(request)
        out = set()
        for device_id, requests in per_device.items():
            device = devices[device_id]
            model = find_mig_model(device.model, device.memory_mib)
            slices = memory = 0
            for request in requests:
                profile = self.profile(request.share, device)
                if (
                    slices + profile.slices <= model.compute_slices
                    and memory + profile.memory_gb <= model.memory_gb
                ):
                    slices += profile.slices
                    memory += profile.memory_gb
                else:
                    out.add(request.key)
        return out


# -- the hour-by-hour run -------------------------------------------------------------------


@dataclass
class RefusedServer:
    """A server refused at ``hour``, and the later hour a retry ``started`` it, if any."""

    request: Request
    hour: int
    started: int | None = None


@dataclass
class Outcome:
    """What one placement served, hour by hour, and what it refused."""

    name: str
    time_hours: list[Fraction] = field(default_factory=lambda: [Fraction(0)] * HOURS)
    memory_hours: list[int] = field(default_factory=lambda: [0] * HOURS)
    """Nominal memory (MiB) of what runs, per hour."""
    mig_time_lost: list[Fraction] = field(default_factory=lambda: [Fraction(0)] * HOURS)
    mig_memory_lost: list[int] = field(default_factory=lambda: [0] * HOURS)
    server_time: list[Fraction] = field(default_factory=lambda: [Fraction(0)] * HOURS)
    server_memory: list[int] = field(default_factory=lambda: [0] * HOURS)
    """Servers alone (not jobs), without the shares stranded by MIG."""
    server_time_booked: list[Fraction] = field(default_factory=lambda: [Fraction(0)] * HOURS)
    """Servers alone, as booked (MIG stranding included)."""
    refused_at: list[int] = field(default_factory=lambda: [0] * HOURS)
    refused_servers: list[RefusedServer] = field(default_factory=list)
    """Each refused server, the hour it was first refused and the hour a retry started it."""
    served_on_retry: int = 0
    """Refused servers started later, when they asked again."""
    held_memory_hours: int = 0
    servers: int = 0
    servers_started: int = 0
    refused: int = 0
    refused_fitting: int = 0
    """Refused while the fleet's free capacity, pooled, held the request (the limit would not)."""
    refusal_codes: dict[str, int] = field(default_factory=dict)
    jobs: int = 0
    jobs_started: int = 0
    jobs_queued: int = 0
    jobs_queued_fitting: int = 0
    jobs_never_started: int = 0
    stranded_keys: set[str] = field(default_factory=set)
    max_device_fraction: Fraction = Fraction(0)
    max_device_memory_ratio: Fraction = Fraction(0)
    seconds: float = 0.0


def simulate(term: Term, placement: Placement, mig: MIGCheck | None = None) -> Outcome:
    """Place the term hour by hour: departures, then queued jobs, then arrivals."""
    devices = {d.id: d for d in placement.devices}
    out = Outcome(placement.name)
    sizes = {r.key: nominal(r.share, placement.devices) for r in term.requests}
    arrivals: dict[int, list[Request]] = {}
    for request in term.requests:
        arrivals.setdefault(request.arrive, []).append(request)
    running: dict[str, tuple[Request, int]] = {}  # key -> (request, hour it leaves)
    queue: list[Request] = []
    retrying: list[Request] = []  # refused servers, asked again every hour until they leave
    refusals: dict[int, RefusedServer] = {}  # by id(): a student's key recurs on each class day
    queued_once: set[str] = set()
    started = time.perf_counter()
    for hour in range(HOURS):
        now = WEEK_START + timedelta(hours=hour, minutes=1)
        for key, (request, leave) in list(running.items()):
            if leave <= hour:
                placement.release(request)
                del running[key]

        def attempt(
            request: Request, hour: int = hour, now: datetime = now, retry: bool = False
        ) -> bool:
            jobs_of_owner = [
                r.subject for r, _ in running.values() if r.job and r.user.name == request.user.name
            ]
            result = placement.place(request, now, jobs_of_owner)
            if isinstance(result, Held):
                leave = hour + request.duration if request.job else request.leave
                running[request.key] = (request, leave)
                if request.job:
                    out.jobs_started += 1
                else:
                    out.servers_started += 1
                    if retry:
                        out.served_on_retry += 1
                        refusals[id(request)].started = hour
                return True
            fits = _fits(sizes[request.key], placement.free(request.share))
            if request.job:
                if result not in WAIT_CODES:
                    raise AssertionError(f"{placement.name} can never start {request}: {result}")
                if request.key not in queued_once:
                    queued_once.add(request.key)
                    out.jobs_queued += 1
                    out.jobs_queued_fitting += fits
            elif not retry:
                out.refused += 1
                out.refused_at[hour] += 1
                refusals[id(request)] = RefusedServer(request, hour)
                out.refused_servers.append(refusals[id(request)])
                out.refused_fitting += fits
                out.refusal_codes[result] = out.refusal_codes.get(result, 0) + 1
            return False

        queue = [request for request in queue if not attempt(request)]
        retrying = [r for r in retrying if r.leave > hour and not attempt(r, retry=True)]
        for request in arrivals.get(hour, []):
            if request.job:
                out.jobs += 1
                if queue or not attempt(request):
                    if queue and request.key not in queued_once:
                        queued_once.add(request.key)
                        out.jobs_queued += 1
                        out.jobs_queued_fitting += _fits(
                            sizes[request.key], placement.free(request.share)
                        )
                    queue.append(request)
            else:
                out.servers += 1
                if not attempt(request):
                    retrying.append(request)
        held = [(request, placement.held[key]) for key, (request, _) in running.items()]
        lost = mig.stranded(held, devices) if mig else set()
        out.stranded_keys |= lost
        for request, slot in held:
            fraction, memory = sizes[request.key]
            out.time_hours[hour] += fraction
            out.memory_hours[hour] += memory
            out.held_memory_hours += slot.memory_mib * len(slot.device_ids)
            if request.key in lost:
                out.mig_time_lost[hour] += fraction
                out.mig_memory_lost[hour] += memory
            elif not request.job:
                out.server_time[hour] += fraction
                out.server_memory[hour] += memory
            if not request.job:
                out.server_time_booked[hour] += fraction
        for device_id, (fraction, memory) in placement.used.items():
            out.max_device_fraction = max(out.max_device_fraction, fraction)
            out.max_device_memory_ratio = max(
                out.max_device_memory_ratio, Fraction(memory, devices[device_id].memory_mib)
            )
    out.jobs_never_started = len(queue)
    out.seconds = time.perf_counter() - started
    return out


def _fits(size: tuple[Fraction, int], free: tuple[Fraction, int]) -> bool:
    return size[0] <= free[0] and size[1] <= free[1]


# -- the physical limit ---------------------------------------------------------------------


@dataclass
class Limit:
    """The fluid bound over the term, and the demand it rests on."""

    time: Fraction
    memory: int
    hour_time: list[Fraction]
    hour_memory: list[int]
    """Per-hour caps: min(fleet, servers wanting a GPU + jobs arrived so far)."""
    demand_time: list[Fraction]
    demand_memory: list[int]
    """Servers wanting a GPU plus jobs running as if each started on arrival."""
    servers_time: list[Fraction]
    servers_memory: list[int]
    """Servers wanting a GPU (their hours are fixed: from arrival to leaving)."""
    fleet_time: int
    fleet_memory: int

    @property
    def fitting_hours(self) -> list[int]:
        """The hours where the mix allows the target: demand fits the fleet (fluid)."""
        congested = set(self.congested_hours)
        return [h for h in range(HOURS) if h not in congested]

    @property
    def congested_hours(self) -> list[int]:
        return [
            h
            for h in range(HOURS)
            if self.demand_time[h] > self.fleet_time or self.demand_memory[h] > self.fleet_memory
        ]


def physical_limit(term: Term, devices: list[GPUDevice]) -> Limit:
    fleet_time = len(devices)
    fleet_memory = sum(d.memory_mib for d in devices)
    servers_t = [Fraction(0)] * HOURS
    servers_m = [0] * HOURS
    arrived_t = [Fraction(0)] * HOURS
    arrived_m = [0] * HOURS
    demand_t = [Fraction(0)] * HOURS
    demand_m = [0] * HOURS
    jobs_t, jobs_m = Fraction(0), 0
    for request in term.requests:
        fraction, memory = nominal(request.share, devices)
        end = min(request.arrive + request.duration, HOURS)
        for hour in range(request.arrive, end):
            demand_t[hour] += fraction
            demand_m[hour] += memory
        if request.job:
            jobs_t += fraction * (end - request.arrive)
            jobs_m += memory * (end - request.arrive)
            for hour in range(request.arrive, HOURS):
                arrived_t[hour] += fraction
                arrived_m[hour] += memory
        else:
            for hour in range(request.arrive, end):
                servers_t[hour] += fraction
                servers_m[hour] += memory
    hour_t = [min(Fraction(fleet_time), servers_t[h] + arrived_t[h]) for h in range(HOURS)]
    hour_m = [min(fleet_memory, servers_m[h] + arrived_m[h]) for h in range(HOURS)]
    time_bound = min(
        sum(hour_t, Fraction(0)),
        sum((min(Fraction(fleet_time), s) for s in servers_t), Fraction(0)) + jobs_t,
    )
    memory_bound = min(sum(hour_m), sum(min(fleet_memory, s) for s in servers_m) + jobs_m)
    return Limit(
        time_bound,
        memory_bound,
        hour_t,
        hour_m,
        demand_t,
        demand_m,
        servers_t,
        servers_m,
        fleet_time,
        fleet_memory,
    )


def check_anchors(limit: Limit, outcomes: list[Outcome], devices: list[GPUDevice]) -> None:
    """Each anchor computes what it claims: no device over itself, everything under the bound."""
    for out in outcomes:
        assert out.max_device_fraction <= 1, f"{out.name} put more than a GPU on one device"
        assert out.max_device_memory_ratio <= 1, f"{out.name} put more memory on a GPU than it has"
        for hour in range(HOURS):
            assert out.time_hours[hour] <= limit.hour_time[hour], (out.name, hour, "time")
            assert out.memory_hours[hour] <= limit.hour_memory[hour], (out.name, hour, "memory")
            assert out.server_time[hour] <= limit.servers_time[hour], (out.name, hour, "servers")
            assert out.server_memory[hour] <= limit.servers_memory[hour], (
                out.name,
                hour,
                "servers",
            )
        assert sum(out.time_hours) <= limit.time, f"{out.name} served more time than the limit"
        assert sum(out.memory_hours) <= limit.memory, (
            f"{out.name} served more memory than the limit"
        )
        assert out.refused_fitting <= out.refused and out.jobs_queued_fitting <= out.jobs_queued


# -- the report -----------------------------------------------------------------------------


def run_term(term: Term, devices: list[GPUDevice], folder: Path) -> tuple[Limit, list[Outcome]]:
    (folder / "term.yaml").write_text(yaml.safe_dump(term.catalog_data, sort_keys=False))
    catalog = load_catalog(folder / "term.yaml")
    mig = MIGCheck()
    outcomes = [
        simulate(term, Ours(devices, catalog), mig),
        simulate(term, FirstFit(devices), mig),
        simulate(term, WholeGPU(devices), mig),
    ]
    limit = physical_limit(term, devices)
    check_anchors(limit, outcomes, devices)
    return limit, outcomes


def _share_of(part: Fraction | int, whole: Fraction | int) -> float:
    return float(part) / float(whole) if whole else 0.0


@dataclass(frozen=True)
class Packing:
    """One placement's packing, as shares of the limit."""

    time: float
    memory: float
    time_mig: float
    memory_mig: float
    fitting_time: float
    fitting_memory: float
    """Servers in the hours where demand fits the fleet, after MIG."""
    fitting_booked: float
    """Servers' time in those hours, as booked."""
    fitting_refused: int
    """Server starts refused in those hours."""


def packing(out: Outcome, limit: Limit) -> Packing:
    time_served = sum(out.time_hours, Fraction(0))
    memory_served = sum(out.memory_hours)
    hours = limit.fitting_hours
    return Packing(
        _share_of(time_served, limit.time),
        _share_of(memory_served, limit.memory),
        _share_of(time_served - sum(out.mig_time_lost, Fraction(0)), limit.time),
        _share_of(memory_served - sum(out.mig_memory_lost), limit.memory),
        _share_of(
            sum((out.server_time[h] for h in hours), Fraction(0)),
            sum((limit.servers_time[h] for h in hours), Fraction(0)),
        ),
        _share_of(
            sum(out.server_memory[h] for h in hours), sum(limit.servers_memory[h] for h in hours)
        ),
        _share_of(
            sum((out.server_time_booked[h] for h in hours), Fraction(0)),
            sum((limit.servers_time[h] for h in hours), Fraction(0)),
        ),
        sum(out.refused_at[h] for h in hours),
    )


@dataclass
class HourLoss:
    """What a placement's servers miss of the limit in one fitting hour, and why."""

    hour: int
    time: Fraction
    memory: int
    crowded: tuple[Fraction, int] = (Fraction(0), 0)
    """Servers refused in an earlier, crowded hour (demand over the fleet) and not started
    by a retry before this hour."""
    fitting: tuple[Fraction, int] = (Fraction(0), 0)
    """Servers refused in a fitting hour and not started by a retry before this hour; the
    rest of the loss is servers stranded by MIG."""


def losses(out: Outcome, limit: Limit, devices: list[GPUDevice]) -> list[HourLoss]:
    """Per fitting hour, the servers' nominal time and memory the limit runs and ``out``
    does not, split by cause."""
    fitting = set(limit.fitting_hours)
    congested = set(limit.congested_hours)
    found: dict[int, HourLoss] = {}
    for hour in sorted(fitting):
        time_lost = limit.servers_time[hour] - out.server_time[hour]
        memory_lost = limit.servers_memory[hour] - out.server_memory[hour]
        if time_lost > 0 or memory_lost > 0:
            found[hour] = HourLoss(hour, time_lost, memory_lost)
    for refusal in out.refused_servers:
        request = refusal.request
        fraction, memory = nominal(request.share, devices)
        cause = "crowded" if refusal.hour in congested else "fitting"
        until = min(request.leave, HOURS) if refusal.started is None else refusal.started
        for hour in range(request.arrive, until):
            if hour in found:
                lost = found[hour]
                time_so_far, memory_so_far = getattr(lost, cause)
                setattr(lost, cause, (time_so_far + fraction, memory_so_far + memory))
    return list(found.values())


def loss_lines(out: Outcome, limit: Limit, devices: list[GPUDevice]) -> list[str]:
    """The per-hour losses of ``out`` in the fitting hours, as report lines."""
    found = losses(out, limit, devices)
    if not found:
        return [f"{out.name} loses nothing in the fitting hours"]

    def total(cause: str) -> tuple[float, float]:
        pairs = [getattr(lost, cause) for lost in found]
        return float(sum((t for t, _ in pairs), Fraction(0))), sum(m for _, m in pairs) / 1024

    hours = sum((lost.time for lost in found), Fraction(0))
    memory = sum(lost.memory for lost in found) / 1024
    crowded, fitting = total("crowded"), total("fitting")
    stranded = (float(hours) - crowded[0] - fitting[0], memory - crowded[1] - fitting[1])
    lines = [
        f"{out.name} in the fitting hours misses {float(hours):.2f} GPU-hours and "
        f"{memory:.0f} GiB-hours of servers (nominal): {crowded[0]:.2f} / {crowded[1]:.0f} of "
        f"servers refused in a crowded hour and not yet started by a retry, {fitting[0]:.2f} / {fitting[1]:.0f} of servers refused in a fitting hour, "
        f"{stranded[0]:.2f} / {stranded[1]:.0f} of servers stranded by MIG; per hour (GPU, "
        "GiB; c: refused when crowded, f: refused when fitting, m: stranded by MIG):"
    ]
    cells = []
    for lost in found:
        causes = [
            label for label, (t, m) in (("c", lost.crowded), ("f", lost.fitting)) if t > 0 or m > 0
        ]
        if lost.time > lost.crowded[0] + lost.fitting[0]:
            causes.append("m")
        cells.append(
            f"{lost.hour}: {float(lost.time):.2f}, {lost.memory / 1024:.0f} {''.join(causes)}"
        )
    lines.append("  " + "; ".join(cells))
    return lines


def table(limit: Limit, outcomes: list[Outcome]) -> list[str]:
    """The packing table, one line per placement."""
    header = (
        "placement",
        "time",
        "memory",
        "after MIG",
        "fitting hours",
        "booked",
        "refused",
        "on retry",
        "could fit",
        "jobs queued",
        "could fit",
        "never ran",
    )
    rows = [header]
    for out in outcomes:
        share = packing(out, limit)
        rows.append(
            (
                out.name,
                f"{share.time:.1%}",
                f"{share.memory:.1%}",
                f"{share.time_mig:.1%} / {share.memory_mig:.1%}",
                f"{share.fitting_time:.1%} / {share.fitting_memory:.1%}",
                f"{share.fitting_booked:.1%}",
                f"{out.refused} ({share.fitting_refused})",
                str(out.served_on_retry),
                str(out.refused_fitting),
                str(out.jobs_queued),
                str(out.jobs_queued_fitting),
                str(out.jobs_never_started),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return [
        "  ".join(
            [row[0].ljust(widths[0])]
            + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        )
        for row in rows
    ]


def run() -> Section:
    devices = fleet()
    term = generate_term()
    with tempfile.TemporaryDirectory(prefix="gpuspawner-bench-") as name:
        limit, outcomes = run_term(term, devices, Path(name))
    ours, first_fit, whole = outcomes
    section = Section(
        "packing: a week of classes, research servers and jobs on 16 mixed GPUs",
        "the physical limit (fluid bound), first-fit and whole-GPU placement of the same demand",
    )
    section.rows.append(
        Row(
            f"place the week hour by hour ({ours.servers} servers, {ours.jobs} jobs)",
            Timing((ours.seconds,)),
            Timing((first_fit.seconds,)),
        )
    )
    congested = limit.congested_hours
    peak_t = max(limit.demand_time) / limit.fleet_time
    peak_m = max(limit.demand_memory) / limit.fleet_memory
    codes = ", ".join(f"{code} {count}" for code, count in sorted(ours.refusal_codes.items()))
    mine = packing(ours, limit)
    score = min(mine.fitting_time, mine.fitting_memory)
    verdict = "PASS" if score >= TARGET else "FAIL"
    section.notes += [
        "(timed row: ours is the real admission, the anchor first-fit; one run each)",
        f"fleet: 8 RTX A5000 24 GiB, 4 A100 80 GB (MIG), 4 H100 80 GB = {limit.fleet_time} "
        f"GPUs, {limit.fleet_memory // 1024} GiB; demand (nominal, jobs started on arrival) peaks "
        f"at {float(peak_t):.0%} of the fleet's time and {float(peak_m):.0%} of its memory and "
        f"exceeds the fleet in {len(congested)} of {HOURS} hours",
        f"physical limit over the week: {float(limit.time):.1f} GPU-hours and "
        f"{limit.memory / 1024:.0f} GiB-hours of nominal sizes",
        "",
        *table(limit, outcomes),
        "",
        "time, memory: nominal GPU-hours and GiB-hours served over the week as booked, as a "
        "share of the limit; after MIG: the same (time / memory) without shares stranded on "
        "the A100s (admitted, but their MIG profiles do not fit the card); fitting hours: "
        "servers alone, after MIG, in the hours where demand fits the fleet (there the limit "
        "serves every server), and booked: their time before MIG; refused: server starts "
        "refused at least once (in brackets: first refused in the fitting hours); on retry: "
        "of those, started when they asked again in a later hour; "
        "could fit: refused or first queued while the fleet's free capacity, pooled over the "
        "GPUs the request may use, held it",
        f"ours refused by code: {codes or 'none'}; shares stranded by MIG: ours "
        f"{len(ours.stranded_keys)}, first-fit {len(first_fit.stranded_keys)}, whole GPU "
        f"{len(whole.stranded_keys)}",
        *loss_lines(ours, limit, devices),
        f"{verdict}: in the {HOURS - len(congested)} hours where the mix allows it (demand fits "
        f"the fleet), ours runs {mine.fitting_time:.1%} of the servers' GPU time and "
        f"{mine.fitting_memory:.1%} of their memory that the limit runs, after MIG (target "
        f"{TARGET:.0%}); over the whole week {mine.time_mig:.1%} / {mine.memory_mig:.1%} "
        f"after MIG, {mine.time:.1%} / {mine.memory:.1%} as booked",
    ]
    return section


if __name__ == "__main__":
    from .report import render

    print(render(run()))
