"""Django settings of celery-beat: the project's settings with only what beat needs loaded.

Beat reads its schedule from django-celery-beat's tables (``DatabaseScheduler``) and publishes
each due task by name; it runs none of them. Loaded with the full settings it imported every app
— the models, the operation handlers, the LLM gateway, the local embedder's runtime — about
160 MB (PSS) for a process that only keeps a clock. With these, beat's Django knows
django-celery-beat alone, so Celery's task discovery imports nothing of the service: about a
third of the memory.

Everything else (the broker, the queue, the timezone, the database, the task events) is the
project's settings unchanged. ``make run`` and the compose file start beat with
``DJANGO_SETTINGS_MODULE=hindsight.project.settings_beat``.
"""

from __future__ import annotations

from hindsight.project.settings import *  # noqa: F403 - the project's settings, narrowed below

INSTALLED_APPS = ["django.contrib.contenttypes", "django_celery_beat"]
MIDDLEWARE = []  # the ORM only: beat serves no request
# No URL configuration either (Celery's run of the system checks, whose URL check imported the
# whole API, is skipped anyway: hindsight.project.celery): this module, which has no URLs.
ROOT_URLCONF = "hindsight.project.settings_beat"
urlpatterns: list[object] = []
