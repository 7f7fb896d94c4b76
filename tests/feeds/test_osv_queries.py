"""osv.dev's query language as hubwatch reads it (feeds/osv/queries.py): what each query asks, and page tokens."""

from __future__ import annotations

import pytest

from feeds.osv.queries import InvalidQuery, ModelQuery, decode_token, encode_token, parse_json_query

HUB = "https://huggingface.co"
SHA = "0ef4777ec6b394ff81d81284d5055c34c8dfe04b"
REPO = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize(("query", "expected"), [
    ({"package": {"purl": f"pkg:huggingface/{REPO}@{SHA}"}}, ModelQuery(REPO, SHA)),
    ({"package": {"purl": f"pkg:huggingface/{REPO}@{SHA.upper()}"}}, ModelQuery(REPO, SHA)),
    ({"package": {"purl": f"pkg:huggingface/{REPO}@{SHA}?download_url=x#sub"}}, ModelQuery(REPO, SHA)),
    ({"package": {"purl": f"pkg:huggingface/{REPO}"}, "version": SHA}, ModelQuery(REPO, SHA)),
    ({"package": {"purl": f"pkg:huggingface/{REPO}"}}, ModelQuery(REPO, None)),
    ({"package": {"purl": f"pkg:huggingface/{REPO}"}, "commit": SHA}, ModelQuery(REPO, SHA)),
    ({"commit": SHA}, ModelQuery(None, SHA)),
    ({"package": {"ecosystem": "GIT", "name": f"{HUB}/{REPO}/"}, "version": SHA}, ModelQuery(REPO, SHA)),
    ({"package": {"ecosystem": "GIT", "name": f"https://github.com/{REPO}"}}, ModelQuery(None, None, known=False)),
    ({"package": {"purl": "pkg:pypi/transformers@4.40.0"}}, ModelQuery(None, None, known=False)),
    ({"package": {"name": "transformers", "ecosystem": "PyPI"}, "version": "4.40.0"}, ModelQuery(None, None, known=False)),
])
def test_what_a_query_asks(query: dict, expected: ModelQuery) -> None:
    """The repo and commit a query names (the sha lowercase, qualifiers and subpath of a purl ignored); another
    ecosystem's package is one hubwatch knows nothing of."""
    assert parse_json_query(query, HUB) == expected


def test_a_page_token_carries_the_offset_of_its_own_query() -> None:
    """A token decodes to its offset for the query it was made for, and is refused for any other."""
    token = encode_token(1000, ModelQuery(REPO, SHA).key)
    assert decode_token(token, ModelQuery(REPO, SHA).key) == 1000
    assert parse_json_query({"commit": SHA, "package": {"purl": f"pkg:huggingface/{REPO}"}, "page_token": token}, HUB).offset == 1000
    with pytest.raises(InvalidQuery, match="another query"):
        decode_token(token, ModelQuery(REPO, None).key)
    for garbage in ("", "!!!", "bm90LWEtdG9rZW4", encode_token(-5, ModelQuery(REPO, SHA).key)):
        with pytest.raises(InvalidQuery, match="Invalid page token"):
            decode_token(garbage, ModelQuery(REPO, SHA).key)


@pytest.mark.parametrize("text", [
    f"pkg:huggingface/{REPO}@{SHA}", f"pkg:huggingface/{REPO}@{SHA.upper()}", f"pkg:huggingface/{REPO}",
    "pkg:huggingface/Org.Name/model_v1.5-x", "pkg:huggingface/a/b@" + "F" * 40,
])
def test_the_plain_purl_reading_answers_what_packageurl_answers(text: str) -> None:
    """The common form is read by a regular expression, without packageurl: the same repo and (lowercased) version."""
    from packageurl import PackageURL

    from feeds.osv import queries

    assert queries.PLAIN_PURL.match(text)
    parsed = PackageURL.from_string(text)
    assert queries._purl(text) == (f"{parsed.namespace}/{parsed.name}", parsed.version, True)


@pytest.mark.parametrize("text", [f"pkg:huggingface/{REPO}@main", f"pkg:huggingface/{REPO}%2Fx@{SHA}",
                                  f"pkg:huggingface/{REPO}@{SHA}?a=b", "pkg:huggingface/gpt2@" + "a" * 40])
def test_anything_else_goes_through_packageurl(text: str) -> None:
    """Escapes, qualifiers, a non-sha version or no namespace are not the plain form."""
    from feeds.osv import queries

    assert not queries.PLAIN_PURL.match(text)
