"""Scripted stand-ins for the LLM and embeddings servers: an OpenAI-compatible HTTP server whose
answers a caller scripts (``llm_server``), and the scripts the tests and the benches share on
top of it (a consolidating model, a delta-refresh model, a retain extraction that counts its
calls in flight).

Used by the tests (their pytest fixtures live in ``tests/fakes/fixtures.py``) and by the
benches; never by the service, which an import contract keeps from importing it.
"""
