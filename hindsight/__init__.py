"""Hindsight mental models: the Django project and the memory core."""

from hindsight.celery import app as celery_app
from hindsight.config import VERSION as __version__

__all__ = ["__version__", "celery_app"]
