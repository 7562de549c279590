"""The process adapter (dpaudit/adapters/process.py): a policy in another process or language, over the
line-delimited JSON protocol dpaudit.process/1 (docs/outside-code.md).

Small fake servers written in Python (this interpreter) exercise each failure: a crash, a hang, garbage
on the pipe, a wrong arm, an error reply, a wrong protocol version; each must end in one sentence naming
the step and what came back, with the process gone. The Node.js reference policy (examples/process_ucb.js)
is audited end to end at a short horizon: consistent as shipped, a violation with --leaky.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import textwrap
import time

import numpy as np
import pytest

from dpaudit.adapters import build_policy, parse_adapter
from dpaudit.adapters.process import PROTOCOL, ProcessPolicy, json_numbers
from dpaudit.errors import DPAuditError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_UCB = os.path.join(ROOT, "examples", "process_ucb.js")
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

#: a minimal batched server; FAULT (an env-free constant substituted below) picks the failure
SERVER = textwrap.dedent('''
    import json, sys, time, os
    FAULT = {fault!r}
    K = 2
    state = {{}}
    def reply(obj):
        sys.stdout.write(json.dumps(obj) + "\\n"); sys.stdout.flush()
    for line in sys.stdin:
        m = json.loads(line)
        op = m["op"]
        if op == "hello":
            if FAULT == "version":
                reply({{"protocol": "dpaudit.process/0", "n_arms": K}}); continue
            reply({{"protocol": "{protocol}", "n_arms": K, "batch": FAULT != "per-run", "name": "fake"}})
        elif op == "claim":
            reply({{"claim": "pure:eps=1"}})
        elif op == "reset":
            state["n"] = m["runs"]; state["t"] = 0
            reply({{"ok": True}})
        elif op == "act":
            t = m["t"]
            if t == 3 and FAULT == "crash":
                sys.stderr.write("Traceback: something broke in round 3\\n"); sys.exit(7)
            if t == 3 and FAULT == "hang":
                time.sleep(60)
            if t == 3 and FAULT == "garbage":
                sys.stdout.write("arm zero, please\\n"); sys.stdout.flush(); continue
            if t == 3 and FAULT == "error":
                reply({{"error": "my policy cannot count past 3"}}); continue
            if "run" in m:
                reply({{"arm": 5 if (t == 3 and FAULT == "arm" and m["run"] == 4) else t % K}})
            else:
                arms = [t % K] * state["n"]
                if t == 3 and FAULT == "arm":
                    arms[4] = 5
                reply({{"arms": arms}})
        elif op == "observe":
            reply({{"ok": True}})
''')


def fake(tmp_path, fault: str) -> str:
    path = tmp_path / f"server_{fault}.py"
    path.write_text(SERVER.format(fault=fault, protocol=PROTOCOL))
    return f"{sys.executable} {path}"


def drive(policy: ProcessPolicy, n: int = 8, T: int = 6) -> np.ndarray:
    policy.reset(n, np.random.default_rng(0))
    views = np.empty((n, T), dtype=np.int64)
    for t in range(T):
        views[:, t] = policy.act(t)
        policy.observe(t, views[:, t], np.full(n, 0.5))
    return views


def gone(policy: ProcessPolicy, pid: int) -> bool:
    """Whether the process ``pid`` has ended (reaped: no zombie left either)."""
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("kind", ["digits", "digit floats", "ints", "few floats", "floats", "negative", "empty"])
def test_the_fast_encoding_writes_what_json_writes(kind):
    rng = np.random.default_rng(len(kind))
    means = np.array([0.5055569932898115, 0.4944430067101885, 1.0, 0.0, 1e-20])
    v = {"digits": rng.integers(0, 10, 3000), "digit floats": rng.integers(0, 2, 3000).astype(float),
         "ints": rng.integers(0, 10**6, 3000), "few floats": means[rng.integers(0, 5, 3000)],
         "floats": rng.random(3000), "negative": -means[rng.integers(0, 5, 300)], "empty": np.array([])}[kind]
    assert json_numbers(v) == json.dumps(v.tolist(), separators=(",", ":"))


@pytest.mark.parametrize("batch", [True, False])
def test_a_well_behaved_server_is_driven_batched_or_per_run(tmp_path, batch):
    p = ProcessPolicy(fake(tmp_path, "none"), batch=batch)
    assert p.n_arms == 2 and str(p.claim) == "1-DP" and p.batch is batch
    views = drive(p)
    assert (views == np.arange(6) % 2).all()
    pid = p._proc.proc.pid
    p.close()
    assert gone(p, pid)


@pytest.mark.parametrize("fault, pattern", [
    ("crash", r"process `.*server_crash.py` exited with code 7 during act at round 3 \(8 runs\); its last line on "
              r"stderr: Traceback: something broke in round 3\.$"),
    ("garbage", r"process `.*` answered act at round 3 \(8 runs\) with 'arm zero, please', which is not a JSON object "
                r"on one line"),
    ("error", r"process `.*` reported an error at act at round 3 \(8 runs\): my policy cannot count past 3\.$"),
    ("arm", r"process `.*` answered act at round 3 with arm 5 for run 4; an arm is an integer in 0\.\.1\.$"),
])
def test_each_failure_is_one_sentence_naming_the_step_and_what_came_back(tmp_path, fault, pattern):
    p = ProcessPolicy(fake(tmp_path, fault))
    pid = p._proc.proc.pid
    with pytest.raises(DPAuditError, match=pattern) as err:
        drive(p)
    assert "\n" not in str(err.value)
    p.close()
    assert gone(p, pid)


def test_a_wrong_arm_of_one_run_is_named_per_run_too(tmp_path):
    p = ProcessPolicy(fake(tmp_path, "arm"), batch=False)
    with pytest.raises(DPAuditError, match=r"answered act at round 3 with arm 5 for run 4; an arm is an integer"):
        drive(p)
    p.close()


@pytest.mark.slow
def test_a_hang_is_killed_at_the_timeout_and_named(tmp_path):
    p = ProcessPolicy(fake(tmp_path, "hang"), timeout=3.0)
    pid = p._proc.proc.pid
    t0 = time.monotonic()
    with pytest.raises(DPAuditError, match=r"process `.*` did not answer act at round 3 \(8 runs\) within 3 s, so it "
                                           r"was killed; .*timeout=SECONDS, else --call-timeout"):
        drive(p)
    assert time.monotonic() - t0 < 20
    assert gone(p, pid)  # killed by dpaudit, not left sleeping


def test_the_call_limit_of_the_sandbox_is_the_default_timeout(tmp_path):
    from dpaudit.sandbox import call_limit

    with call_limit(7.5):
        p = ProcessPolicy(fake(tmp_path, "hang"))
    assert p.timeout == 7.5
    p.close()
    # by default the scaled watchdog's rule on the process's own answers: 60 s for the first, then 100 times
    # the slowest so far, at least 30 s
    p = ProcessPolicy(fake(tmp_path, "none"))
    assert p.timeout == "scaled" and p._proc.slowest is not None and p._proc.limit() == 30.0
    p._proc.slowest = 2.0
    assert p._proc.limit() == 200.0
    p.close()


def test_a_wrong_protocol_version_and_a_missing_command_are_refused(tmp_path):
    with pytest.raises(DPAuditError, match=r"answered hello with protocol 'dpaudit.process/0'; dpaudit speaks "
                                           r"'dpaudit.process/1'"):
        ProcessPolicy(fake(tmp_path, "version"))
    with pytest.raises(DPAuditError, match=r"cannot start `no-such-command-xyz --flag`: No such file or directory"):
        ProcessPolicy("no-such-command-xyz --flag")
    with pytest.raises(DPAuditError, match="exited with code 1 during hello"):
        ProcessPolicy(f"{sys.executable} -c 'import sys; sys.exit(1)'")


def test_the_options_parse_and_bad_ones_are_one_sentence():
    assert parse_adapter("process") == ("process", {})
    assert parse_adapter("process:batch=off,n_arms=3,timeout=2.5") == (
        "process", {"batch": False, "n_arms": 3, "timeout": 2.5})
    with pytest.raises(DPAuditError, match="process adapter option timeout must be a number of seconds > 0, got '-1'"):
        parse_adapter("process:timeout=-1")
    with pytest.raises(DPAuditError, match="process adapter option 'speed=2' must be KEY=VALUE with KEY one of batch"):
        parse_adapter("process:speed=2")
    # from Python, the timeout as given is named (not the NaN it fails to convert to)
    with pytest.raises(DPAuditError, match=r"timeout must be a number of seconds in \(0, .*\], got 'abc'"):
        ProcessPolicy(f"{sys.executable} -c pass", timeout="abc")


def test_the_process_survives_pickling_to_a_worker_as_a_fresh_process(tmp_path):
    import pickle

    p = ProcessPolicy(fake(tmp_path, "none"))
    q = pickle.loads(pickle.dumps(p))
    assert q._proc is None and q.n_arms == 2
    assert (drive(q) == drive(p)).all()
    p.close()
    q.close()


@pytest.mark.tooling
@needs_node
def test_the_node_reference_gives_the_same_arms_batched_or_per_run():
    a = build_policy(f"node {NODE_UCB}", {"epsilon": "1"}, 48, adapter="process")
    b = build_policy(f"node {NODE_UCB}", {"epsilon": "1"}, 48, adapter="process:batch=off")
    assert a.batch and not b.batch and str(a.claim) == "1-DP"
    assert (drive(a, 50, 20) == drive(b, 50, 20)).all()
    a.close()
    b.close()


@pytest.mark.tooling
@needs_node
def test_the_node_reference_is_consistent_and_its_leaky_flag_is_flagged():
    """Both audited as a user would (the claim is the process's own answer to ``claim``), at a short
    horizon: the shipped policy is consistent, ``--leaky`` (the mean's noise scale on the sum: eps * n for an
    episode of n rounds) a violation from 1,000 fresh runs per side. "Consistent" needs a positive lower bound
    (evidence of power); at 1,000 runs the correct policy's is 0 at some seeds (seed 0 with numpy 2.4, node 20:
    every pair's views alike by chance, so `inconclusive`), at 2,000 it is 0.19-0.46 at seeds 0-4."""
    import dpaudit

    ok = dpaudit.audit(f"node {NODE_UCB}", adapter="process", runs=2000, horizon=48, workers=1)
    bad = dpaudit.audit(f"node {NODE_UCB} --leaky", adapter="process", runs=1000, horizon=48, workers=1)
    assert ok.verdict == "consistent", ok.verdict
    assert bad.verdict == "violation" and bad.epsilon_lower > 1.0, (bad.verdict, bad.epsilon_lower)


def test_an_interrupt_kills_the_process_and_propagates(tmp_path):
    """Ctrl-C while dpaudit waits for an answer: the KeyboardInterrupt goes on to the caller (the runner turns
    it into partial findings) and the process is gone."""
    import signal

    p = ProcessPolicy(fake(tmp_path, "hang"), timeout=30.0)
    pid = p._proc.proc.pid

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            drive(p)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert gone(p, pid)


# ---- bad input through the CLI, as a user runs it: one sentence and exit 2, or an audit -----------------------

#: a strict batched server: anything before hello is an error; FAULT (argv[1]) picks a misbehaviour
STRICT = textwrap.dedent('''
    import json, os, random, sys
    FAULT = sys.argv[1]
    K = 2
    state = {"greeted": False}
    def reply(obj):
        sys.stdout.write(json.dumps(obj) + "\\n"); sys.stdout.flush()
    if FAULT == "fork":
        if os.fork() > 0:
            os._exit(0)  # the original process exits at once; its child keeps the pipes and answers
    for line in sys.stdin:
        m = json.loads(line)
        op = m["op"]
        if op != "hello" and not state["greeted"]:
            reply({"error": op + " before hello"}); continue
        if op == "hello":
            state["greeted"] = True
            hello = {"protocol": "dpaudit.process/1", "n_arms": K, "batch": True, "name": "strict"}
            if FAULT == "batch-text":
                hello["batch"] = "false"
            if FAULT == "wide":
                hello["reward_range"] = [-1e308, 1e308]
            reply(hello)
            if FAULT == "extra":
                reply({"note": "ready"})
        elif op == "claim":
            reply({"claim": "pure:eps=1"})
        elif op == "reset":
            state["n"] = m["runs"]
            state["rng"] = random.Random() if FAULT == "os-seeded" else random.Random(m["seed"])
            reply({"ok": True})
        elif op == "act":
            arms = [state["rng"].randrange(K) for _ in range(state["n"])]
            if FAULT == "huge" and m["t"] == 2:
                arms[1] = 10 ** 20
            reply({"arms": arms})
        elif op == "observe":
            reply({"ok": True})
''')


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``dpaudit ARGV`` in this process (the CLI's own main): exit status, stdout, stderr."""
    from dpaudit.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    cap = capsys.readouterr()
    return int(code), cap.out, cap.err


def check_strict(capsys, tmp_path, fault: str, *more: str) -> tuple[int, str, str]:
    path = tmp_path / "strict_server.py"
    path.write_text(STRICT)
    return cli(capsys, "check", "policy", f"{sys.executable} {path} {fault}", "--adapter", "process", "--runs", "100",
               "--horizon", "4", *more)


def one_sentence(code: int, err: str) -> str:
    lines = [x for x in err.splitlines() if x.startswith("dpaudit: ")]
    assert code == 2, (code, err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("dpaudit: error: ") and lines[0].endswith("."), err[-2000:]
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


def test_every_worker_process_is_greeted_with_hello_first(capsys, tmp_path):
    """Two workers: each starts its own process, which gets hello before reset (a strict server is audited)."""
    code, out, err = check_strict(capsys, tmp_path, "none", "--workers", "2", "--force-workers", "--json")
    assert code in (0, 1, 3), err[-2000:]
    assert json.loads(out)["verdict"] in ("consistent", "violation", "inconclusive")
    assert "before hello" not in err


def test_a_strict_server_pickled_to_a_worker_is_greeted_before_reset(tmp_path):
    """The unit below: the copy a worker receives starts its own process and greets it first."""
    import pickle

    path = tmp_path / "strict_server.py"
    path.write_text(STRICT)
    p = ProcessPolicy(f"{sys.executable} {path} none")
    q = pickle.loads(pickle.dumps(p))
    assert (drive(q) == drive(p)).all()
    p.close()
    q.close()


def test_a_server_that_forks_and_exits_is_refused(capsys, tmp_path):
    line = one_sentence(*check_strict(capsys, tmp_path, "fork")[::2])
    assert re.search(r"process `.*strict_server.py fork` exited with code 0 after answering (hello|claim|reset)", line)
    assert "a server must keep running" in line


def test_batch_as_text_is_refused_naming_the_field_and_value(capsys, tmp_path):
    line = one_sentence(*check_strict(capsys, tmp_path, "batch-text")[::2])
    assert 'answered hello with "batch": "false"; batch must be a JSON boolean, true or false' in line


def test_a_huge_arm_in_a_batched_answer_is_named_with_the_allowed_range(capsys, tmp_path):
    line = one_sentence(*check_strict(capsys, tmp_path, "huge")[::2])
    assert "answered act at round 2 with arm 100000000000000000000 for run 1; an arm is an integer in 0..1." in line


def test_an_unbalanced_quote_in_the_command_is_one_sentence(capsys):
    line = one_sentence(*cli(capsys, "check", "policy", 'node "x.js', "--adapter", "process")[::2])
    assert "cannot split the command 'node \"x.js' into words" in line and "no closing quotation" in line


def test_a_server_seeded_from_the_os_is_refused_by_the_same_seed_check(capsys, tmp_path):
    line = one_sentence(*check_strict(capsys, tmp_path, "os-seeded")[::2])
    assert "draws randomness its reset seed does not fix: two resets with the same seed" in line


def test_an_extra_line_after_hello_is_named_as_such(capsys, tmp_path):
    line = one_sentence(*check_strict(capsys, tmp_path, "extra")[::2])
    assert "answered hello with more than one line: after its answer came '{\"note\": \"ready\"}'" in line
    assert "claim" not in line


def test_a_reward_range_of_infinite_width_is_refused_up_front(capsys, tmp_path):
    line = one_sentence(*check_strict(capsys, tmp_path, "wide")[::2])
    assert "reward_range [-1e+308, 1e+308], whose width HIGH - LOW overflows to inf" in line
    # a batched plug-in declaring the same range: refused before any run, naming the range
    plugin = tmp_path / "wide_plugin.py"
    plugin.write_text(textwrap.dedent('''
        class Wide:
            n_arms = 2
            claim = None
            reward_range = (-1e308, 1e308)
            def reset(self, n_runs, rng):
                self.n, self.rng = n_runs, rng
            def act(self, t, arms=None):
                return self.rng.integers(0, 2, self.n)
            def observe(self, t, actions, rewards):
                pass
    '''))
    line = one_sentence(*cli(capsys, "check", "policy", f"{plugin}:Wide", "--claim", "pure:eps=1", "--runs", "100",
                             "--horizon", "4")[::2])
    assert "the reward range [-1e+308, 1e+308] of" in line and "width high - low that overflows to inf" in line
