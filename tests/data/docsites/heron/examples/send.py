import heron


def send_once(url: str) -> object:
    return heron.get(url)


def send_twice(url: str) -> object:
    """Send the same request twice and return the second response."""
    heron.get(url)
    return heron.get(url)
