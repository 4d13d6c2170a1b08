"""Write a bank archive with upstream Hindsight 1.1.0 itself (``tests/fixtures/upstream-1.1.0-bank.zip``).

Upstream's API (``hindsight-api`` of ``hindsight-api-slim`` 1.1.0, in a virtualenv of its own:
``--upstream-venv``) runs against an embedded PostgreSQL with pgvector started as the dev stack
starts one, its LLM and embeddings the scripted server (``fakes.llm_server``) answering as the
chaos run's LLM does (``bench.chaos_stack.ChaosLLM``), its consolidation answered with one
observation over each batch's facts. The official client then builds the bank the transfer
tests restore — a config override, three memories (two in documents, one without), the
observations consolidation makes of them, a directive, a model refreshed twice, a
knowledge-base folder with a page — and ``export_bank`` writes the archive to ``--out``.

    python -m bench.upstream_bank_archive --upstream-venv /path/to/venv [--out FILE] [--bank ID]
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.harness import REPO, argument_parser, log


def _answer(chaos: Any, body: dict[str, Any]) -> Any:
    """The chaos LLM's answer, except consolidation's: one observation over the batch's facts."""
    from fakes.llm_server import Reply

    messages = body.get("messages") or []
    if ((body.get("response_format") or {}).get("type") == "json_object" and messages
            and "ConsolidationBatchResponse" in str(messages[0].get("content"))):
        facts = str(messages[-1].get("content")).split("### Existing observations")[0]
        ids = re.findall(r"\[([0-9a-f-]{36})\]", facts)
        if ids:
            return Reply.json({"creates": [{
                "text": "Observation: the team builds on Python and PostgreSQL.",
                "source_fact_ids": ids, "reason": "new"}], "updates": [], "deletes": []})
    return chaos.respond(body)


def build(url: str, bank: str) -> bytes:
    from hindsight_client import Hindsight

    client = Hindsight(base_url=url, timeout=60.0)
    try:
        client.create_bank(bank, name="Upstream fixture")
        client.update_bank_config(bank, mental_model_min_refresh_interval_seconds=0,
                                  reflect_mission="Answer about the team.")
        client.retain(bank, "The team writes its services in Python.", document_id="doc-lang",
                      tags=["team"])
        client.retain(bank, "The team stores data in PostgreSQL with pgvector.",
                      document_id="doc-db", tags=["team"])
        client.retain(bank, "Alice leads the platform group.", tags=["people"],
                      context="org chart")
        client.create_directive(bank, name="Formal", content="Answer in formal English.",
                                priority=5)
        client.create_mental_model(bank, name="Team stack", id="team-stack", tags=["team"],
                                   source_query="What stack does the team use?")
        time.sleep(5)  # the create's refresh and consolidation run in upstream's worker
        client.refresh_mental_model(bank, "team-stack")
        time.sleep(8)
        client.refresh_mental_model(bank, "team-stack", mode="full")
        time.sleep(8)
        folder = client.create_knowledge_folder(bank, name="Guides")
        client.create_knowledge_page(bank, name="Onboarding", parent_id=folder.id,
                                     source_query="How does a newcomer start?")
        time.sleep(8)
        return client.export_bank(bank, poll_interval=1, timeout=120)
    finally:
        client.close()


@contextmanager
def upstream_api(upstream_venv: str, respond: Callable[[Any, dict[str, Any]], Any] = _answer,
                 ) -> Iterator[str]:
    """Upstream's API from ``upstream_venv`` on a scratch PostgreSQL, the scripted LLM
    answering through ``respond``: yields its URL, and removes it all afterwards."""
    from bench.chaos_stack import ChaosLLM
    from hindsight.devstack.servers import free_port
    from hindsight.devstack.stack import Stack

    chaos = ChaosLLM(delay=(0.0, 0.0))
    chaos.server.respond_with(lambda body: respond(chaos, body))
    servers = Stack(Path(tempfile.mkdtemp(prefix="upstream-api-")), valkey=False)
    servers.start_servers()
    port = free_port()
    base = chaos.server.base_url
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("HINDSIGHT_")},
           "HINDSIGHT_API_DATABASE_URL": servers.database_url,
           "HINDSIGHT_API_HOST": "127.0.0.1", "HINDSIGHT_API_PORT": str(port),
           "HINDSIGHT_API_LLM_PROVIDER": "openai", "HINDSIGHT_API_LLM_BASE_URL": base,
           "HINDSIGHT_API_LLM_API_KEY": "x", "HINDSIGHT_API_LLM_MODEL": "scripted",
           "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai",
           "HINDSIGHT_API_EMBEDDINGS_OPENAI_BASE_URL": base,
           "HINDSIGHT_API_EMBEDDINGS_OPENAI_API_KEY": "x",
           "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL": "scripted-embed",
           "HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS": "384",
           "HINDSIGHT_API_RERANKER_PROVIDER": "rrf",
           "HINDSIGHT_API_RETAIN_EXTRACTION_MODE": "chunks",
           "HINDSIGHT_API_ENABLE_DOCUMENT_EXPORT_API": "true",
           "HINDSIGHT_API_ENABLE_DOCUMENT_IMPORT_API": "true"}
    env.pop("VIRTUAL_ENV", None)
    upstream = subprocess.Popen([str(Path(upstream_venv) / "bin" / "hindsight-api")],
                                env=env, cwd=servers.data_dir, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            try:
                import urllib.request

                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or upstream.poll() is not None:
                    raise RuntimeError("upstream's API did not answer /health") from None
                time.sleep(1)
        yield url
    finally:
        upstream.terminate()
        upstream.wait(30)
        servers.stop()
        servers.remove_data()
        chaos.server.stop()


def main() -> None:
    parser = argument_parser("bench.upstream_bank_archive", __doc__)
    parser.add_argument("--upstream-venv", required=True)
    parser.add_argument("--out", default=str(REPO / "tests" / "fixtures" / "upstream-1.1.0-bank.zip"))
    parser.add_argument("--bank", default="hs-upstream2")
    args = parser.parse_args()

    with upstream_api(args.upstream_venv) as url:
        archive = build(url, args.bank)
        Path(args.out).write_bytes(archive)
        log(f"{len(archive)} bytes written to {args.out}")


if __name__ == "__main__":
    main()
