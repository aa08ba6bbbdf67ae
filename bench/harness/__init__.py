"""What the benchmarks share: the one percentile, the process runner, the fake model endpoint,
and the language-server and editor sessions more than one benchmark drives."""
