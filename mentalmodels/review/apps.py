from __future__ import annotations

from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "mentalmodels.review"
    label = "review"
    verbose_name = "Review"
