"""The project environment settings a tool server uses when the composition root passes none:
environments detected from the root's files, cached in `environments/` of codeloop's cache
directory, built with this process's package-index, proxy and TLS variables."""

import os
from pathlib import Path

import platformdirs

from sandbox.environments.settings import EnvironmentSettings, build_variables


def default_environment_settings(cache_root: Path | None = None) -> EnvironmentSettings:
    """Detected environments cached under `cache_root` (codeloop's cache directory, default the
    platform's user cache directory) in `environments/`: for a server built without settings (a
    library user, a test). codeloop's composition root always passes its own
    (`codeloop.config.project_environment.environment_settings`: the root's `[environment]`)."""
    cache = (
        cache_root if cache_root is not None else platformdirs.user_cache_path("codeloop", appauthor=False)
    )
    return EnvironmentSettings(cache_dir=cache / "environments", build_env=build_variables(os.environ))
