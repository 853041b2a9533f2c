"""Scenarios: the sizes, durations and fractions instructors type into the catalog."""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction

import pytest

from gpuspawner.policy.units import (
    format_bytes,
    format_fraction,
    format_mib,
    parse_duration,
    parse_fraction,
    parse_size_bytes,
    parse_size_mib,
)

GIB = 1024**3


@pytest.mark.parametrize(
    ("written", "mib"),
    [
        ("6GiB", 6 * 1024),
        ("6G", 6 * 1024),
        ("6 GiB", 6 * 1024),
        ("6gib", 6 * 1024),
        ("1.5 GB", 1536),
        ("512Mi", 512),
        ("512MiB", 512),
        ("1T", 1024 * 1024),
        ("100K", 1),  # rounded up: a slice is never smaller than asked
    ],
)
def test_given_a_size_with_a_unit_when_parsed_then_units_are_binary(written, mib):
    assert parse_size_mib(written) == mib


def test_given_gigabytes_when_parsed_to_bytes_then_g_and_gib_mean_the_same():
    assert parse_size_bytes("2G") == parse_size_bytes("2GiB") == 2 * GIB


@pytest.mark.parametrize(
    ("written", "expected_in_message"),
    [
        (6, "a bare number 6 has no unit"),
        (6.5, "has no unit"),
        ("6", "such as 512MiB, 6GiB or 10G"),
        ("6 parsecs", "such as 512MiB, 6GiB or 10G"),
        ("0G", "greater than zero"),
        (True, "such as 512MiB"),
        (None, "such as 512MiB"),
        ("", "such as 512MiB"),
    ],
)
def test_given_a_size_without_a_usable_unit_then_the_message_shows_valid_examples(
    written, expected_in_message
):
    with pytest.raises(ValueError, match="expected") as error:
        parse_size_bytes(written)
    assert expected_in_message in str(error.value)


@pytest.mark.parametrize(
    ("written", "duration"),
    [
        ("10m", timedelta(minutes=10)),
        ("10 min", timedelta(minutes=10)),
        ("90s", timedelta(seconds=90)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1 hour", timedelta(hours=1)),
        ("2h", timedelta(hours=2)),
        ("15", timedelta(minutes=15)),
        (15, timedelta(minutes=15)),
        (0, timedelta(0)),
        (timedelta(minutes=3), timedelta(minutes=3)),
    ],
)
def test_given_a_duration_when_parsed_then_a_bare_number_means_minutes(written, duration):
    assert parse_duration(written) == duration


@pytest.mark.parametrize(
    ("written", "expected_in_message"),
    [
        (-5, "not negative"),
        ("-5m", "such as 10m, 90s or 1h30m"),
        ("ten minutes", "such as 10m, 90s or 1h30m"),
        ("", "such as 10m"),
        (1.5, "such as 10m"),
        (True, "such as 10m"),
    ],
)
def test_given_a_bad_duration_then_the_message_says_what_is_expected(written, expected_in_message):
    with pytest.raises(ValueError) as error:
        parse_duration(written)
    assert expected_in_message in str(error.value)


@pytest.mark.parametrize(
    ("written", "fraction"),
    [
        ("1/4", Fraction(1, 4)),
        ("1/3", Fraction(1, 3)),
        (0.25, Fraction(1, 4)),
        ("0.25", Fraction(1, 4)),
        ("25%", Fraction(1, 4)),
        ("12.5 %", Fraction(1, 8)),
        (0.33, Fraction(33, 100)),
        (1, Fraction(1)),
        ("100%", Fraction(1)),
    ],
)
def test_given_a_fraction_in_any_usual_notation_then_it_is_exact(written, fraction):
    assert parse_fraction(written) == fraction


@pytest.mark.parametrize(
    "written",
    [1.5, "3/2", 0, "0", "0%", "150%", -0.25, "a quarter", "1/0", True, None, float("inf")],
)
def test_given_a_fraction_outside_zero_to_one_then_the_message_shows_examples(written):
    with pytest.raises(ValueError) as error:
        parse_fraction(written)
    assert "greater than 0 and at most 1, such as 1/4, 0.25 or 25%" in str(error.value)
    assert repr(written) in str(error.value)


@pytest.mark.parametrize(
    ("mib", "text"), [(6144, "6 GiB"), (1536, "1.5 GiB"), (512, "512 MiB"), (81920, "80 GiB")]
)
def test_given_memory_in_mib_when_formatted_then_it_reads_like_a_gpu_spec_sheet(mib, text):
    assert format_mib(mib) == text


def test_given_bytes_when_formatted_then_they_round_up_to_whole_mib():
    assert format_bytes(6 * GIB) == "6 GiB"
    assert format_bytes(1) == "1 MiB"


def test_given_fractions_when_formatted_then_they_read_as_people_say_them():
    assert format_fraction(Fraction(1, 4)) == "1/4"
    assert format_fraction(Fraction(3, 10)) == "3/10"
    assert format_fraction(Fraction(1)) == "1"
