"""One place that decides what a secret looks like, used by every writer of logs, audit records,
events, traces and reports.

    redact_text("OPENAI_API_KEY=sk-...")     -> "OPENAI_API_KEY=[redacted]"
    redact({"password": "x", "cmd": "..."})  -> {"password": "[redacted]", "cmd": "..."}
    install_log_redaction()                  # every log record of the process, from now on

It imports no other package of ours, so `bus`, `sandbox`, `tool_servers`, `agents` and
`codeloop` can all use it without bending the import direction between them.
"""

from redaction.logs import RedactingFilter, install_log_redaction, redact_record
from redaction.text import MASK, entropy_bits, names_secret, redact_text
from redaction.values import MAX_STRING, digest_summary, redact

__all__ = [
    "MASK",
    "MAX_STRING",
    "RedactingFilter",
    "digest_summary",
    "entropy_bits",
    "install_log_redaction",
    "names_secret",
    "redact",
    "redact_record",
    "redact_text",
]
