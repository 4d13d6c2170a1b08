"""The API docs work offline: every script and stylesheet the pages load is served by us."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from django.test import Client

DOC_PAGES = ("/docs", "/docs/", "/redoc", "/redoc/")


class _Assets(HTMLParser):
    """Collects what a page makes the browser fetch: scripts, stylesheets, icons."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "script" and values.get("src"):
            self.urls.append(values["src"] or "")
        if tag == "link" and values.get("href"):
            self.urls.append(values["href"] or "")


CDN_URL = re.compile(r"(?:https?:)?//[\w.-]*(?:cdn|unpkg|jsdelivr)[\w.-]*", re.IGNORECASE)


def page_assets(html: str) -> list[str]:
    parser = _Assets()
    parser.feed(html)
    return parser.urls


@pytest.mark.parametrize("page", DOC_PAGES)
def test_doc_pages_load_only_assets_this_server_serves(page: str) -> None:
    client = Client()
    response = client.get(page)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assets = page_assets(html)
    assert any(a.endswith(".js") for a in assets), assets
    # No CDN host named anywhere in the page, inline scripts included (a URL, not a substring:
    # the page's random nonce once spelled "cdn").
    assert not CDN_URL.search(html), CDN_URL.search(html)
    for url in assets:
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc, f"{page} loads {url} from elsewhere"
        served = client.get(parts.path)
        assert served.status_code == 200, url
        body = b"".join(served.streaming_content) if served.streaming else served.content
        assert body, url
        kinds = {"js": "javascript", "css": "text/css", "png": "image/png"}
        expected = kinds[url.rsplit(".", 1)[1]]
        assert expected in served["Content-Type"], (url, served["Content-Type"])


def test_admin_stylesheet_is_served_as_css() -> None:
    response = Client().get("/static/admin/css/base.css")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/css")


def test_openapi_declares_the_tenant_key_as_a_bearer_scheme_on_every_v1_operation() -> None:
    document = json.loads(Client().get("/openapi.json").content)
    assert document["components"]["securitySchemes"]["TenantApiKey"] == {
        "type": "http", "scheme": "bearer",
        "description": document["components"]["securitySchemes"]["TenantApiKey"]["description"],
    }
    operations = [
        (path, operation) for path, item in document["paths"].items() if path.startswith("/v1/")
        for operation in item.values()
    ]
    assert operations
    for path, operation in operations:
        # Optional: a server without HINDSIGHT_API_TENANT_API_KEY takes anonymous calls.
        assert operation["security"] == [{"TenantApiKey": []}, {}], path
