"""20 Questions (From Prompts to Posteriors, §4 and App. F.2): the model's own hypotheses,
questions and likelihoods, against the exact Bayesian update of those likelihoods.

:mod:`.env` plays the games, :mod:`.prompts` holds the prompts (the paper's system prompts,
quoted) and parses generated text, :mod:`.bayes` the posteriors, filters and EIG shared with the
analysis (:mod:`.report`), :mod:`.animals` the secret animals (the paper's 40 ship in
``belieflens/data/twenty_questions/animals.json``).
"""
