"""What the Hub did to a watched repo itself, told by its typed answers (tracker/errors.py's `repo_state`): the
state a poll found, its words and its event (storage/kinds.py REPO_STATES, REPO_STATE_EVENTS). The store writes
it only when it changes the watch's state, with a history row, in the poll's own transaction."""

from __future__ import annotations

from typing import Any

from storage.event_log import NewEvent
from storage.kinds import REPO_STATE_EVENTS, REPO_STATE_SEVERITIES
from storage.models import Watch
from storage.watches import RepoStateSeen
from tracker.errors import HubError, RepoGone, RepoMoved, RepoReplaced
from tracker.revision.events import event_id

# What to do about each state, for the CLI's lines and the docs.
ADVICE = {
    "gone": "if it was made private, set the token variable to a token with access; if it was deleted, "
            "`hubwatch watch remove` it (its history stays)",
    "disabled": "nothing to do but wait for the Hub to restore it, or `hubwatch watch remove` it (its history stays)",
    "gated": "request access on the repo's Hub page and set the token variable to a token that was granted it",
    "branch_missing": "watch another branch (`hubwatch watch add REPO --branch B`) or remove this watch",
    "moved": "watch the new name (`hubwatch watch add NEW`); a watch that follows the rename ([poll] on_move = "
             "\"follow\") moves there with its history by itself",
}


def state_of(err: BaseException) -> str | None:
    """The repo state a poll's error tells (gone, gated, disabled, branch_missing); None for any other failure."""
    return err.repo_state if isinstance(err, HubError) else None


def failed_state(watch: Watch, err: HubError, repo_meta: dict[str, Any] | None, parked: bool = False) -> RepoStateSeen:
    """The state a failed poll's typed error tells, as the store writes it. `parked`: no longer polled on its own."""
    state = err.repo_state or "active"
    detail: dict[str, Any] = {"reason": str(err)[:500]}
    if parked:
        detail["parked"] = True
    if isinstance(err, RepoGone):
        detail["token_sent"] = err.token_sent
    if isinstance(err, RepoReplaced):
        detail["replaced_by"] = err.uid
    if isinstance(err, RepoMoved):
        detail["moved_to"] = err.moved_to
    if state == "gated":
        detail["mode"] = (repo_meta or watch.repo_meta or {}).get("gated") or "unknown"
    return _seen(watch, state, detail)


def moved_state(watch: Watch, answered_id: str | None) -> RepoStateSeen | None:
    """The repo renamed: the Hub answered the watched name with another id (its 307 followed). Ids compare without
    case, as the Hub's do. None when it answered with the watched name (or said none)."""
    if not answered_id or answered_id.casefold() == watch.repo_id.casefold():
        return None
    return _seen(watch, "moved", {"moved_to": answered_id})


def gated_state(watch: Watch, mode: str, unread: list[str], reason: str) -> RepoStateSeen | None:
    """A poll that stored what stays readable of a gated repo, the Hub refusing its files (`unread`): the watch
    becomes gated (None when it is already)."""
    if (watch.repo_state or "active") == "gated":
        return None
    return _seen(watch, "gated", {"reason": reason[:500], "mode": mode, "unread": unread[:50], "followed": True})


def restored_state(watch: Watch, repo_meta: dict[str, Any] | None, read_files: bool) -> RepoStateSeen | None:
    """A poll that succeeded on a watch in another state than active: its return (None when it was active). A
    gated watch returns only when files were read (`read_files`) or the head says the gate is lifted."""
    state = watch.repo_state or "active"
    if state == "active" or (state == "gated" and not read_files and (repo_meta or {}).get("gated")):
        return None
    if state == "moved" and (watch.state_detail or {}).get("moved_from"):
        return None  # its history moved to the new name, which the watch now polls: the rename stands
    return _seen(watch, "active", {})


def summary_of(state: str, previous: str, branch: str, detail: dict[str, Any]) -> str:
    """One line a person reads: what happened to the repo."""
    if state == "gone" and detail.get("replaced_by"):
        return "repo gone from the Hub: another repo now has its name (not merged into this history)"
    if state == "gone":
        alike = ("this token has no access: the Hub answers both alike" if detail.get("token_sent")
                 else "without a token with access the two look alike")
        return f"repo gone from the Hub: deleted, or made private ({alike})"
    if state == "disabled":
        return 'repo disabled by the Hub: "Access to this resource is disabled."'
    if state == "gated" and detail.get("followed"):
        unread = detail.get("unread") or []
        return (f"repo gated ({detail.get('mode', 'unknown')}): its files are refused to this token; followed through "
                f"what stays readable (file list, sizes, LFS hashes), {len(unread)} file(s) not read")
    if state == "gated":
        return f"repo gated ({detail.get('mode', 'unknown')}): its files are refused to this token"
    if state == "branch_missing":
        return f"branch {branch} no longer exists on the Hub"
    if state == "moved":
        return f"repo renamed on the Hub to {detail.get('moved_to')}: followed to the new name"
    return f"repo restored: answers again after being {previous.replace('_', ' ')}"


def _seen(watch: Watch, state: str, detail: dict[str, Any]) -> RepoStateSeen:
    previous = watch.repo_state or "active"
    kind = REPO_STATE_EVENTS[state]
    severity = REPO_STATE_SEVERITIES[state]
    summary = summary_of(state, previous, watch.branch, detail)
    full = {**detail, "state": state, "previous": previous, "branch": watch.branch}
    since = watch.state_since.isoformat() if watch.state_since else watch.created_at.isoformat() if watch.created_at else ""
    name = watch.repo_id.split("/", 1)[-1]
    event = NewEvent(
        event_id=event_id(watch.repo_id, None, kind, f"{watch.branch}\n{previous}\n{since}"),
        kind=kind,
        title=f"{name}: {summary} ({severity})",
        severity=severity,
        payload={"kinds": ["repo"], "summaries": [summary], "detail": full},
    )
    return RepoStateSeen(state, full, event, sha=watch.last_sha)
