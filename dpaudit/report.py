"""Reviewer reports of ``dpaudit check policy``: a Markdown file and a self-contained HTML page.

Both carry the command line, versions and seed, the claim and how it was computed, the ledger
audit, each attack's numbers, the witness and the verdict in one sentence: everything needed to
reproduce the audit. The HTML page embeds its plots as base64 PNGs (no external files).
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

from dpaudit.errors import DPAuditError

__all__ = ["markdown_report", "html_report", "write_report"]


def _f(x: Any, digits: int = 4) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return x
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _verdict_sentence(out: dict[str, Any]) -> str:
    word = {"violation": "VIOLATION", "consistent": "CONSISTENT"}.get(out["verdict"], "INTERRUPTED (no verdict)")
    return f"**{word}**: {out['reason']}."


def markdown_report(out: dict[str, Any]) -> str:
    """The findings of :func:`dpaudit.check.audit_policy` as Markdown."""
    lines = [f"# dpaudit check: `{out['policy']}`", "", _verdict_sentence(out), ""]
    lines += [f"> Note: {note}" for note in out.get("notes", [])] + ([""] if out.get("notes") else [])
    lines += ["## How to reproduce", "", "```", out.get("command") or "(called from Python)", "```", ""]
    v = out.get("versions", {})
    lines += ["| item | value |", "| --- | --- |"]
    lines += [f"| {k} | {val} |" for k, val in v.items()]
    lines += [
        f"| seed | {out['seed']} |",
        f"| protocol | {out['protocol']} |",
        f"| horizon T, arms K | {out.get('horizon')}, {out.get('n_arms', 'n/a')} |",
        f"| parameters | {json.dumps(out.get('params') or {}, default=str)} |",
        f"| ran on | {out.get('workers', 'this process')} |",
        f"| run time | {out.get('seconds', 0):.1f} s |",
        "",
    ]
    if "epsilon_claimed" in out:
        lines += [
            "## The claim",
            "",
            f"The policy declares **{out['claim']}**. At delta = {out['delta']:g} this is "
            f"eps = **{out['epsilon_claimed']:.6g}** ({out['claim_method']}).",
            "",
        ]
    led = out.get("ledger")
    lines += ["## Ledger audit", ""] if "ledger" in out else []
    if "ledger" not in out:
        pass  # interrupted before the ledger audit
    elif led is None:
        lines += ["The policy keeps no ledger (it does not use dpaudit's mechanisms), so only the black-box "
                  "attack judges it.", ""]
    else:
        lines += [
            f"Over {led.get('runs', 'n/a')} runs on the audit table: {led['releases']} batched releases; "
            f"ledger-implied guarantee **{_f(led.get('implied'))}** (eps = {_f(led.get('implied_epsilon'))} at the "
            f"same delta); {led['shared_rounds']} (run, round) pairs fed more than one release "
            f"(at most {led.get('max_releases_per_round', 'n/a')} releases per round); "
            f"{led['releases_without_fed']} releases without a record of the rounds that fed them.",
            "",
        ]
    lines += [
        "## Attacks",
        "",
        f"Overall confidence {out['confidence']:g}, split equally between the attacks that ran "
        f"({_f(out.get('confidence_per_attack'))} each); each attack corrects for every test it evaluates on "
        "fresh samples.",
        "",
        "| attack | eps lower bound | delta | confidence | samples | time (s) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for a in out["attacks"]:
        lines.append(f"| {a['attack']} | {_f(a['epsilon_lower'])} | {a['delta']:g} | {_f(a['confidence'])} | "
                     f"{a['samples']} | {_f(a['seconds'], 3)} |")
    lines.append("")
    for a in out["attacks"]:
        d = a["details"]
        if a["attack"] == "membership" or "renyi" not in d:  # every threshold-test attack (also issue 13's)
            lines += [
                "### Membership (black-box)" if a["attack"] == "membership" else f"### {a['attack']}",
                "",
                f"Test: reject d when `{a['witness'].get('statistic')}` {a['witness'].get('reject_when')} "
                f"(threshold {_f(a['witness'].get('threshold'))}), chosen on a selection split. On "
                f"{d['n_fresh_per_side']} fresh views per side: {d['false_positives']} false positives "
                f"(FPR {_f(d['fpr'])}), {d['false_negatives']} false negatives (FNR {_f(d['fnr'])}); "
                f"Clopper-Pearson bounds corrected for {d['tests_corrected_for']} test(s).",
                "",
            ]
        else:
            r = d["renyi"]
            lines += [
                "### Likelihood (gray-box)",
                "",
                f"Exact privacy loss of {a['samples']} runs from the ledger; mean loss (KL) {_f(d['mean_loss_kl'])}, "
                f"largest {_f(d['max_loss'])}; point estimate of eps(delta) {_f(d.get('epsilon_point_estimate'))}; "
                f"at most {d.get('max_releases_fed_by_round')} releases fed by the canary round; "
                f"tests corrected for: {d['tests_corrected_for']}.",
                "",
                "| order alpha | D_alpha estimate | D_alpha lower bound |",
                "| --- | --- | --- |",
            ]
            for o, e, lo in zip(r["orders"], r["estimate"], r["lower"]):
                lines.append(f"| {_f(o)} | {_f(e)} | {_f(lo)} |")
            lines.append("")
            if d.get("renyi_violation"):
                for rv in d["renyi_violation"]:
                    lines.append(f"- Rényi violation at order {_f(rv['order'])}: D_alpha >= {_f(rv['D_alpha_lower'])} "
                                 f"> claimed {_f(rv['claimed'])}")
                lines.append("")
    if out.get("witness"):
        w = dict(out["witness"])
        lines += ["## Witness", "", f"Found by the {w.pop('attack')} attack.", "", "| field | value |", "| --- | --- |"]
        for k, val in w.items():
            lines.append(f"| {k} | `{json.dumps(val, default=str)}` |")
        lines.append("")
    if out.get("search"):
        lines += ["## Neighbouring-pair search (ranking on small samples)", "",
                  "| pair | membership selection bound | statistic | likelihood mean loss |",
                  "| --- | --- | --- | --- |"]
        for row in out["search"]:
            lines.append(f"| {row['pair']} | {_f(row['membership_selection_bound'])} | {row['statistic']} | "
                         f"{_f(row.get('likelihood_mean_loss'))} |")
        lines.append("")
    lines += ["## Verdict", "", _verdict_sentence(out), ""]
    return "\n".join(lines)


def _plot_png(out: dict[str, Any]) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # pragma: no cover - matplotlib is a dependency
        return None
    lik = next((a for a in out["attacks"] if a["attack"] == "likelihood"), None)
    fig, axes = plt.subplots(1, 2 if lik else 1, figsize=(10 if lik else 5, 3.6))
    axes = list(axes) if lik else [axes]
    ax = axes[0]
    names = [a["attack"] for a in out["attacks"]]
    vals = [float(a["epsilon_lower"]) if not isinstance(a["epsilon_lower"], str) else 0.0 for a in out["attacks"]]
    ax.bar(names, vals, color="tab:blue", label="lower bound")
    if "epsilon_claimed" in out:
        ax.axhline(out["epsilon_claimed"], color="tab:red", ls="--", label="claimed eps")
    ax.set_ylabel(f"eps at delta = {out['delta']:g}")
    ax.legend()
    if lik:
        p = lik["details"]["profile"]
        ax = axes[1]
        eps = [float(e) for e in p["eps"]]
        ax.semilogy(eps, [max(float(x), 1e-12) for x in p["delta_estimate"]], label="delta(eps) estimate")
        ax.semilogy(eps, [max(float(x), 1e-12) for x in p["delta_lower"]], label="lower bound")
        ax.axhline(out["delta"], color="gray", ls=":", label="delta")
        if "epsilon_claimed" in out:
            ax.axvline(out["epsilon_claimed"], color="tab:red", ls="--", label="claimed eps")
        ax.set_xlabel("eps")
        ax.set_title("privacy profile (likelihood attack)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def html_report(out: dict[str, Any]) -> str:
    """A self-contained HTML page: the Markdown's content as preformatted text plus embedded plots."""
    md = markdown_report(out)
    png = _plot_png(out)
    img = f'<img alt="lower bounds and privacy profile" src="data:image/png;base64,{png}">' if png else ""
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>dpaudit check: {html.escape(out['policy'])}</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto} pre{white-space:pre-wrap}</style>"
        f"</head><body>{img}<pre>{html.escape(md)}</pre></body></html>"
    )


def write_report(out: dict[str, Any], path: str | Path) -> list[Path]:
    """Write ``path`` (Markdown) and, beside it, the HTML page; return both paths."""
    path = Path(path)
    if path.suffix != ".md":
        raise DPAuditError(f"a report path must end in .md, got {str(path)!r}.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(markdown_report(out))
        html_path = path.with_suffix(".html")
        html_path.write_text(html_report(out))
    except OSError as exc:
        raise DPAuditError(f"cannot write the report to {str(path)!r}: {exc.strerror}.") from None
    return [path, html_path]
