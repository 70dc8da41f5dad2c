"""Token-level processes with exact oracles (coin flips as tokens, Mess3, RRXOR, Z1R, user
HMMs): see :mod:`belieflens.envs.tokens.process`."""
