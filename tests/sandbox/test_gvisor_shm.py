"""/dev/shm in the gVisor sandbox: Python's multiprocessing (semaphores, pools) works, as in a
container; a SWE-bench test of pytest runs a multiprocessing pool inside the sandbox."""

import anyio
import pytest

from tests.sandbox.conftest import OpenGvisor

pytestmark = [pytest.mark.anyio, pytest.mark.gvisor]


async def test_a_multiprocessing_pool_runs_in_the_sandbox(open_gvisor: OpenGvisor) -> None:
    code = "from multiprocessing import Pool\nwith Pool(1) as pool:\n    print(pool.map(abs, [-3]))"
    with anyio.fail_after(60):
        async with open_gvisor() as sandbox:
            result = await sandbox.exec(["python3", "-c", code])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "[3]\n"
