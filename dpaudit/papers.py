"""The papers dpaudit implements and audits, and how users see them named.

Inside the project (source comments, docstrings, tests) the source papers go by the numbers of
their files in the shared seed folder: "seed 000" .. "seed 004". That shorthand means nothing to a
user, so anything a user reads names a paper by its authors, title and year. This module is the one
place that maps the shorthand to the papers:

* :data:`PAPERS`: ``"000"`` .. ``"004"`` -> :class:`Paper`;
* :func:`cite`: rewrites "seed 001 App. C, Alg. 4" to "Azize & Basu (2023a), App. C, Alg. 4";
* :func:`references`: the full reference lines (authors, title, year) of the papers a text mentions.

Seed 000 is a definitions section without a title or authors: it is named by what it defines, and
its reference says whose definitions it follows (:data:`RELATED`).

A leaf module: it imports nothing from dpaudit, so every layer may use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

__all__ = ["Paper", "PAPERS", "RELATED", "cite", "mentioned", "references", "SHORTHAND"]


@dataclass(frozen=True)
class Paper:
    """One paper: who wrote it, its title and year, and the short form a citation uses.

    ``short`` and ``year_tag`` make the citation: "Azize & Basu (2023a)" in running text,
    "Azize & Basu 2023a" inside parentheses (:attr:`label`). A paper without known authors (seed 000)
    has an empty ``year_tag`` and a descriptive ``short``.
    """

    key: str
    short: str  # "Azize & Basu", "Zheng et al.", or a description when no authors are known
    year_tag: str  # "2023a": the year, with a letter when one author list has two papers that year
    authors: str  # the full author list; "" when unknown
    title: str
    year: int | None
    venue: str = ""  # "NeurIPS 2020", "arXiv:2309.00557", ...
    note: str = ""  # what a reference line adds (for seed 000: whose definitions it follows)

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


#: Works seed 000's definitions follow (they are cited there, not implemented from).
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

#: The source papers, by their internal number.
PAPERS: Mapping[str, Paper] = MappingProxyType({
    "000": Paper(
        "000", "the interactive joint/local DP definitions", "", "",
        "the interactive joint/local DP definitions: DP channels, the Gaussian channel calibration "
        "sigma = 2 sqrt(log(1.25/delta))/eps, anticipating joint DP and local DP for interactive algorithms",
        None, "",
        "A definitions section without named authors; anticipating joint DP as in Shariff & Sheffet (2018) "
        "and Vietri et al. (2020), local DP as in Duchi, Jordan & Wainwright (2013)"),
    "001": Paper(
        "001", "Azize & Basu", "2023a", "Azize & Basu",
        "Concentrated Differential Privacy for Bandits", 2023, "arXiv:2309.00557"),
    "002": Paper(
        "002", "Sarmasarkar", "2026", "Sarmasarkar",
        "Shuffle and Joint Differential Privacy for Generalized Linear Contextual Bandits", 2026,
        "arXiv:2602.00417"),
    "003": Paper(
        "003", "Zheng et al.", "2020", "Zheng, Cai, Huang, Li & Wang",
        "Locally Differentially Private (Contextual) Bandits Learning", 2020, "NeurIPS 2020"),
    "004": Paper(
        "004", "Azize & Basu", "2023b", "Azize & Basu",
        "Rényi Differentially Private Bandits", 2023),
})

_FOLLOWS = {"000": ("shariff-sheffet-2018", "vietri-2020", "duchi-2013")}

_NUM = r"0\d\d"
_SEP = r"(?:, | and | or | ?/ ?)"
#: The internal shorthand: "seed 001", "Seed 003's", "seeds 001 and 004" (one, two or more numbers).
SHORTHAND = re.compile(rf"(?<![\w-])(?P<s>[Ss])eeds? (?P<nums>{_NUM}(?:{_SEP}{_NUM})*)(?![\w-])(?P<own>'s)?")
# What follows a citation and takes a comma before it: a place in the paper, or a quoted definition name.
_LOCATOR = re.compile(r" (?=(?:App|Alg|Algs|Sec|Secs|Def|Defs|Thm|Thms|Theorem|Lemma|Lemmas|Eq|Eqs|eq|eqs|Fig|Figs|"
                      r"Prop|Props|Table|Cor|Corollary|Assumption|Remark|ref|reference|Step|Line|line)\b|\")")
_AUTHOR_PAREN = re.compile(r" \((?P<body>[^()]*)\)")


def _depth(text: str, end: int) -> int:
    """How many parentheses are open at ``end`` (a stray ")" does not go below zero)."""
    depth = 0
    for ch in text[:end]:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
    return depth


def _surname(p: Paper) -> str:
    return re.split(r"[ ,&]", p.short.strip())[0]


def cite(text: str) -> str:
    """``text`` with every internal "seed NNN" reference replaced by an author-year citation.

    "seed 001 App. C, Alg. 4" -> "Azize & Basu (2023a), App. C, Alg. 4"; inside parentheses the
    year loses its own: "(seed 003 Thm 2)" -> "(Zheng et al. 2020, Thm 2)"; "seed 001's" ->
    "Azize & Basu's (2023a)"; an author name the text already gave right after the shorthand
    ("seed 003 (Zheng et al. 2020)") is dropped. Unknown numbers and other text are left alone.
    """
    out: list[str] = []
    pos = 0
    for m in SHORTHAND.finditer(text):
        keys = re.findall(_NUM, m.group("nums"))
        if any(k not in PAPERS for k in keys):
            continue
        seps = re.findall(_SEP, m.group("nums"))
        papers = [PAPERS[k] for k in keys]
        inside = _depth(text, m.start()) > 0
        end = m.end()
        after = _AUTHOR_PAREN.match(text, end)
        merge = ""
        if after and any(_surname(p) in after.group("body") for p in papers) \
                and not re.search(r"\b(?:Alg|Thm|Sec|App|Def|Lemma|Eq|Prop)\b", after.group("body")):
            end = after.end()  # "seed 003 (Zheng et al. 2020)": the citation names them already
        elif after and not inside and len(papers) == 1 and papers[0].year_tag and not m.group("own"):
            merge, end = after.group("body"), after.end()  # "seed 001 (Alg. 2)" -> "Azize & Basu (2023a, Alg. 2)"
        cites = []
        for i, p in enumerate(papers):
            last = i == len(papers) - 1
            if last and m.group("own"):
                cites.append(f"{p.label}'s" if inside else p.possessive)
            else:
                cites.append(p.label if inside else p.narrative)
        new = cites[0] + "".join(sep + c for sep, c in zip(seps, cites[1:]))
        if merge:
            new = new[:-1] + f", {merge})"
        if m.group("s") == "S" and new[:1].islower():
            new = new[0].upper() + new[1:]
        if not m.group("own") and _LOCATOR.match(text, end):
            new += ","
        out.append(text[pos:m.start()] + new)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _cited(p: Paper) -> re.Pattern[str]:
    """A citation of ``p`` as :func:`cite` writes it (or a user does): "Azize & Basu (2023a", "Zheng et al.'s (2020"."""
    if not p.year_tag:
        return re.compile(re.escape(p.short), re.IGNORECASE)
    return re.compile(re.escape(p.short) + r"(?:'s|')? \(?" + re.escape(p.year_tag) + r"(?![\w])")


def mentioned(text: str) -> list[str]:
    """The keys of the papers ``text`` names, in the internal shorthand or as :func:`cite` writes them,
    in order of first mention."""
    found: dict[str, int] = {}
    for m in SHORTHAND.finditer(text):
        for k in re.findall(_NUM, m.group("nums")):
            if k in PAPERS:
                found.setdefault(k, m.start())
    for k, p in PAPERS.items():
        c = _cited(p).search(text)
        if c and c.start() < found.get(k, len(text) + 1):
            found[k] = c.start()
    return sorted(found, key=found.__getitem__)


def references(text_or_keys: str | Iterable[str]) -> list[str]:
    """The full reference lines of the papers a text mentions (or of the given keys), for a
    "References" section: each paper once, in order of first mention; seed 000's line is followed
    by the lines of the works whose definitions it follows."""
    keys = mentioned(text_or_keys) if isinstance(text_or_keys, str) else [k for k in text_or_keys if k in PAPERS]
    lines: list[str] = []
    for k in dict.fromkeys(keys):
        lines.append(PAPERS[k].reference)
        lines += [RELATED[r].reference for r in _FOLLOWS.get(k, ())]
    return lines
