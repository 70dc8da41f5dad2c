"""The record of every generated text of a run: kept, stored in the cache file, replayed.

Environments that need generated text (``requires_generator``: the
``multi-turn-self`` delivery, active engagement with a user simulator) get
generators bound with :func:`bind_generators`, which wraps the environment in a
:class:`GeneratingEnvironment`: every generation is logged with its prompt,
seed, settings and output, and assigned to the episode it belongs to.

In the cache file the log is the per-query text variable
``generation_log`` (:data:`LOG_VARIABLE`): on the first read-out row of each
episode, a JSON list of that episode's generations in call order (each a
:meth:`GenerationRecord.to_json` object: ``role`` = ``reply`` | ``simulator``,
``model``, ``seed``, ``temperature``, ``max_new_tokens``, ``messages`` (the
prompt, as ``[role, content]`` pairs; a simulator's prompt holds its private
steering instructions), ``text`` (the raw output; for the simulator, before
``<message>`` extraction), ``tokens``, ``stop``); ``''`` on every other row. The
rendered context of every read-out, generated text included, is in ``prompt``.
:func:`read_log` reads it back; :class:`ReplayGenerator` answers the same
prompts with the recorded texts, so the exact conversations can be rebuilt
without a model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import xarray as xr

from belieflens.episodes.base import Environment, Episode, Message, ParamsLike, Query
from belieflens.episodes.capabilities import NeedsGenerator, NeedsSimulator
from belieflens.episodes.generation import TextGenerator
from belieflens.errors import BeliefLensError, CacheFileError

Role = Literal["reply", "simulator", "score"]
"""What generated text is for: the evaluated model's own reply, a simulated user message, or
(``score``) the option log-probs of a read-out the environment needed while building its
episodes (``text``: JSON ``{"options": [...], "logprob": [...]}``; see :func:`score_messages`)."""

LOG_VARIABLE = "generation_log"
"""Name of the cache-file variable holding the generation log (see the module docstring)."""

LOG_SCHEMA: dict[str, tuple[tuple[str, ...], str, str]] = {
    LOG_VARIABLE: (
        ("query",),
        "str",
        "JSON list of the episode's generated texts (prompt, seed, settings, output), on the "
        "episode's first read-out row; '' elsewhere",
    ),
}
"""Extra cache-file schema entry for the generation log."""


def messages_key(messages: Sequence[Message]) -> str:
    """SHA-256 of a prompt's messages (role and content, in order)."""
    payload = json.dumps([[m.role, m.content] for m in messages], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def score_messages(query: Query) -> tuple[Message, ...]:
    """The logged prompt of a scored read-out: its messages, then its prefill as the start of
    the assistant's turn (``raw`` queries: the prompt as one user message)."""
    if query.format == "raw":
        return (Message("user", query.prefill),)
    return (*query.messages, Message("assistant", query.prefill))


def score_text(options: Sequence[str], logprob: Sequence[float]) -> str:
    """The logged result of a scored read-out (floats round-trip exactly through JSON)."""
    return json.dumps({"options": list(options), "logprob": [float(x) for x in logprob]},
                      ensure_ascii=False)


@dataclass(frozen=True)
class GenerationRecord:
    """One call of a generator: what was asked, with which settings, and what came out.

    ``episode`` is ``-1`` until the record is assigned to its episode.
    """

    role: Role
    model: str
    seed: int
    temperature: float
    max_new_tokens: int
    messages: tuple[Message, ...]
    text: str
    tokens: int
    stop: str
    episode: int = -1

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (messages as ``[role, content]`` pairs)."""
        out = dataclasses.asdict(self)
        out["messages"] = [[m.role, m.content] for m in self.messages]
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> GenerationRecord:
        """Inverse of :meth:`to_json`."""
        fields = dict(obj)
        fields["messages"] = tuple(Message(r, c) for r, c in obj["messages"])
        return cls(**fields)


class GenerationLog:
    """Accumulates :class:`GenerationRecord` objects in call order (mutable accumulator).

    ``on_record`` (optional) is called with each new record, e.g. for progress.
    """

    def __init__(self, on_record: Callable[[GenerationRecord], None] | None = None) -> None:
        self._records: list[GenerationRecord] = []
        self.on_record = on_record

    @property
    def records(self) -> tuple[GenerationRecord, ...]:
        """All records so far."""
        return tuple(self._records)

    def add(self, record: GenerationRecord, *, notify: bool = True) -> None:
        """Append one record (and pass it to ``on_record`` when ``notify``)."""
        self._records.append(record)
        if notify and self.on_record is not None:
            self.on_record(record)

    def assign(self, episode: int) -> None:
        """Assign every not yet assigned record to ``episode``."""
        self._records = [
            dataclasses.replace(r, episode=episode) if r.episode < 0 else r for r in self._records
        ]

    def of_episode(self, episode: int) -> tuple[GenerationRecord, ...]:
        """The records assigned to ``episode``, in call order."""
        return tuple(r for r in self._records if r.episode == episode)


class GeneratingEnvironment:
    """An environment with bound generators whose every generation is logged per episode.

    Behaves like the wrapped environment (``name``, ``params``, ``episodes``);
    ``inner`` is the bound environment, ``log`` the generation log.
    """

    def __init__(self, inner: Environment, log: GenerationLog) -> None:
        self.inner = inner
        self.log = log

    @property
    def name(self) -> str:
        """The wrapped environment's name."""
        return str(self.inner.name)

    @property
    def params(self) -> ParamsLike:
        """The wrapped environment's parameters."""
        return self.inner.params

    @property
    def requires_generator(self) -> bool:
        """Whether the wrapped environment needs generated text (it is bound)."""
        return requires_generator(self.inner)

    @property
    def requires_simulator(self) -> bool:
        """Whether the wrapped environment needs a user simulator (it is bound)."""
        return requires_simulator(self.inner)

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """The wrapped environment's episodes; each one's generations are assigned to it."""
        for ep in self.inner.episodes(n, seed):
            self.log.assign(ep.index)
            yield ep


def requires_generator(env: object) -> bool:
    """Whether ``env`` needs generated text: a
    :class:`~belieflens.episodes.capabilities.NeedsGenerator` whose parameters ask for it (a bound
    :class:`GeneratingEnvironment` answers for the environment it wraps)."""
    if isinstance(env, GeneratingEnvironment):
        env = env.inner
    return isinstance(env, NeedsGenerator) and env.requires_generator


def requires_simulator(env: object) -> bool:
    """Whether ``env`` needs a user simulator: a
    :class:`~belieflens.episodes.capabilities.NeedsSimulator` whose parameters ask for one
    (active engagement)."""
    if isinstance(env, GeneratingEnvironment):
        env = env.inner
    return isinstance(env, NeedsSimulator) and env.requires_simulator


def bind_generators(
    env: object,
    generator: TextGenerator,
    *,
    simulator: TextGenerator | None = None,
    log: GenerationLog | None = None,
) -> GeneratingEnvironment:
    """Bind ``generator`` (and ``simulator``, where the environment takes one) and wrap the
    result so that generations are assigned to episodes in ``log`` (a new one if ``None``).

    The generators should append to the same ``log`` (e.g.
    :class:`~belieflens.run.generate.ModelGenerator` with ``log=``).
    """
    if not isinstance(env, NeedsGenerator):
        raise BeliefLensError(f"environment {getattr(env, 'name', env)!r} takes no generator")
    bound: Environment
    if simulator is not None and isinstance(env, NeedsSimulator):
        bound = env.bind_generator(generator, simulator=simulator)
    else:
        bound = env.bind_generator(generator)
    return GeneratingEnvironment(bound, log if log is not None else GenerationLog())


def log_rows(episodes: np.ndarray, log: GenerationLog) -> np.ndarray:
    """The ``generation_log`` value of every query row, given each row's episode index."""
    out = np.full(len(episodes), "", dtype=object)
    seen: set[int] = set()
    for i, e in enumerate(np.asarray(episodes).tolist()):
        if e in seen:
            continue
        seen.add(e)
        out[i] = json.dumps([r.to_json() for r in log.of_episode(int(e))], ensure_ascii=False)
    return out


def log_columns(
    env: object, episodes: Sequence[int]
) -> tuple[dict[str, tuple[tuple[str, ...], str, str]], dict[str, np.ndarray]]:
    """The extra schema and per-query values of the generation log for a run of ``env``
    whose query rows belong to ``episodes``; both empty when ``env`` generated nothing."""
    if not isinstance(env, GeneratingEnvironment):
        return {}, {}
    return dict(LOG_SCHEMA), {LOG_VARIABLE: log_rows(np.asarray(episodes), env.log)}


def read_log(ds: xr.Dataset) -> tuple[GenerationRecord, ...]:
    """Every generation stored in a cache file, by episode, in call order.

    Raises :class:`CacheFileError` when the file holds no generation log (the
    run generated no text).
    """
    if LOG_VARIABLE not in ds.variables:
        raise CacheFileError(
            f"cache file has no {LOG_VARIABLE!r}: its environment generated no text"
        )
    values = np.asarray(ds[LOG_VARIABLE].values)
    episodes = np.asarray(ds["episode"].values).astype(np.int64)
    out: list[GenerationRecord] = []
    for e in sorted(set(episodes.tolist())):
        rows = [str(v) for v in values[episodes == e] if str(v)]
        for row in rows:
            out += [GenerationRecord.from_json(obj) for obj in json.loads(row)]
    return tuple(out)


class ReplayGenerator:
    """A :class:`~belieflens.episodes.generation.TextGenerator` answering from recorded generations.

    A call is answered with the recorded text of the same role, prompt, seed,
    temperature and ``max_new_tokens``; a prompt never recorded raises
    :class:`BeliefLensError` (never a guess). ``score`` answers a read-out with the
    recorded option log-probs of the same prompt and options (records of role ``score``):
    the n-th time a read-out is asked, with its n-th record (cycling when they run out). A
    read-out scored twice in a run can differ in its last digits, since its companions in
    the forward call differ (packed rows), and the environment used each value as it came.

    With ``log``, every answer appends the record it came from (its episode unassigned) to
    ``log``, as the generator that made it did: a run on replayed text then logs exactly
    what the original run logged.
    """

    def __init__(self, records: Sequence[GenerationRecord], role: Role, *,
                 log: GenerationLog | None = None) -> None:
        self.role: Role = role
        self.log = log
        self._texts = {
            (messages_key(r.messages), r.seed, r.temperature, r.max_new_tokens): r
            for r in records
            if r.role == role
        }
        self._scores: dict[tuple[str, tuple[str, ...]],
                           list[tuple[tuple[float, ...], GenerationRecord]]] = {}
        self._asked: dict[tuple[str, tuple[str, ...]], int] = {}
        for r in records:
            if r.role == "score":
                obj = json.loads(r.text)
                key = (messages_key(r.messages), tuple(str(o) for o in obj["options"]))
                self._scores.setdefault(key, []).append(
                    (tuple(float(x) for x in obj["logprob"]), r))

    def _logged(self, record: GenerationRecord, *, notify: bool = True) -> None:
        if self.log is not None:
            self.log.add(dataclasses.replace(record, episode=-1), notify=notify)

    def score(self, queries: Sequence[Query]) -> tuple[tuple[float, ...], ...]:
        """The recorded option log-probs of each read-out."""
        out = []
        for i, q in enumerate(queries):
            key = (messages_key(score_messages(q)), tuple(q.options))
            if key not in self._scores:
                raise BeliefLensError("replay: no recorded score for this read-out")
            n = self._asked.get(key, 0)
            self._asked[key] = n + 1
            recorded = self._scores[key]
            values, record = recorded[n % len(recorded)]
            self._logged(record, notify=i == len(queries) - 1)
            out.append(values)
        return tuple(out)

    def __call__(self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                 temperature: float) -> str:
        """The recorded text for this exact call."""
        key = (messages_key(messages), int(seed), float(temperature), int(max_new_tokens))
        if key not in self._texts:
            raise BeliefLensError(
                f"replay: no recorded {self.role} generation for this prompt with seed {seed}, "
                f"temperature {temperature}, max_new_tokens {max_new_tokens}"
            )
        record = self._texts[key]
        self._logged(record)
        return record.text


def bind_replay(env: Environment, records: Sequence[GenerationRecord], *,
                logged: bool = False) -> GeneratingEnvironment:
    """``env`` bound to :class:`ReplayGenerator` objects answering from ``records``; with
    ``logged`` they log what they answer, so the run's generation log equals the original's."""
    log = GenerationLog()
    into = log if logged else None
    return bind_generators(
        env, ReplayGenerator(records, "reply", log=into),
        simulator=ReplayGenerator(records, "simulator", log=into), log=log,
    )


def replay(env: Environment, ds: xr.Dataset) -> GeneratingEnvironment:
    """``env`` bound to :class:`ReplayGenerator` objects built from ``ds``'s generation log."""
    return bind_replay(env, read_log(ds))
