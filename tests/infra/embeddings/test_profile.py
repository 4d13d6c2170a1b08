"""The deployment's embedding profile: recorded on first start, a change refused until reembed."""

from __future__ import annotations

import dataclasses

import pytest
from django.core.checks import Tags, run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from hindsight.infra.embeddings import Profile
from hindsight.infra.embeddings.checks import EMBEDDING_PROFILE_CHECK_ID, embedding_profile_check
from hindsight.infra.embeddings.models import EmbeddingProfile
from hindsight.infra.embeddings.profile import ProfileMismatch, profile_ensure, profile_recorded

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_recorded_profile() -> None:
    # migrate (which built the test database) records the profile; these tests start before.
    EmbeddingProfile.objects.all().delete()


def use_openai_profile(settings, *, model: str = "text-embedding-3-small", dims: int = 384) -> None:
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT,
        embeddings_provider="openai",
        embeddings_model=model,
        embeddings_dimensions=dims,
    )


def test_first_ensure_records_the_configured_profile() -> None:
    assert profile_recorded() is None
    assert profile_ensure() == Profile("local", "all-MiniLM-L6-v2", 384)
    row = EmbeddingProfile.objects.get(id=1)
    assert (row.provider, row.model, row.dimensions) == ("local", "all-MiniLM-L6-v2", 384)
    assert profile_ensure() == Profile("local", "all-MiniLM-L6-v2", 384)  # idempotent
    assert EmbeddingProfile.objects.count() == 1


def test_changed_model_is_refused_naming_the_variables_and_reembed(settings) -> None:
    profile_ensure()
    use_openai_profile(settings)
    with pytest.raises(ProfileMismatch) as excinfo:
        profile_ensure()
    message = str(excinfo.value)
    assert "local/all-MiniLM-L6-v2 (384 dims)" in message
    assert "openai/text-embedding-3-small (384 dims)" in message
    assert "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL" in message
    assert "manage.py reembed" in message
    # the recorded profile is left as it was
    assert profile_recorded() == Profile("local", "all-MiniLM-L6-v2", 384)


def test_dimension_that_does_not_fit_the_column_is_refused_before_anything_is_recorded(
    settings,
) -> None:
    use_openai_profile(settings, dims=768)
    with pytest.raises(ProfileMismatch, match=r"vector\(384\)"):
        profile_ensure()
    assert profile_recorded() is None


def test_system_check_reports_a_mismatch_only_when_databases_are_checked(settings) -> None:
    profile_ensure()
    assert embedding_profile_check(databases=["default"]) == []
    use_openai_profile(settings)
    assert embedding_profile_check(databases=None) == []
    errors = embedding_profile_check(databases=["default"])
    assert [e.id for e in errors] == [EMBEDDING_PROFILE_CHECK_ID]
    assert "HINDSIGHT_API_EMBEDDINGS_PROVIDER" in errors[0].msg
    assert "reembed" in errors[0].hint


def test_profile_check_is_registered_as_a_database_check(settings) -> None:
    profile_ensure()
    use_openai_profile(settings)
    ids = [e.id for e in run_checks(tags=[Tags.database], databases=["default"])]
    assert EMBEDDING_PROFILE_CHECK_ID in ids


def test_migrate_records_the_profile_of_a_fresh_database() -> None:
    EmbeddingProfile.objects.all().delete()
    call_command("migrate", verbosity=0)
    assert profile_recorded() == Profile("local", "all-MiniLM-L6-v2", 384)


def test_migrate_refuses_to_start_on_a_changed_profile(settings) -> None:
    profile_ensure()
    use_openai_profile(settings)
    with pytest.raises(SystemCheckError, match=EMBEDDING_PROFILE_CHECK_ID):
        call_command("migrate", verbosity=0, skip_checks=False)  # as `manage.py migrate` runs
    assert profile_recorded() == Profile("local", "all-MiniLM-L6-v2", 384)
