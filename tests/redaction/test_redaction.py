"""The one redaction module: what it masks in text, in structured values and in log records."""

import logging
from pathlib import Path

import pytest

from redaction import MASK, install_log_redaction, redact, redact_text
from tests.redaction import secrets_corpus as planted


@pytest.mark.parametrize("name", sorted(planted.IN_TEXT))
def test_each_secret_format_is_masked_in_free_text(name: str) -> None:
    """Every token format, KEY=value pair, header and high-entropy word near a secret word is
    masked, and the text around it survives for the reader."""
    text = planted.IN_TEXT[name]
    out = redact_text(text)
    assert MASK in out
    for secret in planted.ALL:
        assert secret not in out
    assert out.split()[0] == text.split()[0] or out.startswith(text.split("=")[0])


@pytest.mark.parametrize(
    "text",
    [
        "git log --author=Jane --since=2024-01-01",
        "def compute_hash(data): return hashlib.sha256(data).hexdigest()",
        "tool_servers/search/index.py:120: update the manifest",
        "pytest -q tests/test_layering.py -k 'leaf and not slow'",
    ],
)
def test_ordinary_code_and_commands_pass_unchanged(text: str) -> None:
    """Redaction must not eat the commands and paths a reader of an audit log needs."""
    assert redact_text(text) == text


def test_private_key_blocks_are_masked_whole() -> None:
    """A PEM private key pasted into an argument leaves only its header line."""
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
    out = redact_text("key:\n" + pem + "after")
    assert "b3BlbnNzaC1rZXktdjEAAAAA" not in out and out.endswith("after")


def test_structured_values_mask_secret_keys_and_digest_contents() -> None:
    """Values under secret-named keys go entirely; contents are size and digest; numbers stay."""
    value = {
        "path": "config/settings.py",
        "content": f"API_TOKEN = '{planted.GITHUB_CLASSIC}'\n",
        "env": {"DB_PASSWORD": "short", "HOME": "/home/u"},
        "argv": ["mysql", "--password", planted.PASSWORD, "-H", planted.IN_TEXT["bearer"]],
        "token_budget": 1024,
    }
    out = redact(value, digest_keys={"content"})
    assert out["path"] == "config/settings.py"
    assert out["content"].startswith(f"[{len(value['content'])} chars sha256:")
    assert out["env"] == {"DB_PASSWORD": MASK, "HOME": "/home/u"}
    assert out["token_budget"] == 1024
    assert planted.PASSWORD not in str(out) and planted.BEARER not in str(out)


def test_log_records_are_redacted_whatever_handler_prints_them(caplog: pytest.LogCaptureFixture) -> None:
    """The CLI installs the record factory: arguments, messages and tracebacks come out masked."""
    install_log_redaction()
    install_log_redaction()  # idempotent
    log = logging.getLogger("tests.redaction")
    with caplog.at_level(logging.WARNING):
        log.warning("connecting with %s", planted.IN_TEXT["openai"])
        try:
            raise RuntimeError(f"upstream said {planted.IN_TEXT['slack']}")
        except RuntimeError:
            log.exception("call failed")
    text = caplog.text + "".join(r.exc_text or "" for r in caplog.records)
    assert "connecting with OPENAI_API_KEY=[redacted]" in caplog.text
    assert planted.OPENAI not in text and planted.SLACK not in text


def test_real_library_code_passes_unchanged() -> None:
    """The index stores redacted text: code that merely talks about tokens and keys (anyio's
    RunVar tokens, event loop tokens, `token=token.native_token`) must stay readable."""
    import anyio

    root = Path(anyio.__file__).parent
    changed = [p for p in sorted(root.rglob("*.py")) if redact_text(p.read_text()) != p.read_text()]
    assert changed == []


def test_redaction_keeps_the_line_count() -> None:
    """Search hits carry line numbers of the original file, so redaction never adds or drops lines."""
    text = "a = 1\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\nIDAQAB\n-----END EC PRIVATE KEY-----\nTOKEN=x\n"
    assert redact_text(text).count("\n") == text.count("\n")


def test_a_path_naming_a_secrets_file_stays_readable() -> None:
    """Messages say where credentials are (`credentials file: /home/u/.aws/credentials`); only
    values are masked."""
    text = "credentials file: /home/u/.codeloop/nats-credentials.json is unreadable"
    assert redact_text(text) == text
