"""The application core: one per process, behind every front door (LSP, gateway, CLI)."""
