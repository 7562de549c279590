"""What ``dpaudit check policy`` builds from a spec: a registered policy, a batched plug-in, or, with
``--adapter``, an adapted one-run class (:func:`build_policy`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpaudit.accountants import Guarantee
from dpaudit.adapters.claims import CLAIM_FORMS, parse_claim
from dpaudit.adapters.horizon import horizon_parameter
from dpaudit.adapters.options import parse_adapter
from dpaudit.adapters.loop import make_loop
from dpaudit.adapters.per_run import make_per_run
from dpaudit.adapters.process import make_process
from dpaudit.errors import DPAuditError, check_int

__all__ = ["build_policy"]


def build_policy(spec: str, params: Mapping[str, object] | None = None, horizon: int | None = None, *,
                 adapter: str | None = None, claim: Guarantee | str | None = None, **options: Any) -> Any:
    """What ``dpaudit check policy SPEC [--param ...] [--adapter per-run] [--claim ...]`` audits.

    ``adapter=None``: the registered policy or batched plug-in ``spec`` built from ``params``, with
    the horizon given to the constructor parameter :func:`horizon_parameter` finds (``horizon``,
    ``T``, ``iters``, ...; unless ``params`` sets it); ``claim``, if given, replaces the one the
    policy declares (a plug-in without one needs it). ``adapter="per-run"``: :func:`make_per_run`
    (``options`` go to :class:`PerRun`); ``"loop"``: :func:`~dpaudit.adapters.loop.make_loop` (a function
    or class that runs its own loop); ``"process"``: :func:`~dpaudit.adapters.process.make_process`
    (``spec`` is a command speaking ``dpaudit.process/1``). The policy must say how many arms it has.
    """
    from dpaudit.policies.registry import load_policy_class, make_policy

    if adapter is not None:
        adapter, more = parse_adapter(adapter)
        options = {**more, **options}
    if adapter == "per-run":
        return make_per_run(spec, params, claim, horizon, **options)
    if adapter == "process":
        return make_process(spec, params, claim, horizon, **options)
    if adapter == "loop":
        return make_loop(spec, params, claim, horizon, **options)
    if options:
        raise DPAuditError(f"options {', '.join(options)} apply to the per-run adapter only.")
    params = dict(params or {})
    cls = load_policy_class(spec)
    hp = horizon_parameter(cls)
    if horizon is not None and hp is not None and hp not in params:
        params[hp] = str(check_int("horizon", horizon, minimum=1))
    policy = make_policy(spec, params)
    if not hasattr(policy, "n_arms") and not getattr(policy, "continuous_actions", False):  # BCO: dpaudit.bco
        raise DPAuditError(f"policy {spec!r} has no n_arms attribute; a policy must say how many arms it has.")
    if claim is not None:
        policy.claim = parse_claim(claim) if isinstance(claim, str) else claim
        if not isinstance(policy.claim, Guarantee):
            raise DPAuditError(f"the claim must be a Guarantee from dpaudit.accountants or text such as "
                               f"{CLAIM_FORMS}, got {claim!r}.")
    return policy
