"""The public Python API: dpaudit.audit for a name, a class and an instance; Audit.to_dict() equals
--json; DpEvent claims; describe; readable reprs; import cost; dpaudit.testing without hypothesis."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dpaudit
from dpaudit.cli import main

FAST = dict(horizon=6, runs=1500, workers=1, seed=3)
FAST_ARGV = ["--horizon", "6", "--runs", "1500", "--workers", "1", "--seed", "3"]


def _strip_times(x):
    """Findings without wall-clock times and the up-front estimate (timed), the only things two identical
    audits may differ in."""
    if isinstance(x, dict):
        return {k: _strip_times(v) for k, v in x.items() if k not in ("seconds", "command", "estimate")}
    if isinstance(x, list):
        return [_strip_times(v) for v in x]
    return x


@pytest.fixture(scope="module")
def by_name():
    return dpaudit.audit("adac-ucb", params={"n_arms": 2, "rho": 0.5}, **FAST)


def test_audit_by_name_is_typed_and_frozen(by_name):
    a = by_name
    assert isinstance(a, dpaudit.Audit) and a.verdict == "consistent"
    assert isinstance(a.epsilon_claimed, float) and isinstance(a.epsilon_lower, float)
    assert a.gap == pytest.approx(a.epsilon_claimed - a.epsilon_lower)
    assert a.claim == "0.5-zCDP" and a.ledger["implied"] == "0.5-zCDP"
    assert [r.attack for r in a.attacks] == ["membership", "likelihood"]
    assert all(r.epsilon_lower <= a.epsilon_claimed for r in a.attacks)
    assert a.witness["attack"] in ("membership", "likelihood") and a.versions["numpy"] == np.__version__
    assert "search" in a.extra and a.exit_status == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.verdict = "violation"  # type: ignore[misc]
    assert repr(a).startswith("Audit(consistent: adac-ucb") and "gap" in repr(a)
    assert a.command.startswith("dpaudit.audit('adac-ucb', params={'n_arms': 2, 'rho': 0.5}")


def test_to_dict_equals_cli_json(by_name, capsys):
    code = main(["check", "policy", "adac-ucb", "--param", "n_arms=2", "--param", "rho=0.5", "--json"] + FAST_ARGV)
    cli = json.loads(capsys.readouterr().out)
    assert code == 0
    assert _strip_times(cli) == _strip_times(by_name.to_dict())
    assert set(cli) == set(by_name.to_dict())
    # and the JSON reads back into the same Audit
    back = dpaudit.Audit.from_dict(json.loads(by_name.to_json()))
    assert back.to_dict() == by_name.to_dict()


@pytest.mark.slow
def test_class_and_name_give_the_same_findings(by_name):
    from dpaudit.policies.ucb import AdaCUCB

    by_class = dpaudit.audit(AdaCUCB, params={"n_arms": 2, "rho": 0.5}, **FAST)
    assert by_class.policy == "dpaudit.policies.ucb:AdaCUCB"
    a, b = _strip_times(by_class.to_dict()), _strip_times(by_name.to_dict())
    for d in (a, b):
        d.pop("policy")
    assert a == b
    # string parameters are typed by the constructor's signature, as --param values are
    again = dpaudit.audit(AdaCUCB, params={"n_arms": "2", "rho": "0.5"}, **FAST)
    assert again.epsilon_lower == by_class.epsilon_lower


PLUGIN = '''
import numpy as np
from dp_accounting import dp_event

class Leaky:
    """No ledger; plays the arm whose first reward was highest; claims eps = 0.5 as a dp-accounting event."""

    def __init__(self, n_arms: int = 2, scale: float = 2.0):
        self.n_arms = n_arms
        self.claim = dp_event.LaplaceDpEvent(scale)     # a Laplace release of noise multiplier 2: eps = 0.5

    def reset(self, n_runs, rng):
        self.n, self.rng = n_runs, rng
        self.first = np.zeros((n_runs, self.n_arms))

    def act(self, t, arms=None):
        if t < self.n_arms:
            return np.full(self.n, t)
        return np.argmax(self.first, axis=1)

    def observe(self, t, actions, rewards):
        if t < self.n_arms:
            self.first[np.arange(self.n), actions] = rewards
'''


@pytest.fixture()
def leaky(tmp_path):
    path = tmp_path / "leaky_plugin.py"
    path.write_text(textwrap.dedent(PLUGIN))
    return f"{path}:Leaky"


def test_instance_with_a_dp_event_claim(leaky):
    from dpaudit.policies.registry import load_policy_class

    cls = load_policy_class(leaky)
    inst = cls(n_arms=2)
    result = dpaudit.audit(inst, horizon=6, runs=3000, workers=1)
    assert result.verdict == "violation" and result.exit_status == 1
    assert result.claim == "Laplace eps = 0.5" and result.epsilon_claimed == pytest.approx(0.5, abs=1e-3)
    assert result.policy.endswith(":Leaky (instance)") and result.ledger is None
    # the same plug-in by its spec string, through the CLI
    assert main(["check", "policy", leaky, "--horizon", "6", "--runs", "3000", "--workers", "1"]) == 1


def test_bad_policy_objects_are_refused_in_one_sentence():
    from dpaudit.policies.ucb import AdaCUCB

    with pytest.raises(dpaudit.DPAuditError, match="already-built AdaCUCB"):
        dpaudit.audit(AdaCUCB(), params={"rho": 1.0})

    class NotAPolicy:
        n_arms = 2

    with pytest.raises(dpaudit.DPAuditError, match="lacks reset, act, observe"):
        dpaudit.audit(NotAPolicy)
    with pytest.raises(dpaudit.DPAuditError, match="has no parameter 'sigma'"):
        dpaudit.audit(AdaCUCB, params={"sigma": 1})
    with pytest.raises(dpaudit.DPAuditError, match="progress must be"):
        dpaudit.audit("adac-ucb", progress="yes")


def test_describe_names_parameters_claim_and_source(capsys):
    d = dpaudit.describe("adac-ucb")
    assert [p["name"] for p in d["parameters"]] == ["n_arms", "rho", "beta"]
    assert d["parameters"][1] == {"name": "rho", "type": "float", "required": False, "default": 1.0}
    assert d["claim"] == "1-zCDP" and d["claim_note"] == "at the defaults"
    assert any("Azize & Basu (2023a)" in s and "Alg. 4" in s for s in d["follows"]) and d["has_ledger"]
    assert d["papers"] == ['Azize & Basu (2023a). "Concentrated Differential Privacy for Bandits". arXiv:2309.00557.']
    assert main(["describe", "adac-ucb", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"format": "dpaudit.describe/1", **json.loads(json.dumps(d))}
    assert main(["describe", "adar-gope"]) == 0
    text = capsys.readouterr().out
    assert "alpha" in text and "Azize & Basu (2023b)" in text and "Rényi Differentially Private Bandits" in text
    assert "claim" in text and "seed 00" not in text
    assert main(["describe", "no-such-policy"]) == 2


def test_list_json(capsys):
    assert main(["list", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = {p["name"] for p in out["policies"]}
    assert {"adac-ucb", "adar-gope", "adac-oful"} <= names and "table-vs-view-counterexample" in out["finite_specs"]
    assert main(["list", "--mutants", "--json"]) == 0
    mutants = json.loads(capsys.readouterr().out)["policies"]
    assert mutants and all(p["mutant"] for p in mutants)


def test_readable_reprs():
    from dpaudit.policies import make_policy
    from dpaudit.policies.finite import load_spec

    assert repr(load_spec("table-vs-view-counterexample")) == \
        "FinitePolicy(T=3, K=2, rewards=[0, 1], label='table-vs-view-counterexample')"
    assert repr(make_policy("adac-ucb", {"n_arms": "3"})) == "AdaCUCB(n_arms=3, rho=1.0, beta=4.0)"


def _fresh_python(code: str) -> str:
    # outside the repository: `python -c` puts the working directory first on sys.path, where the
    # source folder dpaudit/ (without attacks/ and accountants/) would shadow the installed package
    import tempfile

    with tempfile.TemporaryDirectory() as away:
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=away)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


@pytest.mark.slow
def test_import_is_cheap():
    heavy = ("numpy", "scipy", "statsmodels", "pandas", "matplotlib", "dp_accounting")
    out = _fresh_python("import sys, time; t = time.perf_counter(); import dpaudit; "
                        "print(time.perf_counter() - t); print(','.join(m for m in %r if m in sys.modules))" % (heavy,))
    seconds, loaded = out.split("\n") if "\n" in out else (out, "")
    assert loaded == ""  # nothing heavy until a function needs it
    assert float(seconds) < 0.3
    # nor do the attacks or the command line's parser (dpaudit --help): the statistics and plotting stacks come
    # with the first call that needs them
    out = _fresh_python("import sys; import dpaudit.attacks; from dpaudit.cli import build_parser; build_parser(); "
                        "print(','.join(m for m in ('statsmodels', 'pandas', 'matplotlib', 'scipy.optimize') "
                        "if m in sys.modules))")
    assert out == ""
    # the lazy names and sub-packages still resolve
    assert _fresh_python("import dpaudit; print(dpaudit.ZCDP(0.5), dpaudit.attacks.__name__)") == \
        "0.5-zCDP dpaudit.attacks"


def test_testing_without_hypothesis_says_what_to_install():
    code = ("import sys; sys.modules['hypothesis'] = None\n"
            "try:\n    import dpaudit.testing\nexcept ImportError as e:\n    print(e)")
    msg = _fresh_python(code)
    assert 'pip install "dpaudit[testing]"' in msg and msg.count("\n") == 0


def test_py_typed_is_shipped():
    from importlib import resources

    assert resources.files("dpaudit").joinpath("py.typed").is_file()


def test_progress_bar_plain_lines_off_a_terminal():
    import io

    from dpaudit.progress import ProgressBar

    buf = io.StringIO()
    bar = ProgressBar("dpaudit check", buf, tty=False, every=3600)
    for i in range(1, 11):
        bar(f"membership: {i * 100}/1000 fresh views")
    bar("likelihood: 5/10 runs")
    bar.close()
    lines = buf.getvalue().splitlines()
    # the first of each stage and the stage's last line, never a carriage return
    assert [ln.split(" [")[0] for ln in lines] == ["dpaudit check: membership: 100/1000 fresh views",
                                                   "dpaudit check: membership: 1000/1000 fresh views",
                                                   "dpaudit check: likelihood: 5/10 runs"]
    assert "\r" not in buf.getvalue()
    tty = io.StringIO()
    bar = ProgressBar("dpaudit check", tty, tty=True)
    bar("membership: 500/1000 fresh views")
    bar("membership: 1000/1000 fresh views")
    bar.close()
    assert "1000/1000" in tty.getvalue() and "\r" in tty.getvalue()  # a tqdm bar, redrawn in place


@pytest.mark.slow
def test_plugin_template_is_consistent_as_shipped(capsys):
    from pathlib import Path

    template = Path(__file__).resolve().parent.parent / "examples" / "plugin_template.py"
    code = main(["check", "policy", f"{template}:MyPolicy", "--workers", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["verdict"] == "consistent", out["reason"]
    assert out["ledger"]["implied"] == "0.5-zCDP" and out["ledger"]["shared_rounds"] == 0
    assert {a["attack"] for a in out["attacks"]} == {"membership", "likelihood"}
    assert out["epsilon_lower"] > 0  # the audit saw the releases: a consistent verdict with power
    d = dpaudit.describe(f"{template}:MyPolicy")
    assert d["has_ledger"] and d["claim"] == "0.5-zCDP" and any("Azize & Basu" in f for f in d["follows"])
    assert any("Concentrated Differential Privacy for Bandits" in r for r in d["papers"])


def test_mechanism_keeps_a_copy_of_the_centre():
    """A policy that zeroes its sums after a release (the template does) must not rewrite its ledger."""
    from dpaudit.mechanisms import GaussianMechanism, Ledger

    ledger, sums = Ledger(3), np.ones((3, 1))
    GaussianMechanism(1.0, 1.0).release(sums, np.random.default_rng(0), ledger=ledger)
    sums[:] = 0.0
    assert np.all(ledger.releases[0].centre == 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("doc", ["README.md", "docs/reference.md"])
def test_readme_python_example_runs_as_written(doc, tmp_path, monkeypatch, capsys):
    """The Python API block of README.md (the short example) and of docs/reference.md (the long one),
    executed as written (in a scratch folder: it writes a report)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / doc).read_text()
    section = text.split("## Python API", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, doc, "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert out.startswith("Audit(consistent:") and "pld" not in out.split("\n")[0]
    assert (tmp_path / "reports" / "adac-ucb-api.md").exists() and (tmp_path / "reports" / "adac-ucb-api.html").exists()


def test_account_a_policy_from_python():
    from dpaudit.policies.ucb import AdaCUCB

    ok = dpaudit.account(AdaCUCB, params={"n_arms": 3, "rho": 0.5}, delta=1e-5, horizon=500)
    assert ok.status == "consistent" and ok.claim == ok.ledger == "0.5-zCDP" and ok.shared_rounds == 0
    bad = dpaudit.account("mutant-no-forgetting", params={"n_arms": 3}, delta=1e-5, horizon=500)
    assert bad.status == "exceeds-claim" and bad.shared_rounds > 0 and bad.epsilon > bad.claim_epsilon


@pytest.mark.slow
def test_testing_assertions_keep_hypothesis_deadline_on_the_first_example():
    """In a fresh interpreter (nothing warmed up), the assertions run inside @given at hypothesis's default
    200 ms deadline: none of them imports a heavy module on its first call. (The health check on slow data
    generation is off: it measures the machine's load, not dpaudit.)"""
    code = textwrap.dedent('''
        from hypothesis import HealthCheck, given, settings
        from dpaudit.testing import (assert_finite_policy_renyi, assert_ledger_within_claim,
                                     assert_mechanism_renyi, finite_policies, neighbouring_tables)
        from dpaudit.accountants import ZCDP
        from dpaudit.mechanisms import GaussianMechanism
        from dpaudit.policies.ucb import AdaCUCB

        @settings(max_examples=3, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
        @given(neighbouring_tables(horizon=12, arms=3))
        def check_ledger(pair):
            assert_ledger_within_claim(AdaCUCB(n_arms=3, rho=0.5), pair[0])

        @settings(max_examples=3, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
        @given(finite_policies(horizon=2))
        def check_finite(policy):
            assert_finite_policy_renyi(policy, float("inf"), 2.0)

        @settings(max_examples=2, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
        @given(neighbouring_tables(horizon=2, arms=2))
        def check_mechanism(_):
            assert_mechanism_renyi(GaussianMechanism(1.0, 2.0), 2.0)

        check_ledger(); check_finite(); check_mechanism()
        print("ok")
    ''')
    assert _fresh_python(code) == "ok"


@pytest.mark.slow
def test_leakage_against_the_horizon_is_measured_on_request():
    a = dpaudit.audit("mutant-no-forgetting", params={"n_arms": 2}, horizon=12, runs=1500, workers=1,
                      horizons=[6, 24])
    rows = a.extra["leakage_vs_horizon"]
    assert [r["horizon"] for r in rows] == [6, 24]
    assert all(r["membership"] >= 0 and r["likelihood"] >= 0 for r in rows)
    assert rows[1]["likelihood"] > rows[0]["likelihood"]  # no forgetting: leakage grows with T
    plain = dpaudit.audit("mutant-no-forgetting", params={"n_arms": 2}, horizon=12, runs=1500, workers=1)
    assert plain.epsilon_lower == a.epsilon_lower  # its own seed: the verdict is unchanged
    assert 'id=\'fig-horizon\'' in a.to_html()


@pytest.mark.slow
def test_claim_override_as_a_dp_event_or_text():
    from dp_accounting import dp_event

    a = dpaudit.audit("adac-ucb", params={"n_arms": 2}, claim=dp_event.ZCDpEvent(0.001), **FAST)
    b = dpaudit.audit("adac-ucb", params={"n_arms": 2}, claim="zcdp:rho=0.001", **FAST)
    assert a.claim == b.claim == "0.001-zCDP" and a.verdict == b.verdict == "violation"
    assert a.epsilon_lower == b.epsilon_lower > a.epsilon_claimed
