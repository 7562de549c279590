"""Reproductions of the source papers' results: one module per reproduction.

``EXPERIMENTS`` maps a name to ``("module:function", summary)``; the summaries name each paper by its
authors, year and title (:mod:`dpaudit.papers`; ``dpaudit reproduce --help`` shows them). The function
takes the parsed arguments of ``dpaudit reproduce NAME`` (:mod:`dpaudit.cli.reproduce`) and returns an
exit status.
Modules are imported only when their reproduction runs.
"""

from __future__ import annotations

from dpaudit.papers import PAPERS

__all__ = ["EXPERIMENTS", "OUTPUTS", "EXACT"]


def _paper(key: str) -> str:
    """'Azize & Basu 2023a, "Concentrated Differential Privacy for Bandits"'."""
    return f'{PAPERS[key].label}, "{PAPERS[key].title}"'


EXPERIMENTS: dict[str, tuple[str, str]] = {
    "table-vs-view": ("dpaudit.reproduce.table_vs_view:table_vs_view",
                      f"{_paper('azize-basu-2023a')}, Prop. 1(e): a policy that is View DP but not Table DP"),
    "zcdp-bandits": ("dpaudit.reproduce.zcdp_bandits:zcdp_bandits",
                     f"{_paper('azize-basu-2023a')}, Fig. 4 (a)-(c): the price of zCDP for UCB, GOPE and OFUL"),
    "glm-bandits": ("dpaudit.reproduce.glm_bandits:glm_bandits",
                    f"{_paper('sarmasarkar-2026')}: joint- and shuffle-DP GLM bandits against their twins and GLM-UCB"),
    "ldp-bandits": ("dpaudit.reproduce.ldp_bandits:ldp_bandits",
                    f"{_paper('zheng-2020')}, Alg. 1: regret of local-DP UCB and Tsallis-INF against T, beside central "
                    "AdaC-UCB"),
}

#: the files each experiment writes into ``--out`` when it is done (checked before it starts,
#: :func:`dpaudit.errors.check_output_folder`); an experiment not listed writes none
OUTPUTS: dict[str, tuple[str, ...]] = {
    "zcdp-bandits": ("zcdp_bandits.json", "zcdp_bandits.md", "zcdp_bandits_ucb.png", "zcdp_bandits_gope.png",
                     "zcdp_bandits_oful.png"),
    "glm-bandits": ("glm-bandits.md", "glm-bandits-regret.png"),
    "ldp-bandits": ("ldp_bandits.json", "ldp_bandits.md", "ldp_bandits.png"),
}

#: experiments that draw nothing at random and have no grid: ``--seed``, ``--quick`` and ``--out`` are
#: refused for them, with this reason
EXACT: dict[str, str] = {
    "table-vs-view": "it enumerates the T = 3 policy exactly, so it draws nothing at random, has no grid to "
                     "shrink and writes no files (it prints its table, or JSON with --json)",
}
