"""The report as one self-contained HTML page (:func:`html_report`): the verdict banner, then every section's
blocks. The page has no JavaScript and no external file (figures are base64 PNG), shows values as plain text
(never JSON or Markdown markup), wraps long tokens so that it fits a normal window, and has a print style
sheet.
"""

from __future__ import annotations

import base64
import html
import re
from typing import Iterable, Mapping

from dpaudit.report.blocks import Block, Box, Code, Figure, Fold, Para, Sub, Table
from dpaudit.report.contents import sections
from dpaudit.report.plots import FIG_WIDTH, WIDE_WIDTH, png_base64
from dpaudit.report.reading import (FindingsLike, banner_numbers, cell, exceeded, findings_dict, rests_on,
                                    summary, upper_sentences)

_COLOURS = {"violation": "#b3261e", "consistent": "#1e7b34", "inconclusive": "#8a6100", "interrupted": "#555",
            "exact": "#1f4e99"}


_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:64em;margin:1.5em auto;padding:0 1em;
color:#1b1b1b;line-height:1.45;overflow-wrap:anywhere}
.banner{border-left:.6em solid var(--c);background:color-mix(in srgb,var(--c) 9%,white);padding:.8em 1.2em;
border-radius:.3em;margin-bottom:1.2em}
.banner h1{margin:0 0 .2em 0;font-size:1.5em;color:var(--c)}
.banner p.sentence{margin:.3em 0 .7em 0;font-size:1.05em}
.numbers{display:flex;flex-wrap:wrap;gap:.6em 2em;margin:0}
.numbers div{min-width:9em;max-width:100%}.numbers dt{font-size:.8em;color:#555;text-transform:uppercase;letter-spacing:.03em}
.numbers dd{margin:0}.numbers dd.value{font-size:1.35em;font-weight:600}.numbers dd.sub{font-size:.8em;color:#555}
section{margin-top:1.6em}
h2{border-bottom:1px solid #ddd;padding-bottom:.15em}
figure{margin:1em 0;break-inside:avoid;page-break-inside:avoid;min-width:0}
figure img{max-width:100%;height:auto;border:1px solid #ddd}
figure a.zoom{cursor:zoom-in}
figcaption{font-size:.9em;color:#444}
.figs{display:block}
ul.exceeded{margin:.2em 0 .7em 0;padding-left:1.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em;max-width:100%}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top;overflow-wrap:break-word}
th{background:#f2f2f2} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;overflow-wrap:anywhere}
pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap}
.note{background:#fff8e1;border-left:.3em solid #e0b000;padding:.4em .8em;margin:.4em 0}
div.note p{margin:.2em 0} div.note table{background:white}
.banner p.rests-on{margin:.2em 0 .7em 0}
details{margin:.8em 0} summary{cursor:pointer;font-weight:600}
@media print{body{max-width:none;margin:0;font-size:10pt}.banner,.note,th{-webkit-print-color-adjust:exact;
print-color-adjust:exact}details>summary{list-style:none}details::details-content{content-visibility:visible;
display:block}h2,h3{break-after:avoid}table,figure{break-inside:avoid}}
"""


def _inline(text: str) -> str:
    """Escape, then the paragraph markup: ``**bold**`` and ```code```."""
    t = html.escape(text, quote=False)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", t)


def _e(x: object) -> str:
    return html.escape(str(x))


def _breakable(text: str, run: int = 24) -> str:
    """Escaped text with a line-break opportunity (``<wbr>``) inside every token longer than ``run``
    characters (after punctuation, else every ``run`` characters), so that a table cell holding a path,
    a hash or compact JSON wraps instead of widening the page."""
    def cut(token: str) -> str:
        if len(token) <= run:
            return html.escape(token)
        pieces = re.findall(r"[^/_,.:;=)\]}-]*[/_,.:;=)\]}-]?", token)
        out = []
        for p in pieces:
            out += [p[i:i + run] for i in range(0, len(p), run)] or [p]
        return "<wbr>".join(html.escape(p) for p in out if p)

    return "".join(cut(t) for t in re.split(r"(\s+)", text))


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td class='num'>{_breakable(cell(c))}</td>" if i in t.num else
                                    f"<td>{_breakable(cell(c))}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in t.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _css_width(f: Figure) -> int:
    """The width the HTML page shows a figure at: 96 CSS px per inch of the figure (so its points are points)."""
    return round((WIDE_WIDTH if f.wide else FIG_WIDTH) * 96)


def _html_figure(f: Figure, pngs: Mapping[str, bytes] | None = None) -> str:
    data = base64.b64encode(pngs[f.id]).decode("ascii") if pngs and f.id in pngs else png_base64(f)
    return (f"<figure id='{_e(f.id)}'{' class=wide' if f.wide else ''}><img alt='{_e(f.title)}' "
            f"width='{_css_width(f)}' src='data:image/png;base64,{data}'><figcaption><b>{_e(f.title)}.</b> "
            f"{_e(f.caption)}</figcaption></figure>")


def _html_blocks(blocks: Iterable[Block], level: int, pngs: Mapping[str, bytes] | None = None) -> list[str]:
    out: list[str] = []
    figs: list[str] = []
    for b in list(blocks) + [None]:
        if isinstance(b, Figure):
            figs.append(_html_figure(b, pngs))
            continue
        if figs:  # consecutive figures share one grid
            out.append("<div class='figs'>" + "".join(figs) + "</div>")
            figs = []
        if isinstance(b, Para):
            out.append(f"<p class='note'>{_inline(b.text)}</p>" if b.note else f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Table):
            out.append(_html_table(b))
        elif isinstance(b, Box):
            out.append(f"<div class='note'><p>{_inline(b.text)}</p>" + "".join(_html_blocks(b.blocks, level, pngs))
                       + "</div>")
        elif isinstance(b, Code):
            out.append(f"<pre>{_e(b.text)}</pre>")
        elif isinstance(b, Fold):
            ident = f" id='{_e(b.id)}'" if b.id else ""
            out.append(f"<details{ident}><summary>{_e(b.summary)}</summary>"
                       + "".join(_html_blocks(b.blocks, level + 1, pngs)) + "</details>")
        elif isinstance(b, Sub):
            out.append(f"<h{level}>{_e(b.title)}</h{level}>" + "".join(_html_blocks(b.blocks, min(level + 1, 6), pngs)))
    return out


def html_report(out: FindingsLike, pngs: Mapping[str, bytes] | None = None) -> str:
    """A self-contained HTML page: verdict banner, sections with tables and figures; no JavaScript, no
    external file; long tokens wrap, so it fits a normal window; a print style sheet. ``pngs`` (figure id
    -> PNG bytes) reuses figures already drawn; the others are drawn here."""
    out = findings_dict(out)
    s = summary(out)
    colour = _COLOURS.get(out["verdict"], "#555")
    dl = "".join(f"<div><dt>{_e(k)}</dt><dd class='value' id='num-{_e(k.replace(' ', '-'))}'>{_e(v)}</dd>"
                 f"<dd class='sub'>{_e(sub)}</dd></div>" for k, v, sub in banner_numbers(s))
    page = [
        "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>dpaudit: {_e(s['word'])} - {_e(out['policy'])}</title><style>{_CSS}</style></head><body>",
        f"<header class='banner' id='verdict' style='--c:{colour}'>",
        f"<h1>{_e(s['word'])}: <code>{_e(out['policy'])}</code></h1>",
        f"<p class='sentence' id='verdict-sentence'>{_e(s['sentence'])}</p>",
    ]
    said = exceeded(out)
    if said:
        page.append("<ul class='exceeded' id='exceeded'>" + "".join(f"<li>{_e(x)}</li>" for x in said) + "</ul>")
    upper = upper_sentences(out, banner=True)
    if upper:
        page.append("<ul class='exceeded' id='upper'>" + "".join(f"<li>{_e(x)}</li>" for x in upper) + "</ul>")
    basis = rests_on(out)
    if basis:
        page.append(f"<p class='rests-on' id='rests-on'>{_e(basis)}</p>")
    page.append(f"<dl class='numbers'>{dl}</dl></header>")
    for sec in sections(out):
        page.append(f"<section id='{_e(sec.id)}'><h2>{_e(sec.title)}</h2>"
                    + "".join(_html_blocks(sec.blocks, 3, pngs)) + "</section>")
    page.append("</body></html>")
    return "\n".join(page)
