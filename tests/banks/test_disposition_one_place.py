"""A bank's disposition and mission have one home: the bank body (PUT/PATCH, PUT …/profile)
and the config API (disposition_* and reflect_mission keys, the client's recommended way) write
and read the same values."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

BANK = "/v1/default/banks/disp"


@pytest.fixture
def api() -> APIClient:
    client = APIClient(raise_request_exception=False)
    assert client.put(BANK, {"name": "D"}, format="json").status_code == 200
    return client


def _profile(api: APIClient) -> dict[str, int]:
    return api.get(f"{BANK}/profile").json()["disposition"]


def _config(api: APIClient) -> dict[str, int]:
    resolved = api.get(f"{BANK}/config").json()["config"]
    return {t: resolved[f"disposition_{t}"] for t in ("skepticism", "literalism", "empathy")}


def test_a_config_override_shows_in_the_profile(api: APIClient) -> None:
    response = api.patch(f"{BANK}/config", {"updates": {"disposition_skepticism": 5}},
                         format="json")
    assert response.status_code == 200
    assert _profile(api) == {"skepticism": 5, "literalism": 3, "empathy": 3}


def test_a_profile_write_shows_in_the_config_and_wins_over_an_older_override(
    api: APIClient
) -> None:
    api.patch(f"{BANK}/config", {"updates": {"disposition_empathy": 1}}, format="json")
    body = {"disposition": {"skepticism": 2, "literalism": 4, "empathy": 5}}
    assert api.put(f"{BANK}/profile", body, format="json").status_code == 200
    assert _profile(api) == _config(api) == {"skepticism": 2, "literalism": 4, "empathy": 5}
    assert api.put(BANK, {"disposition_literalism": 1}, format="json").status_code == 200
    assert _profile(api) == _config(api) == {"skepticism": 2, "literalism": 1, "empathy": 5}


def test_resetting_the_config_resets_the_disposition(api: APIClient) -> None:
    api.put(f"{BANK}/profile", {"disposition": {"skepticism": 1, "literalism": 1, "empathy": 1}},
            format="json")
    assert api.delete(f"{BANK}/config").status_code == 200
    assert _profile(api) == _config(api) == {"skepticism": 3, "literalism": 3, "empathy": 3}


def test_the_mission_has_one_home_too(api: APIClient) -> None:
    # The client's recommended way (update_bank_config(reflect_mission=…)) shows in the profile.
    api.patch(f"{BANK}/config", {"updates": {"reflect_mission": "Track deploys"}}, format="json")
    profile = api.get(f"{BANK}/profile").json()
    assert profile["mission"] == profile["background"] == "Track deploys"
    # The deprecated bank-body field shows in the config.
    api.put(BANK, {"mission": "Track releases"}, format="json")
    config = api.get(f"{BANK}/config").json()
    assert config["config"]["reflect_mission"] == "Track releases"
    assert config["overrides"]["reflect_mission"] == "Track releases"
    assert api.delete(f"{BANK}/config").status_code == 200
    assert api.get(f"{BANK}/profile").json()["mission"] == ""
