"""The shared fixtures of the tests: ``api`` and ``bank``, and two that make every test cheaper.

- ``api``: Django REST framework's test client, for the tests of the HTTP API. A module that
  needs another client (``APIClient(raise_request_exception=False)``, one that seeds a bank
  first) defines its own ``api``, which wins over this one.
- ``bank``: the test's bank row, id ``bank_id`` and other fields ``bank_fields``; a package's
  conftest or a module overrides those two fixtures to choose its own (pytest's fixture
  override), and a module whose bank comes with more (another bank, patched publishing)
  overrides ``bank`` itself, asking for this one by the same name. The row is committed when
  the test is transactional — its module's ``django_db(transaction=True)`` mark, or a fixture
  such as ``worker_factory`` or ``live_server`` asks for it.
- For the whole session (autouse): users made by tests hash their passwords with MD5, and
  WhiteNoise lists the static files once (see each fixture).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test.utils import override_settings
from rest_framework.test import APIClient
from whitenoise.middleware import WhiteNoiseMiddleware

from hindsight.banks.models import Bank
from tests.factories import make_bank

__all__ = ["api", "bank", "bank_fields", "bank_id", "cheap_password_hashes",
           "static_files_listed_once"]


@pytest.fixture(autouse=True, scope="session")
def cheap_password_hashes(django_test_environment: None) -> Iterator[None]:
    """Users made by tests (pytest-django's ``admin_user`` behind every admin test, the browser
    tests' logins) hash their passwords with MD5, as Django's testing docs advise: the default
    PBKDF2 costs ~0.2 CPU-seconds a hash. The default hashers stay listed after it, so a hash a
    ``manage.py`` subprocess made still checks."""
    from django.conf import settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher",
                                             *settings.PASSWORD_HASHERS]):
        yield


@pytest.fixture(autouse=True, scope="session")
def static_files_listed_once() -> Iterator[None]:
    """Django's test client builds the middleware chain anew for each client, and WhiteNoise
    (``WHITENOISE_USE_FINDERS``) lists and stats every app's static files in it, ~15 ms a client
    over a thousand clients; a server process does it once. The session's first chain lists them
    and every later one takes the same entries: neither the files nor WhiteNoise's settings
    change during a run."""
    listed: dict[str, Any] = {}
    list_them = WhiteNoiseMiddleware.add_files_from_finders

    def once(middleware: WhiteNoiseMiddleware) -> None:
        if not listed:
            before = dict(middleware.files)
            list_them(middleware)
            listed.update({url: entry for url, entry in middleware.files.items()
                           if before.get(url) is not entry})
        else:
            middleware.files.update(listed)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(WhiteNoiseMiddleware, "add_files_from_finders", once)
        yield


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def bank_id() -> str:
    return "bank"


@pytest.fixture
def bank_fields() -> dict[str, Any]:
    return {}


@pytest.fixture
def bank(db: None, bank_id: str, bank_fields: dict[str, Any]) -> Bank:
    return make_bank(bank_id, **bank_fields)
