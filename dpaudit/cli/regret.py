"""``dpaudit regret``: a policy's mean regret with a confidence band, beside its non-private twin.

Argument parsing, printing and the plot; the simulation is :func:`dpaudit.simulate.simulate`.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

import numpy as np

from dpaudit.environments import Environment, environment_names
from dpaudit.cli import print_json
from dpaudit.errors import DPAuditError, check_int
from dpaudit.jsontypes import JSONObject
from dpaudit.simulate import SimResult, mean_ci, simulate, twin_of

__all__ = ["register_cli", "DEFAULT_ENVS"]


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "regret",
        help="mean regret of a policy, with a confidence band, against its non-private twin",
        description="Simulate a policy on a stochastic bandit and report its mean regret with a 95% "
        "confidence interval beside its non-private twin's (the same episodes without noise).",
    )
    p.add_argument("policy", metavar="POLICY",
                   help="a registered name (see `dpaudit list`), path/to/file.py:ClassName or package.module:ClassName")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a constructor parameter of the policy, repeatable (`dpaudit describe POLICY` lists them); "
                        "n_arms and dim default to the environment's")
    p.add_argument("--env", default=None, metavar="NAME",
                   help="the environment (default by family: linear for GOPE, contextual-linear for OFUL, glm for the "
                        "GLM policies, stochastic BCO losses for BCO policies, else bernoulli); K-armed: "
                        f"{', '.join(environment_names())}; BCO: stochastic or adversarial")
    p.add_argument("--env-param", action="append", metavar="NAME=VALUE",
                   help="an environment parameter, repeatable, e.g. means=0.9,0.5 (default: the environment's own; "
                        "bernoulli's are the five arms of Azize & Basu 2023a, Sec. VII-A)")
    p.add_argument("--horizon", type=int, required=True, metavar="T", help="rounds of every run (required)")
    p.add_argument("--runs", type=int, default=100, metavar="N",
                   help="independent runs whose regret is averaged (default %(default)s)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of every random draw, the twin's too (common random numbers; default %(default)s)")
    p.add_argument("--path", choices=["auto", "step", "episode"], default="auto",
                   help="K-armed simulation path: step by step, episode by episode (policies with a fast path; the "
                        "same trajectories), or auto, the fastest the policy offers (default %(default)s)")
    p.add_argument("--no-twin", action="store_true",
                   help="do not run the non-private twin (by default it runs on the same seed, and the price of "
                        "privacy is the paired difference)")
    p.add_argument("--json", action="store_true", help="print one JSON object (format dpaudit.regret/1)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="K-armed policies: also write the mean regret curves with 95%% bands (png, pdf, svg, ...)")
    p.set_defaults(func=_cmd_regret)


#: Default environment per policy family: (name, parameters). The linear ones use bounded +-1
#: rewards because the private GOPE/OFUL policies refuse the unbounded Gaussian ones.
DEFAULT_ENVS = {
    "gope": ("linear", {"noise": "bernoulli"}),
    "oful": ("contextual-linear", {"noise": "bernoulli", "normalize": True}),
    "glm": ("glm", {}),  # Sarmasarkar 2026: the synthetic GLM bandit (K = 20, d = 5, logistic)
}


def _env_from_args(args: argparse.Namespace, family: str | None = None) -> Environment:
    from dpaudit.environments import make_environment
    from dpaudit.policies.registry import parse_params

    name, params = args.env, {}
    if name is None:
        name, params = DEFAULT_ENVS.get(family or "", ("bernoulli", {}))
        params = dict(params)
    raw = parse_params(args.env_param)
    for k, v in raw.items():
        if v.lower() in ("true", "false"):
            params[k] = v.lower() == "true"
            continue
        parts = [x for x in v.replace(";", ",").split(",") if x.strip()]
        try:
            nums = [float(x) for x in parts]
        except ValueError:
            params[k] = v
            continue
        params[k] = nums if (len(nums) > 1 or k in ("means",)) else (int(nums[0]) if nums[0].is_integer() and "." not in v else nums[0])
    return make_environment(name, **params)


def _cmd_regret(args: argparse.Namespace) -> int:
    import inspect

    from dpaudit.policies import make_policy
    from dpaudit.policies.registry import load_policy_class, parse_params

    from dpaudit.policies.registry import entry_of

    check_int("horizon T", args.horizon, minimum=1)
    check_int("runs", args.runs, minimum=1)
    check_int("--seed", args.seed, minimum=0)
    params = parse_params(args.param)
    cls = load_policy_class(args.policy)
    if getattr(cls, "continuous_actions", False):  # BCO: loss functions on a ball, dpaudit.bco
        return _bco_regret(args, params)
    if args.plot is not None:
        check_plot_path(args.plot)  # before the simulation: a bad path fails in a second
    entry = entry_of(args.policy)
    env = _env_from_args(args, entry.family if entry is not None else None)
    accepted = inspect.signature(cls.__init__).parameters
    if "n_arms" not in params and "n_arms" in accepted:
        params["n_arms"] = str(env.n_arms)
    if "dim" not in params and "dim" in accepted and getattr(env, "dim", None) is not None:
        params["dim"] = str(env.dim)
    policy = make_policy(args.policy, params)
    n_cp = 40
    cps = np.unique(np.geomspace(1, args.horizon, n_cp).round().astype(np.int64))
    from dpaudit.progress import ProgressBar

    bar = ProgressBar("dpaudit regret")  # a bar with an ETA on a terminal; logs get no progress lines (runs are short)
    if not bar.tty:
        bar = None  # type: ignore[assignment]
    try:
        res = simulate(policy, env, args.horizon, args.runs, args.seed, path=args.path, checkpoints=cps, progress=bar)
        twin = None if args.no_twin else twin_of(policy)
        tres = None
        if twin is not None and twin[0] != getattr(policy, "name", args.policy):
            tres = simulate(make_policy(twin[0], twin[1]), env, args.horizon, args.runs, args.seed, path=args.path,
                            checkpoints=cps, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    if res.regret is None:
        raise DPAuditError(f"regret is not defined on {env.describe()}; choose a stochastic environment.")
    out: JSONObject = {
        "policy": getattr(policy, "name", args.policy),
        "params": policy.params() if hasattr(policy, "params") else params,
        "claim": str(getattr(policy, "claim", None)) if getattr(policy, "claim", None) is not None else None,
        "environment": env.describe(),
        "horizon": args.horizon,
        "runs": args.runs,
        "seed": args.seed,
        "path": res.path,
        "regret": res.summary(),
        "seconds": res.seconds,
        "checkpoints": res.checkpoints.tolist(),
        "curve": res.regret_at.mean(axis=0).tolist(),
    }
    if tres is not None:
        assert twin is not None
        diff = res.regret - tres.regret
        out["twin"] = {"policy": twin[0], "params": twin[1], "regret": tres.summary(), "seconds": tres.seconds,
                       "curve": tres.regret_at.mean(axis=0).tolist()}
        out["difference"] = mean_ci(diff)
        out["difference"]["note"] = "same seed for both (common random numbers); CI of the mean paired difference"
    if args.plot:
        _plot_regret(args.plot, res, tres, out)
        out["plot"] = args.plot
    if args.json:
        print_json(out, "dpaudit.regret/1", indent=2)
        return 0
    _print_regret(out, f"environment {out['environment']}, T = {args.horizon}, {args.runs} runs, seed {args.seed}, "
                       f"{res.path} path", res.seconds)
    if args.plot:
        print(f"  plot: {args.plot}")
    return 0


def _print_regret(out: JSONObject, setting: str, seconds: float) -> None:
    """The human-readable regret summary (``--json`` prints ``out`` itself)."""
    r = out["regret"]
    print(f"{out['policy']} {out['params']}  claim: {out['claim'] or 'none (non-private)'}")
    print(setting)
    print(f"  mean regret            {r['mean']:12.2f}   95% CI [{r['lo']:.2f}, {r['hi']:.2f}]   ({seconds:.2f} s)")
    if "twin" in out:
        tr = out["twin"]["regret"]
        d = out["difference"]
        print(f"  non-private twin       {tr['mean']:12.2f}   95% CI [{tr['lo']:.2f}, {tr['hi']:.2f}]   ({out['twin']['policy']})")
        print(f"  price of privacy       {d['mean']:12.2f}   95% CI [{d['lo']:.2f}, {d['hi']:.2f}]   "
              f"(relative {d['mean'] / tr['mean'] if tr['mean'] else float('nan'):.3f})")


#: the image formats ``--plot`` writes (matplotlib's Agg canvas; not pgf, which needs LaTeX)
PLOT_FORMATS = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp")


def check_plot_path(path: str) -> None:
    """Refuse a ``--plot`` path that matplotlib cannot write, or that cannot be written, before any work."""
    from dpaudit.errors import check_output_file

    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in PLOT_FORMATS:
        raise DPAuditError(f"--plot must name an image file ending in {', '.join('.' + f for f in PLOT_FORMATS)}, "
                           f"got {path!r}.")
    check_output_file(path, "the plot", "--plot")


def _plot_regret(path: str, res: SimResult, tres: SimResult | None, out: JSONObject) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for r, label in ((res, out["policy"]), (tres, out.get("twin", {}).get("policy"))):
        if r is None:
            continue
        m = r.regret_at.mean(axis=0)
        se = r.regret_at.std(axis=0, ddof=1) / math.sqrt(r.n_runs) if r.n_runs > 1 else np.zeros_like(m)
        ax.plot(r.checkpoints, m, label=label)
        ax.fill_between(r.checkpoints, m - 1.96 * se, m + 1.96 * se, alpha=0.25)
    ax.set_xscale("log")
    ax.set_xlabel("step t")
    ax.set_ylabel("mean pseudo-regret (95% band)")
    ax.set_title(f"{out['environment']}, {res.n_runs} runs")
    ax.legend()
    fig.tight_layout()
    target = Path(path)
    fmt = target.suffix.lower().lstrip(".")
    tmp = None
    try:  # whole or not at all: a temporary file beside it, renamed into place
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        fig.savefig(tmp, dpi=120, format=fmt)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp creates 0600; a plot is an ordinary file
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise DPAuditError(f"cannot write the plot to {path!r}: {exc.strerror or exc}.") from None
    finally:
        plt.close(fig)
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _bco_regret(args: argparse.Namespace, params: dict[str, str]) -> int:
    """``dpaudit regret NAME`` for a BCO policy: its mean regret and its twin's on a :class:`dpaudit.bco.LossSequence`."""
    from dpaudit.environments import make_losses
    from dpaudit.simulate import simulate_bco
    from dpaudit.policies import make_policy
    from dpaudit.policies.registry import parse_params

    if args.plot or args.path != "auto":
        raise DPAuditError("--plot and --path apply to K-armed policies; drop them for a BCO policy.")
    params = dict(params)
    params.setdefault("horizon", str(args.horizon))
    policy = make_policy(args.policy, params)
    losses = make_losses(args.env, policy.d, args.horizon, parse_params(args.env_param))
    res = simulate_bco(policy, losses, args.runs, args.seed)
    out: JSONObject = {"policy": policy.name, "params": policy.params(),
                           "claim": str(policy.claim) if policy.claim is not None else None,
                           "environment": f"{args.env or 'stochastic'} BCO losses {parse_params(args.env_param)}",
                           "horizon": args.horizon, "runs": args.runs, "seed": args.seed,
                           "regret": mean_ci(res["regret"]), "seconds": res["seconds"]}
    twin = None if args.no_twin else twin_of(policy)
    if twin is not None and twin[0] != policy.name:
        tres = simulate_bco(make_policy(twin[0], {k: str(v) for k, v in twin[1].items()}), losses, args.runs, args.seed)
        out["twin"] = {"policy": twin[0], "params": twin[1], "regret": mean_ci(tres["regret"]), "seconds": tres["seconds"]}
        out["difference"] = mean_ci(res["regret"] - tres["regret"])
        out["difference"]["note"] = "same seed for both (common random numbers); CI of the mean paired difference"
    if args.json:
        print_json(out, "dpaudit.regret/1", indent=2)
        return 0
    _print_regret(out, f"environment {out['environment']}, T = {args.horizon}, {args.runs} runs, seed {args.seed}",
                  res["seconds"])
    return 0
