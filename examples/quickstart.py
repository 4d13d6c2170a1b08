"""A mental model end to end with the official Python client (``pip install hindsight-client``).

Create a bank, retain memories, create a mental model, wait for its first refresh, read the
document, refresh it after a new memory, and read its history. Every run uses a bank of its
own (a random suffix), so the script runs again against the same server.

    make run                                   # in one shell, with an LLM configured
    .venv/bin/python examples/quickstart.py    # in another (HINDSIGHT_URL: another server)

A refresh is an operation: it reads "pending" or "processing" while it is in flight, then
"completed", "failed" or "cancelled".
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time

from hindsight_client import Hindsight

BASE_URL = os.environ.get("HINDSIGHT_URL", "http://127.0.0.1:8888")
BANK = f"team-{secrets.token_hex(4)}"  # fresh per run
MODEL = "team-meetings"


async def wait_for(client: Hindsight, operation_id: str, timeout: float = 300.0):
    """Poll an operation until it ends."""
    deadline = time.monotonic() + timeout
    while True:
        op = await client.operations.get_operation_status(BANK, operation_id)
        if op.status not in ("pending", "processing"):
            return op
        if time.monotonic() > deadline:
            raise TimeoutError(f"operation {operation_id} is still {op.status}")
        await asyncio.sleep(1)


async def main() -> None:
    client = Hindsight(base_url=BASE_URL)
    try:
        await client.acreate_bank(BANK, name="Team")
        print("bank:", BANK)
        await client.aretain(BANK, "Alice prefers async standups", tags=["team"])
        await client.aretain(BANK, "Bob runs the Monday planning meeting", tags=["team"])

        created = await client.acreate_mental_model(
            BANK, "How the team meets", "How does the team prefer to meet?", id=MODEL)
        op = await wait_for(client, created.operation_id)
        print("first refresh:", op.status, op.details.outcome)  # completed content_written
        print((await client.aget_mental_model(BANK, MODEL)).content)

        # A memory in the model's scope makes it stale; a refresh brings it up to date.
        await client.aretain(BANK, "Carol joined and prefers written updates", tags=["team"])
        print("stale:", (await client.aget_mental_model(BANK, MODEL)).is_stale)  # True
        refresh = await client.arefresh_mental_model(BANK, MODEL)
        op = await wait_for(client, refresh.operation_id)
        print("refresh:", op.status, op.details.outcome)
        print((await client.aget_mental_model(BANK, MODEL)).content)

        # Newest first: each version keeps the content it replaced ("" before the first).
        for entry in await client.aget_mental_model_history(BANK, MODEL):
            previous = entry["previous_content"] or ""  # null on a failure entry
            print("history:", entry["changed_at"], entry["kind"], repr(previous[:40]))
    finally:
        await client.aclose()  # without it aiohttp warns "Unclosed client session"


if __name__ == "__main__":
    asyncio.run(main())
