"""Errors of the code index, one tree.

    SearchError                 base: every failure of chunking, indexing or querying
    ├── RepoNotFound            the repository directory does not exist or is not a directory
    ├── InvalidQuery            a query with nothing searchable (empty, only stop words, bad symbol name)
    ├── IndexLocked             another indexer held the index lock past the wait limit
    └── IndexUnavailable        the index storage could not be opened, read or written: permission
                                denied, a full disk, no file descriptors, EIO, a remote store timing
                                out; the index was left as it is
        └── IndexDirUnusable    no index can be kept where asked: a file where a directory must be,
                                /proc, a read-only path (the caller must name another place)
    └── ExamplesForbidden       the deployment's sandbox policy forbids running a query's examples
                                here (gVisor required and unusable, or a bad policy value)

A corrupt or version-mismatched index is not an error for the caller: `CodeIndex.update` rebuilds
it and says so in `IndexReport.messages`. A storage failure is never taken for damage
(`store.storage_failure`): rebuilding would destroy a good index and fail the same way. Foreign
exceptions (lancedb, pyarrow, OSError) are translated where they enter and chained with `from`.
"""


class SearchError(Exception):
    """Base for every failure of the code index."""


class RepoNotFound(SearchError):
    """The repository path does not exist or is not a directory."""


class InvalidQuery(SearchError, ValueError):
    """The query has nothing to search for; the message says what to send instead."""


class IndexLocked(SearchError, TimeoutError):
    """Another process kept the index lock longer than the caller was willing to wait."""


class IndexUnavailable(SearchError):
    """The index storage failed in a way a rebuild cannot fix (permissions, unreachable URI)."""


class IndexDirUnusable(IndexUnavailable):
    """The index directory cannot be made or written at all; the message names the path."""


class ExamplesForbidden(SearchError):
    """A query's examples cannot run: the sandbox policy allows no backend here."""
