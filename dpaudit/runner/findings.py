"""Typed findings of an audit, and their versioned JSON.

Every protocol's audit returns one :class:`Findings` (:class:`dpaudit.api.Audit` adds the reports): what was claimed (:class:`Claim`), what each part
measured -- lower bounds from attacks (:class:`~dpaudit.attacks.result.AuditResult`), exact figures
(:class:`Exact`: a ledger composed per round or per user, a finite channel, an exact enumeration),
the ledger's per-round accounting, the black-box attack's :class:`Power` -- every :class:`Part` that
ran (so a report describes only what ran), and the verdict with its reason and witness. Protocol
specific details that no generic section renders (the search's ranking, a local audit's central
sub-audit, the horizon discovery) are in ``extra`` under their JSON keys.

``Findings.to_dict()`` is the JSON of ``dpaudit check policy --json``; its ``format`` key names the
version (:data:`FORMAT`), and :meth:`Findings.from_dict` reads it back (it also reads the unversioned
findings older dpaudit wrote, and refuses a format it does not know). The version changes when a key
changes meaning or goes away; a new optional key keeps it (readers of the same version ignore what they
do not know, and read findings without it): so each attack's ``scores`` (its threshold test's binned fresh
scores, :class:`~dpaudit.attacks.result.ScoreHistogram`, for the report's ROC curve) came within
``dpaudit.audit/2``, and findings written before it load with ``scores = None``; likewise the upper side
(``epsilon_upper`` and its record ``upper``, :class:`Upper`), and findings without it load with ``None``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any, Mapping

from dpaudit.attacks.result import AuditResult, ScoreHistogram, jsonable
from dpaudit.errors import DPAuditError, InternalError, shorten

__all__ = ["FORMAT", "Verdict", "Claim", "Exact", "Power", "Part", "Upper", "Findings", "AuditInterrupted", "VERDICTS",
           "EXIT_STATUS"]

#: the JSON format of :meth:`Audit.to_dict` (version 1 was the unversioned dict of dpaudit 0.1)
FORMAT = "dpaudit.audit/2"


class Verdict(str, Enum):
    """Every verdict an audit can end with (:mod:`dpaudit.runner.verdict` says when each is reached).

    A string-valued enum: ``Verdict.CONSISTENT == "consistent"``, ``str()`` and f-strings give the plain word,
    and :func:`json.dumps` writes it as that string, so the findings' JSON holds the word itself."""

    CONSISTENT = "consistent"
    VIOLATION = "violation"
    INCONCLUSIVE = "inconclusive"
    #: stopped (Ctrl-C, SIGTERM, SIGHUP) before a verdict; the findings hold what had finished
    INTERRUPTED = "interrupted"
    #: an exact enumeration with no claim to judge
    EXACT = "exact"

    def __str__(self) -> str:
        return self.value


#: every verdict an audit can end with, as the words the JSON holds
VERDICTS = tuple(v.value for v in Verdict)
#: the command line's exit status by verdict (2: bad input)
EXIT_STATUS = {Verdict.CONSISTENT: 0, Verdict.VIOLATION: 1, Verdict.INCONCLUSIVE: 3, Verdict.INTERRUPTED: 130,
               Verdict.EXACT: 0}


def _num(x: Any) -> float | None:
    """A JSON number back to a float ("inf" strings included); None stays None."""
    if x is None:
        return None
    return float(x)


@dataclass(frozen=True)
class Claim:
    """The guarantee judged: its text, its epsilon at ``delta`` and the conversion used."""

    text: str
    epsilon: float
    delta: float
    method: str


@dataclass(frozen=True)
class Exact:
    """An exact figure (no sampling): ``epsilon`` at the audit's delta, computed by ``method``.

    ``judged``: whether the verdict compares it with the claim (a local channel's composition is exact
    arithmetic on what the users sent, so a figure above the claim proves the claim too low; the
    central audit reports its ledger's implied guarantee without judging by it).
    """

    part: str
    epsilon: float
    method: str
    judged: bool = True
    witness: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    #: the claimed epsilon it is compared with, when not the claim's at the audit's delta (a figure computed
    #: at the claim's own delta is compared with the claim's own epsilon)
    claimed: float | None = None


@dataclass(frozen=True)
class Power:
    """What the black-box attack could show at this sample size, and what it showed."""

    pairs_tried: int
    fresh_runs_per_side: int
    smallest_detectable: float
    largest_bound: float
    shown: float | None = None
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    #: the fresh runs per side the attack counted, when it stopped before ``fresh_runs_per_side``
    fresh_runs_used: int | None = None


@dataclass(frozen=True)
class Part:
    """One part of an audit, as it ran: ``kind`` is ``bound`` (a lower bound that enters the verdict),
    ``exact``, ``beside`` (reported, not judged) or ``setup`` (the search, the horizon)."""

    name: str
    kind: str
    summary: str
    seconds: float = 0.0


@dataclass(frozen=True)
class Upper:
    """The upper side of an audit: the tightest eps at ``delta`` dpaudit can prove for the policy, and how.

    ``epsilon`` is None when nothing can be proved beyond the claim (a policy without a ledger, or a
    one-run class through the per-run adapter), and ``details["reason"]`` says why. ``method`` names how it
    was computed (a ledger's releases composed exactly per round or user, a shuffle batch's clone bounds
    composed exactly, an exact enumeration), ``assumptions`` what the proof rests on. ``refuted`` is set
    when a lower bound of the same audit exceeds ``epsilon``: for a correct policy that cannot happen (at
    the lower bound's confidence), so it is evidence that the ledger misstates the policy (a sensitivity,
    a release it does not record), and ``epsilon`` is then no proof (:attr:`Findings.epsilon_upper` is None).
    """

    epsilon: float | None
    delta: float
    method: str
    assumptions: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    refuted: str | None = None

    @property
    def proved(self) -> float | None:
        """``epsilon`` when it stands as a proof (not refuted), else None."""
        return self.epsilon if self.refuted is None else None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Upper":
        return cls(_num(d.get("epsilon")), float(d.get("delta", math.nan)), str(d.get("method", "")),
                   tuple(d.get("assumptions") or ()), dict(d.get("details") or {}), d.get("refuted"))


def _result(d: Mapping[str, Any]) -> AuditResult:
    kw = {f.name: d[f.name] for f in fields(AuditResult) if f.name in d}
    if isinstance(kw.get("scores"), Mapping):
        kw["scores"] = ScoreHistogram.from_dict(dict(kw["scores"]))
    return AuditResult(**kw)


#: what every verdict needs, and what each must be: without them a report reads "CONSISTENT: ." with NaN
VERDICT_KEYS = ("verdict", "reason", "policy", "protocol", "delta", "confidence")


#: how deep findings may nest dicts and lists (dpaudit writes a few levels): deeper is refused before it is read
MAX_DEPTH = 64


def _check_depth(findings: Mapping[str, Any]) -> None:
    """Refuse findings nested deeper than :data:`MAX_DEPTH` (a 100,000-deep dict would exhaust Python's stack in
    the recursive reading), walked without recursion, naming the first key too deep."""
    stack: list[tuple[Any, int, str]] = [(findings, 1, "")]
    while stack:
        value, depth, path = stack.pop()
        if depth > MAX_DEPTH:
            raise DPAuditError(f"these findings cannot be read: they nest dicts and lists more than {MAX_DEPTH} levels "
                               f"deep (at {shorten(path, 60, as_text=True)}), while dpaudit's findings nest a few; give "
                               "Audit.to_dict() or json.load of dpaudit check policy --json, unedited.")
        if isinstance(value, Mapping):
            stack.extend((v, depth + 1, f"{path}[{k!r}]") for k, v in value.items() if isinstance(v, (Mapping, list, tuple)))
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value) if isinstance(v, (Mapping, list, tuple)))


def _check_verdict_keys(d: Mapping[str, Any]) -> None:
    """Refuse findings that lack (or garble) what a verdict needs, in one sentence naming the keys."""
    missing = [k for k in VERDICT_KEYS if d.get(k) in (None, "")]
    if missing:
        raise DPAuditError(f"these findings cannot be read: they lack {', '.join(missing)}, which every verdict needs "
                           f"({', '.join(VERDICT_KEYS)}); give Audit.to_dict() or json.load of dpaudit check policy "
                           "--json, unedited.")
    if d["verdict"] not in VERDICTS:
        raise DPAuditError(f"these findings cannot be read: their verdict is {shorten(d['verdict'])}, not one of "
                           f"{', '.join(VERDICTS)}.")
    for k in ("reason", "policy", "protocol"):
        if not isinstance(d[k], str):
            raise DPAuditError(f"these findings cannot be read: their {k} is {shorten(d[k])}, not text.")
    for k, ok, where in (("delta", lambda v: 0 <= v < 1, "[0, 1)"), ("confidence", lambda v: 0 < v <= 1, "(0, 1]")):
        try:
            v = float(d[k])
        except (TypeError, ValueError):
            v = math.nan
        if not ok(v):  # an exact enumeration holds with confidence 1
            raise DPAuditError(f"these findings cannot be read: their {k} is {shorten(d[k])}, not a number in {where}.")


@dataclass(frozen=True)
class Findings:
    """The findings of one audit (what ``dpaudit check policy --json`` prints), with typed fields.

    ``verdict`` (a :class:`Verdict`, equal to its word) is ``"violation"`` (a lower bound at ``confidence``,
    or an exact figure the verdict judges, exceeds the claim), ``"consistent"`` (none does, and the audit showed power; ``gap`` =
    claimed eps minus the best lower bound), ``"inconclusive"`` (the audit had no power),
    ``"interrupted"`` (stopped before a verdict; what finished is here) or ``"exact"`` (an exact
    enumeration with no claim to judge). ``reason`` is the one sentence that says why.
    ``epsilon_claimed`` is the claim converted to eps at ``delta``; ``epsilon_lower`` the best attack's
    lower bound at ``confidence``. ``attacks`` holds the lower bounds that enter the verdict,
    ``beside`` those reported beside it, ``exact`` the exact figures, ``ledger`` the per-round
    accounting of the policy's ledger, ``power`` what the black-box attack could show, ``parts`` what
    ran. ``epsilon_upper`` is the tightest eps at ``delta`` dpaudit can prove for the policy (its record,
    with the method and assumptions, is ``upper``; None when nothing can be proved beyond the claim, or when
    a lower bound refutes the ledger's figure): the audit brackets the truth in [``epsilon_lower``,
    ``epsilon_upper``], and the verdict still judges the claim alone. Everything else (the search's ranking, a protocol's own sections) is in ``extra``.
    """

    verdict: Verdict
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
    attacks: tuple[AuditResult, ...]
    ledger: dict[str, Any] | None
    notes: tuple[str, ...]
    versions: dict[str, str]
    seconds: float
    command: str = ""
    claim_method: str | None = None
    exact: tuple[Exact, ...] = ()
    beside: tuple[AuditResult, ...] = ()
    power: Power | None = None
    parts: tuple[Part, ...] = ()
    #: the upper side: the tightest eps dpaudit can prove (None: nothing beyond the claim, or refuted), and its record
    epsilon_upper: float | None = None
    upper: Upper | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    format: str = FORMAT

    def __post_init__(self) -> None:
        if not isinstance(self.verdict, Verdict) and self.verdict in VERDICTS:  # the word, as JSON holds it
            object.__setattr__(self, "verdict", Verdict(self.verdict))

    @classmethod
    def from_dict(cls, findings: Mapping[str, Any]) -> "Findings":
        """Findings (of this class) from :meth:`to_dict` or from the JSON of ``dpaudit check policy --json``
        (``json.load`` of it); findings without a ``format`` key are read as dpaudit 0.1 wrote them."""
        if not isinstance(findings, Mapping):
            raise DPAuditError(f"findings must be a dict (Audit.to_dict(), or json.load of dpaudit check policy "
                               f"--json), got {shorten(findings)}.")
        _check_depth(findings)
        d = jsonable(dict(findings))
        fmt = d.get("format")
        if fmt is not None and fmt != FORMAT:
            raise DPAuditError(f"these findings are in format {fmt!r}, which this dpaudit does not read; it reads "
                               f"{FORMAT!r} and the unversioned findings of dpaudit 0.1 (upgrade dpaudit to read them).")
        _check_verdict_keys(d)
        known = {f.name for f in fields(cls)} - {"extra", "format"}
        power = d.get("power")
        if isinstance(power, Mapping) and "smallest_detectable" not in power:  # 0.1 wrote it flat
            power = {"pairs_tried": power.get("pairs_tried", 0),
                     "fresh_runs_per_side": power.get("fresh_runs_per_side", 0),
                     "smallest_detectable": power.get("membership_smallest_detectable", math.nan),
                     "largest_bound": power.get("membership_largest_bound", math.nan),
                     "shown": power.get("membership_epsilon_lower"), "note": power.get("note", ""),
                     "details": {k: v for k, v in power.items() if not k.startswith("membership_")
                                 and k not in ("pairs_tried", "fresh_runs_per_side", "note")}}
        try:
            return cls._read(d, power, known)
        except DPAuditError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a field of the wrong shape
            raise DPAuditError(f"these findings cannot be read ({type(exc).__name__}: {shorten(exc, 120, as_text=True)}); "
                               "give Audit.to_dict() or json.load of dpaudit check policy --json, unedited.") from None

    @classmethod
    def _read(cls, d: dict[str, Any], power: Any, known: set[str]) -> "Findings":
        return cls(
            verdict=Verdict(d["verdict"]), reason=str(d.get("reason", "")), policy=str(d.get("policy", "")),
            params=dict(d.get("params") or {}), protocol=str(d.get("protocol", "")), claim=d.get("claim"),
            epsilon_claimed=_num(d.get("epsilon_claimed")), epsilon_lower=_num(d.get("epsilon_lower")),
            gap=_num(d.get("gap")), delta=float(d.get("delta", math.nan)),
            confidence=float(d.get("confidence", math.nan)), horizon=d.get("horizon"), seed=int(d.get("seed") or 0),
            witness=d.get("witness"), attacks=tuple(_result(a) for a in d.get("attacks") or []),
            ledger=d.get("ledger"), notes=tuple(d.get("notes") or ()), versions=dict(d.get("versions") or {}),
            seconds=float(d.get("seconds") or 0.0), command=str(d.get("command") or ""),
            claim_method=d.get("claim_method"),
            exact=tuple(Exact(**{**e, "epsilon": float(e["epsilon"]), "claimed": _num(e.get("claimed"))})
                        for e in d.get("exact") or []),
            beside=tuple(_result(a) for a in d.get("beside") or []),
            power=Power(**{**power, "smallest_detectable": float(power["smallest_detectable"]),
                           "largest_bound": float(power["largest_bound"]),
                           "shown": _num(power.get("shown"))}) if isinstance(power, Mapping) else None,
            parts=tuple(Part(**p) for p in d.get("parts") or []),
            epsilon_upper=_num(d.get("epsilon_upper")),
            upper=Upper.from_dict(d["upper"]) if isinstance(d.get("upper"), Mapping) else None,
            extra={k: v for k, v in d.items() if k not in known and k != "format"},
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready findings: exactly what ``dpaudit check policy --json`` prints."""
        out: dict[str, Any] = {"format": self.format}
        for f in fields(self):
            if f.name in ("extra", "format"):
                continue
            v = getattr(self, f.name)
            if f.name == "verdict":
                v = v.value if isinstance(v, Verdict) else v  # the plain word, as from_dict reads it
            elif f.name in ("attacks", "beside"):
                v = [a.to_dict() for a in v]
            elif f.name in ("exact", "parts"):
                v = [asdict(x) for x in v]
            elif f.name in ("power", "upper"):
                v = asdict(v) if v is not None else None
            elif f.name == "notes":
                v = list(v)
            out[f.name] = v
        return jsonable({**out, **self.extra})

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as a JSON string (``kwargs`` go to :func:`json.dumps`, e.g. ``indent=2``)."""
        return json.dumps(self.to_dict(), **kwargs)

    @property
    def exit_status(self) -> int:
        """The CLI's exit status for this verdict: 0 consistent (or exact, no claim), 1 violation,
        3 inconclusive, 130 interrupted."""
        if self.verdict not in EXIT_STATUS:  # never a silent pass: an unknown verdict is not exit 0
            raise InternalError(f"the audit returned the unknown verdict {self.verdict!r} (expected one of "
                                f"{', '.join(VERDICTS)})")
        return EXIT_STATUS[self.verdict]

    def __repr__(self) -> str:
        def f(x: float | None) -> str:
            return "None" if x is None else f"{x:.4g}"

        return (f"Audit({self.verdict}: {self.policy} {self.params or ''} claims eps = {f(self.epsilon_claimed)}, "
                f"measured eps >= {f(self.epsilon_lower)}"
                + (f", proved eps <= {f(self.epsilon_upper)}" if self.epsilon_upper is not None else "")
                + f" at delta = {self.delta:g}, confidence {self.confidence:g}; gap {f(self.gap)})")


class AuditInterrupted(Exception):
    """Ctrl-C (or SIGTERM, SIGHUP) during an audit; ``audit`` holds the findings of what had finished."""

    def __init__(self, partial: Findings) -> None:
        super().__init__("the audit was interrupted")
        self.audit = partial
