"""Issue 24 part 3: every store call takes a Scope(tenant, space); the store writes the tenant column from it, hands
back space names (never another tenant's), and its errors carry tenant/space fields that front ends render."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import select

from tmem.errors import WITHHELD, InputError, NotFoundError, SpaceNotFound
from tmem.models import Session, Turn
from tmem.scope import Scope, as_scope
from tmem.store.schema import spaces
from tmem.store.sqlite import SQLiteStore

T0 = datetime(2024, 1, 1, 9, 0)


def test_a_scope_is_a_frozen_hashable_pair_with_one_store_key() -> None:
    acme = Scope("acme", "support")
    assert acme == Scope("acme", "support") and hash(acme) == hash(Scope("acme", "support"))
    assert {acme: 1}[Scope("acme", "support")] == 1
    assert acme.key == "acme/support" and Scope("", "conv-26").key == "conv-26"
    assert str(acme) == "support"  # a message that shows a scope names no tenant
    assert acme.fields == {"tenant": "acme", "space": "support"}
    with pytest.raises(AttributeError):
        acme.space = "other"  # type: ignore[misc]


def test_local_reads_a_name_as_the_library_and_the_cli_always_have() -> None:
    assert Scope.local("conv-26") == Scope("", "conv-26")
    assert Scope.local("acme/support") == Scope("acme", "support")  # an operator naming a tenant's space
    assert Scope.local("../../etc/passwd") == Scope("..", "../etc/passwd")  # hostile names are just names
    assert Scope.local("/x").key == "/x"
    assert as_scope("acme/support") == Scope("acme", "support") and as_scope(Scope("a", "b")) == Scope("a", "b")
    with pytest.raises(InputError, match="Bad space name ''"):
        Scope.local("")  # a caller's bad name is bad input, not a store fault


@pytest.mark.parametrize(
    ("tenant", "space"),
    [("", ""), ("", " "), ("", "acme/support"), ("a/b", "c")],
)
def test_a_scope_whose_key_would_name_another_tenant_is_refused(tenant: str, space: str) -> None:
    with pytest.raises(InputError, match="Bad "):
        Scope(tenant, space)


def test_an_error_raised_with_a_scope_is_rendered_for_each_reader() -> None:
    exc = NotFoundError("No item {name!r} in space {space!r}; see `tmem show {space}`.", name="x",
                        space=Scope("acme", "notes"))  # fmt: skip
    assert exc.fields == {"name": "x", "tenant": "acme", "space": "notes"}
    assert str(exc) == "No item 'x' in space 'acme/notes'; see `tmem show acme/notes`."  # the operator
    assert exc.shown_to("acme") == "No item 'x' in space 'notes'; see `tmem show notes`."
    assert exc.shown_to("globex") == f"No item 'x' in space {WITHHELD!r}; see `tmem show {WITHHELD}`."
    local = NotFoundError("No item in space {space!r}.", space=Scope.local("conv-26"))
    assert str(local) == local.shown_to(None) == "No item in space 'conv-26'."


def _turn(n: int) -> Turn:
    return Turn(id=f"t{n}", session_id="s1", seq=n, speaker="A", text=f"hello {n}", time=T0)


def test_the_store_writes_the_tenant_from_the_scope_and_hands_back_names() -> None:
    store = SQLiteStore.open(":memory:")
    acme, globex, local = Scope("acme", "support"), Scope("globex", "support"), Scope.local("support")
    for scope in (acme, globex, local):
        assert store.ensure_space(scope).name == "support"
    store.add_session(acme, Session(id="s1", seq=0, started_at=T0, content_hash="h"), [_turn(0), _turn(1)])
    rows = store._fetch(select(spaces.c.tenant, spaces.c.name).order_by(spaces.c.name))
    assert [(r["tenant"], r["name"]) for r in rows] == [
        ("acme", "acme/support"),
        ("globex", "globex/support"),
        ("", "support"),
    ]
    assert len(store.turns(acme)) == 2 and store.turns(globex) == [] and store.turns(local) == []
    assert [s.name for s in store.list_spaces("acme")] == ["support"]
    assert [s.name for s in store.list_spaces("")] == ["support"]
    assert [s.name for s in store.list_spaces()] == ["acme/support", "globex/support", "support"]  # the operator
    store.close()


def test_store_errors_carry_the_scope_and_name_only_its_tenants_spaces() -> None:
    store = SQLiteStore.open(":memory:")
    store.ensure_space(Scope("acme", "support"))
    store.ensure_space(Scope("globex", "secret"))
    with pytest.raises(SpaceNotFound) as missing:
        store.get_space(Scope("acme", "nope"))
    assert missing.value.tenant == "acme" and missing.value.known == ("support",)
    assert "secret" not in str(missing.value) and "globex" not in str(missing.value)
    with pytest.raises(NotFoundError) as unknown:
        store.turns(Scope("acme", "support"), ["t9"])
    assert unknown.value.fields["tenant"] == "acme" and unknown.value.fields["space"] == "support"
    assert unknown.value.shown_to("acme") == "Unknown turn ids in space 'support': ['t9']"
    store.close()


def test_the_check_of_a_tenants_space_reads_its_llm_calls_by_their_store_key() -> None:
    from tmem.construct.check import check_space
    from tmem.models import LLMCall

    store = SQLiteStore.open(":memory:")
    acme = Scope("acme", "support")
    store.ensure_space(acme)
    store.add_session(acme, Session(id="s1", seq=0, started_at=T0, content_hash="h"), [_turn(0)])
    store.log_llm_call(
        LLMCall(space=acme.key, stage="segment", model="m", request_hash="h0", tokens_in=1, tokens_out=1,
                latency_ms=1.0, attempts=1, outcome="ok", created_at=T0, response="{}")
    )  # fmt: skip
    assert [c.space for c in store.llm_calls(acme)] == ["acme/support"]
    report = check_space(store, acme)
    assert report.space == "support"
    assert "llm_call_wrong_space" not in {v.code for v in report.violations}
    store.close()
