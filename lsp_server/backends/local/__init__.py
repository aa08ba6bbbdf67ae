"""The llama.cpp model inside the server process (llama-cpp-python), for offline and sensitive
work: `backend.LocalBackend` serves it; the other modules are what it is made of."""
