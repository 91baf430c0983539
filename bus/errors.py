"""Errors crossing the NATS boundary.

    BusError
    ├── BusTimeout (also a TimeoutError)  a request or fetch got no answer in time
    ├── BusClosed                          the connection is closed or draining
    ├── NoResponders                       nobody is subscribed to the subject
    ├── BusNotFound                        the stream, consumer, bucket, key or message does not exist
    ├── BusNotReady                        JetStream cannot serve yet (electing a leader, placing peers)
    ├── ServerStartError                   the embedded nats-server is missing or would not start
    │   └── ServerDied                     it died while serving and could not be restarted
    ├── StateDirBusy                       another live process owns this state directory
    ├── RecordConflict                     a compare-and-set on a KV record lost to another writer
    ├── PermissionDenied                   the server refused this client's publish (its NATS permissions)
    ├── PayloadTooLarge                    a message larger than the server's max payload (never sent)
    └── MalformedMessage                   bytes that are not a valid envelope or payload
        └── UnsupportedSchemaVersion       a valid envelope of a schema version we do not speak

nats-py exceptions are translated into these where they enter (`bus/connection.py`), so nothing
from `nats.errors` leaks into agents or the CLI: a caller tells "not there" or "not ready yet"
by these types, never by the nats-py exception under `__cause__`.
"""


class BusError(Exception):
    """Base for every failure crossing the NATS boundary."""


class BusTimeout(BusError, TimeoutError):
    """No answer within the timeout; still caught by `except TimeoutError`."""


class BusClosed(BusError):
    """The connection is closed or draining."""


class NoResponders(BusError):
    """A request found no subscriber on its subject."""


class BusNotFound(BusError):
    """JetStream answered 404: the stream, consumer, bucket, key or message is not there (a message
    of a work queue is gone once acknowledged)."""


class BusNotReady(BusError):
    """JetStream is there but cannot serve the request yet: 503, or no peers to place a stream on
    (a cluster that just started or lost a node). Worth retrying for a while."""


class ServerStartError(BusError):
    """The embedded nats-server binary is missing or did not become healthy."""


class ServerDied(ServerStartError):
    """The embedded nats-server died while serving and restarting it failed or kept failing."""


class StateDirBusy(BusError):
    """Another live process holds the state directory's lock (a second `codeloop serve`)."""


class RecordConflict(BusError):
    """A compare-and-set update of a KV record lost to a concurrent writer."""


class PermissionDenied(BusError):
    """The server refused a publish or subscribe of this client: the user it connects as lacks the
    permission (e.g. a worker's read-only credentials writing the configuration center)."""


class PayloadTooLarge(BusError):
    """A message over the server's max payload; refused before sending, so nothing half-written."""


class MalformedMessage(BusError):
    """Bytes that do not parse as an envelope, or a payload that does not fit its kind."""


class UnsupportedSchemaVersion(MalformedMessage):
    """A well-formed envelope whose schema version this process cannot read."""

    def __init__(self, version: object, supported: int) -> None:
        super().__init__(f"schema_version {version!r} is not supported (this process speaks {supported})")
        self.version = version
        self.supported = supported
