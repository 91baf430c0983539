"""`EnvironmentSettings`: what the composition root tells the environment machinery — where the
cache is, the `[environment]` override, the limits — as one frozen value. This package reads no
environment variable and no configuration file itself (`build_variables` filters a mapping the
caller passes)."""

import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

CONFIGURED_SOURCE = "[environment] in codeloop.toml"

# What a build may see of the host: the package index's configuration (pip, uv, their config
# files), proxies and TLS trust, locale and the usual process basics. Never provider keys, bus
# credentials or tokens of other tools.
_PASSED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "TMPDIR",
        "XDG_CONFIG_HOME",
        "XDG_CONFIG_DIRS",
        "XDG_CACHE_HOME",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "PYENV_ROOT",
    }
)
_PASSED_PREFIXES = ("PIP_", "UV_")
_PROXY = re.compile(r"^(http|https|ftp|all|no)_proxy$", re.IGNORECASE)


def build_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` (the host's, as the composition root read it) a build passes on:
    PIP_* and UV_* (index URLs, certificates, config files), proxies, TLS trust, locale, PATH and
    HOME (pip's cache and config). Everything else — provider keys included — stays out."""
    return {
        name: value
        for name, value in environ.items()
        if name in _PASSED_NAMES or name.startswith(_PASSED_PREFIXES) or _PROXY.match(name)
    }


class EnvironmentSettings(BaseModel):
    """How project environments are found, built and kept, for one caller (the exec server,
    `codeloop sandbox exec`, `codeloop env`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    cache_dir: Path
    """Where environments live: `environments/` in codeloop's cache directory
    (`$CODELOOP_CACHE_DIR`, else `$XDG_CACHE_HOME/codeloop`, else `~/.cache/codeloop`). One per
    machine, shared by every codeloop home and worker on it."""
    enabled: bool = True
    """False: no project environment; commands get codeloop's own interpreter, as before."""
    python: str | None = None
    """`[environment] python`: a version (`3.9`), a specifier or an interpreter path; replaces the
    Python a detected recipe asks for, or goes with `install`."""
    install: tuple[str, ...] | None = None
    """`[environment] install`: the install commands; replaces detection. None: detect."""
    configured_source: str = CONFIGURED_SOURCE
    """How a recipe from `python`/`install` is described (`Recipe.source`)."""
    index_date: str | None = "git"
    """The date detected recipes resolve requirements at (`Recipe.index_date`): `git` (default) —
    when the project is a git checkout whose dependency files are as committed, the committer date
    of the last commit that changed them (so the key still changes only with those files, and an
    old checkout gets the releases of its time); an ISO 8601 date; None: always the newest."""
    python_paths: tuple[Path, ...] = ()
    """Interpreters to consider before pyenv's, uv's and PATH's (e.g. a configured toolchain)."""
    max_size_mb: int = Field(default=20480, ge=0)
    """Cache size limit: after a build, the least recently used environments not in use are
    removed until the cache fits (an environment in use is never removed). 0: no limit."""
    build_timeout_s: float = Field(default=1800.0, gt=0)
    """Wall-clock limit of one build, all steps together."""
    build_env: dict[str, str] = Field(default_factory=dict, repr=False)
    """Host variables the builds see (`build_variables(os.environ)`, from the composition root):
    the package index's settings, proxies, TLS trust. Not shown in reprs: an index URL may carry
    credentials."""
