"""The loop adapter (dpaudit/adapters/loop.py): code that runs its own loop and calls its own environment,
each copy run to completion on its reward table; the loop-shaped functions of tests/thirdparty/loops.py
audited through ``--adapter loop``."""

from __future__ import annotations

import json
import os
import re
import textwrap

import numpy as np
import pytest

from dpaudit.adapters import build_policy, parse_adapter
from dpaudit.errors import DPAuditError
from dpaudit.protocols import get_protocol

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOPS = os.path.join(ROOT, "tests", "thirdparty", "loops.py")


def loop(name: str, adapter: str = "loop", horizon: int = 48, **params: str):
    return build_policy(f"{LOOPS}:{name}", params, horizon, adapter=adapter, claim="pure:eps=1")


def write(tmp_path, code: str, name: str = "user_loop.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return str(path)


def test_the_views_are_the_pulls_exploration_then_the_better_arm():
    """A known answer: with epsilon = 1e6 the noise is negligible, so after 2 x m round-robin pulls every
    copy commits to the arm whose column is higher, under Table DP (a T x K table) and View DP (a list).
    (m = ceil(2 log 48 / 1e6) + 4 = 5 exploration pulls per arm: the commit is at round 10.)"""
    p = loop("dp_etc", epsilon="1e6")
    d = np.tile([0.2, 0.7], (48, 1))
    v = get_protocol("table").run(p, d, 300, np.random.default_rng(0))
    assert (v[:, :10] == np.arange(10) % 2).all() and (v[:, 10:] == 1).all()
    v = get_protocol("table").run(p, d[:, ::-1].copy(), 300, np.random.default_rng(0))
    assert (v[:, 10:] == 0).all()
    # View DP: the reward of round t is the list's entry, whatever the arm: arm 0's rounds are the even ones
    rewards = np.where(np.arange(48) % 2 == 0, 0.9, 0.1)
    v = get_protocol("view").run(p, rewards, 300, np.random.default_rng(0))
    assert (v[:, 10:] == 0).all()


def test_copies_are_seeded_apart_reproducibly_and_the_callers_generators_survive():
    p = loop("dp_etc")
    d = np.full((48, 2), 0.5)
    np.random.seed(5)
    before = np.random.get_state()[1].copy()
    a = get_protocol("table").run(p, d, 2000, np.random.default_rng(1))
    b = get_protocol("table").run(p, d, 2000, np.random.default_rng(1))
    assert (a == b).all()
    assert (np.random.get_state()[1] == before).all()
    # equal sums: each copy commits to either arm with probability 1/2 (two-sided binomial check, z < 5)
    ones = (a[:, -1] == 1).mean()
    assert abs(ones - 0.5) < 5 * 0.5 / np.sqrt(2000), ones
    # batches of inputs (the search's pilots): run i plays input i // n_per, same answers as one by one
    many = get_protocol("table").run_batch(p, np.stack([np.tile([0.0, 1.0], (48, 1)), np.tile([1.0, 0.0], (48, 1))]),
                                           400, np.random.default_rng(2))
    assert many.shape == (2, 400, 48)
    assert (many[0, :, -1] == 1).mean() > 0.9 and (many[1, :, -1] == 0).mean() > 0.9


def test_the_shapes_gym_step_a_class_and_a_mapped_name():
    d = np.tile([0.2, 0.7], (48, 1))
    gym = loop("GymStyleETC", adapter="loop:n_arms=2", epsilon="1e6")
    assert (get_protocol("table").run(gym, d, 50, np.random.default_rng(0))[:, 10:] == 1).all()
    mapped = loop("etc_with_draw", adapter="loop:pull=draw_arm", epsilon="1e6")
    assert (get_protocol("table").run(mapped, d, 50, np.random.default_rng(0))[:, 10:] == 1).all()
    assert parse_adapter("loop:env=arena,pull=draw,n_arms=3") == ("loop", {"env": "arena", "pull": "draw", "n_arms": 3})
    assert parse_adapter("loop:run=go,globals=swap") == ("loop", {"run": "go", "globals_mode": "swap"})
    with pytest.raises(DPAuditError, match="loop adapter option 'speed=2' must be KEY=VALUE with KEY one of env"):
        parse_adapter("loop:speed=2")


def test_what_it_cannot_run_is_one_sentence_naming_the_option(tmp_path):
    with pytest.raises(DPAuditError, match=r"etc_with_draw asked its environment for 'draw_arm', which .* "
                                           r"--adapter loop:pull=draw_arm \(a reward for an arm\)"):
        loop("etc_with_draw")
    two = write(tmp_path, """
        def f(env=None, bandit=None, T=10, n_arms=2):
            for t in range(T):
                env.pull(0)
    """)
    with pytest.raises(DPAuditError, match=r"several parameters that may receive the environment \(env, bandit\); "
                                           r"say which with --adapter loop:env=NAME"):
        build_policy(f"{two}:f", {}, 10, adapter="loop")
    assert build_policy(f"{two}:f", {}, 10, adapter="loop:env=env").env_param == "env"
    none = write(tmp_path, """
        def g(arena, T=10, n_arms=2):
            for t in range(T):
                arena.pull(0)
    """, "none.py")
    with pytest.raises(DPAuditError, match=r"no parameter named like an environment .*--adapter loop:env=NAME.*"
                                           r"--adapter loop:factory=NAME"):
        build_policy(f"{none}:g", {}, 10, adapter="loop")
    with pytest.raises(DPAuditError, match=r"map 'draw' to both pull and step"):
        parse_and_build = build_policy(f"{two}:f", {}, 10, adapter="loop:env=env,pull=draw,step=draw")
        del parse_and_build


def test_a_factory_an_early_return_a_wrong_arm_and_a_crash(tmp_path):
    code = write(tmp_path, """
        import numpy as np

        def make_env():
            raise RuntimeError("the real environment is not here")

        def uses_factory(T=10, n_arms=2):
            env = make_env()
            for t in range(T):
                env.pull(int(np.random.randint(2)))

        def short(env, T=10, n_arms=2):
            for t in range(T // 2):
                env.pull(0)

        def bad_arm(env, T=10, n_arms=2):
            for t in range(T):
                env.pull(2 if t == 3 else 0)

        def polite(env, T=10, n_arms=2):
            assert not hasattr(env, "render") and getattr(env, "seed", None) is None  # absent, not an error
            for t in range(T):
                env.pull(0)

        def crash(env, T=10, n_arms=2):
            for t in range(T):
                if t == 4:
                    raise ZeroDivisionError("division by zero")
                env.pull(0)
    """, "shapes.py")
    p = build_policy(f"{code}:uses_factory", {}, 10, adapter="loop:factory=make_env")
    v = get_protocol("table").run(p, np.full((10, 2), 0.5), 400, np.random.default_rng(0))
    assert 0.4 < v.mean() < 0.6
    with pytest.raises(DPAuditError, match=r"short returned after 5 pulls \(copy 0\), but the audit's horizon is 10"):
        build_policy(f"{code}:short", {}, 10, adapter="loop")
    with pytest.raises(DPAuditError, match=r"bad_arm pulled arm 2 at round 3 \(copy 0\); an arm is an integer in 0..1"):
        build_policy(f"{code}:bad_arm", {}, 10, adapter="loop")
    assert build_policy(f"{code}:polite", {}, 10, adapter="loop").n_arms == 2
    with pytest.raises(DPAuditError, match=r"crash raised ZeroDivisionError at round 4 \(copy 0\): division by zero\.$"):
        build_policy(f"{code}:crash", {}, 10, adapter="loop")


def test_protocols_that_drive_rounds_one_by_one_are_refused():
    p = loop("dp_etc")
    with pytest.raises(DPAuditError, match="runs its own loop.*audit it under --protocol table or view"):
        p.act(0)
    interactive = get_protocol("interactive")
    adv = interactive.adversary(interactive.adversaries[-1], 3, 2, 48)
    if adv is not None:
        with pytest.raises(DPAuditError, match="only observes the arm it chose"):
            interactive.run(p, np.full((48, 2), 0.5), 10, np.random.default_rng(0), adv)


@pytest.mark.slow
def test_the_loop_functions_audited_correct_consistent_buggy_flagged():
    """The ported originals through ``--adapter loop`` at a short horizon and 1,000 fresh runs per side:
    the correct explore-then-commit is consistent, the mean's noise on the sum (true eps = 12) a violation."""
    import dpaudit

    ok = dpaudit.audit(f"{LOOPS}:dp_etc", adapter="loop", claim="pure:eps=1", runs=1000, horizon=48, workers=1)
    bad = dpaudit.audit(f"{LOOPS}:dp_etc_mean_noise", adapter="loop", claim="pure:eps=1", runs=1000, horizon=48,
                        workers=1)
    assert ok.verdict == "consistent", ok.verdict
    assert bad.verdict == "violation" and bad.epsilon_lower > 1.0, (bad.verdict, bad.epsilon_lower)


def test_code_that_holds_the_hidden_global_instance_is_kept_apart_by_swap(tmp_path):
    """A bound method of the hidden instance kept in a dict at import bypasses the redirected functions: the
    redirect mode names the fix (globals=swap) and the swap mode keeps copies apart and reproducible."""
    code = write(tmp_path, """
        import numpy as np
        HELD = {"draw": np.random.mtrand._rand.random_sample}

        def held(env, T=6, n_arms=2):
            for t in range(T):
                env.pull(int(HELD["draw"]() < 0.5))
    """, "held.py")
    with pytest.raises(DPAuditError, match=r"--adapter loop:globals=swap"):
        build_policy(f"{code}:held", {}, 6, adapter="loop")
    p = build_policy(f"{code}:held", {}, 6, adapter="loop:globals=swap")
    a = get_protocol("table").run(p, np.full((6, 2), 0.5), 500, np.random.default_rng(3))
    b = get_protocol("table").run(p, np.full((6, 2), 0.5), 500, np.random.default_rng(3))
    assert (a == b).all() and len({tuple(r) for r in a.tolist()}) > 30  # reproducible, copies differ


# ---- bad input through the CLI, as a user runs it: one sentence and exit 2, or an audit -----------------------

def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``dpaudit ARGV`` in this process (the CLI's own main): exit status, stdout, stderr."""
    from dpaudit.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    cap = capsys.readouterr()
    return int(code), cap.out, cap.err


def check_loop(capsys, path: str, name: str, *more: str) -> tuple[int, str, str]:
    return cli(capsys, "check", "policy", f"{path}:{name}", "--adapter", "loop", "--claim", "pure:eps=1",
               "--runs", "100", "--horizon", "6", "--workers", "1", *more)


def one_sentence(code: int, err: str) -> str:
    """The error line of a run that must end in one sentence with exit 2."""
    lines = [x for x in err.splitlines() if x.startswith("dpaudit: ")]
    assert code == 2, (code, err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("dpaudit: error: ") and lines[0].endswith("."), err[-2000:]
    assert "Traceback" not in err and "internal error" not in err and "interrupted" not in err
    return lines[0]


MISBEHAVING = """
    import os, sys, time, threading

    def own_interrupt(env, T=6, n_arms=2):
        for t in range(T):
            if t == 2:
                raise KeyboardInterrupt
            env.pull(0)

    def exits(env, T=6, n_arms=2):
        for t in range(T):
            if t == 2:
                sys.exit(0)
            env.pull(0)

    def hard_exit(env, T=6, n_arms=2):
        for t in range(T):
            if t == 2:
                os._exit(0)
            env.pull(0)

    def posix_exit(env, T=6, n_arms=2):
        import posix
        for t in range(T):
            if t == 2:
                posix._exit(0)
            env.pull(0)

    def sleeps(env, T=6, n_arms=2):
        env.pull(0)
        time.sleep(1000)

    def swallows_the_stop(env, T=6, n_arms=2):
        while True:
            try:
                env.pull(0)
            except BaseException:
                pass

    STATE = {}

    def leaks_a_thread(env, T=6, n_arms=2):
        STATE["env"] = env  # the thread pulls from whichever copy's environment was handed last
        if "thread" not in STATE:
            def spin():
                while True:
                    STATE["env"].pull(1)
                    time.sleep(0.0002)
            STATE["thread"] = threading.Thread(target=spin, daemon=True)
            STATE["thread"].start()
        for t in range(T):
            env.pull(t % 2)
            time.sleep(0.001)

    PRINTED = [0]

    def prints(env, T=6, n_arms=2):
        for t in range(T):
            if PRINTED[0] < 3:
                PRINTED[0] += 1
                print("hello from the loop", t)
            env.pull(t % 2)

    def gym_style(env, T=6, n_arms=2):
        obs, info = env.reset(seed=3)
        assert obs == 0 and info == {}
        for t in range(T):
            obs, r, terminated, truncated, info = env.step(t % 2)
"""


@pytest.fixture
def misbehaving(tmp_path):
    return write(tmp_path, MISBEHAVING, "misbehaving_loops.py")


def test_loop_codes_own_keyboard_interrupt_is_its_failure_not_an_interruption(capsys, misbehaving):
    line = one_sentence(*check_loop(capsys, misbehaving, "own_interrupt")[::2])
    assert "own_interrupt raised KeyboardInterrupt in its loop while no Ctrl-C or signal reached dpaudit" in line


def test_loop_codes_sys_exit_is_its_failure_not_a_silent_exit_0(capsys, misbehaving):
    line = one_sentence(*check_loop(capsys, misbehaving, "exits")[::2])
    assert "exits called sys.exit(0) in its loop" in line


def test_loop_codes_own_os_exit_is_named_not_blamed_on_memory(capsys, misbehaving):
    line = one_sentence(*check_loop(capsys, misbehaving, "hard_exit")[::2])
    assert "hard_exit called os._exit(0) in its loop" in line and "out of memory" not in line
    # an exit the sandbox cannot intercept (posix._exit): the process exited with status 0 on its own
    line = one_sentence(*check_loop(capsys, misbehaving, "posix_exit")[::2])
    assert "exited with status 0 on its own while plug-in" in line and "posix_exit ran in its loop" in line
    assert "out of memory" not in line and "killed from outside" not in line


@pytest.mark.parametrize("name", ["sleeps", "swallows_the_stop"])
def test_a_loop_that_never_returns_ends_at_the_call_timeout(capsys, misbehaving, name):
    import time

    t0 = time.monotonic()
    line = one_sentence(*check_loop(capsys, misbehaving, name, "--call-timeout", "0.2")[::2])
    assert f"{name} did not return from its loop within 0.2 s" in line and "--call-timeout" in line
    assert time.monotonic() - t0 < 30  # the limit, then (for code that swallows the alarm too) the kill's grace


def test_a_thread_the_loop_leaks_is_refused(capsys, misbehaving):
    line = one_sentence(*check_loop(capsys, misbehaving, "leaks_a_thread")[::2])
    assert re.search(r"leaks_a_thread pulled from the environment of copy \d+ (in two threads at once|after that "
                     r"copy had ended)", line), line
    assert "each copy's pulls must come from one thread" in line


def test_a_stray_pull_from_an_ended_copys_environment_is_refused_and_never_played():
    """The unit below the CLI: a pull from copy 0's environment after copy 0 returned is answered (the low
    end of the range), never appended to a view, and refused when the play ends."""
    from dpaudit.adapters.loop import LoopEnv

    p = loop("dp_etc", epsilon="1e6")
    env = LoopEnv(p)
    env._load([[0.5, 0.5]] * p.horizon, 0)
    env._end()
    assert env.pull(1) == p.lo and env._arms == []
    with pytest.raises(DPAuditError, match=r"dp_etc pulled from the environment of copy 0 after that copy had ended"):
        p._refuse_stray(1)


def test_prints_in_loop_code_go_to_stderr_so_json_stays_json(capsys, misbehaving):
    code, out, err = check_loop(capsys, misbehaving, "prints", "--json")
    assert code in (0, 1, 3), err[-2000:]
    assert json.loads(out)["verdict"] in ("consistent", "violation", "inconclusive")
    assert "hello from the loop" not in out and "hello from the loop 0" in err


def test_gymnasium_style_reset_before_step_is_audited(capsys, misbehaving):
    code, out, err = check_loop(capsys, misbehaving, "gym_style", "--json")
    assert code in (0, 1, 3), err[-2000:]
    assert json.loads(out)["verdict"] in ("consistent", "violation", "inconclusive")
    # reset plays no round: the views are the steps' arms, as without it
    p = build_policy(f"{misbehaving}:gym_style", {}, 6, adapter="loop")
    v = get_protocol("table").run(p, np.full((6, 2), 0.5), 20, np.random.default_rng(0))
    assert (v == np.arange(6) % 2).all()
