"""Trigger conditions: when a context is due for a summary.

A condition is either a leaf that compares one running number of the context with a limit,
or an ``any``/``all`` group of conditions. Each leaf kind is one class below that knows

- which number it reads (``state_field``, a field of :class:`TriggerState`; a service that
  stores the same running totals maps these names to its own columns),
- what it measures there (:meth:`LeafCondition.measure`) and its limit in that unit
  (:meth:`LeafCondition.limit`); it fires when the measure is above the limit,
- how to say itself in words (``label`` for a choice list, :meth:`describe` for a page).

Evaluation, the compiled per-call check (:mod:`compaction.triggers`) and a service's
database filter are written once over these classes, so adding a kind is adding one class
and listing it in :data:`Condition`.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from .windows import usable_window

# The running numbers a trigger may read, by their TriggerState field names.
TotalField = Literal["context_tokens", "messages", "tokens_since_summary", "messages_since_summary"]
TimeField = Literal["last_message_at"]
StateField = Literal[TotalField, TimeField]
STATE_FIELDS: tuple[StateField, ...] = (*get_args(TotalField), *get_args(TimeField))


@dataclass
class TriggerState:
    """The numbers a trigger looks at, all maintained incrementally by LiveContext."""
    context_tokens: int
    messages: int
    tokens_since_summary: int
    messages_since_summary: int
    last_message_at: float | None
    window: int
    reserved_output_tokens: int = 0
    now: float | None = None

    @property
    def usable_window(self) -> int:
        return usable_window(self.window, self.reserved_output_tokens)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# -- leaves ------------------------------------------------------------------------------

class LeafCondition(_Strict):
    """One comparison: fires when :meth:`measure` is above :meth:`limit`.

    A subclass declares ``kind`` (a Literal, the JSON tag) and exactly one numeric setting."""

    kind: str
    state_field: ClassVar[StateField]
    label: ClassVar[str]            # the kind as a choice in a form: "<what> above"
    replayable: ClassVar[bool]      # can be judged on a recorded history, without the clock

    def measure(self, state: TriggerState) -> float | None:
        """The number compared with the limit; None when there is nothing to measure."""
        raise NotImplementedError

    def limit(self, usable: int) -> float:
        """The threshold in the unit of :meth:`measure`; ``usable`` is the usable window."""
        raise NotImplementedError

    def describe(self) -> str:
        """The condition in words, e.g. 'context > 80% of the usable window'."""
        raise NotImplementedError

    @classmethod
    def setting(cls) -> tuple[str, type[int] | type[float]]:
        """Name and type of the one number a user sets for this kind ('threshold', int)."""
        (name,) = (n for n in cls.model_fields if n != "kind")
        annotation = cls.model_fields[name].annotation
        if annotation not in (int, float):
            raise TypeError(f"{cls.__name__}.{name} is not a plain number")
        return name, int if annotation is int else float


class TotalCondition(LeafCondition):
    """Reads one running total (tokens or messages) as it is."""

    state_field: ClassVar[TotalField]
    replayable: ClassVar[bool] = True

    def measure(self, state: TriggerState) -> float | None:
        value: int = getattr(state, self.state_field)
        return value


class AgeCondition(LeafCondition):
    """Reads a timestamp and measures the seconds from it to the check time (the state's
    ``now``, else the clock). Without a timestamp it never fires."""

    state_field: ClassVar[TimeField]
    replayable: ClassVar[bool] = False

    def measure(self, state: TriggerState) -> float | None:
        at: float | None = getattr(state, self.state_field)
        if at is None:
            return None
        now = time.time() if state.now is None else state.now
        return round(now - at, 3)


class TokensCondition(TotalCondition):
    kind: Literal["tokens"] = "tokens"
    threshold: int = Field(gt=0, description="Fire when the context (messages + system + tool schemas) exceeds this many tokens.")

    state_field: ClassVar[TotalField] = "context_tokens"
    label: ClassVar[str] = "context tokens above"

    def limit(self, usable: int) -> float:
        return self.threshold

    def describe(self) -> str:
        return f"context > {self.threshold:,} tokens"


class WindowFractionCondition(TotalCondition):
    kind: Literal["window_fraction"] = "window_fraction"
    fraction: float = Field(gt=0, le=1, description="Fire when the context exceeds this share of the usable window (window minus reserved output tokens).")

    state_field: ClassVar[TotalField] = "context_tokens"
    label: ClassVar[str] = "share of the usable window above"

    def limit(self, usable: int) -> float:
        return self.fraction * usable

    def describe(self) -> str:
        return f"context > {self.fraction:.0%} of the usable window"


class MessagesCondition(TotalCondition):
    kind: Literal["messages"] = "messages"
    threshold: int = Field(gt=0, description="Fire when the context holds more than this many messages.")

    state_field: ClassVar[TotalField] = "messages"
    label: ClassVar[str] = "messages above"

    def limit(self, usable: int) -> float:
        return self.threshold

    def describe(self) -> str:
        return f"more than {self.threshold:,} messages"


class TokensSinceSummaryCondition(TotalCondition):
    kind: Literal["tokens_since_summary"] = "tokens_since_summary"
    threshold: int = Field(gt=0, description="Fire when messages added since the last summary exceed this many tokens.")

    state_field: ClassVar[TotalField] = "tokens_since_summary"
    label: ClassVar[str] = "tokens since the last summary above"

    def limit(self, usable: int) -> float:
        return self.threshold

    def describe(self) -> str:
        return f"> {self.threshold:,} tokens since the last summary"


class WindowFractionSinceSummaryCondition(TotalCondition):
    kind: Literal["window_fraction_since_summary"] = "window_fraction_since_summary"
    fraction: float = Field(gt=0, le=1, description="Fire when tokens added since the last summary exceed this share of the window.")

    state_field: ClassVar[TotalField] = "tokens_since_summary"
    label: ClassVar[str] = "window share since the last summary above"

    def limit(self, usable: int) -> float:
        return self.fraction * usable

    def describe(self) -> str:
        return f"> {self.fraction:.0%} of the window since the last summary"


class MessagesSinceSummaryCondition(TotalCondition):
    kind: Literal["messages_since_summary"] = "messages_since_summary"
    threshold: int = Field(gt=0, description="Fire when more than this many messages were added since the last summary.")

    state_field: ClassVar[TotalField] = "messages_since_summary"
    label: ClassVar[str] = "messages since the last summary above"

    def limit(self, usable: int) -> float:
        return self.threshold

    def describe(self) -> str:
        return f"> {self.threshold:,} messages since the last summary"


class IdleCondition(AgeCondition):
    kind: Literal["idle_seconds"] = "idle_seconds"
    seconds: float = Field(gt=0, description="Fire when the last message is older than this many seconds at check time.")

    state_field: ClassVar[TimeField] = "last_message_at"
    label: ClassVar[str] = "seconds since the last message above"

    def limit(self, usable: int) -> float:
        return self.seconds

    def describe(self) -> str:
        return f"idle for {self.seconds:g} s"


# -- groups ------------------------------------------------------------------------------

class GroupCondition(_Strict):
    """Several conditions joined into one; a subclass declares ``kind`` and ``conditions``."""

    kind: str
    conditions: list[Condition]
    joiner: ClassVar[str]           # the word between members when said aloud

    def fires(self, members: Iterable[bool]) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        return "(" + self.joiner.join(c.describe() for c in self.conditions) + ")"


class AnyCondition(GroupCondition):
    kind: Literal["any"] = "any"
    conditions: list[Condition] = Field(min_length=1, description="Fires when at least one of these fires.")

    joiner: ClassVar[str] = " or "

    def fires(self, members: Iterable[bool]) -> bool:
        return any(members)


class AllCondition(GroupCondition):
    kind: Literal["all"] = "all"
    conditions: list[Condition] = Field(min_length=1, description="Fires when every one of these fires.")

    joiner: ClassVar[str] = " and "

    def fires(self, members: Iterable[bool]) -> bool:
        return all(members)


# -- the union ---------------------------------------------------------------------------
# A new kind is listed here; everything that handles conditions reads this list.

Condition = Annotated[
    TokensCondition | WindowFractionCondition | MessagesCondition | TokensSinceSummaryCondition | WindowFractionSinceSummaryCondition | MessagesSinceSummaryCondition | IdleCondition | AnyCondition | AllCondition,
    Field(discriminator="kind"),
]
GroupCondition.model_rebuild()
AnyCondition.model_rebuild()
AllCondition.model_rebuild()


def kind_of(cls: type[LeafCondition] | type[GroupCondition]) -> str:
    """The JSON tag of a condition class ('tokens', 'any'...)."""
    default: Any = cls.model_fields["kind"].default
    return str(default)


CONDITION_CLASSES: tuple[type[LeafCondition] | type[GroupCondition], ...] = get_args(get_args(Condition)[0])
LEAF_CONDITIONS: tuple[type[LeafCondition], ...] = tuple(c for c in CONDITION_CLASSES if issubclass(c, LeafCondition))
CONDITION_KINDS: frozenset[str] = frozenset(kind_of(c) for c in CONDITION_CLASSES)
