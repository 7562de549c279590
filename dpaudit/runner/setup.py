"""What every audit does before its parts run: build the policy, read its claim at delta, and its rewards.

* :func:`build_policy` -- the policy to audit at a horizon, from a registered name, a plug-in string
  (``file.py:Class``, ``module:Class``; behind :mod:`dpaudit.sandbox`), a class with parameters or an
  instance; ``claim`` replaces a declared one, ``adapter="per-run"`` runs a one-run class as N copies;
* :func:`claimed_epsilon` -- the claim as epsilon at delta by the claim's own (tightest valid)
  conversion; if a claim type has none, the loose but valid rho + 2 sqrt(rho log(1/delta)) bound for
  zCDP, and the method says so; refused unless a finite number >= 0;
* :func:`reward_alphabet_for`, :func:`probe_alphabet` -- the rewards an audit may feed;
* :func:`with_features` -- a fixed action set for linear policies.
"""

from __future__ import annotations

import math
import platform
from contextlib import nullcontext
from typing import TYPE_CHECKING, Mapping, Sequence, TypeAlias, Union

import numpy as np

from dpaudit.accountants import Guarantee
from dpaudit.accountants.guarantees import as_guarantee, is_dp_event
from dpaudit.errors import DPAuditError, shorten
from dpaudit.policies.base import PolicyLike, PolicySource, check_alphabet
from dpaudit.protocols import FixedActionSet, PairSpec, Protocol, make_pair

if TYPE_CHECKING:
    from dp_accounting import DpEvent

__all__ = ["claimed_epsilon", "convert_claim", "versions", "build_policy", "claim_as_guarantee",
           "reward_alphabet_for", "probe_alphabet", "with_features", "claim_curves", "ClaimSource"]

#: what an audit accepts as the claim to judge (``--claim``, ``claim=``): its text (``zcdp:rho=0.1``), a
#: Guarantee, or a dp-accounting DpEvent
ClaimSource: TypeAlias = Union[str, Guarantee, "DpEvent"]


def claimed_epsilon(claim: Guarantee, delta: float) -> tuple[float, str]:
    """The claim as epsilon at ``delta`` and the conversion used.

    The result enters the verdict's comparison, so it is refused unless it is a finite number >= 0:
    a NaN compares false with every lower bound (a silent ``consistent``), and an infinite claim can
    never be exceeded, so an audit against it could not fail.
    """
    eps, method = convert_claim(claim, delta)
    return comparable_epsilon(claim, delta, eps), method

def convert_claim(claim: Guarantee, delta: float) -> tuple[float, str]:
    conv = getattr(claim, "conversion", None)
    if conv is not None:
        try:
            c = conv(delta)
            order = f" at order {c.order:.4g}" if getattr(c, "order", None) else ""
            return c.epsilon, f"{claim.describe()} -> (eps, delta) by {c.method}{order}"
        except NotImplementedError:
            pass
    rho = getattr(claim, "rho", None)
    if rho is not None:
        try:
            eps = rho + 2 * math.sqrt(rho * math.log(1 / delta))
        except (TypeError, ValueError):
            raise DPAuditError(f"the claim {claim!r} has rho = {rho!r}, which is not a number >= 0, so it cannot "
                               "be converted to (epsilon, delta).") from None
        return eps, f"{claim.describe()} -> rho + 2 sqrt(rho log(1/delta)) (valid but loose)"
    raise DPAuditError(f"the claim {claim!r} cannot be converted to (epsilon, delta); give a Guarantee from dpaudit.accountants.")

def comparable_epsilon(claim: Guarantee, delta: float, eps: object) -> float:
    """``eps`` as a float, refused unless finite and >= 0 (see :func:`claimed_epsilon`)."""
    try:
        value = float(eps)
    except (TypeError, ValueError):
        value = math.nan
    if math.isnan(value) or value < 0:
        raise DPAuditError(f"the claim {claim.describe()} converts to epsilon = {eps!r} at delta = {delta:g}, which is "
                           "not a number >= 0, so no lower bound can be compared with it; fix the claim's parameters.")
    if math.isinf(value):
        raise DPAuditError(f"the claim {claim.describe()} converts to epsilon = inf at delta = {delta:g}, which no lower "
                           "bound can exceed, so the audit could never find a violation; audit at a --delta the "
                           "claim covers.")
    return value

def versions() -> dict[str, str]:
    """The versions a report records (dpaudit, Python, numpy, scipy)."""
    import scipy

    from dpaudit.version import __version__

    return {"dpaudit": __version__, "python": platform.python_version(), "numpy": np.__version__,
            "scipy": scipy.__version__}

def build_policy(spec: PolicySource, params: Mapping[str, object], horizon: int | None, adapter: str | None = None,
                 claim: ClaimSource | None = None) -> PolicyLike:
    """The policy to audit at ``horizon`` (:func:`dpaudit.adapters.build_policy`: the horizon goes to
    whichever constructor parameter names it, ``claim`` replaces a declared one, ``adapter="per-run"``
    runs a one-run class as N copies)."""
    from dpaudit.adapters import build_policy
    from dpaudit.sandbox import is_plugin_spec, wrap_plugin

    if not isinstance(spec, str):  # the Python API (dpaudit.audit) passes a class or an instance
        return policy_from_object(spec, params, horizon, adapter, claim)
    policy = build_policy(spec, params, horizon, adapter=adapter, claim=claim)
    if is_plugin_spec(spec):  # plug-in code, a per-run adapter's copies too, runs behind dpaudit.sandbox
        policy = wrap_plugin(policy, spec)
    return claim_as_guarantee(policy)

def policy_from_object(obj: type | PolicyLike, params: Mapping[str, object], horizon: int | None,
                       adapter: str | None = None, claim: ClaimSource | None = None) -> PolicyLike:
    """The hook of :func:`dpaudit.audit` for a policy given as a class or an instance.

    A class is built with ``params`` (typed by its constructor's signature, as ``--param`` values are)
    and, like a registered name, receives the audit's horizon under whatever name its constructor
    gives it (:func:`dpaudit.adapters.horizon_parameter`); an instance is audited as it is (its own
    parameters, whatever the horizon). ``claim`` replaces a declared claim, as for a name.

    A K-armed class or instance that is not dpaudit's own is plug-in code: it is built and run behind
    :func:`dpaudit.sandbox.guard` (:class:`dpaudit.sandbox.PluginPolicy`), in the caller's process, so
    ``call_timeout`` (and the scaled watchdog), exits and prints are handled as for a plug-in string.
    """
    from dpaudit.adapters import horizon_parameter, parse_claim
    from dpaudit.policies.registry import coerce_params
    from dpaudit.sandbox import guard, wrap_plugin

    if adapter is not None:
        raise DPAuditError("the per-run adapter takes the plug-in as a 'file.py:Class' or 'module:Class' string, "
                           f"not a {'class' if isinstance(obj, type) else 'policy object'}.")
    cls = obj if isinstance(obj, type) else type(obj)
    label = f"{cls.__module__}:{cls.__qualname__}"
    outside = not _own(cls) and not getattr(obj, "continuous_actions", False)
    if isinstance(obj, type):
        params = dict(params)
        hp = horizon_parameter(obj)
        if hp is not None and hp not in params:
            params[hp] = horizon
        kwargs = coerce_params(obj, params)
        with guard(label, "__init__") if outside else nullcontext():
            try:
                policy = obj(**kwargs)
            except TypeError as exc:
                raise DPAuditError(f"cannot build {obj.__name__} with parameters {kwargs}: {exc}.") from exc
        try:
            policy._params = dict(kwargs)
        except AttributeError:
            pass
    else:
        policy = obj
    if outside:
        policy = wrap_plugin(policy, label)
    if not hasattr(policy, "n_arms") and not getattr(policy, "continuous_actions", False):  # BCO: dpaudit.bco
        raise DPAuditError(f"policy {policy!r} has no n_arms attribute; a policy must say how many arms it has.")
    if claim is not None:
        policy.claim = parse_claim(claim) if isinstance(claim, str) else claim
    return claim_as_guarantee(policy)


def _own(cls: type) -> bool:
    """Whether ``cls`` is dpaudit's own code (its policies, mutants and wrappers), not plug-in code."""
    return str(getattr(cls, "__module__", "")).split(".")[0] == "dpaudit"

def claim_as_guarantee(policy: PolicyLike) -> PolicyLike:
    """A claim given as a dp-accounting DpEvent becomes the Guarantee it describes."""
    claim = getattr(policy, "claim", None)
    if is_dp_event(claim):
        try:
            policy.claim = as_guarantee(claim)
        except AttributeError:
            raise DPAuditError(f"policy {type(policy).__name__} states its claim {claim!r} as a read-only DpEvent; "
                               "dpaudit needs to read it as a Guarantee: make `claim` a plain attribute.") from None
    return policy

def reward_alphabet_for(policy: PolicyLike, given: Sequence[float] | None,
                        rr: tuple[float, float]) -> tuple[float, ...] | None:
    """The rewards the audit may feed: ``given`` (``--rewards``), else the policy's ``reward_alphabet``,
    else None (any value in the reward range)."""
    raw = given if given is not None else getattr(policy, "reward_alphabet", None)
    if raw is None:
        return None
    letters = check_alphabet(raw, "the reward alphabet (--rewards)" if given is not None else
                              "the policy's reward_alphabet")
    if letters[0] < rr[0] or letters[-1] > rr[1]:
        raise DPAuditError(f"the reward alphabet {list(letters)} must lie in the policy's reward range "
                           f"[{rr[0]:g}, {rr[1]:g}].")
    return letters

def probe_alphabet(policy: PolicyLike, protocol: Protocol, rr: tuple[float, float],
                   notes: list[str]) -> tuple[float, ...] | None:
    """None if ``policy`` accepts the middle of its reward range; (lo, hi) if it refuses it but accepts
    the extremes (a policy written for {0, 1} rewards), with a note; else the policy's own error."""
    from dpaudit.sandbox import PluginStopped, PluginTimeoutError

    d = make_pair(PairSpec(0, "mid"), protocol, int(policy.n_arms), 8, rr).d0
    try:
        protocol.run(policy, d, 4, np.random.default_rng(0), None, record=False)
        return None
    except (KeyboardInterrupt, PluginTimeoutError, PluginStopped):
        raise  # a stuck call or an exit is no refusal of a reward: trying other rewards would only wait again
    except Exception as exc:  # the policy's own check of its rewards, whatever it raises
        first = exc
    letters = (float(rr[0]), float(rr[1]))
    d = make_pair(PairSpec(0, "mid"), protocol, int(policy.n_arms), 8, rr, letters).d0
    try:
        protocol.run(policy, d, 4, np.random.default_rng(0), None, record=False)
    except KeyboardInterrupt:
        raise
    except Exception:
        raise first from None
    notes.append(f"the policy refused the reward {0.5 * (rr[0] + rr[1]):g} ({type(first).__name__}: {first}), so every "
                 f"audit input uses only the rewards {{{rr[0]:g}, {rr[1]:g}}} (give --rewards to choose others).")
    return letters

#: the most features (K x d numbers) of the fixed action set a linear policy is audited on (80 MB)
MAX_FEATURES = 10_000_000


def with_features(policy: PolicyLike, seed: int) -> PolicyLike:
    """A linear policy (one with an integer ``dim``) gets a fixed action set of K unit vectors drawn from
    ``seed`` (:class:`dpaudit.protocols.FixedActionSet`); any other policy is returned as it is."""
    dim = getattr(policy, "dim", None)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
        return policy
    K = int(policy.n_arms)
    if K * int(dim) > MAX_FEATURES:  # a declared size, bounded before anything is sized by it
        raise DPAuditError(f"policy {type(getattr(policy, 'wrapped', policy)).__name__} declares dim = {int(dim)} with "
                           f"{K} arms: a fixed action set of {K * int(dim):.3g} features, more than the {MAX_FEATURES:.0e} "
                           "dpaudit builds (every run sees all of them at every step); give a smaller dim.")
    x = np.random.default_rng([int(seed), 7]).standard_normal((K, int(dim)))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return FixedActionSet(policy, x)


def _numbers(name: str, values: object, allowed: str) -> np.ndarray:
    try:
        out = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        out = None
    if isinstance(values, (str, bytes)) or out is None or out.ndim != 1:
        raise DPAuditError(f"{name} must be a list of numbers {allowed}, got {shorten(values)}.")
    return out


def claim_curves(claim: Guarantee | DpEvent, deltas: Sequence[float] | np.ndarray | None = None,
                 orders: Sequence[float] | np.ndarray | None = None) -> dict[str, dict[str, list[float]]]:
    """The claim's whole privacy profile (eps at each delta, by the claim's own conversion) and its
    Rényi curve, for the report's figures: what the claim allows, not only its eps at one delta."""
    g = as_guarantee(claim)
    deltas = np.geomspace(1e-12, 0.5, 90) if deltas is None else _numbers("deltas", deltas, "in (0, 1)")
    orders = np.geomspace(1.05, 64.0, 40) if orders is None else _numbers("orders", orders, "> 1 (Rényi orders)")
    eps = []
    for d in deltas:
        try:
            eps.append(float(g.conversion(float(d)).epsilon))
        except (NotImplementedError, DPAuditError, ValueError, OverflowError):
            eps.append(math.nan)
    renyi = []
    for o in orders:
        try:
            renyi.append(float(g.renyi(float(o))))
        except (NotImplementedError, DPAuditError, ValueError, OverflowError):
            renyi.append(math.nan)
    return {"profile": {"delta": deltas.tolist(), "eps": eps}, "renyi": {"orders": orders.tolist(), "claimed": renyi}}
