"""Scenarios: the picture of who holds which slice of which GPU."""

from __future__ import annotations

from fractions import Fraction

from gpuspawner.gpu_map import MapViewer, gpu_map
from gpuspawner.policy import CapacityPool, GPUDevice, GPUShare


def pool_with_two_students() -> CapacityPool:
    pool = CapacityPool(
        [GPUDevice("g0", 0, "RTX 4090", 24576), GPUDevice("g1", 1, "RTX 4090", 24576)]
    )
    for owner, fraction in (("ana", Fraction(1, 4)), ("ben", Fraction(1, 2))):
        pool.allocate(
            f"server:{owner}/",
            owner=owner,
            profile_id="ml101",
            course_id="ml101",
            share=GPUShare(fraction=fraction),
        )
    return pool


def test_a_student_sees_their_own_slice_and_only_the_course_of_others():
    bars = gpu_map(pool_with_two_students(), viewer="ana", admin=False)
    first = bars[0]
    assert first.used_pct == 75.0
    assert [s.label for s in first.segments] == ["you", "ml101"]
    assert [(s.left_pct, s.width_pct) for s in first.segments] == [(0.0, 25.0), (25.0, 50.0)]
    assert first.segments[0].mine and not first.segments[1].mine
    assert "ben" not in " ".join(s.tooltip + s.label for s in first.segments)
    assert bars[1].segments == ()


def test_an_admin_sees_who_holds_each_slice():
    bars = gpu_map(pool_with_two_students(), viewer="root", admin=True)
    assert [s.label for s in bars[0].segments] == ["ana", "ben"]
    assert bars[0].memory == "18 GiB of 24 GiB memory in use"


def test_the_instructor_of_the_course_sees_its_students_on_the_spawn_form():
    # Given the instructor of ML101 looks at the spawn form's map
    bars = gpu_map(pool_with_two_students(), viewer=MapViewer("mila", courses=frozenset({"ml101"})))
    # Then the students of their course are named, as on the GPU map page
    assert [s.label for s in bars[0].segments] == ["ana", "ben"]
    # While another course's instructor sees only the course
    bars = gpu_map(pool_with_two_students(), viewer=MapViewer("tom", courses=frozenset({"cs102"})))
    assert [s.label for s in bars[0].segments] == ["ml101", "ml101"]
