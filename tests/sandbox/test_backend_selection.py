"""Choosing the backend: CODELOOP_SANDBOX policy, the fallback, and the error when runsc is missing."""

from pathlib import Path

import pytest

from sandbox.backend import open_sandbox, parse_policy, resolve_backend
from sandbox.errors import BackendForbidden, PolicyError, SandboxUnavailable, WorkspaceError
from sandbox.gvisor import probe_runsc
from sandbox.limits import GvisorOptions, SandboxLimits

MISSING_RUNSC = GvisorOptions(runsc="/nonexistent/bin/runsc")


def test_a_missing_runsc_is_an_error_that_says_how_to_install_it() -> None:
    """When runsc is missing the error says so and how to install it."""
    with pytest.raises(SandboxUnavailable) as caught:
        resolve_backend("gvisor", policy="auto", gvisor=MISSING_RUNSC)
    assert "runsc not found" in str(caught.value)
    assert "apt-get install runsc" in str(caught.value)


def test_auto_falls_back_to_the_process_backend_only_when_the_policy_allows_it() -> None:
    """Auto = gvisor when runsc works; CODELOOP_SANDBOX=gvisor forbids the fallback."""
    assert resolve_backend("auto", policy="auto", gvisor=MISSING_RUNSC) == "process"
    with pytest.raises(SandboxUnavailable):
        resolve_backend("auto", policy="gvisor", gvisor=MISSING_RUNSC)
    with pytest.raises(BackendForbidden):
        resolve_backend("process", policy="gvisor")
    assert resolve_backend("auto", policy="process") == "process"


def test_auto_chooses_gvisor_when_runsc_works() -> None:
    """The default prefers the isolating backend."""
    if not probe_runsc().works:
        pytest.skip(f"runsc does not work here: {probe_runsc().detail}")
    assert resolve_backend("auto", policy="auto") == "gvisor"


def test_the_policy_is_gvisor_process_or_auto_and_a_bad_value_is_a_policy_error() -> None:
    """CODELOOP_SANDBOX=gvisor|process|auto, default auto; anything else is its own error type,
    raised where a backend is chosen, so callers tell it apart without reading its message."""
    assert parse_policy("") == "auto"
    assert parse_policy(" GVisor ") == "gvisor"
    with pytest.raises(PolicyError, match="CODELOOP_SANDBOX='docker'"):
        parse_policy("docker")
    with pytest.raises(PolicyError):
        resolve_backend("process", policy="docker")


@pytest.mark.anyio
async def test_opening_a_sandbox_on_a_missing_workspace_fails_clearly(tmp_path: Path) -> None:
    """Our contract: a typed WorkspaceError naming the path, before any sandbox starts."""
    with pytest.raises(WorkspaceError, match="not an existing directory"):
        async with open_sandbox(tmp_path / "missing", limits=SandboxLimits(), backend="process"):
            pass
