"""Reviewer reports: verdict first, real HTML, every figure present and non-blank, rendered in a real
browser (Debian's headless Chromium), atomic pair writes, and the --report path checked up front."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import dpaudit
from dpaudit.report import markdown_report, write_report

FIGURE_IDS = {"fig-bounds", "fig-profile", "fig-renyi", "fig-tradeoff", "fig-ledger"}


@pytest.fixture(scope="module")
def violation():
    # the first episode is released without noise: a clear violation, with a ledger (both attacks)
    return dpaudit.audit("mutant-first-unnoised", params={"n_arms": 2}, horizon=6, runs=1500, workers=1, seed=0)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.imgs: list[dict[str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.imgs.append(dict(attrs))

    def handle_data(self, data):
        self.parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.parts).split())


def _parse(page: str) -> _Text:
    p = _Text()
    p.feed(page)
    return p


def _ink(png_b64: str) -> float:
    """Fraction of pixels that are not (near) white."""
    import matplotlib.image as mpimg

    img = mpimg.imread(io.BytesIO(base64.b64decode(png_b64)), format="png")[..., :3]
    return float(np.mean(img.min(axis=-1) < 0.9))


def test_markdown_opens_with_the_verdict_and_numbers(violation):
    md = markdown_report(violation)
    head = md.split("## How to reproduce")[0]
    assert "**VIOLATION**" in head and violation.reason in head
    assert f"{violation.epsilon_claimed:.4g}" in head and f"{violation.epsilon_lower:.4g}" in head
    assert f"{violation.gap:.4g}" in head


def test_html_is_real_html_with_every_figure_and_no_scripts(violation):
    page = violation.to_html()
    assert page.startswith("<!DOCTYPE html>") and "<pre>" in page  # only the command line is preformatted
    assert "**" not in page and "| --- |" not in page  # no Markdown source
    parsed = _parse(page)
    assert "script" not in parsed.tags and "link" not in parsed.tags
    assert not re.search(r"(src|href)=['\"](?!data:|#)", page)  # no external file
    assert parsed.tags.index("header") < parsed.tags.index("img") < parsed.tags.index("table")  # banner first
    assert "details" in parsed.tags  # the search, collapsed
    ids = set(re.findall(r"<figure id='([\w-]+)'", page))
    assert FIGURE_IDS <= ids and len(parsed.imgs) == len(ids)
    for img in parsed.imgs:
        assert _ink(img["src"].split("base64,", 1)[1]) > 0.01, img["alt"]  # drawn, not blank


def test_renyi_zero_bound_is_explained():
    from dpaudit.report import renyi_zero_notes

    out = {"attacks": [{"attack": "likelihood", "details": {"renyi": {
        "orders": [2.0, 32.0], "estimate": [0.3, 4.2], "lower": [0.1, 0.0]}}}]}
    notes = renyi_zero_notes(out)
    assert len(notes) == 1 and "32" in notes[0] and "heavy tail" in notes[0] and "4.2" in notes[0]
    out["attacks"][0]["details"]["renyi"]["lower"] = [0.1, 0.5]
    assert renyi_zero_notes(out) == []


def test_pair_is_written_atomically_and_bad_paths_fail_first(violation, tmp_path, monkeypatch):
    md = tmp_path / "sub" / "r.md"
    paths = violation.write(md)
    assert paths == [md, md.with_suffix(".html")]
    assert md.read_text() == markdown_report(violation) and paths[1].read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in md.parent.iterdir()) == ["r.html", "r.md"]  # no temporary left behind
    # a disk that fills while the second file is written leaves the previous pair untouched
    import dpaudit.report as rep

    before = md.read_text()
    real_fdopen, calls = os.fdopen, []

    def failing_fdopen(fd, *a, **k):
        calls.append(fd)
        if len(calls) == 2:
            os.close(fd)
            raise OSError(28, "No space left on device")
        return real_fdopen(fd, *a, **k)

    monkeypatch.setattr(rep.os, "fdopen", failing_fdopen)
    with pytest.raises(dpaudit.DPAuditError, match="No space left"):
        write_report(violation, md)
    monkeypatch.undo()
    assert md.read_text() == before and sorted(p.name for p in md.parent.iterdir()) == ["r.html", "r.md"]
    with pytest.raises(dpaudit.DPAuditError, match="ending in .md"):
        rep.check_report_path(tmp_path / "r.txt")


def test_cli_refuses_an_unwritable_report_before_auditing(tmp_path, capsys, monkeypatch):
    from dpaudit.cli import main

    import dpaudit.runner as chk

    called = []
    monkeypatch.setattr(chk, "run", lambda *a, **k: called.append(1))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = main(["check", "policy", "adac-ucb", "--report", str(blocker / "r.md")])
    assert code == 2 and not called
    assert "cannot write the report" in capsys.readouterr().err


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]

# Test-only probe, added to a copy of the page: the report itself has no JavaScript. It reports what
# the browser rendered: the page's visible text and, for each figure, whether the image decoded and
# how much of it is drawn (non-white pixels read back through a canvas).
PROBE = """<script>
window.addEventListener('load', () => {
  const rows = [];
  for (const fig of document.querySelectorAll('figure')) {
    const img = fig.querySelector('img');
    const c = document.createElement('canvas');
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    let ink = 0;
    if (img.complete && img.naturalWidth > 0) {
      const ctx = c.getContext('2d'); ctx.drawImage(img, 0, 0);
      const d = ctx.getImageData(0, 0, c.width, c.height).data;
      let n = 0; for (let i = 0; i < d.length; i += 4) if (Math.min(d[i], d[i+1], d[i+2]) < 230) n++;
      ink = n / (d.length / 4);
    }
    const r = img.getBoundingClientRect();
    rows.push(fig.id + ' ' + img.naturalWidth + ' ' + Math.round(r.width) + ' ' + ink.toFixed(4));
  }
  const pre = document.createElement('pre'); pre.id = 'probe';
  pre.textContent = rows.join('\\n') + '\\nTEXT ' + document.body.innerText.replace(/\\s+/g, ' ');
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_html_renders_in_a_real_browser(violation, tmp_path):
    exe = _chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI; .ci/run installs it with apt-get")
        pytest.skip("chromium is not installed (apt-get install chromium); CI installs it and runs this test")
    page = violation.to_html().replace("</body>", PROBE + "</body>")
    path = tmp_path / "report.html"
    path.write_text(page)
    cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,900",
           "--virtual-time-budget=10000", "--dump-dom", path.as_uri()]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    m = re.search(r"<pre id=\"probe\">(.*?)</pre>", run.stdout, re.S)
    assert m, "the browser did not run the probe: " + run.stdout[:500]
    lines = m.group(1).split("\n")
    text = lines[-1]
    assert text.startswith("TEXT ")
    import html as _html

    text = _html.unescape(text)
    # the banner: verdict word, sentence, and the numbers, as the browser shows them
    assert "VIOLATION" in text and violation.reason in text
    assert f"{violation.epsilon_claimed:.4g}" in text and f"{violation.epsilon_lower:.4g}" in text
    assert f"{violation.gap:.4g}" in text and "0.95 confidence" in text
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[:-1]}
    assert FIGURE_IDS <= set(rows)
    for fid, (natural, shown, ink) in rows.items():
        assert int(natural) > 100 and int(shown) > 100, fid  # decoded and laid out
        assert float(ink) > 0.01, fid  # not blank


@pytest.mark.parametrize("name,word", [("example-adac-ucb", "CONSISTENT"), ("example-mutant-no-forgetting", "VIOLATION")])
def test_committed_examples_open_with_the_verdict_and_every_figure(name, word):
    reports = Path(__file__).resolve().parent.parent / "reports"
    page = (reports / f"{name}.html").read_text()
    md = (reports / f"{name}.md").read_text()
    parsed = _parse(page)
    banner = page.split("</header>")[0]
    assert f">{word}: <code>" in banner and "claimed eps" in banner and "best lower bound" in banner and "gap" in banner
    assert md.splitlines()[2].startswith(f"**{word}**")  # the verdict is the Markdown's first sentence
    ids = set(re.findall(r"<figure id='([\w-]+)'", page))
    assert FIGURE_IDS | {"fig-horizon"} <= ids
    for img in parsed.imgs:
        assert _ink(img["src"].split("base64,", 1)[1]) > 0.01, img["alt"]
    assert "--horizons 12,24,48,96,192" in md  # the command that regenerates it
