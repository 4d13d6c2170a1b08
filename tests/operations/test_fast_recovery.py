"""Fast recovery with real worker processes: a pool process SIGKILLed mid-job is recovered by
its worker's main process within seconds (the silence threshold and the redispatch delay are
set far higher, and no beat runs, so only the fast path can pass) — a refresh an edit had just
superseded too, whose follow-up then runs at once — while a slow job whose heartbeat runs is
never touched."""

from __future__ import annotations

import os
import signal
import statistics
import time

import pytest

from fakes.llm_server import Reply, reflect_reply
from hindsight.banks.services import bank_ensure
from mentalmodels.services import mental_model_create, mental_model_update
from operations.models import CANCELLED, COMPLETED, PROCESSING, Lease, Operation
from operations.selectors import operation_report
from tests.factories import make_memory
from tests.operations.helpers import effects, job_log, submit_job
from tests.workers import apply_test_settings, wait_until

pytestmark = pytest.mark.integration

# Far above every bound below: a recovery inside them cannot be the sweep's.
SLOW_PATHS_OFF = {"recovery_threshold_seconds": 600.0, "redispatch_after_seconds": 600.0,
                  "lock_ttl_seconds": 20.0}
# Seconds from the kill to the recovered claim: a tenth of the slow paths, so a machine many
# times slower than ours still recovers inside it, and the sweep still cannot.
FAST_BOUND = 60.0


def _attempt_started(op_id, attempt: int):
    def check():
        return next((r for r in job_log([op_id]) if r["attempt"] == attempt), None)
    return check


def _kill_held_job_and_time_the_recovered_claim(scripted_llm, key: str, *,
                                                follower: bool = False) -> float:
    """Kill the pool process of a job held at the LLM; seconds until its work is claimed again.

    With ``follower``, a second request of the key is queued behind the running one first: the
    killed attempt's retry is then carried by it (the merge rule), and the first id must still
    end ``completed``, naming it.
    """
    held, hold = Reply.hold(Reply.text("first answer"))
    scripted_llm.script(held, Reply.text("second answer"))
    op = submit_job(key=key, llm="think", effect=True)
    assert hold.wait_received(timeout=30), "the job never reached the held LLM request"
    behind = submit_job(key=key, llm="think", effect=True) if follower else None
    carrier = behind or op
    assert carrier.status == "pending"
    [first] = job_log([op.id])
    killed_at = time.monotonic()
    os.kill(first["pid"], signal.SIGKILL)  # the pool process only: its main process survives
    hold.release()
    second = wait_until(_attempt_started(carrier.id, 2), timeout=FAST_BOUND, interval=0.05,
                        message="the recovered claim")
    elapsed = time.monotonic() - killed_at
    assert second["fence"] > first["fence"] and second["pid"] != first["pid"]
    wait_until(lambda: Operation.objects.get(id=carrier.id).status == COMPLETED, timeout=20,
               message="completion")
    done = Operation.objects.get(id=carrier.id)
    assert done.retry_count == 1 and len(effects([op.id, carrier.id])) == 1
    assert [r["attempt"] for r in job_log([op.id, carrier.id])] == [1, 2]
    report = operation_report(bank_id=op.bank_id, operation_id=op.id)
    assert report is not None and report.status == COMPLETED  # the first id tells the truth
    if follower:
        assert report.carrier.id == carrier.id and report.superseded_by == str(carrier.id)
    return elapsed


def test_killed_pool_process_job_is_claimed_again_within_seconds_and_completes(
    scripted_llm, worker_factory, settings
) -> None:
    apply_test_settings(settings, **SLOW_PATHS_OFF)
    worker = worker_factory(env=scripted_llm.env)
    elapsed = _kill_held_job_and_time_the_recovered_claim(scripted_llm, "fast")
    assert elapsed < FAST_BOUND
    assert worker.alive() and "recovered at once" in worker.log()
    assert len(scripted_llm.requests) == 2


def test_kill_to_recovered_claim_times_over_repeated_kills(
    scripted_llm, worker_factory, settings
) -> None:
    apply_test_settings(settings, **SLOW_PATHS_OFF)
    worker_factory(env=scripted_llm.env)
    times = []
    for round_ in range(6):  # every other kill has a request queued behind the killed one
        scripted_llm.reset()
        times.append(_kill_held_job_and_time_the_recovered_claim(
            scripted_llm, f"rep{round_}", follower=round_ % 2 == 1))
    failed = Operation.objects.filter(status="failed").values_list("id", flat=True)
    reported = [operation_report(bank_id="ops-bank", operation_id=i).status for i in failed]
    wrong = sum(1 for status in reported if status != COMPLETED)
    print(f"\nkill -> recovered claim over {len(times)} kills: "
          f"p50 {statistics.median(times):.2f}s, max {max(times):.2f}s; "
          f"merged ids (failed rows) {len(failed)}, reported failed for completed work: {wrong}")
    assert len(failed) == 3 and wrong == 0  # the merged ids: failed rows, completed work
    assert max(times) < FAST_BOUND


def test_slow_but_alive_job_is_never_recovered_while_a_killed_neighbour_is(
    scripted_llm, worker_factory, beat, settings
) -> None:
    # The sweep runs (beat) with a 3 s silence threshold; the slow job runs for 6 s.
    apply_test_settings(settings, recovery_threshold_seconds=3.0, redispatch_after_seconds=600.0,
                        lock_ttl_seconds=20.0)
    worker_factory(concurrency=2, env=scripted_llm.env)
    held, hold = Reply.hold(Reply.text("first answer"))
    scripted_llm.script(held, Reply.text("second answer"))
    slow = submit_job(key="slow", sleep=6.0, effect=True)
    doomed = submit_job(key="doomed", llm="think", effect=True)
    assert hold.wait_received(timeout=30)
    wait_until(lambda: job_log([slow.id]), timeout=20, message="slow job start")
    [victim] = job_log([doomed.id])
    [alive] = job_log([slow.id])
    assert victim["pid"] != alive["pid"]
    os.kill(victim["pid"], signal.SIGKILL)
    hold.release()
    wait_until(_attempt_started(doomed.id, 2), timeout=FAST_BOUND, message="neighbour recovered")
    assert Operation.objects.get(id=slow.id).status == PROCESSING
    wait_until(lambda: {Operation.objects.get(id=i).status for i in (slow.id, doomed.id)}
               == {COMPLETED}, timeout=30, message="both completed")
    slow_done = Operation.objects.get(id=slow.id)
    assert slow_done.retry_count == 0 and slow_done.error_message is None
    assert [r["outcome"] for r in job_log([slow.id])] == ["completed"]
    assert len(effects([slow.id])) == 1 and len(effects([doomed.id])) == 1


def test_a_refresh_superseded_by_an_edit_then_killed_hands_its_key_to_the_follow_up_at_once(
    scripted_llm, openai_embeddings, worker_factory, settings
) -> None:
    # docs/behaviour.md#edits-during-a-running-refresh: the edit queues a follow-up behind the
    # running refresh. Its pool process dies before its write is refused: the follow-up must
    # not wait for the sweep (600 s here) to learn that the superseded job is gone.
    apply_test_settings(settings, **SLOW_PATHS_OFF)
    bank_ensure(bank_id="ops-edit")
    make_memory("ops-edit", "Alice prefers async communication.", embed=True)
    held, hold = Reply.hold(Reply.text("never read"))
    scripted_llm.script(held)  # the first refresh's first LLM call waits here
    scripted_llm.respond_with(lambda body: reflect_reply(body, "## Team\n\nAlice writes async."))
    worker = worker_factory(env=scripted_llm.env)
    _model, running = mental_model_create(bank_id="ops-edit", name="Team",
                                          source_query="How does the team communicate?",
                                          mental_model_id="team")
    assert hold.wait_received(timeout=60), "the refresh never reached the LLM"
    lease = Lease.objects.get(key=running.dedupe_key)
    pid = int(lease.holder.split(":")[-2])  # host:pid:message
    mental_model_update(bank_id="ops-edit", mental_model_id="team",
                        source_query="How does the team decide?")
    follower = Operation.objects.exclude(id=running.id).get(dedupe_key=running.dedupe_key)
    assert follower.status == "pending"
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    hold.release()
    wait_until(lambda: Operation.objects.get(id=follower.id).status != "pending",
               timeout=FAST_BOUND, interval=0.05, message="the follow-up claimed")
    elapsed = time.monotonic() - killed_at
    print(f"\nkill of a superseded refresh -> its follow-up claimed: {elapsed:.2f}s")
    wait_until(lambda: Operation.objects.get(id=follower.id).status == COMPLETED, timeout=30,
               message="the follow-up completed")
    first = Operation.objects.get(id=running.id)
    assert first.status == CANCELLED and "superseded" in first.error_message
    assert first.retry_count == 0 and Operation.objects.get(id=follower.id).retry_count == 0
    assert elapsed < FAST_BOUND
    assert worker.alive() and "superseded: the key handed on" in worker.log()
