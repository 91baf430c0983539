"""An instance's layer over its shared environment: what the official instance image adds to the
environment image — the spec's `install` (`pip install -e .`) run at the instance's base commit —
as a layered environment of `sandbox.environments` (`Recipe.base`).

The environments store builds and caches it like any environment: a virtualenv over the shared
one (whose packages it sees, not copies), the install run on the host in the layer's copy of the
instance's tree with the package index reachable. Its key is the shared environment's key plus
the tree's install inputs (`INSTALL_INPUTS`) and the commands: instances whose packaging files are
equal share one layer. What differs between them and the layer's copy (the code, the tests) is
the workspace's: the sandbox shows the instance's tree at the layer's project path, where the
editable install points, and the build products the tree lacks (`*.egg-info`, setuptools_scm's
`_version.py`) read-only over it. The entry points, the dependencies a base commit's setup.py
wants (pylint's astroid) and its version file are those of that packaging, as in the official
instance image.

What is SWE-bench's choice here, not the store's: which files make the install's inputs, the
image-era constraints the install obeys too, setuptools' legacy (path-based) editable install,
and the PYTHONPATH that tox-current-env's interpreter links need (`test_variables`).
"""

from pathlib import Path

from codeloop.swebench.recipe import CONSTRAINTS_PATH, EnvRecipe
from sandbox.environments import Environment, Recipe
from sandbox.environments.build import site_packages

LAYER_FORMAT = 1
INSTALL_INPUTS = ("setup.py", "setup.cfg", "pyproject.toml")
"""What `pip install -e .` of these projects reads to decide what it installs: the dependencies,
the entry points, the packages and the version (the version itself is pinned by the install
command, `EnvRecipe.install`)."""


def layer_recipe(recipe: EnvRecipe, parent: Environment, tree: Path) -> Recipe:
    """The layered recipe of an instance whose scratch tree is `tree`, over `parent` (the shared
    environment of `recipe`, built)."""
    env = {}
    if parent.project_path is not None:
        # The image-era pins (`recipe.constraints`) bind the instance's install as the shared
        # build's: the parent's copy holds the file, and its path is part of the parent's key.
        env["PIP_CONSTRAINT"] = str(parent.project_path / CONSTRAINTS_PATH)
    if (tree / "setup.py").is_file() or (tree / "setup.cfg").is_file():
        # A path-based editable install (the tree on sys.path, as `setup.py develop` made it for
        # the official images) rather than setuptools' import-hook finder: pylint's plugin loader
        # maps each checker file to a module through sys.path, and finds none under a finder.
        # (A pyproject-only project has no legacy path: PEP 660 it is.)
        env["SETUPTOOLS_ENABLE_FEATURES"] = "legacy-editable"
    return Recipe(
        kind="custom",
        source=f"SWE-bench install of {recipe.label}",
        base=parent.key,
        install=(recipe.install,) if recipe.install else (),
        inputs=INSTALL_INPUTS,
        env=env,
        tools=(),
        copy_project=True,
        key_extra={"swebench": "4.1.0", "layer_format": str(LAYER_FORMAT)},
    )


def eval_variables(layer: Environment, *, through_links: bool) -> dict[str, str]:
    """More variables for the eval script's commands, beyond what the sandbox sets for the layer.

    `through_links`: both site-packages on PYTHONPATH, for test commands that start the
    interpreter through a symlink of their own: tox-current-env (sphinx's test command) links
    `.tox/py39/bin/python` to the running interpreter, and a virtualenv's interpreter started
    through such a link finds no pyvenv.cfg beside it and runs bare, without the environment's
    packages (the official conda interpreter is no virtualenv, so the link works there). The
    tree itself is imported from the working directory (`python -m pytest`), as there.
    """
    if not through_links:
        return {}
    return {"PYTHONPATH": ":".join(str(site_packages(env.venv)) for env in layer.chain())}
