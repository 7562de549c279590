"""The engine: the same findings whoever runs an audit's pieces; interrupted audits report what finished."""

from __future__ import annotations

import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from dpaudit.errors import DPAuditError
from dpaudit.runner import check as audit_policy, findings_json
from dpaudit.runner.findings import AuditInterrupted
from dpaudit.cli import main
from dpaudit.engine import Engine



_stable = findings_json  # the findings, without how the audit ran


@pytest.mark.slow
@pytest.mark.parametrize("name,params", [("adac-ucb", {"n_arms": "3", "rho": "0.5"}),
                                         ("adac-oful", {"n_arms": "3", "dim": "2"})])
def test_serial_two_processes_and_any_executor_give_the_same_findings(name, params):
    kw = dict(runs=1000, horizon=10, seed=5)
    serial = audit_policy(name, params, workers=1, **kw)
    forked = audit_policy(name, params, workers=2, **kw)
    with ThreadPoolExecutor(3) as ex:
        threads = audit_policy(name, params, executor=ex, **kw)
    assert serial["workers"] == "this process" and forked["workers"] == "2 local processes"
    assert _stable(serial) == _stable(forked) == _stable(threads)
    assert serial["attacks"][0]["samples"] > 0


@pytest.mark.slow
def test_plugin_from_a_file_runs_on_worker_processes(tmp_path):
    src = tmp_path / "mine.py"
    src.write_text(textwrap.dedent("""
        from dpaudit.policies.ucb import AdaCUCB

        class Mine(AdaCUCB):
            pass
    """))
    kw = dict(runs=1000, horizon=12, seed=1)
    one = audit_policy(f"{src}:Mine", {"n_arms": "2"}, workers=1, **kw)
    two = audit_policy(f"{src}:Mine", {"n_arms": "2"}, workers=2, **kw)
    assert two["workers"] == "2 local processes" and _stable(one) == _stable(two)


@pytest.mark.slow
def test_a_policy_that_cannot_be_pickled_runs_here_with_a_note(tmp_path):
    src = tmp_path / "closure.py"
    src.write_text(textwrap.dedent("""
        from dpaudit.policies.ucb import AdaCUCB

        class Closure(AdaCUCB):
            def __init__(self, n_arms=2, rho=1.0):
                super().__init__(n_arms=n_arms, rho=rho)
                self.hook = lambda x: x  # lambdas do not pickle
    """))
    out = audit_policy(f"{src}:Closure", {"n_arms": "2"}, runs=500, horizon=10, workers=2)
    assert out["workers"] == "this process"
    assert any("run with --workers 1" in n and "ran in this process only" in n for n in out["notes"])


def test_engine_validates_and_keeps_order():
    with pytest.raises(DPAuditError, match="workers must be an integer >= 1"):
        Engine(0)
    with Engine(2) as eng:
        assert eng.map(pow, [(2, k) for k in range(10)]) == [2**k for k in range(10)]


def _interrupt_after_ranking(monkeypatch):
    import dpaudit.attacks.neighbours as nb

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(nb, "evaluate", boom)


@pytest.mark.slow
def test_interrupted_audit_reports_what_finished(monkeypatch):
    _interrupt_after_ranking(monkeypatch)
    with pytest.raises(AuditInterrupted) as info:
        audit_policy("adac-ucb", {"n_arms": "3"}, runs=500, horizon=12, workers=1)
    part = info.value.audit.to_dict()
    assert part["verdict"] == "interrupted" and part["witness"] is None
    assert len(part["search"]) > 0 and all("membership_selection_bound" in r for r in part["search"])
    assert part["epsilon_claimed"] > 0 and part["ledger"]["releases"] > 0
    assert "neighbouring-pair search" in part["reason"] and "no verdict" in part["reason"]


@pytest.mark.slow
def test_interrupted_cli_exits_130_and_writes_a_partial_report(monkeypatch, tmp_path, capsys):
    _interrupt_after_ranking(monkeypatch)
    report = tmp_path / "r.md"
    code = main(["check", "policy", "adac-ucb", "--param", "n_arms=3", "--runs", "500", "--horizon", "12",
                 "--workers", "1", "--report", str(report)])
    assert code == 130
    out = capsys.readouterr().out
    assert "INTERRUPTED" in out and "candidate pairs ranked before the interruption" in out
    md = report.read_text()
    assert "INTERRUPTED (no verdict)" in md and "## Neighbouring-pair search" in md
    assert "--horizon 12" in md  # the command line reproduces what finished
    assert (tmp_path / "r.html").exists()


def test_bad_workers_option_exits_2(capsys):
    assert main(["check", "policy", "adac-ucb", "--workers", "0"]) == 2
    assert "--workers must be an integer >= 1" in capsys.readouterr().err


def test_progress_counts_units_as_tasks_finish():
    from dpaudit.engine import progress_counter

    seen: list[str] = []
    counter = progress_counter(seen.append, "views: {done}/{total}", [3, 5, 2])
    Engine(1).map(pow, [(2, 1), (2, 2), (2, 3)], on_result=counter)
    assert seen == ["views: 3/10", "views: 8/10", "views: 10/10"]
    assert progress_counter(None, "x", [1]) is None


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info

    return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=1)


def test_blas_keeps_to_one_thread_here_and_in_workers():
    from dpaudit.engine import one_blas_thread

    with one_blas_thread():
        assert _blas_threads() == 1
    with Engine(2) as eng:
        assert eng.map(_blas_threads, [(), ()]) == [1, 1]


def test_executor_tasks_make_a_fixed_malloc_roomy_in_that_process_only():
    """A Dask nanny starts workers with MALLOC_TRIM_THRESHOLD_ fixed (every numpy temporary a fresh mmap,
    pieces about twice as slow): an executor's task sets glibc's thresholds to its adaptive values there
    (and trims after the task); a process without such a setting is left alone."""
    import os
    import subprocess
    import sys

    code = textwrap.dedent("""
        import pickle
        from dpaudit import engine
        print(engine._call_pickled(pickle.dumps((sum, ([1, 2],)))), engine._malloc != [None])
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    fixed = subprocess.run([sys.executable, "-c", code], env=dict(env, MALLOC_TRIM_THRESHOLD_="65536"),
                           capture_output=True, text=True, check=True).stdout.split()
    free = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.split()
    assert fixed == ["3", str(sys.platform.startswith("linux"))]
    assert free == ["3", "False"]


@pytest.mark.parametrize("name", ["adar-gope", "adac-ucb", "jdp-glm"])
def test_a_policy_travels_as_built_without_its_runs_state(name):
    """After runs in this process (a ledger audit, the cost estimate), a policy pickles to the workers without
    their arrays and ledger (which would be megabytes per task for GOPE), and the copy runs exactly as a fresh one."""
    import pickle

    from dpaudit.policies import make_policy
    from dpaudit.protocols import JointDP, TableDP
    from dpaudit.protocols.joint import joint_pairs
    from dpaudit.runner.setup import with_features

    def fresh():
        return with_features(make_policy(name, {"horizon": "16"} if name == "jdp-glm" else {}), 0)

    if name == "jdp-glm":
        proto, data = JointDP(), joint_pairs(20, 5, 16)[0].d0
    else:
        proto, data = TableDP(), np.full((300, fresh().n_arms), 0.5)
    used = fresh()
    proto.run(used, data, 2000, np.random.default_rng(0), None, record=True) if name != "jdp-glm" else \
        proto.run(used, data, 2000, np.random.default_rng(0), record=True)
    blob = pickle.dumps(used)
    assert len(blob) < 200_000  # (what act sets, e.g. the GLM policy's played contexts, may travel: kilobytes)
    copy = pickle.loads(blob)
    run = (lambda p: proto.run(p, data, 200, np.random.default_rng(1), None, record=True)) if name != "jdp-glm" else \
        (lambda p: proto.run(p, data, 200, np.random.default_rng(1), record=True))
    np.testing.assert_array_equal(run(copy), run(fresh()))


def test_what_is_set_on_a_policy_after_its_runs_still_travels():
    """The local audit sets keep_transcript on a policy that has already run (its ledger audit): the copy the
    workers get must keep it, or they keep no transcript."""
    import pickle

    from dpaudit.policies import make_policy
    from dpaudit.protocols import TableDP

    p = make_policy("ldp-ucb")
    TableDP().run(p, np.full((20, p.n_arms), 0.5), 50, np.random.default_rng(0), None, record=True)
    p.keep_transcript = True
    assert pickle.loads(pickle.dumps(p)).keep_transcript is True


@pytest.mark.slow
@pytest.mark.parametrize("name,protocol,params,kw", [
    ("ldp-ucb-rr", "local", {}, {"horizon": 8, "runs": 1000}),
    ("ldp-linucb", "local", {}, {"horizon": 8, "runs": 500}),
    ("jdp-glm", "joint", {"n_arms": "2", "dim": "2"}, {"horizon": 8, "runs": 1000}),
    ("shuffle-glm", "shuffle", {"n_arms": "2", "dim": "1"}, {"runs": 1000}),
    ("adar-gope", "view", {"n_arms": "3"}, {"horizon": 30, "runs": 500}),
])
def test_every_protocol_gives_the_same_findings_on_one_and_two_processes(name, protocol, params, kw):
    """Every protocol's audit on worker processes, whose copies of the policy come pickled from this process
    after it has run it (a local audit's transcript flag, set after a run, travels with it)."""
    import dpaudit

    one = dpaudit.audit(name, params=params, protocol=protocol, workers=1, seed=2, **kw)
    two = dpaudit.audit(name, params=params, protocol=protocol, workers=2, seed=2, **kw)
    assert _stable(one.to_dict()) == _stable(two.to_dict())
