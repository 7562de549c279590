"""Papers are named by authors, title and year wherever a user reads them (dpaudit.papers).

The internal shorthand "seed 000" .. "seed 004" stays in developer docstrings and comments; these
tests check that :func:`dpaudit.papers.cite` rewrites every form the code uses, that the references
are complete, and that no shorthand reaches what users read: ``dpaudit describe`` for every
registered policy, every subcommand's ``--help``, the ``dpaudit reproduce`` descriptions, and the
string literals (not docstrings or comments) of the package, which end up in findings and reports.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from dpaudit.papers import PAPERS, RELATED, Paper, cite, mentioned, references

ROOT = Path(__file__).resolve().parents[1]
#: the internal shorthand in prose ("seed 001", "Seed 003's", "seeds 001 and 004"); identifiers such
#: as the bundled spec name ``seed001-counterexample`` or ``calibration="seed003"`` have no space
LEFTOVER = re.compile(r"\b[Ss]eeds? 0\d\d|seed papers?\b")


def leftovers(text: str) -> list[str]:
    """The shorthand in ``text`` with some context; whitespace is collapsed first (help text wraps lines)."""
    text = " ".join(text.split())
    return [text[max(0, m.start() - 40):m.end() + 40] for m in LEFTOVER.finditer(text)]


# ---- the records ---------------------------------------------------------------------------------

def test_every_source_paper_has_a_record_and_the_records_are_immutable():
    assert list(PAPERS) == ["000", "001", "002", "003", "004"]
    for key, p in PAPERS.items():
        assert isinstance(p, Paper) and p.key == key and p.title
    with pytest.raises(dataclasses.FrozenInstanceError):
        PAPERS["001"].title = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        PAPERS["005"] = PAPERS["001"]  # type: ignore[index]


def test_authors_titles_and_years():
    assert PAPERS["001"].label == "Azize & Basu 2023a" and PAPERS["004"].label == "Azize & Basu 2023b"
    assert PAPERS["001"].title == "Concentrated Differential Privacy for Bandits" and "2309.00557" in PAPERS["001"].venue
    assert PAPERS["004"].title == "Rényi Differentially Private Bandits" and PAPERS["004"].year == 2023
    assert PAPERS["002"].label == "Sarmasarkar 2026" and "2602.00417" in PAPERS["002"].venue
    assert PAPERS["002"].title == "Shuffle and Joint Differential Privacy for Generalized Linear Contextual Bandits"
    assert PAPERS["003"].authors == "Zheng, Cai, Huang, Li & Wang" and PAPERS["003"].year == 2020
    assert PAPERS["003"].title == "Locally Differentially Private (Contextual) Bandits Learning"
    # two papers of the same authors in one year have distinct labels
    labels = [p.label for p in PAPERS.values()]
    assert len(set(labels)) == len(labels)


def test_the_definitions_section_gets_no_invented_authors_but_says_whom_it_follows():
    p = PAPERS["000"]
    assert p.authors == "" and p.year is None
    ref = references(["000"])
    assert ref[0] == p.reference and "without named authors" in ref[0]
    assert "sigma = 2 sqrt(log(1.25/delta))/eps" in ref[0]
    joined = "\n".join(ref)
    for r in RELATED.values():
        assert r.reference in joined
    assert "Differentially Private Contextual Linear Bandits" in joined and "NeurIPS 2018" in joined
    assert "Private Reinforcement Learning with PAC and Regret Guarantees" in joined and "ICML 2020" in joined
    assert "Local privacy, data processing inequalities, and statistical minimax rates" in joined


# ---- cite ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("seed 001 App. C, Alg. 4", "Azize & Basu (2023a), App. C, Alg. 4"),
    ("(seed 001 App. C, Alg. 4, Eq. 14)", "(Azize & Basu 2023a, App. C, Alg. 4, Eq. 14)"),
    ("seed 001's theorem needs beta > 3", "Azize & Basu's (2023a) theorem needs beta > 3"),
    ("(default: seed 001's five Bernoulli arms)", "(default: Azize & Basu 2023a's five Bernoulli arms)"),
    ("Seed 003 Alg. 1 + UCB", "Zheng et al. (2020), Alg. 1 + UCB"),
    ("seed 003 (Zheng et al. 2020) Alg. 1", "Zheng et al. (2020), Alg. 1"),
    ("Seed 001 (Azize & Basu), App. B", "Azize & Basu (2023a), App. B"),
    ("seed 002 (Sarmasarkar): joint DP", "Sarmasarkar (2026): joint DP"),
    ("seed 002's experiments", "Sarmasarkar's (2026) experiments"),
    ("AdaR-GOPE (seed 004 Alg. 3, phase length Eq. (8))", "AdaR-GOPE (Azize & Basu 2023b, Alg. 3, phase length Eq. (8))"),
    ("seed 004 (Alg. 3, AdaR-GOPE)", "Azize & Basu (2023b, Alg. 3, AdaR-GOPE)"),
    ("(seed 004, Lemma 2)", "(Azize & Basu 2023b, Lemma 2)"),
    ("seeds 001 and 004", "Azize & Basu (2023a) and Azize & Basu (2023b)"),
    ("seed 000 / seed 002", "the interactive joint/local DP definitions / Sarmasarkar (2026)"),
    ("Seed 000 (Def. \"Gaussian channel\")", "The interactive joint/local DP definitions (Def. \"Gaussian channel\")"),
    ("(seed 000 \"Local DP\"; seed 003 Def. 1)",
     "(the interactive joint/local DP definitions, \"Local DP\"; Zheng et al. 2020, Def. 1)"),
    ("seed 000's anticipating JDP", "the interactive joint/local DP definitions' anticipating JDP"),
])
def test_cite_rewrites_every_form_the_code_uses(text, expected):
    assert cite(text) == expected
    assert not leftovers(cite(text))


@pytest.mark.parametrize("text", [
    "--seed 0 runs from seed 0",  # a random seed, not a paper
    "the bundled spec seed001-counterexample and calibration='seed003'",  # identifiers
    "seed 007 is no paper",  # not a known number
    "Azize & Basu 2022, AdaP-UCB",
    "",
])
def test_cite_leaves_other_text_alone(text):
    assert cite(text) == text


def test_references_of_a_text_in_order_of_first_mention():
    text = "AdaR-UCB (seed 004 Alg. 2) after seed 001 App. C; again seed 004's Lemma 11"
    assert mentioned(text) == ["004", "001"]
    assert references(text) == [PAPERS["004"].reference, PAPERS["001"].reference]
    assert references("no paper here") == []
    assert 'Azize & Basu (2023a). "Concentrated Differential Privacy for Bandits". arXiv:2309.00557.' \
        == PAPERS["001"].reference


def test_references_also_find_papers_already_cited_by_author_and_year():
    text = cite("AdaC-UCB (seed 001 App. C) and the LDP channel of seed 003") + "; Azize & Basu (2023b), Alg. 2"
    assert mentioned(text) == ["001", "003", "004"]
    assert mentioned("Azize & Basu 2022") == [] and mentioned("the interactive joint/local DP definitions") == ["000"]


# ---- no shorthand in what users read -------------------------------------------------------------

def test_the_leftover_check_can_fail():
    """The scans below would catch a leftover: one put into a real docstring is found."""
    import inspect

    from dpaudit.policies.ucb import AdaCUCB

    doc = inspect.getdoc(AdaCUCB) or ""
    assert not leftovers(doc) and leftovers(doc.replace("Azize & Basu 2023a", "seed 001", 1))
    assert leftovers("AdaC-UCB (seed 001 App. C)") and leftovers("Seed 003's channel") and leftovers("a seed paper")
    assert leftovers("see seed\n    001 App. C") and not leftovers("--seed 0 and seed001-counterexample")


def _registered_names() -> list[str]:
    from dpaudit.policies import registered

    return [e.name for e in registered() + registered(mutants=True)]


def test_describe_names_papers_for_every_registered_policy():
    import json

    import dpaudit

    names = _registered_names()
    assert len(names) > 40
    cited = 0
    for name in names:
        d = dpaudit.describe(name)
        text = json.dumps(d, default=str, ensure_ascii=False)
        assert not leftovers(text), (name, leftovers(text))
        assert not leftovers(dpaudit.policies.registry.entry_of(name).summary), name
        if d["papers"]:
            cited += 1
            # every paper the output names has its full reference (authors, title, year) beside it
            assert set(d["papers"]) >= set(references(text)), name
            assert all(p.title.lower() in "\n".join(d["papers"]).lower()
                       for k, p in PAPERS.items() if k in mentioned(text)), name
    assert cited > 30


def test_describe_cli_text_names_papers(capsys):
    from dpaudit.cli import main

    assert main(["describe", "adar-ucb"]) == 0
    out = capsys.readouterr().out
    assert not leftovers(out)
    assert "Azize & Basu (2023b)" in out and '"Rényi Differentially Private Bandits"' in out
    assert main(["describe", "shuffle-glm"]) == 0
    out = capsys.readouterr().out
    assert "Sarmasarkar (2026)" in out and "Shuffle and Joint Differential Privacy" in out and not leftovers(out)


def _parsers(parser, path=("dpaudit",)):
    """Every parser of the command line, with its path: dpaudit, dpaudit check, dpaudit check policy, ..."""
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


def test_every_help_text_names_papers_not_seeds():
    from dpaudit.cli import build_parser

    seen = list(_parsers(build_parser()))
    paths = {" ".join(p) for p, _ in seen}
    assert {"dpaudit check policy", "dpaudit account lint", "dpaudit regret", "dpaudit reproduce",
            "dpaudit describe", "dpaudit list"} <= paths
    for path, parser in seen:
        text = parser.format_help()
        assert not leftovers(text), (" ".join(path), leftovers(text))
    helps = {" ".join(p): " ".join(q.format_help().split()) for p, q in seen}
    assert "Azize & Basu 2023a" in helps["dpaudit check policy"] and "Sarmasarkar 2026" in helps["dpaudit check policy"]
    assert "interactive joint/local DP definitions" in helps["dpaudit account"]


@pytest.mark.slow
def test_help_subprocess_of_every_subcommand_is_clean(dpaudit_cli):
    """The same, as a user sees it: ``python -m dpaudit CMD --help``."""
    from dpaudit.cli import build_parser

    commands = [p[1:] for p, _ in _parsers(build_parser()) if len(p) <= 2]
    assert len(commands) > 5
    for cmd in commands:
        res = dpaudit_cli(*cmd, "--help", timeout=120)
        assert res.returncode == 0, (cmd, res.stderr[-500:])
        assert not leftovers(res.stdout), (cmd, leftovers(res.stdout))


def test_reproduce_descriptions_name_papers():
    from dpaudit.reproduce import EXPERIMENTS

    for name, (_, summary) in EXPERIMENTS.items():
        assert not leftovers(summary), name
        assert any(p.label in summary and p.title in summary for p in PAPERS.values()), name


def test_reproduce_table_vs_view_output_names_the_paper(capsys):
    import json

    from dpaudit.cli import main

    assert main(["reproduce", "table-vs-view"]) == 0
    out = capsys.readouterr().out
    assert not leftovers(out) and out.startswith("Azize & Basu (2023a), Prop. 1(e)")
    assert PAPERS["001"].reference in out
    assert main(["reproduce", "table-vs-view", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["reference"] == PAPERS["001"].reference and not leftovers(json.dumps(obj))


def test_committed_reproduction_outputs_name_papers():
    for name in ("zcdp_bandits.md", "zcdp_bandits.json", "ldp_bandits.md", "ldp_bandits.json", "glm-bandits.md"):
        text = (ROOT / "reports" / name).read_text()
        assert not leftovers(text), (name, leftovers(text))
        assert "Reference: " in text or '"reference": ' in text, name


def test_bundled_counterexample_description_names_the_paper():
    import json

    spec = json.loads((ROOT / "dpaudit" / "specs" / "table_vs_view_counterexample.json").read_text())
    assert not leftovers(spec["description"])
    assert "Azize & Basu (2023a)" in spec["description"] and PAPERS["001"].title in spec["description"]


# ---- string literals: what findings, reports, errors and printed output are made of ----------------------

def _docstring_ids(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def shorthand_in_string_literals(source: str) -> list[str]:
    """The string literals (f-string parts included; docstrings and comments excluded) that use the shorthand."""
    tree = ast.parse(source)
    docs = _docstring_ids(tree)
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs and leftovers(node.value)]


def test_the_literal_scan_can_fail():
    src = ('"""Module doc: seed 001 App. C."""\n# seed 003 comment\n'
           'def f(x):\n    """seed 002 Alg. 1"""\n    raise ValueError(f"{x} needs seed 003 Alg. 5")\n'
           'NOTE = "as in seed 001 Sec. VII-A"\nNAME = "seed001-counterexample"\n')
    assert sorted(shorthand_in_string_literals(src)) == [" needs seed 003 Alg. 5", "as in seed 001 Sec. VII-A"]


@pytest.mark.parametrize("folder", ["dpaudit", "attacks", "accountants", "examples"])
def test_no_shorthand_in_string_literals(folder):
    found = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        hits = shorthand_in_string_literals(path.read_text())
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    assert not found, found


def test_examples_name_papers_in_their_docstrings_too():
    """examples/ is read by users: no shorthand at all, docstrings included."""
    for path in sorted((ROOT / "examples").iterdir()):
        if path.is_file():
            assert not leftovers(path.read_text()), (path.name, leftovers(path.read_text()))
