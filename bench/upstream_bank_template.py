"""Write a bank template manifest with upstream Hindsight 1.1.0 itself
(``tests/fixtures/upstream-1.1.0-bank-template.json``), and apply one written here to it.

Upstream's API runs as ``bench.upstream_bank_archive`` runs it (``--upstream-venv``, a scratch
PostgreSQL, the scripted LLM). The official client builds a bank with a setup to carry — config
overrides, two mental models (one tagged on a cron, one delta refreshed after consolidation), a
knowledge-base page (a template leaves it out), an active directive and an inactive tagged one —
and upstream's ``export_bank_template`` writes the manifest to ``--out``, with upstream's own
JSON Schema of it beside (``--schema-out``, descriptions and titles left out: the facts only).

With ``--apply FILE`` it also imports FILE (a manifest exported here) into a new bank on upstream
through the official client — a dry run, then the import — and prints upstream's answers and
its export of that bank: the check that a manifest written here imports there.

    python -m bench.upstream_bank_template --upstream-venv VENV [--out FILE] [--apply FILE]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.harness import REPO, argument_parser, log
from bench.upstream_bank_archive import upstream_api

FIXTURES = REPO / "tests" / "fixtures"


def _templates_api(client: Any) -> Any:
    from hindsight_client_api.api.bank_templates_api import BankTemplatesApi

    return BankTemplatesApi(client._api_client)


def build(url: str, bank: str) -> dict[str, Any]:
    from hindsight_client import Hindsight

    client = Hindsight(base_url=url, timeout=60.0)
    try:
        client.create_bank(bank, name="Upstream template fixture")
        client.update_bank_config(bank, reflect_mission="Answer about the team.",
                                  retain_mission="Keep who does what.", disposition_empathy=4,
                                  mental_model_min_refresh_interval_seconds=60)
        client.create_mental_model(bank, name="Team stack", id="team-stack", tags=["team"],
                                   source_query="What stack does the team use?", max_tokens=1024,
                                   trigger={"refresh_cron": "0 3 * * *", "keep_trace": True})
        client.create_mental_model(bank, name="People", id="people",
                                   source_query="Who leads which group?",
                                   trigger={"mode": "delta", "refresh_after_consolidation": True,
                                            "fact_types": ["world", "observation"]})
        client.create_knowledge_page(bank, name="Onboarding",
                                     source_query="How does a newcomer start?")
        client.create_directive(bank, name="Formal", content="Answer in formal English.",
                                priority=5)
        client.create_directive(bank, name="No customers", content="Name no customer.",
                                tags=["team"], is_active=False)
    finally:
        client.close()
    return dict(_get_json(url + f"/v1/default/banks/{bank}/export"))


def _get_json(url: str) -> Any:
    """Upstream's answer as it sent it (the client's models would drop its nulls)."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=60) as response:
        return json.loads(response.read())


def schema_facts(url: str) -> dict[str, Any]:
    """Upstream's JSON Schema of the manifest without its prose (descriptions, titles,
    examples)."""
    schema = _get_json(url + "/v1/bank-template-schema")

    def facts(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: facts(v) for k, v in node.items()
                    if k not in ("description", "title", "example", "examples")
                    or (k == "title" and not isinstance(v, str))}
        if isinstance(node, list):
            return [facts(item) for item in node]
        return node

    return dict(facts(schema))


def apply(url: str, path: Path, bank: str) -> None:
    from hindsight_client import Hindsight
    from hindsight_client.hindsight_client import _run_async
    from hindsight_client_api.models import BankTemplateManifest

    manifest = BankTemplateManifest.from_dict(json.loads(path.read_text()))
    with Hindsight(base_url=url, timeout=60.0) as client:
        api = _templates_api(client)
        dry = _run_async(api.import_bank_template(bank, manifest, dry_run=True))
        log(f"upstream's dry run: {dry.to_dict()}")
        done = _run_async(api.import_bank_template(bank, manifest))
        log(f"upstream's import: {done.to_dict()}")
        exported = _run_async(api.export_bank_template(bank))
        log("upstream's export of it: " + json.dumps(exported.to_dict(), sort_keys=True))


def main() -> None:
    parser = argument_parser("bench.upstream_bank_template", __doc__)
    parser.add_argument("--upstream-venv", required=True)
    parser.add_argument("--out", default=str(FIXTURES / "upstream-1.1.0-bank-template.json"))
    parser.add_argument("--schema-out",
                        default=str(FIXTURES / "upstream-1.1.0-bank-template-schema.json"))
    parser.add_argument("--bank", default="hs-upstream-template")
    parser.add_argument("--apply", default=None, help="A manifest written here, to import")
    args = parser.parse_args()

    with upstream_api(args.upstream_venv) as url:
        manifest = build(url, args.bank)
        Path(args.out).write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
        log(f"upstream's manifest written to {args.out}")
        Path(args.schema_out).write_text(json.dumps(schema_facts(url), indent=1) + "\n")
        log(f"upstream's schema (facts) written to {args.schema_out}")
        if args.apply:
            apply(url, Path(args.apply), args.bank + "-applied")


if __name__ == "__main__":
    main()
