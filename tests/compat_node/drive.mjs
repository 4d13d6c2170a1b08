// The official npm client (@vectorize-io/hindsight-client 0.9.1) driving a live server through
// its own methods, asserting the bodies it returns. Run by test_node_client.py, which starts
// the server, a real worker and the scripted LLM, and passes what the LLM will write in env:
//   HINDSIGHT_URL, BANK, QUERY_1, QUERY_2, DOC_1, DOC_2, DOC_DRY
// Exit code 0 = every assertion held; otherwise the failed assertion is on stderr.
import assert from "node:assert/strict";
import {
  HindsightClient,
  HindsightError,
  createClient,
  createConfig,
  sdk,
} from "@vectorize-io/hindsight-client";

const env = process.env;
const BANK = env.BANK;
const client = new HindsightClient({ baseUrl: env.HINDSIGHT_URL });
const raw = createClient(createConfig({ baseUrl: env.HINDSIGHT_URL }));
const steps = [];

function step(name) {
  steps.push(name);
}

async function waitOperation(operationId) {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const { data, error } = await sdk.getOperationStatus({
      client: raw,
      path: { bank_id: BANK, operation_id: operationId },
    });
    assert.equal(error, undefined, `getOperationStatus failed: ${JSON.stringify(error)}`);
    if (["completed", "failed", "cancelled"].includes(data.status)) return data;
    if (Date.now() > deadline) throw new Error(`operation ${operationId} still ${data.status}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const texts = (memories) => memories.map((m) => m.text).sort();

// banks and memories ---------------------------------------------------------------------------
const bank = await client.createBank(BANK, { name: "Node compat" });
assert.equal(bank.bank_id, BANK);
assert.equal(bank.name, "Node compat");
step("createBank");

for (const [content, tags] of [
  ["Alice prefers async communication over Slack.", ["team"]],
  ["Bob runs the Monday standup.", ["team"]],
  ["Carol's cat is called Miso.", ["carol"]],
]) {
  const retained = await client.retain(BANK, content, { tags, strategy: "verbatim" });
  assert.equal(retained.success, true);
  assert.equal(retained.items_count, 1);
}
step("retain");

// create with id, tags, trigger.tagsMatch ------------------------------------------------------
const created = await client.createMentalModel(BANK, "Team communication", env.QUERY_1, {
  id: "team-comms",
  tags: ["team"],
  trigger: { tagsMatch: "any", refreshAfterConsolidation: false },
});
assert.equal(created.mental_model_id, "team-comms");
assert.match(created.operation_id, /^[0-9a-f-]{36}$/);
const firstOp = await waitOperation(created.operation_id);
assert.equal(firstOp.status, "completed");
assert.equal(firstOp.details.outcome, "content_written");
assert.equal(firstOp.mental_model_id, "team-comms");
step("createMentalModel");

// the seed's plain create (options: tags only)
const plain = await client.createMentalModel(
  BANK,
  "Team Communication Preferences",
  "How does the team prefer to communicate?",
  { tags: ["team", "communication"] },
);
assert.match(plain.mental_model_id, /^mm-[0-9a-f]{32}$/);
await waitOperation(plain.operation_id);

// list at each detail level --------------------------------------------------------------------
const listed = await client.listMentalModels(BANK);
assert.equal(listed.total, 2);
const metaItem = listed.items.find((m) => m.id === "team-comms");
assert.equal(metaItem.content, null);
assert.equal(metaItem.is_stale, false);
assert.deepEqual(metaItem.tags, ["team"]);
const withContent = await client.listMentalModels(BANK, { detail: "content" });
const contentItem = withContent.items.find((m) => m.id === "team-comms");
assert.equal(contentItem.content, env.DOC_1);
assert.equal(contentItem.source_query, env.QUERY_1);
assert.equal(contentItem.reflect_response, null);
const tagged = await client.listMentalModels(BANK, { tags: ["communication"], detail: "metadata" });
assert.deepEqual(tagged.items.map((m) => m.id), [plain.mental_model_id]);
step("listMentalModels");

// get: content, based_on, is_stale ------------------------------------------------------------
const full = await client.getMentalModel(BANK, "team-comms");
assert.equal(full.content, env.DOC_1);
assert.equal(full.is_stale, false);
assert.equal(full.trigger.tags_match, "any");
assert.deepEqual(texts(full.reflect_response.based_on.world), [
  "Alice prefers async communication over Slack.",
  "Bob runs the Monday standup.",
]);
const meta = await client.getMentalModel(BANK, "team-comms", { detail: "metadata" });
assert.equal(meta.content, null);
assert.equal(meta.is_stale, false);
step("getMentalModel");

// a new in-scope memory makes it stale
await client.retain(BANK, "Dana joined the team and prefers email.", {
  tags: ["team"],
  strategy: "verbatim",
});
assert.equal((await client.getMentalModel(BANK, "team-comms", { detail: "metadata" })).is_stale, true);

// update (name, sourceQuery, trigger.refreshAfterConsolidation) --------------------------------
const updated = await client.updateMentalModel(BANK, "team-comms", {
  name: "Team comms v2",
  sourceQuery: env.QUERY_2,
  trigger: { refreshAfterConsolidation: true },
});
assert.equal(updated.name, "Team comms v2");
assert.equal(updated.source_query, env.QUERY_2);
assert.equal(updated.trigger.refresh_after_consolidation, true);
assert.equal(updated.trigger.tags_match, "any"); // merged key by key
step("updateMentalModel");

// refresh (no body) ----------------------------------------------------------------------------
const refresh = await client.refreshMentalModel(BANK, "team-comms");
assert.match(refresh.operation_id, /^[0-9a-f-]{36}$/);
const refreshOp = await waitOperation(refresh.operation_id);
assert.equal(refreshOp.status, "completed");
const refreshed = await client.getMentalModel(BANK, "team-comms");
assert.equal(refreshed.content, env.DOC_2);
assert.equal(refreshed.is_stale, false);
assert.ok(texts(refreshed.reflect_response.based_on.world).includes(
  "Dana joined the team and prefers email.",
));
step("refreshMentalModel");

// dry run: a preview that writes nothing ------------------------------------------------------
const preview = await client.dryRunRefreshMentalModel(BANK, "team-comms");
assert.equal(preview.mental_model_id, "team-comms");
assert.equal(preview.effective_mode, "full");
assert.equal(preview.would_persist, true);
assert.equal(preview.current_content, env.DOC_2);
assert.equal(preview.preview_content, env.DOC_DRY);
assert.ok(preview.diff.startsWith("--- current\n+++ preview\n"));
assert.equal((await client.getMentalModel(BANK, "team-comms")).content, env.DOC_2);
step("dryRunRefreshMentalModel");

// clear, then the history keeps every version -------------------------------------------------
const cleared = await client.clearMentalModel(BANK, "team-comms");
assert.equal(cleared.content, "");
const history = await client.getMentalModelHistory(BANK, "team-comms");
assert.deepEqual(history.map((h) => h.kind), ["version", "version", "version"]);
assert.deepEqual(history.map((h) => h.previous_content), [env.DOC_2, env.DOC_1, ""]);
assert.ok(history.every((h) => typeof h.changed_at === "string"));
step("clearMentalModel");
step("getMentalModelHistory");

// operations calls -----------------------------------------------------------------------------
const ops = await sdk.listOperations({ client: raw, path: { bank_id: BANK } });
assert.equal(ops.error, undefined);
const opIds = ops.data.operations.map((o) => o.id);
assert.ok(opIds.includes(created.operation_id) && opIds.includes(refresh.operation_id));
const completed = await sdk.listOperations({
  client: raw,
  path: { bank_id: BANK },
  query: { status: "completed", limit: 1 },
});
assert.equal(completed.data.limit, 1);
assert.equal(completed.data.operations.length, 1);
assert.equal(completed.data.operations[0].status, "completed");
const unknown = await sdk.getOperationStatus({
  client: raw,
  path: { bank_id: BANK, operation_id: "00000000-0000-0000-0000-000000000000" },
});
assert.equal(unknown.data.status, "not_found");
const cancel = await sdk.cancelOperation({
  client: raw,
  path: { bank_id: BANK, operation_id: refresh.operation_id },
});
assert.equal(cancel.response.status, 409); // completed: nothing to cancel
const retry = await sdk.retryOperation({
  client: raw,
  path: { bank_id: BANK, operation_id: refresh.operation_id },
});
assert.equal(retry.response.status, 409);
const removed = await sdk.deleteOperation({
  client: raw,
  path: { bank_id: BANK, operation_id: created.operation_id },
});
assert.equal(removed.data.success, true);
assert.equal(removed.data.operation_id, created.operation_id);
step("operations");

// 0.9.1's createMentalModel maps only refreshAfterConsolidation, tagsMatch and tagGroups into
// trigger: refreshCron, mode and keepTrace are dropped (it sends trigger: {}). The README says
// so and shows the workaround this checks: the generated sdk call sends the body as written.
// (Tagged with a tag nothing carries: nothing in reach, so its refresh asks no LLM.)
const nightly = await client.createMentalModel(BANK, "Nightly", "What changed?", {
  id: "nightly",
  tags: ["nothing-carries-this"],
  trigger: { refreshCron: "0 3 * * *", mode: "delta", keepTrace: true },
});
assert.equal((await waitOperation(nightly.operation_id)).status, "completed");
const dropped = await client.getMentalModel(BANK, "nightly", { detail: "content" });
assert.equal(dropped.trigger.refresh_cron, null);
assert.equal(dropped.trigger.mode, "full");
assert.equal(dropped.trigger.keep_trace, false);
const patched = await sdk.updateMentalModel({
  client: raw,
  path: { bank_id: BANK, mental_model_id: "nightly" },
  body: { trigger: { refresh_cron: "0 3 * * *", mode: "delta", keep_trace: true } },
});
assert.equal(patched.error, undefined);
assert.equal(patched.data.trigger.refresh_cron, "0 3 * * *");
assert.equal(patched.data.trigger.mode, "delta");
assert.equal(patched.data.trigger.keep_trace, true);
await client.deleteMentalModel(BANK, "nightly");
step("triggerKeysDroppedAndTheSdkWorkaround");

// errors arrive as HindsightError with the status ----------------------------------------------
await assert.rejects(
  client.createMentalModel(BANK, "bad", "q", { id: "Bad ID!" }),
  (err) => err instanceof HindsightError && err.statusCode === 422,
);
await assert.rejects(
  client.createMentalModel(BANK, "dup", "q", { id: "team-comms" }),
  (err) => err instanceof HindsightError && err.statusCode === 409,
);

// delete ---------------------------------------------------------------------------------------
await client.deleteMentalModel(BANK, "team-comms");
await assert.rejects(
  client.getMentalModel(BANK, "team-comms"),
  (err) => err instanceof HindsightError && err.statusCode === 404,
);
step("deleteMentalModel");

process.stdout.write(JSON.stringify({ ok: true, steps }) + "\n");
