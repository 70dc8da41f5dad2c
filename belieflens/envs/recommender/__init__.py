"""Recommender environment (BayesBench Task 2): user types, rating tables, exact posteriors."""

from belieflens.envs.recommender.bayes import conditional, predictive, type_posterior
from belieflens.envs.recommender.bayesbench import load_world
from belieflens.envs.recommender.env import Recommender, RecommenderParams
from belieflens.envs.recommender.synthetic import default_world
from belieflens.envs.recommender.world import STARS, World

__all__ = [
    "STARS",
    "Recommender",
    "RecommenderParams",
    "World",
    "conditional",
    "default_world",
    "load_world",
    "predictive",
    "type_posterior",
]
