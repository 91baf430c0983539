"""Files that hold secrets: never read, listed, shown, blamed, diffed or indexed by a tool server,
git-ignored or not.

A rule is a glob. One without a slash matches a file's name at any depth (`*.pem`, `.env*`);
one with a slash matches the trailing components of its path (`.aws/credentials` matches
`home/.aws/credentials`); `DIR/**` matches everything below such a directory. Some files are secrets only when they hold credentials: `.npmrc` and
`.pypirc` are denied when their text has a token or password line (a registry URL alone is not
a secret), so a project's plain `.npmrc` stays readable.

The default list can be changed per server (`codeloop mcp --allow-path/--deny-path`) and in the
environment (`CODELOOP_SECRETS_ALLOW`, `CODELOOP_SECRETS_DENY`); an allow rule wins over a deny
rule. A refused read names the rule, so a user who wants the file shown knows what to allow.
"""

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tool_servers.protocol.errors import PermissionDenied

DEFAULT_DENY = (
    ".env",
    ".env.*",
    ".envrc",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.keystore",
    "*.jks",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".pgpass",
    ".htpasswd",
    ".aws/credentials",
    ".aws/config",
    ".config/gcloud/**",
    "application_default_credentials.json",
    "credentials.json",
    "service-account*.json",
    ".docker/config.json",
    ".kube/config",
    "*.tfstate",
)
"""Names and paths of files that hold credentials by convention."""
TOKEN_BEARING = (".npmrc", ".pypirc")
"""Files denied only when they hold a token or password."""
_CREDENTIAL_LINE = re.compile(r"(?im)^\s*[^#;\n]*(?:_authtoken|_auth|_password|password|token)\s*[=:]")
_MAX_SNIFF_BYTES = 64 * 1024


@dataclass(frozen=True)
class SecretRules:
    """Which files tools treat as secrets."""

    deny: tuple[str, ...] = DEFAULT_DENY
    allow: tuple[str, ...] = ()
    """Rules that take a file off the deny-list (an allow wins)."""
    token_bearing: tuple[str, ...] = TOKEN_BEARING

    def with_changes(self, *, allow: tuple[str, ...] = (), deny: tuple[str, ...] = ()) -> "SecretRules":
        """These rules plus extra `allow` and `deny` rules."""
        return SecretRules(
            deny=(*self.deny, *deny), allow=(*self.allow, *allow), token_bearing=self.token_bearing
        )

    def rule_for(self, rel: str, full: Path | None = None, *, text: str | None = None) -> str | None:
        """The rule that makes the file at root-relative `rel` a secret, or None.

        For the token-bearing names, `text` (the content, e.g. at a git revision) or else `full`
        (its first 64 KiB) is searched for credentials; with neither, those files count as secrets.
        """
        parts = PurePosixPath(rel).parts
        if not parts or any(_matches(rule, parts) for rule in self.allow):
            return None
        for rule in self.deny:
            if _matches(rule, parts):
                return rule
        for rule in self.token_bearing:
            if _matches(rule, parts) and _holds_credentials(full, text):
                return f"{rule} with a token or password"
        return None

    def is_secret(self, rel: str, full: Path | None = None) -> bool:
        return self.rule_for(rel, full) is not None

    def refuse(self, rel: str, full: Path | None = None, *, text: str | None = None) -> None:
        """Raise `PermissionDenied` naming the rule when `rel` is a secret file.

        Raises:
            PermissionDenied: `rel` matches a deny rule and no allow rule.
        """
        rule = self.rule_for(rel, full, text=text)
        if rule is not None:
            raise PermissionDenied(
                f"{rel} is a secrets file (rule {rule!r}); tools never show it. If it holds no secret, "
                "the person running the server can allow it (--allow-path or CODELOOP_SECRETS_ALLOW)",
                path=rel,
                rule=rule,
            )

    def git_excludes(self) -> list[str]:
        """Pathspecs that keep denied files out of `git diff` / `git show` output."""
        specs = []
        for rule in (*self.deny, *self.token_bearing):
            specs.append(f":(exclude,glob)**/{rule}")
        return specs


def _matches(rule: str, parts: tuple[str, ...]) -> bool:
    rule_parts = PurePosixPath(rule).parts
    if rule_parts[-1:] == ("**",):  # everything below a directory, wherever it sits
        inner, head = rule_parts[:-1], parts[:-1]
        return any(
            all(fnmatch.fnmatchcase(p, r) for p, r in zip(head[i : i + len(inner)], inner, strict=True))
            for i in range(len(head) - len(inner) + 1)
        )
    if len(rule_parts) > len(parts):
        return False
    tail = parts[len(parts) - len(rule_parts) :]
    return all(fnmatch.fnmatchcase(part, pattern) for part, pattern in zip(tail, rule_parts, strict=True))


def _holds_credentials(path: Path | None, text: str | None) -> bool:
    if text is not None:
        return bool(_CREDENTIAL_LINE.search(text))
    if path is None:
        return True
    try:
        with open(path, "rb") as handle:
            text = handle.read(_MAX_SNIFF_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return True  # unreadable now, maybe readable later: do not show it
    return bool(_CREDENTIAL_LINE.search(text))


DEFAULT_RULES = SecretRules()
