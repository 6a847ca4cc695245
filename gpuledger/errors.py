"""One flat error hierarchy. Library errors are translated at the boundary (`raise ... from e`).

Each error carries a short human title; the CLI renders every one of them as a single line and exit 1,
never a traceback, because they describe the user's input or environment, not a bug.
"""


class GpuledgerError(Exception):
    """Base of every error gpuledger raises on purpose."""

    title = "error"


class ConfigError(GpuledgerError):
    """The config file is unreadable or invalid. The message lists every problem as `file: key: problem`."""

    title = "bad config"

    def __init__(self, path: str, problems: list[str]):
        self.path = path
        self.problems = list(problems)
        lines = "\n".join(f"  {path}: {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s) in {path}:\n{lines}")


class LakeError(GpuledgerError):
    """The lake cannot be read or written (permissions, full disk, bad layout)."""

    title = "lake error"


class SpoolError(GpuledgerError):
    """The spool cannot be opened or appended to."""

    title = "spool error"


class QueryError(GpuledgerError):
    """A SQL query failed: bad SQL, unknown table or column, a statement that writes, or a timeout."""

    title = "query error"


class SourceError(GpuledgerError):
    """A collector source failed to start or to scrape; the message names the source and the reason."""

    title = "source error"


class ClusterError(GpuledgerError):
    """The Dask cluster does not answer, cannot see the lake, or lost work; names the scheduler or the partitions."""

    title = "cluster error"


class UsageError(GpuledgerError):
    """A command-line value is invalid in a way click cannot check by itself."""

    title = "usage error"
