"""Render the committed example report in headless Chromium to the PNG the README shows.

The README's picture of a report is ``docs/img/report.png``: the top of ``reports/example-adac-ucb.html`` (its
verdict banner, the numbers, the first figures) as a browser draws it. Rerun after the example reports change
(``sh reports/examples.sh``):

    python docs/screenshot.py                       # writes docs/img/report.png
    python docs/screenshot.py --report reports/example-mutant-no-forgetting.html --out /tmp/violation.png
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "reports" / "example-adac-ucb.html"
OUT = ROOT / "docs" / "img" / "report.png"
#: the viewport: the report's banner with its numbers, what ran and the claim fit in it
WINDOW = "1100,1400"


def chromium() -> str:
    """The Chromium executable: /usr/bin/chromium, else the first ``chromium`` or ``chromium-browser`` on PATH."""
    for exe in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if exe and Path(exe).exists():
            return exe
    raise SystemExit("chromium is not installed (Debian: apt-get install chromium); it renders the report")


def screenshot(report: Path = REPORT, out: Path = OUT, window: str = WINDOW) -> Path:
    """Write a PNG of ``report`` as headless Chromium draws it in a ``window`` (width,height) viewport."""
    report, out = report.resolve(), out.resolve()
    if not report.is_file():
        raise SystemExit(f"the report {report} does not exist; `sh reports/examples.sh` writes the examples")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dpaudit-chromium-") as profile:
        argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                "--hide-scrollbars", f"--screenshot={out}", f"--window-size={window}", report.as_uri()]
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if proc.returncode != 0 or not out.is_file():
        raise SystemExit(f"chromium exited {proc.returncode} without writing {out}: {proc.stderr.strip()[-400:]}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", type=Path, default=REPORT, help="the HTML report to render")
    ap.add_argument("--out", type=Path, default=OUT, help="the PNG to write")
    ap.add_argument("--window", default=WINDOW, help="the viewport, WIDTH,HEIGHT in pixels")
    a = ap.parse_args(argv)
    print(screenshot(a.report, a.out, a.window))
    return 0


if __name__ == "__main__":
    sys.exit(main())
