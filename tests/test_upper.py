"""The upper side of an audit: ``epsilon_upper`` beside the claim, and no lower bound above it.

Every registered non-mutant policy with a claim is audited under every protocol it supports, at small
settings (100 fresh runs, a given neighbouring pair of T = 8 under the central protocols so no search
runs, the local audit without its central part, small GLM instances where the number checked does not
depend on them); the findings are deterministic at seed 0.
"""

from __future__ import annotations

import json
import math

import pytest

from dpaudit.errors import DPAuditError
from dpaudit.policies.bco import is_bco
from dpaudit.policies.finite_contextual import BUNDLED_CONTEXTUAL
from dpaudit.policies.registry import registered
from dpaudit.protocols.table import audit_range
from dpaudit.runner import Request, run
from dpaudit.runner.findings import Findings, Upper
from dpaudit.runner.setup import build_policy

PROTOCOLS = ("table", "view", "interactive", "local", "joint", "shuffle")
T = 8
#: the sentences a protocol refuses a policy with (anything else is a failure, not a skip)
REFUSALS = ("cannot be audited under", "exposes no channel", "has no context dimension", "has no shuffle pipeline",
            "plays points of a convex body", "has no binary-tree release")
#: small instances of the slow GLM policies where the figure checked does not depend on their size
SMALL = {"shuffle-glm": {"n_arms": "4", "dim": "2", "fw_iters": "2"}}


def _pair(tmp, name: str, protocol: str, params: dict) -> str:
    """A neighbouring pair of T rounds: every reward at the low end, round 1 at the high end on one side."""
    pol = build_policy(name, dict(params), T)
    lo, hi = audit_range(pol)
    alphabet = getattr(pol, "reward_alphabet", None)
    if alphabet:
        lo, hi = min(alphabet), max(alphabet)
    K = int(pol.n_arms)
    if protocol == "view":
        d = [lo] * T
        dp = list(d)
        dp[1] = hi
    else:
        d = [[lo] * K for _ in range(T)]
        dp = [list(r) for r in d]
        dp[1] = [hi] * K
    path = tmp / f"{name}-{protocol}.json"
    path.write_text(json.dumps({"format": "dpaudit.pair/1", "d": d, "d_prime": dp}))
    return str(path)


def _audit(tmp, name: str, protocol: str) -> Findings | None:
    params = {}
    if not is_bco(name) or protocol == "local":
        if getattr(build_policy(name, {}, T if protocol != "shuffle" else None), "claim", None) is None:
            return None  # a non-private twin: no claim to bracket
    kw: dict = {"runs": 100, "workers": 1}
    if protocol in ("table", "view", "interactive") and not is_bco(name):
        params = SMALL.get(name, {})
        kw["pair"] = _pair(tmp, name, protocol, params)
    elif protocol == "local":
        kw.update(horizon=T, central=False)
    elif protocol == "joint" and name != "jdp-glm":  # jdp-glm at the default horizon: the figure checked below
        params = SMALL.get(name, {})
        kw["horizon"] = T
    try:
        return run(Request(name, params, protocol, **kw))
    except DPAuditError as exc:
        if any(s in str(exc) for s in REFUSALS):
            return None
        raise


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> dict[tuple[str, str], Findings]:
    tmp = tmp_path_factory.mktemp("pairs")
    out = {}
    for e in registered():
        for p in PROTOCOLS:
            f = _audit(tmp, e.name, p)
            if f is not None:
                out[(e.name, p)] = f
    for spec in BUNDLED_CONTEXTUAL:  # finite contextual specs: exact under joint
        out[(spec, "joint")] = run(Request(spec, protocol="joint"))
    return out


def _lowers(f: Findings) -> list[tuple[float, str]]:
    return ([(a.epsilon_lower, a.attack) for a in f.attacks]
            + [(e.epsilon, e.part) for e in f.exact if not e.part.endswith("ledger") and e.claimed is None])


@pytest.mark.slow
def test_no_lower_bound_exceeds_the_upper_bound(sweep):
    assert len(sweep) >= 50  # every policy under every protocol it supports, not a vacuous loop
    assert {p for _, p in sweep} == set(PROTOCOLS)
    proved = 0
    for (name, protocol), f in sweep.items():
        assert f.upper is not None, (name, protocol)
        assert f.upper.refuted is None, (name, protocol, f.upper.refuted)
        if f.epsilon_upper is None:
            assert f.upper.details.get("reason"), (name, protocol)
            continue
        proved += 1
        for low, what in _lowers(f):
            assert low <= f.epsilon_upper * (1 + 1e-6) + 1e-9, (name, protocol, what, low, f.epsilon_upper)
    assert proved >= 45


@pytest.mark.slow
def test_upper_bound_is_within_every_valid_claim(sweep):
    for (name, protocol), f in sweep.items():
        if f.verdict == "violation":  # the bundled finite specs that leak beyond their claim (exact)
            assert name in ("jdp-finite-leak", "jdp-finite-rr-uneven") and f.epsilon_upper > f.epsilon_claimed
            continue
        if f.epsilon_upper is not None and f.epsilon_claimed is not None:
            assert f.epsilon_upper <= f.epsilon_claimed * (1 + 1e-6), (name, protocol, f.epsilon_upper,
                                                                       f.epsilon_claimed)


@pytest.mark.slow
def test_what_has_an_upper_bound(sweep):
    for (name, protocol), f in sweep.items():
        pol = build_policy(name, {}, T) if name not in BUNDLED_CONTEXTUAL else None
        if name in BUNDLED_CONTEXTUAL:
            assert f.upper.method == "exact enumeration" and f.epsilon_upper == pytest.approx(f.exact[0].epsilon)
        elif hasattr(pol, "ledger") or hasattr(pol, "shuffler_outer"):
            assert f.epsilon_upper is not None and f.upper.assumptions, (name, protocol)
        else:  # no ledger, not finite: nothing beyond the claim, and the findings say why
            assert f.epsilon_upper is None and "keeps no ledger" in f.upper.details["reason"], (name, protocol)


@pytest.mark.slow
def test_the_upper_bounds_at_the_defaults_match_known_values(sweep):
    jdp = sweep[("jdp-glm", "joint")]  # default horizon T = 16
    assert jdp.horizon == 16 and jdp.epsilon_upper <= 2.7 and jdp.epsilon_upper == pytest.approx(2.666, abs=2e-3)
    assert jdp.upper.method.startswith("exact Gaussian composition")
    assert float(jdp.ledger["implied_epsilon"]) == pytest.approx(2.891, abs=2e-3)  # the zCDP conversion, looser
    shuf = sweep[("shuffle-glm", "shuffle")]  # defaults: two shuffles of 1000 users, eps0 = 3.5
    assert shuf.epsilon_upper <= 2.3 and shuf.epsilon_upper == pytest.approx(2.2386, abs=1e-3)
    assert "exact composition of the clone bounds" in shuf.upper.method
    assert shuf.upper.details["basic_composition"] == pytest.approx(shuf.epsilon_claimed, rel=1e-9)
    ucb = sweep[("adac-ucb", "table")]  # rho = 1: one Gaussian release per round, mu = sqrt(2)
    assert ucb.epsilon_upper == pytest.approx(6.57297, abs=1e-5) and ucb.epsilon_claimed == pytest.approx(7.0772, abs=1e-4)
    assert any("looser than what dpaudit proves from the ledger, 6.573 (exact Gaussian composition)" in n
               for n in ucb.notes)
    lap = sweep[("adap-ucb", "table")]
    assert lap.epsilon_upper == pytest.approx(0.99998, abs=1e-6) and lap.upper.method.startswith("exact Laplace")
    # a local policy's users: the exact per-user composition
    assert sweep[("ldp-ucb-rr", "local")].epsilon_upper == pytest.approx(sweep[("ldp-ucb-rr", "local")].epsilon_claimed)


def _cli(capsys, *argv: str) -> tuple[int, str]:
    from dpaudit.cli import main

    code = main(list(argv))
    return code, capsys.readouterr().out


def test_account_policy_reports_the_upper_bound(capsys):
    import dpaudit

    a = dpaudit.account("adac-ucb", params={"rho": 1}, delta=1e-5, horizon=200, runs=2)
    assert a.epsilon_upper == pytest.approx(6.57297, abs=1e-5) and a.upper["method"].startswith("exact Gaussian")
    b = dpaudit.account("adap-ucb", params={"epsilon": 1}, delta=1e-5, horizon=200, runs=2)
    assert b.epsilon_upper == pytest.approx(0.99998, abs=1e-6)
    _, out = _cli(capsys, "account", "policy", "adac-ucb", "--param", "rho=1", "--delta", "1e-5", "--horizon", "200",
                  "--runs", "2")
    assert "upper (proved)        epsilon 6.57297 (exact Gaussian composition" in out
    _, out = _cli(capsys, "account", "policy", "adap-ucb", "--param", "epsilon=1", "--delta", "1e-5", "--horizon",
                  "200", "--runs", "2", "--json")
    js = json.loads(out)
    assert js["epsilon_upper"] == pytest.approx(0.99998, abs=1e-6) and js["upper"]["assumptions"]


@pytest.mark.parametrize("name,protocol", [("mutant-shared-noise", "table"), ("mutant-ldp-peek", "local"),
                                           ("mutant-first-unnoised", "table")])
def test_a_lower_bound_above_the_ledger_is_evidence_of_the_bug(tmp_path, name, protocol):
    """The mutants' ledgers miss a use of the data (noise that cancels, a raw reward read, an unnoised release):
    a lower bound exceeds what the ledger would prove, the report says so, and the figure is no proof."""
    kw = {"pair": _pair(tmp_path, name, protocol, {})} if protocol == "table" else {"horizon": T, "central": False}
    f = run(Request(name, protocol=protocol, runs=100, workers=1, **kw))
    assert f.upper.epsilon is not None and f.upper.refuted is not None
    assert f.epsilon_upper is None  # not presented as a proof
    assert max(low for low, _ in _lowers(f)) > f.upper.epsilon
    assert any(n.startswith("upper bound refuted:") and "evidence that the ledger misstates the policy" in n
               for n in f.notes)
    assert f.verdict == "violation"  # the verdict still judges the claim alone


def test_a_ledger_above_the_claim_is_said(tmp_path):
    f = run(Request("mutant-mean-sensitivity", protocol="table", runs=100, workers=1,
                    pair=_pair(tmp_path, "mutant-mean-sensitivity", "table", {})))
    assert f.epsilon_upper > f.epsilon_claimed
    assert any("is above the claim" in n for n in f.notes)


def test_findings_carry_the_upper_side_through_json(tmp_path):
    f = run(Request("adap-ucb", protocol="table", runs=100, workers=1, pair=_pair(tmp_path, "adap-ucb", "table", {})))
    d = f.to_dict()
    assert d["format"] == "dpaudit.audit/2"
    assert d["epsilon_upper"] == f.epsilon_upper and d["upper"]["method"] == f.upper.method
    back = Findings.from_dict(json.loads(json.dumps(d)))
    assert back.epsilon_upper == f.epsilon_upper and back.upper == f.upper
    old = {k: v for k, v in d.items() if k not in ("epsilon_upper", "upper")}
    assert Findings.from_dict(old).epsilon_upper is None and Findings.from_dict(old).upper is None
    assert "proved eps <= 1" in repr(f)
    refuted = Upper(1.0, 1e-5, "m", refuted="a lower bound exceeds it")
    assert refuted.proved is None and Upper(1.0, 1e-5, "m").proved == 1.0


def test_check_policy_prints_the_upper_line(tmp_path, capsys):
    pair = _pair(tmp_path, "adac-ucb", "table", {})
    _, out = _cli(capsys, "check", "policy", "adac-ucb", "--pair", pair, "--runs", "100", "--workers", "1")
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("claim "))
    assert lines[i + 1].startswith("upper       eps <= 6.573 at delta = 1e-05 (exact Gaussian composition")
    _, out = _cli(capsys, "check", "policy", "dp-etc", "--pair", _pair(tmp_path, "dp-etc", "table", {}), "--runs",
                  "100", "--workers", "1", "--json")
    js = json.loads(out)
    assert js["epsilon_upper"] is None and "keeps no ledger" in js["upper"]["details"]["reason"]
    _, out = _cli(capsys, "check", "policy", "table-vs-view-counterexample", "--json")
    fin = json.loads(out)
    assert fin["epsilon_upper"] == fin["epsilon"] and fin["upper"]["method"] == "exact enumeration"


def test_a_one_run_class_has_no_upper_bound(tmp_path):
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "per_run_ucb.py"
    pair = tmp_path / "pair.json"
    d = [[0.0, 0.0]] * T
    pair.write_text(json.dumps({"format": "dpaudit.pair/1", "d": d, "d_prime": [d[0], [1.0, 1.0]] + d[2:]}))
    f = run(Request(f"{example}:PrivateUCB", {"epsilon": "1"}, "table", runs=100, workers=1, pair=str(pair),
                    adapter="per-run", claim="pure:eps=1"))
    assert f.epsilon_upper is None and "keeps no ledger" in f.upper.details["reason"]
    assert math.isfinite(f.epsilon_claimed)


@pytest.mark.slow
def test_the_report_shows_the_bracket_beside_the_claim(tmp_path):
    from dpaudit.api import Audit
    from dpaudit.report import html_report, markdown_report

    f = Audit.of(run(Request("adac-ucb", protocol="table", runs=100, workers=1,
                             pair=_pair(tmp_path, "adac-ucb", "table", {}))))
    md = markdown_report(f)
    banner, claim = md.split("## What ran")[0], md.split("## The claim")[1].split("\n## ")[0]
    assert f"**CONSISTENT**: {f.reason}." in banner  # the verdict's wording is unchanged
    assert f"[{f.epsilon_lower:.4g}, 6.573]" in banner and "bracket" in banner
    assert "The claim eps = 7.077 is looser than what dpaudit proves from the ledger, 6.573" in banner
    assert "dpaudit proves eps <= 6.573 at delta = 1e-05 from the ledger" in claim and "What the upper bound assumes" in claim
    assert "id='upper'" in html_report(f) and "looser than what dpaudit proves" in html_report(f)
    old = {k: v for k, v in f.to_dict().items() if k not in ("epsilon_upper", "upper")}
    assert "bracket" not in markdown_report(old)  # findings without the upper side render without it
    bad = Audit.of(run(Request("mutant-shared-noise", protocol="table", runs=100, workers=1,
                               pair=_pair(tmp_path, "mutant-shared-noise", "table", {}))))
    text = markdown_report(bad)
    assert "No upper bound is proved:" in text.split("## What ran")[0] and "evidence that the ledger misstates" in text
    assert "none (the ledger's figure is refuted by a lower bound)" in text.split("## What ran")[0]


@pytest.mark.slow
def test_no_lower_bound_exceeds_the_upper_bound_with_the_search():
    """The same check with the audits' own neighbouring-pair search (no pair given), at T = 12 and 100 fresh
    runs (the shuffle audit at its default horizon, its first full batch): every registered non-mutant policy
    under every protocol it supports."""
    for e in registered():
        for p in PROTOCOLS:
            if not is_bco(e.name) or p == "local":
                if getattr(build_policy(e.name, {}, T if p != "shuffle" else None), "claim", None) is None:
                    continue
            try:
                f = run(Request(e.name, {}, p, runs=100, horizon=None if p == "shuffle" else 12, workers=1))
            except DPAuditError as exc:
                if any(s in str(exc) for s in REFUSALS):
                    continue
                raise
            assert f.upper is not None and f.upper.refuted is None, (e.name, p)
            if f.epsilon_upper is not None:
                assert all(low <= f.epsilon_upper * (1 + 1e-6) + 1e-9 for low, _ in _lowers(f)), (e.name, p)
                assert f.epsilon_upper <= f.epsilon_claimed * (1 + 1e-6), (e.name, p)
