"""Reviewer reports, for every protocol: verdict first, real HTML (tables, figures that decode), captions
that describe only what ran, a page that fits a 1200 px window in a real browser (Debian's headless
Chromium) with figures legible at that width, Markdown, HTML and the Markdown's PNG figures written
atomically as one set, and the --report path checked up front. The ROC curve of the threshold tests (its
AUC and TPR at small FPR exactly from the binned scores) is in tests/test_report_roc.py."""

from __future__ import annotations

import base64
import html as _html
import io
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import dpaudit
from dpaudit.api import AuditInterrupted
from dpaudit.report import figures, html_report, markdown_report, sections, write_report

HERE = Path(__file__).resolve().parent
REPORTS = HERE.parent / "reports"
FIGURE_IDS = {"fig-bounds", "fig-profile", "fig-renyi", "fig-tradeoff", "fig-ledger", "fig-roc", "fig-scores"}


@pytest.fixture(scope="module")
def violation():
    # the first episode is released without noise: a clear violation, with a ledger (both attacks)
    return dpaudit.audit("mutant-first-unnoised", params={"n_arms": 2}, horizon=6, runs=1500, workers=1, seed=0)


def _interrupted():
    """An audit interrupted after the neighbouring-pair search (as Ctrl-C leaves it): partial findings."""
    import dpaudit.attacks.neighbours as nb

    def boom(*a, **k):
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nb, "evaluate", boom)
        mp.setattr(nb, "likelihood_attack", boom)  # (the fresh tests after the search: likelihood, then membership)
        with pytest.raises(AuditInterrupted) as info:
            dpaudit.audit("adac-ucb", params={"n_arms": 3}, runs=500, horizon=12, workers=1)
    return info.value.audit


#: one small audit per protocol (a few seconds in all), each rendered by the one report renderer
AUDITS = {
    "local": lambda: dpaudit.audit("ldp-ucb-rr", protocol="local", horizon=8, runs=1000, workers=1),
    "local-bco": lambda: dpaudit.audit("ldp-bco-fkm", protocol="local", horizon=16, runs=1000, workers=1),
    # seed 1: a consistent example to render (at 1,000 runs this small joint audit is inconclusive at some seeds,
    # seed 0 among them; its rates over 50 seeds: benchmarks/results/controls-joint.md)
    "joint": lambda: dpaudit.audit("jdp-glm", params={"n_arms": 2, "dim": 2}, protocol="joint", horizon=8, runs=1000,
                                   workers=1, seed=1),
    "shuffle": lambda: dpaudit.audit("shuffle-glm", params={"n_arms": 2, "dim": 1}, protocol="shuffle", runs=1000,
                                     workers=1),
    "exact-joint": lambda: dpaudit.audit("jdp-finite-rr-uneven", protocol="joint"),
    "interrupted": _interrupted,
}
WORDS = {"local": "CONSISTENT", "local-bco": "CONSISTENT", "joint": "CONSISTENT", "shuffle": "CONSISTENT",
         "exact-joint": "VIOLATION", "interrupted": "INTERRUPTED"}


@pytest.fixture(scope="module")
def audits():
    return {name: make() for name, make in AUDITS.items()}


@pytest.fixture(scope="module")
def written(audits, tmp_path_factory):
    """Each protocol's report, written once as a pair (the browser and caption tests read these files)."""
    folder = tmp_path_factory.mktemp("reports")
    return {name: write_report(a, folder / name / "report.md") for name, a in audits.items()}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.imgs: list[dict[str, str]] = []
        self.tags: list[str] = []
        self.captions: dict[str, str] = {}
        self._figure: str | None = None
        self._in_caption = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a)
        elif tag == "figure":
            self._figure = a.get("id")
            self.captions[self._figure] = ""
        elif tag == "figcaption":
            self._in_caption = True

    def handle_endtag(self, tag):
        if tag == "figcaption":
            self._in_caption = False

    def handle_data(self, data):
        self.parts.append(data)
        if self._in_caption and self._figure is not None:
            self.captions[self._figure] += data

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.parts).split())


def _parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    return p


def _decode(img: dict[str, str]) -> np.ndarray:
    """The PNG of an <img> decoded by Pillow (fails if it is not a PNG that decodes)."""
    from PIL import Image

    src = img["src"]
    assert src.startswith("data:image/png;base64,"), src[:40]
    with Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))) as im:
        assert im.format == "PNG"
        return np.asarray(im.convert("RGB"))


def _ink(pixels: np.ndarray) -> float:
    """Fraction of pixels that are not (near) white."""
    return float(np.mean(pixels.min(axis=-1) < 230))


# ---- Markdown and HTML, central ----------------------------------------------------------------

def test_markdown_opens_with_the_verdict_and_numbers(violation):
    md = markdown_report(violation)
    head = md.split("## What ran")[0]
    assert md.splitlines()[2].startswith("**VIOLATION**") and violation.reason in head
    assert f"{violation.epsilon_claimed:.4g}" in head and f"{violation.epsilon_lower:.4g}" in head
    # a violation says by how much the bound exceeds the claim, never a negative gap
    assert violation.gap < 0 and "| exceeds the claim by |" in head and f"{-violation.gap:.4g}" in head
    assert f"{violation.gap:.4g}" not in md and "| seed | 0 |" in md and "## Verdict" in md


@pytest.mark.slow
def test_html_is_real_html_with_every_figure_and_no_scripts(violation):
    page = violation.to_html()
    assert page.startswith("<!DOCTYPE html>") and page.count("<pre>") == 1  # only the command line
    assert "**" not in page and "| --- |" not in page  # no Markdown source
    parsed = _parse(page)
    assert "script" not in parsed.tags and "link" not in parsed.tags
    assert not re.search(r"(src|href)=['\"](?!data:|#)", page)  # no external file
    assert parsed.tags.index("header") < parsed.tags.index("table") < parsed.tags.index("img")  # banner first
    assert "details" in parsed.tags  # the search, collapsed
    ids = set(parsed.captions)
    assert FIGURE_IDS <= ids and len(parsed.imgs) == len(ids)
    for img in parsed.imgs:
        assert _ink(_decode(img)) > 0.01, img["alt"]  # drawn, not blank
    assert "@media print" in page


def test_renyi_zero_bound_is_explained():
    from dpaudit.report import renyi_zero_notes

    out = {"attacks": [{"attack": "likelihood", "details": {"renyi": {
        "orders": [2.0, 32.0], "estimate": [0.3, 4.2], "lower": [0.1, 0.0]}}}]}
    notes = renyi_zero_notes(out)
    assert len(notes) == 1 and "32" in notes[0] and "heavy tail" in notes[0] and "4.2" in notes[0]
    out["attacks"][0]["details"]["renyi"]["lower"] = [0.1, 0.5]
    assert renyi_zero_notes(out) == []


def test_a_findings_dict_from_json_renders_the_same_report(violation):
    """--json output (json.load of it) and the Audit give the same report."""
    loaded = json.loads(violation.to_json())
    assert markdown_report(loaded) == markdown_report(violation)
    from dpaudit.runner.findings import Findings

    assert markdown_report(Findings.from_dict(loaded)) == markdown_report(violation)


# ---- atomic pairs -------------------------------------------------------------------------------

def _files(a, stem: str = "report") -> list[str]:
    """The files a written report of ``a`` consists of: the Markdown, the HTML page, a PNG per figure."""
    return sorted([f"{stem}.md", f"{stem}.html"] + [f"{stem}.{f['id']}.png" for f in figures(a, draw=False)])


def _md_written(a, stem: str = "report") -> str:
    """The Markdown as written beside its PNG figures."""
    return markdown_report(a, {f["id"]: f"{stem}.{f['id']}.png" for f in figures(a, draw=False)})


@pytest.mark.slow
def test_pair_is_written_atomically_and_bad_paths_fail_first(violation, tmp_path, monkeypatch):
    md = tmp_path / "sub" / "r.md"
    paths = violation.write(md)
    assert paths[:2] == [md, md.with_suffix(".html")] and all(p.suffix == ".png" for p in paths[2:])
    assert md.read_text() == _md_written(violation, "r") and paths[1].read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in md.parent.iterdir()) == _files(violation, "r")  # no temporary left behind
    # a disk that fills while the second file is written leaves the previous pair untouched
    import dpaudit.report as rep

    before = md.read_text()
    _fail_second_file(monkeypatch)
    with pytest.raises(dpaudit.DPAuditError, match="No space left"):
        write_report(violation, md)
    monkeypatch.undo()
    assert md.read_text() == before and sorted(p.name for p in md.parent.iterdir()) == _files(violation, "r")
    with pytest.raises(dpaudit.DPAuditError, match="ending in .md"):
        rep.check_report_path(tmp_path / "r.txt")


def _fail_second_file(monkeypatch):
    import dpaudit.report.writing as rep

    real_fdopen, calls = os.fdopen, []

    def failing_fdopen(fd, *a, **k):
        calls.append(fd)
        if len(calls) == 2:
            os.close(fd)
            raise OSError(28, "No space left on device")
        return real_fdopen(fd, *a, **k)

    monkeypatch.setattr(rep.os, "fdopen", failing_fdopen)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(AUDITS))
def test_every_protocol_writes_its_report_as_an_atomic_pair(name, audits, written, tmp_path, monkeypatch):
    md, page = written[name][:2]
    assert md.read_text() == _md_written(audits[name]) and page.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in md.parent.iterdir()) == _files(audits[name])
    # the second file fails: neither is written (a Markdown file never appears without its page)
    _fail_second_file(monkeypatch)
    with pytest.raises(dpaudit.DPAuditError, match="No space left"):
        write_report(audits[name], tmp_path / "r.md")
    assert list(tmp_path.iterdir()) == []


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


# ---- every protocol: the same sections, true captions ---------------------------------------------

#: words a caption may use only when the findings hold an attack, bound or part of that name
ATTACK_WORDS = ("likelihood", "membership", "tree-releases", "channel", "transcript", "central view", "shuffled",
                "enumeration")


def _ran(a) -> str:
    d = a.to_dict()
    names = [x["attack"] for x in d["attacks"] + d["beside"]] + [e["part"] for e in d["exact"]]
    return " ".join(names + [p["name"] for p in d["parts"]]).lower()


def _measured_renyi(a) -> bool:
    return any("renyi" in (x.details or {}) for x in a.attacks) or any("renyi" in (e.details or {}) for e in a.exact)


def _assert_captions_describe_what_ran(a, page: str) -> None:
    ran = _ran(a)
    captions = _parse(page).captions
    assert captions, "no figure"
    for fid, caption in captions.items():
        low = caption.lower()
        for word in ATTACK_WORDS:
            assert word not in low or word in ran, f"{fid} names {word!r}, which did not run: {caption}"
        if "rényi" in low or "d_alpha" in low:
            assert _measured_renyi(a), f"{fid} shows a Rényi divergence nothing measured"
    if "fig-renyi" in captions:
        assert _measured_renyi(a)
    for f in figures(a, draw=False):  # what each figure says it draws ran
        assert all(x.lower() in ran for x in f["shows"]), (f["id"], f["shows"])
    led = a.ledger or {}
    if led.get("tree"):
        cap = captions["fig-ledger"].lower()
        assert "used twice" not in cap and "dashed" not in cap and "by design" in cap and "not reuse" in cap


@pytest.mark.slow
@pytest.mark.parametrize("name", list(AUDITS))
def test_captions_describe_only_what_ran(name, audits, written):
    a = audits[name]
    page = written[name][1].read_text()
    if name == "interrupted":  # only the ledger finished: its figure alone
        assert set(_parse(page).captions) == {"fig-ledger"}
        return
    _assert_captions_describe_what_ran(a, page)
    low = page.lower()
    if name in ("local-bco", "exact-joint"):  # no likelihood attack ran in these (joint and shuffle have gray boxes)
        assert "likelihood" not in " ".join(_parse(page).captions.values()).lower()
        assert "fig-renyi" not in low or name == "exact-joint"  # the enumeration's exact D_alpha only
    if name == "joint":  # the joint gray-box part, by its own name (not the central likelihood attack)
        caps = " ".join(_parse(page).captions.values()).lower()
        assert "'tree-likelihood'" in caps and caps.count("likelihood") == caps.count("tree-likelihood")


@pytest.mark.slow
def test_central_captions_on_a_joint_audit_fail_the_check(audits):
    """The check above is not vacuous: the captions a central report draws, put on a joint audit (a Rényi panel
    and a likelihood attack that never ran, a 'used twice' alarm on the tree ledger) fail it."""
    old = ("<figure id='fig-renyi'><figcaption>The claim's Rényi curve against the likelihood attack's D_alpha: "
           "lower bounds (bars) with whiskers up to the estimates (circles).</figcaption></figure>"
           "<figure id='fig-ledger'><figcaption>How many noisy releases each round's data fed (per-round accounting). "
           "Above the dashed line a round was used twice, and its guarantees compose.</figcaption></figure>")
    with pytest.raises(AssertionError):
        _assert_captions_describe_what_ran(audits["joint"], old)


@pytest.mark.slow
def test_sections_are_the_same_data_for_every_protocol(audits):
    for name, a in audits.items():
        titles = [s.title for s in sections(a)]
        assert titles[0] == "What ran" and titles[1] == "The claim" and titles[-2:] == ["How to reproduce", "Verdict"]
        assert any(t.startswith("Ledger") for t in titles), name
    local = markdown_report(audits["local"])
    assert "## Ledger: per user" in local and "finite channel (exact)" in local
    assert "### Central sub-audit" in local and "Calibration" not in local  # no lint fired: an empty list
    bco = markdown_report(audits["local-bco"])
    assert "### Calibration lints of the channel" in bco and "action space" in bco
    joint = markdown_report(audits["joint"])
    assert "## Ledger: per round, a tree" in joint and "## Bounds beside the verdict (not judged)" in joint
    assert "### central view (beside the verdict)" in joint and "### tree-releases" in joint
    beside = joint.split("## Bounds beside the verdict")[1].split("\n## ")[0]
    assert "do **not** enter the verdict" in beside
    exact = markdown_report(audits["exact-joint"])
    assert "### Exact enumeration by view (history, data, central)" in exact
    assert "| field | history | data | central |" in exact
    assert "## Lower bounds of the verdict" not in exact  # nothing sampled
    part = markdown_report(audits["interrupted"])
    assert "INTERRUPTED (no verdict)" in part and "## Neighbouring-pair search" in part
    assert "finished before the interruption" in part
    for md in (local, bco, joint, exact, part):
        prose = "".join(md.split("```")[::2])  # outside the command line (a Python call's is Python)
        assert "{'" not in prose and "'}" not in prose  # no Python dict: versions and parameters are tables
        assert "| package | version |" in md


@pytest.mark.slow
def test_every_protocols_report_is_plain_readable_text(audits, violation):
    """No Python float repr, no None, no part labelled consistent with a bound of 0, in any protocol's report;
    the banner says what a consistent verdict rests on exactly when a part of the verdict showed nothing."""
    for name, a in {**audits, "central": violation}.items():
        md = markdown_report(a)
        prose = "".join(md.split("```")[::2])
        assert not re.search(r"\d\.\d{10,}", prose), (name, re.search(r".{60}\d\.\d{10,}.{20}", prose))
        assert not re.search(r"\bNone\b", prose), name
        assert "consistent, eps >= 0 " not in prose and "consistent, eps >= 0|" not in prose
        d = a.to_dict()
        bound_parts = [p["name"] for p in d["parts"] if p["kind"] == "bound"]
        blind = [p for p in bound_parts
                 if all(x["epsilon_lower"] <= 0 for x in d["attacks"] if x["attack"] == p or x["attack"].startswith(p + " "))]
        head = md.split("## What ran")[0]
        assert ("rests on" in head) == (a.verdict == "consistent" and bool(blind)), name


def test_a_central_audit_times_its_setup_parts_and_counts_its_pairs_once(violation):
    assert violation.parts and all(p.seconds > 0 for p in violation.parts), violation.parts
    rows = violation.extra["search"]
    pilot = sum(1 for r in rows if r["stage"] == "pilot")
    assert violation.power.pairs_tried == (pilot or len(rows))
    md = markdown_report(violation)
    assert f"{violation.power.pairs_tried} neighbouring pairs tried" in md
    assert f"{violation.power.pairs_tried} candidate pairs" in md.split("## Neighbouring-pair search")[1]


# ---- a real browser -----------------------------------------------------------------------------

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]

# Test-only probe, added to a copy of the page: the report itself has no JavaScript. It reports what the
# browser laid out: the page's width against the window's, the banner's text, the tables, each image's
# decoded size and drawn ink (read back through a canvas), and the visible text.
PROBE = """<script>
window.addEventListener('load', () => {
  const de = document.documentElement;
  const imgs = [];
  for (const img of document.images) {
    let ink = 0;
    if (img.complete && img.naturalWidth > 0) {
      const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
      const ctx = c.getContext('2d'); ctx.drawImage(img, 0, 0);
      const d = ctx.getImageData(0, 0, c.width, c.height).data;
      let n = 0; for (let i = 0; i < d.length; i += 4) if (Math.min(d[i], d[i+1], d[i+2]) < 230) n++;
      ink = n / (d.length / 4);
    }
    imgs.push({id: (img.closest('figure') || {}).id || '', natural: img.naturalWidth,
               shown: Math.round(img.getBoundingClientRect().width), ink: ink,
               css: parseInt(img.getAttribute('width') || '0')});
  }
  const banner = document.querySelector('header.banner');
  const out = {scrollWidth: de.scrollWidth, clientWidth: de.clientWidth,
               banner: banner ? banner.innerText.replace(/\\s+/g, ' ') : '',
               tables: document.querySelectorAll('table').length,
               cells: document.querySelectorAll('table td').length, imgs: imgs,
               text: document.body.innerText.replace(/\\s+/g, ' ')};
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI; .ci/run installs it with apt-get")
        pytest.skip("chromium is not installed (apt-get install chromium); CI installs it and runs this test")
    return exe


def _in_browser(pages: dict[str, str], folder: Path, width: int = 1200) -> dict[str, dict]:
    """Each page (with the probe) laid out by headless Chromium in a ``width`` x 900 window, two at a time."""
    exe = _chromium()
    results, running = {}, []
    names = list(pages)
    while names or running:
        while names and len(running) < 2:
            name = names.pop(0)
            path = folder / f"{name}.html"
            path.write_text(pages[name].replace("</body>", PROBE + "</body>"))
            cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={folder / ('profile-' + name)}",
                   f"--window-size={width},900", "--virtual-time-budget=10000", "--dump-dom", path.as_uri()]
            running.append((name, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        name, proc = running.pop(0)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        m = re.search(r"<pre id=\"probe\">(.*?)</pre>", out, re.S)
        assert m, f"the browser did not run the probe on {name}: " + out[:500]
        results[name] = json.loads(_html.unescape(m.group(1)))
    return results


def _layout_problems(r: dict) -> list[str]:
    """What a reader would see wrong: a page wider than the window, no banner, no real table, a broken image."""
    problems = []
    if r["scrollWidth"] > r["clientWidth"]:
        problems.append(f"the page is {r['scrollWidth']} px wide in a {r['clientWidth']} px window (scrolls sideways)")
    if not r["banner"]:
        problems.append("no verdict banner")
    if r["tables"] == 0 or r["cells"] == 0:
        problems.append("no table")
    for img in r["imgs"]:
        if img["natural"] <= 100 or img["shown"] <= 100 or img["ink"] <= 0.01:
            problems.append(f"image {img['id']} did not render ({img})")
    return problems


@pytest.mark.tooling
def test_every_protocols_report_renders_in_a_real_browser(audits, written, violation, tmp_path):
    pages = {name: paths[1].read_text() for name, paths in written.items()}
    pages["central"] = violation.to_html()
    # the negative control: a local report page that is Markdown in <pre> (no verdict banner, no table), which a
    # user measured at 2,145 px wide
    pages["control"] = (HERE / "data" / "report_markdown_in_pre_local_bco.html").read_text()
    seen = _in_browser(pages, tmp_path)
    control = _layout_problems(seen.pop("control"))
    assert any("scrolls sideways" in p for p in control) and "no verdict banner" in control and "no table" in control
    for name, r in seen.items():
        assert _layout_problems(r) == [], name
        a = violation if name == "central" else audits[name]
        word = "VIOLATION" if name == "central" else WORDS[name]
        assert r["banner"].startswith(word), (name, r["banner"][:80])
        assert a.reason in r["banner"] and "CLAIMED EPS" in r["banner"].upper()
        assert f"{a.epsilon_claimed:.4g}" in r["banner"]
        if a.epsilon_lower is not None:
            assert f"{a.epsilon_lower:.4g}" in r["banner"] and "CONFIDENCE" in r["banner"].upper()
        if a.gap is not None:
            shown = f"{a.gap:.4g}" if a.gap >= 0 else f"{-a.gap:.4g}"
            assert shown in r["banner"] and ("EXCEEDS THE CLAIM BY" in r["banner"].upper()) == (a.gap < 0)
        # every image decodes in Python too, at the size the browser reported
        parsed = _parse(pages[name])
        assert [_decode(img).shape[1] for img in parsed.imgs] == [img["natural"] for img in r["imgs"]], name
        # legible at page width: every figure is shown at its full CSS width (96 px per inch of the figure, so
        # its FONT_PT-point text is that size on the page), never scaled down in a 1200 px window
        for img in r["imgs"]:
            assert img["css"] > 0 and img["shown"] >= img["css"] - 1, (name, img)
        assert "Verdict" in r["text"] and "How to reproduce" in r["text"] and "package version" in r["text"]
    assert {i["id"] for i in seen["central"]["imgs"]} >= FIGURE_IDS
    assert "0.95" in seen["central"]["banner"] and "mutant-first-unnoised" in seen["central"]["banner"]


@pytest.mark.slow
def test_long_tokens_wrap_instead_of_widening_the_page(violation, tmp_path):
    """A plug-in path, a hash and a label with no space (as users' plug-ins give) still fit 1200 px."""
    d = violation.to_dict()
    long = "/home/someone/" + "very_long_directory_name/" * 12 + "plugin_policy.py:MyPolicy"
    d["policy"] = long
    d["params"] = {"path": long, "digest": "f" * 128}
    d["witness"] = {**d["witness"], "label": "x" * 400}
    d["notes"] = ["y" * 500]
    seen = _in_browser({"long": html_report(d)}, tmp_path)
    assert _layout_problems(seen["long"]) == []


# ---- committed examples -------------------------------------------------------------------------

#: the committed example reports: verdict word and figures each must show (regenerated by the command in each)
ROC = {"fig-roc", "fig-scores"}
EXAMPLES = {
    "example-adac-ucb": ("CONSISTENT", FIGURE_IDS | {"fig-horizon"}),
    "example-mutant-no-forgetting": ("VIOLATION", FIGURE_IDS | {"fig-horizon"}),
    "example-mutant-se-shared-noise": ("VIOLATION", {"fig-bounds", "fig-profile", "fig-tradeoff"} | ROC),
    "example-local-ldp-ucb-rr": ("CONSISTENT", {"fig-bounds", "fig-profile", "fig-renyi", "fig-tradeoff"} | ROC),
    "example-local-ldp-bco-fkm": ("CONSISTENT", {"fig-bounds", "fig-profile", "fig-tradeoff"} | ROC),
    "example-joint-jdp-glm": ("CONSISTENT", {"fig-bounds", "fig-profile", "fig-tradeoff", "fig-ledger", "fig-renyi"}
                              | ROC | {"fig-roc-beside", "fig-scores-beside"}),  # the tree likelihood's Rényi bounds
    "example-shuffle-glm": ("CONSISTENT", {"fig-bounds", "fig-profile", "fig-tradeoff"} | ROC),
}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_committed_examples_open_with_the_verdict_and_every_figure(name):
    word, figs = EXAMPLES[name]
    page = (REPORTS / f"{name}.html").read_text()
    md = (REPORTS / f"{name}.md").read_text()
    parsed = _parse(page)
    banner = page.split("</header>")[0]
    assert f">{word}: <code>" in banner and "claimed eps" in banner and "best lower bound" in banner and "gap" in banner
    assert md.splitlines()[2].startswith(f"**{word}**")  # the verdict is the Markdown's first sentence
    assert set(parsed.captions) == figs
    for img in parsed.imgs:
        assert _ink(_decode(img)) > 0.01, img["alt"]
    for fid in figs:  # the Markdown's figures: PNG files beside it, linked
        assert (REPORTS / f"{name}.{fid}.png").read_bytes()[:4] == b"\x89PNG" and f"]({name}.{fid}.png)" in md
    assert "**" not in page and "{&quot;" not in page and '{"' not in page.split("<pre>")[0]
    command = md.split("## How to reproduce")[1].split("```")[1]
    assert command.strip().startswith("dpaudit check policy") and f"--report reports/{name}.md" in command
    if name in ("example-adac-ucb", "example-mutant-no-forgetting"):
        assert "--horizons 12,24,48,96,192" in command
