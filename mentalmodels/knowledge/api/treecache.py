"""``GET …/knowledge-base/tree`` answered by version: a repeated read of an unchanged tree costs
one statement of three index probes (``knowledge_tree_version``), however big the tree.

Each answer of a tree ``knowledge_tree`` could vouch for (by the cutoff read with the
version: no memory write of the bank in flight) carries an ``ETag`` named by its version (the
bank's tree version, last memory write and last memory deletion), the filters and
``RENDERING``; its bytes are kept in this process (``RenderedTrees``: one entry per bank and
filter, least recently used out past ``BUDGET_BYTES``). The next read of the same bank and
filters reads the version first: the same version is the same tree, answered from the bytes
kept, or ``304 Not Modified`` to an ``If-None-Match`` naming it, without reading a node. Any
other version is read and rendered afresh (and kept, when vouched for). Every answer says
``Cache-Control: no-cache``: an HTTP cache must ask again each time (``is_stale`` turns with a
retain), which an ``If-None-Match`` makes cheap.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from django.http import HttpResponse, HttpResponseNotModified
from django.utils.http import parse_etags

from mentalmodels.knowledge import selectors
from mentalmodels.knowledge.api.serializers import KnowledgeTreeResponseSerializer
from mentalmodels.knowledge.selectors import PageFilter, TreeVersion

# Part of every ETag: change it with the tree's wire rendering, so that no client keeps a body
# rendered the old way.
RENDERING = 1
# The rendered trees one process keeps (a 1,000-page tree is about 0.9 MB).
BUDGET_BYTES = 64 * 1024 * 1024


def tree_etag(bank_id: str, page_filter: PageFilter, version: TreeVersion) -> str:
    named = repr((RENDERING, bank_id, page_filter, version)).encode()
    return f'"kb-{hashlib.sha256(named).hexdigest()[:32]}"'


class RenderedTrees:
    """Rendered trees by (bank, filter), each under its ETag; at most ``budget`` bytes."""

    def __init__(self, budget: int = BUDGET_BYTES) -> None:
        self.budget = budget
        self._entries: OrderedDict[tuple[str, PageFilter], tuple[str, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, PageFilter], etag: str) -> bytes | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != etag:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: tuple[str, PageFilter], etag: str, body: bytes) -> None:
        with self._lock:
            self._drop(key)
            if len(body) > self.budget:
                return
            self._entries[key] = (etag, body)
            self._bytes += len(body)
            while self._bytes > self.budget:
                self._drop(next(iter(self._entries)))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _drop(self, key: tuple[str, PageFilter]) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= len(entry[1])


rendered_trees = RenderedTrees()


def _answer(body: bytes, etag: str | None) -> HttpResponse:
    response = HttpResponse(body, content_type="application/json")
    response["Cache-Control"] = "no-cache"
    if etag is not None:
        response["ETag"] = etag
    return response


def _names(if_none_match: str | None, etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag`` (weak comparison, as RFC 9110 has it; ``*`` is
    not honoured: only a tag this server sent vouches for a body)."""
    if not if_none_match:
        return False
    return any(t.removeprefix("W/") == etag for t in parse_etags(if_none_match))


def tree_response(*, bank_id: str, page_filter: PageFilter,
                  if_none_match: str | None) -> HttpResponse:
    key = (bank_id, page_filter)
    read = selectors.knowledge_tree_version(bank_id=bank_id)
    version = read.version
    if version is not None:
        etag = tree_etag(bank_id, page_filter, version)
        if _names(if_none_match, etag):
            not_modified = HttpResponseNotModified()
            not_modified["ETag"] = etag
            not_modified["Cache-Control"] = "no-cache"
            return not_modified
        body = rendered_trees.get(key, etag)
        if body is not None:
            return _answer(body, etag)
    tree = selectors.knowledge_tree(bank_id=bank_id, page_filter=page_filter,
                                    cutoff=read.cutoff)
    body = KnowledgeTreeResponseSerializer.render_tree_json(tree.nodes, tree.stale)
    if tree.version is None:
        return _answer(body, None)
    etag = tree_etag(bank_id, page_filter, tree.version)
    rendered_trees.put(key, etag, body)
    return _answer(body, etag)
