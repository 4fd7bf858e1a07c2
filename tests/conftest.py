"""Shared test configuration: Hypothesis profiles (``HYPOTHESIS_PROFILE=ci|dev``)."""

import os

from hypothesis import HealthCheck, settings

# ci: deterministic (derandomized), no deadline on a shared 2-core machine, modest budget.
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=40, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
