"""hubwatch's exceptions: a small tree, raised at library boundaries with `raise ... from err`."""

from __future__ import annotations


class HubwatchError(Exception):
    """Base of every error hubwatch reports to a person. `exit_code` is what the CLI returns."""

    exit_code = 1


class ConfigError(HubwatchError):
    """The configuration file or environment is invalid."""

    exit_code = 4


class HubError(HubwatchError):
    """Talking to the Hub failed. `repo_state` names the repo's state when the Hub's answer tells one (the
    lifecycle errors below: gone, gated, disabled, branch_missing); None for a fault of the moment."""

    repo_state: str | None = None


class HubUnavailable(HubError):
    """The Hub did not answer, answered 5xx, or timed out: try again later."""


class RateLimited(HubUnavailable):
    """The Hub answered 429; `retry_after_s` says how long to wait when it said."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RepoGone(HubError):
    """The repo does not exist, or is private to us: to anyone without access the Hub answers both alike
    (401 anonymous, 404 with a token). `token_sent` says whether a token was sent (then it has no access)."""

    exit_code = 3
    repo_state = "gone"

    def __init__(self, message: str, token_sent: bool = False) -> None:
        super().__init__(message)
        self.token_sent = token_sent


class RepoGated(HubError):
    """The repo is gated and our token (if any) has not been granted access: its files cannot be read."""

    exit_code = 3
    repo_state = "gated"


class RepoDisabled(HubError):
    """The Hub disabled the repo (403 "Access to this resource is disabled."): not a fault of the moment."""

    exit_code = 3
    repo_state = "disabled"


class RepoMoved(HubError):
    """The repo was renamed on the Hub and the watch is set not to follow it ([poll] on_move = "stop")."""

    exit_code = 3
    repo_state = "moved"

    def __init__(self, message: str, moved_to: str) -> None:
        super().__init__(message)
        self.moved_to = moved_to


class RepoReplaced(RepoGone):
    """Another repo now has the watched name (a new `_id`): the watched one was deleted or renamed away. Its
    commits are never merged into the watched history."""

    def __init__(self, message: str, uid: str) -> None:
        super().__init__(message)
        self.uid = uid


class RevisionNotFound(HubError):
    """The branch or commit does not exist in the repo."""

    exit_code = 3


class BranchMissing(RevisionNotFound):
    """The watched branch does not exist (any more) in a repo that does."""

    repo_state = "branch_missing"


class NotWatched(HubwatchError):
    """The repo is not watched."""

    exit_code = 3


class UnknownRevision(HubwatchError):
    """No stored revision matches what was asked for."""

    exit_code = 3


class BadInput(HubwatchError):
    """A file the user handed in (a lock file) cannot be read as a whole."""

    exit_code = 2


class LocalCacheMissing(BadInput):
    """There is no Hugging Face cache where one was looked for."""


class RefusedFile(BadInput):
    """A local file hubwatch will not read: not a regular file, too large, a symlink leaving the tree it
    must stay in, or not UTF-8. `path` and `reason` say which and why; the message is one line."""

    def __init__(self, path: str, reason: str, what: str = "file") -> None:
        super().__init__(f"refused {what} {path}: {reason}")
        self.path, self.reason, self.what = path, reason, what
