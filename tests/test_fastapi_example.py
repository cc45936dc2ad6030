"""examples/fastapi_app.py through its ASGI interface, with its lifespan run, against a
fresh database and a worker running in this process."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar
from uuid import uuid4

import httpx
import pytest

from examples import fastapi_app
from shardq.core.config import ClientConfig
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from tests.conftest import Databases
from tests.helpers import query

T = TypeVar("T")
Http = httpx.AsyncClient


@pytest.fixture
def url(databases: Databases, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh migrated database, named by SHARDQ_DSN as the example expects."""
    url = databases.create()
    monkeypatch.setenv("SHARDQ_DSN", url)
    return url


@pytest.fixture
def worker(url: str) -> Iterator[Worker]:
    """A worker of the example's tasks, not started yet (stopped at the end)."""
    w = Worker(fastapi_app.tasks, ClientConfig(dsn=url), WorkerConfig(janitors=0))
    yield w
    w.stop(5.0)


def served(talk: Callable[[Http], Awaitable[T]]) -> T:
    """Start the app as a server does (its lifespan), run ``talk`` with an HTTP client
    over its ASGI interface, then shut the app down."""
    api = fastapi_app.api

    async def main() -> T:
        async with api.router.lifespan_context(api):
            transport = httpx.ASGITransport(app=api)
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
                return await talk(http)

    return asyncio.run(main())


def test_a_posted_job_runs_and_its_result_is_read_back(url: str, worker: Worker) -> None:
    async def talk(http: Http) -> tuple[httpx.Response, ...]:
        posted = await http.post("/jobs", json={"image_id": 42, "width": 640})
        before = await http.get(f"/jobs/{posted.json()['id']}")  # no worker running yet
        await asyncio.to_thread(worker.start)
        after = await http.get(f"/jobs/{posted.json()['id']}", params={"wait_s": 30})
        return posted, before, after

    posted, before, after = served(talk)
    assert posted.status_code == 202
    job = posted.json()["id"]
    assert before.json() == {"id": job, "status": "pending", "value": None, "error": None}
    assert after.status_code == 200
    assert after.json() == {"id": job, "status": "succeeded",
                            "value": {"image_id": 42, "width": 640, "height": 480},
                            "error": None}
    # The handler's value is what the database kept for the task, which is done.
    assert query(url, "SELECT count(*) FROM shardq.tasks") == [(0,)]


def test_the_endpoints_refuse_what_they_cannot_serve(url: str) -> None:
    async def talk(http: Http) -> dict[str, Any]:
        return {
            "unknown": await http.get(f"/jobs/{uuid4()}"),
            "not an id": await http.get("/jobs/42"),
            "not a uuid": await http.get("/jobs/not-a-uuid"),
            "wait too long": await http.get(f"/jobs/{uuid4()}", params={"wait_s": 31}),
            "bad width": await http.post("/jobs", json={"image_id": 1, "width": 5}),
            "no image": await http.post("/jobs", json={"width": 320}),
        }

    answers = served(talk)
    assert answers["unknown"].status_code == 404
    assert {name: r.status_code for name, r in answers.items() if name != "unknown"} == {
        "not an id": 422, "not a uuid": 422, "wait too long": 422, "bad width": 422,
        "no image": 422}
    assert query(url, "SELECT count(*) FROM shardq.tasks") == [(0,)]  # nothing enqueued
