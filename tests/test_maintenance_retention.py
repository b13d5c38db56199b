"""The periods a service's maintenance keeps things for (`MemoryStore.retention`): on SQLite,
one user's file, the user's settings as last given; on a store a team shares, the longest any
of its services announced (a TTL of 0, never expire, being the longest of all)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.service.maintenance import maintain
from semantic_memory.stores import Retention

LONG = Retention(forget_grace_days=30, ttl_artifact_days=90, ttl_injection_days=0)
SHORT = Retention(forget_grace_days=0, ttl_artifact_days=1, ttl_injection_days=7)


@pytest.mark.both_stores
def test_the_periods_a_store_keeps(engine: MemoryEngine, settings: Settings) -> None:
    assert engine.store.retention(LONG) == LONG
    if settings.db_url:  # shared: the longest announced, whoever announces less later
        assert engine.store.retention(SHORT) == Retention(30, 90, 0)
        assert engine.store.retention(Retention(45, 0, 7)) == Retention(45, 0, 0)
    else:  # one user: the last setting counts, a lowered one at once
        assert engine.store.retention(SHORT) == SHORT


@pytest.mark.both_stores
def test_a_run_with_a_shorter_grace(settings: Settings) -> None:
    """The service's maintenance run (`maintain`) after another announced 30 days: on SQLite
    the user lowered the grace, and the forget goes; on PostgreSQL a teammate did, and it
    stays, the engine's settings saying so (what /api/forgotten reports)."""
    engine = MemoryEngine(settings)
    try:
        engine.store.retention(LONG)
        uid = engine.store_one(NewMemory("The release train leaves on Thursdays")).uid
        engine.forget(uid)
        engine.settings = replace(engine.settings, **SHORT.items())
        report = maintain(engine, SHORT)
        assert report is not None
        if settings.db_url:
            assert report.soft_deleted == 0 and engine.settings.forget_grace_days == 30
            assert engine.get(uid) is not None
        else:
            assert report.soft_deleted == 1 and engine.settings.forget_grace_days == 0
            assert engine.get(uid) is None
    finally:
        engine.close()
