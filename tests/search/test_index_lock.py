"""The index lock and the state-directory lock on a place where no lock file can be made."""

from pathlib import Path

import anyio
import pytest

from bus.state_lock import hold_state_dir
from tool_servers.search.index.lock import hold_index_lock

pytestmark = pytest.mark.anyio


async def test_an_index_lock_where_no_file_can_be_made_fails_at_once() -> None:
    """/proc takes no new files even for root: the error is the OS's, not a wait for a holder."""
    with anyio.fail_after(10), pytest.raises(FileNotFoundError):
        async with hold_index_lock(Path("/proc/codeloop-test.lock"), timeout_s=600):
            pass


def test_a_state_lock_where_no_file_can_be_made_is_an_os_error_not_in_use() -> None:
    """Not "in use by another": nobody holds it, the file cannot exist there."""
    with pytest.raises(OSError):
        with hold_state_dir(Path("/proc/self"), what="a test"):
            pass
