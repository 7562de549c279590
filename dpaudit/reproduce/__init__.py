"""Reproductions of the source papers' results: one module per reproduction.

``EXPERIMENTS`` maps a name to ``("module:function", summary)``; the summaries name each paper by its
authors, year and title (:mod:`dpaudit.papers`; ``dpaudit reproduce --help`` shows them). The function
takes the parsed arguments of ``dpaudit reproduce NAME`` (:mod:`dpaudit.cli.reproduce`) and returns an
exit status.
Modules are imported only when their reproduction runs.
"""

from __future__ import annotations

from dpaudit.papers import PAPERS

__all__ = ["EXPERIMENTS"]


def _paper(key: str) -> str:
    """'Azize & Basu 2023a, "Concentrated Differential Privacy for Bandits"'."""
    return f'{PAPERS[key].label}, "{PAPERS[key].title}"'


EXPERIMENTS: dict[str, tuple[str, str]] = {
    "table-vs-view": ("dpaudit.reproduce.table_vs_view:table_vs_view",
                      f"{_paper('001')}, Prop. 1(e): a policy that is View DP but not Table DP"),
    "zcdp-bandits": ("dpaudit.reproduce.zcdp_bandits:zcdp_bandits",
                     f"{_paper('001')}, Fig. 4 (a)-(c): the price of zCDP for UCB, GOPE and OFUL"),
    "glm-bandits": ("dpaudit.reproduce.glm_bandits:glm_bandits",
                    f"{_paper('002')}: joint- and shuffle-DP GLM bandits against their twins and GLM-UCB"),
    "ldp-bandits": ("dpaudit.reproduce.ldp_bandits:ldp_bandits",
                    f"{_paper('003')}, Alg. 1: regret of local-DP UCB and Tsallis-INF against T, beside central "
                    "AdaC-UCB"),
}
