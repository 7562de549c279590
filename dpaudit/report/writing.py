"""Writing a report: :func:`write_report` writes the Markdown, the HTML page and the Markdown's figures
(PNG files beside it, linked) atomically as one set (all rendered, written to temporary files in the target
folder, every target checked, then renamed; a rename that fails puts back every file already replaced, so
the set is all new or all as it was), and :func:`check_report_path` lets a caller refuse, before an audit
starts, any path of the set that cannot be written (the Markdown, the page, every figure a report can have).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from glob import escape as glob_escape
from pathlib import Path

from dpaudit.errors import DPAuditError, check_output_file, shorten
from dpaudit.report.blocks import Figure, walk_blocks
from dpaudit.report.contents import sections
from dpaudit.report.html import html_report
from dpaudit.report.markdown import markdown_report
from dpaudit.report.plots import FIGURE_IDS, png_bytes
from dpaudit.report.reading import FindingsLike, findings_dict

def figure_path(md: Path, fid: str) -> Path:
    """Where the Markdown ``md``'s figure ``fid`` goes: ``stem.fig-roc.png`` beside it."""
    return md.with_name(f"{md.stem}.{fid}.png")


def check_report_path(path: str | Path, flag: str = "--report") -> list[Path]:
    """Refuse a report path that is not ``*.md``, or any path of its set that cannot be written (the
    Markdown, the HTML page, and the PNG of every figure a report can have: a folder in the way, a file that
    cannot be replaced, a folder that cannot be written, a name too long for the file system:
    :func:`dpaudit.errors.check_output_file`), before any work; return the two paths (Markdown, HTML) the
    report will have. ``flag`` names the argument in the sentence (``Audit.write`` says ``path``)."""
    if not isinstance(path, (str, os.PathLike)) or Path(path).suffix != ".md":
        shown = shorten(str(path) if isinstance(path, os.PathLike) else path, 160)
        raise DPAuditError(f"{flag} must name a Markdown file ending in .md, got {shown}.")
    path = Path(path)
    for fid in FIGURE_IDS:  # which figures a report draws is known only after the audit: check them all
        check_output_file(figure_path(path, fid), "the report", flag)
    return [check_output_file(p, "the report", flag) for p in (path, path.with_suffix(".html"))]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _backup(p: Path) -> str | None:
    """A hard link (else a copy) of the file ``p`` beside it, to put back if the set fails; None when ``p``
    does not exist."""
    if not os.path.lexists(p):
        return None
    fd, bak = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".bak", dir=p.parent)
    os.close(fd)
    os.unlink(bak)
    try:
        os.link(p, bak)
    except OSError:
        shutil.copy2(p, bak)
    return bak


def _restore(backups: dict[Path, str | None]) -> None:
    """Put every replaced target back as it was (a new file that had no predecessor is removed)."""
    for p, bak in backups.items():
        try:
            if bak is None:
                if os.path.lexists(p):
                    os.unlink(p)
            else:
                os.replace(bak, p)
        except OSError:
            pass


def write_report(out: FindingsLike, path: str | Path, flag: str = "--report") -> list[Path]:
    """Write ``path`` (Markdown), the HTML page beside it and the Markdown's figures as PNG files beside
    both (``stem.fig-roc.png`` ..., linked from the Markdown), for any protocol's findings, as one set:
    everything is rendered first (each figure drawn once, for both formats), written to temporary files in
    the same folder, then renamed into place; a rename that fails (a folder where a figure must go) puts
    back every file already replaced, so no half-written report, no Markdown without its page or its figures,
    and no new page beside an old Markdown. PNG files a previous report of the same name left and this one
    does not draw are removed.
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
    for p, _ in targets:  # every target, again at the end of the audit: a folder in the way fails the set now
        if p.is_dir():
            raise DPAuditError(f"cannot write the report to {str(paths[0])!r}: {str(p)!r} is a folder; nothing of the "
                               "report was written.")
    temps: list[str] = []
    backups: dict[Path, str | None] = {}  # each target replaced so far, and the copy of what it held
    try:
        for p, data in targets:
            fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
            temps.append(tmp)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; a report is an ordinary file
        for tmp, (p, _) in zip(temps, targets):
            backups[p] = _backup(p)
            os.replace(tmp, p)
    except OSError as exc:
        _restore(backups)
        raise DPAuditError(f"cannot write the report to {str(paths[0])!r}: {exc.strerror or exc}; nothing of the "
                           "report was written.") from None
    finally:
        for tmp in temps + [b for b in backups.values() if b]:
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
