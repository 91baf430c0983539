"""A process that owns one sandbox running `sleep 120`, for the owner-death test:
`python sandbox_owner.py BACKEND WORKSPACE STATE_DIR WORK_DIR`.

It prints `started` once the sandbox is up and then runs the command until it is killed; the test
SIGKILLs it mid-command, when no clean-up of ours can run.
"""

import sys
from pathlib import Path

import anyio

from sandbox.backend import open_sandbox
from sandbox.limits import GvisorOptions, SandboxLimits


async def main(backend: str, workspace: Path, state_dir: Path, work_dir: Path) -> None:
    options = GvisorOptions(state_dir=state_dir, work_dir=work_dir)
    limits = SandboxLimits(timeout_s=150, memory_mb=256)
    async with open_sandbox(workspace, limits=limits, backend=backend, gvisor=options) as sandbox:  # type: ignore[arg-type] - backend is gvisor or process, given on the command line by the test
        await sandbox.start()
        print("started", flush=True)
        await sandbox.exec(["sleep", "120"])


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], *(Path(arg) for arg in sys.argv[2:]))  # pyright: ignore[reportArgumentType] - the arguments of main, from the command line of the test
