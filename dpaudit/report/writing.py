"""Writing a report: :func:`write_report` writes the Markdown, the HTML page and the Markdown's figures
(PNG files beside it, linked) atomically (all rendered, written to temporary files in the target folder,
then renamed), and :func:`check_report_path` lets a caller refuse an unwritable path before an audit starts.
"""

from __future__ import annotations

import os
import re
import tempfile
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from dpaudit.errors import DPAuditError, check_output_file, shorten
from dpaudit.report.blocks import Figure, walk_blocks
from dpaudit.report.contents import sections
from dpaudit.report.html import html_report
from dpaudit.report.markdown import markdown_report
from dpaudit.report.plots import png_bytes
from dpaudit.report.reading import findings_dict

def check_report_path(path: str | Path, flag: str = "--report") -> list[Path]:
    """Refuse a report path that is not ``*.md``, or that cannot be written (a folder, a folder that
    cannot be written, a name too long for the file system: :func:`dpaudit.errors.check_output_file`),
    before any work; return the two paths (Markdown, HTML) the report will have. ``flag`` names the
    argument in the sentence (``Audit.write`` says ``path``)."""
    if not isinstance(path, (str, os.PathLike)) or Path(path).suffix != ".md":
        shown = shorten(str(path) if isinstance(path, os.PathLike) else path, 160)
        raise DPAuditError(f"{flag} must name a Markdown file ending in .md, got {shown}.")
    path = Path(path)
    # the longest name a figure's PNG beside the Markdown gets (write_report), probed with the pair
    check_output_file(path.with_name(f"{path.stem}.fig-tradeoff.png"), "the report", flag)
    return [check_output_file(p, "the report", flag) for p in (path, path.with_suffix(".html"))]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_report(out: Any, path: str | Path, flag: str = "--report") -> list[Path]:
    """Write ``path`` (Markdown), the HTML page beside it and the Markdown's figures as PNG files beside
    both (``stem.fig-roc.png`` ..., linked from the Markdown), for any protocol's findings, as one set:
    everything is rendered first (each figure drawn once, for both formats), written to temporary files in
    the same folder, then renamed into place (no half-written report, no Markdown without its page or its
    figures). PNG files a previous report of the same name left and this one does not draw are removed.
    Returns the Markdown, the HTML and the PNG paths."""
    paths = check_report_path(path, flag)
    out = findings_dict(out)
    md_path = paths[0]
    drawn = {f.id: f for s in sections(out) for f in walk_blocks(s.blocks) if isinstance(f, Figure)}
    pngs = {fid: png_bytes(f) for fid, f in drawn.items()}
    names = {fid: f"{md_path.stem}.{fid}.png" for fid in drawn}
    targets: list[tuple[Path, bytes]] = [(md_path, markdown_report(out, names).encode("utf-8")),
                                         (paths[1], html_report(out, pngs).encode("utf-8"))]
    targets += [(md_path.parent / names[fid], data) for fid, data in pngs.items()]
    temps: list[str] = []
    try:
        for p, data in targets:
            fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
            temps.append(tmp)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; a report is an ordinary file
        for tmp, (p, _) in zip(temps, targets):
            os.replace(tmp, p)
    except OSError as exc:
        raise DPAuditError(f"cannot write the report to {str(paths[0])!r}: {exc.strerror or exc}.") from None
    finally:
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
    keep = {p.name for p, _ in targets}
    for old in md_path.parent.glob(f"{glob_escape(md_path.stem)}.fig-*.png"):
        if old.name not in keep and re.fullmatch(re.escape(md_path.stem) + r"\.fig-[a-z-]+\.png", old.name):
            try:
                old.unlink()
            except OSError:
                pass
    return [p for p, _ in targets]
