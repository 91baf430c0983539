"""Secrets in log records: every record is redacted when it is created, whatever logger or handler.

A `logging.Filter` on a handler sees only what reaches that handler, and libraries (uvicorn,
nats-py) bring their own handlers; the record factory sees every record. `install_log_redaction`
wraps the current factory once: the message is formatted with its arguments and redacted, and a
traceback is formatted and redacted into `exc_text`, which the standard formatter prints instead
of formatting the exception again.
"""

import logging

from redaction.text import redact_text

_INSTALLED = "_codeloop_redacting"


class RedactingFilter(logging.Filter):
    """A filter that redacts the record in place (for handlers added outside the factory's reach)."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """Mask secrets in `record`'s message, arguments and traceback, in place."""
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: keep the parts, redacted
        message = f"{record.msg} {record.args!r}"
    record.msg, record.args = redact_text(message), None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact_text(record.exc_text)
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info)
    return record


def install_log_redaction() -> None:
    """Redact every log record this process creates from now on; calling it again does nothing."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, _INSTALLED, False):
        return

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        return redact_record(previous(*args, **kwargs))

    setattr(factory, _INSTALLED, True)
    logging.setLogRecordFactory(factory)
