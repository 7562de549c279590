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
policy is (parameters and defaults, claim, the paper and algorithm its docstring names, with the full
references).
"""

from __future__ import annotations

import inspect
import re
from contextlib import nullcontext
from dataclasses import dataclass, fields, replace
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence, TypedDict, TypeVar

from dpaudit.errors import DPAuditError, InternalError, check_int, check_path, check_positive, shorten
from dpaudit.runner.findings import AuditInterrupted, Findings
from dpaudit.runner.setup import claim_curves

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from dpaudit.accountants import Guarantee
    from dpaudit.accounting import LedgerAccount
    from dpaudit.policies.base import PolicySource

__all__ = ["Audit", "audit", "account", "describe", "policy_label", "claim_curves", "AuditInterrupted",
           "resolve_protocol", "finite_notion", "PolicyDescription", "ParameterDescription"]

_T = TypeVar("_T")


@dataclass(frozen=True, repr=False)
class Audit(Findings):
    """The findings of one audit, with the reviewer report (:class:`dpaudit.runner.findings.Findings`).

    ``verdict`` (a :class:`dpaudit.Verdict`, equal to its word) is ``"violation"`` (a lower bound at ``confidence``, or an exact figure the verdict
    judges, exceeds the claim), ``"consistent"`` (none does, and the audit showed power; ``gap`` =
    claimed eps minus the best lower bound), ``"inconclusive"`` (no power), ``"interrupted"`` or
    ``"exact"`` (an exact enumeration with nothing to judge); ``reason`` is the one sentence that says
    why. ``epsilon_upper`` is the tightest eps at ``delta`` dpaudit can prove for the policy (``upper`` holds
    its method and assumptions; None when nothing can be proved beyond the claim, or when a lower bound
    refutes the figure), so the audit brackets the truth in [``epsilon_lower``, ``epsilon_upper``]; the
    verdict judges the claim alone. ``to_dict()`` is the JSON of ``--json`` (with its ``format`` key) and :meth:`from_dict` reads it
    back; :meth:`to_markdown`, :meth:`to_html` and :meth:`write` render the reviewer report.
    """

    @classmethod
    def of(cls, findings: Findings) -> "Audit":
        """The :class:`Audit` of a runner's findings."""
        if not isinstance(findings, Findings):
            raise DPAuditError(f"Audit.of takes the findings of dpaudit.runner.run (a Findings), got {shorten(findings)}; "
                               "use Audit.from_dict for a findings dict.")
        return cls(**{f.name: getattr(findings, f.name) for f in fields(Findings)})

    def to_markdown(self) -> str:
        """The reviewer report as Markdown (:func:`dpaudit.report.markdown_report`)."""
        from dpaudit.report import markdown_report

        return markdown_report(self)

    def to_html(self) -> str:
        """The reviewer report as one self-contained HTML page with its figures embedded."""
        from dpaudit.report import html_report

        return html_report(self)

    def write(self, path: str | Path) -> list[Path]:
        """Write ``path`` (Markdown, must end in ``.md``) and the HTML page beside it, atomically as a pair."""
        from dpaudit.report import write_report

        return write_report(self, path, "path")

    def _repr_html_(self) -> str:  # Jupyter shows the report
        return self.to_html()


def policy_label(policy: PolicySource) -> str:
    """How a policy is named in the findings: the spec string, ``module:Class`` for a class (a plug-in
    file's class as ``path/to/file.py:Class``, the way the user names it), and ``module:Class (instance)``
    for an instance."""
    from dpaudit.policies.registry import plugin_label

    if isinstance(policy, str):
        return policy
    cls = policy if isinstance(policy, type) else type(policy)
    name = plugin_label(cls)
    return name if isinstance(policy, type) else f"{name} (instance)"


# ---- the protocol: the notion a policy's claim is about, unless asked otherwise ------------------

#: (the claim's notion, the protocol audited) -> where the paper shows the claim implies the audited notion
_IMPLIED = {("interactive", "table"): "Azize & Basu 2023a, Prop. 2(a)",
            ("table", "view"): "Azize & Basu 2023a, Prop. 1(b, c)",
            ("interactive", "view"): "Azize & Basu 2023a, Props. 1(b, c) and 2(a)"}


def _a(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def finite_notion(spec: str) -> str | None:
    """``"joint"`` for a finite contextual spec, ``"table"`` for a finite policy spec, None for neither."""
    from dpaudit import deprecations
    from dpaudit.policies.finite import BUNDLED
    from dpaudit.policies.finite_contextual import BUNDLED_CONTEXTUAL, FORMAT_CONTEXTUAL

    spec = deprecations.spec(spec)
    if spec in BUNDLED_CONTEXTUAL:
        return "joint"
    if spec in BUNDLED:
        return "table"
    if spec.endswith(".json"):
        import json

        if not Path(spec).is_file():
            return "table"  # (a folder, a FIFO, a missing file: the spec's loader says what is wrong with it)
        try:
            with open(spec) as fh:
                fmt = json.load(fh).get("format")
        except Exception:  # unreadable, not JSON, too deeply nested, not an object
            return "table"  # the spec's loader says what is wrong with it, in one sentence
        return "joint" if fmt == FORMAT_CONTEXTUAL else "table"
    return None


def _class_notion(spec: str, adapter: str | None, progress: object = None) -> tuple[str | None, bool]:
    """(its class's ``notion``, whether a per-run adapter names a randomizer) of a plug-in spec: run in a
    process of its own (:func:`dpaudit.sandbox.run_isolated`), so that importing plug-in code here
    changes nothing of the audit that follows (it imports the plug-in in its own process)."""
    from dpaudit.policies.registry import load_policy_class, notion_of
    from dpaudit.sandbox import guard

    with guard(spec, "import"):
        target = load_policy_class(spec, contract=adapter is None)
        notion = notion_of(target) if isinstance(target, type) else None
    randomizer = adapter is not None and "randomizer=" in adapter
    return notion, randomizer


def _notion(policy: PolicySource, adapter: str | None) -> tuple[str | None, str]:
    """(the notion ``policy``'s claim is about or None, the reason in words) for the audit's default."""
    from dpaudit.policies.registry import NOTION_NAMES, entry_of, notion_of
    from dpaudit.sandbox import can_isolate, is_plugin_spec, run_isolated

    who = policy_label(policy)
    if isinstance(policy, str):
        entry = entry_of(policy)
        if entry is not None:
            return entry.notion, f"the claim of {who} is {_a(NOTION_NAMES[entry.notion])} claim"
        finite = finite_notion(policy)
        if finite == "joint":
            return finite, f"{who} is a finite contextual spec, audited exactly under joint DP"
        if finite == "table":
            return finite, f"{who} is a finite policy spec, audited exactly under Table DP by default"
        if not is_plugin_spec(policy):
            return None, ""  # an unknown name: the audit says so in one sentence
        if can_isolate():
            notion, randomizer = run_isolated(_class_notion, policy, adapter, what="reading the plug-in's notion")
        else:  # pragma: no cover - no fork (Windows)
            notion, randomizer = _class_notion(policy, adapter)
    else:
        notion, randomizer = notion_of(policy), False
        entry = entry_of(policy if isinstance(policy, type) else type(policy))
        who = entry.name if entry is not None else who
    if notion is not None:
        return notion, f"the claim of {who} is {_a(NOTION_NAMES[notion])} claim"
    if randomizer:
        return "local", f"the per-run adapter runs {who} with its randomizer as each user's channel"
    return None, (f"{who} names no notion (a class attribute such as notion = 'joint' says which protocol its "
                  "claim is about), so the default, table")


def resolve_protocol(policy: PolicySource, protocol: str | None = None, *,
                     adapter: str | None = None) -> tuple[str, str | None]:
    """The protocol an audit of ``policy`` runs, and the note that says why.

    Without ``protocol``: the notion its claim is about (its class's ``notion``, a registered policy's
    :attr:`~dpaudit.policies.registry.PolicyEntry.notion`; table for a plug-in that names none). With
    one: that protocol, and when the claim is about another notion the note says so (a claim about
    Interactive DP implies Table DP and a Table-DP claim View DP, Azize & Basu 2023a, Props. 1 and 2;
    any other mismatch judges the claim under a notion it does not make)."""
    from dpaudit import deprecations
    from dpaudit.policies.registry import NOTION_NAMES

    policy = deprecations.spec(policy)
    notion, why = _notion(policy, adapter)
    if protocol is None:
        return (notion or "table"), (f"protocol {notion or 'table'}: {why}." if why else None)
    if notion is None or not why or why.startswith(f"{policy_label(policy)} is a finite"):
        return protocol, None  # the default of a finite spec or of a policy naming no notion: nothing to contrast
    if protocol == notion:
        return protocol, f"protocol {protocol}: {why}."
    claim = why  # "the claim of X is a ... claim"
    later = f"; without --protocol it is audited under {notion}."
    implied = _IMPLIED.get((notion, protocol))
    if implied is not None:
        return protocol, (f"protocol {protocol} (as asked): {claim}, which implies {NOTION_NAMES[protocol][:-3]} DP "
                           f"({implied}): a weaker test of it{later}")
    stronger = _IMPLIED.get((protocol, notion))
    if stronger is not None:
        return protocol, (f"protocol {protocol} (as asked): {claim}, and {NOTION_NAMES[protocol][:-3]} DP is "
                           f"stronger ({stronger}), so a bound above the claim here need not contradict it{later}")
    return protocol, (f"protocol {protocol} (as asked): {claim}, not {_a(NOTION_NAMES[protocol])} one, so a bound "
                      f"above the claim here need not contradict it{later}")


#: what ``policy`` may be, in the sentence that refuses anything else
_POLICY_KINDS = ("a registered name (see `dpaudit list`), a 'file.py:Class' or 'module:Class' string, a policy class "
                 "or a policy instance")
_NOT_POLICIES = (bool, int, float, complex, bytes, bytearray, list, tuple, dict, set, frozenset, Path)


def _check_params(params: object) -> dict[str, object]:
    """``params`` as a dict of parameter names to values (None: none)."""
    if params is None:
        return {}
    if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
        raise DPAuditError(f"params must be a mapping of parameter names to values such as {{'rho': 0.5}}, got "
                           f"{shorten(params)}.")
    return dict(params)


def _check_policy_object(policy: object, params: Mapping[str, object] | None) -> None:
    if isinstance(policy, str):
        if not policy.strip():
            raise DPAuditError(f"policy must be {_POLICY_KINDS}, got an empty string.")
        return
    if policy is None or isinstance(policy, _NOT_POLICIES):
        raise DPAuditError(f"policy must be {_POLICY_KINDS}, got {shorten(policy)}.")
    cls = policy if isinstance(policy, type) else type(policy)
    missing = [m for m in ("reset", "act", "observe") if not callable(getattr(cls, m, None))]
    if missing:
        raise DPAuditError(f"{cls.__qualname__} lacks {', '.join(missing)}; a policy needs reset, act and observe "
                           "(see DESIGN.md, 'The plug-in contract').")
    if not isinstance(policy, type) and params:
        raise DPAuditError(f"params {dict(params)} were given with an already-built {cls.__qualname__}; pass the "
                           "class with params=..., or the instance alone.")


#: the arguments of :func:`audit` that determine its findings, with their defaults: the recorded call names
#: those given otherwise (and the seed), never a value the audit chose (its horizon)
_FINDING_ARGUMENTS: dict[str, object] = {"protocol": None, "delta": 1e-5, "confidence": 0.95, "runs": 50000,
                                      "horizon": None, "seed": None, "horizons": None, "rewards": None, "claim": None,
                                      "adapter": None, "pair": None}


def _python_call(policy: PolicySource, params: Mapping[str, object], kwargs: Mapping[str, object]) -> str:
    """The call that reproduces an audit from Python, recorded as the findings' ``command``: the policy
    (a class as its ``"module:Class"`` or ``"file.py:Class"`` spec; an instance cannot be written down,
    so it stays as its label), its ``params``, the arguments given that determine the findings, and the
    seed. A claim object is written as its ``repr`` (``ZCDP(rho=0.1)``, from :mod:`dpaudit.accountants`)."""
    args = [repr(policy_label(policy))]
    if params:
        args.append(f"params={dict(params)!r}")
    for k, v in kwargs.items():
        if k == "seed" or (v is not None and (k not in _FINDING_ARGUMENTS or v != _FINDING_ARGUMENTS[k])):
            args.append(f"{k}={list(v) if isinstance(v, tuple) else v!r}")
    return f"dpaudit.audit({', '.join(args)})"


def audit(
    policy: PolicySource,
    *,
    params: Mapping[str, object] | None = None,
    protocol: str | None = None,
    delta: float = 1e-5,
    confidence: float = 0.95,
    runs: int | None = None,
    horizon: int | None = None,
    seed: int = 0,
    workers: int | None = None,
    executor: Executor | None = None,
    progress: bool | Callable[[str], None] | None = None,
    command: str | None = None,
    horizons: Sequence[int] | None = None,
    rewards: Sequence[float] | None = None,
    claim: Guarantee | str | None = None,
    adapter: str | None = None,
    pair: str | None = None,
    scheduler: str | None = None,
    checkpoint: str | None = None,
    max_hours: float | None = None,
    call_timeout: float | None = None,
    method: str = "multi-run",
) -> Audit:
    """Audit a policy: its claim, what the attacks measure, and a verdict (``dpaudit check policy``).

    ``policy`` is a registered name, a ``"file.py:Class"`` / ``"module:Class"`` string, a class (built
    with ``params``) or an instance. ``protocol`` (``"table"``, ``"view"``, ``"interactive"``,
    ``"local"``, ``"joint"``, ``"shuffle"``; None: the notion the policy's claim is about, its class's
    ``notion``, table for a plug-in that names none; :func:`resolve_protocol`): the first note of the
    findings says which protocol ran and why. ``delta``, ``confidence``, ``runs`` (fresh runs per side),
    ``horizon`` (None: chosen as the CLI chooses it), ``seed`` are the CLI's options of the same
    names (``runs=None``: 50000 per side). ``method="one-run"`` audits from a few runs with many canaries
    each instead (protocols table, view and local; ``runs`` is then the number of runs in all, one of them
    the pilot, default 10; :mod:`dpaudit.runner.one_run`). ``workers`` local processes (None: one per
    core) or a ``concurrent.futures`` ``executor`` run the independent pieces; the findings do not depend on them. ``progress``: None or False
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
    default 24) are the CLI's ``--scheduler``, ``--checkpoint`` and ``--max-hours``; ``call_timeout``
    (seconds one call into a plug-in's code may run; default: the scaled watchdog of
    :func:`dpaudit.sandbox.scaled_limit`, 60 s before the first call returns, then 100 times the slowest
    call, at least 30 s) is ``--call-timeout``: it applies to plug-in strings, and to classes and
    instances that are not dpaudit's own, whose calls run behind :func:`dpaudit.sandbox.guard` in this
    process. Numbers may be Python's or numpy's (``confidence=np.float32(0.9)``).
    Raises :class:`DPAuditError` on bad input and
    :class:`AuditInterrupted` (carrying the partial :class:`Audit`) on Ctrl-C.
    """
    from dpaudit import deprecations
    from dpaudit.engine import default_workers
    from dpaudit.runner import Request, run

    policy = deprecations.spec(policy)
    _check_policy_object(policy, params)
    params = _check_params(params)
    from dpaudit.runner import METHODS
    from dpaudit.runner.one_run import ONE_RUN_DEFAULTS

    if not isinstance(method, str) or method not in METHODS:
        raise DPAuditError(f"method must be one of {', '.join(map(repr, METHODS))}, got {shorten(method)}.")
    if runs is None:
        runs = ONE_RUN_DEFAULTS["runs"] if method == "one-run" else 50000
    _check_audit_arguments(protocol=protocol, delta=delta, confidence=confidence, runs=runs, horizon=horizon,
                           seed=seed, executor=executor, command=command, pair=pair, checkpoint=checkpoint,
                           max_hours=max_hours, adapter=adapter, scheduler=scheduler, call_timeout=call_timeout,
                           method=method)
    if claim is not None and not isinstance(claim, str):
        from dpaudit.accountants.guarantees import as_guarantee

        claim = as_guarantee(claim)  # a DpEvent claim is read exactly
    if horizons is not None:  # checked before the audit, not after it
        if isinstance(horizons, (str, bytes)) or not isinstance(horizons, Iterable):
            raise DPAuditError(f"horizons must be a list of integers >= 2 such as [24, 48, 96], got {shorten(horizons)}.")
        horizons = sorted({check_int("each of horizons", T, minimum=2) for T in horizons})
        if method == "one-run":
            raise DPAuditError("horizons (leakage against the horizon) rebuild a neighbouring pair at each T, which a "
                               "one-run audit does not have; drop horizons or method='one-run'.")
    if command is None:
        command = _python_call(policy, params, {"protocol": protocol, "delta": delta, "confidence": confidence,
                                                "runs": runs, "horizon": horizon, "seed": seed,
                                                "horizons": horizons, "rewards": rewards, "claim": claim,
                                                "adapter": adapter, "pair": pair,
                                                **({"method": method} if method != "multi-run" else {})})
    protocol, why = resolve_protocol(policy, protocol, adapter=adapter)
    if horizons is not None and protocol not in ("table", "view"):
        raise DPAuditError("horizons (leakage against the horizon) are measured under protocol table or view, "
                           f"not {protocol}.")
    workers = default_workers() if workers is None else check_int("workers", workers, minimum=1)
    bar = None
    if progress is True:
        from dpaudit.progress import ProgressBar

        bar = ProgressBar()
        progress_fn: Callable[[str], None] | None = bar
    elif progress is None or progress is False:
        progress_fn = None
    elif callable(progress):
        progress_fn = _progress_callback(progress)
    else:
        raise DPAuditError(f"progress must be None, True, False or a callable taking a message, got {progress!r}.")
    label = policy_label(policy)
    request = Request(policy, params, protocol, delta, confidence, runs, horizon, seed, workers, executor, scheduler,
                      checkpoint, max_hours, rewards, claim, adapter, pair, command, call_timeout=call_timeout,
                      method=method)
    first = (why,) if why else ()  # which protocol ran, and why: the findings' first note
    try:
        out = run(request, progress_fn)
    except AuditInterrupted as exc:
        partial = replace(exc.audit, policy=label, notes=first + tuple(exc.audit.notes))
        raise AuditInterrupted(Audit.of(partial)) from None
    finally:
        if bar is not None:
            bar.close()
    result = Audit.of(replace(out, policy=label, notes=first + tuple(out.notes)))
    if horizons:
        rows = _leakage_vs_horizon(policy, params, result, horizons, runs, seed, adapter, claim)
        result = replace(result, extra={**result.extra, "leakage_vs_horizon": rows})
    return result


def _progress_callback(fn: Callable[[str], object]) -> Callable[[str], None]:
    """The user's ``progress`` callable, checked before the audit (it must take one argument, the message) and
    wrapped so that an exception in it is one sentence naming it, not a traceback from inside the audit."""

    who = getattr(fn, "__name__", None) or type(fn).__qualname__
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: called as it is
        sig = None
    if sig is not None:
        try:
            sig.bind("message")
        except TypeError:
            raise DPAuditError(f"progress must be a callable taking one argument (each progress message), got {who}"
                               f"{sig}, which cannot be called with one.") from None

    def call(message: str) -> None:
        try:
            fn(message)
        except Exception as exc:
            text = shorten(exc, 120, as_text=True).rstrip(".") or "(no message)"
            raise DPAuditError(f"the progress callback {who} raised {type(exc).__name__} on the message "
                               f"{shorten(message, 60)}: {text}.") from exc

    return call


def _check_audit_arguments(*, protocol: object, delta: object, confidence: object, runs: object, horizon: object,
                           seed: object, executor: object, command: object, pair: object, checkpoint: object,
                           max_hours: object, adapter: object, scheduler: object, call_timeout: object,
                           method: str = "multi-run") -> None:
    """The arguments of :func:`audit`, named as the call names them, checked before anything is built."""
    from dpaudit.errors import check_confidence, check_delta
    from dpaudit.runner import PLANS
    from dpaudit.sandbox import check_call_timeout

    if protocol is not None and (not isinstance(protocol, str) or protocol not in PLANS):
        raise DPAuditError(f"protocol must be one of {', '.join(map(repr, PLANS))} or None (the notion of the "
                           f"policy's claim), got {shorten(protocol)}.")
    check_delta(delta)
    check_confidence(confidence)
    check_int("runs", runs, minimum=2 if method == "one-run" else 100)
    check_int("seed", seed, minimum=0)
    if horizon is not None:
        check_int("horizon", horizon, minimum=2)
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise DPAuditError(f"executor must be a concurrent.futures.Executor (anything with submit(fn, *args)), such as "
                           f"a ProcessPoolExecutor or a Dask client's get_executor(), got {shorten(executor)}.")
    for name, value in (("command", command), ("adapter", adapter), ("scheduler", scheduler)):
        if value is not None and not isinstance(value, str):
            raise DPAuditError(f"{name} must be a string, got {shorten(value)}.")
    for name, value in (("pair", pair), ("checkpoint", checkpoint)):
        if value is not None:
            check_path(name, value)
    if max_hours is not None:
        check_positive("max_hours", max_hours)
    check_call_timeout(call_timeout, "call_timeout")


def _leakage_vs_horizon(policy: PolicySource, params: Mapping[str, object], out: Audit, horizons: Sequence[int],
                        runs: int, seed: int, adapter: str | None = None,
                        claim: Guarantee | str | None = None) -> list[dict[str, float | None]]:
    """The witness pair's pattern (canary round, background) rebuilt at each horizon and attacked
    afresh (:func:`dpaudit.attacks.neighbours.leakage_vs_horizon`). The policy is built once, at the
    audit's horizon (a policy whose constructor takes ``horizon`` keeps that one at every T)."""
    import numpy as np

    from dpaudit.attacks.neighbours import leakage_vs_horizon
    from dpaudit.engine import one_blas_thread
    from dpaudit.protocols import PairSpec, get_protocol
    from dpaudit.runner.setup import build_policy, with_features

    Ts = list(horizons)
    horizon = out.horizon
    if horizon is None:
        raise InternalError("the findings of a table or view audit have no horizon")
    w = out.witness or {}
    m = re.search(r"background (?:arm means \(([^)]*)\)|(\w+))", str(w.get("label", "")))  # PairSpec.label()
    if out.protocol not in ("table", "view") or m is None or "round" not in w:
        raise DPAuditError("leakage against the horizon needs a witness pair under --protocol table or view; this "
                           f"audit has {w.get('label') or 'none'}.")
    if m.group(1) is not None:
        spec = PairSpec(int(w["round"]), "means", means=tuple(float(x) for x in m.group(1).split(",")))
    else:
        spec = PairSpec(int(w["round"]), m.group(2))
    small = max(500, min(2000, runs // 10))
    with one_blas_thread():
        return leakage_vs_horizon(
            lambda: with_features(build_policy(policy, dict(params), int(horizon), adapter, claim), seed),
            get_protocol(out.protocol), spec, Ts, delta=out.delta, confidence=out.confidence,
            seed=np.random.SeedSequence([int(seed), 0x40_12]), n_train=small, n_select=small, n_test=runs,
            n_likelihood=runs)


# ---- describe ------------------------------------------------------------------------------------

def _doc_sources(cls: type) -> list[str]:
    """The references a policy's docstring gives for what it follows: its parenthesised citations
    that cite a paper by authors and year (:func:`dpaudit.papers.mentioned`), an algorithm, an
    equation, a lemma or a theorem ("(Azize & Basu 2023a, App. C, Alg. 4, Eq. 14)"), else the
    docstring's lines that cite a paper, else the lines of its module's docstring that do. Taken out
    of its parentheses, a citation reads as in running text: "Azize & Basu (2023a), App. C, Alg. 4, Eq. 14"."""
    from dpaudit.papers import PAPERS, mentioned

    doc = " ".join((inspect.getdoc(cls) or "").split())
    found: list[str] = []
    for m in re.finditer(r"\(([^()]*)\)", doc):
        body = m.group(1)
        if (mentioned(body) or re.search(r"Alg\.|Algorithm|Eq\.|Lemma|Thm|Prop\.", body)) and body not in found:
            found.append(body)
    if not found:
        found = [ln.strip() for ln in (inspect.getdoc(cls) or "").splitlines() if mentioned(ln)]
    if not found:  # a plug-in may say it in its module's docstring: the lines that cite a paper
        module = inspect.getmodule(cls)
        found = [ln.strip(" *-") for ln in (inspect.getdoc(module) or "").splitlines() if mentioned(ln)]
    for p in PAPERS.values():
        if p.year_tag:  # "Azize & Basu 2023a, App. C" -> "Azize & Basu (2023a), App. C"
            found = [re.sub(re.escape(p.label) + r"(?![\w'])", p.narrative, f) for f in found]
    return found[:6]


def _keeps_ledger(cls: type) -> bool:
    from dpaudit.policies.base import Policy

    return issubclass(cls, Policy) or "ledger" in vars(cls)


class ParameterDescription(TypedDict):
    """One constructor parameter of a policy, as :func:`describe` gives it."""

    name: str
    type: str | None  # its annotation as written (None: none)
    required: bool
    default: object  # None when required


#: What :func:`describe` says of a policy (the JSON of ``dpaudit describe POLICY --json``); ``class`` is
#: ``module:Class`` (a plug-in file's as ``path/to/file.py:Class``). The functional form, since ``class``
#: is a keyword.
PolicyDescription = TypedDict("PolicyDescription", {
    "policy": str, "class": str, "notion": str, "notion_note": str, "registered_as": str | None,
    "family": str | None, "mutant": bool, "summary": str, "follows": list[str], "papers": list[str],
    "parameters": list[ParameterDescription], "claim": str | None, "claim_note": str | None, "has_ledger": bool,
    "docstring": str})


def describe(policy: PolicySource) -> PolicyDescription:
    """What a policy is: its parameters with their defaults, its claim at the defaults (where the
    defaults build it), and the paper and algorithm its docstring says it follows.

    Papers are named by authors and year, as the docstrings name them ("Azize & Basu (2023a), App. C,
    Alg. 4"), and ``papers`` lists the full references (authors, title, year) of the papers named
    (:func:`dpaudit.papers.references`).

    ``notion`` is the protocol its claim is about, the one ``dpaudit check policy`` audits without
    ``--protocol`` (``notion_note`` says why; a plug-in that names none gets table).

    ``policy`` is a registered name, a plug-in spec string, a class, or a finite policy spec (a bundled
    name such as ``table-vs-view-counterexample`` or a ``.json`` path: its format, sizes, description and
    claim). Returns a JSON-ready dict (``dpaudit describe POLICY --json`` prints it).
    """
    from dpaudit import deprecations
    from dpaudit.policies.registry import entry_of, load_policy_class, plugin_label
    from dpaudit.sandbox import guard, is_plugin_spec

    policy = deprecations.spec(policy)
    _check_policy_object(policy, None)
    if isinstance(policy, str) and entry_of(policy) is None and not is_plugin_spec(policy) \
            and finite_notion(policy) is not None:
        return _describe_spec(policy)
    cls: type
    if isinstance(policy, str):
        cls = load_policy_class(policy)
    elif isinstance(policy, type):
        cls = policy
    else:
        cls = type(policy)
    entry = entry_of(cls)
    sig: Mapping[str, inspect.Parameter]
    try:
        sig = inspect.signature(getattr(cls, "__init__")).parameters  # noqa: B009 (mypy refuses cls.__init__)
    except (TypeError, ValueError):
        sig = {}
    parameters: list[ParameterDescription] = []
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
    # a plug-in's code (constructor, claim, ledger) runs behind dpaudit.sandbox, as under check policy: its
    # prints go to stderr (describe --json stays JSON), an exit becomes one sentence naming the plug-in
    plugin = policy if isinstance(policy, str) and is_plugin_spec(policy) else None

    def attempt(method: str, fn: Callable[[], _T]) -> tuple[_T | None, Exception | None]:
        """``fn()`` (plug-in code): its exceptions are returned for the note; an exit is one sentence."""
        with guard(plugin, method) if plugin is not None else nullcontext():
            try:
                return fn(), None
            except Exception as exc:  # a required parameter, or defaults the constructor refuses
                return None, exc

    def read_claim() -> str | None:
        from dpaudit.accountants.guarantees import as_guarantee

        g = getattr(inst, "claim", None)
        return None if g is None else as_guarantee(g).describe()

    inst, failed = attempt("__init__", lambda: policy if not isinstance(policy, (str, type)) else cls())
    if failed is None:
        claim, failed = attempt("claim", read_claim)
    if failed is not None:
        claim_note = f"not {'built' if inst is None else 'read'} at the defaults ({type(failed).__name__}: {failed})"
        claim_note = claim_note.rstrip(".")
    elif claim is not None:
        claim_note = "at the instance's parameters" if not isinstance(policy, (str, type)) else "at the defaults"
    has_ledger = False
    if inst is not None:
        has_ledger = bool(attempt("ledger", lambda: hasattr(inst, "ledger"))[0])
    from dpaudit.papers import references

    doc = inspect.getdoc(cls) or ""
    follows = _doc_sources(cls)
    notion, why = _notion(cls, None)
    if entry is not None:
        why = why.replace(policy_label(cls), entry.name)
    return {
        "policy": policy if isinstance(policy, str) else policy_label(cls),
        "class": plugin_label(cls),
        "notion": notion or "table",
        "notion_note": why,
        "registered_as": entry.name if entry else None,
        "family": entry.family if entry else None,
        "mutant": bool(entry.mutant) if entry else False,
        "summary": doc.splitlines()[0] if doc else "",
        "follows": follows,
        "papers": references("\n".join(follows + [doc])),
        "parameters": parameters,
        "claim": claim,
        "claim_note": claim_note,
        "has_ledger": _keeps_ledger(cls) or has_ledger,
        "docstring": doc,
    }


def _describe_spec(spec: str) -> PolicyDescription:
    """:func:`describe` of a finite policy spec (``dpaudit.finite-policy/1``) or a finite contextual one
    (``dpaudit.finite-contextual-policy/1``): a bundled name or a ``.json`` path."""
    import json
    from importlib import resources

    from dpaudit.accountants.guarantees import as_guarantee
    from dpaudit.papers import references
    from dpaudit.policies.finite import BUNDLED, FinitePolicy, load_spec
    from dpaudit.policies.finite_contextual import BUNDLED_CONTEXTUAL, FiniteContextualPolicy, load_contextual

    notion, why = _notion(spec, None)
    contextual = notion == "joint"
    # validated: a bad spec is one sentence
    pol: FinitePolicy | FiniteContextualPolicy = load_contextual(spec) if contextual else load_spec(spec)
    bundled = {**BUNDLED, **BUNDLED_CONTEXTUAL}
    text = (resources.files("dpaudit.specs").joinpath(bundled[spec]).read_text() if spec in bundled
            else Path(spec).read_text())
    raw = json.loads(text)
    description = str(raw.get("description") or "")
    rewards = ", ".join(f"{r:g}" for r in pol.rewards)
    sizes = f"T = {pol.horizon}, K = {pol.n_arms}" + (f", contexts {{{', '.join(pol.contexts)}}}"
                                                        if isinstance(pol, FiniteContextualPolicy) else "")
    claim = getattr(pol, "claim", None)
    kind = "finite contextual policy" if contextual else "finite policy"
    return {
        "policy": spec,
        "class": f"{type(pol).__module__}:{type(pol).__qualname__}",
        "notion": notion or "table",  # a finite spec's: joint or table
        "notion_note": why,
        "registered_as": None,
        "family": "finite contextual spec" if contextual else "finite spec",
        "mutant": False,
        "summary": f"{kind} given by its decision-rule tables, format {raw.get('format')} ({sizes}, rewards "
                   f"{{{rewards}}}); audited exactly by enumeration",
        "follows": [description] if description else [],
        "papers": references(description),
        "parameters": [],
        "claim": None if claim is None else as_guarantee(claim).describe(),
        "claim_note": "the spec's own" if claim is not None else "the spec states none",
        "has_ledger": False,
        "docstring": description,
    }


# ---- account ------------------------------------------------------------------------------------

def account(policy: PolicySource, *, params: Mapping[str, object] | None = None, delta: float = 1e-5,
            horizon: int = 2000, runs: int = 4, seed: int = 0) -> LedgerAccount:
    """A policy's claim beside what its ledger implies (``dpaudit account policy``): run it ``runs`` times
    for ``horizon`` steps on a fixed Bernoulli table (:func:`dpaudit.accounting.run_policy`) and compose,
    per round, every release that round fed (:func:`dpaudit.accounting.claim_vs_ledger`).

    ``policy`` is given as for :func:`audit` (name, plug-in string, class with ``params``, instance).
    Returns a :class:`dpaudit.accounting.LedgerAccount` (``status`` is ``"exceeds-claim"`` when the
    ledger implies more than the claim; ``epsilon_upper`` the tightest eps at ``delta`` the ledger proves,
    every round's releases composed exactly; ``as_dict()`` is the JSON of ``--json``). A DpEvent claim is
    read exactly; a policy without a ledger is refused in one sentence, and so are ``runs`` and ``horizon``
    whose runs cannot fit in memory (:func:`dpaudit.runner.cost.account_preflight`).
    """
    from dpaudit.accountants.guarantees import as_guarantee
    from dpaudit.accounting import claim_vs_ledger, run_policy
    from dpaudit.errors import check_delta
    from dpaudit.runner.setup import build_policy

    _check_policy_object(policy, params)
    params = _check_params(params)
    delta = check_delta(delta)
    horizon = check_int("horizon", horizon, minimum=1)
    runs = check_int("runs", runs, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    from dpaudit.runner.cost import account_preflight
    from dpaudit.sandbox import own_numerics

    with own_numerics():
        built = build_policy(policy, params, horizon)
        k = getattr(built, "n_arms", None)
        account_preflight(runs, horizon, int(k) if isinstance(k, Integral) and not isinstance(k, bool) else 1,
                          names=("runs", "horizon"))
        info = run_policy(built, horizon, runs, seed)
    ledger = getattr(built, "ledger", None)
    if ledger is None:
        raise DPAuditError(f"policy {policy_label(policy)!r} keeps no ledger (it does not use dpaudit's mechanisms), "
                           "so its releases cannot be accounted; use dpaudit.audit for the black-box attack.")
    claim = getattr(built, "claim", None)
    with own_numerics():
        result = claim_vs_ledger(as_guarantee(claim) if claim is not None else None, ledger, horizon, delta,
                                 info["reward_span"])
    return result
