"""The local plug-in contract (docs/local-dp.md): every malformed member gets one sentence naming it.

Each class below is a realistic mistake in a local-DP plug-in, built on a correct randomised-response
plug-in (:class:`RR`). Under ``--protocol local`` each must be refused with one :class:`DPAuditError`
sentence that names the member (through the Python API, and through the CLI with exit status 2 and one
line on stderr): never an internal error, never a silent pass. The same file is the plug-in file the CLI
loads (``tests/test_local_plugins.py:Class``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import dpaudit
from dpaudit.accountants import PureDP
from dpaudit.runner.setup import build_policy as _build_policy, with_features as _with_features
from dpaudit.cli import main
from dpaudit.errors import DPAuditError
from dpaudit.policies.registry import registered
from dpaudit.protocols.local import LocalPluginInfo, check_local_plugin


class _RandomisedResponse:
    """Randomised response on rewards in [0, 1] with a finite channel table and a transcript; no keep_transcript."""

    def __init__(self, n_arms: int = 2, epsilon: float = 1.0, claimed: float = 1.0):
        self.n_arms, self.eps = n_arms, epsilon
        self.claim = PureDP(claimed)
        self.domain = (0.0, 1.0)
        self.p = 1 / (1 + np.exp(-epsilon))

    def channel(self, z, rng):
        z = np.asarray(z, dtype=float)
        bit = rng.random(z.shape) < z
        return np.where(rng.random(z.shape) < self.p, bit, ~bit).astype(float)

    def channel_table(self):
        p, q = self.p, 1 - self.p
        return [0.0, 1.0], [0.0, 1.0], np.array([[p, q], [q, p]])

    def transcript(self):
        return np.stack(self._got, axis=1)[:, :, None]

    def reset(self, n_runs, rng):
        self.rng, self.n = rng, n_runs
        self.s, self.c = np.zeros((n_runs, self.n_arms)), np.ones((n_runs, self.n_arms))
        self._got = []

    def act(self, t, arms=None):
        if t < self.n_arms:
            self.a = np.full(self.n, t)
        else:
            self.a = np.argmax(self.s / self.c + self.rng.random(self.s.shape) * 1e-9, axis=1)
        return self.a

    def observe(self, t, actions, rewards):
        o = self.channel(np.asarray(rewards, dtype=float), self.rng)
        if getattr(self, "keep_transcript", True):
            self._got.append(o)
        self.s[np.arange(self.n), self.a] += o
        self.c[np.arange(self.n), self.a] += 1


class RR(_RandomisedResponse):
    """A correct local-DP plug-in: the transcript is kept when the audit asks for it."""

    keep_transcript = False


class GaussianVector(RR):
    """A correct vector-data plug-in: users hold (x, r) in R^2 x [0, 1] and send it plus Gaussian noise."""

    def channel(self, z, rng):
        z = np.asarray(z, dtype=float).reshape(len(z), -1)
        return z + rng.normal(0.0, 4.0, z.shape)

    def domain_pairs(self):
        return [(np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0, 1.0])),
                (np.array([1.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0]))]

    channel_table = None  # not a finite channel

    def observe(self, t, actions, rewards):  # user t holds (e_arm, r) and sends it noisy
        z = np.zeros((self.n, 3))
        z[np.arange(self.n), self.a] = 1.0
        z[:, 2] = rewards
        o = self.channel(z, self.rng)
        if self.keep_transcript:
            self._got.append(o)
        self.s[np.arange(self.n), self.a] += o[:, 2]
        self.c[np.arange(self.n), self.a] += 1

    def transcript(self):
        return np.stack(self._got, axis=1)


class LinearRR(RR):
    """Correct, with ``dim``: dpaudit feeds it a fixed action set (FixedActionSet around the sandbox's wrapper)."""

    dim = 2


class BinaryRR(RR):
    """Correct, for binary rewards only: declares its alphabet and refuses anything else."""

    reward_alphabet = (0.0, 1.0)

    def channel(self, z, rng):
        if not np.isin(np.asarray(z, dtype=float), (0.0, 1.0)).all():
            raise ValueError("binary rewards only")
        return super().channel(z, rng)


class NoTable(RR):
    """Correct: a channel that is not finite says so with None."""

    def channel_table(self):
        return None


# ---- the malformed plug-ins: (class, the member the sentence must name, a fragment of it) -------------------

class NaNTranscript(RR):
    def transcript(self):  # reads a buffer it never filled
        return np.full((self.n, len(self._got), 1), np.nan)


class InfMessages(RR):
    def channel(self, z, rng):  # log-odds of the bit: inf at the domain's extremes
        o = super().channel(z, rng)
        with np.errstate(divide="ignore"):
            return np.log(o / (1 - o))


class ChannelRaises(RR):
    def channel(self, z, rng):
        return super().channel(z, rng) / self.scale  # an attribute it never set


class WrongBatch(RR):
    def channel(self, z, rng):  # one message for the whole batch
        return super().channel(z, rng).mean(keepdims=True)


class ShapeDependsOnInput(RR):
    def channel(self, z, rng):  # sends an extra flag only when its reward is 1: the shape itself leaks
        o = super().channel(z, rng)[:, None]
        return np.concatenate([o, o], axis=1) if np.all(np.asarray(z) == 1) else o


class ChannelReturnsNone(RR):
    def channel(self, z, rng):  # forgot the return
        super().channel(z, rng)


class TableRaises(RR):
    def channel_table(self):
        raise NotImplementedError("exact table not written yet")


class TableRaisesForNotFinite(RR):
    def channel_table(self):  # "not finite" said by raising DPAuditError, not by returning None
        raise DPAuditError("this channel is not finite.")


class TableRowsNotSummingTo1(RR):
    def channel_table(self):  # P(o | z) transposed and rescaled by mistake
        p = self.p
        return [0.0, 1.0], [0.0, 1.0], np.array([[p, p], [1 - p, 1 - p]])


class TableNegative(RR):
    def channel_table(self):
        p = self.p
        return [0.0, 1.0], [0.0, 1.0], np.array([[p + 0.5, 0.5 - p], [0.5 - p, p + 0.5]])


class TableWrongRows(RR):
    def channel_table(self):  # a row for z = 1/2 too, but only two inputs listed
        p, q = self.p, 1 - self.p
        return [0.0, 1.0], [0.0, 1.0], np.array([[p, q], [0.5, 0.5], [q, p]])


class TableNaN(RR):
    def channel_table(self):
        return [0.0, 1.0], [0.0, 1.0], np.array([[np.nan, np.nan], [0.5, 0.5]])


class TableNotATriple(RR):
    def channel_table(self):  # returns P alone
        return super().channel_table()[2]


class TableInputsOutsideDomain(RR):
    def channel_table(self):  # inputs as +-1 while the data are rewards in [0, 1]
        return [-1.0, 1.0], [0.0, 1.0], super().channel_table()[2]


class RaggedPair(GaussianVector):
    def domain_pairs(self):  # z' forgot the reward coordinate
        return [(np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0]))]


class RaggedAcrossPairs(GaussianVector):
    def domain_pairs(self):
        return [(np.zeros(3), np.ones(3)), (np.zeros(2), np.ones(2))]


class RaggedList(GaussianVector):
    def domain_pairs(self):
        return [([1.0, [0.0, 1.0]], [0.0, [1.0, 0.0]])]


class DomainPairsEmpty(GaussianVector):
    def domain_pairs(self):
        return []


class DomainPairsEqual(GaussianVector):
    def domain_pairs(self):  # copy-paste: z' = z
        return [(np.array([1.0, 0.0, 1.0]), np.array([1.0, 0.0, 1.0]))]


class DomainPairsAttribute(GaussianVector):
    domain_pairs = [(np.zeros(3), np.ones(3))]  # a list, not a method


class DomainReversed(RR):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.domain = (1.0, 0.0)


class DomainNaN(RR):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.domain = (0.0, float("nan"))


class DomainMissing(RR):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.domain = None


class DomainScalar(RR):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.domain = 1.0  # the width, not (low, high)


class TranscriptWrongShape(RR):
    def transcript(self):  # forgot the message axis: (n_runs, rounds)
        return np.stack(self._got, axis=1)


class TranscriptRoundsFirst(RR):
    def transcript(self):  # (rounds, n_runs, 1)
        return np.stack(self._got, axis=0)[:, :, None]


class TranscriptNotCallable(RR):
    transcript = None  # declared, never written


class TranscriptRaises(RR):
    def transcript(self):
        return np.stack(self._received, axis=1)  # the attribute is called _got


class KeepTranscriptReadOnly(RR):
    keep_transcript = property(lambda self: True)  # always records, but the audit cannot set the flag


class TranscriptWithoutFlag(_RandomisedResponse):
    """Always records and gives transcript(), but has no keep_transcript (the audit must not skip it silently)."""

MALFORMED = [
    (NaNTranscript, "transcript()", "NaN or inf"),
    (InfMessages, "channel", "NaN or inf messages"),
    (ChannelRaises, "channel", "raised AttributeError on user data"),
    (WrongBatch, "channel", "shape (1,) for a batch of 3 users"),
    (ShapeDependsOnInput, "channel", "per user for data 1.0 but (1,) for data 0.0"),
    (ChannelReturnsNone, "channel", "returned None"),
    (TableRaises, "channel_table()", "raised NotImplementedError"),
    (TableRaisesForNotFinite, "channel_table()", "raised DPAuditError"),
    (TableRowsNotSummingTo1, "channel_table()", "row 0 sums to"),
    (TableNegative, "channel_table()", "negative entry"),
    (TableWrongRows, "channel_table()", "shape (3, 2) for 2 inputs"),
    (TableNaN, "channel_table()", "NaN or inf"),
    (TableNotATriple, "channel_table()", "not a triple"),
    (TableInputsOutsideDomain, "channel_table()", "from the domain [0, 1]"),
    (RaggedPair, "domain_pairs()", "shape (3,) and z' of shape (2,)"),
    (RaggedAcrossPairs, "domain_pairs()", "(3,) in pair 0 but (2,) in pair 1"),
    (RaggedList, "domain_pairs()", "ragged"),
    (DomainPairsEmpty, "domain_pairs()", "no pair"),
    (DomainPairsEqual, "domain_pairs()", "z = z'"),
    (DomainPairsAttribute, "domain_pairs", "not a method"),
    (DomainReversed, "domain", "(1.0, 0.0)"),
    (DomainNaN, "domain", "nan"),
    (DomainMissing, "domain", "missing"),
    (DomainScalar, "domain", "not a pair of numbers"),
    (TranscriptWrongShape, "transcript()", "shape (3, 2)"),
    (TranscriptRoundsFirst, "transcript()", "shape (2, 3, 1)"),
    (TranscriptNotCallable, "transcript", "not a method"),
    (TranscriptRaises, "transcript()", "raised AttributeError"),
    (KeepTranscriptReadOnly, "keep_transcript", "accept keep_transcript = True"),
    (TranscriptWithoutFlag, "keep_transcript", "no keep_transcript"),
]


def _ids(case):
    return case[0].__name__


@pytest.mark.parametrize("case", MALFORMED, ids=_ids)
def test_malformed_local_plugin_is_one_sentence_naming_the_member(case):
    cls, member, fragment = case
    with pytest.raises(DPAuditError) as info:
        dpaudit.audit(cls, protocol="local", runs=200, horizon=8, workers=1)
    msg = str(info.value)
    assert member in msg and fragment in msg, msg
    assert "\n" not in msg and msg.endswith(".")
    assert cls.__name__ in msg  # names the policy too


@pytest.mark.parametrize("case", MALFORMED, ids=_ids)
def test_malformed_local_plugin_through_the_cli_is_exit_2_and_one_line(case, capsys):
    cls, member, fragment = case
    status = main(["check", "policy", f"{__file__}:{cls.__name__}", "--protocol", "local", "--runs", "200",
                   "--horizon", "8", "--workers", "1"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith("dpaudit: error: "), err
    assert member in err and fragment in err and "internal error" not in err


# ---- what passes -------------------------------------------------------------------------------------------

LDP = [e.name for m in (False, True) for e in registered(mutants=m) if e.family == "ldp"]


@pytest.mark.parametrize("name", LDP)
def test_every_registered_local_policy_passes_or_has_no_channel(name):
    policy = _with_features(_build_policy(name, {}, 8), 0)
    if getattr(policy, "local_channel", None) is None:  # the non-private twins
        with pytest.raises(DPAuditError, match="exposes no channel"):
            check_local_plugin(policy, horizon=8, name=name)
        return
    keep = policy.keep_transcript
    info = check_local_plugin(policy, horizon=8, name=name)
    assert isinstance(info, LocalPluginInfo) and info.transcript and info.transcript_width >= 1
    assert policy.keep_transcript == keep  # set back after the probes
    assert info.continuous == bool(getattr(policy, "continuous_actions", False))
    assert (info.table is not None) == (name == "ldp-ucb-rr")
    assert info.vector_data == (name in ("ldp-linucb", "ldp-gloc"))
    for z0, z1 in info.pairs:
        assert z0.shape == z1.shape and not np.array_equal(z0, z1)


def test_the_minimal_randomised_response_plugin_passes_and_is_audited():
    info = check_local_plugin(RR(), horizon=8)
    assert not info.vector_data and info.message_shape == () and info.transcript_width == 1
    assert [z.item() for z in info.pairs[0]] == [0.0, 1.0] and info.alphabet is None
    inputs, outputs, P = info.table
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    a = dpaudit.audit(RR, protocol="local", runs=200, horizon=8, workers=1)
    assert a.verdict == "consistent", a.reason
    finite = [e for e in a.exact if e.part == "finite channel"]
    assert finite[0].epsilon == pytest.approx(1.0, rel=1e-4)  # eps at delta = 1e-5
    assert {x.attack for x in a.attacks} == {"channel", "transcript", "central membership"}
    low = dpaudit.audit(RR, params={"claimed": 0.5}, protocol="local", runs=200, horizon=8, workers=1)
    assert low.verdict == "violation" and "exact eps" in low.reason


def test_none_from_channel_table_means_no_finite_channel():
    assert check_local_plugin(NoTable(), horizon=4).table is None
    assert check_local_plugin(GaussianVector(), horizon=4).table is None
    a = dpaudit.audit(NoTable, protocol="local", runs=200, horizon=8, workers=1)
    assert a.verdict == "consistent" and not any(e.part == "finite channel" for e in a.exact)


def test_vector_data_plugin_passes_with_its_pairs():
    info = check_local_plugin(GaussianVector(), horizon=4)
    assert info.vector_data and info.message_shape == (3,) and len(info.pairs) == 2


def test_probes_feed_only_the_declared_reward_alphabet():
    info = check_local_plugin(BinaryRR(), horizon=8)
    assert info.alphabet == (0.0, 1.0)
    a = dpaudit.audit(BinaryRR, protocol="local", runs=200, horizon=8, workers=1)
    assert a.verdict == "consistent", a.reason
    with pytest.raises(DPAuditError, match="must lie"):
        check_local_plugin(BinaryRR(), horizon=8, rewards=[0, 2])


def test_a_linear_plugin_is_asked_for_its_transcript_through_the_cli(capsys):
    """FixedActionSet around the sandbox's wrapper: keep_transcript must reach the plug-in itself."""
    status = main(["check", "policy", f"{__file__}:LinearRR", "--protocol", "local", "--runs", "200",
                   "--horizon", "8", "--workers", "1", "--json"])
    out = capsys.readouterr()
    assert status == 0, out.err
    assert {a["attack"] for a in json.loads(out.out)["attacks"]} >= {"channel", "transcript"}
