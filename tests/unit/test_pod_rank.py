"""Scenarios: the runner in a pod of a job on several nodes counts its own attempts in the
shared checkpoint folder, and only rank 0 sends the job's outputs."""

from __future__ import annotations

from jupyter_to_job.pod_rank import count_attempt, sends_outputs


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def job(self, line: str) -> None:
        self.lines.append(line)


def test_each_rank_counts_its_own_attempts_in_one_checkpoint_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_TO_JOB_ID", "j1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    # Given both ranks' first pods started
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        assert count_attempt(tmp_path) == 1
    # When both run again (the queue took the job back), each is at attempt 2, not 3 and 4
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        assert count_attempt(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".jupyter-to-job-attempt-rank-1.json",
        ".jupyter-to-job-attempt.json",
    ]


def test_a_one_pod_job_keeps_its_attempt_file(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_TO_JOB_ID", "j1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv("RANK", "3")  # a notebook's own RANK means nothing without WORLD_SIZE
    assert count_attempt(tmp_path) == 1
    assert [p.name for p in tmp_path.iterdir()] == [".jupyter-to-job-attempt.json"]


def test_only_rank_0_sends_the_outputs_and_the_others_say_where_theirs_are(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    log = Log()
    assert sends_outputs(log) and log.lines == []
    monkeypatch.setenv("RANK", "1")
    assert not sends_outputs(log)
    assert log.lines == ["the executed notebook of rank 1 stays in its pod; rank 0's is the job's"]
