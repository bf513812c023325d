"""Human-readable renderings of plans, records and comparisons (the terminal, not the JSON)."""
