"""The replay serves dataset repos as the Hub does, to the unmodified huggingface_hub client: info, tree, commits,
refs with the Parquet conversion branch, the dataset listing, resolve with Range (and through the CDN stand-in),
the states the Hub puts repos in; a dataset and a model of one name are two repos."""

from __future__ import annotations

import io
from collections.abc import Iterator

import httpx
import pyarrow.parquet as pq
import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import DisabledRepoError, GatedRepoError, RepositoryNotFoundError

from tests.support.dataset_repos import DATASET_ID, SCRIPT_ONLY_ID, evolving_dataset, script_only_dataset
from tracker.standins.replay.control import ReplayServer
from tracker.standins.replay.history import synthetic_history

NAME = DATASET_ID.removeprefix("datasets/")
SHARD = "data/train-00000-of-00001.parquet"


@pytest.fixture(scope="module")
def hub() -> Iterator[ReplayServer]:
    with ReplayServer(roots=[]) as server:
        server.add_repo(evolving_dataset())
        server.add_repo(script_only_dataset())
        server.add_repo(synthetic_history(NAME, commits=1))
        yield server


@pytest.fixture
def api(hub: ReplayServer) -> HfApi:
    return HfApi(endpoint=hub.endpoint, token=False)


def test_dataset_info_names_the_dataset_and_its_card(api: HfApi, hub: ReplayServer) -> None:
    """dataset_info answers with the id `org/name`, the head commit, the card's licence and configs, and siblings; the
    model of the same name is another repo."""
    info = api.dataset_info(NAME)
    assert info.id == NAME and info.sha == hub.head_sha(DATASET_ID)
    assert info.card_data["license"] == "mit"
    assert [c["config_name"] for c in info.card_data["configs"]] == ["default", "extra"]
    assert SHARD in {s.rfilename for s in info.siblings}
    assert api.model_info(NAME).sha == hub.head_sha(NAME) != info.sha
    expanded = api.dataset_info(NAME, expand=["sha", "gated", "lastModified"])
    assert expanded.sha == info.sha and expanded.gated is False


def test_refs_name_the_conversion_branch_and_it_lags(api: HfApi, hub: ReplayServer) -> None:
    """refs list refs/convert/parquet at the newest conversion shown: converted at revision 2 of 4, its tree holds
    `config/split/0000.parquet` files that read back as Parquet."""
    refs = api.list_repo_refs(NAME, repo_type="dataset")
    [convert] = refs.converts
    conversions = hub.repo(DATASET_ID).conversions
    assert convert.ref == "refs/convert/parquet" and convert.target_commit == conversions[1][1].sha
    files = {f.path for f in api.list_repo_tree(NAME, repo_type="dataset", revision=convert.ref, recursive=True)
             if f.path.endswith(".parquet")}
    assert files == {"default/train/0000.parquet", "default/test/0000.parquet", "extra/train/0000.parquet"}
    hub.set_head(DATASET_ID, 1)
    try:
        assert api.list_repo_refs(NAME, repo_type="dataset").converts[0].target_commit == conversions[0][1].sha
    finally:
        hub.set_head(DATASET_ID, 4)
    commits = api.list_repo_commits(NAME, repo_type="dataset", revision=convert.ref)
    assert [c.commit_id for c in commits] == [conversions[1][1].sha, conversions[0][1].sha]


def test_resolve_with_range_reads_a_real_parquet_footer(hub: ReplayServer) -> None:
    """/datasets/{org}/{name}/resolve/{rev}/{path} honours Range: the last 8 bytes are the footer length and PAR1,
    directly and through the CDN stand-in's 302; the conversion's files answer X-Revision."""
    sha = hub.head_sha(DATASET_ID)
    url = f"{hub.endpoint}/datasets/{NAME}/resolve/{sha}/{SHARD}"
    with httpx.Client(follow_redirects=True) as client:
        whole = client.get(url).content
        tail = client.get(url, headers={"Range": "bytes=-8"})
        assert tail.status_code == 206 and tail.content == whole[-8:] and tail.content.endswith(b"PAR1")
        assert pq.read_table(io.BytesIO(whole)).num_rows == 100
        hub.serve_from_cdn(DATASET_ID)
        redirected = client.get(url, headers={"Range": "bytes=-8"})
        assert redirected.status_code == 206 and redirected.content == tail.content
        assert redirected.history and redirected.history[0].status_code == 302
        converted = client.get(f"{hub.endpoint}/datasets/{NAME}/resolve/refs%2Fconvert%2Fparquet/default/test/0000.parquet")
        first = converted.history[0] if converted.history else converted  # the Hub's answer (a 302 to the CDN here)
        assert converted.status_code == 200 and first.headers["X-Revision"] == hub.repo(DATASET_ID).conversions[1][1].sha


def test_dataset_listing(api: HfApi) -> None:
    """/api/datasets lists datasets only (by author, newest modification first, with sha); /api/models no dataset."""
    listed = list(api.list_datasets(author="hubwatch-test", sort="last_modified", expand=["sha", "lastModified"]))
    assert {d.id for d in listed} == {NAME, SCRIPT_ONLY_ID.removeprefix("datasets/")}
    assert all(d.sha for d in listed)
    assert {m.id for m in api.list_models(author="hubwatch-test")} == {NAME}


def test_download_through_the_client(hub: ReplayServer, tmp_path) -> None:
    """hf_hub_download(repo_type="dataset") fetches a dataset's card by its commit."""
    path = hf_hub_download(NAME, "README.md", repo_type="dataset", revision=hub.head_sha(DATASET_ID),
                           endpoint=hub.endpoint, cache_dir=tmp_path, token=False)
    assert b"license: mit" in open(path, "rb").read()


@pytest.mark.parametrize(("state", "error"), [("gated", GatedRepoError), ("disabled", DisabledRepoError),
                                              ("deleted", RepositoryNotFoundError)])
def test_dataset_states(api: HfApi, hub: ReplayServer, state: str, error: type[Exception], tmp_path) -> None:
    """A gated dataset lists its files and refuses them; a disabled one refuses everything; a deleted one is gone."""
    hub.set_state(SCRIPT_ONLY_ID, state)
    try:
        name = SCRIPT_ONLY_ID.removeprefix("datasets/")
        if state == "gated":
            assert api.dataset_info(name).gated == "auto"
            with pytest.raises(error):
                hf_hub_download(name, "README.md", repo_type="dataset", revision=hub.head_sha(SCRIPT_ONLY_ID),
                                endpoint=hub.endpoint, cache_dir=tmp_path, token=False)
        else:
            with pytest.raises(error):
                api.dataset_info(name)
    finally:
        hub.set_state(SCRIPT_ONLY_ID, "active")


def test_script_only_revision(api: HfApi, hub: ReplayServer) -> None:
    """The script-only dataset's head holds its loading script and card, no data file."""
    files = {f.path for f in api.list_repo_tree(SCRIPT_ONLY_ID.removeprefix("datasets/"), repo_type="dataset",
                                                 revision=hub.head_sha(SCRIPT_ONLY_ID), recursive=True)}
    assert files == {"README.md", "scripted-corpus.py"}


def test_the_bundled_dataset_is_what_its_generator_writes(tmp_path) -> None:
    """The dataset `hubwatch demo` serves (histories/datasets/hubwatch-demo/evolving-qa) holds, commit by commit, the
    files tests/fixtures/generate_replay_dataset.py builds (the Parquet shards as LFS files with their real bytes)."""
    from tests.fixtures.generate_replay_dataset import BUNDLED_DATASET, bundled_dataset, write
    from tracker.standins.replay.control import BUNDLED_ROOT
    from tracker.standins.replay.history import LfsBlob, load_roots

    bundled = load_roots([BUNDLED_ROOT])[BUNDLED_DATASET]
    write(tmp_path)
    rewritten = load_roots([tmp_path])[BUNDLED_DATASET]
    built = bundled_dataset()
    for history in (bundled, rewritten):
        assert [c.title for c in history.commits] == [c.title for c in built.commits]
        for ours, theirs in zip(history.commits, built.commits, strict=True):
            assert {p: e.blob.oid for p, e in history.trees[ours.sha].items()} == {
                p: e.blob.oid for p, e in built.trees[theirs.sha].items()}
    assert isinstance(bundled.trees[bundled.commits[0].sha]["data/train-00000-of-00001.parquet"].blob, LfsBlob)
    assert (tmp_path / BUNDLED_DATASET / "repo.json").read_bytes() == (BUNDLED_ROOT / BUNDLED_DATASET / "repo.json").read_bytes()


def test_cards_have_the_shape_push_to_hub_writes(api: HfApi, hub: ReplayServer) -> None:
    """One config: `dataset_info` is a mapping without a config name; several: a list naming each config; the
    counts are the Parquet files' rows."""
    scripted = hub.repo(SCRIPT_ONLY_ID)
    one = api.dataset_info(SCRIPT_ONLY_ID.removeprefix("datasets/"), revision=scripted.commits[0].sha).card_data
    assert isinstance(one["dataset_info"], dict) and one["dataset_info"]["splits"][0]["num_examples"] == 3
    several = api.dataset_info(NAME).card_data["dataset_info"]
    assert [(i["config_name"], [(s["name"], s["num_examples"]) for s in i["splits"]]) for i in several] == [
        ("default", [("train", 100), ("test", 15)]), ("extra", [("train", 30)])]


def test_hub_client_reads_the_conversion_by_its_commit(hub: ReplayServer) -> None:
    """HubClient.conversion_commit names the conversion's commit (None for a dataset without one); its files are
    listed and read by range by that sha, under the dataset's key."""
    from tracker.hub.client import HubClient

    client = HubClient(hub.endpoint)
    commit = client.conversion_commit(DATASET_ID)
    assert commit is not None and commit.sha == hub.repo(DATASET_ID).conversions[-1][1].sha
    assert client.conversion_commit(SCRIPT_ONLY_ID) is None
    files = {f.path: f for f in client.list_files(DATASET_ID, commit.sha)}
    shard = files["default/test/0000.parquet"]
    assert shard.lfs_sha256 is not None
    source = client.open_range(DATASET_ID, commit.sha, shard.path, shard.lfs_size or shard.size, first_block=8, max_block=8)
    assert source.read(source.size - 4, 4) == b"PAR1" and source.requests == 1
