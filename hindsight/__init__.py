"""Hindsight mental models: the Django project and the memory core."""

from hindsight.celery import app as celery_app

__all__ = ["celery_app"]
__version__ = "0.1.0"
