"""dpaudit's public Python API: ``dpaudit.audit(policy, ...) -> Audit``.

:func:`audit` runs what ``dpaudit check policy`` runs (the claim, the ledger audit, the neighbouring
-pair search, the membership and likelihood attacks, the verdict; :func:`dpaudit.check.audit_policy`)
for a policy given any way a Python user holds one:

* a registered name (``"adac-ucb"``), a plug-in ``"path/to/file.py:Class"`` or ``"module:Class"``
  string, with ``params`` (strings or typed values);
* a class, with ``params`` (typed by its constructor's signature, exactly as ``--param`` values are;
  like a name, it receives the audit's horizon if its constructor takes ``horizon``);
* an instance, audited as it is.

It returns an :class:`Audit`: a frozen dataclass with typed fields, whose :meth:`Audit.to_dict` is the
JSON ``dpaudit check policy --json`` prints, and which renders itself as a reviewer report
(:meth:`Audit.to_markdown`, :meth:`Audit.to_html`, :meth:`Audit.write`). :func:`describe` says what a
policy is (parameters and defaults, claim, the seed and algorithm its docstring names).
"""

from __future__ import annotations

import inspect
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from dpaudit.errors import DPAuditError

__all__ = ["Audit", "audit", "account", "describe", "policy_label", "claim_curves", "AuditInterrupted"]


def _num(x: Any) -> float | None:
    """A JSON number back to a float ("inf" strings included); None stays None."""
    if x is None:
        return None
    if isinstance(x, str):
        return float(x)  # "inf", "-inf", "nan"
    return float(x)


#: keys of the findings dict that have a typed field of their own
_TYPED = ("verdict", "reason", "policy", "params", "protocol", "claim", "epsilon_claimed", "epsilon_lower", "gap",
          "delta", "confidence", "horizon", "seed", "witness", "attacks", "ledger", "notes", "versions", "seconds",
          "command")


@dataclass(frozen=True)
class Audit:
    """The findings of one audit (what ``dpaudit check policy --json`` prints), with typed fields.

    ``verdict`` is ``"violation"`` (a lower bound at ``confidence`` exceeds the claim),
    ``"consistent"`` (none does; ``gap`` = claimed eps minus the best lower bound), ``"interrupted"``
    or any other verdict the audit defines (e.g. ``"inconclusive"``); ``reason`` is the one sentence
    that says why. ``epsilon_claimed`` is the claim converted to eps at ``delta``; ``epsilon_lower``
    the best attack's lower bound at ``confidence``. ``attacks`` holds each attack's
    :class:`~dpaudit.attacks.result.AuditResult`; ``ledger`` the per-round accounting of the
    policy's ledger (None without one). Every other finding (the search's ranking, the conversion
    used, ...) is in ``extra`` under the JSON key it has in ``to_dict()``.
    """

    verdict: str
    reason: str
    policy: str
    params: dict[str, Any]
    protocol: str
    claim: str | None
    epsilon_claimed: float | None
    epsilon_lower: float | None
    gap: float | None
    delta: float
    confidence: float
    horizon: int | None
    seed: int
    witness: dict[str, Any] | None
    attacks: tuple[Any, ...]
    ledger: dict[str, Any] | None
    notes: tuple[str, ...]
    versions: dict[str, str]
    seconds: float
    command: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: typed keys the findings did not have (an interrupted audit stops before some), left out of to_dict()
    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    @classmethod
    def from_dict(cls, findings: Mapping[str, Any]) -> "Audit":
        """An :class:`Audit` from the findings dict of :func:`dpaudit.check.audit_policy` or from the
        JSON of ``dpaudit check policy --json`` (``json.load`` of it)."""
        from dpaudit.attacks.result import AuditResult, jsonable

        d = jsonable(dict(findings))
        attacks = tuple(AuditResult(**a) for a in d.get("attacks") or [])
        return cls(
            verdict=str(d.get("verdict", "")), reason=str(d.get("reason", "")), policy=str(d.get("policy", "")),
            params=dict(d.get("params") or {}), protocol=str(d.get("protocol", "")), claim=d.get("claim"),
            epsilon_claimed=_num(d.get("epsilon_claimed")), epsilon_lower=_num(d.get("epsilon_lower")),
            gap=_num(d.get("gap")), delta=float(d.get("delta", math.nan)),
            confidence=float(d.get("confidence", math.nan)), horizon=d.get("horizon"), seed=d.get("seed", 0),
            witness=d.get("witness"), attacks=attacks, ledger=d.get("ledger"), notes=tuple(d.get("notes") or ()),
            versions=dict(d.get("versions") or {}), seconds=float(d.get("seconds") or 0.0),
            command=str(d.get("command") or ""), extra={k: v for k, v in d.items() if k not in _TYPED},
            absent=frozenset(k for k in _TYPED if k not in d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready findings: exactly what ``dpaudit check policy --json`` prints."""
        from dpaudit.attacks.result import jsonable

        typed = {k: getattr(self, k) for k in _TYPED}
        typed["attacks"] = [a.to_dict() for a in self.attacks]
        typed["notes"] = list(self.notes)
        out = {k: v for k, v in typed.items() if k not in self.absent}
        return jsonable({**out, **self.extra})

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as a JSON string (``kwargs`` go to :func:`json.dumps`, e.g. ``indent=2``)."""
        return json.dumps(self.to_dict(), **kwargs)

    def to_markdown(self) -> str:
        """The reviewer report as Markdown (:func:`dpaudit.report.markdown_report`)."""
        from dpaudit.report import markdown_report

        return markdown_report(self.to_dict())

    def to_html(self) -> str:
        """The reviewer report as one self-contained HTML page with its figures embedded."""
        from dpaudit.report import html_report

        return html_report(self.to_dict())

    def write(self, path: str | Path) -> list[Path]:
        """Write ``path`` (Markdown, must end in ``.md``) and the HTML page beside it, atomically as a pair."""
        from dpaudit.report import write_report

        return write_report(self.to_dict(), path)

    @property
    def exit_status(self) -> int:
        """The CLI's exit status for this verdict: 0 consistent, 1 violation, 3 inconclusive, 130 interrupted."""
        codes = {"consistent": 0, "violation": 1, "inconclusive": 3, "interrupted": 130}
        if self.verdict not in codes:  # never a silent pass: an unknown verdict is not exit 0
            raise DPAuditError(f"the audit returned the unknown verdict {self.verdict!r}; expected one of "
                               f"{', '.join(codes)}.")
        return codes[self.verdict]

    def __repr__(self) -> str:
        def f(x: float | None) -> str:
            return "None" if x is None else f"{x:.4g}"

        return (f"Audit({self.verdict}: {self.policy} {self.params or ''} claims eps = {f(self.epsilon_claimed)}, "
                f"measured eps >= {f(self.epsilon_lower)} at delta = {self.delta:g}, confidence {self.confidence:g}; "
                f"gap {f(self.gap)})")

    def _repr_html_(self) -> str:  # Jupyter shows the report
        return self.to_html()


class AuditInterrupted(Exception):
    """Ctrl-C during :func:`audit`; ``audit`` holds an :class:`Audit` of what had finished."""

    def __init__(self, partial: Audit) -> None:
        super().__init__("the audit was interrupted")
        self.audit = partial


def policy_label(policy: Any) -> str:
    """How a policy is named in the findings: the spec string, ``module:Class`` for a class, and
    ``module:Class(instance)`` for an instance."""
    if isinstance(policy, str):
        return policy
    cls = policy if isinstance(policy, type) else type(policy)
    name = f"{cls.__module__}:{cls.__qualname__}"
    return name if isinstance(policy, type) else f"{name} (instance)"


def _check_policy_object(policy: Any, params: Mapping[str, Any] | None) -> None:
    if isinstance(policy, str):
        return
    cls = policy if isinstance(policy, type) else type(policy)
    missing = [m for m in ("reset", "act", "observe") if not callable(getattr(cls, m, None))]
    if missing:
        raise DPAuditError(f"{cls.__qualname__} lacks {', '.join(missing)}; a policy needs reset, act and observe "
                           "(see DESIGN.md, 'The plug-in contract').")
    if not isinstance(policy, type) and params:
        raise DPAuditError(f"params {dict(params)} were given with an already-built {cls.__qualname__}; pass the "
                           "class with params=..., or the instance alone.")


def _python_call(policy: Any, params: Mapping[str, Any], kwargs: dict[str, Any]) -> str:
    """The call that reproduces an audit from Python, recorded as the findings' ``command``."""
    args = [repr(policy_label(policy))]
    if params:
        args.append(f"params={dict(params)!r}")
    args += [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"dpaudit.audit({', '.join(args)})"


def audit(
    policy: Any,
    *,
    params: Mapping[str, Any] | None = None,
    protocol: str = "table",
    delta: float = 1e-5,
    confidence: float = 0.95,
    runs: int = 50000,
    horizon: int | None = None,
    seed: int = 0,
    workers: int | None = None,
    executor: Any = None,
    progress: bool | Callable[[str], None] | None = None,
    command: str | None = None,
    horizons: Sequence[int] | None = None,
    rewards: Sequence[float] | None = None,
    claim: Any = None,
    adapter: str | None = None,
    pair: str | None = None,
    scheduler: str | None = None,
    checkpoint: str | None = None,
    max_hours: float | None = None,
) -> Audit:
    """Audit a policy: its claim, what the attacks measure, and a verdict (``dpaudit check policy``).

    ``policy`` is a registered name, a ``"file.py:Class"`` / ``"module:Class"`` string, a class (built
    with ``params``) or an instance. ``delta``, ``confidence``, ``runs`` (fresh runs per side),
    ``horizon`` (None: chosen as the CLI chooses it), ``seed`` are the CLI's options of the same
    names. ``workers`` local processes (None: one per core) or a ``concurrent.futures`` ``executor``
    run the independent pieces; the findings do not depend on them. ``progress``: None or False
    for silence, True for a progress bar on stderr (plain lines when stderr is not a terminal), or
    a callable receiving each progress message. ``command`` overrides the recorded call (the CLI
    records its command line). ``horizons`` (optional) also measures leakage against the horizon: the
    witness pair's pattern rebuilt at each T and attacked afresh (``extra["leakage_vs_horizon"]``, one
    row per T, each its own audit at ``confidence``; from its own seed, so the verdict is unchanged).
    ``rewards`` lists the only rewards the policy accepts (e.g. ``[0, 1]``); ``claim`` (a Guarantee, a
    DpEvent or text such as ``"zcdp:rho=0.1"``) replaces the policy's own; ``adapter="per-run"`` runs
    a one-run class (given as a string) as N copies; ``pair`` is a ``dpaudit.pair/1`` file audited
    instead of searching (the CLI's ``--rewards``, ``--claim``, ``--adapter``, ``--pair``).
    ``scheduler`` (a Dask scheduler address ``tcp://HOST:PORT``), ``checkpoint`` (a directory the
    finished pieces are recorded in, and resumed from) and ``max_hours`` (the up-front time limit,
    default 24) are the CLI's ``--scheduler``, ``--checkpoint`` and ``--max-hours``.
    Raises :class:`DPAuditError` on bad input and
    :class:`AuditInterrupted` (carrying the partial :class:`Audit`) on Ctrl-C.
    """
    from dpaudit.check import AuditInterrupted as _Interrupted
    from dpaudit.check import audit_policy
    from dpaudit.engine import default_workers
    from dpaudit.errors import check_int

    _check_policy_object(policy, params)
    params = dict(params or {})
    if claim is not None and not isinstance(claim, str):
        from dpaudit.accountants.guarantees import as_guarantee

        claim = as_guarantee(claim)  # a DpEvent claim is read exactly
    if horizons is not None:  # checked before the audit, not after it
        horizons = sorted({check_int("each of horizons", T, minimum=2) for T in horizons})
        if protocol in ("interactive", "local"):
            raise DPAuditError("horizons (leakage against the horizon) are measured under protocol table or view, "
                               f"not {protocol}.")
    if command is None:
        command = _python_call(policy, params, {"protocol": protocol, "delta": delta, "confidence": confidence,
                                                "runs": runs, "horizon": horizon, "seed": seed})
    workers = default_workers() if workers is None else check_int("workers", workers, minimum=1)
    bar = None
    if progress is True:
        from dpaudit.progress import ProgressBar

        bar = ProgressBar()
        progress_fn: Callable[[str], None] | None = bar
    elif progress is None or progress is False:
        progress_fn = None
    elif callable(progress):
        progress_fn = progress
    else:
        raise DPAuditError(f"progress must be None, True, False or a callable taking a message, got {progress!r}.")
    label = policy_label(policy)
    try:
        out = audit_policy(policy, params, protocol=protocol, delta=delta, confidence=confidence, runs=runs,
                           horizon=horizon, seed=seed, progress=progress_fn, command=command, workers=workers,
                           executor=executor, rewards=rewards, claim=claim, adapter=adapter, pair=pair,
                           scheduler=scheduler, checkpoint=checkpoint, max_hours=max_hours)
    except _Interrupted as exc:
        exc.partial["policy"] = label
        raise AuditInterrupted(Audit.from_dict(exc.partial)) from None
    finally:
        if bar is not None:
            bar.close()
    out["policy"] = label
    if out.get("epsilon_claimed") is not None and "claim_curves" not in out:  # exact joint audits bring their own
        from dpaudit.check import _build_policy

        stated = getattr(_build_policy(policy, dict(params), int(out["horizon"]), adapter, claim), "claim", None)
        if stated is not None:
            out["claim_curves"] = claim_curves(stated)
    if horizons:
        out["leakage_vs_horizon"] = _leakage_vs_horizon(policy, params, out, horizons, runs, seed, adapter, claim)
    return Audit.from_dict(out)


def _leakage_vs_horizon(policy: Any, params: dict[str, Any], out: dict[str, Any], horizons: Sequence[int],
                        runs: int, seed: int, adapter: str | None = None, claim: Any = None) -> list[dict[str, Any]]:
    """The witness pair's pattern (canary round, background) rebuilt at each horizon and attacked
    afresh (:func:`dpaudit.attacks.neighbours.leakage_vs_horizon`). The policy is built once, at the
    audit's horizon (a policy whose constructor takes ``horizon`` keeps that one at every T)."""
    import numpy as np

    from dpaudit.attacks.neighbours import leakage_vs_horizon
    from dpaudit.protocols import PairSpec
    from dpaudit.check import _build_policy, _with_features
    from dpaudit.engine import one_blas_thread
    from dpaudit.protocols import get_protocol

    Ts = list(horizons)
    w = out.get("witness") or {}
    m = re.search(r"background (?:arm means \(([^)]*)\)|(\w+))", str(w.get("label", "")))  # PairSpec.label()
    if out["protocol"] == "interactive" or m is None or "round" not in w:
        raise DPAuditError("leakage against the horizon needs a witness pair under --protocol table or view; this "
                           f"audit has {w.get('label') or 'none'}.")
    if m.group(1) is not None:
        spec = PairSpec(int(w["round"]), "means", means=tuple(float(x) for x in m.group(1).split(",")))
    else:
        spec = PairSpec(int(w["round"]), m.group(2))
    small = max(500, min(2000, runs // 10))
    with one_blas_thread():
        return leakage_vs_horizon(
            lambda: _with_features(_build_policy(policy, dict(params), int(out["horizon"]), adapter, claim), seed),
            get_protocol(out["protocol"]), spec, Ts, delta=out["delta"], confidence=out["confidence"],
            seed=np.random.SeedSequence([int(seed), 0x40_12]), n_train=small, n_select=small, n_test=runs,
            n_likelihood=runs)


def claim_curves(claim: Any, deltas: Any = None, orders: Any = None) -> dict[str, Any]:
    """The claim's whole privacy profile (eps at each delta, by the claim's own conversion) and its
    Rényi curve, for the report's figures: what the claim allows, not only its eps at one delta."""
    import numpy as np

    from dpaudit.accountants.guarantees import as_guarantee

    g = as_guarantee(claim)
    deltas = np.geomspace(1e-12, 0.5, 90) if deltas is None else np.asarray(deltas, dtype=float)
    orders = np.geomspace(1.05, 64.0, 40) if orders is None else np.asarray(orders, dtype=float)
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


# ---- describe ------------------------------------------------------------------------------------

def _doc_sources(cls: type) -> list[str]:
    """The references a policy's docstring gives for what it follows: its parenthesised citations
    that name a seed paper, an algorithm, an equation, a lemma or a theorem (``seed 001 App. C, Alg. 4,
    Eq. 14``), else the docstring's lines that mention a seed."""
    doc = " ".join((inspect.getdoc(cls) or "").split())
    found: list[str] = []
    for m in re.finditer(r"\(([^()]*(?:[Ss]eed \d{3}|Alg\.|Algorithm|Eq\.|Lemma|Thm|Prop\.)[^()]*)\)", doc):
        if m.group(1) not in found:
            found.append(m.group(1))
    if not found:
        found = [ln.strip() for ln in (inspect.getdoc(cls) or "").splitlines() if re.search(r"[Ss]eed \d{3}", ln)]
    if not found:  # a plug-in may say it in its module's docstring: the lines that name a seed
        module = inspect.getmodule(cls)
        found = [ln.strip(" *-") for ln in (inspect.getdoc(module) or "").splitlines()
                 if re.search(r"[Ss]eed \d{3}", ln)]
    return found[:6]


def _keeps_ledger(cls: type) -> bool:
    from dpaudit.policies.base import Policy

    return issubclass(cls, Policy) or "ledger" in vars(cls)


def describe(policy: Any) -> dict[str, Any]:
    """What a policy is: its parameters with their defaults, its claim at the defaults (where the
    defaults build it), and the seed and algorithm its docstring says it follows.

    ``policy`` is a registered name, a plug-in spec string or a class. Returns a JSON-ready dict
    (``dpaudit describe POLICY --json`` prints it).
    """
    from dpaudit.policies.registry import _REGISTRY, _ensure_loaded, load_policy_class

    if isinstance(policy, str):
        cls = load_policy_class(policy)
    elif isinstance(policy, type):
        cls = policy
    else:
        cls = type(policy)
    _ensure_loaded()
    entry = next((e for e in _REGISTRY.values() if e.cls is cls), None)
    try:
        sig = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        sig = {}
    parameters = []
    for name, p in sig.items():
        if name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = p.annotation
        ann_s = None if ann is inspect.Parameter.empty else (ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann)))
        required = p.default is inspect.Parameter.empty
        parameters.append({"name": name, "type": ann_s, "required": required,
                           "default": None if required else p.default})
    claim = claim_note = None
    inst = None
    try:
        inst = policy if not isinstance(policy, (str, type)) else cls()
        g = getattr(inst, "claim", None)
        if g is not None:
            from dpaudit.accountants.guarantees import as_guarantee

            claim = as_guarantee(g).describe()
            claim_note = "at the instance's parameters" if not isinstance(policy, (str, type)) else "at the defaults"
    except Exception as exc:  # a required parameter, or defaults the constructor refuses
        claim_note = f"not built at the defaults ({type(exc).__name__}: {exc})".rstrip(".")
    doc = inspect.getdoc(cls) or ""
    return {
        "policy": policy if isinstance(policy, str) else policy_label(cls),
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "registered_as": entry.name if entry else None,
        "family": entry.family if entry else None,
        "mutant": bool(entry.mutant) if entry else False,
        "summary": doc.splitlines()[0] if doc else "",
        "follows": _doc_sources(cls),
        "parameters": parameters,
        "claim": claim,
        "claim_note": claim_note,
        "has_ledger": _keeps_ledger(cls) or hasattr(inst, "ledger"),
        "docstring": doc,
    }


# ---- account ------------------------------------------------------------------------------------

def account(policy: Any, *, params: Mapping[str, Any] | None = None, delta: float = 1e-5, horizon: int = 2000,
            runs: int = 4, seed: int = 0) -> Any:
    """A policy's claim beside what its ledger implies (``dpaudit account policy``): run it ``runs`` times
    for ``horizon`` steps on a fixed Bernoulli table (:func:`dpaudit.accounting.run_policy`) and compose,
    per round, every release that round fed (:func:`dpaudit.accounting.claim_vs_ledger`).

    ``policy`` is given as for :func:`audit` (name, plug-in string, class with ``params``, instance).
    Returns a :class:`dpaudit.accounting.LedgerAccount` (``status`` is ``"exceeds-claim"`` when the
    ledger implies more than the claim; ``as_dict()`` is the JSON of ``--json``). A DpEvent claim is
    read exactly; a policy without a ledger is refused in one sentence.
    """
    from dpaudit.accountants.guarantees import as_guarantee
    from dpaudit.accounting import claim_vs_ledger, run_policy
    from dpaudit.check import _build_policy
    from dpaudit.errors import check_delta, check_int

    _check_policy_object(policy, params)
    delta = check_delta(delta)
    horizon = check_int("horizon", horizon, minimum=1)
    built = _build_policy(policy, {k: v for k, v in (params or {}).items()}, horizon)
    info = run_policy(built, horizon, runs, seed)
    ledger = getattr(built, "ledger", None)
    if ledger is None:
        raise DPAuditError(f"policy {policy_label(policy)!r} keeps no ledger (it does not use dpaudit's mechanisms), "
                           "so its releases cannot be accounted; use dpaudit.audit for the black-box attack.")
    claim = getattr(built, "claim", None)
    result = claim_vs_ledger(as_guarantee(claim) if claim is not None else None, ledger, horizon, delta,
                             info["reward_span"])
    result.extra.update({"run_seconds": info.get("seconds")} if "seconds" in info else {})
    return result
