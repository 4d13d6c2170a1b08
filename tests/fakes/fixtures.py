"""Fixtures for the scripted OpenAI-compatible server (filled in by tests/fakes/llm_server.py)."""
