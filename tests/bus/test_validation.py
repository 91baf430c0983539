"""The submission rules shared by the CLI and the orchestrator (`bus.validation`): each problem
is found and worded, and a good submission passes."""

from bus.validation import MAX_TASK_TEXT_BYTES, submission_problems

GOOD = {"task_id": "task-1_A", "text": "explain the bus", "repo": "/srv/repo", "mode": "read"}


def test_a_good_submission_has_no_problems() -> None:
    """What `codeloop submit` sends for an ordinary task is accepted (also with a generated id)."""
    assert submission_problems(**GOOD) == []
    assert submission_problems(**{**GOOD, "task_id": None}) == []
    assert submission_problems(**{**GOOD, "repo": "https://example.com/r.git"}) == []


def test_task_ids_outside_subject_tokens_or_reserved_are_refused() -> None:
    """A task id becomes a NATS subject token; `mcp` is the tool servers' pseudo-task."""
    for bad in ("a.b", "a b", "x" * 129, "", "a*", "é"):
        (problem,) = submission_problems(**{**GOOD, "task_id": bad})
        assert "letters, digits" in problem
    (problem,) = submission_problems(**{**GOOD, "task_id": "mcp"})
    assert "reserved" in problem


def test_blank_text_is_refused() -> None:
    for blank in ("", "   ", "\n\t \n"):
        (problem,) = submission_problems(**{**GOOD, "text": blank})
        assert "whitespace" in problem


def test_text_over_the_limit_is_refused_naming_the_limit_in_bytes() -> None:
    """The limit counts UTF-8 bytes: 'é' is two."""
    assert submission_problems(**{**GOOD, "text": "x" * MAX_TASK_TEXT_BYTES}) == []
    (problem,) = submission_problems(**{**GOOD, "text": "é" * (MAX_TASK_TEXT_BYTES // 2 + 1)})
    assert f"{MAX_TASK_TEXT_BYTES + 2:,} bytes" in problem and f"{MAX_TASK_TEXT_BYTES:,} bytes" in problem


def test_missing_relative_or_control_character_repositories_are_refused() -> None:
    cases = {"": "missing", "  ": "missing", "repo": "not absolute", "/a\0b": "control", "/a\nb": "control"}
    for repo, word in cases.items():
        (problem,) = submission_problems(**{**GOOD, "repo": repo})
        assert word in problem, (repo, problem)
    (problem,) = submission_problems(**{**GOOD, "repo": "/" + "a" * 5000})
    assert "limit is 4,096" in problem


def test_an_unknown_mode_is_refused_and_every_problem_is_listed() -> None:
    problems = submission_problems(task_id="a.b", text=" ", repo="", mode="admin")
    assert len(problems) == 4
    assert "'admin' is not one of read, write, execute" in problems[3]
