"""Papers are named by authors, title and year wherever anyone reads them (dpaudit.papers).

These tests check the paper records and their references, that no private shorthand (the numbers of the
source papers' files in a shared folder, a tracker's issue numbers) is left in the installed package's
source, docstrings and JSON, and that what users read (``dpaudit describe`` for every registered policy,
every subcommand's ``--help``, the ``dpaudit reproduce`` output) names papers by authors and year with
their full references.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from dpaudit.papers import PAPERS, RELATED, Paper, mentioned, references

ROOT = Path(__file__).resolve().parents[1]
#: the private shorthand: a source paper's file number (the word "seed" or "seeds", in any case, then a number
#: 000-004, with or without a space between, inside a name too), "the seed paper/policies", and a tracker's
#: issue number ("issue" or "issues", an optional "#", digits)
SHORTHAND = re.compile(r"seeds? ?0{1,2}[0-4]|\bseeds? 0\d\d|\bseed (?:papers?|polic(?:y|ies)|results?)\b"
                       r"|\bissues? #?\d+", re.IGNORECASE)


def leftovers(text: str) -> list[str]:
    """The shorthand in ``text`` with some context; whitespace is collapsed first (text wraps lines)."""
    text = " ".join(text.split())
    return [text[max(0, m.start() - 40):m.end() + 40] for m in SHORTHAND.finditer(text)]


# ---- the records ---------------------------------------------------------------------------------

SLUGS = ["interactive-dp-definitions", "azize-basu-2023a", "sarmasarkar-2026", "zheng-2020", "azize-basu-2023b"]


def test_every_source_paper_has_a_record_and_the_records_are_immutable():
    assert sorted(PAPERS) == sorted(SLUGS)
    for key, p in PAPERS.items():
        assert isinstance(p, Paper) and p.key == key and p.title
    with pytest.raises(dataclasses.FrozenInstanceError):
        PAPERS["azize-basu-2023a"].title = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        PAPERS["other"] = PAPERS["azize-basu-2023a"]  # type: ignore[index]


def test_authors_titles_and_years():
    a, b = PAPERS["azize-basu-2023a"], PAPERS["azize-basu-2023b"]
    assert a.label == "Azize & Basu 2023a" and b.label == "Azize & Basu 2023b"
    assert a.narrative == "Azize & Basu (2023a)" and a.possessive == "Azize & Basu's (2023a)"
    assert a.title == "Concentrated Differential Privacy for Bandits" and "2309.00557" in a.venue
    assert b.title == "Rényi Differentially Private Bandits" and b.year == 2023
    s, z = PAPERS["sarmasarkar-2026"], PAPERS["zheng-2020"]
    assert s.label == "Sarmasarkar 2026" and "2602.00417" in s.venue
    assert s.title == "Shuffle and Joint Differential Privacy for Generalized Linear Contextual Bandits"
    assert z.authors == "Zheng, Cai, Huang, Li & Wang" and z.year == 2020 and z.narrative == "Zheng et al. (2020)"
    assert z.title == "Locally Differentially Private (Contextual) Bandits Learning"
    # two papers of the same authors in one year have distinct labels
    labels = [p.label for p in PAPERS.values()]
    assert len(set(labels)) == len(labels)


def test_the_definitions_section_gets_no_invented_authors_but_says_whom_it_follows():
    p = PAPERS["interactive-dp-definitions"]
    assert p.authors == "" and p.year is None and p.narrative == "the interactive joint/local DP definitions"
    ref = references(["interactive-dp-definitions"])
    assert ref[0] == p.reference and "without named authors" in ref[0]
    assert "sigma = 2 sqrt(log(1.25/delta))/eps" in ref[0]
    joined = "\n".join(ref)
    for r in RELATED.values():
        assert r.reference in joined
    assert "Differentially Private Contextual Linear Bandits" in joined and "NeurIPS 2018" in joined
    assert "Private Reinforcement Learning with PAC and Regret Guarantees" in joined and "ICML 2020" in joined
    assert "Local privacy, data processing inequalities, and statistical minimax rates" in joined


# ---- citations by authors and year -----------------------------------------------------------------

@pytest.mark.parametrize("text, keys", [
    ("Azize & Basu (2023a), App. C, Alg. 4", ["azize-basu-2023a"]),
    ("(Azize & Basu 2023b, Alg. 3, phase length Eq. (8))", ["azize-basu-2023b"]),
    ("Azize & Basu's (2023a) binary indexing", ["azize-basu-2023a"]),
    ("(Zheng et al. 2020, Thm 2) after Sarmasarkar (2026)", ["zheng-2020", "sarmasarkar-2026"]),
    ("the Gaussian channel of the interactive joint/local DP definitions", ["interactive-dp-definitions"]),
    ("The interactive joint/local DP definitions, Def. \"Local DP\"; Zheng et al. 2020, Def. 1",
     ["interactive-dp-definitions", "zheng-2020"]),
    ("Azize & Basu 2022, AdaP-UCB", []),  # another paper of the same authors
    ("Azize & Basu 2023c", []),
    ("--seed 0 runs from seed 0", []),
    ("", []),
])
def test_mentioned_finds_author_year_citations_in_order(text, keys):
    assert mentioned(text) == keys


def test_references_of_a_text_in_order_of_first_mention():
    text = "AdaR-UCB (Azize & Basu 2023b, Alg. 2) after Azize & Basu (2023a), App. C; again Azize & Basu's (2023b) Lemma 11"
    assert mentioned(text) == ["azize-basu-2023b", "azize-basu-2023a"]
    assert references(text) == [PAPERS["azize-basu-2023b"].reference, PAPERS["azize-basu-2023a"].reference]
    assert references(["zheng-2020", "zheng-2020", "no-such-paper"]) == [PAPERS["zheng-2020"].reference]
    assert references("no paper here") == []
    assert 'Azize & Basu (2023a). "Concentrated Differential Privacy for Bandits". arXiv:2309.00557.' \
        == PAPERS["azize-basu-2023a"].reference


# ---- no shorthand in the installed package -------------------------------------------------------

#: the one module that may spell the deprecated names (identifiers only, never prose): the names kept for one release
COMPATIBILITY = "dpaudit/deprecations.py"


def installed_files() -> dict[str, Path]:
    """Every .py and .json file of the installed package, by its path as a user would name it (dpaudit/...)."""
    import dpaudit
    import dpaudit.accountants
    import dpaudit.attacks

    out = {}
    for pkg in (dpaudit, dpaudit.accountants, dpaudit.attacks):
        base = Path(pkg.__file__).parent
        prefix = pkg.__name__.replace(".", "/")
        for path in sorted(base.rglob("*")):
            if path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
                rel = path.relative_to(base).as_posix()
                if pkg is dpaudit and rel.split("/")[0] in ("accountants", "attacks"):
                    continue  # (in a checkout these folders are not under dpaudit/)
                out[f"{prefix}/{rel}"] = path
    return out


def shorthand_in(name: str, text: str) -> list[str]:
    """The shorthand in file ``name`` (docstrings, comments, code, JSON), with what :data:`COMPATIBILITY`
    allows taken out."""
    found = leftovers(text)
    if name == COMPATIBILITY:  # its table spells the deprecated names (no space); its prose may not
        found = [f for f in found if re.search(r"\bseeds? 0\d\d|\bseed (?:paper|polic|result)|\bissues? #?\d", f, re.I)]
    return found


#: the shorthand's words, joined to their numbers when the samples below are built, so that a search of the
#: repository for the shorthand does not find these samples
SEED, ISSUE = "seed", "issue"


def test_the_scan_can_fail():
    assert shorthand_in("dpaudit/x.py", f'"""AdaC-UCB ({SEED} 001 App. C)."""') \
        and shorthand_in("dpaudit/x.py", f"# see {SEED.title()}\n    003's channel ({ISSUE} 13)")
    assert shorthand_in("dpaudit/x.py", f'BUNDLED = {{"{SEED}001-counterexample": "x.json"}}')
    assert shorthand_in("dpaudit/x.py", f"def lint_{SEED}000_channel(a, b):") and shorthand_in("dpaudit/x.json", f'"{SEED} 002"')
    assert shorthand_in("dpaudit/x.py", "guided by how the seed policies use their data")
    assert shorthand_in(COMPATIBILITY, f'"""Old names ({SEED} 001)."""') and not shorthand_in(COMPATIBILITY, f'{{"{SEED}003": "zheng-2020"}}')
    assert shorthand_in("dpaudit/x.py", f"x = GaussianChannel.{SEED}003(e, d)")
    assert not shorthand_in("dpaudit/x.py", "--seed 0 runs from seed 0; seeds 0-4; the seed's generator")
    real = (ROOT / "dpaudit" / "policies" / "ucb.py").read_text()
    assert not shorthand_in("dpaudit/policies/ucb.py", real)
    assert shorthand_in("dpaudit/policies/ucb.py", real.replace("Azize & Basu 2023a", f"{SEED} 001", 1))


def test_no_shorthand_in_the_installed_package():
    files = installed_files()
    assert {"dpaudit/papers.py", "dpaudit/accountants/gaussian.py", "dpaudit/attacks/exact.py",
            "dpaudit/specs/table_vs_view_counterexample.json", COMPATIBILITY} <= set(files)
    found = {name: hits for name, path in files.items() if (hits := shorthand_in(name, path.read_text()))}
    assert not found, found


def test_no_shorthand_in_the_docstrings_python_shows():
    """The same on what ``help()`` shows: every module's, class's and function's docstring."""
    import importlib
    import inspect
    import pkgutil

    import dpaudit

    names = ["dpaudit.accountants", "dpaudit.attacks"] + [
        m.name for m in pkgutil.walk_packages(dpaudit.__path__, "dpaudit.")
        if not m.name.startswith(("dpaudit.mechanisms", "dpaudit.__main__"))]
    found, seen = {}, 0
    for modname in names:
        mod = importlib.import_module(modname)
        for obj in [mod, *vars(mod).values()]:
            if obj is not mod and (inspect.ismodule(obj) or getattr(obj, "__module__", mod.__name__) != mod.__name__):
                continue  # documented where it is defined
            docs = [inspect.getdoc(obj) or ""]
            if inspect.isclass(obj):
                docs += [inspect.getdoc(m) or "" for m in vars(obj).values() if callable(m) or isinstance(m, property)]
            seen += 1
            where = COMPATIBILITY if modname == "dpaudit.deprecations" else modname
            if hits := shorthand_in(where, "\n".join(docs)):
                found[f"{modname}.{getattr(obj, '__qualname__', '')}"] = hits
    assert seen > 500 and not found, found


def _registered_names() -> list[str]:
    from dpaudit.policies import registered

    return [e.name for e in registered() + registered(mutants=True)]


#: a work cited by authors and year: "Sajed & Sheffet 2019", "Jun, Bhargava, Nowak and Willett 2017", "Hazan & Levy 2014"
OTHER_WORK = re.compile(r"\b[A-Z][\w'-]+(?:(?:,| &| and) [A-Z][\w'-]+)*(?: et al\.)? \(?(?:19|20)\d\d\b")


def test_describe_names_papers_for_every_registered_policy():
    import dpaudit

    names = _registered_names()
    assert len(names) > 40
    cited = 0
    for name in names:
        d = dpaudit.describe(name)
        text = json.dumps(d, default=str, ensure_ascii=False)
        assert not leftovers(text), (name, leftovers(text))
        assert not leftovers(dpaudit.policies.registry.entry_of(name).summary), name
        # every paper the output names has its full reference (authors, title, year) beside it
        assert set(d["papers"]) == set(references(text)), name
        assert all(PAPERS[k].title in "\n".join(d["papers"]) for k in mentioned(text)), name
        # what it follows names a paper by authors and year: one of PAPERS (as running text), or another work
        follows = " ".join(d["follows"])
        keys = mentioned(follows)
        assert keys or OTHER_WORK.search(follows), (name, d["follows"])
        if keys:
            cited += 1
            assert all(PAPERS[k].narrative in follows for k in keys), (name, d["follows"])
    assert cited > len(names) - 6


def test_the_follows_check_can_fail():
    assert mentioned("Azize & Basu (2023a), App. C") and not mentioned(f"{SEED} 001 App. C")
    assert OTHER_WORK.search("Sajed & Sheffet 2019, Alg. 1") and OTHER_WORK.search("Jun, Bhargava, Nowak and Willett 2017")
    assert not OTHER_WORK.search("rewards in [0, 1]; Alg. 6") and not OTHER_WORK.search("Lemma 1")


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
    from dpaudit.cli import main

    assert main(["reproduce", "table-vs-view"]) == 0
    out = capsys.readouterr().out
    assert not leftovers(out) and out.startswith("Azize & Basu (2023a), Prop. 1(e)")
    assert PAPERS["azize-basu-2023a"].reference in out
    assert main(["reproduce", "table-vs-view", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["reference"] == PAPERS["azize-basu-2023a"].reference and not leftovers(json.dumps(obj))


def test_committed_reproduction_outputs_name_papers():
    for name in ("zcdp_bandits.md", "zcdp_bandits.json", "ldp_bandits.md", "ldp_bandits.json", "glm-bandits.md"):
        text = (ROOT / "reports" / name).read_text()
        assert not leftovers(text), (name, leftovers(text))
        assert "Reference: " in text or '"reference": ' in text, name


def test_bundled_counterexample_description_names_the_paper():
    spec = json.loads((ROOT / "dpaudit" / "specs" / "table_vs_view_counterexample.json").read_text())
    assert not leftovers(spec["description"])
    assert "Azize & Basu (2023a)" in spec["description"] and PAPERS["azize-basu-2023a"].title in spec["description"]


def test_examples_name_papers_in_their_docstrings_too():
    """examples/ is read by users: no shorthand at all, docstrings included."""
    for path in sorted((ROOT / "examples").iterdir()):
        if path.is_file():
            assert not leftovers(path.read_text()), (path.name, leftovers(path.read_text()))
