"""The one audit pipeline: every option under every protocol, the one verdict rule, the typed findings' JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import dpaudit
from dpaudit.attacks.result import AuditResult
from dpaudit.cli import main
from dpaudit.errors import DPAuditError, InternalError
from dpaudit.runner import check, findings_json
from dpaudit.runner.findings import FORMAT, Exact, Findings
from dpaudit.runner.verdict import decide

# small, fast audits of every protocol (policy, params, protocol, extra options)
SMALL = {
    "table": ("adac-ucb", {"n_arms": "2"}, {"runs": 1000, "horizon": 12}),
    "local": ("ldp-ucb-rr", {}, {"runs": 500, "horizon": 8}),
    "local-bco": ("ldp-bco-fkm", {}, {"runs": 500, "horizon": 8}),
    "joint": ("jdp-glm", {"n_arms": "2", "dim": "2"}, {"runs": 1000, "horizon": 8}),
    "shuffle": ("shuffle-glm", {"dim": "1", "n_arms": "2"}, {"runs": 1000}),
}


def _protocol(key: str) -> str:
    return key.split("-")[0]


@pytest.mark.slow
@pytest.mark.parametrize("key", list(SMALL))
def test_workers_do_not_change_the_findings_under_any_protocol(key):
    name, params, kw = SMALL[key]
    one = check(name, params, protocol=_protocol(key), workers=1, **kw)
    two = check(name, params, protocol=_protocol(key), workers=2, **kw)
    assert two["workers"] == "2 local processes" and one["format"] == FORMAT
    assert findings_json(one) == findings_json(two)


@pytest.mark.slow
@pytest.mark.parametrize("key", ["local", "joint", "shuffle"])
def test_a_checkpoint_resumes_every_protocol(key, tmp_path):
    name, params, kw = SMALL[key]
    first = check(name, params, protocol=_protocol(key), checkpoint=str(tmp_path / "cp"), **kw)
    again = check(name, params, protocol=_protocol(key), checkpoint=str(tmp_path / "cp"), **kw)
    assert first["checkpoint"]["pieces_computed"] > 0 and first["checkpoint"]["pieces_reused"] == 0
    assert again["checkpoint"]["pieces_reused"] == first["checkpoint"]["pieces_computed"]
    assert again["checkpoint"]["pieces_computed"] == 0 and findings_json(first) == findings_json(again)


@pytest.mark.parametrize("key", ["table", "local", "joint", "shuffle"])
def test_max_hours_is_checked_up_front_under_every_protocol(key):
    name, params, kw = SMALL[key]
    with pytest.raises(DPAuditError, match="--max-hours"):
        check(name, params, protocol=_protocol(key), max_hours=1e-9, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("key", ["local", "joint", "shuffle"])
def test_claim_replaces_the_declared_claim_under_every_protocol(key):
    name, params, kw = SMALL[key]
    out = check(name, params, protocol=_protocol(key), claim="pure:eps=0.01", **kw)
    assert out["claim"] == "0.01-DP" and 0.0099 < out["epsilon_claimed"] <= 0.01  # pure DP at delta, tightly


@pytest.mark.parametrize("proto", ["joint", "shuffle"])
@pytest.mark.parametrize("flag,value", [("--rewards", "0,1"), ("--adapter", "per-run")])
def test_k_armed_options_are_refused_with_the_reason(capsys, proto, flag, value):
    assert main(["check", "policy", "jdp-glm", "--protocol", proto, flag, value, "--runs", "1000"]) == 2
    err = capsys.readouterr().err
    assert f"{flag} does not apply to --protocol {proto}" in err and "contextual inputs" in err


def _joint_pair_file(path, T=8, K=2, d=2, canary_round=0):
    X = np.zeros((T, K, d))
    X[:, 0, 0], X[:, 1, 0] = 1.0, -1.0
    R0 = np.full((T, K), 0.5)
    R1 = R0.copy()
    R1[canary_round] = 0.0
    R0[canary_round] = 1.0
    path.write_text(json.dumps({"format": "dpaudit.pair/1", "d": R0.tolist(), "d_prime": R1.tolist(),
                                "contexts": X.tolist(), "label": "reward canary"}))
    return path


def test_a_pair_file_drives_the_joint_audit(tmp_path):
    f = _joint_pair_file(tmp_path / "joint.json")
    out = check("jdp-glm", {"n_arms": "2", "dim": "2"}, protocol="joint", pair=str(f), runs=1000)
    assert out["horizon"] == 8 and "pair given in" in " ".join(out["notes"])
    assert out["witness"]["label"] == "reward canary" and out["power"]["pairs_tried"] == 1
    with pytest.raises(DPAuditError, match=r"contexts has shape \[8, 2, 2\]; under --protocol joint it must be"):
        check("jdp-glm", {"n_arms": "2", "dim": "3"}, protocol="joint", pair=str(f), runs=1000)


@pytest.mark.slow
def test_a_pair_file_drives_the_shuffle_audit_and_the_mutant_is_caught(tmp_path):
    from dpaudit.policies.registry import make_policy

    pol = make_policy("shuffle-glm", {"dim": "1", "n_arms": "2"})
    B = int(pol.batch0)
    ctx, r0 = np.zeros((B, 1)), np.zeros(B)
    ctx0 = ctx.copy()
    ctx0[0, 0] = 1.0  # the canary played e1 vs the zero context
    f = tmp_path / "batch.json"
    f.write_text(json.dumps({"format": "dpaudit.pair/1", "d": r0.tolist(), "d_prime": r0.tolist(),
                             "contexts": ctx0.tolist(), "contexts_prime": ctx.tolist()}))
    bad = check("mutant-shuffle-arrival-order", {"dim": "1", "n_arms": "2"}, protocol="shuffle", pair=str(f),
                runs=2000)
    assert bad["verdict"] == "violation" and bad["power"]["pairs_tried"] == 1
    f.write_text(json.dumps({"format": "dpaudit.pair/1", "d": r0.tolist(), "d_prime": r0.tolist(),
                             "contexts": ctx0.tolist()}))
    with pytest.raises(DPAuditError, match="identical"):
        check("shuffle-glm", {"dim": "1", "n_arms": "2"}, protocol="shuffle", pair=str(f), runs=1000)


def test_local_refuses_a_pair_file_with_the_reason(tmp_path):
    with pytest.raises(DPAuditError, match="--pair gives a neighbouring pair of reward tables"):
        check("ldp-ucb-rr", {}, protocol="local", pair=str(tmp_path / "x.json"), runs=500, horizon=8)


# ---- the typed findings and their JSON ---------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("key", ["table", "local", "joint"])
def test_findings_round_trip_through_their_json(key):
    name, params, kw = SMALL[key]
    a = dpaudit.audit(name, params=params, protocol=_protocol(key), workers=1, **kw)
    back = dpaudit.Audit.from_dict(json.loads(a.to_json()))
    assert back.to_dict() == a.to_dict() and back.format == FORMAT
    assert isinstance(back.attacks[0], AuditResult) and all(isinstance(e, Exact) for e in back.exact)
    assert back.power is None or back.power.largest_bound == pytest.approx(a.power.largest_bound)


def test_an_unknown_format_is_refused_and_the_unversioned_one_is_read():
    with pytest.raises(DPAuditError, match="format 'dpaudit.audit/9'"):
        Findings.from_dict({"format": "dpaudit.audit/9", "verdict": "consistent"})
    old = {"verdict": "consistent", "reason": "r", "policy": "p", "params": {}, "protocol": "table", "claim": "1-DP",
           "epsilon_claimed": 1.0, "epsilon_lower": 0.5, "gap": 0.5, "delta": 1e-5, "confidence": 0.95, "horizon": 48,
           "seed": 0, "witness": None, "attacks": [], "ledger": None, "notes": [], "versions": {}, "seconds": 1.0,
           "power": {"pairs_tried": 3, "fresh_runs_per_side": 100, "membership_largest_bound": 4.0,
                     "membership_smallest_detectable": 0.5}, "search": []}
    f = Findings.from_dict(old)
    assert f.power.largest_bound == 4.0 and f.power.smallest_detectable == 0.5 and f.extra["search"] == []


def test_the_verdict_is_an_enum_whose_json_is_its_word():
    assert [v.value for v in dpaudit.Verdict] == ["consistent", "violation", "inconclusive", "interrupted", "exact"]
    assert dpaudit.Verdict.CONSISTENT == "consistent" and f"{dpaudit.Verdict.VIOLATION}" == "violation"
    assert json.dumps({"verdict": dpaudit.Verdict.INCONCLUSIVE}) == '{"verdict": "inconclusive"}'
    assert decide(1.0, 1e-5, [_bound("membership", 1.2)]).verdict is dpaudit.Verdict.VIOLATION
    old = {"verdict": "violation", "reason": "r", "policy": "p", "params": {}, "protocol": "table", "delta": 1e-5,
           "confidence": 0.95}
    f = Findings.from_dict(old)
    assert f.verdict is dpaudit.Verdict.VIOLATION and f.exit_status == 1
    out = f.to_dict()
    assert type(out["verdict"]) is str and out["verdict"] == "violation"
    assert Findings.from_dict(json.loads(json.dumps(out))).to_dict() == out


def test_a_plans_sections_become_the_findings_json_in_their_field_order():
    from dpaudit.runner.central import CentralSections, FamilySearch, HorizonChoice, HorizonSearch
    from dpaudit.runner.sections import Arms

    s = CentralSections(horizon=HorizonChoice("default"), arms=Arms(3), confidence_per_attack=0.975)
    assert s.to_json() == {"horizon_reason": "default", "n_arms": 3, "confidence_per_attack": 0.975}
    s.search_summary = [FamilySearch("threshold", 48, pairs=2)]
    s.horizon = HorizonChoice("discovered", HorizonSearch(None, 96))
    s.reward_alphabet = [0.0, 1.0]
    out = s.to_json()
    assert list(out) == ["reward_alphabet", "horizon_reason", "horizon_search", "n_arms", "confidence_per_attack",
                         "search_summary"]
    assert out["horizon_search"] == {"first_dependent_round": None, "tried_up_to": 96}
    assert out["search_summary"][0] == {"family": "threshold", "horizon": 48, "pairs": 2, "ranked": 0,
                                        "best_pilot": 0.0, "best_ranked": None, "best": None}
    assert Arms(None, "points of the ball").to_json() == {"n_arms": None, "action_space": "points of the ball"}


# ---- the one verdict rule --------------------------------------------------------------------------

def _bound(name: str, eps: float) -> AuditResult:
    return AuditResult(name, eps, 1e-5, 0.975, {"label": name})


def test_the_verdict_rule():
    v = decide(1.0, 1e-5, [_bound("membership", 1.2)])
    assert v.verdict == "violation" and v.witness["attack"] == "membership" and "exceeds the claimed eps = 1" in v.reason
    v = decide(1.0, 1e-5, [_bound("membership", 0.3)], [Exact("per-user ledger", 1.5, "composed")])
    assert v.verdict == "violation" and v.witness["attack"] == "per-user ledger"
    # an exact figure within its numerical precision of the claim is not a violation
    assert decide(1.0, 1e-5, [_bound("membership", 0.3)], [Exact("ledger", 1.0 + 1e-12, "m")]).verdict == "consistent"
    # a reported (not judged) exact figure above the claim is not a violation
    assert decide(1.0, 1e-5, [_bound("m", 0.3)], [Exact("ledger", 9.0, "m", judged=False)]).verdict == "consistent"
    v = decide(1.0, 1e-5, [_bound("membership", 0.0), _bound("likelihood", 0.0)])
    assert v.verdict == "inconclusive" and "could not be told apart" in v.reason
    v = decide(5.0, 1e-5, [_bound("membership", 0.2)], blackbox_only=True, ceiling=3.0, runs=100)
    assert v.verdict == "inconclusive" and "largest bound 100 fresh runs per side" in v.reason
    v = decide(1.0, 1e-5, [_bound("membership", 0.2)], unseen="no release happened")
    assert v.verdict == "inconclusive" and v.reason.startswith("no release happened")
    v = decide(1.0, 1e-5, [_bound("likelihood", 0.4)],
               renyi_violation=[{"order": 2.0, "D_alpha_lower": 3.0, "claimed": 2.0}])
    assert v.verdict == "violation" and "D_2 >= 3" in v.reason
    # an exact audit (no sampling): its figures are the whole evidence
    assert decide(1.1, 1e-5, [], [Exact("joint enumeration", 1.0, "m")]).verdict == "consistent"
    v = decide(1.1, 1e-5, [], [Exact("joint enumeration", 1.9, "m")])
    assert v.verdict == "violation" and v.epsilon_lower == 1.9 and "(exact, no sampling)" in v.reason
    with pytest.raises(InternalError, match="NaN"):  # a NaN bound is dpaudit's bug, not the input's
        decide(1.0, 1e-5, [_bound("membership", math.nan)])


def test_a_local_audit_with_no_power_is_not_consistent():
    """A local audit whose every bound is 0 has no power: inconclusive, never consistent. (At eps = 0.001 the
    channel's messages move by mu = 6e-5 noise scales: 4,000 exact losses see delta(0) ~ 2.6e-5 about 0.1 times,
    so even the channel likelihood part's order statistic stays at 0.)"""
    out = check("ldp-gloc", {"epsilon": "0.001"}, protocol="local", runs=200, horizon=4, central=False)
    assert [a["attack"] for a in out["attacks"]] == ["channel", "channel likelihood", "transcript"]
    assert out["epsilon_lower"] == 0 and out["verdict"] == "inconclusive"


def test_every_user_is_a_candidate_of_the_transcript_part(tmp_path):
    """A server that also logs the raw click of users 9, 19, 29, ...: none of them is in a fixed list of
    users such as (0, 1, T/2, T-2), so only a search over every user sees it (the correct server stays consistent)."""
    plug = tmp_path / "late_logging.py"
    plug.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent / 'thirdparty')!r})\n"
        "from ldp_logging import LoggingRRClickServer, RRClickServer\n"
        "class LateLogging(LoggingRRClickServer):\n"
        "    def _record(self, t, messages, clicks):\n"
        "        super()._record(t + 1, messages, clicks)\n"
        "    def _estimates(self, t, messages, clicks):\n"
        "        return super()._estimates(t + 1, messages, clicks)\n")
    bad = check(f"{plug}:LateLogging", {}, protocol="local", runs=2000, horizon=48, central=False)
    tr = next(a for a in bad["attacks"] if a["attack"] == "transcript")
    # (the count stops at the first look whose bound exceeds the claim, so the bound is that look's)
    assert bad["verdict"] == "violation" and tr["epsilon_lower"] > bad["epsilon_claimed"]
    assert tr["witness"]["label"].startswith("user 9")
    assert len(tr["details"]["screened_users"]) == 47


@pytest.mark.slow
@pytest.mark.parametrize("key,part,where", [("joint", "membership", "lda_attack"),
                                            ("local", "channel", "TranscriptSource")])
def test_an_interrupted_audit_of_any_protocol_reports_what_finished(monkeypatch, key, part, where):
    import dpaudit.runner.joint as joint_plan
    import dpaudit.runner.local as local_plan
    from dpaudit.runner.findings import AuditInterrupted

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(joint_plan if key == "joint" else local_plan, where, stop)
    name, params, kw = SMALL[key]
    with pytest.raises(AuditInterrupted) as info:
        check(name, params, protocol=_protocol(key), **kw)
    partial = info.value.audit
    assert partial.verdict == "interrupted" and "no verdict" in partial.reason
    assert [a.attack for a in partial.attacks] == [part] and partial.epsilon_claimed is not None


@pytest.mark.slow
def test_a_test_that_stopped_once_settled_says_how_many_runs_it_used():
    import dpaudit
    a = dpaudit.audit("adac-ucb", runs=50000, seed=0, workers=1)
    d = a.to_dict()
    mem = next(x for x in d["attacks"] if x["attack"] == "membership")
    used = mem["details"]["fresh_runs_used"]
    assert used < 50000 and mem["details"]["stopped_early"] == "futile"
    assert d["power"]["fresh_runs_used"] == used and f"after {used} of 50000" in d["power"]["note"]
    part = next(p for p in d["parts"] if p["name"] == "membership")
    assert f"{used} of 50000 fresh runs" in part["summary"]
    assert f"after {used} of them" in a.to_markdown()
    assert dpaudit.Audit.from_dict(d).to_dict()["power"] == d["power"]
