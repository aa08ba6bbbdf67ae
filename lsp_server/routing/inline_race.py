"""One keystroke-level request raced across endpoints: hedging, fallback and the deadline.

The race is the same whatever the request: each attempt makes the `call` it is given (a
fill-in-the-middle completion for inline suggestions, `completion_call`) and stops reading once
the caller has `enough`.

The primary starts at once (with one more endpoint beside it when the router asks: an
exploration or a probe, counted as a hedge). If nothing has produced a token after
`hedge_after_ms` (and the hedge budget allows), the next candidate starts too, rider or not; a
failure starts the next candidate at once. The first usable answer wins and every other attempt
is cancelled, which closes its HTTP stream or stops local generation, except an exploration
that has no first token yet: it runs on to that token (within the deadline, its text unused) so
the router measures it whole. At the deadline the request returns what it has, never late text.

A streaming caller (`on_text`) commits to the first attempt that produces text: its text goes
out as it comes and cannot be taken back, so the others are cancelled at once and a failure of
the committed attempt ends the race with no answer instead of starting the next candidate.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from lsp_server.backends.base import BackendError, CompletionRequest, Usage, unexpected_failure
from lsp_server.config.model import Role
from lsp_server.permit import Permit
from lsp_server.routing.attempt import Attempt
from lsp_server.routing.decision_log import DecisionKind
from lsp_server.routing.endpoint_pool import Endpoint
from lsp_server.routing.gate import StaysHome

# The call an attempt makes: the endpoint's streamed text, its counts noted in the `Usage`,
# under the gate's permit.
TextCall = Callable[[Endpoint, Usage, Permit], AsyncIterator[str]]
# The gate's permit for one endpoint of this request, or `StaysHome` (routing/gate.py).
Permits = Callable[[Endpoint], Permit]
# Whether the text so far is all the caller can use (reading on would only spend the deadline).
Enough = Callable[[str], bool]


@dataclass(frozen=True, slots=True, kw_only=True)
class RaceRequest:
    """One request for the race: who may answer it (`role`) and what each attempt asks."""

    role: Role
    kind: DecisionKind
    call: TextCall
    enough: Enough
    max_tokens: int
    prompt_chars: int  # for the cost, when the upstream reports no prompt tokens


def completion_race(request: CompletionRequest) -> RaceRequest:
    """An inline suggestion: a fill-in-the-middle completion of `request`."""

    def call(endpoint: Endpoint, usage: Usage, permit: Permit) -> AsyncIterator[str]:
        return endpoint.backend.complete(request, usage, permit=permit)

    return RaceRequest(
        role="inline",
        kind=DecisionKind.INLINE,
        call=call,
        enough=completion_enough(request),
        max_tokens=request.max_tokens,
        prompt_chars=len(request.prefix) + len(request.suffix),
    )


def completion_enough(request: CompletionRequest) -> Enough:
    """Enough of a completion: a whole line for a single-line context, else up to where the
    text leaves the cursor's block."""
    cursor_line = request.prefix[request.prefix.rfind("\n") + 1 :]
    indent = len(cursor_line) - len(cursor_line.lstrip())
    single_line = request.single_line

    def enough(text: str) -> bool:
        if single_line and _has_complete_line(text):
            return True  # the rest of the line is all a single-line context can use
        return _left_the_block(text, indent)  # a blank line, then code outside the block

    return enough


def _never_enough(text: str) -> bool:
    return False


@dataclass(slots=True, kw_only=True)
class RaceAttempt(Attempt):
    """An attempt of the race: its text so far, and the task that runs it."""

    parts: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    measuring: bool = False  # an exploration: lost, it still runs to its first token

    @property
    def text(self) -> str:
        return "".join(self.parts)


@dataclass(slots=True)
class RaceOutcome:
    winner: RaceAttempt | None
    attempts: list[RaceAttempt]
    text: str
    timed_out: bool
    hedged: bool
    # Explorations that lost before their first token and still run to it (their task ends
    # there); the caller awaits them within the deadline and records what they measured.
    measuring: list[RaceAttempt] = field(default_factory=list)


class InlineRace:
    def __init__(
        self,
        call: TextCall,
        candidates: list[Endpoint],
        *,
        permits: Permits,
        enough: Enough = _never_enough,
        hedge_after_s: float,
        deadline_s: float,
        may_hedge: bool,
        parallel: int = 1,
        measure_riders: bool = False,
        on_text: Callable[[str], None] | None = None,
        on_attempt: Callable[[str], None] | None = None,
    ) -> None:
        self._call = call
        self._permits = permits
        self._enough = enough
        self._measure_riders = measure_riders and on_text is None
        self._decided = False
        self._on_text = on_text
        self._on_attempt = on_attempt
        self._committed: RaceAttempt | None = None
        self._queue = list(candidates)
        self._hedge_after_s = hedge_after_s
        self._deadline_s = deadline_s
        self._may_hedge = may_hedge
        self._parallel = parallel
        self._attempts: list[RaceAttempt] = []
        self._hedged = False  # another endpoint was asked: a rider, or a hedge against slowness
        self._straggler_hedged = False
        self._wake = asyncio.Event()

    @property
    def attempts(self) -> list[RaceAttempt]:
        """The attempts made so far, in the order they started."""
        return list(self._attempts)

    async def run(self) -> RaceOutcome:
        if self._parallel == 1 and len(self._queue) == 1:
            return await self._run_alone()
        start = time.monotonic()
        deadline = start + self._deadline_s
        hedge_at = start + self._hedge_after_s
        try:
            self._launch(hedge=False)
            for _ in range(self._parallel - 1):  # an exploration or a probe rides along
                self._hedged = (
                    self._launch(hedge=True, measuring=self._measure_riders) or self._hedged
                )
            while True:
                if self._committed is not None:
                    self._cancel_uncommitted()
                    if self._committed.finished_at is not None:
                        winner = self._committed if self._committed.succeeded else None
                        return self._outcome(winner, winner.text if winner else "", timed_out=False)
                winner = self._winner()
                if winner is not None:
                    return self._outcome(winner, winner.text, timed_out=False)
                running = [a for a in self._attempts if a.finished_at is None]
                if not running:
                    if not self._launch(hedge=False):
                        return self._outcome(None, "", timed_out=False)
                    continue
                now = time.monotonic()
                if now >= deadline:
                    return self._outcome(None, _usable_partial(running), timed_out=True)
                if self._should_hedge(now, hedge_at, running):
                    self._straggler_hedged = self._launch(hedge=True)
                    self._hedged = self._hedged or self._straggler_hedged
                    continue
                wake_at = deadline
                if self._may_hedge and not self._straggler_hedged and now < hedge_at:
                    wake_at = min(wake_at, hedge_at)
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, wake_at - now))
        except BaseException:
            self._measure_riders = False  # cancelled from outside: nothing runs on
            raise
        finally:
            self._decided = True
            await self._cancel_running()

    async def _run_alone(self) -> RaceOutcome:
        """One candidate and no rider: nothing to hedge with or fall back to, so its attempt
        runs in this task under the deadline, without a task of its own and the wake-ups
        between the two (the same outcome as the race's loop gives)."""
        taken = self._next_permitted()
        if taken is None:
            return self._outcome(None, "", timed_out=False)
        endpoint, permit = taken
        attempt = RaceAttempt(endpoint=endpoint, hedge=False)
        self._attempts.append(attempt)
        try:
            async with asyncio.timeout(self._deadline_s):
                await self._drive(attempt, permit)
        except TimeoutError:
            return self._outcome(None, _usable_partial([attempt]), timed_out=True)
        finally:
            self._decided = True
        winner = attempt if attempt.succeeded else None
        return self._outcome(winner, winner.text if winner else "", timed_out=False)

    def _should_hedge(self, now: float, hedge_at: float, running: list[RaceAttempt]) -> bool:
        """Once, when nothing running has a first token by `hedge_at`: a rider asked from the
        start is no hedge against the primary straggling (both may be slow)."""
        if not self._may_hedge or self._straggler_hedged or now < hedge_at or not self._queue:
            return False
        return all(a.first_token_at is None for a in running)

    def _launch(self, *, hedge: bool, measuring: bool = False) -> bool:
        taken = self._next_permitted()
        if taken is None:
            return False
        endpoint, permit = taken
        attempt = RaceAttempt(endpoint=endpoint, hedge=hedge, measuring=measuring)
        attempt.task = asyncio.get_running_loop().create_task(self._drive(attempt, permit))
        self._attempts.append(attempt)
        return True

    def _next_permitted(self) -> tuple[Endpoint, Permit] | None:
        """The next candidate the gate lets this request call now, with its permit: one
        refused since the race began (offline "always" set meanwhile) is passed over."""
        while self._queue:
            endpoint = self._queue.pop(0)
            try:
                return endpoint, self._permits(endpoint)
            except StaysHome:
                continue
        return None

    async def _drive(self, attempt: RaceAttempt, permit: Permit) -> None:
        stream = self._call(attempt.endpoint, attempt.usage, permit)
        try:
            async with contextlib.aclosing(stream):  # type: ignore[type-var]
                async for chunk in stream:
                    if attempt.first_token_at is None:
                        attempt.first_token_at = time.monotonic()
                        self._wake.set()
                    if self._decided:  # a lost exploration: its first token is all it owed
                        attempt.cancelled = True
                        break
                    attempt.parts.append(chunk)
                    self._forward(attempt, chunk)
                    if self._enough(attempt.text):
                        break
        except BackendError as error:
            attempt.error = error
        except asyncio.CancelledError:
            attempt.cancelled = True
            raise
        except Exception as exc:
            attempt.error = unexpected_failure(attempt.endpoint.name, exc)
        finally:
            attempt.finished_at = time.monotonic()
            self._wake.set()

    def _forward(self, attempt: RaceAttempt, chunk: str) -> None:
        """Hand a streaming caller the text of the attempt it is committed to."""
        if self._on_text is None:
            return
        if self._committed is None:
            self._committed = attempt
            if self._on_attempt is not None:
                self._on_attempt(attempt.endpoint.name)
            self._wake.set()
        if attempt is self._committed:
            self._on_text(chunk)

    def _cancel_uncommitted(self) -> None:
        for attempt in self._attempts:
            if attempt is not self._committed and attempt.task is not None:
                attempt.task.cancel()

    def _winner(self) -> RaceAttempt | None:
        finished = [a for a in self._attempts if a.succeeded]
        if not finished:
            return None
        return min(finished, key=lambda a: a.finished_at or 0.0)

    def _outcome(self, winner: RaceAttempt | None, text: str, *, timed_out: bool) -> RaceOutcome:
        if timed_out:
            self._measure_riders = False  # the deadline bounds the measuring too
        measuring = [a for a in self._attempts if self._still_measuring(a)]
        return RaceOutcome(winner, list(self._attempts), text, timed_out, self._hedged, measuring)

    def _still_measuring(self, attempt: RaceAttempt) -> bool:
        return (
            self._measure_riders
            and attempt.measuring
            and attempt.first_token_at is None
            and attempt.finished_at is None
        )

    async def _cancel_running(self) -> None:
        tasks = [
            a.task
            for a in self._attempts
            if a.task is not None and not a.task.done() and not self._still_measuring(a)
        ]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def _has_complete_line(text: str) -> bool:
    stripped = text.lstrip("\n")
    return "\n" in stripped


def _left_the_block(text: str, indent: int) -> bool:
    """Whether `text` has gone past the block the cursor is in: a blank line, then a line
    indented less than the cursor's line (the next function, say). Post-processing cuts the
    suggestion there anyway, so generating on only spends the deadline."""
    if indent == 0 or "\n\n" not in text:
        return False
    lines = text.split("\n")
    for previous, line in itertools.pairwise(lines):
        stripped = line.lstrip()
        if not previous.strip() and stripped and len(line) - len(stripped) < indent:
            return True
    return False


def _usable_partial(running: list[RaceAttempt]) -> str:
    """The longest partial answer, cut back to its last whole line or word: never half a token."""
    best = max((a.text for a in running), key=len, default="")
    if "\n" in best:
        return best[: best.rindex("\n") + 1]
    cut = max(best.rfind(" "), best.rfind("\t"))
    return best[:cut] if cut > 0 else ""
