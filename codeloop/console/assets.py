"""The console's static files, all served from this machine: nothing is loaded from the internet.

`console.css` and `console.js` sit beside this module (`static/`); `pygments.css` is made from
Pygments' own style; `htmx.min.js` is read from the installed `django-js-lib-htmx` distribution
(htmx repackaged on PyPI, version pinned in the constraints), so the console carries no copy of it.
"""

from functools import cache
from importlib import metadata
from pathlib import Path

from starlette.responses import PlainTextResponse, Response

from codeloop.console.diffs import pygments_css

STATIC = Path(__file__).with_name("static")
HTMX_DISTRIBUTION = "django-js-lib-htmx"
HTMX_FILE = "js_lib_htmx/static/htmx/htmx.min.js"
TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
OWN = frozenset({"console.css", "console.js"})


class MissingAsset(RuntimeError):
    """An asset the console needs is not installed."""


@cache
def htmx_path() -> Path:
    """Where the installed htmx is.

    Raises:
        MissingAsset: the distribution is not installed, or lacks the file.
    """
    try:
        files = metadata.files(HTMX_DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        raise MissingAsset(
            f"the web console needs {HTMX_DISTRIBUTION} (htmx): `pip install {HTMX_DISTRIBUTION}`, "
            "or start serve with --no-console"
        ) from None
    for file in files:
        if str(file) == HTMX_FILE:
            return Path(str(file.locate()))
    raise MissingAsset(f"{HTMX_DISTRIBUTION} is installed without {HTMX_FILE}; reinstall it")


@cache
def _asset(name: str) -> bytes | None:
    if name == "pygments.css":
        return pygments_css().encode()
    if name == "htmx.min.js":
        return htmx_path().read_bytes()
    if name in OWN:
        return (STATIC / name).read_bytes()
    return None


def static_response(name: str) -> Response:
    body = _asset(name)
    if body is None:
        return PlainTextResponse(f"no static file {name}", status_code=404)
    kind = TYPES.get(Path(name).suffix, "application/octet-stream")
    return Response(body, media_type=kind, headers={"cache-control": "private, max-age=3600"})
