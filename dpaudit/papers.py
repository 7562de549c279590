"""The papers dpaudit implements and audits, with their full references.

The code, its docstrings and everything a user reads name a paper by its authors and year, "Azize &
Basu (2023a)" in running text and "(Azize & Basu 2023a, Alg. 4)" in parentheses, with the title at
its first mention in a module. This module is the anchor for the full references:

* :data:`PAPERS`: a readable slug (``"azize-basu-2023a"``) -> :class:`Paper`;
* :func:`mentioned`: the papers a text cites by authors and year;
* :func:`references`: the full reference lines (authors, title, year) of the papers a text cites.

The interactive joint/local DP definitions are a definitions section without a title or authors:
they are named by what they define, and their reference says whose definitions they follow
(:data:`RELATED`).

A leaf module: it imports nothing from dpaudit, so every layer may use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

__all__ = ["Paper", "PAPERS", "RELATED", "mentioned", "references"]


@dataclass(frozen=True)
class Paper:
    """One paper: who wrote it, its title and year, and the short form a citation uses.

    ``short`` and ``year_tag`` make the citation: "Azize & Basu (2023a)" in running text,
    "Azize & Basu 2023a" inside parentheses (:attr:`label`). A paper without known authors (the
    interactive joint/local DP definitions) has an empty ``year_tag`` and a descriptive ``short``.
    """

    key: str
    short: str  # "Azize & Basu", "Zheng et al.", or a description when no authors are known
    year_tag: str  # "2023a": the year, with a letter when one author list has two papers that year
    authors: str  # the full author list; "" when unknown
    title: str
    year: int | None
    venue: str = ""  # "NeurIPS 2020", "arXiv:2309.00557", ...
    note: str = ""  # what a reference line adds (for the definitions: whose definitions they follow)

    @property
    def label(self) -> str:
        """The citation inside parentheses: "Azize & Basu 2023a"."""
        return f"{self.short} {self.year_tag}" if self.year_tag else self.short

    @property
    def narrative(self) -> str:
        """The citation in running text: "Azize & Basu (2023a)"."""
        return f"{self.short} ({self.year_tag})" if self.year_tag else self.short

    @property
    def possessive(self) -> str:
        """The possessive citation in running text: "Azize & Basu's (2023a)"."""
        own = self.short + ("'" if self.short.endswith("s") else "'s")
        return f"{own} ({self.year_tag})" if self.year_tag else own

    @property
    def reference(self) -> str:
        """The full reference line: authors (year). "Title". Venue. Note."""
        if self.authors:
            head = f"{self.authors} ({self.year_tag or self.year}). \"{self.title}\"."
        else:
            head = f"{self.title[:1].upper()}{self.title[1:]}."
        tail = "".join(f" {part}." for part in (self.venue, self.note) if part)
        return head + tail


#: Works the interactive joint/local DP definitions follow (they are cited there, not implemented from).
RELATED: Mapping[str, Paper] = MappingProxyType({
    "shariff-sheffet-2018": Paper(
        "shariff-sheffet-2018", "Shariff & Sheffet", "2018", "Shariff & Sheffet",
        "Differentially Private Contextual Linear Bandits", 2018, "NeurIPS 2018"),
    "vietri-2020": Paper(
        "vietri-2020", "Vietri et al.", "2020", "Vietri, Balle, Krishnamurthy & Wu",
        "Private Reinforcement Learning with PAC and Regret Guarantees", 2020, "ICML 2020"),
    "duchi-2013": Paper(
        "duchi-2013", "Duchi, Jordan & Wainwright", "2013", "Duchi, Jordan & Wainwright",
        "Local privacy, data processing inequalities, and statistical minimax rates", 2013),
})

#: The source papers, by slug: the authors' surnames (the first one's for three or more) and the year tag, or
#: what the text defines when it names no authors.
PAPERS: Mapping[str, Paper] = MappingProxyType({
    "interactive-dp-definitions": Paper(
        "interactive-dp-definitions", "the interactive joint/local DP definitions", "", "",
        "the interactive joint/local DP definitions: DP channels, the Gaussian channel calibration "
        "sigma = 2 sqrt(log(1.25/delta))/eps, anticipating joint DP and local DP for interactive algorithms",
        None, "",
        "A definitions section without named authors; anticipating joint DP as in Shariff & Sheffet (2018) "
        "and Vietri et al. (2020), local DP as in Duchi, Jordan & Wainwright (2013)"),
    "azize-basu-2023a": Paper(
        "azize-basu-2023a", "Azize & Basu", "2023a", "Azize & Basu",
        "Concentrated Differential Privacy for Bandits", 2023, "arXiv:2309.00557"),
    "sarmasarkar-2026": Paper(
        "sarmasarkar-2026", "Sarmasarkar", "2026", "Sarmasarkar",
        "Shuffle and Joint Differential Privacy for Generalized Linear Contextual Bandits", 2026,
        "arXiv:2602.00417"),
    "zheng-2020": Paper(
        "zheng-2020", "Zheng et al.", "2020", "Zheng, Cai, Huang, Li & Wang",
        "Locally Differentially Private (Contextual) Bandits Learning", 2020, "NeurIPS 2020"),
    "azize-basu-2023b": Paper(
        "azize-basu-2023b", "Azize & Basu", "2023b", "Azize & Basu",
        "Rényi Differentially Private Bandits", 2023),
})

_FOLLOWS = {"interactive-dp-definitions": ("shariff-sheffet-2018", "vietri-2020", "duchi-2013")}


def _cited(p: Paper) -> re.Pattern[str]:
    """A citation of ``p``: "Azize & Basu (2023a", "Azize & Basu 2023a", "Zheng et al.'s (2020", or the
    description of a paper without authors."""
    if not p.year_tag:
        return re.compile(re.escape(p.short), re.IGNORECASE)
    return re.compile(re.escape(p.short) + r"(?:'s|')? \(?" + re.escape(p.year_tag) + r"(?![\w])")


def mentioned(text: str) -> list[str]:
    """The keys of the papers ``text`` cites by authors and year, in order of first mention."""
    found: dict[str, int] = {}
    for k, p in PAPERS.items():
        c = _cited(p).search(text)
        if c:
            found[k] = c.start()
    return sorted(found, key=found.__getitem__)


def references(text_or_keys: str | Iterable[str]) -> list[str]:
    """The full reference lines of the papers a text cites (or of the given keys), for a "References"
    section: each paper once, in order of first mention; the line of the interactive joint/local DP
    definitions is followed by the lines of the works whose definitions they follow."""
    keys = mentioned(text_or_keys) if isinstance(text_or_keys, str) else [k for k in text_or_keys if k in PAPERS]
    lines: list[str] = []
    for k in dict.fromkeys(keys):
        lines.append(PAPERS[k].reference)
        lines += [RELATED[r].reference for r in _FOLLOWS.get(k, ())]
    return lines
