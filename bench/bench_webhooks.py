"""A slow webhook receiver beside a burst of refreshes: deliveries run on the webhook queue's
worker, refreshes on theirs, so a receiver that holds every request ``--slow`` seconds (30 by
default) must not slow the refreshes.

A stack with the scripted LLM, one refresh worker (``--concurrency`` slots) and one webhook
worker (``--webhook-concurrency``); a warm-up burst, then ``--burst`` page creations (each a
refresh) timed without a webhook, then the same with one subscribed to
``mental_model.refreshed`` whose receiver answers after ``--slow`` seconds.

    python -m bench.bench_webhooks [--burst 40] [--slow 30] [--json FILE]

Prints both bursts' seconds (the time until every refresh completed), their ratio, and how many
deliveries were still held by the receiver when the second burst ended.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from bench.harness import argument_parser, bench_stack, call_json, log, task_queue, write_json
from fakes.llm_server import Reply, ScriptedLLMServer
from fakes.webhook_receiver import start_receiver


def _answer(body: dict[str, Any]) -> Reply:
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
    return Reply.tool_calls([("done", {"answer": "## Team\n\nAlice prefers async.",
                                       "memory_ids": [], "mental_model_ids": []})])


def burst(base: str, bank: str, prefix: str, size: int) -> float:
    started = time.monotonic()
    ids = [call_json(base, "POST", f"/v1/default/banks/{bank}/mental-models", {
        "id": f"{prefix}{n}", "name": f"{prefix} {n}", "source_query": "How does the team work?",
    })["operation_id"] for n in range(size)]
    pending = set(ids)
    while pending:
        for operation_id in list(pending):
            status = call_json(base, "GET", f"/v1/default/banks/{bank}/operations/{operation_id}")
            if status["status"] in ("completed", "failed", "cancelled"):
                pending.discard(operation_id)
        if time.monotonic() - started > 600:
            raise SystemExit(f"{len(pending)} refreshes of the {prefix} burst never ended")
        time.sleep(0.05)
    return time.monotonic() - started


def main() -> None:
    parser = argument_parser("bench.bench_webhooks", __doc__)
    parser.add_argument("--burst", type=int, default=40)
    parser.add_argument("--slow", type=float, default=30.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--webhook-concurrency", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    llm = ScriptedLLMServer().start()
    llm.respond_with(_answer)
    receiver, server = start_receiver()
    stack = bench_stack("bench-webhooks", llm=llm,
                        env={"HINDSIGHT_API_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"})
    try:
        stack.start_measured()
        queue = task_queue(stack)
        stack.start_worker(queue=queue, concurrency=args.concurrency, name="refreshes",
                           log_level="WARNING")
        stack.start_worker(queue=f"{queue}.webhooks", concurrency=args.webhook_concurrency,
                           name="webhooks", log_level="WARNING")
        stack.wait_healthy(60)
        base, bank = stack.base_url, f"bench-webhooks-{uuid.uuid4().hex[:6]}"
        call_json(base, "PUT", f"/v1/default/banks/{bank}", {"name": bank})
        call_json(base, "POST", f"/v1/default/banks/{bank}/memories", {
            "items": [{"content": "Alice prefers async standups", "strategy": "verbatim"}]})
        burst(base, bank, "warm", min(args.burst, 8))
        baseline = burst(base, bank, "a", args.burst)
        log(f"burst of {args.burst} without a webhook: {baseline:.2f} s")
        receiver.delay = args.slow
        call_json(base, "POST", f"/v1/default/banks/{bank}/webhooks", {
            "url": receiver.url, "event_types": ["mental_model.refreshed"],
            "http_config": {"timeout_seconds": int(args.slow) + 30}})
        slowed = burst(base, bank, "b", args.burst)
        held = len(receiver.of("mental_model.refreshed"))
        result = {"burst": args.burst, "slow_seconds": args.slow,
                  "refresh_slots": args.concurrency, "webhook_slots": args.webhook_concurrency,
                  "without_webhook_s": round(baseline, 2),
                  "with_slow_receiver_s": round(slowed, 2),
                  "ratio": round(slowed / baseline, 2), "deliveries_held_at_end": held}
        print(f"burst of {args.burst} refreshes: {baseline:.2f} s without a webhook, "
              f"{slowed:.2f} s with a receiver answering after {args.slow:g} s "
              f"(x{slowed / baseline:.2f}); {held} deliveries held by it when the burst ended, "
              f"none answered")
        write_json(result, args.json)
    finally:
        stack.stop()
        server.shutdown()
        llm.stop()


if __name__ == "__main__":
    main()
