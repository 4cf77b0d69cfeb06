"""Settings of tool-output reduction (filled in by the reduction issue)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ReductionPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enabled: bool = Field(False, description="Run tool-output reduction before summarization.")
