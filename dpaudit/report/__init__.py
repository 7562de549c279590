"""Reviewer reports of ``dpaudit check policy``: a Markdown file and a self-contained HTML page.

One renderer for every protocol (table, view, interactive, local, joint, shuffle, the exact joint
enumeration, and an interrupted audit's partial findings). It reads only the typed findings
(:class:`dpaudit.runner.findings.Findings`, an :class:`dpaudit.api.Audit`, or their ``--json`` dict) and
builds the report as data: a verdict banner and a list of :class:`Section` objects made of a few kinds of
block (paragraph, table, figure, folded details, code). Two small writers turn that one list into
Markdown and into HTML, so both formats always say the same thing. The verdict banner gives the claimed
eps, the best lower bound and the part that gave it, the confidence, the gap, and in words what exceeded
what (:func:`exceeded`: a bound above the eps the claim allows, a ledger that implies 0.2-zCDP against a
0.1-zCDP claim).

Which module holds what (each imports only the modules listed before it):

* :mod:`~dpaudit.report.reading`: reading the findings: :func:`summary`, :func:`exceeded`, :func:`upper_sentences`,
  :func:`renyi_zero_notes`, the banner's numbers and the small formatting helpers;
* :mod:`~dpaudit.report.blocks`: the report as data: :class:`Para`, :class:`Table`, :class:`Figure`,
  :class:`Code`, :class:`Fold`, :class:`Sub`, :class:`Section` and the builders that turn values into them;
* :mod:`~dpaudit.report.plots`: every figure (its caption and its drawing, :func:`draw_figure`), the ROC
  summary (:func:`roc_summary`), the figure sizes (:data:`FONT_PT`, :data:`DPI`);
* :mod:`~dpaudit.report.contents`: the report's sections in order (:data:`SECTIONS`), :func:`sections` and
  :func:`figures`;
* :mod:`~dpaudit.report.markdown`: :func:`markdown_report`;
* :mod:`~dpaudit.report.html`: :func:`html_report`;
* :mod:`~dpaudit.report.writing`: :func:`check_report_path` and :func:`write_report` (the Markdown, the HTML
  page and the figures, written atomically as one set).

The public names are importable from ``dpaudit.report`` itself.
"""

from __future__ import annotations

from dpaudit.report.blocks import Figure
from dpaudit.report.contents import figures, sections
from dpaudit.report.html import html_report
from dpaudit.report.markdown import markdown_report
from dpaudit.report.plots import draw_figure, roc_summary
from dpaudit.report.reading import exceeded, renyi_zero_notes, summary, upper_sentences
from dpaudit.report.writing import check_report_path, write_report

# the other public names of the package's modules, importable from here too (re-exported
# explicitly, so that type checkers without implicit re-exports see them too)
from dpaudit.report.blocks import Box as Box, Code as Code, Fold as Fold, Para as Para, Section as Section, Sub as Sub
from dpaudit.report.blocks import Table as Table
from dpaudit.report.contents import SECTIONS as SECTIONS
from dpaudit.report.plots import DPI as DPI, FIG_WIDTH as FIG_WIDTH, FONT_PT as FONT_PT, ROC_FPRS as ROC_FPRS
from dpaudit.report.plots import WIDE_WIDTH as WIDE_WIDTH

__all__ = ["markdown_report", "html_report", "write_report", "check_report_path", "figures", "summary",
           "sections", "renyi_zero_notes", "exceeded", "upper_sentences", "roc_summary", "draw_figure", "Figure"]
