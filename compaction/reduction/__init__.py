"""Tool-output reduction: truncation on arrival, clearing before a model call, passes."""
