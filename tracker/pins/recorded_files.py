"""Pins for a lock file: a revision with the files that decide behaviour and their blob ids."""

from __future__ import annotations

from storage.errors import RevisionNotStored
from storage.front import Storage
from tracker.hub.client import HubClient
from tracker.pins.cache import Pin
from tracker.revision.changes import ChangeKind
from tracker.revision.classify import kind_of

# The kinds whose files change what a model does when loaded (README, licences and the like do not).
BEHAVIOUR_KINDS = frozenset(
    k.value for k in (ChangeKind.CONFIG, ChangeKind.TOKENIZER, ChangeKind.CHAT_TEMPLATE, ChangeKind.CUSTOM_CODE, ChangeKind.WEIGHTS)
)


def behaviour_files(store: Storage, hub: HubClient, repo_id: str, sha: str) -> dict[str, str]:
    """path -> blob id of the revision's behaviour files: from the stored revision when hubwatch has it,
    else from the Hub's file list (one request)."""
    try:
        revision = store.history.find_revision(repo_id, sha)
    except RevisionNotStored:
        return {f.path: f.oid for f in hub.list_files(repo_id, sha) if kind_of(f.path).value in BEHAVIOUR_KINDS}
    return {f.path: f.oid for f in store.history.revision_files(revision.id) if f.kind in BEHAVIOUR_KINDS}  # type: ignore[arg-type]


def locked(store: Storage, hub: HubClient, pin: Pin) -> Pin:
    """`pin` with its behaviour files recorded."""
    return Pin(pin.repo_id, pin.branch, pin.sha, pin.entry, files=behaviour_files(store, hub, pin.repo_id, pin.sha))


def head_pin(store: Storage, hub: HubClient, repo_id: str, branch: str) -> Pin:
    """The branch's current head as a locked pin."""
    head = hub.head(repo_id, branch)
    return locked(store, hub, Pin(repo_id, branch, head.sha, f"{repo_id}@{branch}"))


def canonical(hub: HubClient, pin: Pin) -> tuple[Pin | None, str]:
    """A pin of a dataset's canonical short name (`datasets/wikitext`) under the org name the Hub redirects it to
    (one request), with a line saying so; (None, why) when the Hub does not resolve it. Any other pin as it is."""
    from tracker.errors import HubwatchError
    from tracker.pins.pin_forms import is_short_dataset_key

    if not is_short_dataset_key(pin.repo_id):
        return pin, ""
    try:
        key = hub.head(pin.repo_id, pin.branch).repo_id
    except HubwatchError as err:
        return None, f"{err}: the short name does not resolve; pin the dataset's ORG/NAME"
    if key is None or is_short_dataset_key(key):
        return None, f"{pin.repo_id}: the Hub answered it without an org; pin the dataset's ORG/NAME"
    return Pin(key, pin.branch, pin.sha, pin.entry), f"{pin.repo_id} is a dataset's canonical short name: locked as {key}"
