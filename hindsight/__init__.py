"""Hindsight mental models: the Django project and the memory core."""

from hindsight.infra.config import VERSION as __version__
from hindsight.project.celery import app as celery_app

__all__ = ["__version__", "celery_app"]
