"""Labels every output of a simulated run carries (design invariant 7)."""

SIMULATED_BANNER = ("SIMULATED MODEL: these results come from the built-in simulated model, "
                    "not from a real LLM; they exercise the toolkit, they say nothing about any model.")
