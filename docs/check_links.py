"""Check the relative links of README.md and docs/*.md: each names an existing file, and each #anchor into a
Markdown page names one of its headings (GitHub's slugs). Run from anywhere: ``python docs/check_links.py``;
exit 1 and one line per broken link when any is broken.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def prose(path: Path) -> str:
    """The page without its fenced code blocks (a ``[x](y)`` in code is not a link)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(prose(path))}


def broken(page: Path) -> list[str]:
    found = []
    for target in LINK.findall(prose(page)):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        name, _, anchor = target.partition("#")
        dest = (page.parent / name).resolve() if name else page
        where = f"{page.relative_to(ROOT)}: {target}"
        if not dest.exists():
            found.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            found.append(f"{where}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    return found


def main() -> int:
    problems = [line for page in pages() for line in broken(page)]
    for line in problems:
        print(line)
    checked = sum(len(LINK.findall(prose(p))) for p in pages())
    print(f"{checked} links in {len(pages())} pages, {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
