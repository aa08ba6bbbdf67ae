"""A small file to ask for a suggestion in: `make demo` completes the body of `mean`."""


def mean(values: list[float]) -> float:
    """The arithmetic mean of `values`."""
    
