"""The Hub client types each state the Hub puts a repo in (the replay's `set_state`), with the real huggingface_hub client."""

from __future__ import annotations

import pytest

from tracker.errors import BranchMissing, HubUnavailable, RepoDisabled, RepoGated, RepoGone
from tracker.hub.client import HubClient

BROKEN = "hubwatch-tests/broken-model"


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.mark.parametrize(("state", "error", "repo_state"), [
    ("deleted", RepoGone, "gone"),
    ("private", RepoGone, "gone"),
    ("disabled", RepoDisabled, "disabled"),
    ("branch_deleted", BranchMissing, "branch_missing"),
])
def test_the_head_check_types_each_state(replay, state, error, repo_state) -> None:
    """Each state is its own error on the head check, naming the repo state it tells; none is a transient fault."""
    replay.set_state(BROKEN, state)
    with pytest.raises(error) as info:
        HubClient(replay.endpoint).head(BROKEN, "main")
    assert info.value.repo_state == repo_state
    assert not isinstance(info.value, HubUnavailable)
    assert info.value.exit_code == 3
    assert str(info.value).startswith(BROKEN)


@pytest.mark.parametrize(("token", "token_sent", "words"), [
    (None, False, "without a token the two look alike"),
    ("hf_user", True, "this token has no access"),
])
def test_gone_says_what_the_token_can_tell(replay, token, token_sent, words) -> None:
    """Deleted and private look alike to outsiders: the error says whether a token was sent and what that means."""
    replay.set_state(BROKEN, "deleted")
    with pytest.raises(RepoGone) as info:
        HubClient(replay.endpoint, token=token).head(BROKEN, "main")
    assert info.value.token_sent is token_sent
    assert words in str(info.value)
    assert f"{BROKEN} does not exist on the Hub" in str(info.value)


def test_a_gated_repo_heads_and_lists_but_refuses_files(replay) -> None:
    """Gated without access: the head and the file list answer, a download is RepoGated (state gated)."""
    replay.set_state(BROKEN, "gated", gated="manual")
    hub = HubClient(replay.endpoint)
    head = hub.head(BROKEN, "main")
    assert head.gated == "manual"
    files = hub.list_files(BROKEN, head.sha)
    assert files
    with pytest.raises(RepoGated) as info:
        hub.download(BROKEN, head.sha, files[0].path)
    assert info.value.repo_state == "gated"


def test_the_disabled_message_is_the_reason(replay) -> None:
    """The disabled error quotes the Hub's "Access to this resource is disabled." whatever call met it."""
    sha = replay.head_sha(BROKEN)
    replay.set_state(BROKEN, "disabled")
    with pytest.raises(RepoDisabled) as info:
        HubClient(replay.endpoint).list_files(BROKEN, sha)
    assert "Access to this resource is disabled." in str(info.value)
