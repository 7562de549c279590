"""dpaudit.policies: batched bandit policies, registered by short name.

Importing this package registers every built-in policy; see :mod:`dpaudit.policies.registry`.
"""

from dpaudit.policies.base import Policy, PolicyLike, PolicySource, check_actions, check_rewards
from dpaudit.policies.finite import FinitePolicy, load_spec
from dpaudit.policies.registry import (
    get_policy_class,
    load_policy_class,
    make_policy,
    parse_params,
    register,
    registered,
)
from dpaudit.policies import ucb as _ucb  # noqa: F401  (registers the UCB family)
from dpaudit.policies import elimination as _elimination  # noqa: F401  (registers dp-se, dp-etc)
from dpaudit.policies import mutants as _mutants  # noqa: F401  (registers the positive controls)

__all__ = [
    "Policy",
    "PolicyLike",
    "PolicySource",
    "FinitePolicy",
    "check_actions",
    "check_rewards",
    "get_policy_class",
    "load_policy_class",
    "load_spec",
    "make_policy",
    "parse_params",
    "register",
    "registered",
]
from dpaudit.policies import gope as _gope  # noqa: E402,F401  registers adac-gope, adar-gope, gope
from dpaudit.policies import oful as _oful  # noqa: E402,F401  registers adac-oful, adar-oful, rs-oful, oful
from dpaudit.policies import glm as _glm  # noqa: E402,F401  registers jdp-glm, shuffle-glm, their twins, glm-ucb
from dpaudit.policies import ldp as _ldp  # noqa: E402,F401  registers the local-DP policies (Zheng et al. 2020) and twins
from dpaudit.policies import bco as _bco  # noqa: E402,F401  registers the BCO policies of Zheng et al. (2020, Alg. 1 + FKM, Alg. 2) and twins
