"""Code comments name the rule they rely on by a link into docs/behaviour.md; every such link
must land on a heading of that page (GitHub's anchor for it), so a reader can follow it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINK = re.compile(r"docs/behaviour\.md#([a-z0-9-]+)")


def github_anchor(heading: str) -> str:
    """The id GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {github_anchor(line.lstrip("#")) for line in page.read_text().splitlines()
            if line.startswith("#")}


def cited_links() -> dict[str, list[str]]:
    listed = subprocess.run(["git", "grep", "-n", "docs/behaviour.md#", "--", "*.py", "*.md"],
                            cwd=REPO, capture_output=True, text=True, check=False).stdout
    cited: dict[str, list[str]] = {}
    for line in listed.splitlines():
        where, _, text = line.partition(":")
        for anchor in LINK.findall(text):
            cited.setdefault(anchor, []).append(where)
    return cited


def test_every_rule_a_comment_links_to_is_a_heading_of_docs_behaviour() -> None:
    known = anchors(REPO / "docs" / "behaviour.md")
    cited = cited_links()
    assert cited, "no comment links to docs/behaviour.md: the guard would pass on nothing"
    missing = {anchor: places for anchor, places in cited.items() if anchor not in known}
    assert not missing, f"links to headings docs/behaviour.md does not have: {missing}"


def test_the_anchor_rule_matches_githubs() -> None:
    assert github_anchor(" The snapshot cutoff") == "the-snapshot-cutoff"
    assert github_anchor("Dropped edits and the second ask") == "dropped-edits-and-the-second-ask"
    assert github_anchor("Fields and detail levels") == "fields-and-detail-levels"
