"""Per-client limits of the gateway: rates, concurrency and budgets, shared through Redis."""
