"""What the security reviewer looks for in the lines a patch adds: pure functions, no I/O."""

import re
from dataclasses import dataclass

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from redaction import names_secret, redact_text


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    rule: str
    message: str
    text: str


# (rule, pattern over one added line, why it matters)
RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "eval-exec",
        re.compile(r"\b(?:eval|exec)\s*\((?!\s*(?:[rbuf]?['\"][^'\"]*['\"]\s*\)))"),
        "eval/exec of a value that is not a constant runs whatever the input says; parse it instead "
        "(ast.literal_eval, json.loads) or dispatch on it",
    ),
    (
        "shell-true",
        re.compile(r"\bshell\s*=\s*True\b"),
        "shell=True hands the command line to a shell, so any input in it can inject commands; pass a "
        "list of arguments without shell=True",
    ),
    (
        "tls-verify-off",
        re.compile(
            r"\bverify\s*=\s*False\b|\bcheck_hostname\s*=\s*False\b|\bCERT_NONE\b|_create_unverified_context"
            r"|\brejectUnauthorized\s*:\s*false\b|NODE_TLS_REJECT_UNAUTHORIZED"
        ),
        "this turns TLS certificate verification off, so anyone on the path can impersonate the server; "
        "keep verification on (pass a CA bundle if the certificate is private)",
    ),
)
# `API_KEY = "..."`, `"password": "..."`, `token: str = "..."`: a secret-named name bound to a
# non-empty string literal is hard-coded whatever the value looks like (a masked or short one too).
SECRET_ASSIGNMENT = re.compile(
    r"""(?P<name>[A-Za-z_][A-Za-z0-9_]*|["'][A-Za-z0-9_\-]+["'])\s*(?::\s*[A-Za-z_][\w\[\], ]*)?\s*[:=]\s*[rbu]?(?P<q>["'])(?P<value>[^"']+)(?P=q)"""
)
SECRET = (
    "hardcoded-secret",
    "this line hard-codes what looks like a credential; read it from the environment or a secret "
    "store (e.g. os.environ[...]) and never commit it",
)


def added_lines(patch: str) -> list[tuple[str, int, str]]:
    """(path, line in the new file, text) of every line the patch adds.

    Raises:
        ValueError: the patch is not a unified diff.
    """
    out = []
    try:
        parsed = PatchSet(patch.splitlines(keepends=True))
    except UnidiffParseError as exc:
        raise ValueError(f"the patch is not a readable unified diff: {exc}") from None
    for patched in parsed:
        if patched.is_removed_file:
            continue
        path = patched.target_file.removeprefix("b/")
        for hunk in patched:
            for line in hunk:
                if line.is_added and line.target_line_no is not None:
                    out.append((path, line.target_line_no, line.value.rstrip("\n")))
    return out


def scan(patch: str | None) -> list[Hit]:
    """Every problem in the lines `patch` adds (nothing for no patch)."""
    if not patch:
        return []
    hits = []
    for path, number, text in added_lines(patch):
        code = text.split("#", 1)[0] if not text.lstrip().startswith(("'", '"')) else text
        if redact_text(text) != text or _secret_assignment(
            code
        ):  # redact_text: the detector of codeloop's logs
            hits.append(Hit(path, number, SECRET[0], SECRET[1], text))
        for rule, pattern, why in RULES:
            if pattern.search(code):
                hits.append(Hit(path, number, rule, why, text))
    return hits


def _secret_assignment(code: str) -> bool:
    for match in SECRET_ASSIGNMENT.finditer(code):
        if names_secret(match.group("name").strip("\"'")) and match.group("value").strip():
            return True
    return False
