"""The console's gate: every request is someone's, every action is same-site, every page locked down.

An ASGI middleware in front of every route (the static files too: nothing answers a stranger):

- **Who**: `?token=T` (the URL `codeloop console` prints) sets the session cookie and redirects
  to the same address without the token; `Authorization: Bearer T` serves programs (curl, the
  benchmark); otherwise the session cookie (`HttpOnly`, `SameSite=Strict`). Nothing valid: 401.
  The caller's grant goes to the route as `request.state.caller`.
- **Actions**: a request that is not GET/HEAD is refused (403) when its `Origin` is another
  site's, when the browser says it is cross-site (`Sec-Fetch-Site`), and, for a browser session,
  when it lacks the session's CSRF token (header `X-CSRF-Token`, or a form field `csrf_token`). A
  bearer token is no ambient credential, so a program sending one needs no CSRF token.
- **Pages**: a Content-Security-Policy allowing only this origin's scripts, styles and
  connections (no `unsafe-inline`, no `unsafe-eval`, nothing from the internet), no framing, no
  referrer to other sites, no sniffing, no caching of pages.

Tokens never reach a log or a page: uvicorn's access log is off (`codeloop.console.hosting`), a
refused token is not echoed, and the redirect drops it from the address.
"""

import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode

from codeloop.console.access import AccessTable, Grant

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "codeloop_console"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
MAX_FORM_BYTES = 1024 * 1024
SAFE_METHODS = frozenset({"GET", "HEAD"})
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    # same-origin, not no-referrer: under no-referrer Chromium sends `Origin: null` with a form post.
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


@dataclass(frozen=True)
class Caller:
    """Who is asking, as the routes see it."""

    grant: Grant
    csrf: str | None
    """The CSRF token pages carry for this session; None for a bearer-token caller."""
    session: str | None = None


class ConsoleGate:
    """The middleware: see the module docstring."""

    def __init__(self, app: ASGIApp, access: AccessTable, *, secure_cookie: bool = False) -> None:
        self.app = app
        self.access = access
        self.secure_cookie = secure_cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_headers(send, no_store=not scope["path"].startswith("/static/"))
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        token = (query.get("token") or [None])[0]
        if token is not None:
            await self._sign_in(scope, token, query, headers, send)
            return
        caller = self._caller(headers)
        if caller is None:
            await _refuse(
                send, headers, 401, "no valid access token: open the address `codeloop console` prints"
            )
            return
        if scope["method"] not in SAFE_METHODS:
            problem = _cross_site(scope, headers)
            if problem is None and caller.csrf is not None:
                receive, sent = await _csrf_of_request(receive, headers)
                if sent is None or not self.access.check_csrf(caller.session or "", sent):
                    problem = "the request lacks this page's CSRF token: reload the page and try again"
            if problem is not None:
                await _refuse(send, headers, 403, problem)
                return
        scope.setdefault("state", {})["caller"] = caller
        await self.app(scope, receive, send)

    def _caller(self, headers: dict[str, str]) -> Caller | None:
        bearer = headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            grant = self.access.grant_of_token(bearer[7:].strip())
            return Caller(grant, None) if grant is not None else None
        session = _cookie(headers.get("cookie", ""), COOKIE)
        if session is None:
            return None
        grant = self.access.grant_of_session(session)
        if grant is None:
            return None
        return Caller(grant, self.access.csrf_of(session), session)

    async def _sign_in(
        self, scope: Scope, token: str, query: dict[str, list[str]], headers: dict[str, str], send: Send
    ) -> None:
        if self.access.grant_of_token(token) is None:
            await _refuse(
                send, headers, 401, "that access token is not valid (a new one is made at every start)"
            )
            return
        rest = {k: v for k, v in query.items() if k != "token"}
        location = scope["path"] + (f"?{urlencode(rest, doseq=True)}" if rest else "")
        cookie = f"{COOKIE}={self.access.session_of(token)}; Path=/; HttpOnly; SameSite=Strict"
        if self.secure_cookie:
            cookie += "; Secure"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", location.encode()), (b"set-cookie", cookie.encode())],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _cross_site(scope: Scope, headers: dict[str, str]) -> str | None:
    origin = headers.get("origin")
    host = headers.get("host", "")
    if origin is not None and origin != "null" and origin.split("://", 1)[-1] != host:
        return f"a request from another site ({origin}) may not act here"
    if origin == "null":
        return "a request from an opaque origin may not act here"
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return "a cross-site request may not act here"
    return None


async def _csrf_of_request(receive: Receive, headers: dict[str, str]) -> tuple[Receive, str | None]:
    """The CSRF token the request sent (its header, else its urlencoded form's field) and a
    `receive` that hands the route the body again."""
    if CSRF_HEADER in headers:
        return receive, headers[CSRF_HEADER]
    if not headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return receive, None
    body, messages = b"", list[Message]()
    while True:
        message = await receive()
        messages.append(message)
        body += message.get("body", b"")
        if len(body) > MAX_FORM_BYTES or not message.get("more_body"):
            break
    replay = list(messages)

    async def again() -> Message:
        return replay.pop(0) if replay else await receive()

    return again, (parse_qs(body.decode("utf-8", "replace")).get(CSRF_FIELD) or [None])[0]


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and value:
            return value
    return None


def _with_headers(send: Send, *, no_store: bool) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            extra = list(HEADERS) + ([(b"cache-control", b"no-store")] if no_store else [])
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return wrapped


async def _refuse(send: Send, headers: dict[str, str], status: int, message: str) -> None:
    if "text/html" in headers.get("accept", ""):
        from codeloop.console.pages import refusal_page

        body, kind = refusal_page(status, message).encode(), b"text/html; charset=utf-8"
    else:
        body, kind = json.dumps({"error": message}).encode(), b"application/json"
    head = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
    if status == 401:
        head.append((b"www-authenticate", b'Bearer realm="codeloop console"'))
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})
