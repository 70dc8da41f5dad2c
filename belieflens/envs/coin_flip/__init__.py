"""Coin flip (BayesBench): a Beta-Bernoulli learner's exact posterior (:mod:`.env`)."""
