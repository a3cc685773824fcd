"""mkdocs hook: the results gallery (docs/gallery.md) from the report's figures.

At build time, each family page of the report (``reports/<family>/index.html``, written by ``make smoke``,
``make reproduce`` or ``uqcal report``) is read for its figures, ``<figure><img src=...><figcaption>``; the image
files are added to the site under ``gallery/<family>/`` and listed on the gallery page with their captions, in
place of the page's ``<!-- gallery -->`` marker. With no report, the page keeps its text on how to make one, and
the build (``mkdocs build --strict``) passes all the same.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from mkdocs.structure.files import File

MARKER = "<!-- gallery -->"
GALLERY_PAGE = "gallery.md"


class _Figures(HTMLParser):
    """(image src, title, caption) of every <figure> of a report page."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, str, str]] = []
        self._figure: dict | None = None
        self._in_caption = False
        self._in_link = False  # the caption's link to the PNG copy: not caption text

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "figure":
            self._figure = {"src": None, "alt": "", "caption": []}
        elif self._figure is not None and tag == "img" and self._figure["src"] is None:
            self._figure["src"], self._figure["alt"] = attrs.get("src"), attrs.get("alt") or ""
        elif self._figure is not None and tag == "figcaption":
            self._in_caption = True
        elif tag == "a":
            self._in_link = True

    def handle_endtag(self, tag):
        if tag == "figcaption":
            self._in_caption = False
        elif tag == "a":
            self._in_link = False
        elif tag == "figure" and self._figure is not None:
            if self._figure["src"]:
                caption = " ".join("".join(self._figure["caption"]).replace("()", "").split())
                self.found.append((self._figure["src"], self._figure["alt"], caption))
            self._figure = None

    def handle_data(self, data):
        if self._in_caption and not self._in_link and self._figure is not None:
            self._figure["caption"].append(data)


def report_figures(reports: Path) -> dict[str, list[tuple[Path, str, str]]]:
    """{family: [(image file, title, caption)]} of every family page under ``reports`` whose images exist."""
    found = {}
    for page in sorted(reports.glob("*/index.html")):
        parser = _Figures()
        parser.feed(page.read_text(encoding="utf-8"))
        figures = [(page.parent / src, title, caption) for src, title, caption in parser.found
                   if "://" not in src and (page.parent / src).is_file()]
        if figures:
            found[page.parent.name] = figures
    return found


def gallery_markdown(figures: dict[str, list[tuple[Path, str, str]]], reports: Path) -> str:
    lines = []
    for family, items in figures.items():
        lines += [f"## {family}", ""]
        for image, title, caption in items:
            uri = f"gallery/{image.relative_to(reports).as_posix()}"
            # gallery.md sits at the site's root, so its links are relative to it
            lines += [f"![{title}]({uri})", "", f"*{caption or title}*", ""]
    return "\n".join(lines)


def _reports_dir(config) -> Path:
    return Path(config.config_file_path).resolve().parent / "reports"


def on_files(files, config):
    reports = _reports_dir(config)
    for items in report_figures(reports).values():
        for image, _, _ in items:
            uri = f"gallery/{image.relative_to(reports).as_posix()}"
            if files.get_file_from_path(uri) is None:
                files.append(File.generated(config, uri, abs_src_path=str(image)))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != GALLERY_PAGE or MARKER not in markdown:
        return markdown
    reports = _reports_dir(config)
    figures = report_figures(reports)
    if not figures:
        return markdown
    return markdown.replace(MARKER, gallery_markdown(figures, reports))
