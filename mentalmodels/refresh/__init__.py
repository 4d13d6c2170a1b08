"""One refresh of a mental model, in the modules named for its steps (``docs/internals.md``
walks one refresh through them):

- ``pipeline`` — the steps in order and their two callers: ``refresh_run`` (one attempt of a
  refresh operation, written through its fenced job) and ``refresh_dry_run`` (the preview);
- ``plan`` — what the refresh will read: mode, scope, snapshot cutoff, and the precheck reads;
- ``answer`` — the reflect loop's answer and the outcome it allows (all a full refresh is);
- ``delta`` — the delta refresh: the answer's cited facts turned into edits of the document;
- ``extraction`` — structured output extracted from the final document;
- ``persistence`` — the one fenced write of the result;
- ``attempt`` — the attempt's record (what it read, called, spent, applied, how it ended) and
  its one writer onto the operation;
- ``failures`` — how an attempt fails: the one mapping of LLM errors, the deadline and failed
  reads to a refusal, and what a failure entry records of it.
"""
