"""The report as Markdown: the verdict banner, then every section's blocks (:func:`markdown_report`)."""

from __future__ import annotations

from typing import Iterable, Mapping

from dpaudit.report.blocks import Block, Box, Code, Figure, Fold, Para, Sub, Table
from dpaudit.report.contents import sections
from dpaudit.report.reading import (FindingsLike, banner_numbers, cell, exceeded, findings_dict, rests_on, summary,
                                    upper_sentences)


def _md_cell(x: object) -> str:
    return cell(x).replace("|", "\\|").replace("\n", " ")


def _md_blocks(blocks: Iterable[Block], level: int, files: Mapping[str, str] | None = None) -> list[str]:
    lines: list[str] = []
    for b in blocks:
        if isinstance(b, Para):
            lines += [f"> {b.text}" if b.note else b.text, ""]
        elif isinstance(b, Table):
            lines += ["| " + " | ".join(_md_cell(h) for h in b.header) + " |",
                      "| " + " | ".join("---:" if i in b.num else "---" for i in range(len(b.header))) + " |"]
            lines += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in b.rows] + [""]
        elif isinstance(b, Figure):
            if files and b.id in files:
                lines += [f"![{b.title}]({files[b.id]})", "", f"*Figure: **{b.title}.** {b.caption}*", ""]
            else:
                lines += [f"> Figure (in the HTML page beside this file): **{b.title}.** {b.caption}", ""]
        elif isinstance(b, Box):
            inner = _md_blocks(b.blocks, level, files)
            lines += [f"> {b.text}", ">"] + [f"> {x}" if x else ">" for x in inner[:-1]] + [""]
        elif isinstance(b, Code):
            lines += ["```", b.text, "```", ""]
        elif isinstance(b, (Fold, Sub)):
            lines += ["#" * level + f" {b.summary if isinstance(b, Fold) else b.title}", ""]
            lines += _md_blocks(b.blocks, min(level + 1, 6), files)
    return lines


def markdown_report(out: FindingsLike, figure_files: Mapping[str, str] | None = None) -> str:
    """The report as Markdown, verdict first (the same sections as the HTML page). With ``figure_files``
    (figure id -> PNG file name beside the Markdown, as :func:`write_report` writes them) each figure is an
    image link with its caption; without, the figure is named and the HTML page shows it."""
    out = findings_dict(out)
    s = summary(out)
    lines = [f"# dpaudit check: `{out['policy']}`", "", f"**{s['word']}**: {s['sentence']}", ""]
    lines += ["| " + " | ".join(k for k, _, _ in banner_numbers(s)) + " |",
              "| " + " | ".join("---" for _ in banner_numbers(s)) + " |",
              "| " + " | ".join(_md_cell(f"{v} ({sub})" if sub else v) for _, v, sub in banner_numbers(s)) + " |", ""]
    said = exceeded(out) + upper_sentences(out, banner=True)
    lines += [f"- {x}" for x in said] + ([""] if said else [])
    basis = rests_on(out)
    if basis:
        lines += [basis, ""]
    for sec in sections(out):
        lines += [f"## {sec.title}", ""] + _md_blocks(sec.blocks, 3, figure_files)
    return "\n".join(lines).rstrip() + "\n"
