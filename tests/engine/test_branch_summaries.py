"""Branch summaries: summaries per filter key and for the whole session, hierarchical allowlist,
cascade switch, and retrieval that falls back to the whole session, then to any summary."""
from __future__ import annotations

import pytest

from compaction import Policy, PolicyError
from compaction.branches import (
    ALL,
    BranchSummarizer,
    BranchSummary,
    MemorySummaryStore,
    belongs,
    branch_key,
    check_key,
    is_allowed,
    keys_related,
    normalize_allowlist,
    retrieve,
    summary_targets,
)
from tests.support.llm_server import error, ok
from tests.support.sessions import corpus_messages

AIRLINE = "taubench__gpt-4o-airline__rec033.json"
SEARCH = "airline/tool/search_direct_flight"
DETAILS = "airline/tool/get_reservation_details"


def airline_session() -> tuple[list[dict], list[str | None]]:
    """A corpus session keyed the way an app would: conversation under the app key, each
    tool's calls and results under ``airline/tool/<name>``."""
    raws = corpus_messages(AIRLINE)
    names: dict[str, str] = {}
    keys: list[str | None] = []
    for m in raws:
        if m["role"] == "assistant" and m.get("tool_calls"):
            for c in m["tool_calls"]:
                names[c["id"]] = c["function"]["name"]
            keys.append(f"airline/tool/{m['tool_calls'][0]['function']['name']}")
        elif m["role"] == "tool":
            keys.append(f"airline/tool/{names[m['tool_call_id']]}")
        elif m["role"] == "system":
            keys.append(None)
        else:
            keys.append("airline")
    return raws, keys


def offline(**branches) -> Policy:
    return Policy.load({"counter": "approx", "branches": branches})


# -- matching (the seed's examples) ------------------------------------------------------------------

@pytest.mark.parametrize("allowed, key, matches", [
    ("my-app/tool", "my-app/tool", True),
    ("my-app/tool", "my-app/tool/search", True),
    ("my-app/tool/search", "my-app/tool", True),
    ("my-app/tool", "my-app/toolbox", False),
    ("my-app/tool", "other-app/tool", False),
    ("my-app", "my-app/tool/search", True),
    ("my-app/tool/search", "my-app/tool/fetch", False),
    ("my-app/tool/", "my-app/tool/search", True),
])
def test_allowlist_matching_is_hierarchical_and_segment_aware(allowed, key, matches):
    assert keys_related(allowed, key) is matches
    assert is_allowed(key, [allowed]) is matches


def test_an_unset_allowlist_allows_every_key_and_an_empty_one_allows_none():
    assert is_allowed("any-app/x", None)
    assert not is_allowed("any-app/x", [])
    assert normalize_allowlist(["", "  ", "a/b/", "a/b"]) == ["a/b"]
    assert not is_allowed("any-app/x", normalize_allowlist([""]))


def test_the_whole_session_summary_is_never_blocked():
    assert is_allowed(ALL, [])
    assert is_allowed(None, ["other/x"])
    assert summary_targets(ALL, [], cascade=False) == [ALL]


@pytest.mark.parametrize("allowlist, cascade, targets", [
    (None, True, [SEARCH, ALL]),
    (None, False, [SEARCH]),
    (["airline/tool"], True, [SEARCH, ALL]),
    (["airline/toolbox"], True, [ALL]),
    ([], True, [ALL]),
    ([], False, []),
])
def test_a_branch_trigger_targets_its_key_if_allowed_and_the_whole_session_if_cascading(allowlist, cascade,
                                                                                          targets):
    assert summary_targets(SEARCH, allowlist, cascade) == targets


def test_filter_keys_carry_the_application_prefix():
    assert branch_key("shop", "search", "web") == "shop/search/web"
    assert check_key("shop/search", "shop") == "shop/search"
    with pytest.raises(ValueError, match="application prefix"):
        check_key("search", "shop")
    with pytest.raises(ValueError):
        check_key("shopping/search", "shop")


def test_messages_belong_to_the_branches_of_their_ancestors_and_descendants():
    assert belongs("airline", SEARCH)                 # conversation under the app key is shared
    assert belongs(SEARCH + "/page", SEARCH)
    assert not belongs(DETAILS, SEARCH)
    assert not belongs(None, SEARCH)                   # unkeyed: whole session only
    assert belongs(None, ALL) and belongs(DETAILS, ALL)


def test_the_allowlist_is_validated_and_cleaned_by_the_policy():
    p = Policy.load({"branches": {"allowlist": [" shop/a/ ", "", "shop/a"], "cascade": False}})
    assert p.branches.allowlist == ["shop/a"] and p.branches.cascade is False
    assert Policy().branches.allowlist is None and Policy().branches.cascade is True
    with pytest.raises(PolicyError) as caught:
        Policy.load({"branches": {"allowlist": "shop/a"}})
    assert caught.value.field == "branches.allowlist"


# -- retrieval --------------------------------------------------------------------------------------

def test_retrieval_falls_back_from_a_missing_key_to_the_whole_session_then_to_any():
    store = MemorySummaryStore()
    assert retrieve(store, SEARCH).fallback == "none"
    store.put(BranchSummary(DETAILS, "details summary", 10, 4, updated_at=1.0))
    got = retrieve(store, SEARCH)
    assert (got.used, got.fallback, got.text) == (DETAILS, "any", "details summary")
    store.put(BranchSummary(ALL, "whole summary", 10, 10, updated_at=0.5))
    got = retrieve(store, SEARCH)
    assert (got.used, got.fallback, got.text) == (ALL, "whole_session", "whole summary")
    assert retrieve(store, DETAILS).fallback == "exact"
    assert retrieve(store).used == ALL


def test_the_store_round_trips_through_json_for_the_service_to_persist():
    store = MemorySummaryStore([BranchSummary(SEARCH, "s", 3, 2, model="m", version=2)])
    again = MemorySummaryStore.from_dict(store.to_dict())
    assert again.to_dict() == store.to_dict()
    assert again.get(SEARCH).version == 2


# -- generating them on a corpus session ----------------------------------------------------------------

def test_a_branch_trigger_refreshes_the_branch_and_cascades_to_the_whole_session():
    raws, keys = airline_session()
    bs = BranchSummarizer(offline(), app="airline")

    refresh = bs.refresh(raws, keys, SEARCH, force=True)

    assert refresh.targets == [SEARCH, ALL]
    assert [r.status for r in refresh.results] == ["updated", "updated"]
    branch, whole = bs.summary(SEARCH), bs.summary()
    assert branch.fallback == "exact" and whole.used == ALL
    n_branch = sum(1 for k in keys if belongs(k, SEARCH))
    assert refresh.result(SEARCH).new_messages == n_branch < refresh.result(ALL).new_messages
    calls = sum(len(m.get("tool_calls") or []) for m in raws)
    assert "15 tool calls" in branch.text                 # only the search_direct_flight calls
    assert f"{calls} tool calls" in whole.text            # every call of the session
    assert "get_reservation_details" not in branch.text
    assert bs.summary(DETAILS).fallback == "whole_session"


def test_an_empty_allowlist_keeps_only_the_whole_session_summary_and_without_cascade_nothing():
    raws, keys = airline_session()
    bs = BranchSummarizer(offline(allowlist=[]), app="airline")
    refresh = bs.refresh(raws, keys, SEARCH, force=True)
    assert refresh.targets == [ALL] and [s.key for s in bs.store.all()] == [ALL]

    none = BranchSummarizer(offline(allowlist=[], cascade=False), app="airline")
    refresh = none.refresh(raws, keys, SEARCH, force=True)
    assert refresh.targets == [] and not refresh and none.store.all() == []
    assert "allowlist" in refresh.results[0].reason


def test_summaries_are_incremental_and_fold_the_previous_one_in(llm_server, llm_settings):
    raws, keys = airline_session()
    half = len(raws) // 2
    p = Policy.load({"counter": "approx", "branches": {"cascade": False}, "summarizer": llm_settings()})
    bs = BranchSummarizer(p, app="airline")
    llm_server.script(ok("first branch summary"), ok("second branch summary"))

    bs.refresh(raws[:half], keys[:half], SEARCH, force=True)
    first = bs.store.get(SEARCH)
    again = bs.refresh(raws[:half], keys[:half], SEARCH, force=True)
    bs.refresh(raws, keys, SEARCH, force=True)

    assert again.result(SEARCH).status == "skipped" and "no new messages" in again.result(SEARCH).reason
    second = bs.store.get(SEARCH)
    assert (first.covered, second.covered, second.version) == (half, len(raws), 2)
    prompt = llm_server.requests[-1].json["messages"][-1]["content"]
    assert "<previous_summary>\nfirst branch summary\n</previous_summary>" in prompt
    later_calls = [c["function"]["arguments"] for m, k in zip(raws[half:], keys[half:]) if k == SEARCH
                   for c in m.get("tool_calls") or []]
    earlier_calls = [c["function"]["arguments"] for m, k in zip(raws[:half], keys[:half]) if k == SEARCH
                     for c in m.get("tool_calls") or []]
    assert earlier_calls and later_calls
    assert prompt.count("[Called tool: search_direct_flight") == len(later_calls)
    assert all(args in prompt for args in later_calls)
    assert not any(args in prompt for args in earlier_calls if args not in later_calls)
    assert second.messages == sum(1 for k in keys if belongs(k, SEARCH))


def test_without_force_a_branch_is_summarized_only_when_the_trigger_fires_on_its_own_numbers():
    raws, keys = airline_session()
    p = Policy.load({"counter": "approx", "trigger": {"kind": "messages_since_summary", "threshold": 30}})
    bs = BranchSummarizer(p, app="airline")

    refresh = bs.refresh(raws, keys, DETAILS)

    details = refresh.result(DETAILS)
    assert details.status == "skipped" and "trigger did not fire" in details.reason
    assert refresh.result(ALL).status == "updated"       # 62 messages > 30


def test_only_the_whole_session_target_uses_the_parent_request(llm_server, llm_settings):
    raws, keys = airline_session()
    p = Policy.load({"counter": "approx", "summarizer": llm_settings(cache_safe=True)})
    bs = BranchSummarizer(p, app="airline")
    llm_server.script(ok("branch"), ok("whole"))

    refresh = bs.refresh(raws, keys, SEARCH, force=True, parent_request={"messages": raws})

    assert refresh.result(SEARCH).request_mode == "standalone"
    assert refresh.result(ALL).request_mode == "cache_safe"
    assert len(llm_server.requests[-1].json["messages"]) == len(raws) + 1


def test_a_failing_target_keeps_its_old_summary_and_the_others_still_refresh(llm_server, llm_settings):
    raws, keys = airline_session()
    p = Policy.load({"counter": "approx", "summarizer": llm_settings()})
    bs = BranchSummarizer(p, app="airline")
    bs.store.put(BranchSummary(SEARCH, "old", 0, 0))
    llm_server.script(error(400), ok("whole summary"))

    refresh = bs.refresh(raws, keys, SEARCH, force=True)

    assert [r.status for r in refresh.results] == ["failed", "updated"]
    assert bs.store.get(SEARCH).text == "old"
    assert bs.store.get(ALL).text == "whole summary"


def test_one_key_per_message_is_required():
    raws, keys = airline_session()
    with pytest.raises(ValueError, match="one key"):
        BranchSummarizer(offline()).refresh(raws, keys[:-1], SEARCH, force=True)
