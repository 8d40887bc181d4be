"""Headless Chromium for the HTML report tests: the DOM after the page's scripts ran (``--dump-dom``), a
screenshot, and the URLs a page would fetch by itself (read from real attributes, not by grepping: the
inlined plotly.js holds URL strings it never loads)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SKIP_REASON = "chromium is not installed (apt-get install -y chromium; .ci/run installs it)"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--virtual-time-budget=5000"]


def _short_temp() -> str:
    """Where Chromium's profile and temporaries go: the temporary folder where its path is short, else /tmp.
    Chromium's SingletonSocket lives in its $TMPDIR, and a Unix socket's path holds at most 107 bytes: a long
    $TMPDIR failed every browser test ('Socket path too long')."""
    base = tempfile.gettempdir()
    return base if len(base) <= 40 or not os.access("/tmp", os.W_OK) else "/tmp"


def _run(args: list[str], timeout: int = 180) -> str:
    with tempfile.TemporaryDirectory(dir=_short_temp(), prefix="chromium-") as profile:
        r = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, "TMPDIR": profile})
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def dump_dom(page: Path, *extra: str, png: Path | None = None, size: str = "1300,1600") -> str:
    """The serialized DOM of ``page`` once its scripts have run; with ``png``, a screenshot of it too
    (kept in $ONNXPROBE_SCREENSHOTS when that is set, to look at)."""
    shot = [f"--window-size={size}", f"--screenshot={Path(png).resolve()}"] if png is not None else []
    dom = _run([*extra, *shot, "--dump-dom", Path(page).resolve().as_uri()])
    if png is not None:
        assert png.is_file() and png.stat().st_size > 10_000, "the screenshot is empty"
        keep = os.environ.get("ONNXPROBE_SCREENSHOTS")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(png, Path(keep) / png.name)
    return dom


def element(dom: str, tag: str, id_: str) -> str:
    """The inner HTML of the (first) ``<tag id=...>`` of a serialized DOM (Chromium's serialization is
    normalized: attributes in double quotes), up to its closing tag at the same depth."""
    m = re.search(rf'<{tag}\b[^>]*\bid="{re.escape(id_)}"[^>]*>', dom)
    assert m, f"no <{tag} id={id_!r}> in the page"
    depth, pos = 1, m.end()
    opening, closing = re.compile(rf"<{tag}\b"), re.compile(rf"</{tag}>")
    while depth:
        o, c = opening.search(dom, pos), closing.search(dom, pos)
        assert c, f"<{tag} id={id_!r}> is not closed"
        if o and o.start() < c.start():
            depth, pos = depth + 1, o.end()
        else:
            depth, pos = depth - 1, c.end()
    return dom[m.end():c.start()]


URL_ATTRS = {"src", "href", "srcset", "action", "poster", "data", "formaction", "background", "xlink:href"}
REMOTE = re.compile(r"^\s*(https?:)?//", re.I)
CSS_URL = re.compile(r"url\(\s*['\"]?\s*(https?:)?//|@import", re.I)


class _Fetches(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._style = False

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if v is None:
                continue
            if k.lower() in URL_ATTRS and any(REMOTE.match(part) for part in v.split(",")):
                self.found.append(f"<{tag} {k}={v[:80]!r}>")
            if k.lower() == "style" and CSS_URL.search(v):
                self.found.append(f"<{tag} style={v[:80]!r}>")
        self._style = tag.lower() == "style"

    def handle_endtag(self, tag):
        self._style = False

    def handle_data(self, data):
        if self._style and CSS_URL.search(data):
            self.found.append(f"<style> {CSS_URL.search(data).group(0)!r}")


def remote_fetches(html_text: str) -> list[str]:
    """What the page would load from the network by itself: src/href/... attributes with an http(s) or
    protocol-relative URL, url() and @import in styles. Script text is not read (the parser keeps
    <script> contents as raw text): a URL inside a JS string is not a fetch."""
    p = _Fetches()
    p.feed(html_text)
    p.close()
    return p.found
