"""The benches and the chaos run: measurements taken on demand, never part of the service.

Each script runs from the repository root as a module, ``.venv/bin/python -m bench.<name>``
(``--help`` says what it measures and how to make it smaller); ``make bench`` runs the engine and
mental-model benches. Most start their own throw-away stack (``hindsight.devstack.stack``) with
the scripted LLM of ``fakes``; ``bench_memory`` measures a running ``make run``.

- ``harness``: what the scripts share (statistics, the synthetic workload, HTTP and JSON, the
  stacks they start);
- ``chaos_stack``: the chaos run's stack and LLM, which ``fuzz``, ``scaling`` and
  ``bench_capacity`` start too; ``chaos`` is the run itself (``--quick`` runs in ``make test``).
"""
