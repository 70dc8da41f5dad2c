"""Generation across episodes: episodes driven step by step, their requests decoded together.

An environment that builds its episodes as independent jobs
(:class:`~belieflens.episodes.capabilities.EpisodeJobs`) is bound here to stand-in
generators (:class:`SteppedGenerator`) and run by :func:`belieflens.run.coroutines.drive`:
up to ``window`` episodes at a time each run to their next generation or score; every
pending request is then served at once (:class:`Server`):

- the text requests for one model decode together
  (:func:`~belieflens.run.generate_batch.generate_batch`: left-padded, one key/value cache
  per batch, finished rows dropped, each row with its own seeded generator), in batches of
  at most ``--gen-batch`` rows that fit ``--max-memory``; the reply and the simulator's
  requests share batches when one model plays both, each row with its own settings; a prompt
  that extends a finished row (the next turn of a conversation) runs only its new tokens
  (:mod:`belieflens.run.gen_prefix`);
- the read-outs to score for one model (the simulator's likelihoods, the active oracle's,
  ...) run as one call of the runner, sized by the same budget.

Every answer is logged as the one-at-a-time path logs it
(:class:`~belieflens.run.generation_log.GenerationLog`): each episode's records in the order
it asked, episodes in order; progress (``on_record``) is reported as requests are served.
Replays, environments that cannot split their episodes, and ``--gen-batch 1`` take the
one-at-a-time path (:func:`~belieflens.run.generate.bind_model`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from belieflens.episodes.base import Environment, Episode, Message, Query
from belieflens.episodes.capabilities import EpisodeJobs
from belieflens.errors import BeliefLensError
from belieflens.model.load import LoadedModel
from belieflens.run import coroutines
from belieflens.run.budget import GEN_ROWS, default_memory
from belieflens.run.gen_prefix import PrefixStore
from belieflens.run.generate import GenerationCall, ModelGenerator, bind_model, check_call
from belieflens.run.generate_batch import generate_batch
from belieflens.run.generation_log import (
    GeneratingEnvironment,
    GenerationLog,
    GenerationRecord,
    bind_generators,
    bind_replay,
    requires_generator,
    requires_simulator,
)

WINDOW = 64
"""Episodes driven at once under ``--gen-batch auto`` (``--gen-batch N``: N)."""

STORE_SHARE = 4
"""The finished rows' caches kept for prompts that extend them take 1/STORE_SHARE of the
budget (:mod:`belieflens.run.gen_prefix`); the batches the rest."""


@dataclass(frozen=True)
class TextRequest:
    """A job's request for generated text from ``generator``'s model."""

    generator: ModelGenerator
    call: GenerationCall


@dataclass(frozen=True)
class ScoreRequest:
    """A job's request for the option log-probs of ``queries`` on ``generator``'s model."""

    generator: ModelGenerator
    queries: tuple[Query, ...]


class SteppedGenerator:
    """A :class:`~belieflens.episodes.generation.TextGenerator` and
    :class:`~belieflens.episodes.generation.OptionScorer` whose calls, inside a driven job,
    wait for the :class:`Server`; outside one, ``backend`` answers at once (and logs)."""

    def __init__(self, backend: ModelGenerator) -> None:
        self.backend = backend

    def __call__(self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                 temperature: float) -> str:
        """The generated text, as ``backend`` would answer it."""
        if coroutines.current() is None:
            return self.backend(messages, seed=seed, max_new_tokens=max_new_tokens,
                                temperature=temperature)
        call = GenerationCall(messages, seed, max_new_tokens, temperature)
        text, record = coroutines.ask(TextRequest(self.backend, call))
        coroutines.note(record)
        return str(text)

    def score(self, queries: Sequence[Query]) -> tuple[tuple[float, ...], ...]:
        """Per query, the log-probability of each option, as ``backend`` would score it."""
        if coroutines.current() is None:
            return self.backend.score(queries)
        values, records = coroutines.ask(ScoreRequest(self.backend, tuple(queries)))
        for r in records:
            coroutines.note(r)
        return tuple(values)


class Server:
    """Serves one step's pending requests, model by model (see the module docstring)."""

    def __init__(self, *, max_rows: int, budget: int,
                 on_record: Callable[[GenerationRecord], None] | None = None) -> None:
        self.max_rows, self.budget, self.on_record = max_rows, budget, on_record
        self.stores: dict[int, PrefixStore] = {}
        """Per model, its finished rows' caches (a quarter of the budget)."""

    def __call__(self, requests: list[Any]) -> list[Any]:
        """One answer per request: ``(text, record)``, ``(values, records)`` or a
        :class:`~belieflens.run.coroutines.Failure`."""
        answers: list[Any] = [None] * len(requests)
        models: dict[int, list[int]] = {}
        for i, r in enumerate(requests):
            models.setdefault(id(r.generator.model), []).append(i)
        for idx in models.values():
            texts = [i for i in idx if isinstance(requests[i], TextRequest)]
            scores = [i for i in idx if isinstance(requests[i], ScoreRequest)]
            self._texts([requests[i] for i in texts], texts, answers)
            self._scores([requests[i] for i in scores], scores, answers)
        return answers

    def _notify(self, record: GenerationRecord) -> None:
        if self.on_record is not None:
            self.on_record(record)

    def _texts(self, requests: list[TextRequest], at: list[int], answers: list[Any]) -> None:
        """Decode the text requests of one model together; a call that is not allowed is
        answered with its error."""
        ok: list[int] = []
        for k, r in enumerate(requests):
            try:
                check_call(r.generator.model, r.call)
                ok.append(k)
            except BeliefLensError as e:
                answers[at[k]] = coroutines.Failure(e)
        if not ok:
            return
        model = requests[ok[0]].generator.model
        store = self.stores.setdefault(id(model), PrefixStore(self.budget // STORE_SHARE))
        outs = generate_batch(model, [requests[k].call for k in ok], max_rows=self.max_rows,
                              budget=self.budget - store.limit, store=store)
        for k, out in zip(ok, outs, strict=True):
            record = requests[k].generator.record(requests[k].call, out)
            self._notify(record)
            answers[at[k]] = (out.text, record)

    def _scores(self, requests: list[ScoreRequest], at: list[int], answers: list[Any]) -> None:
        """Score every read-out the requests of one model ask for in one runner call."""
        if not requests:
            return
        every = [q for r in requests for q in r.queries]
        values = requests[0].generator.score_values(every, budget=self.budget)
        start = 0
        for k, r in enumerate(requests):
            mine = values[start:start + len(r.queries)]
            start += len(r.queries)
            records = r.generator.score_records(r.queries, mine)
            if records:
                self._notify(records[-1])  # progress once per scored request
            answers[at[k]] = (mine, records)


class BatchedEnvironment(GeneratingEnvironment):
    """A :class:`GeneratingEnvironment` whose episodes are driven together, their requests
    served by ``server`` (at most ``window`` episodes at a time)."""

    def __init__(self, inner: Environment, log: GenerationLog, server: Server,
                 window: int) -> None:
        super().__init__(inner, log)
        self.server, self.window = server, window

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """The wrapped environment's episodes, in order, each with its generations logged."""
        if not isinstance(self.inner, EpisodeJobs):
            yield from super().episodes(n, seed)
            return
        jobs = self.inner.episode_jobs(n, seed)
        for ep, notes in coroutines.drive(jobs, self.server, window=self.window):
            for record in notes:
                self.log.add(dataclasses.replace(record, episode=ep.index), notify=False)
            self.log.assign(ep.index)
            yield ep


def bind_batched(
    env: Any, model: LoadedModel, *, simulator: LoadedModel | None = None,
    on_record: Callable[[GenerationRecord], None] | None = None, gen_batch: int = 0,
    budget: int = 0,
) -> GeneratingEnvironment:
    """``env`` with its generations decoded across episodes (module docstring): replies by
    ``model``, simulated users by ``simulator`` (default ``model``). ``gen_batch``: the most
    rows of a batch and episodes driven at once (0: :data:`~belieflens.run.budget.GEN_ROWS`
    rows, :data:`WINDOW` episodes); ``budget``: the bytes a batch may take (0: the default
    ``--max-memory``). An environment that cannot split its episodes runs one at a time."""
    log = GenerationLog(on_record)
    reply = ModelGenerator(model, role="reply", log=log)
    sim = ModelGenerator(simulator if simulator is not None else model, role="simulator",
                         log=log)
    bound = bind_generators(env, SteppedGenerator(reply), simulator=SteppedGenerator(sim),
                            log=log)
    server = Server(max_rows=gen_batch or GEN_ROWS,
                    budget=budget or default_memory(model.info.device), on_record=on_record)
    return BatchedEnvironment(bound.inner, log, server, gen_batch or WINDOW)


def bind_run(
    env: Environment,
    model: LoadedModel,
    *,
    simulator: LoadedModel | None = None,
    on_record: Callable[[GenerationRecord], None] | None = None,
    replay: Sequence[GenerationRecord] | None = None,
    gen_batch: int = 0,
    budget: int = 0,
) -> tuple[Environment, dict[str, str]]:
    """``env`` ready to extract on ``model``, with the provenance attributes of its generators.

    Where ``env`` needs generated text, its replies are generated by ``model`` and its simulated
    users by ``simulator`` (default: ``model``), every generation logged per episode: decoded
    across episodes (:func:`bind_batched`, ``gen_batch`` and ``budget`` as there), or one at a
    time with ``gen_batch=1`` (:func:`~belieflens.run.generate.bind_model`). The attributes name
    the generator (``generator_model``) and, where a simulator plays the user, the simulator
    (``simulator_model``, ``simulator_spec``, ``simulator_weights_hash``). With ``replay``, the
    records of an earlier run of the same study by these models answer instead, and are logged
    as they answer (:func:`~belieflens.run.generation_log.bind_replay`): the run's read-outs and
    generation log are that run's, and nothing is generated. An environment that generates
    nothing, or one bound already, is returned as it is, with no attributes.
    """
    if isinstance(env, GeneratingEnvironment) or not requires_generator(env):
        return env, {}
    sim = simulator if simulator is not None else model
    attrs = {"generator_model": model.info.official_id}
    if requires_simulator(env):
        attrs.update({"simulator_model": sim.info.official_id,
                      "simulator_spec": sim.info.spec,
                      "simulator_weights_hash": sim.info.weights_hash})
    if replay is not None:
        return bind_replay(env, replay, logged=True), attrs
    if gen_batch == 1:
        return bind_model(env, model, simulator=sim, on_record=on_record), attrs
    return bind_batched(env, model, simulator=sim, on_record=on_record, gen_batch=gen_batch,
                        budget=budget), attrs
