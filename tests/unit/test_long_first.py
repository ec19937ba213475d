"""lab.long_first's reordering: longest first within each read-ahead window, nothing lost."""

from __future__ import annotations

from bench.run_replay import RunJob, run_seconds
from lab.long_first import longest_first


def _job(forwards: int) -> RunJob:
    return RunJob(forwards, 0.0, forwards)


def test_each_window_runs_longest_first_and_keeps_every_job():
    jobs = [_job(f) for f in (1, 5, 3, 2, 9, 4)]
    assert [j.forwards for j in longest_first(jobs, 3)] == [5, 3, 1, 9, 4, 2]
    assert sorted(longest_first(jobs, 4), key=id) == sorted(jobs, key=id)


def test_a_long_request_started_first_no_longer_sets_the_runs_tail():
    jobs = [_job(10)] * 4 + [_job(40)]  # two rows: FIFO leaves the long one alone at the end
    assert run_seconds(longest_first(jobs, len(jobs)), 2, 1.0) == 40 < run_seconds(jobs, 2, 1.0) == 60
