"""The five revealed-vs-stated environments: dice, coins, preference, choice, case study.

Each is a finite grid (:class:`~belieflens.envs.revealed.grid.GridEnvironment`) whose points
the sibling modules build (:mod:`.dice`, :mod:`.coins`, :mod:`.preference`, :mod:`.choice`,
:mod:`.case_study`); here each environment's parameters and class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from belieflens.envs.registry import register
from belieflens.envs.revealed import case_study, choice, coins, dice, preference
from belieflens.envs.revealed.grid import GridEnvironment, GridPoint, RevealedParams
from belieflens.episodes.params import bad, param


@dataclass(frozen=True)
class DiceParams(RevealedParams):
    """Parameters of the dice grid (defaults: the paper's full grid)."""

    one_of: ClassVar[Mapping[str, Sequence[int]]] = {"dice": dice.DICE, "faces": dice.FACES}
    """Set before the fields: in the class body their names shadow the grid modules'."""

    dice: int | None = param(None, "number of dice, 1..3; default: all")
    faces: int | None = param(None, "faces per die, one of 4, 6, 8, 10, 12; default: all")
    variant: Literal["all", "single", "independent", "dependent", "observation"] = param(
        "all", "which variant(s) of the grid"
    )
    support: Literal["prior", "posterior"] = param(
        "prior",
        "observation variant: outcomes are every value the roll can take (prior) or only "
        "those consistent with the observations (posterior)",
    )
    observations: Literal["all", "multiple"] = param(
        "all",
        "observation sets kept: all that some result satisfies (the paper's, e.g. 'smaller "
        "than 2' on a 4-sided die), or only those leaving two or more possible results "
        "(always so with support=posterior)",
    )


@register
class Dice(GridEnvironment[DiceParams]):
    """Dice: the sum of 1-3 fair dice with 4, 6, 8, 10 or 12 faces.

    Variants: a single roll; a previous roll is stated and a new independent roll
    is predicted (every previous result); the total of the previous and a new roll
    (every previous result); one or two observations about the result (even, odd,
    smaller/greater than the middle value, not 1, not the middle value) that some
    result satisfies (``observations=multiple``: two or more results). Grid
    order: variant, number of dice, faces, then previous result or observations.

    Parameters are the fields of its ``Params`` record. A finite grid: one episode per grid
    point (``count()`` of them), one turn, probes ``revealed`` (a completion) and ``stated``
    (a question); beliefs have dims ``(delivery, probe, episode, turn, outcome)``.

    Examples:
        >>> env = belieflens.envs.get("dice")
        >>> env.count()
        11200
        >>> episode = next(env.episodes(1, seed=0))
        >>> [p.name for p in episode.turns[0].probes], episode.turns[0].probes[0].labels
        (['revealed', 'stated'], ('1', '2', '3', '4'))
    """

    name = "dice"
    Params = DiceParams

    def grid(self) -> Sequence[GridPoint]:
        """Every grid point the parameters select, in grid order."""
        p = self.params
        variants = dice.VARIANTS if p.variant == "all" else (p.variant,)
        counts = dice.DICE if p.dice is None else (p.dice,)
        faces = dice.FACES if p.faces is None else (p.faces,)
        # a posterior support with one result would leave a one-outcome read-out (always 1)
        min_results = 1 if p.observations == "all" and p.support == "prior" else 2
        return [
            point
            for v in variants
            for n in counts
            for f in faces
            for point in dice.dice_points(v, n, f, p.support, p.style, min_results)
        ]


@dataclass(frozen=True)
class CoinsParams(RevealedParams):
    """Parameters of the coins grid (defaults: the paper's full grid)."""

    one_of: ClassVar[Mapping[str, Sequence[int]]] = {"coins": coins.COINS, "bias": coins.BIASES}
    """Set before the fields: in the class body their names shadow the grid modules'."""

    coins: int | None = param(None, "number of coins, 2..4; default: all")
    focus: Literal["all", "Heads", "Tails"] = param("all", "the face that is counted and favoured")
    bias: int | None = param(None, "focus face k times likelier, one of 1, 3, 5; default: all")
    variant: Literal["all", "regular", "independent", "dependent"] = param(
        "all", "which variant(s) of the grid"
    )


@register
class Coins(GridEnvironment[CoinsParams]):
    """Coins: the number of 2-4 coins landing on the focus face (Heads or Tails).

    Each coin is 1, 3 or 5 times more likely to land on the focus face. Variants:
    one toss; a previous count is stated and a new independent toss is predicted
    (every previous count); the total over the previous and a new toss (every
    previous count). Grid order: variant, coins, focus, bias, previous count.

    Parameters are the fields of its ``Params`` record. A finite grid: one episode per grid
    point (``count()`` of them), one turn, probes ``revealed`` (a completion) and ``stated``
    (a question); beliefs have dims ``(delivery, probe, episode, turn, outcome)``.

    Examples:
        >>> env = belieflens.envs.get("coins")
        >>> env.count()
        672
        >>> episode = next(env.episodes(1, seed=0))
        >>> [p.name for p in episode.turns[0].probes], episode.turns[0].probes[0].labels
        (['revealed', 'stated'], ('0', '1', '2'))
    """

    name = "coins"
    Params = CoinsParams

    def grid(self) -> Sequence[GridPoint]:
        """Every grid point the parameters select, in grid order."""
        p = self.params
        variants = coins.VARIANTS if p.variant == "all" else (p.variant,)
        counts = coins.COINS if p.coins is None else (p.coins,)
        faces = coins.FACES if p.focus == "all" else (p.focus,)
        biases = coins.BIASES if p.bias is None else (p.bias,)
        return [
            point
            for v in variants
            for n in counts
            for f in faces
            for b in biases
            for point in coins.coins_points(v, n, f, b, p.style)
        ]


@dataclass(frozen=True)
class PreferenceParams(RevealedParams):
    """Parameters of the preference grid (defaults: the paper's full grid)."""

    one_of: ClassVar[Mapping[str, Sequence[int]]] = {"bias": preference.BIASES}

    pair: Literal["all", "left-right", "heads-tails"] = param("all", "the two options")
    order: Literal["all", "forward", "reverse"] = param("all", "order the options are presented in")
    focus: Literal["canonical", "all", "first", "second"] = param(
        "canonical",
        "favoured option: canonical = Left/Heads whatever the order (the paper's grid), "
        "first/second presented, or all (both in turn)",
    )
    bias: int | None = param(None, "favoured option k times likelier, one of 1, 2, 3; default: all")
    variant: Literal["all", "regular", "independent"] = param("all", "which variant(s) of the grid")


@register
class Preference(GridEnvironment[PreferenceParams]):
    """Preference: Sam chooses Left/Right or Heads/Tails, one option 1-3 times likelier.

    Both presentation orders, bias 1, 2 or 3; by default (``focus=canonical``, the paper's
    grid) the pair's own first option (Left, Heads) is favoured, and each option gets its
    own stated question; ``focus=all`` favours either presented option in turn. Variants:
    one choice; a previous choice is stated and a new independent choice is
    predicted (every previous choice). Outcomes are listed in presentation order.
    Grid order: variant, pair, order, focus, bias, previous choice.

    Parameters are the fields of its ``Params`` record. A finite grid: one episode per grid
    point (``count()`` of them), one turn, probes ``revealed`` (a completion) and ``stated``
    (a question); beliefs have dims ``(delivery, probe, episode, turn, outcome)``.

    Examples:
        >>> env = belieflens.envs.get("preference")
        >>> env.count()
        72
        >>> episode = next(env.episodes(1, seed=0))
        >>> [p.name for p in episode.turns[0].probes], episode.turns[0].probes[0].labels
        (['revealed', 'stated'], ('Left', 'Right'))
    """

    name = "preference"
    Params = PreferenceParams

    def grid(self) -> Sequence[GridPoint]:
        """Every grid point the parameters select, in grid order."""
        p = self.params
        variants = preference.VARIANTS if p.variant == "all" else (p.variant,)
        pairs = tuple(preference.PAIRS) if p.pair == "all" else (p.pair,)
        orders = preference.ORDERS if p.order == "all" else (p.order,)
        focuses = preference.FOCUSES if p.focus == "all" else (p.focus,)
        biases = preference.BIASES if p.bias is None else (p.bias,)
        return [
            point
            for v in variants
            for pair in pairs
            for o in orders
            for f in focuses
            for b in biases
            for point in preference.preference_points(v, pair, o, f, b, p.style)
        ]


@dataclass(frozen=True)
class ChoiceParams(RevealedParams):
    """Parameters of the choice grid (defaults: the paper's full grid)."""

    one_of: ClassVar[Mapping[str, Sequence[int]]] = {"options": choice.SIZES}

    options: int | None = param(None, "number of lettered options, one of 2, 4, 6; default: all")
    variant: Literal["all", "regular", "independent"] = param("all", "which variant(s) of the grid")


@register
class Choice(GridEnvironment[ChoiceParams]):
    """Choice: a uniformly random pick among 2, 4 or 6 options labelled A, B, ...

    Variants: one pick; a previous pick is stated and a new independent pick is
    predicted (every previous pick). Grid order: variant, number of options,
    previous pick.

    Parameters are the fields of its ``Params`` record. A finite grid: one episode per grid
    point (``count()`` of them), one turn, probes ``revealed`` (a completion) and ``stated``
    (a question); beliefs have dims ``(delivery, probe, episode, turn, outcome)``.

    Examples:
        >>> env = belieflens.envs.get("choice")
        >>> env.count()
        68
        >>> episode = next(env.episodes(1, seed=0))
        >>> [p.name for p in episode.turns[0].probes], episode.turns[0].probes[0].labels
        (['revealed', 'stated'], ('A', 'B'))
    """

    name = "choice"
    Params = ChoiceParams

    def grid(self) -> Sequence[GridPoint]:
        """Every grid point the parameters select, in grid order."""
        p = self.params
        variants = choice.VARIANTS if p.variant == "all" else (p.variant,)
        sizes = choice.SIZES if p.options is None else (p.options,)
        return [point for v in variants for k in sizes
                for point in choice.choice_points(v, k, p.style)]


@dataclass(frozen=True)
class CaseStudyParams(RevealedParams):
    """Parameters of the diagnosis case study (``format`` defaults to ``chat``: the paper's
    case study is a dialogue with a system message)."""

    format: Literal["raw", "chat"] = param(
        "chat", "raw: plain-text completion; chat: scenario as a user turn, stem as the prefill"
    )
    case: Literal["surgical-ward", "clinic"] = param(
        "surgical-ward",
        "surgical-ward: the paper's burnout/depression/anxiety case (13% in a surgical ward); "
        "clinic: children and adults with a varying share",
    )
    share: int | None = param(
        None, "clinic: percent of children, one of 10, 30, 50, 70, 90; default: all"
    )
    variant: Literal["all", "marginal", "child", "adult"] = param(
        "all", "clinic: which variant(s) of the grid (surgical-ward has one scenario)"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.case not in ("surgical-ward", "clinic"):
            raise bad("case", self.case, "surgical-ward or clinic")
        self._check_one_of("share", case_study.SHARES)
        if self.case == "surgical-ward" and (self.share is not None or self.variant != "all"):
            raise bad("case", self.case, "share and variant apply to case=clinic only")


@register
class CaseStudy(GridEnvironment[CaseStudyParams]):
    """Case study: the paper's surgical-ward diagnosis (default) or a clinic patient's.

    ``case=surgical-ward``: one scenario, Ash's diagnosis among burnout, depression
    and anxiety (module docstring). ``case=clinic``: the share of children is
    10-90%; the conditions' prevalence is given among children and among adults.
    Variants: a random patient (oracle: the exact
    marginal of the mixture), or one known to be a child or an adult (oracle: that
    subgroup's prevalence; the share is then irrelevant). Grid order: variant, share.

    Parameters are the fields of its ``Params`` record. A finite grid: one episode per grid
    point (``count()`` of them), one turn, probes ``revealed`` (a completion) and ``stated``
    (a question); beliefs have dims ``(delivery, probe, episode, turn, outcome)``.

    Examples:
        >>> env = belieflens.envs.get("case-study")
        >>> env.count()
        3
        >>> episode = next(env.episodes(1, seed=0))
        >>> [p.name for p in episode.turns[0].probes], episode.turns[0].probes[0].labels
        (['revealed', 'stated'], ('burnout', 'depression', 'anxiety'))
    """

    name = "case-study"
    Params = CaseStudyParams

    def grid(self) -> Sequence[GridPoint]:
        """Every grid point the parameters select, in grid order."""
        p = self.params
        if p.case == "surgical-ward":
            return [case_study.ward_point(p.style)]
        variants = case_study.VARIANTS if p.variant == "all" else (p.variant,)
        shares = case_study.SHARES if p.share is None else (p.share,)
        return [pt for v in variants for s in shares
                for pt in case_study.case_points(v, s, p.style)]
