"""Test-suite settings.

Hypothesis runs derandomized by default, so that CI (and anyone rerunning the README's test
command) sees the same examples every time; ``HYPOTHESIS_PROFILE=explore pytest`` draws fresh
random examples to hunt for new failures (keep any it finds as an explicit example, as
``test_zcdp_conversion_is_zero_where_the_optimum_over_orders_is_negative`` does).
"""

import os

from hypothesis import settings

settings.register_profile("repro", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repro"))
