"""Chat requests from clients that bring their own conversation (the gateway's chat route)."""
