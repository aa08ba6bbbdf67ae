"""Context beyond the file: what the store gathers from document events, and how it ranks it."""
