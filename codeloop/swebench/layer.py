"""An instance's own layer over its shared environment: what the official instance image adds to
the environment image, made per instance and never shared.

The layer is a virtualenv of the environment's interpreter whose site-packages processes the
environment's site-packages after its own (`codeloop-environment.pth`), so the dependencies are
seen, not copied. The spec's `install` (`pip install -e .`) runs in the instance's tree into the
layer on the host, with the package index reachable, as the environment's build did: the entry
points, generated version files and editable finder of the instance's base commit land in the
layer and in the tree. pip does not remove a distribution outside the environment it runs in,
so an install that wants another version of a dependency (pylint's astroid) puts it in the
layer, ahead of the shared one, and the shared environment is never changed. The environment's
console scripts are copied into the layer's bin with the layer's interpreter, so `tox` or
`pytest` from the environment run with the layer's packages.

In the sandbox, the layer and the environment are read-only; the tree is the workspace, shown
at its own host path too, where the editable install points.
"""

import os
import signal
import sys
from pathlib import Path

import anyio

from codeloop.swebench.errors import EnvironmentBuildError
from sandbox.environments import Environment

INSTALL_TIMEOUT_S = 900.0
PTH_NAME = "codeloop-environment.pth"
_NOT_COPIED = ("python", "pip", "activate", "Activate", "deactivate")


def site_packages(venv: Path) -> Path:
    """The purelib directory of a POSIX virtualenv."""
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise EnvironmentBuildError(f"{venv} has no lib/python3.*/site-packages")
    return found[0]


def layer_env(layer: Path, env: Environment, *, through_links: bool = False) -> dict[str, str]:
    """The variables that make the layer the active environment (sandbox and host alike).

    `through_links`: also put both site-packages on PYTHONPATH, for test commands that start the
    interpreter through a symlink of their own: tox-current-env (sphinx's test command) links
    `.tox/py39/bin/python` to the running interpreter, and a virtualenv's interpreter started
    through such a link finds no pyvenv.cfg beside it and runs bare, without the environment's
    packages (the official conda interpreter is no virtualenv, so the link works there). The
    tree itself is imported from the working directory (`python -m pytest`), as there.
    """
    variables = {
        "PATH": f"{layer}/bin:{env.venv}/bin:/usr/local/bin:/usr/bin:/bin",
        "VIRTUAL_ENV": str(layer),
    }
    if through_links:
        variables["PYTHONPATH"] = f"{site_packages(layer)}:{site_packages(env.venv)}"
    return variables


async def make_layer(
    env: Environment,
    tree: Path,
    layer: Path,
    *,
    install: str | None,
    build_env: dict[str, str],
    constraints: str = "",
) -> str:
    """Create the layer at `layer` and run `install` in `tree` into it; returns the install's
    output for the instance's log.

    Raises:
        EnvironmentBuildError: creating the layer or the install failed (the output's tail).
    """
    code, output = await run_host(
        [str(env.python), "-m", "venv", "--without-pip", str(layer)], cwd=tree, env=build_env
    )
    if code != 0:
        raise EnvironmentBuildError(
            f"creating the instance's layer failed (exit {code})", log_tail=output[-3000:]
        )
    shared = site_packages(env.venv)
    lines = [f"import site; site.addsitedir({str(shared)!r})"]
    if env.tools_path is not None:
        lines.append(str(env.tools_path))
    (site_packages(layer) / PTH_NAME).write_text("\n".join(lines) + "\n")
    _copy_scripts(env.venv / "bin", layer / "bin")
    if not install:
        return output
    constraint_file = layer / "codeloop-constraints.txt"
    constraint_file.write_text(constraints)
    variables = {
        **build_env,
        "PIP_CONSTRAINT": str(constraint_file),
        **layer_env(layer, env),
        "PIP_NO_INPUT": "1",
        "PYTHONNOUSERSITE": "1",
    }
    if (tree / "setup.py").is_file() or (tree / "setup.cfg").is_file():
        # A path-based editable install (the tree on sys.path, as `setup.py develop` made it for
        # the official images) rather than setuptools' import-hook finder: pylint's plugin loader
        # maps each checker file to a module through sys.path, and finds none under a finder.
        # (A pyproject-only project has no legacy path: PEP 660 it is.)
        variables["SETUPTOOLS_ENABLE_FEATURES"] = "legacy-editable"
    code, installed = await run_host(["bash", "-c", install], cwd=tree, env=variables)
    output += installed
    if code != 0:
        raise EnvironmentBuildError(
            f"the spec's install failed in the instance's tree (exit {code}): {install}",
            log_tail=installed[-3000:],
        )
    return output


def _copy_scripts(source: Path, target: Path) -> None:
    """The environment's console scripts, re-pointed at the layer's interpreter."""
    python = target / "python"
    for script in sorted(source.iterdir()):
        if script.name.startswith(_NOT_COPIED) or not script.is_file() or (target / script.name).exists():
            continue
        try:
            text = script.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # a binary: nothing to re-point
        first, _, rest = text.partition("\n")
        if not first.startswith("#!") or "python" not in first:
            continue
        (target / script.name).write_text(f"#!{python}\n{rest}", encoding="utf-8")
        (target / script.name).chmod(0o755)


async def run_host(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float = INSTALL_TIMEOUT_S
) -> tuple[int | None, str]:
    """Run a build step on the host in its own process group (killed whole on timeout or
    cancellation); returns its exit code (None: killed at the timeout) and merged output."""
    async with await anyio.open_process(
        argv, cwd=cwd, env=env, stdin=None, stdout=-1, stderr=-2, start_new_session=True
    ) as process:
        chunks: list[bytes] = []
        try:
            with anyio.move_on_after(timeout_s) as scope:
                assert process.stdout is not None
                async for chunk in process.stdout:
                    chunks.append(chunk)
                await process.wait()
        finally:
            if process.returncode is None:
                _kill_group(process.pid)
                with anyio.CancelScope(shield=True):
                    await process.wait()
    output = b"".join(chunks).decode(errors="replace")
    if scope.cancelled_caught:
        return None, output + f"\n(killed after {timeout_s:g} s)\n"
    return process.returncode, output


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:  # pragma: no cover - not our group
        print(f"cannot kill process group {pid}", file=sys.stderr)
