"""Look-ahead evaluation of a replay: was the context the agent would have been sent good
enough for the message it actually wrote next, and what did sending it cost?

``needed.py``    the identifiers a recorded assistant message used from earlier history
``baselines.py`` the naive sliding window and observation masking, replayed beside the policy
``cache.py``     prompt-cache breaks and the effective input cost at provider cache prices
``lookahead.py`` the evaluator ``simulate`` drives, and its report
``probes.py``    summary probes: what each compaction evicted, asked of the next context
"""
from __future__ import annotations

from .lookahead import LookAhead, LookAheadReport

__all__ = ["LookAhead", "LookAheadReport"]
