"""A reviewer's workflow: a report's reproduce command reproduces it, the protocol a policy's
claim is about is audited by default, every listed name can be described, and the help says what every
option does."""

from __future__ import annotations

import argparse
import inspect
import json
import re
import shlex
from pathlib import Path

import pytest

import dpaudit
from dpaudit.cli import build_parser, main
from dpaudit.errors import DPAuditError
from dpaudit.runner import PLANS, findings_json

ROOT = Path(__file__).resolve().parents[1]


def _cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    cap = capsys.readouterr()
    return int(code), cap.out, cap.err


# ---- the reproduce command -------------------------------------------------------------------------

#: (the user's options, what the case covers); each audited as given, then with the command its findings record
ROUND_TRIPS = {
    # the audit chooses T = 51 (its threshold search saw pairs act apart only past 48): an explicit
    # --horizon 51 would cap that search and audit something else
    "central, horizon chosen": ["adac-ucb", "--runs", "500"],
    "joint, by default": ["jdp-glm", "--param", "n_arms=2", "--param", "dim=2", "--runs", "500"],
    "local, by default": ["ldp-ucb-rr", "--runs", "500", "--delta", "1e-6", "--horizon", "12"],
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(ROUND_TRIPS))
def test_the_reproduce_command_of_a_report_gives_the_same_findings(capsys, case):
    from dpaudit.report import sections
    from dpaudit.report.blocks import Code

    argv = ["check", "policy", *ROUND_TRIPS[case], "--workers", "1", "--json"]
    code, out, err = _cli(capsys, argv)
    first = json.loads(out)
    command = first["command"]
    shown = next(s for s in sections(first) if s.id == "reproduce").blocks[0]  # the report's "How to reproduce"
    assert isinstance(shown, Code) and shown.text == command
    words = shlex.split(command)
    assert words[:3] == ["dpaudit", "check", "policy"] and "--seed" in words
    assert ("--horizon" in words) == ("--horizon" in argv)  # a horizon as given, never one the audit chose
    # what the user gave (and the seed), nothing the audit chose
    assert {w for w in words if w.startswith("--")} == \
        {w for w in argv if w.startswith("--") and w not in ("--workers", "--json")} | {"--seed"}
    code2, out2, err2 = _cli(capsys, words[1:] + ["--json", "--workers", "1"])
    again = json.loads(out2)
    assert code2 == code
    assert again["command"] == command  # a fixed point: rerunning records the same command
    assert findings_json(again) == findings_json(first)  # bit for bit, without run times and engine
    if case == "central, horizon chosen":
        assert first["horizon"] != 48 and first["protocol"] == "table"
        # a command with the chosen horizon written out would run another audit instead
        code3, out3, _ = _cli(capsys, words[1:] + ["--horizon", str(first["horizon"]), "--json", "--workers", "1"])
        assert findings_json(json.loads(out3)) != findings_json(first)
        # the threshold search lists only pairs the audit ran, each with the horizon its pilot ran at
        for row in first["threshold_search"]["best"]:
            assert int(re.search(r"canary round (\d+)", row["pair"]).group(1)) < first["horizon"] - 1
            assert row["scored_at_horizon"] >= first["horizon"]


@pytest.mark.slow
def test_the_python_api_records_a_call_that_reproduces_its_findings():
    from dpaudit.accountants import ZCDP

    a = dpaudit.audit("adac-ucb", params={"n_arms": 2}, claim=ZCDP(0.5), runs=500, horizon=12, workers=1)
    assert a.command == ("dpaudit.audit('adac-ucb', params={'n_arms': 2}, runs=500, horizon=12, seed=0, "
                         "claim=ZCDP(rho=0.5))")
    b = eval(a.command, {"dpaudit": dpaudit, "ZCDP": ZCDP})  # the call as recorded (default workers)
    assert b.command == a.command and findings_json(b) == findings_json(a)


def test_the_exact_paths_record_what_was_given():
    from dpaudit.cli.check import reproduce_command

    assert reproduce_command("p", {"delta": 1.2345678912e-05, "param": ["a=1", "b=x y"]}, 3) == \
        "dpaudit check policy p --param a=1 --param 'b=x y' --delta 1.2345678912e-05 --seed 3"


# ---- the protocol a claim is about --------------------------------------------------------------------

#: the notion each registered policy's claim is about, from its paper (the docstrings say the same)
EXPECTED = {
    # Azize & Basu (2023a): rho-zCDP of the reward table; proven in the Interactive form, which implies it
    # (Prop. 2(a)); GOPE and OFUL take no adversary's queries. Pure-DP policies: Table = View (Prop. 1(a)).
    **dict.fromkeys(["adac-ucb", "adaed-ucb", "adap-ucb", "ucb-episodes", "ucb1", "adac-gope", "gope", "adac-oful",
                     "oful", "rs-oful", "dp-etc", "dp-se"], "table"),
    # Azize & Basu (2023b), Def. 3: neighbouring reward sequences, View DP
    **dict.fromkeys(["adar-ucb", "adar-gope", "adar-oful"], "view"),
    # Sarmasarkar (2026): Alg. 2 joint DP (and the non-private baselines of its adversarial-context setting),
    # Alg. 1 shuffle DP
    **dict.fromkeys(["jdp-glm", "jdp-glm-np", "glm-ucb", "glm-gloc", "rs-glinucb"], "joint"),
    **dict.fromkeys(["shuffle-glm", "shuffle-glm-np"], "shuffle"),
    # Zheng et al. (2020): local DP, K-armed, contextual and BCO, and the twins they are compared with
    **dict.fromkeys(["ldp-ucb", "ldp-ucb-laplace", "ldp-ucb-rr", "ldp-lilucb", "ldp-tsallis-inf", "ldp-linucb",
                     "ldp-gloc", "ldp-bco-fkm", "ldp-bco-2pt", "ldp-bco-scs", "ucb-onepoint", "lilucb", "tsallis-inf",
                     "linucb", "gloc", "bco-fkm", "bco-2pt", "bco-scs"], "local"),
}
#: how a docstring names each notion
WORDS = {"table": "Table DP", "view": "View DP", "joint": "joint-DP", "shuffle": "shuffle-DP", "local": "LDP"}


def _entries(mutants: bool):
    from dpaudit.policies.registry import registered

    return registered(mutants=mutants)


def test_every_registered_policy_names_the_notion_of_its_claim():
    from dpaudit.policies.registry import entry_of

    entries = _entries(False)
    assert {e.name: e.notion for e in entries} == EXPECTED
    twins: dict[str, set[str]] = {}
    for e in entries:
        if getattr(e.cls(), "claim", None) is not None:  # a private policy: its docstring says which notion
            assert WORDS[e.notion] in " ".join(inspect.getdoc(e.cls).split()), e.name
            twin = getattr(e.cls, "non_private_twin", None)
            if twin and twin != e.name:
                twins.setdefault(twin, set()).add(e.notion)
    for twin, notions in twins.items():  # a non-private twin: the notion of a policy it is the twin of
        assert entry_of(twin).notion in notions, (twin, notions)
    for m in _entries(True):  # a mutant keeps the notion of the policy it breaks
        parent = next((entry_of(c) for c in m.cls.__mro__[1:] if entry_of(c) is not None), None)
        assert m.notion == (parent.notion if parent is not None else "table"), m.name


def test_the_default_audit_runs_the_plan_of_the_notion(monkeypatch):
    import dpaudit.runner

    seen = {}

    class Stop(Exception):
        pass

    def fake_run(request, progress=None):
        seen["protocol"] = request.protocol
        raise Stop

    monkeypatch.setattr(dpaudit.runner, "run", fake_run)
    for e in _entries(False) + _entries(True):
        with pytest.raises(Stop):
            dpaudit.audit(e.name, runs=100)
        assert seen["protocol"] == e.notion and PLANS[seen["protocol"]]["module"], e.name


def test_the_findings_say_which_protocol_ran_and_why(tmp_path):
    from dpaudit.api import resolve_protocol

    assert resolve_protocol("jdp-glm") == ("joint", "protocol joint: the claim of jdp-glm is a joint-DP claim.")
    assert resolve_protocol("ldp-ucb")[0] == "local" and resolve_protocol("ldp-bco-fkm")[0] == "local"
    p, note = resolve_protocol("jdp-glm", "table")
    assert p == "table" and "joint-DP claim, not a Table-DP one" in note and "need not contradict it" in note
    p, note = resolve_protocol("adac-ucb", "view")
    assert "which implies View DP (Azize & Basu 2023a, Prop. 1(b, c)): a weaker test" in note
    assert resolve_protocol("adac-ucb", "table")[1] == resolve_protocol("adac-ucb")[1]  # as asked = by default
    assert resolve_protocol("jdp-finite-rr")[0] == "joint" and resolve_protocol("table-vs-view-counterexample")[0] == "table"
    src = tmp_path / "plug.py"
    src.write_text("from dpaudit.policies.ucb import AdaCUCB\n\nclass Joint(AdaCUCB):\n    notion = 'joint'\n\n"
                   "class Plain(AdaCUCB):\n    notion = None\n\nclass Bad(AdaCUCB):\n    notion = 'central'\n")
    assert resolve_protocol(f"{src}:Joint")[0] == "joint"
    p, note = resolve_protocol(f"{src}:Plain")
    assert p == "table" and "names no notion" in note
    with pytest.raises(DPAuditError, match="notion must be one of 'table', 'view'"):
        resolve_protocol(f"{src}:Bad")
    a = dpaudit.audit("adac-ucb", protocol="view", runs=200, horizon=6, workers=1)
    assert a.protocol == "view" and a.notes[0].startswith("protocol view (as asked): the claim of adac-ucb")


def test_a_finite_contextual_spec_is_audited_under_joint_by_default(capsys):
    code, out, err = _cli(capsys, ["check", "policy", "jdp-finite-leak"])
    assert code == 1, err
    assert "protocol  joint:" in out and "(the default for a finite contextual spec)" in out
    code, out, err = _cli(capsys, ["check", "policy", "table-vs-view-counterexample"])
    assert code == 0 and "protocol  table:" in out and "the default for a finite policy spec" in out


# ---- list and describe ------------------------------------------------------------------------------

def test_every_name_list_shows_can_be_described(capsys):
    names = []
    for extra in ([], ["--mutants"]):
        code, out, _ = _cli(capsys, ["list", "--json", *extra])
        listed = json.loads(out)
        assert code == 0 and all(p["notion"] in PLANS for p in listed["policies"])
        names += [p["name"] for p in listed["policies"]] + listed["finite_specs"] + listed["finite_contextual_specs"]
        code, text, _ = _cli(capsys, ["list", *extra])
        for p in listed["policies"]:  # the notion beside each name
            assert re.search(rf"^  {re.escape(p['name'])} +{p['notion']} ", text, re.M), p["name"]
    assert "table-vs-view-counterexample" in names and "jdp-finite-leak" in names
    for name in names:
        d = dpaudit.describe(name)
        assert d["notion"] in PLANS and d["notion_note"], name
        assert "seed 00" not in json.dumps(d).lower().replace("table-vs-view-counterexample", ""), name
    code, out, err = _cli(capsys, ["describe", "table-vs-view-counterexample"])
    assert code == 0 and "notion      table" in out and "Azize & Basu (2023a)" in out and "T = 3, K = 2" in out
    code, out, err = _cli(capsys, ["describe", "jdp-glm"])
    assert "notion      joint: the claim of jdp-glm is a joint-DP claim" in out


def test_describe_names_a_plugin_as_the_user_gave_it_and_defaults_by_paper(capsys, tmp_path):
    src = tmp_path / "mine.py"
    src.write_text("from dpaudit.policies.ucb import AdaCUCB\n\nclass MyPolicy(AdaCUCB):\n    pass\n")
    d = dpaudit.describe(f"{src}:MyPolicy")
    assert d["class"] == f"{src}:MyPolicy" and "dpaudit_plugin" not in json.dumps(d)
    assert d["notion"] == "table"  # inherited from AdaC-UCB
    calibration = next(p for p in dpaudit.describe("ldp-ucb")["parameters"] if p["name"] == "calibration")
    assert calibration["default"] == "zheng-2020"
    from dpaudit.policies import make_policy

    from dpaudit.deprecations import CALIBRATIONS, DPAuditDeprecationWarning

    assert sorted(CALIBRATIONS.values()) == ["gaussian-channel", "zheng-2020"]
    for old, new in CALIBRATIONS.items():  # the deprecated values still work, and warn
        with pytest.warns(DPAuditDeprecationWarning, match=f"calibration={old!r} is deprecated .* use calibration={new!r}"):
            a = make_policy("ldp-ucb", {"calibration": old})
        b = make_policy("ldp-ucb", {"calibration": new})
        assert a.local_channel.sigma == b.local_channel.sigma and a.params()["calibration"] == new


# ---- help ---------------------------------------------------------------------------------------------

def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


def test_every_option_of_every_command_says_what_it_does():
    parsers = list(_parsers(build_parser()))
    assert ("check", "policy") in [p for p, _ in parsers] and len(parsers) > 10
    for path, parser in parsers:
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction)):
                continue
            if action.help == argparse.SUPPRESS:  # a hidden alias (account rdp --eps)
                continue
            name = "/".join(action.option_strings) or action.dest
            assert action.help and len(action.help) > 10, (path, name)
            if "--param" in action.option_strings or "--env-param" in action.option_strings:
                assert action.metavar == "NAME=VALUE", (path, name, action.metavar)
            if action.default not in (None, False, [], argparse.SUPPRESS) and action.option_strings:
                assert "default" in action.help, (path, name)  # a default is stated


@pytest.mark.slow
def test_check_policy_help_is_grouped_with_the_exit_statuses(dpaudit_cli):
    from dpaudit.runner.joint import JOINT_DEFAULTS
    from dpaudit.runner.shuffle import SHUFFLE_CAPS

    check = dict(_parsers(build_parser()))[("check", "policy")]
    groups = [g.title for g in check._action_groups if g._group_actions]
    assert groups == ["options", "what to audit", "sampling and statistics", "protocol-specific",
                      "finite specs only (exact enumeration)",
                      "execution (where and how long; the findings do not depend on these)", "output"]
    runs = next(a for a in check._actions if a.dest == "runs").help
    assert f"{JOINT_DEFAULTS['runs']:,}" in runs and f"{SHUFFLE_CAPS['runs']:,}" in runs
    res = dpaudit_cli("check", "policy", "--help")
    assert res.returncode == 0
    listed = {int(m) for m in re.findall(r"^\s+(\d+)\s", res.stdout.split("exit statuses:")[1], re.M)}
    assert listed == {0, 1, 2, 3, 70, 130} and "inconclusive" in res.stdout.split("exit statuses:")[1]


# ---- the documentation's paths ----------------------------------------------------------------------

DOCS = [ROOT / "README.md", ROOT / "DESIGN.md", *sorted((ROOT / "docs").glob("*.md"))]
#: a source file the text names: dpaudit/..., attacks/..., accountants/..., tests/..., benchmarks/..., examples/...
PATH = re.compile(r"(?<![\w./-])((?:dpaudit|attacks|accountants|tests|benchmarks|examples)/[\w./-]*\.py)(?![\w])")


def test_every_path_the_documentation_names_exists():
    assert len(DOCS) > 5
    missing, named = [], 0
    for doc in DOCS:
        for m in PATH.finditer(doc.read_text()):
            path, named = m.group(1), named + 1
            if not (ROOT / path).exists():
                missing.append(f"{doc.name}: {path}")
    assert named > 30 and not missing, missing  # (the pattern finds the paths the documents name)
