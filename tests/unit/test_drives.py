"""akm_run.drives' wait for a dispatched attempt: woken at the attempt's end (akm_run.wakes), with
reads of its status as the bound for an end nothing announced: prompt enough for a short unit, about
one a second for a long one (each read is a query on the shared database)."""

from __future__ import annotations

from akm_run.drives import RESULT_POLL_MAX_S, RESULT_POLL_MIN_S, result_poll_s


def test_a_young_attempt_is_read_at_the_shortest_interval() -> None:
    assert result_poll_s(0) == result_poll_s(1.0) == RESULT_POLL_MIN_S


def test_the_interval_is_a_tenth_of_the_attempts_age_up_to_the_cap() -> None:
    assert result_poll_s(3.0) == 0.3
    assert result_poll_s(5.0) == 0.5
    assert result_poll_s(3600) == RESULT_POLL_MAX_S


def test_reads_of_a_ten_minute_attempt_are_few() -> None:
    """The number of status reads while an attempt runs 600 s and nothing wakes its drive: about 620
    at the cap, where a fixed 20 ms interval would read 30,000 times."""
    age, reads = 0.0, 0
    while age < 600:
        age += result_poll_s(age)
        reads += 1
    assert reads < 650
