"""The replay puts a repo into each state the Hub puts repos in, answered as the real huggingface_hub client expects."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    DisabledRepoError,
    GatedRepoError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from tracker.standins.replay.control import REPO_STATES

BROKEN = "hubwatch-tests/broken-model"


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)


def _api(replay, token: str | bool = False) -> HfApi:
    return HfApi(endpoint=replay.endpoint, token=token)


@pytest.mark.parametrize(("token", "status"), [(False, 401), ("hf_user", 404)])
def test_a_deleted_repo_is_repo_not_found_everywhere(replay, token, status) -> None:
    """Deleted: model info, trees and files answer RepoNotFound (401 anonymous, 404 with a token); the listing drops it."""
    sha = replay.head_sha(BROKEN)
    replay.set_state(BROKEN, "deleted")
    api = _api(replay, token)
    with pytest.raises(RepositoryNotFoundError) as info:
        api.model_info(BROKEN)
    assert info.value.response.status_code == status
    assert info.value.response.headers["X-Error-Code"] == "RepoNotFound"
    with pytest.raises(RepositoryNotFoundError):
        list(api.list_repo_tree(BROKEN, revision=sha))
    assert BROKEN not in {m.id for m in api.list_models(author="hubwatch-tests")}


def test_a_private_repo_is_gone_to_outsiders_and_readable_with_access(replay) -> None:
    """Private: anonymous requests get RepoNotFound as for a deleted repo; a token with access reads it, private."""
    replay.set_state(BROKEN, "private")
    with pytest.raises(RepositoryNotFoundError):
        _api(replay).model_info(BROKEN)
    assert _api(replay, "hf_user").model_info(BROKEN, expand=["private"]).private is True


@pytest.mark.parametrize(("token", "granted", "status"), [(False, False, 401), ("hf_user", False, 403)])
def test_a_gated_repo_lists_its_files_but_refuses_them(replay, tmp_path, token, granted, status) -> None:
    """Gated: info and trees stay readable with the mode; /resolve/ answers GatedRepo (401 anonymous, 403 not granted)."""
    sha = replay.head_sha(BROKEN)
    replay.set_state(BROKEN, "gated", gated="manual", granted=granted)
    api = _api(replay, token)
    assert api.model_info(BROKEN, expand=["gated"]).gated == "manual"
    assert any(True for _ in api.list_repo_tree(BROKEN, revision=sha))
    with pytest.raises(GatedRepoError) as info:
        hf_hub_download(BROKEN, "config.json", revision=sha, endpoint=replay.endpoint, token=token,
                        cache_dir=tmp_path)
    assert info.value.response.status_code == status


def test_a_gated_repo_granted_to_the_token_is_readable(replay, tmp_path) -> None:
    """Gated with access granted: a token downloads files, anonymous requests still get 401 GatedRepo."""
    sha = replay.head_sha(BROKEN)
    replay.set_state(BROKEN, "gated", granted=True)
    path = hf_hub_download(BROKEN, "config.json", revision=sha, endpoint=replay.endpoint, token="hf_user",
                           cache_dir=tmp_path)
    assert path
    with pytest.raises(GatedRepoError):
        hf_hub_download(BROKEN, "config.json", revision=sha, endpoint=replay.endpoint, token=False,
                        cache_dir=tmp_path / "anon")


def test_a_disabled_repo_answers_403_with_the_hubs_words(replay) -> None:
    """Disabled: 403 with `X-Error-Message: Access to this resource is disabled.`, which the client types as DisabledRepoError."""
    replay.set_state(BROKEN, "disabled")
    with pytest.raises(DisabledRepoError) as info:
        _api(replay).model_info(BROKEN)
    assert info.value.response.status_code == 403
    assert "X-Error-Code" not in info.value.response.headers


def test_a_deleted_branch_is_revision_not_found_and_its_commits_stay(replay) -> None:
    """Branch deleted: the branch name answers RevisionNotFound, refs list no branch, a commit is still read by sha."""
    sha = replay.head_sha(BROKEN)
    replay.set_state(BROKEN, "branch_deleted")
    api = _api(replay)
    with pytest.raises(RevisionNotFoundError):
        api.model_info(BROKEN, revision="main")
    assert api.list_repo_refs(BROKEN).branches == []
    assert api.model_info(BROKEN, revision=sha).sha == sha


@pytest.mark.parametrize("state", [s for s in REPO_STATES if s != "active"])
def test_restored_repos_answer_as_recorded_and_are_listed_as_modified_now(replay, state) -> None:
    """Restoring any state brings back the recorded answers and flags, last modified now (the listing sees it again)."""
    before = replay.last_modified(BROKEN)
    flags = (replay.repo(BROKEN).private, replay.repo(BROKEN).gated)
    replay.set_state(BROKEN, state)
    replay.set_state(BROKEN, "active")
    info = _api(replay).model_info(BROKEN, revision="main", expand=["sha", "private", "gated"])
    assert info.sha == replay.head_sha(BROKEN)
    assert (info.private, info.gated) == flags
    assert replay.last_modified(BROKEN) > before
    assert BROKEN in {m.id for m in _api(replay).list_models(author="hubwatch-tests")}


def test_the_state_admin_route(replay) -> None:
    """`POST /_replay/state/{org}/{name}?state=S` sets the state (for a replay in another process); a bad state is 400."""
    url = f"{replay.endpoint}/_replay/state/{BROKEN}?state=disabled"
    with urllib.request.urlopen(urllib.request.Request(url, method="POST")) as answer:
        assert json.load(answer) == {"repo_id": BROKEN, "state": "disabled"}
    assert replay.state(BROKEN) == "disabled"
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(urllib.request.Request(f"{replay.endpoint}/_replay/state/{BROKEN}?state=asleep", method="POST"))
    assert info.value.code == 400


def test_a_renamed_repo_answers_307_to_its_new_name_on_the_api_and_resolve(replay, tmp_path) -> None:
    """Renamed: the old name's API and /resolve/ answer 307 to the new name, which the client follows; model info
    names the new id with the same `_id`; a repo created under the old name afterwards is another repo."""
    from tracker.standins.replay.history import synthetic_history

    sha = replay.head_sha(BROKEN)
    before = _api(replay).model_info(BROKEN)
    replay.set_state(BROKEN, "private")
    replay.rename(BROKEN, "hubwatch-tests/renamed-model")
    replay.set_state("hubwatch-tests/renamed-model", "active")
    request = urllib.request.Request(f"{replay.endpoint}/api/models/{BROKEN}/revision/main?expand=sha")

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.build_opener(NoRedirect).open(request)
    assert info.value.code == 307
    assert info.value.headers["Location"].endswith("/api/models/hubwatch-tests/renamed-model/revision/main?expand=sha")
    after = _api(replay).model_info(BROKEN, revision="main")
    assert (after.id, after.sha, vars(after)["_id"]) == ("hubwatch-tests/renamed-model", sha, vars(before)["_id"])
    assert hf_hub_download(BROKEN, "config.json", revision=sha, endpoint=replay.endpoint, token=False, cache_dir=tmp_path)
    replay.add_repo(synthetic_history(BROKEN))
    again = _api(replay).model_info(BROKEN)
    assert again.id == BROKEN and vars(again)["_id"] != vars(before)["_id"]


def test_the_rename_admin_route(replay) -> None:
    """`POST /_replay/rename/{org}/{name}?to=ORG/NAME` renames (for a replay in another process); the old name answers 307."""
    url = f"{replay.endpoint}/_replay/rename/{BROKEN}?to=hubwatch-tests/renamed-model"
    with urllib.request.urlopen(urllib.request.Request(url, method="POST")) as answer:
        assert json.load(answer) == {"repo_id": "hubwatch-tests/renamed-model", "renamed_from": BROKEN}
    assert _api(replay).model_info(BROKEN).id == "hubwatch-tests/renamed-model"


def test_storage_moves_and_squash_as_the_client_sees_them(replay, tmp_path) -> None:
    """Through the admin routes (for a replay in another process): moved to Xet, the client's tree entries carry a
    `xet_hash` beside the same LFS sha256 and `hf_hub_download` follows the 302 to the CDN for the bytes; squashed,
    the branch lists one commit with the head's files, the old sha unknown, the repo's `_id` kept."""
    repo = "hubwatch-tests/every-kind"
    api = _api(replay)
    sha, uid = replay.head_sha(repo), vars(_api(replay).model_info(repo))["_id"]
    before = {f.path: f.lfs.sha256 for f in api.list_repo_tree(repo, revision=sha, recursive=True) if getattr(f, "lfs", None)}
    assert before
    for route in (f"storage/{repo}?to=xet", f"squash/{repo}"):
        with urllib.request.urlopen(urllib.request.Request(f"{replay.endpoint}/_replay/{route}", method="POST")) as answer:
            assert answer.status == 200
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(urllib.request.Request(f"{replay.endpoint}/_replay/storage/{repo}?to=tape", method="POST"))
    assert info.value.code == 400
    [commit] = api.list_repo_commits(repo)
    entries = [f for f in api.list_repo_tree(repo, revision=commit.commit_id, recursive=True) if getattr(f, "lfs", None)]
    assert {f.path: f.lfs.sha256 for f in entries} == before and all(f.xet_hash for f in entries)
    small = min(entries, key=lambda f: f.size)
    path = hf_hub_download(repo, small.path, revision=commit.commit_id, endpoint=replay.endpoint, token=False, cache_dir=tmp_path)
    with open(path, "rb") as f:
        assert f.read() == replay.repo(repo).trees[commit.commit_id][small.path].blob.read()
    assert [r.path for r in replay.cdn.requests] == [f"/xet/{small.lfs.sha256}"]
    with pytest.raises(RevisionNotFoundError):
        api.model_info(repo, revision=sha)
    assert vars(api.model_info(repo))["_id"] == uid
