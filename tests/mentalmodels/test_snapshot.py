"""The snapshot cutoff (docs/behaviour.md#the-snapshot-cutoff) with real concurrent transactions: a memory whose writing transaction is open when a
refresh takes its cutoff is never lost — that refresh reads it, or the model stays stale and
the next refresh reads it; the stored watermark never passes a memory the refresh did not read."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection, transaction

from fakes.llm_server import Reply
from hindsight.banks.models import MemoryUnit
from hindsight.banks.writeclock import hold_bank_write_lock
from mentalmodels.models import MentalModel
from mentalmodels.staleness import stale_flags
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import refresh_run
from tests.workers import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bank_id() -> str:
    return "rf1-bank"


def cite_everything(server):
    """Forced turns call their tool; the free turn cites every memory id the tools returned."""

    def respond(body: dict) -> Reply:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "fact"})])
        return Reply.tool_calls([("done", {"answer": "summary",
                                           "memory_ids": sorted(ids_fed_back(server)),
                                           "mental_model_ids": []})])

    server.respond_with(respond)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def ids_fed_back(server) -> set[str]:
    """Every memory id that reached the LLM in a tool result (no database access: the
    responder calling this runs in the scripted server's threads)."""
    seen: set[str] = set()
    for body in list(server.requests):
        for message in body.get("messages", []):
            if message.get("role") == "tool":
                seen |= set(_UUID.findall(message["content"]))
    return seen


class Writer(threading.Thread):
    """Writes one memory in a transaction that stays open until ``commit`` is set."""

    def __init__(self, bank_id: str, text: str):
        super().__init__(daemon=True)
        self.bank_id, self.text = bank_id, text
        self.inserted, self.commit, self.committed = threading.Event(), threading.Event(), threading.Event()
        self.memory_id = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            from hindsight.infra.embeddings import get_embedder

            [vector] = get_embedder().embed([self.text])
            with transaction.atomic():
                hold_bank_write_lock(self.bank_id)
                unit = MemoryUnit.objects.create(bank_id=self.bank_id, text=self.text,
                                                 embedding=vector)
                self.memory_id = str(unit.id)
                self.inserted.set()
                self.commit.wait(30)
            self.committed.set()
        except BaseException as exc:  # surfaced by the test
            self.error = exc
            self.inserted.set()
        finally:
            connection.close()


class Refresh(threading.Thread):
    def __init__(self, bank_id: str):
        super().__init__(daemon=True)
        self.bank_id = bank_id
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            refresh_run(bank_id=self.bank_id, mental_model_id="m")
        except BaseException as exc:
            self.error = exc
        finally:
            connection.close()


def _a_session_waits_on_an_advisory_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock' AND wait_event = 'advisory'")
        return cursor.fetchone()[0] > 0


def watermark() -> object:
    return MentalModel.objects.get(mental_model_id="m").last_memory_seen_at


def assert_watermark_never_passes_an_unread_memory(server) -> None:
    read = ids_fed_back(server)
    mark = watermark()
    for unit in MemoryUnit.objects.all():
        if mark is not None and unit.updated_at <= mark:
            assert str(unit.id) in read, f"watermark {mark} passes unread memory {unit.text!r}"


def test_writer_committing_before_the_refresh_is_read(bank, llm):
    make_memory(bank, "old fact", embed=True)
    make_mental_model(bank, "m")
    writer = Writer(bank.id, "new fact")
    writer.start()
    assert writer.inserted.wait(10)
    writer.commit.set()
    writer.join(10)
    cite_everything(llm)
    refresh_run(bank_id=bank.id, mental_model_id="m")
    assert writer.memory_id in ids_fed_back(llm)
    assert watermark() == MemoryUnit.objects.get(id=writer.memory_id).updated_at
    assert_watermark_never_passes_an_unread_memory(llm)


def test_writer_open_when_the_cutoff_is_taken_is_waited_for_and_read(bank, llm):
    make_memory(bank, "old fact", embed=True)
    make_mental_model(bank, "m")
    cite_everything(llm)
    writer = Writer(bank.id, "new fact in flight")
    writer.start()
    assert writer.inserted.wait(10) and writer.error is None
    refresh = Refresh(bank.id)
    refresh.start()
    # The cutoff waits for the open writer (on the bank's advisory lock): the refresh, seen
    # waiting there, cannot have asked the LLM anything.
    wait_until(_a_session_waits_on_an_advisory_lock, 20, message="the cutoff waiting")
    assert llm.requests == [] and refresh.is_alive()
    writer.commit.set()
    writer.join(10)
    refresh.join(30)
    assert refresh.error is None and writer.error is None
    assert writer.memory_id in ids_fed_back(llm)
    assert watermark() == MemoryUnit.objects.get(id=writer.memory_id).updated_at
    assert_watermark_never_passes_an_unread_memory(llm)


def test_writer_committing_during_the_refresh_stays_newer_and_the_next_refresh_reads_it(bank, llm):
    old = make_memory(bank, "old fact", embed=True)
    model = make_mental_model(bank, "m")
    reply, handle = Reply.hold(Reply.tool_calls([("search_observations", {"query": "fact"})]))
    llm.script(reply)
    cite_everything(llm)
    refresh = Refresh(bank.id)
    refresh.start()
    assert handle.wait_received(20)  # the cutoff is taken, the loop is running
    writer = Writer(bank.id, "new fact during the refresh")
    writer.start()
    assert writer.inserted.wait(10)
    writer.commit.set()
    writer.join(10)
    assert writer.committed.is_set()  # writers are not blocked by a running refresh
    handle.release()
    refresh.join(30)
    assert refresh.error is None

    assert writer.memory_id not in ids_fed_back(llm)
    assert watermark() == old.updated_at
    assert MemoryUnit.objects.get(id=writer.memory_id).updated_at > watermark()
    assert_watermark_never_passes_an_unread_memory(llm)
    assert stale_flags([MentalModel.objects.get(uid=model.uid)]) == {model.uid: True}

    llm.reset()
    cite_everything(llm)
    refresh_run(bank_id=bank.id, mental_model_id="m")
    assert writer.memory_id in ids_fed_back(llm)
    assert watermark() == MemoryUnit.objects.get(id=writer.memory_id).updated_at
    assert stale_flags([MentalModel.objects.get(uid=model.uid)]) == {model.uid: False}


def test_writer_committing_after_the_refresh_leaves_the_model_stale(bank, llm):
    make_memory(bank, "old fact", embed=True)
    model = make_mental_model(bank, "m")
    cite_everything(llm)
    refresh_run(bank_id=bank.id, mental_model_id="m")
    assert stale_flags([MentalModel.objects.get(uid=model.uid)]) == {model.uid: False}
    make_memory(bank, "later fact", embed=True)
    assert stale_flags([MentalModel.objects.get(uid=model.uid)]) == {model.uid: True}
    assert_watermark_never_passes_an_unread_memory(llm)
