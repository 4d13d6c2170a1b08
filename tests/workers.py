"""Fixtures that run real Celery workers as subprocesses (owned by the operations tests)."""
