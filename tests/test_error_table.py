"""Errors say how they are answered (issue 32 item 4): status and problem slug are attributes of the error classes,
and the service's answer and the client's reading of it are both derived from them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import tmem.errors as errors
from tmem.client.plans import error_of
from tmem.errors import TmemError, problem_classes, status_classes
from tmem.service.problems import install

SERVICE = Path(__file__).resolve().parents[1] / "src" / "tmem" / "service"

# The service's table as it was hand-kept before (class -> status, slug): the attributes must give the same answers.
BEFORE = {
    "NotFoundError": (404, "not-found"),
    "SpaceNotFound": (404, "not-found"),
    "InputError": (422, "invalid-input"),
    "ConfigError": (400, "invalid-config"),
    "BuildError": (409, "build-conflict"),
    "BuildBusy": (409, "build-conflict"),
    "LLMTransientError": (503, "llm-unavailable"),
    "LLMError": (502, "llm-failed"),
    "LLMOutputError": (502, "llm-failed"),
    "EmbeddingError": (503, "embedder-unavailable"),
    "IntegrityError": (500, "integrity"),
    "StoreError": (503, "store-unavailable"),
    "TmemError": (500, "internal"),
    "BatchPending": (500, "internal"),
}


def _classes() -> list[type[TmemError]]:
    return [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, TmemError)]


def _raise(cls: type[TmemError]) -> TmemError:
    if cls is errors.SpaceNotFound:
        return cls("acme", "notes")
    if cls is errors.BatchPending:
        return cls("pending", count=1, stage="segment")
    return cls("what to fix")


def test_every_error_class_is_answered_as_before() -> None:
    assert {c.__name__ for c in _classes()} == set(BEFORE)  # a new class is added here with its answer
    app = FastAPI()
    install(app)

    @app.get("/fail/{name}")
    def fail(name: str) -> None:
        raise _raise(getattr(errors, name))

    with TestClient(app, raise_server_exceptions=False) as client:
        for name, (status, slug) in BEFORE.items():
            cls = getattr(errors, name)
            assert (cls.status, cls.problem) == (status, slug), name
            answer = client.get(f"/fail/{name}")
            assert answer.status_code == status and answer.json()["type"] == f"urn:tmem:problem:{slug}", name


ANSWERED = [c for c in _classes() if c.problem != "internal"]


@pytest.mark.parametrize("cls", ANSWERED, ids=lambda c: c.__name__)
def test_the_client_reads_each_answer_back_as_its_class(cls: type[TmemError]) -> None:
    got = error_of(cls.status, {"type": f"urn:tmem:problem:{cls.problem}", "detail": "what to fix"}, "GET", "/x")
    # read back as the class that declares the slug: the class itself, or the base it answers as (a BuildBusy
    # raised in the core answers as a BuildError; SpaceNotFound as a NotFoundError)
    declared = problem_classes()[cls.problem]
    assert type(got) is declared and issubclass(cls, declared) and str(got) == "what to fix"
    assert ("problem" in vars(cls)) == (declared is cls)


def test_every_problem_the_service_raises_itself_is_read_as_a_tmem_error() -> None:
    raised = set()
    for path in SERVICE.glob("*.py"):
        raised |= set(re.findall(r'ServiceProblem\(\s*\d+,\s*"([a-z-]+)"', path.read_text()))
    assert raised and raised <= set(problem_classes())
    assert error_of(409, {"type": "urn:tmem:problem:build-running", "detail": "d"}, "GET", "/x").__class__ is (
        errors.BuildBusy
    )
    assert status_classes()[413] is errors.InputError and status_classes()[401] is errors.ConfigError
    unknown = error_of(500, {"type": "urn:tmem:problem:internal", "detail": "bug"}, "GET", "/x")
    assert type(unknown) is errors.StoreError  # a server's bug reads as a store error, as before
