"""The project environment of a test run, as attributes of the span the run happens in (the mcp
SDK's `tools/call run_tests` span, which joins the caller's trace): which environment, from what,
which Python, and whether and how long this run had to build it."""

from opentelemetry import trace

from sandbox.environments.environment import EnvironmentInfo

PREFIX = "codeloop.environment."


def environment_attributes(info: EnvironmentInfo | None) -> dict[str, str | bool | float]:
    """The span attributes of `info`; `codeloop.environment.key` is `none` when the run used
    codeloop's own interpreter (no project environment)."""
    if info is None:
        return {f"{PREFIX}key": "none"}
    return {
        f"{PREFIX}key": info.key,
        f"{PREFIX}kind": info.kind,
        f"{PREFIX}source": info.source,
        f"{PREFIX}python_version": info.python_version,
        f"{PREFIX}built": info.built,
        f"{PREFIX}build_s": info.build_s,
        f"{PREFIX}lookup_s": info.lookup_s,
    }


def mark_current_span(info: EnvironmentInfo | None) -> None:
    """Puts `environment_attributes(info)` on the current span (nothing when none is recording)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(environment_attributes(info))
