"""The ``twenty-questions`` analysis section: KL(oracle ‖ model) per step."""
