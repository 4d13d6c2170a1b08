"""WSGI entry point.

Start-up imports every view (the first request would) and then freezes what it built out of
the garbage collector's reach (``gc.freeze``): an API process holds a few hundred thousand
long-lived objects (modules, classes, the URL conf, the OpenAPI generator), and every full
collection walked them all — about 150 ms, once every few large requests (it was most of the
knowledge tree's p95 at 1,000 pages).
"""

from __future__ import annotations

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hindsight.project.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018  # imports every view now, not on the first request
gc.freeze()
