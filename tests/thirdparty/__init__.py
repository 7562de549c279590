"""Third-party-style controls for dpaudit's audits.

Each module here is written the way bandit code outside dpaudit is written (one-run classes drawing
from the global ``np.random``, their own constants and schedules, or batched plug-ins with no ledger),
and holds a correct algorithm beside a buggy one whose docstring says what the bug is, why it breaks
the privacy claim and, where one can be given, the true epsilon. They are positive and negative
controls for the black-box path: not dpaudit's own policies with one line changed.

Every module is self-contained (numpy only; the batched plug-ins import their claims from
``dpaudit.accountants``). Modules: ``elimination``, ``etc``, ``ucb_counter``, ``greedy``, ``linucb``,
``ldp_logging``, ``ldp_onerun`` (a one-run local-DP class for the adapter's ``randomizer``), ``styles``. ``benchmarks/validation/thirdparty_controls.py`` audits them.
"""
