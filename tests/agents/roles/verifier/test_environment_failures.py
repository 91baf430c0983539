"""When a target failing before and after the patch is the environment's failure, not the patch's
(`agents.roles.verifier.environment_failures`); the matrix runs the same rule through a real tree."""

from agents.roles.verifier.environment_failures import crash_of, crashes_outside, environmental
from agents.roles.verifier.exec_session import Crash, TestFailure

WERKZEUG = "/env/lib/python3.9/site-packages/werkzeug/urls.py"
WARNING = "DeprecationWarning: 'werkzeug.urls.url_parse' is deprecated"


def _failure(test_id: str, path: str, line: int, message: str) -> TestFailure:
    traceback = f"tests/test_basic.py:40: in {test_id.split('::')[-1]}\n    client.get('/')\n{path}:{line}: in url_parse\n    warnings.warn(...)\nE   {message}"
    return TestFailure(
        test_id=test_id, file="tests/test_basic.py", line=40, message=message, traceback=traceback
    )


def test_the_crash_is_the_last_traceback_entry_and_the_exception_reported_after_it() -> None:
    failure = _failure("tests/test_basic.py::test_a", WERKZEUG, 545, WARNING)
    failure = failure.model_copy(update={"traceback": failure.traceback + "\nE   second line"})
    crash = crash_of(failure)
    assert crash is not None and (crash.path, crash.line) == (WERKZEUG, 545)
    assert crash.message.split() == [*WARNING.split(), "second", "line"]
    assert crash_of(TestFailure(test_id="t", message="boom", traceback="no location here")) is None


def test_a_target_is_the_environments_only_when_its_crash_is_outside_shared_and_unchanged() -> None:
    target = "tests/test_basic.py::test_a"
    before = {
        target: Crash(path=WERKZEUG, line=545, message=WARNING),
        "tests/test_other.py::test_b": Crash(path=WERKZEUG, line=545, message=WARNING),
    }
    covering = crashes_outside(before, frozenset({target}))
    why = environmental(_failure(target, WERKZEUG, 545, WARNING), before, covering)
    assert why == f"werkzeug/urls.py:545: {WARNING}"
    # A different crash with the patch, or one in the repository's own code: the patch's.
    assert environmental(_failure(target, WERKZEUG, 546, WARNING), before, covering) is None
    assert environmental(_failure(target, WERKZEUG, 545, "ValueError: x"), before, covering) is None
    inside = {t: c.model_copy(update={"path": "flask/app.py"}) for t, c in before.items()}
    assert (
        environmental(
            _failure(target, "flask/app.py", 545, WARNING),
            inside,
            crashes_outside(inside, frozenset({target})),
        )
        is None
    )
    # Only tests of the task crash there: it may be the task's problem, left unfixed.
    both = crashes_outside(before, frozenset(before))
    assert environmental(_failure(target, WERKZEUG, 545, WARNING), before, both) is None
    # Unknown before (not measured): the patch's.
    assert environmental(_failure(target, WERKZEUG, 545, WARNING), {}, covering) is None


def test_an_objects_address_or_a_threads_number_does_not_make_two_crashes_differ() -> None:
    target = "tests/test_a.py::test_a"
    before = {
        target: Crash(
            path="/usr/lib/python3.11/json/encoder.py", line=180, message="TypeError: <X at 0x7f01>"
        ),
        "tests/test_b.py::test_b": Crash(
            path="/usr/lib/python3.11/json/encoder.py", line=180, message="TypeError: <X at 0x7f99>"
        ),
    }
    failure = _failure(target, "/usr/lib/python3.11/json/encoder.py", 180, "TypeError: <X at 0x5555>")
    elsewhere = crashes_outside(before, frozenset({target}))
    assert environmental(failure, before, elsewhere) == "json/encoder.py:180: TypeError: <X at 0x5555>"
    thread = "/env/site-packages/_pytest/threadexception.py"
    before = {
        target: Crash(
            path=thread, line=77, message="PytestUnhandledThreadExceptionWarning: in thread Thread-12"
        ),
        "tests/test_b.py::test_b": Crash(
            path=thread, line=77, message="PytestUnhandledThreadExceptionWarning: in thread Thread-3"
        ),
    }
    failure = _failure(target, thread, 77, "PytestUnhandledThreadExceptionWarning: in thread Thread-5")
    assert environmental(failure, before, crashes_outside(before, frozenset({target}))) is not None


def test_a_crash_for_want_of_a_network_is_the_environments_wherever_the_project_raises_it() -> None:
    """The sandbox never gives a network: a test that needs one fails before and after whatever
    the patch does, even when the project's own code wraps the socket error."""
    target = "tests/test_requests.py::test_get"
    message = "requests.exceptions.ConnectionError: (Caused by NewConnectionError: Temporary failure in name resolution)"
    # The patch edits adapters.py: the raise moved two lines down.
    before = {target: Crash(path="requests/adapters.py", line=413, message=message)}
    failure = _failure(target, "requests/adapters.py", 415, message)
    # Chained: pytest's message starts with the first exception, the crash is the last one's.
    chained = "socket.py:10: in getaddrinfo\nE   socket.gaierror: inner\n\nDuring handling ...\n"
    failure = failure.model_copy(
        update={"traceback": chained + failure.traceback, "message": f"socket.gaierror: inner\n{message}"}
    )
    assert (
        environmental(failure, before, crashes_outside(before, frozenset({target})))
        == f"requests/adapters.py:415: {message[:120]}"
    )


def test_a_crash_inside_the_test_runner_the_same_before_and_after_is_the_environments() -> None:
    """A test written for an older pytest (the string form of `pytest.raises`) crashes inside
    pytest whatever the project's code does."""
    target = "test_requests.py::RequestsTestCase::test_conflicting_post_params"
    runner = "/env/lib/python3.9/site-packages/_pytest/python_api.py"
    message = "TypeError: 'requests.post(url)' object (type: <class 'str'>) must be callable"
    before = {target: Crash(path=runner, line=950, message=message)}
    failure = _failure(target, runner, 950, message)
    assert environmental(failure, before, crashes_outside(before, frozenset({target}))) == (
        f"_pytest/python_api.py:950: {message}"
    )


def test_a_fixture_pytest_cannot_resolve_the_same_before_and_after_is_the_environments() -> None:
    """A plug-in the tests expect is missing: every test using its fixture errors at set-up, in the
    repository's conftest, whatever the patch does."""
    target = "tests/test_requests.py::TestRequests::test_no_content_length[GET]"
    text = (
        "file tests/test_requests.py, line 90\n      def test_no_content_length(self, httpbin, method):\n"
        "file tests/conftest.py, line 18\n  @pytest.fixture\n  def httpbin(httpbin):\n"
        "E       recursive dependency involving fixture 'httpbin' detected\n>       available fixtures: cache\n"
        "tests/conftest.py:18"
    )
    failure = TestFailure(test_id=target, outcome="error", message="", traceback=text)
    message = "recursive dependency involving fixture 'httpbin' detected"
    assert crash_of(failure) == Crash(path="tests/conftest.py", line=18, message=message)
    before = {target: Crash(path="tests/conftest.py", line=17, message=message)}
    assert environmental(failure, before, crashes_outside(before, frozenset({target}))) == (
        f"tests/conftest.py:18: {message}"
    )


def test_a_warning_turned_error_is_the_environments_unless_it_runs_through_the_changed_source() -> None:
    """Python 3.9 deprecates the `parser` module that pytest's own source calls: the same
    `DeprecationWarning` raised in the repository before and after is the environment's, however
    few tests it fails — but not when the test's traceback runs through what the patch changed,
    nor for an exception that is not a warning."""
    target = "testing/code/test_source.py::test_getstatement"
    deprecated = "DeprecationWarning: The parser module is deprecated"
    source = "src/_pytest/_code/source.py"
    before = {target: Crash(path=source, line=372, message=deprecated)}
    failure = _failure(target, source, 380, deprecated)
    assert environmental(failure, before, crashes_outside(before, frozenset({target})), through_changed=False)
    assert environmental(failure, before, crashes_outside(before, frozenset({target}))) is None
    error = {target: Crash(path=source, line=372, message="ValueError: x")}
    assert (
        environmental(
            _failure(target, source, 372, "ValueError: x"),
            error,
            crashes_outside(error, frozenset()),
            through_changed=False,
        )
        is None
    )
